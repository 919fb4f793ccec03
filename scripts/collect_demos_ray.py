"""Collect expert demonstrations in shards on a Ray cluster, then merge them.

Each of --shards Ray tasks runs one shard exactly as ``collect_demos.py
--shard K/N`` does (the same function, the same arguments), on whichever
node Ray places it: one shard per worker (--cpus-per-shard) or per GPU
(--gpus-per-shard). The worker writes its shard to a temporary file on its
own node and returns the file's bytes; the driver (this process) stores each
shard as it finishes and, when all are in, merges them in shard order with
``merge_demos.py``'s code into --output. The nodes need no shared
filesystem, and Ray Client (--address ray://...) works from outside the
cluster. The result is the same file as the local sequential
``collect_demos.py --shard 0/N .. N-1/N`` followed by ``merge_demos.py``.

  ray start --head                      # on the head node
  ray start --address=HEAD_IP:6379      # on every other node
  python scripts/collect_demos_ray.py --task CubeTray-UR5-RG2 --num-envs 64 \\
    --episodes 4096 --shards 8 --gpus-per-shard 1 --address auto \\
    --output demos/cube_tray.hdf5

Without --address, a private Ray instance on this machine runs the shards.
Ray is an optional extra: pip install 'manipulation-suite[ray]'.
See docs/demonstrations.md.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import collect_demos
import merge_demos
from cli_args import check_new_file, fail, parse

from assets.objects import ObjectSet
from mjlab_tasks.demos.format import SUFFIXES
from mjlab_tasks.engine import ENGINES, traits

SCRIPTS = Path(__file__).resolve().parent
UNMADE = Path(tempfile.gettempdir(), f"collect_demos_ray.{os.getpid()}.unmade")
ADDRESS = re.compile(r"auto|ray://[^\s:/]+:\d+|[^\s:/]+:\d+")
# collect_demos.py flags passed on to every shard unchanged (checked there).
FORWARDED = (
  "max_steps",
  "objects",
  "bin_width",
  "bin_height",
  "object_seed",
  "object_set",
)
RAY_MISSING = (
  "collect_demos_ray.py needs Ray, an optional extra: "
  "pip install 'manipulation-suite[ray]'"
)


@dataclass
class Args:
  task: str
  """Task id: CubeTray-UR5-RG2 or BinPick-UR5-RG2."""
  output: Path
  """The merged demo file (.hdf5); refused if it exists."""
  episodes: int
  """Episodes of the whole collection (all shards together); episode j has
  seed --seed + j. With --only-success, failed ones are run but not written."""
  shards: int
  """Number of shards (Ray tasks), at least 2 and at most --episodes: shard K
  collects the K-th of N disjoint consecutive slices of the episodes."""
  num_envs: int = 4
  """Parallel environments in each shard."""
  seed: int = 0
  """Seed of the first episode."""
  address: str | None = None
  """Ray cluster: auto (the cluster this node joined with `ray start`),
  HOST:PORT (a cluster's GCS address, e.g. HEAD_IP:6379) or ray://HOST:10001
  (Ray Client, from outside the cluster). Default: a private Ray instance on
  this machine, with all its CPUs and GPUs."""
  gpus_per_shard: float = 0
  """GPUs Ray reserves for each shard (0.5: two shards share a GPU). Above 0
  a shard runs on its GPU (cuda:0 of the devices Ray gives it) with MuJoCo
  Warp; 0: on the CPU, with the C MuJoCo engine unless --engine warp."""
  cpus_per_shard: float = 1
  """CPUs Ray reserves for each shard (also the shard's torch/OpenMP threads);
  shards run at once as far as the cluster's CPUs and GPUs allow."""
  engine: str | None = None
  """warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU only, bitwise reproducible).
  Default: warp with --gpus-per-shard above 0, else mujoco."""
  only_success: bool = False
  """Write only the episodes the task's evaluator scores a success."""
  keep_shards: bool = False
  """Also keep the shard files, beside --output as NAME.shard-K-of-N.hdf5
  (refused if one exists); a failed run then keeps the finished ones.
  Default: they live in a temporary folder beside --output, removed at the end."""
  max_steps: int | None = None
  """Episode limit in policy steps (20 Hz); a time-out is a failure. Default:
  240 (CubeTray), 3600 (BinPick)."""
  objects: int | None = None
  """BinPick only: object slots per bin (default 12)."""
  bin_width: float | None = None
  """BinPick only: inner bin width [m] (default 0.128; 0.06 to 0.4)."""
  bin_height: float | None = None
  """BinPick only: inner wall height [m] (default 0.150; 0.03 to 0.3)."""
  object_seed: int | None = None
  """BinPick only: seed of the object set (default 0)."""
  object_set: ObjectSet | None = None
  """BinPick only: ``default`` or ``hard`` (docs/bin_pick.md)."""


def shard_device(args: Args) -> str:
  # Ray sets CUDA_VISIBLE_DEVICES per task: its GPU is always cuda:0 there.
  return "cuda:0" if args.gpus_per_shard > 0 else "cpu"


def shard_argv(args: Args, k: int, device: str) -> list[str]:
  """collect_demos.py's flags for shard k (without --output)."""
  argv = ["--task", args.task, "--num-envs", str(args.num_envs)]
  argv += ["--episodes", str(args.episodes), "--seed", str(args.seed)]
  argv += ["--shard", f"{k}/{args.shards}", "--device", device]
  if args.engine is not None:
    argv += ["--engine", args.engine]
  if args.only_success:
    argv.append("--only-success")
  for name in FORWARDED:
    value = getattr(args, name)
    if value is not None:
      argv += [f"--{name.replace('_', '-')}", str(value)]
  return argv


def kept_shard_paths(args: Args) -> list[Path]:
  n, out = args.shards, args.output
  return [out.with_name(f"{out.stem}.shard-{k}-of-{n}{out.suffix}") for k in range(n)]


def check_args(args: Args) -> None:
  """Every flag checked before Ray starts; each shard's flags by
  collect_demos.py's own checks (on the CPU here: the driver needs no GPU)."""
  if args.shards < 2:
    fail(
      f"--shards must be at least 2, got {args.shards} (one shard: collect_demos.py)."
    )
  if args.episodes < args.shards:
    fail(f"--shards {args.shards} is more than --episodes {args.episodes}.")
  if args.gpus_per_shard < 0:
    fail(f"--gpus-per-shard must be at least 0, got {args.gpus_per_shard}.")
  if not args.cpus_per_shard > 0:
    fail(f"--cpus-per-shard must be above 0, got {args.cpus_per_shard}.")
  if args.address is not None and not ADDRESS.fullmatch(args.address):
    fail(f"--address takes auto, HOST:PORT or ray://HOST:PORT, got {args.address!r}.")
  if args.output.suffix not in SUFFIXES:
    fail(f"--output {args.output}: the demo file must end in .hdf5 or .h5.")
  check_new_file(args.output, "--output")
  kept = kept_shard_paths(args)
  for k in range(args.shards):
    # Without --keep-shards the shard files go to a temporary folder made
    # later: any new path stands for them in the checks.
    planned = kept[k] if args.keep_shards else UNMADE / f"shard-{k}.hdf5"
    argv = [*shard_argv(args, k, "cpu"), "--output", str(planned)]
    collect_demos.check_args(parse(collect_demos.Args, argv))
  if (
    args.engine in ENGINES and traits(args.engine).cpu_only and args.gpus_per_shard > 0
  ):
    fail("--engine mujoco runs on the CPU: use --gpus-per-shard 0 (or --engine warp).")


def collect_shard(argv: list[str], scripts: str) -> dict:
  """A Ray task: collect_demos.py's main for one shard, into a temporary file
  on this node; returns the file's bytes and the tool's output."""
  import contextlib
  import importlib.util
  import io
  import socket
  import traceback

  # The suite's scripts/ on this node: the driver's path, else beside the
  # installed tasks (nodes may check the suite out elsewhere).
  if not Path(scripts, "collect_demos.py").exists():
    scripts = str(
      Path(importlib.util.find_spec("mjlab_tasks").origin).parents[1] / "scripts"
    )
  if scripts not in sys.path:
    sys.path.insert(0, scripts)
  import cli_args as shard_cli
  import collect_demos as shard_collect

  start = time.perf_counter()
  log = io.StringIO()
  with tempfile.TemporaryDirectory(prefix="collect_demos_ray.") as folder:
    output = Path(folder) / "shard.hdf5"
    try:
      # The tool's progress bar and summary come back with the result, not
      # interleaved from every worker.
      with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        shard_argv_ = [*argv, "--output", str(output)]
        shard_collect.main(shard_cli.parse(shard_collect.Args, shard_argv_))
    except SystemExit:  # A refusal (one line), not a reason to end the worker.
      raise RuntimeError(last_line(log.getvalue())) from None
    except Exception as err:
      raise RuntimeError(
        f"{type(err).__name__}: {err}\n{traceback.format_exc()}"
      ) from None
    data = output.read_bytes()
  import ray

  return {
    "data": data,
    "log": log.getvalue(),
    "node": socket.gethostname(),
    "node_id": ray.get_runtime_context().get_node_id(),
    "seconds": time.perf_counter() - start,
  }


def last_line(text: str) -> str:
  lines = [line.strip() for line in re.split(r"[\r\n]", text) if line.strip()]
  return lines[-1] if lines else "no output"


def write_new(path: Path, data: bytes) -> None:
  """Write a whole file under a temporary name, then link it (never replacing one)."""
  temp = path.with_name(f".{path.name}.{os.getpid()}.partial")
  try:
    temp.write_bytes(data)
    os.link(temp, path)
  finally:
    temp.unlink(missing_ok=True)


def init_ray(address: str | None) -> bool:
  """Connect to (or start) Ray; True if this call did (and should shut it down)."""
  import logging

  import ray

  if ray.is_initialized():  # Already connected by the caller.
    return False
  if address not in (None, "auto"):
    reach(address)
  try:
    if address is None:
      ray.init(logging_level=logging.WARNING, include_dashboard=False)
    else:
      ray.init(address=address, logging_level=logging.WARNING)
  except (ConnectionError, RuntimeError, ValueError) as err:
    where = "start Ray here" if address is None else f"connect to Ray at {address}"
    fail(f"--address: cannot {where}: {last_line(str(err))}")
  return True


def reach(address: str, timeout_s: float = 10.0) -> None:
  """A one-line error for an address nothing listens on (Ray itself retries
  for minutes, printing warnings)."""
  import socket

  host, port = address.removeprefix("ray://").rsplit(":", 1)
  try:
    socket.create_connection((host, int(port)), timeout=timeout_s).close()
  except OSError as err:
    fail(f"--address {address}: nothing answers there ({err.strerror or err}).")


def run_shards(args: Args, paths: list[Path]) -> None:
  """All shards as Ray tasks; each shard's file written as it finishes."""
  import ray

  n = args.shards
  task = ray.remote(collect_shard).options(
    num_cpus=args.cpus_per_shard,
    num_gpus=args.gpus_per_shard,
    # A shard is deterministic in its seeds: if its node dies, run it again.
    max_retries=2,
  )
  device = shard_device(args)
  pending = {
    task.remote(shard_argv(args, k, device), str(SCRIPTS)): k for k in range(n)
  }
  resources = ray.cluster_resources()
  print(
    f"{n} shards of {args.episodes} episodes on Ray: {len(ray.nodes())} node(s), "
    f"{resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs; "
    f"{args.cpus_per_shard:g} CPUs and {args.gpus_per_shard:g} GPUs per shard.",
    flush=True,
  )
  start = time.perf_counter()
  while pending:
    (ref,), _ = ray.wait(list(pending), num_returns=1)
    k = pending.pop(ref)
    try:
      result = ray.get(ref)
    except Exception as err:
      for other in pending:
        ray.cancel(other, force=True)
      # The worker's own error, not Ray's wrapping: a crash's traceback
      # first, then the one error line.
      cause = getattr(err, "cause", None) or err
      message, _, details = (str(cause).strip() or repr(cause)).partition("\n")
      if details:
        print(details, file=sys.stderr)
      if args.keep_shards:
        message += "; the finished shards are kept (collect the rest with "
        message += "collect_demos.py --shard K/N, then merge_demos.py)"
      fail(f"shard {k}/{n} failed: {message}")
    write_new(paths[k], result["data"])
    done = n - len(pending)
    print(
      f"[{done}/{n}] shard {k}/{n} on {result['node']} (Ray node "
      f"{result['node_id'][:8]}): {result['seconds']:.1f} s, "
      f"{time.perf_counter() - start:.1f} s since launch. {summary(result['log'])}",
      flush=True,
    )


def summary(log: str) -> str:
  """collect_demos.py's summary line (episodes, successes, demos, speed)."""
  lines = [line for line in log.splitlines() if " episodes (seeds " in line]
  return lines[-1].strip() if lines else last_line(log)


def main(args: Args) -> int:
  check_args(args)
  import importlib.util

  if importlib.util.find_spec("ray") is None:
    fail(RAY_MISSING)
  args.output.absolute().parent.mkdir(parents=True, exist_ok=True)
  if args.keep_shards:
    folder, paths = None, kept_shard_paths(args)
  else:
    folder = Path(
      tempfile.mkdtemp(prefix=f".{args.output.name}.shards.", dir=args.output.parent)
    )
    paths = [folder / f"shard-{k}-of-{args.shards}.hdf5" for k in range(args.shards)]
  started = False
  try:
    started = init_ray(args.address)
    run_shards(args, paths)
    # Shard order, whatever order they finished in: the same file as merging
    # a local sequential collection.
    merge_demos.main(merge_demos.Args(inputs=tuple(paths), output=args.output))
  finally:
    if folder is not None:
      shutil.rmtree(folder, ignore_errors=True)
    if started:
      import ray

      ray.shutdown()
  if args.keep_shards:
    print(f"shards kept: {', '.join(str(p) for p in paths)}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
