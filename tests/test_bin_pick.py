"""Bin-picking scene: bin geometry, the pourer (C engine), cameras (both engines)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from mjlab_tasks.bin_pick.env_cfg import (
  BIN_CENTRE,
  BIN_FLOOR,
  PARKING_X,
  BinPourer,
  bin_pick_env_cfg,
  pourer,
)
from mjlab_tasks.engine import make_env, worlds


def _env(engine="mujoco", **kwargs):
  return make_env(bin_pick_env_cfg(**kwargs), device="cpu", engine=engine)


def _inner_size(model: mujoco.MjModel) -> tuple[float, float, float]:
  """Inner x width, y length and wall height measured from the compiled walls."""

  def g(name):
    return model.geom(f"bin/{name}")

  px, nx = g("bin_wall_px"), g("bin_wall_nx")
  py, ny = g("bin_wall_py"), g("bin_wall_ny")
  width = (px.pos[0] - px.size[0]) - (nx.pos[0] + nx.size[0])
  length = (py.pos[1] - py.size[1]) - (ny.pos[1] + ny.size[1])
  height = 2 * px.size[2]
  assert px.pos[2] - px.size[2] == pytest.approx(
    BIN_FLOOR
  )  # Walls stand on the floor top.
  return width, length, height


@pytest.mark.parametrize(
  "kwargs, expected",
  [
    ({}, (0.400, 0.128, 0.150)),
    ({"bin_width": 0.14, "bin_height": 0.06}, (0.400, 0.14, 0.06)),
  ],
)
def test_bin_inner_size_matches_flags(kwargs, expected):
  env = _env(num_envs=1, objects=1, **kwargs)
  try:
    width, length, height = _inner_size(env.sim.mj_model)
    assert (length, width, height) == pytest.approx(expected, abs=1e-9)
  finally:
    env.close()


def test_bad_bin_size_is_refused():
  with pytest.raises(ValueError, match="outside the supported"):
    bin_pick_env_cfg(bin_width=0.01)


def test_pour_is_deterministic_on_the_c_engine():
  runs = []
  for _ in range(2):
    env = _env(num_envs=3, objects=8, bin_width=0.14, bin_height=0.1, pour_seed=4)
    p = pourer(env)
    runs.append((p.poured.clone(), p.snapshot.clone()))
    env.close()
  assert torch.equal(runs[0][0], runs[1][0])
  assert torch.equal(runs[0][1], runs[1][1])


class PourRecorder:
  """Each world's posed geoms after every settle of the pour (C engine MjData,
  read only): what the pourer saw, for an independent replay of its rules."""

  def __init__(self):
    self.drops: list[list[tuple[np.ndarray, np.ndarray]]] = []

  def install(self, monkeypatch) -> None:
    settle = BinPourer._settle

    def recording_settle(pour, env, seconds):
      settle(pour, env, seconds)
      if seconds == pour.cfg.drop_settle_s:
        self.drops.append(
          [(w.geom_xpos.copy(), w.geom_xmat.copy()) for w in worlds(env)]
        )

    monkeypatch.setattr(BinPourer, "_settle", recording_settle)


def _poured(height: float, recorder: PourRecorder | None = None):
  with pytest.MonkeyPatch.context() as mp:
    if recorder is not None:
      recorder.install(mp)
    return _env(num_envs=4, objects=12, bin_width=0.14, bin_height=height)


@pytest.fixture(scope="module")
def poured_envs():
  """Deep (150 mm) and shallow (60 mm) bins, 12 requested objects, 4 envs each,
  with the pour recorded after every drop."""
  runs = {}
  for h in (0.15, 0.06):
    recorder = PourRecorder()
    runs[h] = (_poured(h, recorder), recorder)
  yield {h: env for h, (env, _) in runs.items()}, {h: r for h, (_, r) in runs.items()}
  for env, _ in runs.values():
    env.close()


class BinFrame:
  """One world's bin, measured from the compiled wall geoms (not BinGeometry)."""

  def __init__(self, model: mujoco.MjModel, xpos: np.ndarray, xmat: np.ndarray):
    def geom(name):
      g = model.geom(f"bin/{name}").id
      assert np.allclose(xmat[g], np.eye(3).ravel()), "bin walls are axis-aligned"
      return xpos[g], model.geom_size[g]

    (px, spx), (nx, snx) = geom("bin_wall_px"), geom("bin_wall_nx")
    (py, spy), (ny, sny) = geom("bin_wall_py"), geom("bin_wall_ny")
    floor, sfl = geom("bin_floor")
    self.lo = np.array([nx[0] + snx[0], ny[1] + sny[1], floor[2] + sfl[2]])
    self.hi = np.array([px[0] - spx[0], py[1] - spy[1], px[2] + spx[2]])
    self.wall_height = self.hi[2] - self.lo[2]
    self.centre = 0.5 * (self.lo + self.hi)


