"""Re-render a run's videos from its recorded poses, without simulating.

Reads ``video_poses.npz`` (every filmed frame's qpos and mocap poses, and the
camera views) and the ``video_poses.mjb`` model saved beside it by an
evaluation run with ``--videos N``, and writes one mp4 per recorded
environment and view.

  python scripts/render_poses.py --poses reports/ct/video_poses.npz --output reports/ct_rerender
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass
class Args:
  poses: Path
  """The run's video_poses.npz (its .mjb model must lie beside it)."""
  output: Path
  """Folder for the mp4 files; must not exist. The camera views, image sizes
  and backgrounds are the ones the run recorded with."""


def main(args: Args) -> int:
  from mjlab_tasks.common.runtime import create_output_dir
  from mjlab_tasks.common.video import render_pose_file

  if not args.poses.is_file():
    raise SystemExit(f"error: {args.poses} not found.")
  if not args.poses.with_suffix(".mjb").is_file():
    raise SystemExit(
      f"error: model {args.poses.with_suffix('.mjb')} not found beside the poses."
    )
  out_dir = create_output_dir(args.output)
  for path in render_pose_file(args.poses, out_dir):
    print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main(tyro.cli(Args)))
