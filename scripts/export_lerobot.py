"""Export demonstrations (robomimic-layout HDF5) as a LeRobotDataset v3.0.

The export is ``mjlab_tasks.demos.export_lerobot`` (its module,
``mjlab_tasks/demos/lerobot.py``, describes the layout written; see also
docs/lerobot.md); this tool checks the flags and prints the result.

  python scripts/export_lerobot.py demos.hdf5 --output datasets/cube_tray

Needs the optional extra: pip install 'manipulation-suite[lerobot]'.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro
from cli_args import check_file, check_new_folder, fail, parse

from mjlab_tasks.demos.format import hdf5_signature_at

EXTRA = "pip install 'manipulation-suite[lerobot]'"
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass
class Args:
  demos: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="DEMOS")]
  """Demonstrations in the robomimic layout (collect_demos.py's HDF5 file)."""
  output: Path
  """Folder for the LeRobotDataset; must not exist. Written beside it under a
  temporary name and renamed when complete, so a crash leaves nothing here."""
  repo_id: str | None = None
  """Hub-style dataset name (owner/name) for the dataset card; load with
  LeRobotDataset(repo_id, root=OUTPUT). Default: manipulation-suite/<file stem>."""
  fps: int | None = None
  """Frames per second: the rate the demonstrations were recorded at. Sets the
  timestamps and the video rate. Default: the file's env_args control_hz,
  else 20 (the tasks' policies act at 20 Hz)."""
  task: str | None = None
  """The task text of every frame (LeRobot's language task). Default: the
  file's env_args env_name (the task id), else the file name."""
  mask: str | None = None
  """Export only the demos listed in mask/<MASK> (e.g. train, valid, success);
  default every demo."""


def check_args(args: Args) -> None:
  """Every flag checked before the file is read (no h5py or pyarrow needed)."""
  check_file(args.demos, "DEMOS")
  if not hdf5_signature_at(args.demos):
    fail(f"DEMOS {args.demos} is not an HDF5 file.")
  check_new_folder(args.output)
  if args.fps is not None and args.fps < 1:
    fail(f"--fps must be at least 1, got {args.fps}.")
  if args.repo_id is not None and not REPO_ID.fullmatch(args.repo_id):
    fail(f"--repo-id must look like owner/name, got {args.repo_id!r}.")
  if args.task is not None and not args.task.strip():
    fail("--task must not be empty.")
  if args.mask is not None and not re.fullmatch(r"[\w.-]+", args.mask):
    fail(f"--mask must name a mask (e.g. train, success), got {args.mask!r}.")


def require_extra() -> None:
  """pyarrow, h5py and imageio-ffmpeg come with the optional extra."""
  missing = [
    m
    for m in ("pyarrow", "h5py", "imageio_ffmpeg")
    if importlib.util.find_spec(m) is None
  ]
  if missing:
    fail(f"export_lerobot.py needs {', '.join(missing)}: {EXTRA}")


def main(args: Args) -> int:
  check_args(args)
  require_extra()
  from tqdm import tqdm

  from mjlab_tasks.demos.lerobot import ExportError, export_lerobot

  try:
    info = export_lerobot(
      args.demos,
      args.output,
      repo_id=args.repo_id,
      fps=args.fps,
      task=args.task,
      mask=args.mask,
      progress=lambda names: tqdm(names, desc="episodes", unit="ep"),
    )
  except ExportError as err:
    fail(str(err))
  cams = [k for k, v in info["features"].items() if v["dtype"] == "video"]
  print(
    f"wrote {args.output}: {info['total_episodes']} episodes, "
    f"{info['total_frames']} frames at {info['fps']} fps"
    + (f", videos: {', '.join(cams)}" if cams else ", no cameras")
  )
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