def posed_points(model: mujoco.MjModel, xpos, xmat, body: int) -> np.ndarray:
  """Points [P, 3] whose axis-aligned hull is that of the body's collision
  geoms, from MuJoCo's geom poses: box corners, mesh vertices, capsule
  end centres (sphere centres) pushed by the radius along each world axis,
  and cylinder end centres pushed by each end disc's extent along it."""
  out = []
  for g in np.nonzero(model.geom_bodyid == body)[0]:
    rot, centre = xmat[g].reshape(3, 3), xpos[g]
    size, kind = model.geom_size[g], model.geom_type[g]
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
      local = np.array(np.meshgrid(*[[-s, s] for s in size])).reshape(3, -1).T
      out.append(local @ rot.T + centre)
    elif kind == mujoco.mjtGeom.mjGEOM_MESH:
      adr, num = (
        model.mesh_vertadr[model.geom_dataid[g]],
        model.mesh_vertnum[model.geom_dataid[g]],
      )
      out.append(model.mesh_vert[adr : adr + num] @ rot.T + centre)
    elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
      ends = np.array([[0, 0, -size[1]], [0, 0, size[1]]]) @ rot.T + centre
      push = size[0] * np.concatenate([np.eye(3), -np.eye(3)])
      out.append((ends[:, None] + push[None]).reshape(-1, 3))
    elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
      # Each end disc's extent along world axis i is r * sqrt(1 - a_i^2)
      # for the axis direction a.
      axis = rot[:, 2]
      ends = np.array([-axis * size[1], axis * size[1]]) + centre
      reach = size[0] * np.sqrt(np.clip(1.0 - axis**2, 0.0, None))
      push = np.concatenate([np.diag(reach), -np.diag(reach)])
      out.append((ends[:, None] + push[None]).reshape(-1, 3))
    else:
      raise AssertionError(f"object geom type {kind} not covered by this test")
  return np.concatenate(out)


SOFTNESS = 0.002  # Contact penetration allowed into the walls and floor [m].


def inside_walls(points: np.ndarray, frame: BinFrame) -> bool:
  """Wholly within the inner walls and not below the floor (any height)."""
  return bool(
    np.all(points[:, :2] >= frame.lo[:2] - SOFTNESS)
    and np.all(points[:, :2] <= frame.hi[:2] + SOFTNESS)
    and np.all(points[:, 2] >= frame.lo[2] - SOFTNESS)
  )


def _object_bodies(model, names) -> list[int]:
  return [model.body(f"{name}/obj").id for name in names]


@pytest.mark.parametrize("height", [0.15, 0.06])
def test_poured_objects_settle_inside_the_bin(poured_envs, height):
  env = poured_envs[0][height]
  p = pourer(env)
  model = env.sim.mj_model
  bodies = _object_bodies(model, p.cfg.names)
  assert (p.poured >= 1).all()
  for i, world in enumerate(worlds(env)):
    frame = BinFrame(model, world.geom_xpos, world.geom_xmat)
    assert frame.wall_height == pytest.approx(height, abs=1e-9)
    for k, body in enumerate(bodies):
      points = posed_points(model, world.geom_xpos, world.geom_xmat, body)
      if p.in_bin[i, k]:
        # Poured: every posed vertex within the inner walls, above the floor.
        assert inside_walls(points, frame), (i, p.cfg.names[k], points.min(0))
      else:
        # Not poured: wholly outside the bin's footprint (parked).
        outer = (points[:, :2] < frame.lo[:2] - 0.01) | (
          points[:, :2] > frame.hi[:2] + 0.01
        )
        assert outer.any(-1).all(), (i, p.cfg.names[k])
    assert int(p.poured[i]) == int(p.in_bin[i].sum())
  # Settled: slow, and no contact deeper than 5 mm anywhere in the pile.
  for k, name in enumerate(p.cfg.names):
    speed = env.scene[name].data.root_link_lin_vel_w.norm(dim=-1)
    assert torch.all(speed[p.in_bin[:, k]] < 0.05), name
  for world in worlds(env):
    depths = [-c.dist for c in world.contact[: world.ncon]]
    assert max(depths, default=0.0) < 0.005


