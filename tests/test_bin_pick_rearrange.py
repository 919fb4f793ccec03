"""Bin-pick rearrangement pushes (``experts/bin_pick/rearrange.py``): objects
placed by hand in the replica of a one-environment scene (C engine, CPU),
plans checked against the bin's nominal dimensions and box corners computed
here."""

from __future__ import annotations

import itertools
import math
import time

import mujoco
import numpy as np
import pytest
import torch

from assets.ur5_rg2.model import RG2_PAD_HALF
from experts.bin_pick.rearrange import (
  PUSH_REJECTIONS,
  ROLL_OFFSETS,
  PushCfg,
  object_situation,
  plan_push,
  rolls,
)
from experts.bin_pick.replica import GraspReplica
from mjlab_tasks.bin_pick.env_cfg import BIN_CENTRE, BIN_FLOOR, bin_pick_env_cfg, pourer
from mjlab_tasks.engine import make_env, worlds

CFG = PushCfg()
UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])
# Long axis (local z) along world x / lying along y.
ALONG_X = np.array([math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0])
ALONG_Y = np.array([math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0])


def _live_state(env) -> list[np.ndarray]:
  data = env.sim.data
  own = [np.concatenate([w.qpos, w.qvel, [w.time]]).copy() for w in worlds(env)]
  return [data.qpos.clone().numpy(), data.qvel.clone().numpy(), *own]


class Scene:
  def __init__(self, env):
    self.env = env
    pour = pourer(env)
    names = pour.cfg.names
    geometry = pour.cfg.geometry
    origin = env.scene.env_origins[0].numpy().astype(float)
    # The bin's inner bounds from its nominal dimensions (hand computation).
    centre = np.array(BIN_CENTRE) + origin[:2]
    half = np.array([geometry.width, geometry.length]) / 2
    self.inner_lo, self.inner_hi = centre - half, centre + half
    self.centre = centre
    self.floor = BIN_FLOOR + origin[2]
    self.transit = geometry.rim_z + 0.06 + RG2_PAD_HALF[2] + origin[2]
    geoms = [env.scene[n].indexing.geom_ids.cpu().tolist() for n in names]
    self.replica = GraspReplica(env.sim.mj_model, geoms)
    self.before = _live_state(env)
    data = env.sim.data
    self.replica.pose(
      data.qpos[0].double().numpy(),
      data.mocap_pos[0].double().numpy(),
      data.mocap_quat[0].double().numpy(),
    )
    self.home = self.replica.data.qpos.copy()
    self.arm_q = self.home[self.replica.kin.qpos_adr].copy()
    m = self.replica.model
    types = [int(m.geom_type[g[0]]) for g in geoms]
    self.box = types.index(int(mujoco.mjtGeom.mjGEOM_BOX))
    self.capsule = types.index(int(mujoco.mjtGeom.mjGEOM_CAPSULE))
    kinds = [o.kind for o in pour.cfg.objects]
    self.ell, self.wide = kinds.index("ell"), kinds.index("wide")

  def reset(self) -> None:
    """Robot at home, every object parked far outside the bin."""
    r = self.replica
    r.data.qpos[:] = self.home
    for k in range(len(r.object_geoms)):
      adr = self._adr(k)
      r.data.qpos[adr : adr + 3] = (-0.5 - 0.3 * k, 1.5, 0.1)
      r.data.qpos[adr + 3 : adr + 7] = UPRIGHT
    mujoco.mj_kinematics(r.model, r.data)

  def _adr(self, k: int) -> int:
    m = self.replica.model
    body = m.geom_bodyid[self.replica.object_geoms[k][0]]
    return int(m.jnt_qposadr[m.body_jntadr[body]])

  def place(self, k, quat, xy, snap=()) -> None:
    """Object k resting on the floor, its box of points centred at ``xy``;
    ``snap`` (axis, +-1) pairs put it flush against that wall instead."""
    r = self.replica
    adr = self._adr(k)
    r.data.qpos[adr : adr + 3] = (*xy, 0.3)
    r.data.qpos[adr + 3 : adr + 7] = quat
    mujoco.mj_kinematics(r.model, r.data)
    lo, hi = self.extent(k)
    shift = np.zeros(3)
    shift[:2] = np.asarray(xy) - 0.5 * (lo[:2] + hi[:2])
    for axis, sign in snap:
      shift[axis] = (
        self.inner_hi[axis] - hi[axis] if sign > 0 else self.inner_lo[axis] - lo[axis]
      )
    shift[2] = self.floor + 0.0005 - lo[2]
    r.data.qpos[adr : adr + 3] += shift
    mujoco.mj_kinematics(r.model, r.data)

  def extent(self, k) -> tuple[np.ndarray, np.ndarray]:
    pts = self.replica.object_triangles(k).reshape(-1, 3)
    return pts.min(0), pts.max(0)

  def box_corners(self, gid) -> np.ndarray:
    r = self.replica
    signs = np.array(list(itertools.product([-1, 1], repeat=3)), float)
    rot = r.data.geom_xmat[gid].reshape(3, 3)
    return (signs * r.model.geom_size[gid]) @ rot.T + r.data.geom_xpos[gid]


