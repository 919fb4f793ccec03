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
See docs/demonstrations.md.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cli_args import (
  check_at_least,
  check_cameras,
  check_device,
  check_engine,
  check_new_file,
  fail,
  parse,
)
from demo_rollouts import TASKS
from tqdm import tqdm

SUFFIXES = (".hdf5", ".h5")
ARM_DIMS = 6
"""The arm's share of every task's action (Cartesian delta pose); the gripper's
command follows and gets no noise: a noisy closing command drops objects."""
NOISE_SALT = 0xDA27
BIN_PICK_FLAGS = ("objects", "bin_width", "bin_height", "object_seed")


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


def shard_seeds(seed: int, episodes: int, shard: tuple[int, int]) -> list[int]:
  """The seeds of shard K of N: a consecutive slice of seed .. seed+episodes-1."""
  k, n = shard
  return [seed + j for j in range(k * episodes // n, (k + 1) * episodes // n)]


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


def make_task(args: Args, cameras: tuple[str, ...] = ()):
  from demo_rollouts import bin_pick_task, cube_tray_task

  if args.task == "CubeTray-UR5-RG2":
    return cube_tray_task(args.max_steps, cameras)
  return bin_pick_task(
    args.max_steps,
    objects=args.objects or 12,
    bin_width=args.bin_width or 0.128,
    bin_height=args.bin_height or 0.150,
    object_seed=args.object_seed or 0,
    cameras=cameras,
  )


def versions() -> dict:
  from importlib.metadata import PackageNotFoundError, version

  out = {}
  for package in ("mjlab", "mujoco", "mujoco-warp", "manipulation-suite", "torch"):
    try:
      out[package] = version(package)
    except PackageNotFoundError:
      out[package] = None
  return out


def env_args(args: Args, plan: Plan, task, env, states) -> dict:
  """What a learner or a replay needs to know about the collection."""
  from demo_rollouts import ACTOR, CAMERA, state_layout

  from mjlab_tasks.common.runtime import source_snapshot

  source = source_snapshot()
  terms = env.observation_manager.active_terms
  cameras = {"camera_keys": sorted(terms[CAMERA])} if CAMERA in terms else {}
  return {
    "env_name": task.task_id,
    "type": 2,  # robomimic's EnvType.GYM_TYPE: the tasks are Gymnasium envs.
    "env_kwargs": {**task.env_kwargs, "num_envs": args.num_envs},
    "engine": plan.engine,
    "device": plan.device,
    "seed": args.seed,
    "shard": f"{plan.shard[0]}/{plan.shard[1]}",
    "seed_ranges": [[plan.seeds[0], plan.seeds[-1] + 1]],
    "only_success": args.only_success,
    "action_noise": {
      "std": args.action_noise,
      "dims": ARM_DIMS,
      "seed": f"numpy default_rng([episode seed, {NOISE_SALT}])",
    },
    "expert": task.expert_name,
    "obs_keys": sorted(terms[ACTOR]),
    **cameras,
    "action_dim": int(env.action_manager.total_action_dim),
    "control_hz": round(1.0 / env.step_dt, 6),
    "state": {
      "vector": "mujoco.mj_getState(model, data, state, mjSTATE_INTEGRATION)",
      "size": int(states.size),
      "components": [[name, size] for name, size in state_layout(env.sim.mj_model)],
      "exact": plan.engine == "mujoco",
    },
    "versions": versions(),
    "git": {"commit": source["commit"], "dirty": source["dirty"]},
  }


class Collector:
  """Runs the expert over the planned seeds and writes each episode kept."""

  def __init__(self, args: Args, plan: Plan, task, writer_factory):
    self.args, self.plan, self.task = args, plan, task
    self.writer_factory = writer_factory
    self.writer = None
    self.bar = tqdm(total=len(plan.seeds), desc=f"{task.task_id} episodes", unit="ep")
    self.kept = self.successes = self.steps = 0
    self.build_s = 0.0  # Environment builds (BinPick: pours), in the wall time.

  def run(self) -> None:
    """CubeTray: one batch over every seed. BinPick: a wave of num_envs
    episodes per environment build, the wave's pour seeded by its first seed."""
    n = self.args.num_envs
    if not self.task.one_episode_per_build:
      self._batch(self.plan.seeds, {})
      return
    for start in range(0, len(self.plan.seeds), n):
      wave = self.plan.seeds[start : start + n]
      self._batch(wave, {"pour_seed": wave[0]}, slots=True)

  def _batch(self, seeds: list[int], cfg_kwargs: dict, slots: bool = False) -> None:
    import demo_rollouts as dr

    start = time.perf_counter()
    env, episode_seeds = dr.build_env(
      self.task, self.args.num_envs, self.plan.device, self.plan.engine, **cfg_kwargs
    )
    self.build_s += time.perf_counter() - start
    states = dr.state_io(env, self.plan.engine)
    if self.writer is None:
      self.writer = self.writer_factory(
        env_args(self.args, self.plan, self.task, env, states)
      )
    # BinPick: seed s runs in slot s - pour_seed (its place in the pour).
    jobs = [dr.Job(s, env=(i if slots else None)) for i, s in enumerate(seeds)]
    expert = None
    noise = [None] * self.args.num_envs  # Per environment: its episode's generator.

    def on_reset(ids, started):
      nonlocal expert
      for i, job in zip(ids, started, strict=True):
        if job is not None:
          noise[i] = np.random.default_rng([job.seed, NOISE_SALT])
      if expert is None:  # After the first reset (BinPick: the pour).
        expert = self.task.make_expert(env)
      elif hasattr(expert, "reset"):
        import torch

        expert.reset(torch.tensor(ids, device=env.device))

    def act(recordings):
      actions = expert.act().detach().cpu().numpy()
      live = [i for i, r in enumerate(recordings) if r is not None]
      dr.check_actions(actions[live], self.task.expert_name)
      if self.args.action_noise == 0.0:
        return actions
      executed = actions.copy()
      for i in live:
        shake = noise[i].normal(0.0, self.args.action_noise, ARM_DIMS)
        executed[i, :ARM_DIMS] = np.clip(actions[i, :ARM_DIMS] + shake, -1.0, 1.0)
      return executed, actions

    done = None
    if self.task.expert_finished is not None:
      done = lambda _slots: self.task.expert_finished(expert).cpu().numpy()  # noqa: E731
    try:
      dr.run_episodes(
        env, episode_seeds, self.task, jobs, act, on_reset, self._keep, states, done
      )
    finally:
      if expert is not None:
        expert.close()
      env.close()

  def _keep(self, finished) -> None:
    from demo_format import Episode

    rec, verdict = finished.recording, finished.verdict
    self.steps += len(rec.actions)
    self.successes += int(verdict.success)
    self.bar.update(1)
    if self.args.only_success and not verdict.success:
      return
    extra = {}
    if self.task.one_episode_per_build:
      extra["pour_seed"] = rec.seed - rec.env
    self.writer.add(
      Episode(
        seed=rec.seed,
        env=rec.env,
        success=verdict.success,
        outcome=verdict.outcome,
        reason=verdict.reason,
        attrs=extra,
        **rec.arrays(),
      )
    )
    self.kept += 1
    self.bar.set_postfix(kept=self.kept, success=self.successes)


def main(args: Args) -> int:
  plan = check_args(args)
  from demo_format import DemoWriter

  from mjlab_tasks.common.runtime import quiet_warp

  quiet_warp()
  task = make_task(args, plan.cameras)
  writers: list[DemoWriter] = []

  def open_writer(env_args_: dict) -> DemoWriter:
    writers.append(DemoWriter(args.output, env_args_))
    return writers[0]

  start, cpu_start = time.perf_counter(), time.process_time()
  collector = Collector(args, plan, task, open_writer)
  try:
    collector.run()
    collector.bar.close()
    path = writers[0].finish()
  except BaseException:
    for writer in writers:
      writer.abort()
    raise
  wall = time.perf_counter() - start
  cpu = time.process_time() - cpu_start  # All threads: the cost on a busy machine.
  episodes = len(plan.seeds)
  run = wall - collector.build_s
  print(
    f"{episodes} episodes (seeds {plan.seeds[0]}..{plan.seeds[-1]}), "
    f"{collector.successes} successes, {collector.kept} demos written, "
    f"{collector.steps} recorded steps; {plan.engine} engine, {args.num_envs} envs: "
    f"{wall:.1f} s in all ({episodes / wall:.3f} episodes/s, "
    f"{collector.steps / wall:.1f} steps/s), of which {collector.build_s:.1f} s "
    f"building environments; rollouts alone {episodes / run:.3f} episodes/s, "
    f"{collector.steps / run:.1f} steps/s; {cpu:.1f} s of CPU time "
    f"({collector.steps / cpu:.1f} steps per CPU second)."
  )
  print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