@pytest.mark.parametrize("height", [0.15, 0.06])
def test_pour_stops_at_the_height_set_by_the_wall(poured_envs, height):
  """Replays the pour from the recorded drops with the documented rule: an
  environment keeps pouring while the highest point of the objects inside its
  walls is below 80 % of the wall height (measured from the compiled walls);
  an object that lands outside the walls is parked and not counted."""
  env, recorder = poured_envs[0][height], poured_envs[1][height]
  p = pourer(env)
  model = env.sim.mj_model
  bodies = _object_bodies(model, p.cfg.names)
  assert len(recorder.drops) >= 2
  stopped_by_height = 0
  for i in range(env.num_envs):
    pouring, dropped = True, []
    for k, drop in enumerate(recorder.drops):
      xpos, xmat = drop[i]
      frame = BinFrame(model, xpos, xmat)
      near_bin = [
        np.linalg.norm(xpos[model.body_geomadr[b], :2] - frame.centre[:2]) < 0.6
        for b in bodies
      ]  # Parked objects wait 1.7 m from the bin.
      # Dropped into this environment exactly while it still pours.
      assert near_bin[k] == pouring, (i, k, pouring)
      if not pouring:
        continue
      dropped.append(k)
      inside = [
        inside_walls(posed_points(model, xpos, xmat, bodies[j]), frame)
        for j in range(k + 1)
      ]
      top = max(
        (
          posed_points(model, xpos, xmat, bodies[j])[:, 2].max()
          for j in range(k + 1)
          if inside[j]
        ),
        default=frame.lo[2],
      )
      pouring = top - frame.lo[2] < 0.8 * frame.wall_height
    stopped_by_height += not pouring
    assert not p.in_bin[i, max(dropped) + 1 :].any()
  print(
    f"{height} m walls: {stopped_by_height} of {env.num_envs} pours stopped by height"
  )
  # The cases this test is about happened: piles reached the stopping height.
  assert stopped_by_height >= 1


def test_spilled_objects_are_parked_again(poured_envs):
  """Objects that the recorded drops show outside the walls end parked at
  their slot's parking spot, not counted as poured."""
  spilled = 0
  for h in (0.15, 0.06):
    env, recorder = poured_envs[0][h], poured_envs[1][h]
    p = pourer(env)
    model = env.sim.mj_model
    bodies = _object_bodies(model, p.cfg.names)
    for i, world in enumerate(worlds(env)):
      frame = BinFrame(model, world.geom_xpos, world.geom_xmat)
      origin = frame.centre[:2] - np.array(BIN_CENTRE)
      for k, drop in enumerate(recorder.drops):
        xpos, xmat = drop[i]
        points = posed_points(model, xpos, xmat, bodies[k])
        near = np.linalg.norm(points.mean(0)[:2] - frame.centre[:2]) < 0.6
        if not near or inside_walls(points, frame):
          continue
        spilled += 1
        assert not p.in_bin[i, k]
        final = world.xpos[bodies[k]]
        parking = origin + np.array([PARKING_X, -0.8 + 0.16 * k])
        np.testing.assert_allclose(final[:2], parking, atol=0.02)
        np.testing.assert_allclose(
          p.snapshot[i, k, :2].numpy(), parking - origin, atol=0.02
        )
  print(f"{spilled} spilled objects re-parked")
  assert spilled >= 1, "no object spilled in these pours: nothing was tested"


def test_shallow_wall_pours_fewer(poured_envs):
  deep, shallow = (pourer(poured_envs[0][h]).poured.float() for h in (0.15, 0.06))
  print(
    f"poured (12 requested): 150 mm wall {deep.tolist()}, 60 mm wall {shallow.tolist()}"
  )
  assert shallow.mean() < deep.mean()
  assert torch.all(pourer(poured_envs[0][0.06]).pile_height < 0.06 + 0.03)


def test_reset_restores_each_envs_own_pour(poured_envs):
  env = poured_envs[0][0.15]
  p = pourer(env)
  name = p.cfg.names[0]
  moved = torch.cat([env.scene[name].data.root_link_pose_w, torch.zeros(4, 6)], dim=-1)
  moved[:, 2] += 0.3
  env.scene[name].write_root_state_to_sim(moved)
  env.reset(env_ids=torch.tensor([2]))
  env.sim.forward()
  pos = env.scene[name].data.root_link_pos_w - env.scene.env_origins
  np.testing.assert_allclose(pos[2].numpy(), p.snapshot[2, 0, :3].numpy(), atol=1e-6)
  assert torch.all(pos[[0, 1, 3], 2] > p.snapshot[[0, 1, 3], 0, 2] + 0.29)


