"""Which hand yaw the bin-picking replica tries first: the one of the shorter
last-wrist turn, unless it takes the joint beyond its range; the wrist's turn
predicted from hand poses, against forward kinematics of the arm."""

from __future__ import annotations

import math

import numpy as np

from assets.ur5_rg2 import ARM_JOINT_NAMES, HOME_JOINT_POS
from assets.ur5_rg2.kinematics import ArmKinematics
from experts.bin_pick.replica import ReplicaCfg, _first_of_two, _wrist_turn


def _yaw(rotation: np.ndarray) -> float:
  return float(np.arctan2(rotation[1, 0], rotation[0, 0]))


def _bearing(position: np.ndarray) -> float:
  return float(np.arctan2(position[1], position[0]))  # The base axis is at 0.


def test_wrist_turn_is_the_last_joint_change_between_two_poses(rng):
  """Two arm poses that differ in the base joint and the last wrist joint
  (by random amounts, the world turn within half a turn, the short way the
  task's command turns): the predicted wrist turn from the hand poses alone
  is the wrist joint's change."""
  kin = ArmKinematics()
  home = np.array([HOME_JOINT_POS[name] for name in ARM_JOINT_NAMES])
  for _ in range(40):
    q0, q1 = home.copy(), home.copy()
    q0[0], q0[5] = rng.uniform(-0.5, 1.2), rng.uniform(-2.0, 2.0)
    q1[0] = rng.uniform(-0.5, 1.2)
    swing = q1[0] - q0[0]
    turn = rng.uniform(-0.9, 0.9) * math.pi
    # The hand's world turn is the swing less the wrist's (its axis points
    # down); within half a turn, the way the command turns it.
    turn = float(np.clip(turn, swing - 0.95 * math.pi, swing + 0.95 * math.pi))
    q1[5] = q0[5] + turn
    p0, r0 = kin.tool_pose(q0)
    p1, r1 = kin.tool_pose(q1)
    predicted = _wrist_turn(_yaw(r1), _bearing(p1), _yaw(r0), _bearing(p0))
    assert abs(predicted - turn) < 1e-3, (predicted, turn)


def test_the_shorter_wrist_turn_comes_first_not_the_nearer_world_yaw():
  """A hand back from the drop zone (base turned 45 degrees away) to a grasp
  60 degrees of world yaw away: the wrist turns 105 degrees that way, and
  75 the other way (the half-turned hand, 120 degrees of world yaw). Every
  joint follows its IK step at the same pace, so the 75 degree turn comes
  first; near the range's end the other one does."""
  near = _wrist_turn(math.radians(60), 0.0, 0.0, math.radians(45))
  half = _wrist_turn(math.radians(-120), 0.0, 0.0, math.radians(45))
  assert math.isclose(near, math.radians(-105), abs_tol=1e-9)
  assert math.isclose(half, math.radians(75), abs_tol=1e-9)
  assert not _first_of_two([near, half], 0.0, math.pi)
  assert _first_of_two([half, near], 0.0, math.pi)
  # The wrist at 120 degrees: 75 more would pass a 180 degree range.
  assert _first_of_two([near, half], math.radians(120), math.pi)


_SPREAD = math.radians(16)  # The drop zone's bearing spread from the base.


def _cycle_wrists(
  wrist_range: float, seed: int, centring: bool = True, cycles: int = 60
) -> np.ndarray:
  """The last wrist joint after each grasp of ``cycles`` cycles, as the
  expert moves: a carry to the drop zone (the base swings 30 to 75 degrees;
  the hand turns with the swing to the destination, ``_SPREAD`` at most from
  the drop position's, and, ``centring``, the joint back toward zero by up
  to the swing less the spread), and back to a grasp of random yaw, the
  hand ordered by ``_first_of_two``."""
  r = np.random.default_rng(seed)
  wrist, yaw, bearing, out = 0.0, 0.0, 0.0, []
  for _ in range(cycles):
    swing = r.uniform(math.radians(30), math.radians(75))
    room = max(swing - _SPREAD, 0.0) if centring else 0.0
    turn = swing - float(np.clip(-wrist, -room, room))
    actual = swing + r.uniform(-1.0, 1.0) * _SPREAD
    wrist += _wrist_turn(yaw + turn, bearing + actual, yaw, bearing)
    yaw, bearing = yaw + turn, bearing + actual
    grasp = r.uniform(-math.pi, math.pi)
    yaws = [grasp, grasp + math.pi]
    turns = [_wrist_turn(y, bearing - actual, yaw, bearing) for y in yaws]
    k = 0 if _first_of_two(turns, wrist, wrist_range) else 1
    wrist, yaw, bearing = wrist + turns[k], yaws[k], bearing - actual
    out.append(wrist)
  return np.array(out)


def test_the_wrist_stays_well_within_its_travel_over_many_cycles(rng):
  """The joint's travel is 2 pi each way. The task's command turns the hand
  the short way in the world, so a joint far from zero can have both of its
  turns outward, past the range rule's bound: with a carry that left the
  joint alone, some of 200 runs of 60 cycles took it more than a quarter
  turn past the bound (4 % of runs, measured on 300). With the carry's
  turn back toward zero, none."""
  seeds = [int(s) for s in rng.integers(1 << 30, size=200)]
  bound = ReplicaCfg().wrist_range + math.pi / 2
  assert bound < 2 * math.pi
  for seed in seeds:
    assert np.abs(_cycle_wrists(ReplicaCfg().wrist_range, seed)).max() <= bound
  left_alone = [
    np.abs(_cycle_wrists(ReplicaCfg().wrist_range, s, centring=False)).max()
    for s in seeds
  ]
  assert max(left_alone) > bound


def test_most_returns_turn_the_wrist_a_quarter_turn_or_less(rng):
  """The shorter of two turns half a turn apart is at most a quarter turn;
  only the range rule takes the longer one: over 20 runs of 60 cycles few
  grasps are more than a quarter turn (and the carry's turns) from the
  last."""
  limit = ReplicaCfg().wrist_range
  steps = np.concatenate(
    [np.diff(_cycle_wrists(limit, int(s))) for s in rng.integers(1 << 30, size=20)]
  )
  beyond = np.abs(steps) > math.pi / 2 + math.radians(75) + 1e-9
  assert beyond.mean() < 0.05, beyond.mean()
