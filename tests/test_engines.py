"""The C MuJoCo engine against MuJoCo Warp: verdict parity, determinism,
partial resets, health flags. Both run mjlab's unchanged environment."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from evaluators.cube_tray import Reason, evaluate_conditions
from mjlab_tasks.common.mdp import physics_health
from mjlab_tasks.cube_tray.env_cfg import TRAY_FLOOR, cube_tray_env_cfg
from mjlab_tasks.cube_tray.mdp import CubeTrayNames, read_cube_tray_state
from mjlab_tasks.engine import make_env, resolve_engine, worlds

HALF = 0.02


def _env(
  engine: str, num_envs: int = 2, randomize: bool = False, seed: int | None = None
):
  cfg = cube_tray_env_cfg(arm_action="joint", randomize=randomize, num_envs=num_envs)
  cfg.seed = seed
  return make_env(cfg, device="cpu", engine=engine)


@pytest.fixture(scope="module")
def engines():
  envs = {name: _env(name) for name in ("mujoco", "warp")}
  yield envs
  for env in envs.values():
    env.close()


def test_engine_defaults_and_errors():
  assert resolve_engine(None, "cpu") == "mujoco"
  assert resolve_engine(None, "cuda:0") == "warp"
  with pytest.raises(ValueError, match="runs on the CPU"):
    resolve_engine("mujoco", "cuda:0")
  with pytest.raises(ValueError, match="Unknown engine"):
    resolve_engine("bullet", "cpu")


def _random_cube_states(rng, tray_xy, pad_pos, pad_axis, count):
  """Fixture-like and random cube states (env frame): (pos, quat, lin_vel, ang_vel).

  Six kinds in turn, each made to fail (or pass) a known condition, so every
  reason of the verdict occurs: placed, outside, floating, moving, touching a
  pad, tumbling above the tray.
  """
  floor = TRAY_FLOOR
  states = []
  for k in range(count):
    kind = k % 6
    yaw = rng.uniform(-180, 180)
    quat = Rotation.from_euler("z", yaw, degrees=True).as_quat(scalar_first=True)
    lin, ang = np.zeros(3), np.zeros(3)
    xy = tray_xy + rng.uniform(-0.04, 0.04, 2)
    rest = floor + HALF - 0.0005  # 0.5 mm into the floor: a contact.
    if kind == 0:  # Resting near the centre: placed.
      pos = np.array([*(tray_xy + rng.uniform(-0.005, 0.005, 2)), rest])
    elif kind == 1:  # Resting with a corner past the wall line: not contained.
      side = rng.choice([-1.0, 1.0], 2)
      pos = np.array([*(tray_xy + side * rng.uniform(0.036, 0.04, 2)), rest])
    elif kind == 2:  # Floating 1 mm above the floor near the centre: no support.
      pos = np.array([*(tray_xy + rng.uniform(-0.005, 0.005, 2)), floor + HALF + 0.001])
    elif kind == 3:  # Resting but moving.
      pos = np.array([*(tray_xy + rng.uniform(-0.005, 0.005, 2)), rest])
      lin = rng.uniform(0.015, 0.03, 3) * rng.choice([-1.0, 1.0], 3)
      ang = rng.uniform(-0.2, 0.2, 3)
    elif kind == 4:  # Touching the left pad, 1 mm into it.
      pos = pad_pos - pad_axis * (0.003 + HALF - 0.001)
      quat = np.array([1.0, 0.0, 0.0, 0.0])
    else:  # Random 3-D orientation somewhere above the tray.
      quat = Rotation.random(random_state=rng.integers(1 << 31)).as_quat(
        scalar_first=True
      )
      pos = np.array([*xy, floor + rng.uniform(0.03, 0.08)])
    states.append((pos, quat, lin, ang))
  return states


def test_identical_states_give_identical_verdicts(engines, rng):
  names = CubeTrayNames()
  cpu, gpu_engine = engines["mujoco"], engines["warp"]
  for env in (cpu, gpu_engine):
    env.reset()
    env.sim.forward()
  origins = cpu.scene.env_origins
  tray_xy = (cpu.scene["tray"].data.root_link_pos_w - origins)[0, :2].numpy()
  robot = cpu.scene["robot"]
  pad = robot.indexing.geom_ids[robot.find_geoms("left_pad")[0][0]]
  pad_pos = (cpu.sim.data.geom_xpos[0, pad] - origins[0]).numpy()
  pad_axis = cpu.sim.data.geom_xmat[0, pad].numpy()[:, 0]
  states = _random_cube_states(rng, tray_xy, pad_pos, pad_axis, 24)
  reasons_seen = set()
  for a, b in zip(states[::2], states[1::2], strict=True):
    root = torch.zeros(2, 13)
    for row, (pos, quat, lin, ang) in enumerate((a, b)):
      root[row, :3] = torch.tensor(pos, dtype=torch.float32) + origins[row]
      root[row, 3:7] = torch.tensor(quat, dtype=torch.float32)
      root[row, 7:10] = torch.tensor(lin, dtype=torch.float32)
      root[row, 10:13] = torch.tensor(ang, dtype=torch.float32)
    verdicts = []
    for env in (cpu, gpu_engine):
      env.scene["cube"].write_root_state_to_sim(root.clone())
      env.sim.forward()
      env.scene.update(dt=env.physics_dt)
      verdicts.append(evaluate_conditions(read_cube_tray_state(env, names)))
    for key in verdicts[0]:
      assert torch.equal(verdicts[0][key], verdicts[1][key]), (key, a, b)
    reasons_seen.update(verdicts[0]["reason"].tolist())
  # The states exercised every reason a valid state can have.
  assert reasons_seen == {
    int(r) for r in Reason if r not in (Reason.INDETERMINATE, Reason.SETTLING)
  }


@pytest.mark.slow  # 200 MuJoCo Warp steps on the CPU; stepping parity is tested below
def test_expert_episode_same_outcome_on_both_engines():
  from experts.cube_tray import ACTION_NAMES, CubeTrayExpert
  from mjlab_tasks.common.verdict import task_verdict

  results = {}
  for engine in ("mujoco", "warp"):
    env = _env(engine)
    env.reset()
    expert = CubeTrayExpert(env)
    expert.reset()
    success_step = torch.full((env.num_envs,), -1)
    for step in range(1, 200):
      _, _, terminated, _, _ = env.step(expert.act())
      newly = task_verdict(env)["success"] & (success_step < 0)
      assert torch.equal(newly, terminated & (success_step < 0))  # Success terminates.
      success_step[newly] = step
      if (success_step > 0).all():
        break
    results[engine] = (success_step.clone(), int(expert.index.max()) + 1)
    expert.close()
    env.close()
  print(f"expert success step per engine: {results}")
  for steps, actions in results.values():
    assert (steps > 0).all() and actions == len(ACTION_NAMES)
    # Seed: about 6.4 s for the historical controller; this one takes 5.6 to 5.75 s.
    assert ((steps * 0.05 > 4.0) & (steps * 0.05 < 8.0)).all()
  # Same outcome; success times within 0.25 s (5 control steps) of each other.
  diff = (results["mujoco"][0] - results["warp"][0]).abs()
  assert (diff <= 5).all()


def _run_random(env, steps: int, seed: int) -> None:
  gen = torch.Generator().manual_seed(seed)
  for _ in range(steps):
    action = env.action_manager.action.clone()
    home = env.scene["robot"].data.default_joint_pos[:, :6]
    action[:, :6] = home + 0.3 * (torch.rand(env.num_envs, 6, generator=gen) - 0.5)
    action[:, 6] = torch.rand(env.num_envs, generator=gen) * 2 - 1
    env.step(action)


def test_c_engine_is_deterministic():
  finals = []
  for _ in range(2):
    env = _env("mujoco", num_envs=3, randomize=True, seed=7)
    env.reset()
    _run_random(env, 20, seed=3)
    finals.append((env.sim.data.qpos.clone(), env.sim.data.qvel.clone()))
    # The float64 states of every world, not only the float32 views.
    finals[-1] += (np.stack([w.qpos.copy() for w in worlds(env)]),)
    env.close()
  assert torch.equal(finals[0][0], finals[1][0]) and torch.equal(
    finals[0][1], finals[1][1]
  )
  assert np.array_equal(finals[0][2], finals[1][2])


def test_partial_reset_leaves_other_envs_untouched():
  runs = []
  for reset_some in (False, True):
    env = _env("mujoco", num_envs=4, randomize=True, seed=11)
    env.reset()
    _run_random(env, 10, seed=5)
    before = np.stack([w.qpos.copy() for w in worlds(env)])
    if reset_some:
      env.reset(env_ids=torch.tensor([1, 3]))
      after = np.stack([w.qpos.copy() for w in worlds(env)])
      np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])
      assert not np.array_equal(after[[1, 3]], before[[1, 3]])
    _run_random(env, 10, seed=6)
    runs.append(np.stack([w.qpos.copy() for w in worlds(env)]))
    env.close()
  # Untouched worlds evolve exactly as if no other world had been reset.
  np.testing.assert_array_equal(runs[0][[0, 2]], runs[1][[0, 2]])


@pytest.mark.parametrize("engine", ["mujoco", "warp"])
def test_nonfinite_state_is_flagged_per_env(engines, engine):
  env = engines[engine]
  env.reset()
  qvel = env.sim.data.qvel[:].clone()
  qvel[1, 0] = float("nan")
  env.sim.data.qvel[:] = qvel
  env.sim.step()
  health = physics_health(env)
  assert health["nonfinite"].tolist() == [False, True]
  assert health["contact_overflow"].tolist() == [False, False]
  env.reset()


def test_c_engine_maps_buffer_warnings_to_overflow_bits(engines):
  import mujoco

  env = engines["mujoco"]
  env.reset()
  world = worlds(env)[1]
  world.warning[int(mujoco.mjtWarning.mjWARN_CONTACTFULL)].number += 1
  env.sim._pull([1])  # Reads the world's counters as a step would.
  assert env.sim.data.overflow.tolist() == [0, 1 << 3]
  assert physics_health(env)["contact_overflow"].tolist() == [False, True]
  # Only warnings raised by a step count: a healthy next step reports none.
  env.sim.step()
  assert env.sim.data.overflow.tolist() == [0, 0]
  assert not math.isnan(float(env.sim.data.qpos.sum()))


def test_c_engine_per_world_model_fields(rng):
  """Domain randomization writes per-world model values: with more worlds than
  threads (several worlds per thread), each world steps with its own values,
  bitwise as plain C MuJoCo steps that world alone with them."""
  import copy

  import mujoco

  env = make_env(
    cube_tray_env_cfg(arm_action="joint", randomize=False, num_envs=5),
    num_threads=2,
  )
  try:
    assert [len(c) for c in env.sim._chunks] == [3, 2]
    env.reset()
    env.sim.expand_model_fields(("dof_damping",))
    cube = env.scene["cube"]
    dofs = cube.indexing.free_joint_v_adr
    values = rng.uniform(0.0, 60.0, 5)  # Thick "air" of a different kind each.
    env.sim.model.dof_damping[:, dofs] = torch.tensor(values, dtype=torch.float32)[
      :, None
    ]
    state = torch.cat([cube.data.root_link_pose_w, torch.zeros(5, 6)], dim=-1)
    state[:, 2] += 0.3
    cube.write_root_state_to_sim(state)
    env.sim.forward()
    alone = []
    for i, world in enumerate(worlds(env)):
      model = copy.copy(env.sim.mj_model)
      model.dof_damping[dofs.numpy()] = np.float32(values[i])
      alone.append((model, copy.copy(world)))
    for _ in range(100):
      env.sim.step()
    for i, (model, data) in enumerate(alone):
      for _ in range(100):
        mujoco.mj_step(model, data)
      np.testing.assert_array_equal(worlds(env)[i].qpos, data.qpos, err_msg=str(i))
    fall = 0.3 + 0.02 - (cube.data.root_link_pos_w - env.scene.env_origins)[:, 2]
    order = np.argsort(values)
    assert (np.diff(fall.numpy()[order]) < 0).all()  # More damping, less fall.
  finally:
    env.close()


def test_engines_agree_while_stepping(engines, rng):
  """C MuJoCo and MuJoCo Warp step the same scene from the same state with
  the same actions: a cube dropped 20 mm into the tray while the arm holds
  still. Joint positions and velocities, the cube, the contact sensors and
  the support force agree at every policy step (measured differences: 2e-6
  rad, 5e-5 rad/s at the impact, 2e-7 m, 5e-6 N; the bounds leave 50x), the
  resting support equals the cube's weight (hand computation), and both
  engines call success on the same policy step."""
  from mjlab_tasks.common.verdict import task_verdict
  from mjlab_tasks.cube_tray.env_cfg import CUBE_MASS

  names = CubeTrayNames()
  yaw = rng.uniform(-180, 180)
  quat = Rotation.from_euler("z", yaw, degrees=True).as_quat(scalar_first=True)
  trace = {}
  for engine, env in engines.items():
    env.reset()
    env.sim.forward()
    origins = env.scene.env_origins
    tray = env.scene["tray"].data.root_link_pos_w
    root = torch.zeros(2, 13)
    root[:, :2] = tray[:, :2]
    root[:, 2] = tray[:, 2] + TRAY_FLOOR + HALF + 0.02
    root[:, 3:7] = torch.tensor(quat, dtype=torch.float32)
    env.scene["cube"].write_root_state_to_sim(root)
    env.sim.forward()
    hold = env.action_manager.action.clone()
    hold[:, :6] = env.scene["robot"].data.default_joint_pos[:, :6]
    hold[:, 6] = 1.0
    rows = []
    for _ in range(20):
      _, _, terminated, _, _ = env.step(hold)
      state = read_cube_tray_state(env, names)
      rows.append(
        dict(
          qpos=env.sim.data.qpos.clone(),
          qvel=env.sim.data.qvel.clone(),
          cube=(state.cube_pos_w - origins).clone(),
          force=state.floor_normal_force.clone(),
          found=env.scene.sensors[names.floor_sensor].data.found.clone(),
          robot=state.robot_contact.clone(),
          success=task_verdict(env)["success"].clone(),
        )
      )
      if terminated.any():  # Success resets the episode: compare up to it.
        break
    trace[engine] = rows
  c, w = trace["mujoco"], trace["warp"]
  assert len(c) == len(w) and 10 <= len(c) < 20  # Same success step, after 0.5 s.
  bounds = dict(qpos=1e-4, qvel=2e-3, cube=1e-4, force=1e-3)
  for k, (a, b) in enumerate(zip(c, w, strict=True)):
    for key, bound in bounds.items():
      assert float((a[key] - b[key]).abs().max()) <= bound, (k, key)
    for key in ("found", "robot", "success"):
      assert torch.equal(a[key], b[key]), (k, key)
  weight = CUBE_MASS * 9.81
  for rows in (c, w):
    assert rows[-1]["success"].all()
    for row in rows[6:-1]:  # Landed and at rest (the last row is after the reset).
      assert torch.allclose(row["force"], torch.full((2,), weight), rtol=0.01)