def test_training_resets_draw_from_a_pool_larger_than_the_batch(rng):
  """With ``pour_rounds`` the pourer pours that many times; resets draw pours
  from all of them (seeded), restore the drawn pour exactly and report its
  counts. Its first round is the one-round pour."""
  seed = int(rng.integers(1000))
  kwargs = dict(num_envs=2, objects=4, pour_seed=seed)
  one = _env(**kwargs)
  first_round = pourer(one).pool_snapshot.clone()
  one.close()
  env = _env(**kwargs, pour_rounds=3)
  try:
    p = pourer(env)
    assert p.pool_size == 6
    torch.testing.assert_close(p.pool_snapshot[:2], first_round, rtol=0, atol=0)
    poses = p.pool_snapshot[..., :3].reshape(6, -1)
    assert torch.cdist(poses, poses).add(torch.eye(6)).min() > 0.01  # six pours
    drawn = set()
    for _ in range(6):
      env.reset()
      env.sim.forward()
      drawn.update(p.pour_index.tolist())
      for k, name in enumerate(p.cfg.names):
        pose = env.scene[name].data.root_link_pose_w.clone()
        pose[:, :3] -= env.scene.env_origins
        expected = p.pool_snapshot[p.pour_index, k, :7]
        torch.testing.assert_close(pose, expected, atol=1e-5, rtol=0)
      torch.testing.assert_close(p.in_bin, p.pool_in_bin[p.pour_index])
      assert torch.equal(p.poured, p.pool_in_bin[p.pour_index].sum(-1))
    assert len(drawn) > 2, drawn  # 12 draws from 6 pours
  finally:
    env.close()


def test_no_camera_sensor_without_cameras(poured_envs):
  env = poured_envs[0][0.06]
  assert not any("d415" in name or "camera" in name for name in env.scene.sensors)
  assert env.scene.sensor_context is None  # Nothing to render.


# Warp's pictures against the C engine's are in the fast tier (test_cameras.py).
@pytest.mark.parametrize(
  "engine", [pytest.param("warp", marks=pytest.mark.slow), "mujoco"]
)
def test_camera_images_when_enabled(engine):
  env = _env(engine=engine, num_envs=1, objects=2, cameras=True)
  try:
    env.reset()
    obs = env.step(torch.zeros(1, 7))[0]
    rgb = env.scene.sensors["wrist_d415"].data.rgb
    assert tuple(rgb.shape) == (1, 180, 320, 3)
    assert rgb.dtype == torch.uint8 and rgb.float().std() > 1.0  # Not a blank image.
    depth = env.scene.sensors["wrist_d415"].data.depth
    assert tuple(depth.shape[:3]) == (1, 180, 320)
    assert torch.equal(obs["camera"]["wrist_rgb"], rgb)
    assert tuple(obs["camera"]["scene_rgb"].shape) == (1, 240, 320, 3)
  finally:
    env.close()


