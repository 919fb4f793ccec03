"""Re-render a run's videos from its recorded poses, without simulating.

Reads ``video_poses.npz`` (every filmed frame's qpos and mocap poses, and the
camera views) and the ``video_poses.mjb`` model saved beside it by an
evaluation run with ``--videos N``, and writes one mp4 per recorded
environment and view.

  python scripts/render_poses.py --poses reports/ct/video_poses.npz --output reports/ct_rerender
  # A clip: environment 2 from 40 s to 60 s of simulated time.
  python scripts/render_poses.py --poses R/video_poses.npz --output CLIP --envs 2 --start 40 --end 60
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cli_args import (
  check_file,
  check_new_folder,
  create_folder,
  fail,
  parse,
  prepare_offscreen_gl,
)


@dataclass
class Args:
  poses: Path
  """The run's video_poses.npz (its .mjb model must lie beside it)."""
  output: Path
  """Folder for the mp4 files; must not exist. The camera views, image sizes
  and backgrounds are the ones the run recorded with."""
  envs: tuple[int, ...] = ()
  """Recorded environments to render (default: all that were recorded)."""
  start: float = 0.0
  """Simulated time of the first rendered frame [s]."""
  end: float | None = None
  """Simulated time of the last rendered frame [s] (default: the last frame)."""


def check_args(args: Args) -> None:
  """Every flag checked before anything is rendered."""
  check_file(args.poses, "--poses")
  model = args.poses.with_suffix(".mjb")
  if not model.is_file():
    fail(f"--poses {args.poses}: its model {model.name} is not beside it.")
  if args.start < 0 or (args.end is not None and args.end < args.start):
    fail(f"--start {args.start} --end {args.end}: need 0 <= start <= end.")
  check_new_folder(args.output)
  prepare_offscreen_gl("render_poses.py")


def main(args: Args) -> int:
  check_args(args)
  out_dir = create_folder(args.output)

  from mjlab_tasks.common.video import render_pose_file

  try:
    paths = render_pose_file(
      args.poses, out_dir, envs=args.envs, window=(args.start, args.end)
    )
  except ValueError as e:
    out_dir.rmdir()  # Nothing was rendered: leave no empty folder behind.
    fail(str(e))
  for path in paths:
    print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
