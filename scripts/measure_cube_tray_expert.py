"""Success rate of the cube-in-tray reference expert in either action space.

Runs ``experts.cube_tray.CubeTrayExpert`` in ``--num-envs`` environments of
the task's evaluation configuration (``cube_tray_env_cfg(arm_action=MODE,
end_on_success=True)``: 12 s episodes, randomized placements) until
``--episodes`` episodes have ended, each scored by the task's evaluator (its
``success`` verdict; a time-out is a failure). Prints the success rate, the
failure reasons, the time to success and the largest action component;
``--output`` also writes ``report.json`` with every episode.

  python scripts/measure_cube_tray_expert.py --num-envs 32 --episodes 256 --seed 0
  python scripts/measure_cube_tray_expert.py --mode joint --num-envs 4
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_folder,
  create_folder,
  parse,
)
from tqdm import tqdm


@dataclass
class Args:
  mode: Literal["cartesian", "joint"] = "cartesian"
  """The expert's action space: the task's normalized Cartesian deltas (the
  policy's) or joint targets."""
  num_envs: int = 4
  """Number of parallel environments."""
  episodes: int | None = None
  """Episodes to score in total, spread evenly over the environments (default:
  one per environment)."""
  seed: int = 0
  """Seed for resets (cube and tray placements)."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu)."""
  engine: str | None = None
  """Physics engine: warp or mujoco (C MuJoCo). Default: warp on CUDA, else mujoco."""
  output: Path | None = None
  """Folder for report.json; must not exist. Nothing written if unset."""


def check_args(args: Args) -> tuple[str, str, int]:
  """Every flag checked before anything is built: (device, engine, episodes)."""
  check_at_least(1, num_envs=args.num_envs, episodes=args.episodes)
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  if args.output is not None:
    check_new_folder(args.output)
  return device, engine, args.num_envs if args.episodes is None else args.episodes


class LargestAction:
  """The expert, keeping the largest |action| it gave."""

  def __init__(self, expert):
    self.expert, self.largest = expert, 0.0

  def act(self):
    action = self.expert.act()
    self.largest = max(self.largest, float(action.abs().max()))
    return action

  def reset(self, ids=None) -> None:
    self.expert.reset(ids)


def run_episodes(env, expert, episodes: int) -> tuple[list[dict], float, int]:
  """Step until ``episodes`` episodes have ended: (episodes, largest |action|,
  policy steps), with the evaluation's fixed quota per environment."""
  from experts.cube_tray import ACTION_NAMES
  from mjlab_tasks.cube_tray import evaluation

  def fields(i: int, steps: int) -> dict:
    return {
      "time_s": round(steps * env.step_dt, 3),
      "expert_action": ACTION_NAMES[int(expert.index[i])],
      "expert_timeouts": int(expert.timeouts[i]),
    }

  watched = LargestAction(expert)
  with tqdm(total=episodes, desc="episodes", unit="ep") as bar:
    rows, total, _ = evaluation.run_episodes(
      env, watched, episodes, on_episode=lambda: bar.update(1), extra=fields
    )
  keys = ("env", "episode", "reason", "time_s", "expert_action", "expert_timeouts")
  results = [
    {**{k: r[k] for k in keys[:2]}, "success": r["outcome"] == "success"}
    | {k: r[k] for k in keys[2:]}
    for r in rows
  ]
  return results, watched.largest, total


def summarize(results: list[dict], largest: float) -> dict:
  times = [r["time_s"] for r in results if r["success"]]
  return {
    "episodes": len(results),
    "successes": len(times),
    "success_rate": len(times) / len(results),
    "failure_reasons": dict(Counter(r["reason"] for r in results if r["reason"])),
    "failed_in_action": dict(
      Counter(r["expert_action"] for r in results if not r["success"])
    ),
    "mean_time_to_success_s": round(sum(times) / len(times), 3) if times else None,
    "max_time_to_success_s": max(times) if times else None,
    "episodes_with_action_timeouts": sum(r["expert_timeouts"] > 0 for r in results),
    "largest_abs_action": largest,
  }


def main(args: Args) -> int:
  device, engine, episodes = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  from experts.cube_tray import CubeTrayExpert
  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env

  cfg = cube_tray_env_cfg(
    arm_action=args.mode, num_envs=args.num_envs, end_on_success=True
  )
  cfg.seed = args.seed
  source = source_snapshot()  # Before the run: the files that were imported.
  with contextlib.redirect_stdout(io.StringIO()):  # mjlab's manager tables
    env = make_env(cfg, device=device, engine=engine)
  env.reset()
  expert = CubeTrayExpert(env)
  expert.reset()
  start = time.perf_counter()
  results, largest, total = run_episodes(env, expert, episodes)
  wall = time.perf_counter() - start
  expert.close()
  env.close()

  summary = summarize(results, largest)
  summary["env_steps_per_s"] = round(total * args.num_envs / wall, 1)
  print(
    f"{args.mode} expert, seed {args.seed}, {args.num_envs} envs, {engine} engine: "
    f"success {summary['successes']}/{summary['episodes']} "
    f"({summary['success_rate']:.1%}); failure reasons "
    f"{summary['failure_reasons'] or '-'}; time to success mean "
    f"{summary['mean_time_to_success_s']} s, max {summary['max_time_to_success_s']} s; "
    f"largest |action| {largest:.3f}; {summary['env_steps_per_s']} env steps/s."
  )
  if out_dir is not None:
    report = {
      "task": "CubeTray-UR5-RG2",
      "controller": f"experts.cube_tray.CubeTrayExpert ({args.mode} mode)",
      "config": {
        **{k: str(v) for k, v in asdict(args).items()},
        "device": device,
        "engine": engine,
      },
      "summary": summary,
      "episodes": results,
      "source": source,
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out_dir / 'report.json'}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
