"""Which hand yaw the bin-picking replica tries first: the nearer one, unless
it takes the last wrist joint beyond its range; the wrist's turn predicted
from hand poses, against forward kinematics of the arm."""

from __future__ import annotations

import math

import numpy as np

from assets.ur5_rg2 import ARM_JOINT_NAMES, HOME_JOINT_POS
from assets.ur5_rg2.kinematics import ArmKinematics
from experts.bin_pick.replica import _first_of_two, _wrist_turn


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


def test_the_world_nearer_yaw_can_turn_the_wrist_more():
  """A hand back from the drop zone (base turned 45 degrees away) to a grasp
  60 degrees of world yaw away: the wrist turns 105 degrees that way, and
  75 the other way (the half-turned hand, 120 degrees of world yaw)."""
  near = _wrist_turn(math.radians(60), 0.0, 0.0, math.radians(45))
  half = _wrist_turn(math.radians(-120), 0.0, 0.0, math.radians(45))
  assert math.isclose(near, math.radians(-105), abs_tol=1e-9)
  assert math.isclose(half, math.radians(75), abs_tol=1e-9)


def _cycle_wrists(wrist_range: float, seed: int, cycles: int = 60) -> np.ndarray:
  """The last wrist joint after each grasp of ``cycles`` cycles: a carry to
  the drop zone (the base swings 30 to 75 degrees, the hand keeps its yaw)
  and back to a grasp of random yaw, the hand ordered by ``_first_of_two``."""
  r = np.random.default_rng(seed)
  wrist, yaw, bearing, out = 0.0, 0.0, 0.0, []
  for _ in range(cycles):
    swing = r.uniform(math.radians(30), math.radians(75))
    wrist += _wrist_turn(yaw, bearing + swing, yaw, bearing)
    bearing += swing
    grasp = r.uniform(-math.pi, math.pi)
    yaws = [grasp, grasp + math.pi]
    turns = [_wrist_turn(y, bearing - swing, yaw, bearing) for y in yaws]
    k = 0 if _first_of_two(yaws, turns, (yaw, bearing, wrist), wrist_range) else 1
    wrist, yaw, bearing = wrist + turns[k], yaws[k], bearing - swing
    out.append(wrist)
  return np.array(out)


def test_the_wrist_stays_within_its_range_over_many_cycles(rng):
  """Without the range rule the nearer hand yaw lets the wrist wander past
  its range (2 pi) in some of 20 runs of 60 cycles; with it, every grasp
  leaves the wrist within the rule's range (the two hands' turns differ by
  half a turn)."""
  seeds = rng.integers(1 << 30, size=20)
  for seed in seeds:
    assert np.abs(_cycle_wrists(math.pi, int(seed))).max() <= math.pi + 1e-9
  wander = [np.abs(_cycle_wrists(math.inf, int(seed))).max() for seed in seeds]
  assert max(wander) > 2 * math.pi