@pytest.fixture(scope="module")
def scene():
  # The hard set: its fifth object is a wide flat box (a standing one is
  # toppled below); the first four are the default set's.
  cfg = bin_pick_env_cfg(num_envs=1, objects=5, object_set="hard")
  env = make_env(cfg, device="cpu", engine="mujoco")
  env.reset()
  yield Scene(env)
  env.close()


def _pads_at(scene: Scene, plan, point) -> np.ndarray:
  """Corners of both closed pads [16, 3] with the arm solved at ``point``."""
  r = scene.replica
  above = np.array([*plan.start_w[:2], plan.transit_z])
  q = r.kin.solve(above, plan.rotation_w, scene.arm_q)
  ik = r.kin.solve(point, plan.rotation_w, q.q)
  assert q.converged and ik.converged
  r.data.qpos[r.kin.qpos_adr] = ik.q
  r._set_fingers(0.0)
  mujoco.mj_kinematics(r.model, r.data)
  corners = np.concatenate([scene.box_corners(g) for g in r.pad_geoms])
  tool = r.data.site_xpos[r.kin.site_id]
  np.testing.assert_allclose(tool, point, atol=1e-4)
  return corners


def test_push_alone_in_the_middle(scene):
  scene.reset()
  k = scene.box
  scene.place(k, UPRIGHT, scene.centre)
  r = scene.replica
  qpos = r.data.qpos.copy()
  start_time = time.perf_counter()
  plan, rejections = plan_push(r, k, "blocked", scene.transit, scene.arm_q)
  wall = time.perf_counter() - start_time
  print(f"plan_push: {wall * 1e3:.1f} ms, rejections {dict(rejections)}")
  assert plan is not None, rejections
  np.testing.assert_array_equal(r.data.qpos, qpos)  # Replica restored.
  assert plan.object_index == k and plan.reason == "blocked"
  assert plan.kind in ("push", "tip")
  d = plan.direction_w
  assert abs(d[2]) < 1e-12 and abs(np.linalg.norm(d) - 1) < 1e-9
  lo, hi = scene.extent(k)
  centre = 0.5 * (lo + hi)
  assert float((plan.start_w - centre) @ d) < 0
  # The box is upright: its rear extent along d from its 8 corners.
  corners = scene.box_corners(r.object_geoms[k][0])
  rear = float((corners @ d).min())
  gap = rear - float(plan.start_w @ d)
  assert gap >= CFG.approach_gap + RG2_PAD_HALF[1] - 1e-9
  assert gap <= CFG.approach_gap + RG2_PAD_HALF[1] + 1e-6
  move = plan.end_w - plan.start_w
  length = float(np.linalg.norm(move))
  np.testing.assert_allclose(move, length * d, atol=1e-12)
  # Alone in the middle: the full distance (the bin is 400 mm long).
  assert length == pytest.approx(CFG.distance + CFG.approach_gap)
  floor_rule = scene.floor + RG2_PAD_HALF[2] + CFG.floor_clearance
  assert plan.start_w[2] >= floor_rule - 1e-12
  if plan.kind == "push":
    # Mid height, or the floor rule (plus at most 1 mm for the IK tolerance).
    low = max(centre[2], floor_rule)
    assert low - 1e-12 <= plan.start_w[2] <= low + 0.001
  # Untilted, closing axis perpendicular to the push, approach down.
  rot = plan.rotation_w
  np.testing.assert_allclose(rot[:, 2], [0, 0, -1], atol=1e-12)
  np.testing.assert_allclose(abs(float(rot[:, 1] @ d)), 1.0, atol=1e-12)
  assert plan.transit_z == pytest.approx(max(scene.transit, plan.start_w[2]))
  for point in (plan.start_w, plan.end_w):
    pads = _pads_at(scene, plan, point)
    assert np.all(pads[:, :2] >= scene.inner_lo + CFG.wall_clearance - 1e-4)
    assert np.all(pads[:, :2] <= scene.inner_hi - CFG.wall_clearance + 1e-4)
    assert np.all(pads[:, 2] >= scene.floor + CFG.floor_clearance - 1e-4)


