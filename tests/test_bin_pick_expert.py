"""Bin-picking expert: cross-section widths, the CPU replica, the evaluation CLI
and re-rendering from recorded poses."""

from __future__ import annotations

import json
import math

import mujoco
import numpy as np
import pytest
import torch
from script_runner import run_script

from experts.bin_pick.grasps import (
  body_triangles_w,
  section_segments,
  strip_extent,
  tool_rotation,
)

RNG_SEED = (
  np.random.SeedSequence().entropy
)  # Fresh inputs every run; printed on failure.


def _posed(geom_kwargs: dict) -> tuple[mujoco.MjModel, mujoco.MjData]:
  spec = mujoco.MjSpec()
  spec.worldbody.add_body(name="o").add_geom(name="g", **geom_kwargs)
  model = spec.compile()
  data = mujoco.MjData(model)
  mujoco.mj_forward(model, data)
  return model, data


def _box_strip_reference(half, yaw, direction, v_centre, half_width):
  """Extent along the closing axis of a yawed box's horizontal section within
  the strip, from dense sampling of the rectangle (independent of triangles)."""
  xs = np.linspace(-half[0], half[0], 801)
  ys = np.linspace(-half[1], half[1], 801)
  gx, gy = np.meshgrid(xs, ys)
  c, s = math.cos(yaw), math.sin(yaw)
  wx, wy = c * gx - s * gy, s * gx + c * gy  # World coordinates.
  u = math.cos(direction) * wx + math.sin(direction) * wy
  v = math.sin(direction) * wx - math.cos(direction) * wy  # Tool y = z x x.
  inside = np.abs(v - v_centre) <= half_width
  if not inside.any():
    return None
  return float(u[inside].min()), float(u[inside].max())


@pytest.mark.parametrize("trial", range(6))
def test_box_section_widths_match_sampled_rectangle(trial):
  rng = np.random.default_rng([RNG_SEED, trial])
  half = rng.uniform(0.01, 0.05, 3)
  yaw, direction = rng.uniform(-math.pi, math.pi, 2)
  quat = np.zeros(4)
  mujoco.mju_axisAngle2Quat(quat, [0, 0, 1], yaw)
  model, data = _posed(
    dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=half.tolist(), quat=quat.tolist())
  )
  tri = body_triangles_w(model, data, [0]) @ tool_rotation(direction, 0.0)
  level = rng.uniform(-0.9, 0.9) * half[2]  # Tool s axis points down.
  a, b = section_segments(tri, level)
  for v_centre in rng.uniform(-0.03, 0.03, 3):
    got = strip_extent(a, b, v_centre, 0.0125)
    ref = _box_strip_reference(half, yaw, direction, v_centre, 0.0125)
    if ref is None:
      assert got is None, f"seed {RNG_SEED}"
      continue
    assert got is not None, f"seed {RNG_SEED}"
    # The sampling grid spacing bounds the reference's error.
    grid = 2 * max(half[:2]) / 800
    assert got == pytest.approx(ref, abs=2 * grid + 1e-9), f"seed {RNG_SEED}"


@pytest.mark.parametrize("trial", range(6))
def test_cylinder_section_widths_match_analytic_chords(trial):
  rng = np.random.default_rng([RNG_SEED, 100 + trial])
  radius, half_len = rng.uniform(0.01, 0.04), rng.uniform(0.02, 0.06)
  model, data = _posed(
    dict(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[radius, half_len, 0.0])
  )
  triangles = body_triangles_w(model, data, [0])
  for _ in range(4):
    direction = rng.uniform(0, math.pi)
    level = rng.uniform(-0.9, 0.9) * half_len
    v_centre, half_width = rng.uniform(-1.2, 1.2) * radius, 0.0125
    a, b = section_segments(triangles @ tool_rotation(direction, 0.0), level)
    got = strip_extent(a, b, v_centre, half_width)
    nearest = max(0.0, abs(v_centre) - half_width)
    if nearest >= radius:
      assert got is None or got[1] - got[0] < 2e-3 * radius, f"seed {RNG_SEED}"
      continue
    chord = 2 * math.sqrt(radius**2 - nearest**2)
    assert got is not None, f"seed {RNG_SEED}"
    # 64-gon tessellation: widths within 0.2% (plus a sliver at grazing strips).
    assert got[1] - got[0] == pytest.approx(chord, rel=2e-3, abs=2e-4), (
      f"seed {RNG_SEED}"
    )
    assert 0.5 * (got[0] + got[1]) == pytest.approx(0.0, abs=2e-4)


