"""Collect expert demonstrations into an HDF5 file in robomimic's layout.

Runs a task's privileged expert in ``--num-envs`` parallel environments over
``--episodes`` seeded episodes and writes every episode (or, with
``--only-success``, every successful one) with its actor observations,
actions in [-1, 1], rewards, dones, full simulator states and the task
evaluator's verdict. robomimic and Diffusion Policy load the file as is;
``replay_demos.py`` replays it, ``merge_demos.py`` joins shards.

  python scripts/collect_demos.py --task CubeTray-UR5-RG2 --num-envs 4 \\
    --episodes 64 --output demos/cube_tray.hdf5
  python scripts/collect_demos.py --task CubeTray-UR5-RG2 --episodes 1000 \\
    --shard 0/4 --output demos/cube_tray_0.hdf5   # one of four machines

Episode j (0 <= j < --episodes) has seed --seed + j; --shard K/N runs the
K-th of N disjoint consecutive slices of those episodes, so the shards of one
collection never repeat an episode and together are the whole collection.
The file appears under --output only when complete (it is written under a
temporary name in the same folder, then moved); an existing file is refused.
The collection itself is ``mjlab_tasks.demos.collect_demos``; this tool checks
the flags, shows the progress and prints the summary. See
docs/demonstrations.md.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cli_args import (
  check_at_least,
  check_cameras,
  check_device,
  check_engine,
  check_new_file,
  fail,
  opengl_errors_in_one_line,
  parse,
)
from tqdm import tqdm

from assets.objects import ObjectSet
from mjlab_tasks.demos.collect import shard_seeds
from mjlab_tasks.demos.format import SUFFIXES
from mjlab_tasks.registry import DEMO_TASKS as TASKS

BIN_PICK_FLAGS = ("objects", "bin_width", "bin_height", "object_seed", "object_set")


@dataclass
class Args:
  task: str
  """Task id: CubeTray-UR5-RG2 or BinPick-UR5-RG2."""
  output: Path
  """The demo file to write (.hdf5); refused if it exists."""
  num_envs: int = 4
  """Number of parallel environments."""
  episodes: int | None = None
  """Episodes of the whole collection (all shards together); default one per
  environment. With --only-success, failed ones are run but not written."""
  seed: int = 0
  """Seed of the first episode: episode j has seed --seed + j."""
  shard: str | None = None
  """K/N: run only the K-th (0 <= K < N) of N disjoint slices of the
  episodes; merge the N files with merge_demos.py."""
  only_success: bool = False
  """Write only the episodes the task's evaluator scores a success."""
  action_noise: float = 0.0
  """Noise injection (DART, Laskey et al. 2017): the standard deviation of
  Gaussian noise added to the expert's arm actions (not the gripper) before
  they are executed, then clipped to [-1, 1]; seeded per episode. The expert
  corrects the drift the noise causes, so the demonstrations show the
  recoveries a learner needs. ``actions`` records what was executed (a replay
  stays exact), ``expert_actions`` the expert's own actions, which
  train_bc.py imitates. 0: none."""
  max_steps: int | None = None
  """Episode limit in policy steps (20 Hz); a time-out is a failure. Default:
  240 (CubeTray), 3600 (BinPick)."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu)."""
  engine: str | None = None
  """warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU, bitwise reproducible).
  Default: warp on CUDA, mujoco on CPU."""
  cameras: str | None = None
  """Also record camera images (comma-separated: wrist, scene) as obs/<term>:
  wrist_rgb, wrist_depth, scene_rgb ([T, H, W, C], uint8 RGB, float32 depth
  [m], chunked per frame, compressed). The wrist camera's D415 rides on the
  hand (its 102 g change the arm's load). Default: none, nothing rendered;
  replay_demos.py --render-cameras renders them later from the states."""
  objects: int | None = None
  """BinPick only: object slots per bin (default 12)."""
  bin_width: float | None = None
  """BinPick only: inner bin width [m] (default 0.128; 0.06 to 0.4)."""
  bin_height: float | None = None
  """BinPick only: inner wall height [m] (default 0.150; 0.03 to 0.3)."""
  object_seed: int | None = None
  """BinPick only: seed of the object set (default 0)."""
  object_set: ObjectSet | None = None
  """BinPick only: ``default`` (graspable by construction) or ``hard`` (the
  former default, with wide flat boxes; docs/bin_pick.md)."""


