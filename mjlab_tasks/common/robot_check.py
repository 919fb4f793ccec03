"""The control stack's grasp check: a cube at a random position and yaw in
every environment, the tool started around it (joint positions from IK on
the CPU replica), then close, lift 100 mm with Cartesian actions and hold
for 2 s; per environment the lift tracking error, the cube's slip in the
pinch and the wrist force while holding. ``scripts/check_robot.py`` is its
command line."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

LIFT_STEPS = 20  # 20 x 5 mm = 100 mm.
CLOSE_STEPS = 10
SETTLE_STEPS = 4
HOLD_STEPS = 40  # 2 s at 20 Hz.
PHASES = (
  ("close", CLOSE_STEPS, 0.0),
  ("lift", LIFT_STEPS, 1.0),
  ("settle", SETTLE_STEPS, 0.0),
  ("hold", HOLD_STEPS, 0.0),
)
STEPS = sum(p[1] for p in PHASES)


def build_env(num_envs: int, cube_mass: float, seed: int, device: str, engine: str):
  from mjlab_tasks.common.scene import cube_entity_cfg, make_robot_env_cfg
  from mjlab_tasks.engine import make_env

  cfg = make_robot_env_cfg(
    entities={"cube": cube_entity_cfg(mass=cube_mass)}, num_envs=num_envs
  )
  cfg.seed = seed
  env = make_env(cfg, device=device, engine=engine)
  env.reset()
  return env


def place_cubes(env, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Cubes at random places and yaws, the tool around each (CPU planning,
  once per environment); returns (xy [N, 2], yaw [N])."""
  from assets.ur5_rg2 import ARM_JOINT_NAMES
  from assets.ur5_rg2.kinematics import ArmKinematics, tool_down_rotation
  from mjlab_tasks.common.scene import ROBOT

  robot, cube, device = env.scene[ROBOT], env.scene["cube"], env.device
  rng = np.random.default_rng(seed)
  n = env.num_envs
  xy = np.stack([rng.uniform(0.40, 0.60, n), rng.uniform(-0.15, 0.15, n)], axis=1)
  yaw = rng.uniform(-math.pi / 2, math.pi / 2, n)
  ik = ArmKinematics()
  q_home = robot.data.default_joint_pos[0, :6].cpu().numpy()
  arm_q = np.zeros((n, 6))
  for i in range(n):
    target = np.array([xy[i, 0], xy[i, 1], 0.02])
    sol = ik.solve(target, tool_down_rotation(yaw[i]), q_home)
    if not sol.converged:
      raise RuntimeError(f"IK did not converge for env {i} (cube at {target}).")
    arm_q[i] = sol.q
  arm_ids, _ = robot.find_joints(ARM_JOINT_NAMES, preserve_order=True)
  q = robot.data.default_joint_pos.clone()
  q[:, arm_ids] = torch.tensor(arm_q, dtype=q.dtype, device=device)
  robot.write_joint_state_to_sim(q, torch.zeros_like(q))
  cube_state = torch.zeros(n, 13, device=device)
  cube_state[:, :2] = torch.tensor(xy, dtype=torch.float32, device=device)
  cube_state[:, 2] = 0.02
  cube_state[:, 3] = torch.tensor(np.cos(yaw / 2), dtype=torch.float32, device=device)
  cube_state[:, 6] = torch.tensor(np.sin(yaw / 2), dtype=torch.float32, device=device)
  cube_state[:, :3] += env.scene.env_origins
  cube.write_root_state_to_sim(cube_state)
  env.sim.forward()
  return xy, yaw


def grasp_lift_hold(env, on_step: Callable[[], None] | None = None) -> dict:
  """Close, lift, settle, hold; returns per-environment tensors (lift
  error, slip, lifted height, wrist force, held, health flags) and the wall
  time."""
  from mjlab_tasks.common.mdp import physics_health, wrist_force

  n, device = env.num_envs, env.device
  cube, arm_term = env.scene["cube"], env.action_manager.get_term("arm")
  action = torch.zeros(n, 7, device=device)
  action[:, 6] = -1.0
  marks: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
  overflow_seen = torch.zeros(n, dtype=torch.bool, device=device)
  nonfinite_seen = torch.zeros(n, dtype=torch.bool, device=device)
  start = time.perf_counter()
  for name, steps, lift in PHASES:
    action[:, 2] = lift
    marks[f"{name}_start"] = (
      arm_term.tool_pose_w()[0].clone(),
      cube.data.root_link_pos_w.clone(),
    )
    for _ in range(steps):
      env.step(action)
      health = physics_health(env)
      overflow_seen |= health["contact_overflow"]
      nonfinite_seen |= health["nonfinite"]
      if on_step is not None:
        on_step()
  wall = time.perf_counter() - start
  tool_end, cube_end = arm_term.tool_pose_w()[0], cube.data.root_link_pos_w
  tool_lift0 = marks["lift_start"][0]
  tool_hold0, cube_hold0 = marks["hold_start"]
  slip = (cube_hold0 - tool_hold0)[:, 2] - (cube_end - tool_end)[:, 2]
  lifted = (cube_end - env.scene.env_origins)[:, 2] - 0.02
  return {
    "lift_error": ((tool_hold0 - tool_lift0)[:, 2] - LIFT_STEPS * 0.005).abs(),
    "slip": slip,
    "lifted": lifted,
    "force_z": wrist_force(env)[:, 2],
    "held": (lifted > 0.09) & (slip.abs() < 0.002) & ~nonfinite_seen,
    "overflow": overflow_seen,
    "nonfinite": nonfinite_seen,
    "wall": wall,
  }


def report_rows(xy: np.ndarray, yaw: np.ndarray, m: dict) -> list[dict]:
  """One report row per environment."""
  return [
    {
      "env": i,
      "cube_xy": xy[i].round(4).tolist(),
      "cube_yaw_deg": round(math.degrees(yaw[i]), 2),
      "lift_tracking_error_mm": round(float(m["lift_error"][i]) * 1e3, 3),
      "cube_lifted_mm": round(float(m["lifted"][i]) * 1e3, 2),
      "slip_over_2s_mm": round(float(m["slip"][i]) * 1e3, 3),
      "wrist_force_z_N": round(float(m["force_z"][i]), 4),
      "held": bool(m["held"][i]),
      "contact_overflow": bool(m["overflow"][i]),
      "nonfinite_state": bool(m["nonfinite"][i]),
    }
    for i in range(len(xy))
  ]