def test_corner_box_gets_no_push_into_the_walls(scene):
  scene.reset()
  k = scene.box
  scene.place(k, UPRIGHT, scene.centre, snap=((0, 1), (1, 1)))
  lo, hi = scene.extent(k)
  assert hi[0] == pytest.approx(scene.inner_hi[0]) and hi[1] == pytest.approx(
    scene.inner_hi[1]
  )
  assert object_situation(scene.replica, k) == "wall"
  plan, rejections = plan_push(scene.replica, k, "wall", scene.transit, scene.arm_q)
  assert set(rejections) <= set(PUSH_REJECTIONS)
  # Into +y or +x there is no room; every other direction starts behind the
  # box, inside a wall.
  assert rejections["no_room"] > 0
  if plan is not None:
    start = plan.start_w[:2]
    assert np.all(start >= scene.inner_lo + CFG.wall_clearance)
    assert np.all(start <= scene.inner_hi - CFG.wall_clearance)
  assert plan is None, plan


def test_object_situations(scene):
  r = scene.replica
  scene.reset()
  scene.place(scene.capsule, UPRIGHT, scene.centre)
  lo, hi = scene.extent(scene.capsule)
  assert hi[2] - lo[2] > 0.05 and hi[2] - lo[2] > 1.3 * (hi[0] - lo[0])
  assert object_situation(r, scene.capsule) == "standing"
  # Lying along x, longer than 0.75 of the inner width: across.
  scene.place(scene.capsule, ALONG_X, scene.centre)
  lo, hi = scene.extent(scene.capsule)
  width = scene.inner_hi[0] - scene.inner_lo[0]
  assert hi[0] - lo[0] > 0.75 * width  # The drawn capsule is long enough.
  assert object_situation(r, scene.capsule) == "across"
  # Lying along y, touching the +x long wall; then in the middle.
  scene.place(scene.capsule, ALONG_Y, scene.centre, snap=((0, 1),))
  assert object_situation(r, scene.capsule) == "wall"
  scene.place(scene.capsule, ALONG_Y, scene.centre)
  lo, hi = scene.extent(scene.capsule)
  assert min(lo[0] - scene.inner_lo[0], scene.inner_hi[0] - hi[0]) >= 0.025
  assert object_situation(r, scene.capsule) == "blocked"
  scene.place(scene.box, UPRIGHT, scene.centre + [0.0, 0.1])
  assert object_situation(r, scene.box) == "blocked"


def test_standing_capsule_tips_and_avoids_a_blocked_direction(scene):
  """A standing capsule is tipped (pads 12 mm below its top); with the box
  put right in front of that push, the room there is under the minimum, so
  another direction is chosen (the more free room, the earlier), not toward
  the box."""
  scene.reset()
  r = scene.replica
  scene.place(scene.capsule, UPRIGHT, scene.centre)
  plan, rejections = plan_push(r, scene.capsule, "standing", scene.transit, scene.arm_q)
  assert plan is not None, rejections
  assert plan.kind == "tip"
  lo, hi = scene.extent(scene.capsule)
  assert plan.start_w[2] == pytest.approx(hi[2] - 0.012)
  d = plan.direction_w
  scene.place(scene.box, UPRIGHT, scene.centre + d[:2] * 0.06)
  # Free room toward the box, by hand: both are axis-aligned boxes of points.
  c_lo, c_hi = scene.extent(scene.capsule)
  b_lo, b_hi = scene.extent(scene.box)

  def along(lo, hi):  # Projections of the 4 horizontal box corners on d.
    return [x * d[0] + y * d[1] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])]

  room = min(along(b_lo, b_hi)) - max(along(c_lo, c_hi))
  assert room > 0
  assert room - 0.005 < CFG.min_distance
  plan2, rejections2 = plan_push(
    r, scene.capsule, "standing", scene.transit, scene.arm_q
  )
  assert plan2 is not None, rejections2
  assert float(plan2.direction_w @ d) <= 1e-9


def test_live_environment_untouched(scene):
  """Planning on the replica posed from the live scene, for every poured
  object, leaves the live simulator's state as it was."""
  before = _live_state(scene.env)
  data = scene.env.sim.data
  r = scene.replica
  r.pose(
    data.qpos[0].double().numpy(),
    data.mocap_pos[0].double().numpy(),
    data.mocap_quat[0].double().numpy(),
  )
  for k in range(len(r.object_geoms)):
    situation = object_situation(r, k)
    plan_push(r, k, situation, scene.transit, scene.arm_q)
  after = _live_state(scene.env)
  for states in (before, scene.before):
    for x, y in zip(states, after, strict=True):
      np.testing.assert_array_equal(x, y)


