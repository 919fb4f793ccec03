"""Cartesian IK, joint-step limiting, gripper and pinch hold in the mjlab env.

Runs MuJoCo Warp on the CPU with 2 environments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from assets.ur5_rg2.kinematics import ArmKinematics, tool_down_rotation
from mjlab_tasks.common.actions import limit_joint_step
from mjlab_tasks.common.mdp import wrist_force
from mjlab_tasks.common.scene import ROBOT, cube_entity_cfg, make_robot_env_cfg
from mjlab_tasks.engine import make_env

NUM_ENVS = 2
CUBE_POS = (0.5, 0.0, 0.02)
HOME_Q = np.array([0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0])
ARM = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")


def test_limit_joint_step_matches_reference(rng):
  dq = rng.normal(scale=0.05, size=(64, 6))
  dq[::7] *= 0.01  # Some rows already within the bound.
  ref = np.stack([row * min(1.0, 0.025 / np.abs(row).max()) for row in dq])
  out = limit_joint_step(torch.tensor(dq), 0.025).numpy()
  np.testing.assert_allclose(out, ref, rtol=1e-12)


# MuJoCo Warp on the CPU costs about 40 s here; its stepping parity with the
# C engine is in the fast tier (test_engines.py).
@pytest.fixture(
  scope="module", params=[pytest.param("warp", marks=pytest.mark.slow), "mujoco"]
)
def env(request):
  """Tool 20 mm above the table around a 40 mm cube, gripper open; each engine."""
  ik = ArmKinematics()
  sol = ik.solve(np.array(CUBE_POS), tool_down_rotation(0.0), HOME_Q)
  assert sol.converged
  cfg = make_robot_env_cfg(
    entities={"cube": cube_entity_cfg(pos=CUBE_POS)}, num_envs=NUM_ENVS
  )
  joint_pos = dict(zip(ARM, sol.q.tolist(), strict=True))
  joint_pos[".*_finger_joint"] = 0.0275
  cfg.scene.entities[ROBOT].init_state.joint_pos = joint_pos
  environment = make_env(cfg, device="cpu", engine=request.param)
  yield environment
  environment.close()


def _step(env, arm: torch.Tensor, gripper: float, steps: int) -> None:
  action = torch.zeros(env.num_envs, 7)
  action[:, :6] = arm
  action[:, 6] = gripper
  for _ in range(steps):
    env.step(action)


def _tool(env):
  return env.action_manager.get_term("arm").tool_pose_w()


def test_cartesian_actions_move_tool_by_commanded_amount(env):
  env.reset()
  pos0, quat0 = (t.clone() for t in _tool(env))
  arm = torch.tensor([[0.0, 1.0, 1.0, 0, 0, 0], [0.0, -0.5, 1.0, 0, 0, 2.0]])
  _step(env, arm, 1.0, 8)
  _step(env, torch.zeros(6), 1.0, 6)  # Let the servo settle.
  pos, quat = _tool(env)
  moved = (pos - pos0).numpy()
  commanded = 8 * 0.005 * arm[:, :3].numpy()
  # Stated tolerance: 1 mm after settling.
  np.testing.assert_allclose(moved, commanded, atol=1e-3)
  # Env 1 turned 8 x 2 degrees about world z; env 0 did not turn.
  from mjlab.utils.lab_api.math import quat_error_magnitude

  turned = quat_error_magnitude(quat, quat0).numpy()
  assert turned[0] < math.radians(0.2)
  assert turned[1] == pytest.approx(math.radians(16.0), abs=math.radians(0.5))


def test_joint_step_bounded_and_direction_preserved(env):
  env.reset()
  term = env.action_manager.get_term("arm")
  saturated = 0
  for _ in range(3):
    _step(env, torch.tensor([0.0, 0.0, 20.0, 0.0, 0.0, 0.0]), 1.0, 1)
    limited, unlimited = term.limited_dq, term.unlimited_dq
    assert limited.abs().max() <= 0.025 + 1e-7
    cos = torch.nn.functional.cosine_similarity(limited, unlimited, dim=-1)
    assert torch.all(cos > 1 - 1e-6)
    saturated += int((unlimited.abs().amax(dim=-1) > 0.025).sum())
  # The case must exercise the limiter, or the test proves nothing.
  assert saturated > 0


def _opening(env) -> np.ndarray:
  robot = env.scene[ROBOT]
  ids, _ = robot.find_joints((".*_finger_joint",))
  q = robot.data.joint_pos[:, ids]
  return (q.sum(dim=-1) + 0.055).numpy()


def test_gripper_opening_tracks_command(env):
  env.reset()
  for command in (0.0, 0.5, 1.0, 0.2):
    _step(env, torch.zeros(6), command, 10)
    expected = (command + 1.0) / 2.0 * 0.110
    np.testing.assert_allclose(_opening(env), expected, atol=1e-3)


@pytest.mark.parametrize(  # Warp: 50 s on 2 cores; the C engine covers it fast.
  "env", ["mujoco", pytest.param("warp", marks=pytest.mark.slow)], indirect=True
)
def test_pinch_lifts_and_holds_cube(env):
  env.reset()
  cube = env.scene["cube"]
  _step(env, torch.zeros(6), -1.0, 10)  # Close on the cube.
  # Squeezing forces cancel in the net wrist reading while the cube rests.
  assert torch.all(wrist_force(env).norm(dim=-1) < 1.0)
  _step(env, torch.tensor([0.0, 0.0, 1.0, 0, 0, 0]), -1.0, 20)  # Lift 100 mm.
  _step(env, torch.zeros(6), -1.0, 4)
  rel_start = (cube.data.root_link_pos_w - _tool(env)[0])[:, 2].clone()
  _step(env, torch.zeros(6), -1.0, 40)  # Hold 2 s.
  rel_end = (cube.data.root_link_pos_w - _tool(env)[0])[:, 2]
  slip = (rel_start - rel_end).numpy()
  height = (cube.data.root_link_pos_w - env.scene.env_origins)[:, 2].numpy()
  print(f"pinch slip over 2 s [mm]: {slip * 1e3}")
  assert np.all(height > CUBE_POS[2] + 0.09)
  assert np.all(np.abs(slip) < 0.002)
  # Holding the 50 g cube, the hand feels its weight (0.49 N) downwards.
  fz = wrist_force(env)[:, 2].numpy()
  np.testing.assert_allclose(fz, -0.05 * 9.81, atol=0.05)


def test_non_finite_actions_raise_with_env_ids(env):
  env.reset()
  for bad in (float("nan"), float("inf")):
    action = torch.zeros(env.num_envs, 7)
    action[1, 2] = bad
    with pytest.raises(ValueError, match=r"environment\(s\) \[1\]"):
      env.step(action)
    action = torch.zeros(env.num_envs, 7)
    action[0, 6] = bad
    with pytest.raises(ValueError, match=r"'gripper'.*\[0\]"):
      env.step(action)


def _pose_arm(env, q: np.ndarray) -> None:
  """Write arm joint positions [NUM_ENVS, 6] (zero velocity) and refresh."""
  robot = env.scene[ROBOT]
  ids, _ = robot.find_joints(ARM, preserve_order=True)
  pos = robot.data.joint_pos.clone()
  pos[:, ids] = torch.tensor(q, dtype=pos.dtype)
  robot.write_joint_state_to_sim(pos, torch.zeros_like(pos))
  env.sim.forward()


def test_torch_jacobian_matches_mj_jac_site(env, rng):
  """The action term's Jacobian (torch, from joint axes and anchors) against
  C MuJoCo's mj_jacSite at random arm configurations."""
  import mujoco

  env.reset()
  term = env.action_manager.get_term("arm")
  model = env.sim.mj_model
  data = mujoco.MjData(model)
  jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
  dofs = term._dof_ids.numpy()
  for _ in range(4):
    _pose_arm(env, HOME_Q + rng.uniform(-1.0, 1.0, (NUM_ENVS, 6)))
    got = term.jacobian().double().numpy()
    for i in range(NUM_ENVS):
      data.qpos[:] = env.sim.data.qpos[i].double().numpy()
      mujoco.mj_kinematics(model, data)
      mujoco.mj_comPos(model, data)
      mujoco.mj_jacSite(model, data, jacp, jacr, term._site_id)
      ref = np.vstack([jacp[:, dofs], jacr[:, dofs]])
      # float32 poses with lever arms under 1 m: 1e-5 is a few float32 ulps.
      np.testing.assert_allclose(got[i], ref, atol=1e-5)
  env.reset()