@pytest.fixture(scope="module")
def one_object_env():
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.common.c_engine import make_env

  env = make_env(
    bin_pick_env_cfg(num_envs=1, objects=1, bin_width=0.14, bin_height=0.06),
    device="cpu",
    engine="mujoco",
  )
  env.reset()
  yield env
  env.close()


def _live_state(env) -> list[np.ndarray]:
  data = env.sim.data
  worlds = [
    np.concatenate([w.qpos, w.qvel, [w.time]]).copy()
    for w in env.sim._worlds  # The C engine's own MjData (float64).
  ]
  return [data.qpos.clone().numpy(), data.qvel.clone().numpy(), *worlds]


def test_replica_accepts_a_clear_grasp_rejects_a_wall_one_and_leaves_live_state(
  one_object_env,
):
  from experts.bin_pick.replica import GraspReplica
  from mjlab_tasks.bin_pick.env_cfg import BIN_CENTRE, BIN_FLOOR, pourer

  env = one_object_env
  assert int(pourer(env).poured[0]) == 1
  before = _live_state(env)
  geoms = [env.scene["obj_00"].indexing.geom_ids.cpu().tolist()]
  replica = GraspReplica(env.sim.mj_model, geoms)
  data = env.sim.data
  replica.pose(
    data.qpos[0].double().numpy(),
    data.mocap_pos[0].double().numpy(),
    data.mocap_quat[0].double().numpy(),
  )
  arm_q = replica.data.qpos[replica.kin.qpos_adr].copy()
  transit = 0.2
  result = replica.plan([0], transit, arm_q, 0.0)
  assert result.plan is not None, result.rejections
  plan = result.plan
  reason, q = replica.check(
    0, plan.position_w, plan.rotation_w, plan.width, transit, arm_q
  )
  assert reason is None and q is not None
  # The same opening, closing along x, with the +x pad's centre 5 mm into the
  # +x wall (inner face at x = centre + 70 mm), below the 60 mm rim.
  origin = env.scene.env_origins[0].numpy()
  pad_offset = replica.open_width(plan.width) / 2 + 0.003
  on_wall = np.array(
    [
      BIN_CENTRE[0] + 0.07 + 0.005 - pad_offset + origin[0],
      BIN_CENTRE[1] + origin[1],
      BIN_FLOOR + 0.035,
    ]
  )
  reason, _ = replica.check(
    0, on_wall, tool_rotation(0.0, 0.0), plan.width, transit, arm_q
  )
  assert reason == "wall_clearance"
  after = _live_state(env)
  for x, y in zip(before, after, strict=True):
    np.testing.assert_array_equal(x, y)