@dataclass
class Plan:
  """The checked flags: what this run collects."""

  device: str
  engine: str
  episodes: int
  shard: tuple[int, int]
  seeds: list[int]
  cameras: tuple[str, ...] = ()


def parse_shard(text: str | None) -> tuple[int, int]:
  if text is None:
    return 0, 1
  match = re.fullmatch(r"(\d+)/(\d+)", text)
  if match is None:
    fail(f"--shard takes K/N (e.g. 0/4), got {text!r}.")
  k, n = int(match.group(1)), int(match.group(2))
  if n < 1 or k >= n:
    fail(f"--shard {text}: need 0 <= K < N.")
  return k, n


def check_args(args: Args) -> Plan:
  """Every flag checked before anything is built."""
  if args.task not in TASKS:
    fail(f"--task must be one of {', '.join(TASKS)}, got {args.task!r}.")
  cameras = check_cameras(args.cameras, "--cameras")
  check_at_least(1, num_envs=args.num_envs, episodes=args.episodes)
  check_at_least(1, max_steps=args.max_steps, objects=args.objects)
  check_at_least(0, seed=args.seed, object_seed=args.object_seed)
  if not 0.0 <= args.action_noise <= 1.0:
    fail(f"--action-noise must be between 0 and 1, got {args.action_noise}.")
  if args.task != "BinPick-UR5-RG2":
    given = [f for f in BIN_PICK_FLAGS if getattr(args, f) is not None]
    if given:
      fail(f"--{given[0].replace('_', '-')} applies to BinPick-UR5-RG2 only.")
  for flag, (lo, hi) in (("bin_width", (0.06, 0.4)), ("bin_height", (0.03, 0.3))):
    value = getattr(args, flag)
    if value is not None and not lo <= value <= hi:
      fail(
        f"--{flag.replace('_', '-')} {value} m is outside the supported {lo}-{hi} m."
      )
  shard = parse_shard(args.shard)
  episodes = args.num_envs if args.episodes is None else args.episodes
  seeds = shard_seeds(args.seed, episodes, shard)
  if not seeds:
    fail(f"--shard {args.shard}: {episodes} episodes leave this shard empty.")
  if args.output.suffix not in SUFFIXES:
    fail(f"--output {args.output}: the demo file must end in .hdf5 or .h5.")
  check_new_file(args.output, "--output")
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  return Plan(device, engine, episodes, shard, seeds, cameras)


def main(args: Args) -> int:
  plan = check_args(args)
  from mjlab_tasks.common.runtime import quiet_warp
  from mjlab_tasks.demos import Collection, collect_demos, make_task

  quiet_warp()
  task = make_task(
    args.task,
    args.max_steps,
    plan.cameras,
    args.objects,
    args.bin_width,
    args.bin_height,
    args.object_seed,
    args.object_set,
  )
  run = Collection(
    task,
    plan.seeds,
    args.num_envs,
    plan.device,
    plan.engine,
    args.seed,
    plan.shard,
    args.only_success,
    args.action_noise,
  )
  start, cpu_start = time.perf_counter(), time.process_time()
  bar = tqdm(total=len(plan.seeds), desc=f"{task.task_id} episodes", unit="ep")

  def progress(collector, kept: bool) -> None:
    bar.update(1)
    if kept:
      bar.set_postfix(kept=collector.kept, success=collector.successes)

  with opengl_errors_in_one_line():
    collector, path = collect_demos(run, args.output, progress)
  bar.close()
  wall = time.perf_counter() - start
  cpu = time.process_time() - cpu_start  # All threads: the cost on a busy machine.
  episodes = len(plan.seeds)
  run_s = wall - collector.build_s
  print(
    f"{episodes} episodes (seeds {plan.seeds[0]}..{plan.seeds[-1]}), "
    f"{collector.successes} successes, {collector.kept} demos written, "
    f"{collector.steps} recorded steps; {plan.engine} engine, {args.num_envs} envs: "
    f"{wall:.1f} s in all ({episodes / wall:.3f} episodes/s, "
    f"{collector.steps / wall:.1f} steps/s), of which {collector.build_s:.1f} s "
    f"building environments; rollouts alone {episodes / run_s:.3f} episodes/s, "
    f"{collector.steps / run_s:.1f} steps/s; {cpu:.1f} s of CPU time "
    f"({collector.steps / cpu:.1f} steps per CPU second)."
  )
  print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
