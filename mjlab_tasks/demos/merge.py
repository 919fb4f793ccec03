"""Merging demo files (shards of one collection) into one.

Every input is checked as a replay checks it; their env_args must agree in
everything but the seeds each covers (seed, shard, seed_ranges) and the
commit (``git``, kept per input), and no episode seed may appear twice. The
demos are copied in input order and renumbered demo_0..N-1; the masks
(train/valid split, success) and data.attrs['total'] are rebuilt, and
env_args lists every input's seed range. Needs h5py only (no mjlab).
"""

from __future__ import annotations

from pathlib import Path

from mjlab_tasks.demos.format import (
  DATA,
  PER_SHARD_KEYS,
  DemoFileError,
  DemoWriter,
  demo_names,
  open_demos,
  seeds_of,
  validate_file,
)

# Provenance, not compatibility: shards of one collection may be checked out
# at different commits (a warning says so; the merged file lists them all).
PROVENANCE_KEYS = ("git",)


def shared_args(env_args: dict) -> dict:
  skip = (*PER_SHARD_KEYS, *PROVENANCE_KEYS)
  return {k: v for k, v in env_args.items() if k not in skip}


def check_inputs(paths: tuple[Path, ...]) -> list[dict]:
  """Each file valid, env_args agreeing, seeds disjoint; their env_args.
  DemoFileError (one line) on the first problem."""
  all_args, seen = [], {}
  for path in paths:
    args = validate_file(path)
    with open_demos(path) as f:
      seeds = seeds_of(f)
    if all_args:
      first = shared_args(all_args[0])
      differ = sorted(
        k
        for k in first.keys() | shared_args(args).keys()
        if first.get(k) != args.get(k)
      )
      if differ:
        raise DemoFileError(
          f"{path}: env_args differ from {paths[0]} in {', '.join(differ)}."
        )
    for seed in seeds:
      if seed in seen:
        raise DemoFileError(
          f"{path}: episode seed {seed} is also in {seen[seed]} (overlapping shards)."
        )
      seen[seed] = path
    all_args.append(args)
  return all_args


def different_commits(all_args: list[dict]) -> bool:
  """Whether the inputs were collected at different commits (env_args git)."""
  return len({str(a["git"]) for a in all_args}) > 1


def merged_args(all_args: list[dict]) -> dict:
  out = shared_args(all_args[0])
  ranges = sorted(r for args in all_args for r in args["seed_ranges"])
  out["seed_ranges"] = ranges
  out["shard"] = "merged"
  out["seed"] = ranges[0][0]
  gits = [args["git"] for args in all_args]
  out["git"] = gits[0] if all(g == gits[0] for g in gits) else {"shards": gits}
  return out


def merge_files(
  paths: tuple[Path, ...], output: Path, all_args: list[dict] | None = None
) -> DemoWriter:
  """Merge ``paths`` into the new file ``output`` (appears when complete);
  ``all_args``: their checked env_args (default: ``check_inputs`` here).
  The finished writer: its ``names``, ``successes``, ``total`` and ``path``."""
  if all_args is None:
    all_args = check_inputs(paths)
  with DemoWriter(output, merged_args(all_args)) as writer:
    for path in paths:
      with open_demos(path) as f:
        for name in demo_names(f):
          writer.add_copy(f[DATA][name])
    writer.finish()
  return writer