def test_scene_camera_frames_the_arm_bin_and_drop_zone():
  """The scene view, as MuJoCo's free camera poses it (mjv_updateScene): the
  camera sensor sits at its eye looking at its target, and the robot's
  bodies at home, the bin's rim corners and the drop disc project inside the
  picture (4:3) and span most of it."""
  from mjlab.utils.lab_api.math import matrix_from_quat

  from mjlab_tasks.bin_pick.env_cfg import DROP_DESTINATION, SCENE_VIEW, BinGeometry

  env = _env(num_envs=1, objects=1)
  try:
    model, data = env.sim.mj_model, worlds(env)[0]
    cam = mujoco.MjvCamera()
    cam.lookat[:] = SCENE_VIEW.lookat
    cam.distance, cam.azimuth = SCENE_VIEW.distance, SCENE_VIEW.azimuth
    cam.elevation = SCENE_VIEW.elevation
    scene = mujoco.MjvScene(model, maxgeom=2000)
    mujoco.mjv_updateScene(
      model, data, mujoco.MjvOption(), None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
    )
    # The two GL cameras are the stereo eyes, ipd apart about the head.
    eye = 0.5 * (np.array(scene.camera[0].pos) + np.array(scene.camera[1].pos))
    forward = np.array(scene.camera[0].forward, dtype=float)
    up = np.array(scene.camera[0].up, dtype=float)
    np.testing.assert_allclose(eye, SCENE_VIEW.eye, atol=1e-5)
    assert model.vis.global_.fovy == SCENE_VIEW.fovy
    # The sensor rides on the robot base (each environment sees its own
    # scene): composed with the base's pose, at the eye, its -z along
    # MuJoCo's forward, its y up.
    cfg = bin_pick_env_cfg(cameras=True)
    sensor = next(s for s in cfg.scene.sensors if s.name == "scene_camera")
    assert sensor.parent_body == "robot/base"
    base = cfg.scene.entities["robot"].init_state
    base_rot = matrix_from_quat(torch.tensor(base.rot, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(base_rot @ sensor.pos + base.pos, eye, atol=1e-5)
    rot = matrix_from_quat(torch.tensor(sensor.quat, dtype=torch.float64)).numpy()
    rot = base_rot @ rot
    np.testing.assert_allclose(-rot[:, 2], forward, atol=1e-5)
    np.testing.assert_allclose(rot[:, 1], up, atol=1e-5)
    assert sensor.fovy == SCENE_VIEW.fovy
    # What must be in the picture.
    geom = BinGeometry()
    (x0, x1), (y0, y1) = geom.inner_bounds()
    rim = [
      (x, y, geom.rim_z) for x in (x0 - 0.01, x1 + 0.01) for y in (y0 - 0.01, y1 + 0.01)
    ]
    disc = [
      (
        DROP_DESTINATION[0] + 0.06 * np.cos(a),
        DROP_DESTINATION[1] + 0.06 * np.sin(a),
        0,
      )
      for a in np.linspace(0, 2 * np.pi, 8)
    ]
    robot = [
      data.xpos[b]
      for b in range(model.nbody)
      if model.body(b).name.startswith("robot/")
    ]
    points = np.array([*rim, *disc, *robot], dtype=float)
    right = np.cross(forward, up)
    rel = points - eye
    depth = rel @ forward
    assert np.all(depth > 0)
    half_h = np.tan(np.radians(SCENE_VIEW.fovy) / 2)
    v = (rel @ up) / depth / half_h  # -1..1 bottom to top
    u = (rel @ right) / depth / (half_h * 4 / 3)  # -1..1 left to right (4:3)
    print(f"scene view: u {u.min():.2f}..{u.max():.2f}, v {v.min():.2f}..{v.max():.2f}")
    assert np.all(np.abs(u) < 0.98) and np.all(np.abs(v) < 0.98), (u, v)
    # Filling it: the span covers most of the width and the height.
    assert np.ptp(u) > 1.2 and np.ptp(v) > 1.4, (np.ptp(u), np.ptp(v))
  finally:
    env.close()


def test_mujoco_warp_steps_the_bin_like_the_c_engine():
  """MuJoCo Warp (CPU) against the C engine from the same state: the C
  engine's pour of 2 objects into the 140 x 60 mm bin written into both,
  then 10 steps of the same arm motion (down and sideways, gripper open).
  The arm and the resting objects agree."""
  kwargs = dict(num_envs=2, objects=2, bin_width=0.14, bin_height=0.06)
  envs = {engine: _env(engine=engine, **kwargs) for engine in ("mujoco", "warp")}
  try:
    for env in envs.values():
      env.reset()
    names = pourer(envs["mujoco"]).cfg.names
    for name in names:
      data = envs["mujoco"].scene[name].data
      state = torch.cat([data.root_link_pose_w, data.root_link_vel_w], dim=-1)
      envs["warp"].scene[name].write_root_state_to_sim(state.clone())
    robot = envs["mujoco"].scene["robot"].data
    envs["warp"].scene["robot"].write_joint_state_to_sim(
      robot.joint_pos.clone(), robot.joint_vel.clone()
    )
    envs["warp"].sim.forward()
    action = torch.zeros(2, 7)
    action[:, 1], action[:, 2], action[:, 6] = 0.3, -0.5, 1.0
    for _ in range(10):
      for env in envs.values():
        env.step(action)
    c, w = (envs[e] for e in ("mujoco", "warp"))
    joints = (c.scene["robot"].data.joint_pos - w.scene["robot"].data.joint_pos).abs()
    assert joints.max() < 1e-3, joints
    for name in names:
      moved = (
        c.scene[name].data.root_link_pos_w - w.scene[name].data.root_link_pos_w
      ).abs()
      assert moved.max() < 2e-3, (name, moved)
  finally:
    for env in envs.values():
      env.close()