def test_ik_round_trip_from_random_configurations(rng):
  """FK then IK then FK on the CPU kinematics: random reachable tool poses
  (from random joint configurations) are reached to the solver's tolerance
  from a perturbed first guess."""
  ik = ArmKinematics()
  solved = 0
  for _ in range(20):
    q_true = HOME_Q + rng.uniform(-0.6, 0.6, 6)
    pos, rot = ik.tool_pose(q_true)
    start = q_true + rng.uniform(-0.15, 0.15, 6)  # A nearby first guess.
    sol = ik.solve(pos, rot, start)
    assert sol.converged, (q_true, sol)
    got_pos, got_rot = ik.tool_pose(sol.q)
    assert np.linalg.norm(got_pos - pos) < 1e-4
    cos = (np.trace(got_rot.T @ rot) - 1) / 2
    assert math.acos(min(1.0, cos)) < 1e-3
    solved += 1
  assert solved == 20


def test_ik_gets_past_the_elbow_trap():
  """A reachable pose (found by the random test above, seed
  8344196166923100063) whose lightly damped solve, from 3 of these 300
  first guesses within 0.15 rad, crossed the straight elbow and cycled 12 to
  30 mm short: the retry with RETRY_DAMPING reaches it from every one."""
  ik = ArmKinematics()
  q_true = np.array(
    [0.4495254, -2.0391838, 1.2211772, -1.6293526, -1.1679128, -0.5528906]
  )
  pos, rot = ik.tool_pose(q_true)
  guesses = q_true + np.random.default_rng(0).uniform(-0.15, 0.15, (300, 6))
  for start in guesses:
    sol = ik.solve(pos, rot, start)
    assert sol.converged, (start, sol)
    assert np.linalg.norm(ik.tool_pose(sol.q)[0] - pos) < 1e-4


