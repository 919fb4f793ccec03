"""Merge demonstration files (shards of one collection) into one.

  python scripts/merge_demos.py demos/ct_0.hdf5 demos/ct_1.hdf5 --output demos/ct.hdf5

Every input is checked as replay_demos.py checks it; their env_args must
agree in everything but the seeds each covers (seed, shard, seed_ranges), and no episode seed may appear twice. The demos are copied in
input order and renumbered demo_0..N-1; the masks (train/valid split,
success) and data.attrs['total'] are rebuilt, and env_args lists every
input's seed range. Written under a temporary name and moved into place when
complete; an existing --output is refused. Needs h5py only (no mjlab).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro
from cli_args import check_file, check_new_file, fail, parse
from demo_format import (
  DATA,
  PER_SHARD_KEYS,
  DemoFileError,
  DemoWriter,
  demo_names,
  open_demos,
  seeds_of,
  validate_file,
)

SUFFIXES = (".hdf5", ".h5")


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


# Provenance, not compatibility: shards of one collection may be checked out
# at different commits (a warning says so; the merged file lists them all).
PROVENANCE_KEYS = ("git",)


def shared_args(env_args: dict) -> dict:
  skip = (*PER_SHARD_KEYS, *PROVENANCE_KEYS)
  return {k: v for k, v in env_args.items() if k not in skip}


def check_inputs(paths: tuple[Path, ...]) -> list[dict]:
  """Each file valid, env_args agreeing, seeds disjoint; their env_args."""
  all_args, seen = [], {}
  for path in paths:
    try:
      args = validate_file(path)
      with open_demos(path) as f:
        seeds = seeds_of(f)
    except DemoFileError as err:
      fail(str(err))
    if all_args:
      first = shared_args(all_args[0])
      differ = sorted(
        k
        for k in first.keys() | shared_args(args).keys()
        if first.get(k) != args.get(k)
      )
      if differ:
        fail(f"{path}: env_args differ from {paths[0]} in {', '.join(differ)}.")
    for seed in seeds:
      if seed in seen:
        fail(
          f"{path}: episode seed {seed} is also in {seen[seed]} (overlapping shards)."
        )
      seen[seed] = path
    all_args.append(args)
  return all_args


def merged_args(all_args: list[dict]) -> dict:
  out = shared_args(all_args[0])
  ranges = sorted(r for args in all_args for r in args["seed_ranges"])
  out["seed_ranges"] = ranges
  out["shard"] = "merged"
  out["seed"] = ranges[0][0]
  gits = [args["git"] for args in all_args]
  out["git"] = gits[0] if all(g == gits[0] for g in gits) else {"shards": gits}
  return out


def main(args: Args) -> int:
  check_args(args)
  all_args = check_inputs(args.inputs)
  if len({str(a["git"]) for a in all_args}) > 1:
    print("warning: the inputs were collected at different commits (see env_args git).")
  with DemoWriter(args.output, merged_args(all_args)) as writer:
    for path in args.inputs:
      with open_demos(path) as f:
        for name in demo_names(f):
          writer.add_copy(f[DATA][name])
    path = writer.finish()
  print(
    f"merged {len(args.inputs)} files: {len(writer.names)} demos "
    f"({len(writer.successes)} successes), {writer.total} samples; wrote {path}"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