def _run(*args: str):
  return run_script("evaluate_binpick.py", *args)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
  out_dir = tmp_path_factory.mktemp("binpick") / "run"
  result = _run(
    "--num-envs", "2", "--objects", "4", "--max-steps", "400",
    "--bin-width", ".14", "--bin-height", ".15",
    "--device", "cpu", "--output", str(out_dir), "--videos", "1",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  return out_dir, result


def test_short_cpu_run_delivers_and_writes_every_report(short_run):
  out_dir, _ = short_run
  for name in (
    "report.json",
    "transitions.json",
    "planning_rejections.json",
    "physics_metrics.json",
    "final_states.json",
    "source_snapshot.json",
    "video_poses.npz",
    "video_poses.mjb",
    "env_000_scene.mp4",
    "env_000_wrist_d415.mp4",
  ):
    assert (out_dir / name).stat().st_size > 0, name
  report = json.loads((out_dir / "report.json").read_text())
  summary = report["summary"]
  assert summary["delivered"] >= 1
  assert summary["poured"] == sum(e["poured"] for e in report["environments"])
  final = json.loads((out_dir / "final_states.json").read_text())
  # Delivered objects, as reported, satisfy the rule in the final states.
  delivered = sum(o["delivered"] and o["poured"] for env in final.values() for o in env)
  assert delivered == summary["delivered"]
  for env_rows in final.values():
    for row in env_rows:
      if row["delivered"]:
        assert row["outside_bin"] and row["near_drop"] and row["supported"]
        assert row["bounds_lo"][2] < 0.011


def test_second_run_into_the_same_folder_is_refused(short_run):
  out_dir, _ = short_run
  again = _run("--num-envs", "1", "--objects", "1", "--output", str(out_dir))
  assert again.returncode != 0
  assert "already exists" in again.stderr + again.stdout


def _gl_available() -> bool:
  try:
    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    mujoco.Renderer(model, 8, 8).close()
    return True
  except Exception:  # noqa: BLE001  (no offscreen GL of any kind)
    return False


def test_video_poses_rerender_reproduces_frames_without_physics(
  short_run, tmp_path, monkeypatch
):
  if not _gl_available():
    pytest.skip("no offscreen OpenGL (install libosmesa6 or EGL)")
  from mjlab_tasks.common.video import posed_frames, render_pose_file

  out_dir, _ = short_run
  poses = np.load(out_dir / "video_poses.npz")
  model = mujoco.MjModel.from_binary_path(str(out_dir / "video_poses.mjb"))
  qpos = poses["qpos"][0]
  report = json.loads((out_dir / "report.json").read_text())
  steps = round(report["summary"]["simulated_time_s"] / 0.05)
  # 4 fps at 20 Hz policy steps: every 5th step, plus the final state.
  assert qpos.shape[0] == math.ceil(steps / 5) + 1
  # The last recorded frame is the final state: object poses match the report.
  final = json.loads((out_dir / "final_states.json").read_text())["0"]
  origin = poses["origins"][0]
  last = None
  for data in posed_frames(
    model, qpos[-1:], poses["mocap_pos"][0][-1:], poses["mocap_quat"][0][-1:]
  ):
    last = data
  for row in final:
    body = model.body(f"{row['object']}/obj").id
    np.testing.assert_allclose(
      last.xpos[body] - origin, row["position"], atol=2e-4, err_msg=row["object"]
    )

  # Re-rendering steps no physics.
  def forbidden(*_):
    raise AssertionError("physics stepped while rendering")

  for name in ("mj_step", "mj_step1", "mj_step2", "mj_forward", "mj_rollout"):
    monkeypatch.setattr(mujoco, name, forbidden, raising=False)
  paths = render_pose_file(out_dir / "video_poses.npz", tmp_path)
  assert sorted(p.name for p in paths) == [
    "rerender_000_scene.mp4",
    "rerender_000_wrist_d415.mp4",
  ]
  for p in paths:
    assert p.stat().st_size > 2_000


def test_delivery_rule_needs_more_than_reaching_the_drop_point():
  from evaluators.bin_pick import BinLayout, BinPickObjectState, evaluate_deliveries

  layout = BinLayout((0.426, 0.574), (-0.21, 0.21), (0.30, 0.40))
  # One object resting at the drop point; the same object held above it, then
  # one still touched by the robot, one moving, one inside the bin.
  pos = torch.tensor(
    [[0.30, 0.40, 0.02], [0.30, 0.40, 0.12], [0.30, 0.40, 0.02], [0.3, 0.4, 0.02],
     [0.50, 0.00, 0.03]]
  )  # fmt: skip
  lo, hi = pos - 0.02, pos + 0.02
  lin = torch.zeros(5, 3)
  lin[3, 0] = 0.05
  contact = torch.tensor([False, False, True, False, False])
  state = BinPickObjectState(
    lo=lo[None],
    hi=hi[None],
    pos=pos[None],
    lin_vel=lin[None],
    ang_vel=torch.zeros(1, 5, 3),
    robot_contact=contact[None],
    poured=torch.ones(1, 5, dtype=torch.bool),
  )
  verdict = evaluate_deliveries(state, layout)
  assert verdict["delivered"][0].tolist() == [True, False, False, False, False]
  assert not verdict["supported"][0, 1]
  assert not verdict["released"][0, 2]
  assert not verdict["slow"][0, 3]
  assert not verdict["outside_bin"][0, 4]
  assert int(verdict["delivered_count"][0]) == 1
  assert not bool(verdict["bin_cleared"][0])