@pytest.mark.slow  # About 200 steps; the fast tier checks that a push is planned
# after the attempts are used (test_bin_pick_expert_states.py).
def test_the_expert_executes_a_push_and_logs_what_the_object_did():
  """Live: an object whose grasps all failed is pushed (closed gripper, the
  push_* stages in order), then gets one more grasp attempt. The logged
  displacement is the simulator's, measured here from the object's pose when
  the push started and ended; the object moved along the planned direction."""
  from experts.bin_pick.expert import BinPickExpert, Stage

  env = make_env(
    bin_pick_env_cfg(num_envs=1, objects=1, bin_width=0.14, bin_height=0.06),
    device="cpu",
    engine="mujoco",
  )
  try:
    env.reset()
    expert = BinPickExpert(env)
    expert.attempts[0, 0] = expert.cfg.max_attempts  # Every grasp failed.
    obj = env.scene["obj_00"].data
    seen, start_pos, plan = [], None, None
    for _ in range(600):
      env.step(expert.act())
      stage = Stage(int(expert.stage[0]))
      if stage == Stage.PUSH_ABOVE and start_pos is None:
        start_pos, plan = obj.root_link_pos_w[0].numpy().copy(), expert._push[0]
      if not seen or seen[-1] != stage:
        seen.append(stage)
      if expert.logs[0].rearrangements:
        break
    end_pos = obj.root_link_pos_w[0].numpy().copy()
  finally:
    expert.close()
    env.close()
  assert plan is not None and plan.reason == "failed_grasps"
  assert seen[: seen.index(Stage.PUSH_UP) + 1] == [
    Stage.PUSH_ABOVE,
    Stage.PUSH_DOWN,
    Stage.PUSH,
    Stage.PUSH_UP,
  ]
  (move,) = expert.logs[0].rearrangements
  moved = end_pos - start_pos
  assert move["moved_mm"] == pytest.approx(np.linalg.norm(moved) * 1000, abs=0.1)
  assert np.linalg.norm(moved[:2]) > CFG.min_distance / 2
  cos = moved[:2] @ plan.direction_w[:2] / np.linalg.norm(moved[:2])
  assert cos > 0.8
  assert int(expert.attempts[0, 0]) == expert.cfg.max_attempts - 1


def test_capsule_by_a_wall_is_rolled_off_it(scene):
  """A capsule lying along a long wall, which no hand fits behind, is rolled:
  the closed pads come down on its top line (pressing ``roll_press`` into
  it) and move straight away from the wall, twice the wanted shift; checked
  against the capsule's extent and the bin's nominal walls computed here."""
  scene.reset()
  r = scene.replica
  k = scene.capsule
  scene.place(k, ALONG_Y, scene.centre, snap=((0, 1),))
  assert rolls(r, k)
  plan, rejections = plan_push(r, k, "wall", scene.transit, scene.arm_q)
  assert plan is not None, rejections
  assert plan.kind == "roll" and plan.reason == "wall"
  np.testing.assert_allclose(plan.direction_w, [-1.0, 0.0, 0.0], atol=1e-12)
  lo, hi = scene.extent(k)
  top_z = hi[2]
  # Over the top line (the capsule's middle), or up to 15 mm off it toward
  # the roll so that the housing clears the wall; the pads' 25 mm wide flat
  # bottom reaches within 2.5 mm of the top line.
  offset = plan.start_w[:2] - 0.5 * (lo[:2] + hi[:2])
  along = float(offset @ plan.direction_w[:2])
  assert min(abs(along - o) for o in ROLL_OFFSETS) < 1e-3
  assert abs(float(offset[1])) < 1e-3 and along - RG2_PAD_HALF[1] <= 0.0025 + 1e-3
  assert plan.start_w[2] == pytest.approx(top_z + RG2_PAD_HALF[2] - CFG.roll_press)
  room = lo[0] - scene.inner_lo[0]  # Free floor toward the other wall.
  length = float(np.linalg.norm(plan.end_w - plan.start_w))
  assert length == pytest.approx(2 * min(CFG.roll_shift, room - 0.005))
  np.testing.assert_allclose(plan.end_w[1:], plan.start_w[1:], atol=1e-12)
  # Checked touching the top: there the pads clear the walls and the floor.
  touch = np.array([0.0, 0.0, CFG.roll_press + 0.001])
  for point in (plan.start_w + touch, plan.end_w + touch):
    pads = _pads_at(scene, plan, point)
    assert np.all(pads[:, :2] >= scene.inner_lo + CFG.wall_clearance - 1e-4)
    assert np.all(pads[:, :2] <= scene.inner_hi - CFG.wall_clearance + 1e-4)
    assert pads[:, 2].min() >= top_z - 1e-4


