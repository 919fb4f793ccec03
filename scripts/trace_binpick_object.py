"""One object's course through a bin-picking run, step by step, replayed.

Rebuilds a run of ``scripts/evaluate_binpick.py`` from its folder (same
bin, objects, seeds and episode length; C MuJoCo on the CPU, where runs are
deterministic) and steps the expert as the command does, printing one
object's state between ``--start`` and ``--end`` seconds: the expert's
stage and target in that environment, the object's position (environment
frame), speed, spin, the inclination of its axis (body z: a capsule's or a
cylinder's axis) from the horizontal, and whether the robot touches it.
The replay ends at ``--end``; stepped to the run's own end, it leaves every
object where the run's ``final_states.json`` has it (the same code only:
a source change is reported).

  python scripts/trace_binpick_object.py --run reports/bp41/fl_40 --env 3 \\
    --object obj_06 --start 15 --end 20.5
  python scripts/trace_binpick_object.py --run R --object obj_02 --start 60 \\
    --end 80 --every 5 --csv trace.csv
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cli_args import check_new_file, fail, parse
from probe_binpick_object import build_expert, read_run

COLUMNS = (
  "t_s", "stage", "target", "x_mm", "y_mm", "z_mm", "speed_mm_s", "spin_rad_s",
  "axis_inclination_deg", "robot_touches",
)  # fmt: skip


@dataclass
class Args:
  run: Path
  """Run folder of scripts/evaluate_binpick.py (report.json, final_states.json)."""
  object: str
  """The object to follow, by its slot name in the report (obj_00, ...)."""
  end: float
  """Simulated time to replay to [s]."""
  env: int = 0
  """Environment index in the run."""
  start: float = 0.0
  """First simulated time printed [s]."""
  every: int = 1
  """Print every N-th step (20 steps per second)."""
  csv: Path | None = None
  """Also write the rows here (a new file)."""


def check_args(args: Args):
  """Every flag checked, the run read, before anything is built."""
  if args.every < 1:
    fail(f"--every {args.every}: at least 1")
  if not 0.0 <= args.start <= args.end:
    fail(f"--start {args.start} and --end {args.end}: need 0 <= start <= end")
  if args.csv is not None:
    check_new_file(args.csv, "--csv")
  run = read_run(args.run, args.env, args.object)
  limit = int(run.config.get("max_steps", 3600)) * 0.05
  if args.end > limit + 1e-9:
    fail(f"--end {args.end}: the run's episode lasts {limit:g} s")
  return run


def source_note(run_dir: Path) -> str | None:
  """Why the replay may differ from the run: its sources differ from these."""
  from mjlab_tasks.common.runtime import source_snapshot

  path = run_dir / "source_snapshot.json"
  if not path.is_file():
    return "the run has no source_snapshot.json: it may be other code"
  then = json.loads(path.read_text()).get("sources_sha256")
  if then != source_snapshot()["sources_sha256"]:
    return "the run's sources differ from these: the replay may take another course"
  return None


def row(env, expert, obj, i: int, verdict, k: int) -> dict:
  """Object k of environment i now (environment frame)."""
  from mjlab.utils.lab_api.math import matrix_from_quat

  from experts.bin_pick.expert import Stage

  pos = (obj.data.root_link_pos_w[i] - env.scene.env_origins[i]).numpy()
  axis = matrix_from_quat(obj.data.root_link_quat_w[i : i + 1])[0, :, 2].numpy()
  incline = np.degrees(np.arcsin(min(1.0, abs(float(axis[2])))))
  return {
    "t_s": round(float(expert.time[i]), 3),
    "stage": Stage(int(expert.stage[i])).name.lower(),
    "target": int(expert.target_obj[i]),
    "x_mm": round(float(pos[0]) * 1000, 2),
    "y_mm": round(float(pos[1]) * 1000, 2),
    "z_mm": round(float(pos[2]) * 1000, 2),
    "speed_mm_s": round(
      float(np.linalg.norm(obj.data.root_link_lin_vel_w[i])) * 1000, 1
    ),
    "spin_rad_s": round(float(np.linalg.norm(obj.data.root_link_ang_vel_w[i])), 3),
    "axis_inclination_deg": round(float(incline), 1),
    "robot_touches": not bool(verdict["released"][i, k]),
  }


def replay(args: Args, run) -> list[dict]:
  """Step the expert as the command does, up to ``--end``; the rows kept."""
  from mjlab_tasks.common.verdict import task_verdict

  env, expert = build_expert(run.config)
  rows = []
  try:
    obj = env.scene[args.object]
    steps = round(args.end / env.step_dt)
    for n in range(1, steps + 1):
      env.step(expert.act())
      verdict = task_verdict(env)
      if n * env.step_dt >= args.start - 1e-9 and (n % args.every == 0 or n == steps):
        rows.append(row(env, expert, obj, args.env, verdict, run.index))
  finally:
    expert.close()
    env.close()
  return rows


def main(args: Args) -> int:
  run = check_args(args)
  note = source_note(args.run)
  if note is not None:
    print(f"note: {note}")
  rows = replay(args, run)
  print(" ".join(COLUMNS))
  for r in rows:
    print(" ".join(str(r[c]) for c in COLUMNS))
  if args.csv is not None:
    with args.csv.open("w", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=COLUMNS)
      writer.writeheader()
      writer.writerows(rows)
    print(f"wrote {args.csv}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
