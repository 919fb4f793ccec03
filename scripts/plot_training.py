"""Learning curves of a training run as a PNG (and the numbers as JSON).

Reads the tensorboard event file that mjlab's train (and scripts/train.py)
writes into the run folder and plots the task's stage metrics and reward per
iteration, next to the first iteration's values (the untrained policy).

  python scripts/plot_training.py --run logs/rsl_rl/cube_tray_ur5_rg2/RUN --output curves.png
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from cli_args import check_new_file, fail, parse

# What a person reads first: the task's stages, then the reward.
DEFAULT_TAGS = (
  "Episode_Metrics/tool_cube_distance",
  "Episode_Metrics/grasped",
  "Episode_Metrics/lifted",
  "Episode_Metrics/contained",
  "Episode_Metrics/success",
  "Episode_Reward/progress",
  "Train/mean_reward",
)


@dataclass
class Args:
  run: Path
  """The run folder (holds events.out.tfevents.*)."""
  output: Path
  """PNG to write (refused if it exists); the curves' numbers go beside it as JSON."""
  tags: tuple[str, ...] = DEFAULT_TAGS
  """Scalar tags to plot (those missing from the run are skipped)."""


def check_args(args: Args) -> Path:
  if not args.run.is_dir():
    fail(f"--run {args.run}: not a folder.")
  events = sorted(args.run.glob("events.out.tfevents.*"))
  if not events:
    fail(f"--run {args.run}: no tensorboard event file in it.")
  if args.output.suffix != ".png":
    fail(f"--output must end in .png, got {args.output.name!r}.")
  check_new_file(args.output, "--output")
  check_new_file(args.output.with_suffix(".json"), "--output (its .json)")
  return args.run


def read_scalars(
  run: Path, tags: tuple[str, ...]
) -> dict[str, list[tuple[int, float]]]:
  """Each tag's (step, value) pairs from the run's event files."""
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
  acc.Reload()
  present = set(acc.Tags()["scalars"])
  return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in tags if t in present}


def plot(curves: dict[str, list[tuple[int, float]]], title: str, path: Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  n = len(curves)
  cols = 3
  rows = (n + cols - 1) // cols
  fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
  for ax, (tag, points) in zip(axes.flat, curves.items(), strict=False):
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    ax.plot(steps, values, lw=1.2)
    ax.axhline(values[0], color="grey", ls="--", lw=0.8, label="first iteration")
    ax.set_title(tag.split("/", 1)[-1], fontsize=10)
    ax.set_xlabel("iteration")
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[n:]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=8)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def main(args: Args) -> int:
  run = check_args(args)
  curves = read_scalars(run, args.tags)
  if not curves:
    fail(f"none of the tags {list(args.tags)} is in {run}.")
  args.output.parent.mkdir(parents=True, exist_ok=True)
  plot(curves, f"{run.parent.name} / {run.name}", args.output)
  summary = {
    tag: {
      "first": points[0][1],
      "last": points[-1][1],
      "best": max(v for _, v in points),
      "iterations": points[-1][0] + 1,
    }
    for tag, points in curves.items()
  }
  args.output.with_suffix(".json").write_text(
    json.dumps({"run": str(run), "curves": curves, "summary": summary}, indent=1)
  )
  for tag, s in summary.items():
    print(
      f"{tag:40s} first {s['first']:9.4f}  last {s['last']:9.4f}  best {s['best']:9.4f}"
    )
  print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