def test_a_capsule_rolls_across_its_axis(scene):
  """A capsule lying diagonally by a long wall rolls across its own axis
  (it cannot roll along it), on the side away from the wall; one whose axis
  points at the wall is not rolled."""
  scene.reset()
  r = scene.replica
  k = scene.capsule
  yaw = math.radians(60.0)  # Axis at 60 degrees from world x.
  tilt = np.array([math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0])
  turn = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
  quat = np.zeros(4)
  mujoco.mju_mulQuat(quat, turn, tilt)  # Lying along x, then turned.
  scene.place(k, quat, scene.centre, snap=((0, 1),))
  plan, rejections = plan_push(r, k, "wall", scene.transit, scene.arm_q)
  assert plan is not None and plan.kind == "roll", rejections
  axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
  assert abs(float(plan.direction_w @ axis)) < 1e-9
  assert plan.direction_w[0] < -0.5  # Away from the +x wall.
  # Axis along x, an end against the +x wall: no roll.
  scene.reset()
  scene.place(k, ALONG_X, scene.centre + [0.0, 0.0], snap=((0, 1),))
  plan, _ = plan_push(r, k, "wall", scene.transit, scene.arm_q)
  assert plan is None or plan.kind != "roll"


def test_a_capsule_in_a_corner_rolls_off_the_end_wall(scene):
  """A capsule whose axis points at a long wall (touching it with an end)
  and which lies 5 mm from an end wall rolls across its axis, away from the
  end wall: a roll may leave any wall behind it, not only the nearest."""
  scene.reset()
  r = scene.replica
  k = scene.capsule
  scene.place(k, ALONG_X, scene.centre, snap=((0, 1), (1, 1)))
  adr = scene._adr(k)
  r.data.qpos[adr + 1] -= 0.005
  mujoco.mj_kinematics(r.model, r.data)
  lo, hi = scene.extent(k)
  assert hi[1] == pytest.approx(scene.inner_hi[1] - 0.005, abs=1e-6)
  plan, rejections = plan_push(r, k, "wall", scene.transit, scene.arm_q)
  assert plan is not None and plan.kind == "roll", rejections
  np.testing.assert_allclose(plan.direction_w, [0.0, -1.0, 0.0], atol=1e-9)


def test_a_lying_capsules_roll_axis_in_its_body_frame(scene, rng):
  """The expert follows a round target by its roll axis in the object's body
  frame: a capsule's is its own long axis (local z), the world one its
  horizontal direction, for a random yaw; a box has none."""
  from experts.bin_pick.expert import _body_roll_axis

  scene.reset()
  r = scene.replica
  yaw = rng.uniform(-math.pi, math.pi)
  turn = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
  quat = np.zeros(4)
  mujoco.mju_mulQuat(quat, turn, ALONG_X)
  scene.place(scene.capsule, quat, scene.centre)
  world, body = _body_roll_axis(r, scene.capsule)
  expected = np.array([math.cos(yaw), math.sin(yaw), 0.0])
  sign = np.sign(world @ expected)
  np.testing.assert_allclose(world, sign * expected, atol=1e-9)
  np.testing.assert_allclose(body, [0.0, 0.0, sign], atol=1e-9)
  scene.place(scene.box, UPRIGHT, scene.centre + [0.0, 0.1])
  assert _body_roll_axis(r, scene.box) is None


def test_a_capsule_across_the_bin_rolls_off_the_end_wall(scene):
  """A capsule lying across the bin (axis along its width) against an end
  wall, where neither a grasp nor a push fits behind it, is rolled along
  the bin, away from that wall; lying so in the bin's middle, with no wall
  behind it either way, it gets no roll."""
  scene.reset()
  r = scene.replica
  k = scene.capsule
  scene.place(k, ALONG_X, scene.centre, snap=((1, 1),))
  plan, rejections = plan_push(r, k, "across", scene.transit, scene.arm_q)
  assert plan is not None and plan.kind == "roll", rejections
  assert plan.reason == "across"
  np.testing.assert_allclose(plan.direction_w, [0.0, -1.0, 0.0], atol=1e-9)
  scene.reset()
  scene.place(k, ALONG_X, scene.centre)
  plan, _ = plan_push(r, k, "across", scene.transit, scene.arm_q)
  assert plan is None or plan.kind != "roll"


