"""Check the UR5 + RG2 control stack: grasp, lift and hold a cube in every env.

Each environment gets a cube at a random position and yaw on the table; the
tool starts around it (joint positions from IK on the CPU replica). The
script then closes the gripper, lifts 100 mm with Cartesian actions and holds
for 2 s, and reports per environment: lift tracking error, slip of the cube
in the pinch, and the wrist force while holding.

  python scripts/check_robot.py --num-envs 4
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_folder,
  create_folder,
  fail,
  parse,
)
from tqdm import tqdm

LIFT_STEPS = 20  # 20 x 5 mm = 100 mm.
CLOSE_STEPS = 10
SETTLE_STEPS = 4
HOLD_STEPS = 40  # 2 s at 20 Hz.


@dataclass
class Args:
  num_envs: int = 4
  """Number of parallel environments."""
  device: str | None = None
  """Torch/Warp device, e.g. cpu or cuda:0 (default: cuda:0 when available)."""
  engine: str | None = None
  """Physics engine: warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU, deterministic).
  Default: warp on CUDA, mujoco on CPU."""
  seed: int = 0
  """Seed for the cube placements."""
  output: Path | None = None
  """Folder for report.json (must not exist yet); nothing is written if unset."""
  cube_mass: float = 0.05
  """Cube mass [kg] (40 mm cube)."""


def check_args(args: Args) -> tuple[str, str]:
  """Every flag checked before anything is built: (device, engine)."""
  check_at_least(1, num_envs=args.num_envs)
  if not args.cube_mass > 0:
    fail(f"--cube-mass must be positive, got {args.cube_mass}.")
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  if args.output is not None:
    check_new_folder(args.output)
  return device, engine


def main(args: Args) -> int:
  device, engine = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  from mjlab_tasks.common.runtime import quiet_warp

  quiet_warp()

  from assets.ur5_rg2 import ARM_JOINT_NAMES
  from assets.ur5_rg2.kinematics import ArmKinematics, tool_down_rotation
  from mjlab_tasks.common.c_engine import make_env
  from mjlab_tasks.common.mdp import physics_health, wrist_force
  from mjlab_tasks.common.scene import ROBOT, cube_entity_cfg, make_robot_env_cfg

  cfg = make_robot_env_cfg(
    entities={"cube": cube_entity_cfg(mass=args.cube_mass)}, num_envs=args.num_envs
  )
  cfg.seed = args.seed
  env = make_env(cfg, device=device, engine=engine)
  env.reset()
  robot, cube = env.scene[ROBOT], env.scene["cube"]
  arm_term = env.action_manager.get_term("arm")

  # Place cubes and start the tool around them (CPU planning, once per env).
  rng = np.random.default_rng(args.seed)
  n = args.num_envs
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

  phases = (
    ("close", CLOSE_STEPS, 0.0),
    ("lift", LIFT_STEPS, 1.0),
    ("settle", SETTLE_STEPS, 0.0),
    ("hold", HOLD_STEPS, 0.0),
  )
  action = torch.zeros(n, 7, device=device)
  action[:, 6] = -1.0
  marks: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
  overflow_seen = torch.zeros(n, dtype=torch.bool, device=device)
  nonfinite_seen = torch.zeros(n, dtype=torch.bool, device=device)
  start = time.perf_counter()
  with tqdm(total=sum(p[1] for p in phases), desc="check_robot", unit="step") as bar:
    for name, steps, lift in phases:
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
        bar.update(1)
  wall = time.perf_counter() - start
  tool_end, cube_end = arm_term.tool_pose_w()[0], cube.data.root_link_pos_w
  tool_lift0 = marks["lift_start"][0]
  tool_hold0, cube_hold0 = marks["hold_start"]
  lift_error = ((tool_hold0 - tool_lift0)[:, 2] - LIFT_STEPS * 0.005).abs()
  slip = (cube_hold0 - tool_hold0)[:, 2] - (cube_end - tool_end)[:, 2]
  lifted = (cube_end - env.scene.env_origins)[:, 2] - 0.02
  force_z = wrist_force(env)[:, 2]
  held = (lifted > 0.09) & (slip.abs() < 0.002) & ~nonfinite_seen

  rows = []
  for i in range(n):
    rows.append(
      {
        "env": i,
        "cube_xy": xy[i].round(4).tolist(),
        "cube_yaw_deg": round(math.degrees(yaw[i]), 2),
        "lift_tracking_error_mm": round(float(lift_error[i]) * 1e3, 3),
        "cube_lifted_mm": round(float(lifted[i]) * 1e3, 2),
        "slip_over_2s_mm": round(float(slip[i]) * 1e3, 3),
        "wrist_force_z_N": round(float(force_z[i]), 4),
        "held": bool(held[i]),
        "contact_overflow": bool(overflow_seen[i]),
        "nonfinite_state": bool(nonfinite_seen[i]),
      }
    )
  report = {
    "args": {k: str(v) for k, v in asdict(args).items()},
    "device": device,
    "engine": engine,
    "num_envs": n,
    "wall_time_s": round(wall, 3),
    "env_steps_per_s": round(n * sum(p[1] for p in phases) / wall, 2),
    "held_fraction": float(held.float().mean()),
    "envs": rows,
  }
  header = ("env", "lift err mm", "lifted mm", "slip mm", "Fz N", "held")
  print(" | ".join(f"{h:>11}" for h in header))
  for r in rows:
    values = (
      r["env"],
      r["lift_tracking_error_mm"],
      r["cube_lifted_mm"],
      r["slip_over_2s_mm"],
      r["wrist_force_z_N"],
      r["held"],
    )
    print(" | ".join(f"{v!s:>11}" for v in values))
  print(
    f"held {int(held.sum())}/{n} cubes; {report['env_steps_per_s']} env steps/s on "
    f"{device}, {engine} engine (policy 20 Hz, physics 1 kHz)."
  )
  if bool(overflow_seen.any() | nonfinite_seen.any()):
    print(
      f"WARNING: contact overflow in envs {overflow_seen.nonzero().flatten().tolist()}, "
      f"non-finite state in envs {nonfinite_seen.nonzero().flatten().tolist()}."
    )
  if out_dir is not None:
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out_dir / 'report.json'}")
  env.close()
  return 0 if bool(held.all()) else 1


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
