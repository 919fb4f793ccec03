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
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

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


def print_rows(rows: list[dict]) -> None:
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


def main(args: Args) -> int:
  device, engine = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  from mjlab_tasks.common.runtime import quiet_warp

  quiet_warp()

  from mjlab_tasks.common import robot_check as rc

  env = rc.build_env(args.num_envs, args.cube_mass, args.seed, device, engine)
  xy, yaw = rc.place_cubes(env, args.seed)
  with tqdm(total=rc.STEPS, desc="check_robot", unit="step") as bar:
    m = rc.grasp_lift_hold(env, on_step=lambda: bar.update(1))
  rows, n, held = rc.report_rows(xy, yaw, m), args.num_envs, m["held"]
  report = {
    "args": {k: str(v) for k, v in asdict(args).items()},
    "device": device,
    "engine": engine,
    "num_envs": n,
    "wall_time_s": round(m["wall"], 3),
    "env_steps_per_s": round(n * rc.STEPS / m["wall"], 2),
    "held_fraction": float(held.float().mean()),
    "envs": rows,
  }
  print_rows(rows)
  print(
    f"held {int(held.sum())}/{n} cubes; {report['env_steps_per_s']} env steps/s on "
    f"{device}, {engine} engine (policy 20 Hz, physics 1 kHz)."
  )
  overflow, nonfinite = m["overflow"], m["nonfinite"]
  if bool(overflow.any() | nonfinite.any()):
    print(
      f"WARNING: contact overflow in envs {overflow.nonzero().flatten().tolist()}, "
      f"non-finite state in envs {nonfinite.nonzero().flatten().tolist()}."
    )
  if out_dir is not None:
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out_dir / 'report.json'}")
  env.close()
  return 0 if bool(held.all()) else 1


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