def test_a_standing_object_by_a_wall_is_toppled_away_from_it(scene):
  """An L-block standing on its 26 mm edge against a long wall (no hand fits
  behind it, and pushing its side only slides it along the wall) is
  toppled: the closed pads press on its top and move straight off the wall,
  its thickness and ``topple_overshoot`` farther; checked against its
  extent computed here. A wide flat box standing so would land 96 x 139 mm
  wide, which no grasp takes: it gets no topple."""
  scene.reset()
  r = scene.replica
  k = scene.ell
  scene.place(k, ALONG_X, scene.centre, snap=((0, 1),))
  assert object_situation(r, k) == "standing"
  lo, hi = scene.extent(k)
  plan, rejections = plan_push(r, k, "standing", scene.transit, scene.arm_q)
  assert plan is not None and plan.kind == "topple", rejections
  np.testing.assert_allclose(plan.direction_w, [-1.0, 0.0, 0.0], atol=1e-9)
  thickness = hi[0] - lo[0]
  assert thickness == pytest.approx(0.026, abs=1e-3)  # The object set's size.
  length = float(np.linalg.norm(plan.end_w - plan.start_w))
  assert length == pytest.approx(thickness + CFG.topple_overshoot, abs=1e-6)
  assert plan.start_w[2] == pytest.approx(hi[2] + RG2_PAD_HALF[2] - CFG.roll_press)
  # Over the top strip, at most 15 mm off its middle toward the move: the
  # pads' 25 mm flat bottom still covers part of it.
  along = 0.5 * (lo[0] + hi[0]) - plan.start_w[0]
  assert -1e-3 < along <= 0.015 + 1e-3
  touch = np.array([0.0, 0.0, CFG.roll_press + 0.001])
  pads = _pads_at(scene, plan, plan.start_w + touch)
  assert np.all(pads[:, 0] <= scene.inner_hi[0] - CFG.wall_clearance + 1e-4)
  assert pads[:, 2].min() >= hi[2] - 1e-4

  scene.reset()
  scene.place(scene.wide, ALONG_X, scene.centre, snap=((0, 1),))
  lo, hi = scene.extent(scene.wide)
  assert min(hi[1] - lo[1], hi[2] - lo[2]) > CFG.topple_max_width
  plan, rejections = plan_push(r, scene.wide, "standing", scene.transit, scene.arm_q)
  assert plan is None or plan.kind != "topple"
  assert rejections["lands_too_wide"] >= 1


def test_a_low_object_by_a_wall_is_toppled_last_unless_it_is_flat(scene):
  """A box standing on its 26 x 27 mm end against a long wall (37 mm tall:
  under the standing rule's 50 mm, so a wall object) fits no hand behind
  it and no roll; asked for a topple only (the expert's last resort), it
  is toppled off the wall, its thickness and ``topple_overshoot`` farther,
  checked against its extent computed here.
  The same box lying on its 37 x 27 mm face against an end wall is 26 mm
  tall and 27 mm thick along the move: the pads' pull cannot tip it over
  (too_flat), so it gets no topple."""
  r = scene.replica
  k = scene.box
  scene.reset()
  scene.place(k, ALONG_X, scene.centre, snap=((0, 1),))
  lo, hi = scene.extent(k)
  thickness, height = hi[0] - lo[0], hi[2] - lo[2]
  assert thickness < height < 0.05
  assert object_situation(r, k) == "wall"
  plan, rejections = plan_push(r, k, "wall", scene.transit, scene.arm_q)
  assert plan is None, plan  # No roll, no push, and a wall topple comes last.
  plan, rejections = plan_push(
    r, k, "wall", scene.transit, scene.arm_q, topple_only=True
  )
  assert plan is not None and plan.kind == "topple", rejections
  assert plan.reason == "wall" and rejections["too_flat"] == 0
  np.testing.assert_allclose(plan.direction_w, [-1.0, 0.0, 0.0], atol=1e-9)
  length = float(np.linalg.norm(plan.end_w - plan.start_w))
  assert length == pytest.approx(thickness + CFG.topple_overshoot, abs=1e-6)
  assert plan.start_w[2] == pytest.approx(hi[2] + RG2_PAD_HALF[2] - CFG.roll_press)

  scene.reset()
  scene.place(k, UPRIGHT, scene.centre, snap=((1, 1),))
  lo, hi = scene.extent(k)
  assert hi[2] - lo[2] < hi[1] - lo[1]  # Lower than thick along y.
  plan, rejections = plan_push(
    r, k, "wall", scene.transit, scene.arm_q, topple_only=True
  )
  assert plan is None or plan.kind != "topple", plan
  assert rejections["too_flat"] == 1


def test_only_round_lying_objects_roll(scene):
  """A box by a wall gets no roll (it would be dragged, and pad and floor
  friction are equal); nor does a capsule standing on end."""
  scene.reset()
  r = scene.replica
  scene.place(scene.box, UPRIGHT, scene.centre, snap=((0, 1),))
  assert not rolls(r, scene.box)
  plan, _ = plan_push(r, scene.box, "wall", scene.transit, scene.arm_q)
  assert plan is None or plan.kind != "roll"
  scene.reset()
  scene.place(scene.capsule, UPRIGHT, scene.centre, snap=((0, 1),))
  assert not rolls(r, scene.capsule)