def test_ik_from_a_near_singular_guess_does_not_diverge():
  """A reachable pose and a first guess 0.15 rad away where the lightly
  damped step reaches 12.7 rad (found by a CI run's random seed): the bounded
  step reaches the pose instead of the joint limits."""
  ik = ArmKinematics()
  q_true = np.array(
    [-0.40302861, -2.08274453, 1.29395612, -1.49621402, -1.89050473, -0.00670279]
  )
  start = q_true + np.array(
    [0.13878964, -0.13148063, -0.05743357, -0.10731262, -0.13489856, 0.09433819]
  )
  pos, rot = ik.tool_pose(q_true)
  unbounded = ik.solve(pos, rot, start, max_step=np.inf, retry=False)
  assert not unbounded.converged  # The case is the one that diverged.
  sol = ik.solve(pos, rot, start)
  assert sol.converged, sol
  assert np.linalg.norm(ik.tool_pose(sol.q)[0] - pos) < 1e-4


def test_target_lead_is_bounded_by_its_rule(env, rng):
  """Random large Cartesian actions: after each action the target equals
  the rule computed in NumPy from the tool pose the action met (the
  previous target plus the delta, pulled back to at most 20 mm ahead)."""
  env.reset()
  term = env.action_manager.get_term("arm")
  cfg = term.cfg
  previous = None
  for _ in range(6):
    tool = _tool(env)[0].double().numpy().copy()
    arm = torch.tensor(rng.uniform(-6.0, 6.0, (NUM_ENVS, 6)), dtype=torch.float32)
    arm[:, 3:] *= 0.1  # Small turns keep the arm away from its limits.
    _step(env, arm, 1.0, 1)
    base = tool if previous is None else previous
    lead = base + arm[:, :3].double().numpy() * cfg.translation_scale - tool
    norm = np.linalg.norm(lead, axis=1, keepdims=True)
    expected = tool + lead * np.minimum(1.0, cfg.max_target_lead / norm)
    got = term.desired_pos_w.double().numpy()
    np.testing.assert_allclose(got, expected, atol=2e-6)
    assert (np.linalg.norm(got - tool, axis=1) <= cfg.max_target_lead + 1e-6).all()
    previous = got.copy()
  env.reset()


@pytest.mark.parametrize(
  "env", ["mujoco", pytest.param("warp", marks=pytest.mark.slow)], indirect=True
)
def test_blocked_arm_does_not_wind_up(env):
  """Pushing the tool 200 mm into the table for 2 s: the target stays within
  20 mm of the tool, so 8 steps up (40 mm) raise the tool about 20 mm at
  once (measured: blocked 4 mm down, rises 19.99 mm on both engines). A
  wound-up target (200 mm below) would not move it at all. (Warp on the CPU
  takes 80 s here, so its run is in the slow tier.)"""
  env.reset()
  term = env.action_manager.get_term("arm")
  _step(env, torch.zeros(6), 1.0, 2)
  for _ in range(40):
    _step(env, torch.tensor([0.0, 0.0, -1.0, 0, 0, 0]), 1.0, 1)
    lead = torch.linalg.vector_norm(term.desired_pos_w - _tool(env)[0], dim=-1)
    assert (lead <= 0.02 + 1e-4).all()
  blocked_z = _tool(env)[0][:, 2].clone()
  commanded_down = 40 * 0.005
  assert ((blocked_z - 0.02) > -commanded_down / 2).all()  # Really blocked.
  _step(env, torch.tensor([0.0, 0.0, 1.0, 0, 0, 0]), 1.0, 8)
  _step(env, torch.zeros(6), 1.0, 6)
  rise = (_tool(env)[0][:, 2] - blocked_z).numpy()
  target_rise = (term.desired_pos_w[:, 2] - blocked_z).numpy()
  np.testing.assert_allclose(rise, target_rise, atol=2e-3)
  assert (rise > 0.015).all()
  env.reset()
