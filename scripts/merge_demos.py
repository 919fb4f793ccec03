"""Merge demonstration files (shards of one collection) into one.

  python scripts/merge_demos.py demos/ct_0.hdf5 demos/ct_1.hdf5 --output demos/ct.hdf5

Every input is checked as replay_demos.py checks it; their env_args must
agree in everything but the seeds each covers (seed, shard, seed_ranges), and no episode seed may appear twice. The demos are copied in
input order and renumbered demo_0..N-1; the masks (train/valid split,
success) and data.attrs['total'] are rebuilt, and env_args lists every
input's seed range. Written under a temporary name and moved into place when
complete; an existing --output is refused. Needs h5py only (no mjlab).
The merge is ``mjlab_tasks.demos.merge_files``; this tool checks the inputs
and prints the report.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro
from cli_args import check_file, check_new_file, fail, parse

from mjlab_tasks.demos import merge
from mjlab_tasks.demos.format import SUFFIXES, DemoFileError


@dataclass
class Args:
  inputs: tyro.conf.Positional[tuple[Path, ...]]
  """The demo files to merge (two or more, any order)."""
  output: Path
  """The merged demo file (.hdf5); refused if it exists."""


def check_args(args: Args) -> None:
  if len(args.inputs) < 2:
    fail("missing input files: merge_demos.py needs two or more (see --help).")
  for path in args.inputs:
    check_file(path, "input")
  if len(set(p.resolve() for p in args.inputs)) < len(args.inputs):
    fail("an input file is given twice.")
  if args.output.suffix not in SUFFIXES:
    fail(f"--output {args.output}: the demo file must end in .hdf5 or .h5.")
  check_new_file(args.output, "--output")


def check_inputs(paths: tuple[Path, ...]) -> list[dict]:
  """Each file valid, env_args agreeing, seeds disjoint; their env_args."""
  try:
    return merge.check_inputs(paths)
  except DemoFileError as err:
    fail(str(err))


def main(args: Args) -> int:
  check_args(args)
  all_args = check_inputs(args.inputs)
  if merge.different_commits(all_args):
    print("warning: the inputs were collected at different commits (see env_args git).")
  writer = merge.merge_files(args.inputs, args.output, all_args)
  print(
    f"merged {len(args.inputs)} files: {len(writer.names)} demos "
    f"({len(writer.successes)} successes), {writer.total} samples; wrote {writer.path}"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