@pytest.mark.slow  # About 500 steps with a grasp and a delivery.
def test_the_expert_rolls_a_capsule_off_the_wall_then_delivers_it():
  """Live: a capsule lying along a long wall (1 mm from it), alone in the
  default bin, has no grasp; the expert rolls it (closed pads on its top,
  away from the wall), the simulator moves it off the wall by more than the
  minimum shift, and then it is grasped and delivered."""
  from experts.bin_pick.expert import BinPickExpert

  # Not ended on a cleared bin: the delivery of the one counted object clears
  # it, and the expert verifies a delivery only after its retreat.
  cfg = bin_pick_env_cfg(num_envs=1, objects=2, end_on_clear=False)
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    env.reset()
    pour = pourer(env)
    radius = pour.cfg.objects[1].params["radius"]
    inner_hi_x = BIN_CENTRE[0] + pour.cfg.geometry.width / 2
    origin = env.scene.env_origins[0]
    state = torch.zeros(1, 13)
    state[0, :3] = torch.tensor([inner_hi_x - radius - 0.001, 0.05, 0.012 + radius])
    state[0, :3] += origin
    state[0, 3:7] = torch.tensor(ALONG_Y)
    env.scene["obj_01"].write_root_state_to_sim(state)
    park = torch.zeros(1, 13)
    park[0, :3] = torch.tensor([-1.2, 0.5, 0.05]) + origin
    park[0, 3] = 1.0
    env.scene["obj_00"].write_root_state_to_sim(park)
    pour.in_bin[0, 0] = False  # Only the capsule counts.
    for _ in range(20):  # Let it settle against the wall.
      env.step(torch.zeros(1, 7))
    capsule = env.scene["obj_01"].data
    x0 = float(capsule.root_link_pos_w[0, 0] - origin[0])
    assert inner_hi_x - (x0 + radius) < 0.003
    expert = BinPickExpert(env)
    for _ in range(600):
      env.step(expert.act())
      if expert.logs[0].delivery_times:
        break
    log = expert.logs[0]
  finally:
    expert.close()
    env.close()
  (move,) = log.rearrangements
  assert move["kind"] == "roll" and move["reason"] == "wall"
  assert move["direction"] == pytest.approx([-1.0, 0.0], abs=1e-3)
  assert move["moved_mm"] > 1000 * 0.01  # ROLL_MIN_SHIFT
  assert log.delivery_times, log.transitions[-3:]


def _live_bounds(env, name: str) -> tuple[np.ndarray, np.ndarray]:
  """World bounds of a live object's geoms (their boxes, posed) [3], [3]."""
  m, d = env.sim.mj_model, worlds(env)[0]
  lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
  for g in env.scene[name].indexing.geom_ids.cpu().tolist():
    rot = d.geom_xmat[g].reshape(3, 3)
    centre = d.geom_xpos[g] + rot @ m.geom_aabb[g][:3]
    half = np.abs(rot) @ m.geom_aabb[g][3:]
    lo, hi = np.minimum(lo, centre - half), np.maximum(hi, centre + half)
  return lo, hi


