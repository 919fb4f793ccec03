"""The shaping and observation terms the training configurations add, each
against an independent reference: a hand computation of the bounds, SciPy
rotations, a tool pressed on the table (C engine, 2 to 4 environments)."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from assets.ur5_rg2 import TCP_SITE_NAME
from mjlab_tasks.common import mdp as common_mdp
from mjlab_tasks.cube_tray import mdp
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.engine import make_env


def _env(num_envs: int, seed: int, **kwargs):
  cfg = cube_tray_env_cfg(num_envs=num_envs, play=True, **kwargs)
  cfg.seed = seed
  with contextlib.redirect_stdout(io.StringIO()):
    env = make_env(cfg)
  env.reset()
  return env


def test_action_beyond_bounds_against_a_hand_computation(rng):
  env = _env(3, int(rng.integers(1 << 31)))
  try:
    # 5 mm units, 20 mm lead from the previous target: +-8; 1 degree units,
    # 4 degrees: +-4; the gripper: +-1.
    bound = np.array([8.0, 8.0, 8.0, 4.0, 4.0, 4.0, 1.0])
    actions = rng.normal(0.0, 6.0, size=(3, 7)).astype(np.float32)
    actions[0] = 0.5 * bound  # inside: no penalty
    env.step(torch.from_numpy(actions))
    expected = np.clip(np.abs(actions) - bound, 0.0, None).sum(axis=1)
    got = common_mdp.action_beyond_bounds(env).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert got[0] == 0.0
  finally:
    env.close()


def test_target_lead_is_zero_at_reset_and_full_when_pressing_on_the_table(rng):
  """Driving the tool down into the table (or the tray's rim) holds the target
  ``max_target_lead`` below it: the penalty is 1 and the observation is
  that lead in the base frame (SciPy); free motion leads by less."""
  env = _env(2, int(rng.integers(1 << 31)))
  try:
    assert (common_mdp.target_lead(env) == 0).all()  # no target before an action
    arm = env.action_manager.get_term("arm")
    down = torch.zeros(2, 7)
    down[:, 2] = -8.0
    down[:, 6] = 1.0
    env.step(down)
    moving = common_mdp.target_lead(env)
    assert (moving > 0.05).all() and (moving < 0.9).all()
    for _ in range(60):  # 3 s: the tool starts about 0.3 m above the table
      env.step(down)
    # The tray lies at random and the hand may come down on its rim, then
    # slide off it (seed 9129582949205988703: falling at step 61, lead
    # 0.84): press until every tool has stopped moving down.
    site = mdp.site_id(env, TCP_SITE_NAME)
    for _ in range(60):
      before = env.sim.data.site_xpos[:, site, 2].clone()
      env.step(down)
      if bool(((before - env.sim.data.site_xpos[:, site, 2]).abs() < 1e-4).all()):
        break
    np.testing.assert_allclose(common_mdp.target_lead(env).numpy(), 1.0, atol=0.02)
    base = env.scene["robot"].data.root_link_quat_w.double().numpy()
    tool = env.sim.data.site_xpos[:, mdp.site_id(env, TCP_SITE_NAME)]
    lead_w = (arm.desired_pos_w - tool).double().numpy()
    expected = Rotation.from_quat(base, scalar_first=True).inv().apply(lead_w)
    got = common_mdp.target_lead_b(env).double().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.all(lead_w[:, 2] < -0.019)  # the lead points into the table
  finally:
    env.close()


def test_cube_yaw_to_tool_against_scipy(rng):
  """Random cube yaws (the tool as reset left it): the quarter turn folded
  into [-pi/4, pi/4) that lines the tool's closing axis up with the cube."""
  env = _env(4, int(rng.integers(1 << 31)), randomize=False)
  try:
    yaws = rng.uniform(-math.pi, math.pi, size=4)
    cube = env.scene["cube"]
    state = torch.cat([cube.data.root_link_pose_w, cube.data.root_link_vel_w], dim=-1)
    quat = Rotation.from_euler("z", yaws[:, None]).as_quat(scalar_first=True)
    state[:, 3:7] = torch.as_tensor(quat, dtype=state.dtype)
    cube.write_root_state_to_sim(state)
    env.sim.forward()
    got = mdp.cube_yaw_to_tool(env, TCP_SITE_NAME)[:, 0].double().numpy()
    sid = mdp.site_id(env, TCP_SITE_NAME)
    tool = env.sim.data.site_xmat[:, sid].reshape(-1, 3, 3).double().numpy()
    tool_yaw = np.arctan2(tool[:, 1, 0], tool[:, 0, 0])
    for i in range(4):
      # Every quarter turn of the cube's yaw is the same cube: the answer is
      # the candidate turn of least magnitude.
      turns = yaws[i] + np.arange(-4, 5) * math.pi / 2 - tool_yaw[i]
      turns = (turns + math.pi) % (2 * math.pi) - math.pi
      expected = turns[np.argmin(np.abs(turns))]
      assert abs(got[i] - expected) < 1e-5 or abs(abs(got[i]) - math.pi / 4) < 1e-5
      assert -math.pi / 4 - 1e-6 <= got[i] < math.pi / 4 + 1e-6
  finally:
    env.close()


def test_stage_flags_on_placed_cubes():
  """The cube put at the tool centre is reached, not grasped; a cube resting
  at the tray's centre, untouched, is in the tray and released, and one on
  the table is not."""
  env = _env(2, 0, randomize=False)
  try:
    sid = mdp.site_id(env, TCP_SITE_NAME)
    cube = env.scene["cube"]
    state = torch.cat([cube.data.root_link_pose_w, cube.data.root_link_vel_w], dim=-1)
    state[0, :3] = env.sim.data.site_xpos[0, sid]
    tray = env.scene["tray"].data.root_link_pos_w[1]
    state[1, :3] = tray + torch.tensor([0.0, 0.0, 0.005 + 0.02])
    state[:, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    state[:, 7:] = 0.0
    cube.write_root_state_to_sim(state)
    env.sim.forward()
    flags = {s: mdp.stage_flag(env, s, TCP_SITE_NAME).tolist() for s in mdp.STAGES}
    assert flags["reached"] == [1.0, 0.0]
    assert flags["grasped"] == [0.0, 0.0] and flags["over_tray"] == [0.0, 0.0]
    hold = torch.zeros(2, 7)
    hold[:, 6] = 1.0  # gripper open; the arm holds its pose
    for _ in range(10):  # 0.5 s: env 0's cube falls to the table
      env.step(hold)
    flags = {s: mdp.stage_flag(env, s, TCP_SITE_NAME).tolist() for s in mdp.STAGES}
    assert flags["in_tray"] == [0.0, 1.0] and flags["released"] == [0.0, 1.0]
    assert flags["lifted"] == [0.0, 0.0]
  finally:
    env.close()
