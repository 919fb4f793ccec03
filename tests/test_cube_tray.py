"""Cube in tray: evaluator against the seed and a NumPy reference, reset-only
scoring fixtures in the simulated scene, and the reference expert."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from evaluators.cube_tray import (
  CubeTrayEvaluator,
  CubeTrayState,
  Outcome,
  Reason,
  evaluate_conditions,
  is_contained,
)

HALF, INNER = 0.02, 0.05


def yaw_rot(deg: float) -> torch.Tensor:
  return torch.tensor(Rotation.from_euler("z", deg, degrees=True).as_matrix())


# Seed 000, worked example.


def test_seed_worked_example():
  pos = torch.tensor([[0.025, 0.0, 0.02]] * 2, dtype=torch.float64)
  rot = torch.stack([yaw_rot(0.0), yaw_rot(45.0)])
  tray = torch.zeros(2, 3, dtype=torch.float64)
  assert is_contained(pos, rot, tray).tolist() == [True, False]
  # Outer edge: 45 mm aligned, about 53.3 mm at 45 degrees.
  extent_x = (rot.abs() @ torch.full((3,), HALF, dtype=torch.float64))[:, 0]
  edge = 0.025 + extent_x
  assert edge[0].item() == pytest.approx(0.045)
  assert edge[1].item() == pytest.approx(0.025 + 0.02 * math.sqrt(2), abs=1e-12)
  assert edge[1].item() == pytest.approx(0.0533, abs=5e-5)


@pytest.mark.parametrize("yaw_deg, expected_mm", [(0.0, 30.0), (45.0, 21.7)])
def test_largest_admissible_offset(yaw_deg, expected_mm):
  offsets = torch.linspace(0.0, 0.04, 40001, dtype=torch.float64)
  pos = torch.zeros(len(offsets), 3, dtype=torch.float64)
  pos[:, 0] = offsets
  rot = yaw_rot(yaw_deg).expand(len(offsets), 3, 3)
  inside = is_contained(pos, rot, torch.zeros_like(pos))
  largest = offsets[inside].max().item() * 1e3
  assert largest == pytest.approx(expected_mm, abs=0.05)


def reference_contained(p, r, tray) -> bool:
  """The seed's two lines, one environment at a time."""
  extent = np.abs(r) @ np.full(3, HALF)
  return bool(np.all(np.abs(p[:2] - tray[:2]) + extent[:2] <= INNER))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_is_contained_matches_per_env_reference(dtype):
  rng = np.random.default_rng()
  n = 5000
  rots = Rotation.random(n, random_state=rng.integers(1 << 31)).as_matrix()
  # Half of the cubes nearly level and yawed, half fully random in 3-D.
  yaws = Rotation.from_euler("z", rng.uniform(-180, 180, (n // 2, 1)), degrees=True)
  rots[: n // 2] = yaws.as_matrix()
  tray = rng.uniform(-0.5, 0.5, (n, 3))
  pos = tray + rng.uniform(-0.04, 0.04, (n, 3))
  got = is_contained(
    torch.tensor(pos, dtype=dtype),
    torch.tensor(rots, dtype=dtype),
    torch.tensor(tray, dtype=dtype),
  ).numpy()
  ref = np.array([reference_contained(pos[i], rots[i], tray[i]) for i in range(n)])
  # float32 may flip cases within rounding of the boundary only.
  margin = np.abs(
    np.max(
      np.abs(pos[:, :2] - tray[:, :2]) + (np.abs(rots) @ np.full(3, HALF))[:, :2],
      axis=1,
    )
    - INNER
  )
  decisive = margin > (1e-6 if dtype == torch.float32 else 1e-12)
  assert 0.2 < ref.mean() < 0.8  # Both answers are well represented.
  np.testing.assert_array_equal(got[decisive], ref[decisive])


# Synthetic states straight into the evaluator.


def placed_state(n: int = 1) -> CubeTrayState:
  """A cube resting at the centre of a tray whose floor top is at z = 0."""
  return CubeTrayState(
    cube_pos_w=torch.tensor([[0.0, 0.0, HALF]] * n),
    cube_rot_w=torch.eye(3).expand(n, 3, 3).clone(),
    cube_lin_vel_w=torch.zeros(n, 3),
    cube_ang_vel_w=torch.zeros(n, 3),
    tray_pos_w=torch.zeros(n, 3),
    tray_floor_z=torch.zeros(n),
    floor_normal_force=torch.full((n,), 0.49),
    robot_contact=torch.zeros(n, dtype=torch.bool),
  )


def test_each_condition_fails_with_its_reason():
  cases = {
    "robot contact": (
      "robot_contact",
      lambda s: s.robot_contact.fill_(True),
      Reason.ROBOT_CONTACT,
    ),
    "corner outside": (
      "cube_pos_w",
      lambda s: s.cube_pos_w[:, 0].fill_(0.031),
      Reason.CONTAINMENT,
    ),
    "no contact force": (
      "floor_normal_force",
      lambda s: s.floor_normal_force.fill_(0.0),
      Reason.SUPPORT,
    ),
    "3 mm above floor": (
      "cube_pos_w",
      lambda s: s.cube_pos_w[:, 2].fill_(HALF + 0.003),
      Reason.SUPPORT,
    ),
    "linear speed": (
      "cube_lin_vel_w",
      lambda s: s.cube_lin_vel_w[:, 1].fill_(0.02),
      Reason.MOVEMENT,
    ),
    "angular speed": (
      "cube_ang_vel_w",
      lambda s: s.cube_ang_vel_w[:, 2].fill_(0.2),
      Reason.MOVEMENT,
    ),
  }
  base = evaluate_conditions(placed_state())
  assert bool(base["placed"]) and int(base["reason"]) == Reason.NONE
  for name, (_, mutate, reason) in cases.items():
    state = placed_state()
    mutate(state)
    verdict = evaluate_conditions(state)
    assert not bool(verdict["placed"]), name
    assert int(verdict["reason"]) == reason, name


def test_settling_clock_restarts_after_a_break():
  dt = 0.05
  evaluator = CubeTrayEvaluator(1, "cpu")
  broken = placed_state()
  broken.cube_lin_vel_w[:, 0] = 0.02
  # 0.4 s stable, one broken step, then 0.1 s: no success anywhere.
  for state in [placed_state()] * 8 + [broken] + [placed_state()] * 2:
    verdict = evaluator.update(state, dt)
    assert not bool(verdict["success"])
  assert int(verdict["reason"]) == Reason.SETTLING
  assert float(verdict["settled_time"]) == pytest.approx(0.1)
  # Eight more stable steps make 0.5 s of continuous settling: success.
  for k in range(8):
    verdict = evaluator.update(placed_state(), dt)
    assert bool(verdict["success"]) == (k == 7)
  assert int(verdict["outcome"]) == Outcome.SUCCESS


@pytest.mark.parametrize(
  "corrupt",
  [
    lambda s: s.cube_pos_w[:, 0].fill_(float("nan")),
    lambda s: s.cube_ang_vel_w[:, 1].fill_(float("inf")),
    lambda s: s.cube_rot_w.mul_(1.01),  # Not orthonormal.
    lambda s: s.cube_rot_w[:, :, 2].neg_(),  # A reflection: det = -1.
    lambda s: s.cube_rot_w[:, 0, 1].fill_(0.05),  # Sheared.
  ],
)
def test_invalid_state_is_indeterminate(corrupt):
  state = placed_state(2)
  corrupt(state)
  evaluator = CubeTrayEvaluator(2, "cpu")
  for _ in range(12):
    verdict = evaluator.update(state, 0.05)
  assert verdict["outcome"].tolist() == [Outcome.INDETERMINATE] * 2
  assert verdict["reason"].tolist() == [Reason.INDETERMINATE] * 2
  assert not verdict["success"].any()


# Reset-only fixtures in the simulated scene (MuJoCo Warp on CPU).


@pytest.fixture(scope="module")
def env():
  from mjlab.envs import ManagerBasedRlEnv

  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg

  cfg = cube_tray_env_cfg(arm_action="joint", randomize=False, num_envs=2)
  environment = ManagerBasedRlEnv(cfg, device="cpu")
  yield environment
  environment.close()


def _set_cube(env, pos_env, lin_vel=(0.0, 0.0, 0.0)):
  """Write the cube's state directly; positions are in the env frame."""
  state = torch.zeros(env.num_envs, 13)
  state[:, :3] = torch.tensor(pos_env) + env.scene.env_origins
  state[:, 3] = 1.0
  state[:, 7:10] = torch.tensor(lin_vel)
  env.scene["cube"].write_root_state_to_sim(state)


def _verdict(env):
  from mjlab_tasks.cube_tray.mdp import CubeTrayNames, read_cube_tray_state

  env.sim.forward()
  env.scene.update(dt=env.physics_dt)
  names = CubeTrayNames()
  return evaluate_conditions(read_cube_tray_state(env, names))


def _settle(env, seconds: float) -> None:
  for _ in range(round(seconds / env.physics_dt)):
    env.sim.step()


def _tray_centre(env):
  from mjlab_tasks.cube_tray.env_cfg import TRAY_FLOOR

  tray = (env.scene["tray"].data.root_link_pos_w - env.scene.env_origins)[0].tolist()
  return tray[0], tray[1], tray[2] + TRAY_FLOOR


def test_fixture_resting_cube_is_placed(env):
  env.reset()
  x, y, floor = _tray_centre(env)
  _set_cube(env, (x, y, floor + HALF))
  _settle(env, 0.3)
  verdict = _verdict(env)
  assert verdict["placed"].all(), verdict


def test_fixture_floating_cube_is_not_supported(env):
  env.reset()
  x, y, floor = _tray_centre(env)
  _set_cube(env, (x, y, floor + HALF + 0.001))  # 1 mm gap: within 2 mm, no contact.
  verdict = _verdict(env)
  assert not verdict["supported"].any()
  assert verdict["contained"].all() and verdict["released"].all()
  assert verdict["reason"].tolist() == [Reason.SUPPORT] * 2


def test_fixture_cube_touching_a_pad_is_not_released(env):
  env.reset()
  env.sim.forward()
  robot = env.scene["robot"]
  pad = robot.indexing.geom_ids[robot.find_geoms("left_pad")[0][0]]
  pad_pos = env.sim.data.geom_xpos[0, pad]
  closing_axis = env.sim.data.geom_xmat[0, pad].reshape(3, 3)[:, 0]
  # Cube on the pad's inner side, 1 mm into the pad (pad half thickness 3 mm).
  centre = pad_pos - closing_axis * (0.003 + HALF - 0.001) - env.scene.env_origins[0]
  _set_cube(env, centre.tolist())
  verdict = _verdict(env)
  assert not verdict["released"].any()
  assert verdict["reason"].tolist() == [Reason.ROBOT_CONTACT] * 2


def test_fixture_moving_cube_fails_on_speed(env):
  env.reset()
  x, y, floor = _tray_centre(env)
  _set_cube(env, (x, y, floor + HALF))
  _settle(env, 0.3)
  cube = env.scene["cube"]
  state = torch.cat([cube.data.root_link_pose_w, torch.zeros(env.num_envs, 6)], dim=-1)
  state[:, 7:10] = torch.tensor([0.02, 0.0, 0.0])
  cube.write_root_state_to_sim(state)
  verdict = _verdict(env)
  assert verdict["contained"].all() and verdict["supported"].all()
  assert not verdict["slow"].any()
  assert verdict["reason"].tolist() == [Reason.MOVEMENT] * 2