@pytest.mark.slow  # About 100 steps.
@pytest.mark.parametrize("kind, reason", [("ell", "standing"), ("box", "wall")])
def test_the_expert_topples_a_standing_object_off_the_wall(kind, reason):
  """Live: an L-block standing on its 26 mm edge, or a box standing on its
  26 x 27 mm end (37 mm tall: too low for the standing rule), 1 mm from a
  long wall, alone in the default bin, has no grasp; the expert topples it
  (closed pads on its top, away from the wall) and in the simulator it
  falls over: afterwards it lies flat (its thin axis vertical, at most 30
  mm tall) and off the wall by more than 10 mm."""
  from experts.bin_pick.expert import BinPickExpert

  env = make_env(bin_pick_env_cfg(num_envs=1, objects=4), device="cpu", engine="mujoco")
  expert = None
  try:
    env.reset()
    pour = pourer(env)
    names = pour.cfg.names
    k = [o.kind for o in pour.cfg.objects].index(kind)
    origin = env.scene.env_origins[0]
    for j, name in enumerate(names):
      state = torch.zeros(1, 13)
      state[0, :3] = torch.tensor([-1.2, 0.5 + 0.3 * j, 0.05]) + origin
      state[0, 3] = 1.0
      if j == k:
        state[0, :3] = torch.tensor([BIN_CENTRE[0], 0.05, 0.15]) + origin
        state[0, 3:7] = torch.tensor(ALONG_X)
      env.scene[name].write_root_state_to_sim(state)
      pour.in_bin[0, j] = j == k  # Only the L-block counts.
    env.step(torch.zeros(1, 7))
    inner_hi_x = BIN_CENTRE[0] + pour.cfg.geometry.width / 2 + float(origin[0])
    lo, hi = _live_bounds(env, names[k])
    state = torch.zeros(1, 13)
    state[0, :3] = env.scene[names[k]].data.root_link_pos_w[0]
    state[0, 3:7] = torch.tensor(ALONG_X)
    state[0, 0] += inner_hi_x - 0.001 - hi[0]
    state[0, 2] += BIN_FLOOR + float(origin[2]) + 0.001 - lo[2]
    env.scene[names[k]].write_root_state_to_sim(state)
    for _ in range(20):  # Let it settle against the wall.
      env.step(torch.zeros(1, 7))
    lo, hi = _live_bounds(env, names[k])
    assert inner_hi_x - hi[0] < 0.003 and hi[2] - lo[2] > 0.035
    expert = BinPickExpert(env)
    for _ in range(300):
      env.step(expert.act())
      if expert.logs[0].rearrangements:
        break
    lo, hi = _live_bounds(env, names[k])
    quat = env.scene[names[k]].data.root_link_quat_w[0].double().numpy()
  finally:
    if expert is not None:
      expert.close()
    env.close()
  (move,) = expert.logs[0].rearrangements
  assert move["kind"] == "topple" and move["reason"] == reason
  assert move["direction"] == pytest.approx([-1.0, 0.0], abs=1e-3)
  rot = np.zeros(9)
  mujoco.mju_quat2Mat(rot, quat)
  assert abs(rot.reshape(3, 3)[2, 2]) > 0.9  # The thin axis (local z) vertical.
  assert hi[2] - lo[2] < 0.03
  assert inner_hi_x - hi[0] > 0.01


@pytest.mark.parametrize(
  "pushable_one, toppled_before, expected",
  [
    (None, (), ("topple", 0)),  # Nothing else: the first wall object's topple.
    (2, (), ("push", 2)),  # Another object's push comes before any topple.
    (None, (0,), ("topple", 1)),  # A wall topple once per object.
    (None, (0, 1), ("topple", 2)),
    (None, (0, 1, 2), None),
  ],
)
def test_the_expert_topples_a_wall_object_after_every_other_push(
  monkeypatch, pushable_one, toppled_before, expected
):
  """The expert's choice among three objects by a wall (fake plans: each
  object's rolls and pushes infeasible but for ``pushable_one``; every
  topple feasible): rolls and pushes of every object first, then a topple,
  of an object not toppled before."""
  import experts.bin_pick.expert as expert_module
  from experts.bin_pick.expert import BinPickExpert, BinPickExpertCfg
  from experts.bin_pick.rearrange import PushPlan

  calls = []

  def fake_plan(replica, k, reason, transit_z, q_now, cfg, topple_only=False):
    calls.append((k, topple_only))
    kind = "topple" if topple_only else "push"
    if topple_only or k == pushable_one:
      plan = PushPlan(k, reason, kind, np.zeros(3), np.zeros(3), np.zeros(3),
                      np.eye(3), 0.3)  # fmt: skip
      return plan, {}
    return None, {"no_room": 1}

  class Replica:
    def object_triangles(self, k):
      return np.full((1, 3, 3), 0.1 - 0.01 * k)  # Object 0 is the highest.

  monkeypatch.setattr(expert_module, "plan_push", fake_plan)
  monkeypatch.setattr(expert_module, "object_situation", lambda replica, k: "wall")
  expert = BinPickExpert.__new__(BinPickExpert)
  expert.cfg = BinPickExpertCfg()
  expert.attempts = torch.zeros(1, 3, dtype=torch.long)
  expert.wall_toppled = torch.zeros(1, 3, dtype=torch.bool)
  expert.wall_toppled[0, list(toppled_before)] = True
  plan, _ = expert._plan_rearrangement(Replica(), 0, np.ones(3, bool), 0.3, None)
  got = None if plan is None else (plan.kind, plan.object_index)
  assert got == expected
  regular = [k for k, only in calls if not only]
  assert regular == [0, 1, 2][: len(regular)]  # Highest first (all by a wall).
  first_topple = next((j for j, (_, only) in enumerate(calls) if only), len(calls))
  if pushable_one is None:
    assert first_topple == 3  # After all three objects' rolls and pushes.
  assert all(k not in toppled_before for k, only in calls if only)
