"""Expert demonstrations: a task's privileged expert over seeded episodes,
every episode (or every success) written to a demo file.

``collect_demos(Collection(...), path)`` is what ``scripts/collect_demos.py`` runs;
the tool checks its flags, shows the progress and prints the summary.

Episode j of a collection has seed ``seed + j``; ``shard_seeds`` cuts the
seeds of shard K of N. CubeTray runs every seed in one batch; BinPick a wave
of ``num_envs`` episodes per environment build, the wave's pour seeded by
its first seed (``DemoTask.one_episode_per_build``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mjlab_tasks.demos.format import DemoWriter
from mjlab_tasks.demos.rollouts import ACTOR, CAMERA
from mjlab_tasks.registry import DemoTask

ARM_DIMS = 6
"""The arm's share of every task's action (Cartesian delta pose); the gripper's
command follows and gets no noise: a noisy closing command drops objects."""
NOISE_SALT = 0xDA27


@dataclass
class Collection:
  """What one collection (or one shard of it) runs."""

  task: DemoTask
  seeds: list[int]
  """The episode seeds this run collects (``shard_seeds``)."""
  num_envs: int
  device: str
  engine: str
  seed: int = 0
  """The whole collection's first seed."""
  shard: tuple[int, int] = (0, 1)
  only_success: bool = False
  """Write only the episodes the task's evaluator scores a success."""
  action_noise: float = 0.0
  """DART noise: the standard deviation of Gaussian noise added to the
  expert's arm actions before they are executed (0: none)."""


def shard_seeds(seed: int, episodes: int, shard: tuple[int, int]) -> list[int]:
  """The seeds of shard K of N: a consecutive slice of seed .. seed+episodes-1."""
  k, n = shard
  return [seed + j for j in range(k * episodes // n, (k + 1) * episodes // n)]


def make_task(
  task_id: str,
  max_steps: int | None = None,
  cameras: tuple[str, ...] = (),
  objects: int | None = None,
  bin_width: float | None = None,
  bin_height: float | None = None,
  object_seed: int | None = None,
  object_set: str | None = None,
) -> DemoTask:
  """The task as collection runs it (None: the task's default)."""
  from mjlab_tasks.registry import bin_pick_demo_task, cube_tray_demo_task

  if task_id == "CubeTray-UR5-RG2":
    return cube_tray_demo_task(max_steps, cameras)
  return bin_pick_demo_task(
    max_steps,
    objects=objects or 12,
    bin_width=bin_width or 0.128,
    bin_height=bin_height or 0.150,
    object_seed=object_seed or 0,
    cameras=cameras,
    object_set=object_set or "default",
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


def environment_args(
  task: DemoTask, num_envs: int, engine: str, device: str, env, states
) -> dict:
  """What every demo file records about its environment: the task, its
  configuration, the engine, the observation terms, the state vector and
  the versions (no seeds: the recording adds them)."""
  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.engine import traits
  from mjlab_tasks.engine.state import state_layout

  source = source_snapshot()
  terms = env.observation_manager.active_terms
  cameras = {"camera_keys": sorted(terms[CAMERA])} if CAMERA in terms else {}
  return {
    "env_name": task.task_id,
    "type": 2,  # robomimic's EnvType.GYM_TYPE: the tasks are Gymnasium envs.
    "env_kwargs": {**task.env_kwargs, "num_envs": num_envs},
    "engine": engine,
    "device": device,
    "obs_keys": sorted(terms[ACTOR]),
    **cameras,
    "action_dim": int(env.action_manager.total_action_dim),
    "control_hz": round(1.0 / env.step_dt, 6),
    "state": {
      "vector": "mujoco.mj_getState(model, data, state, mjSTATE_INTEGRATION)",
      "size": int(states.size),
      "components": [[name, size] for name, size in state_layout(env.sim.mj_model)],
      "exact": traits(engine).exact_states,
    },
    "versions": versions(),
    "git": {"commit": source["commit"], "dirty": source["dirty"]},
  }


def env_args(run: Collection, env, states) -> dict:
  """What a learner or a replay needs to know about the collection."""
  return {
    **environment_args(run.task, run.num_envs, run.engine, run.device, env, states),
    "seed": run.seed,
    "shard": f"{run.shard[0]}/{run.shard[1]}",
    "seed_ranges": [[run.seeds[0], run.seeds[-1] + 1]],
    "only_success": run.only_success,
    "action_noise": {
      "std": run.action_noise,
      "dims": ARM_DIMS,
      "seed": f"numpy default_rng([episode seed, {NOISE_SALT}])",
    },
    "expert": run.task.expert_name,
  }


class Collector:
  """Runs the expert over the planned seeds and writes each episode kept.

  ``writer_factory(env_args)`` opens the writer once the first environment
  is built; ``on_episode(collector, kept)`` follows every ended episode."""

  def __init__(
    self,
    run: Collection,
    writer_factory: Callable[[dict], DemoWriter],
    on_episode: Callable[[Collector, bool], None] | None = None,
  ):
    self.collection, self.task = run, run.task
    self.writer_factory = writer_factory
    self.on_episode = on_episode
    self.writer = None
    self.kept = self.successes = self.steps = 0
    self.build_s = 0.0  # Environment builds (BinPick: pours), in the wall time.

  def run(self) -> None:
    """CubeTray: one batch over every seed. BinPick: a wave of num_envs
    episodes per environment build, the wave's pour seeded by its first seed."""
    n = self.collection.num_envs
    if not self.task.one_episode_per_build:
      self._batch(self.collection.seeds, {})
      return
    for start in range(0, len(self.collection.seeds), n):
      wave = self.collection.seeds[start : start + n]
      self._batch(wave, {"pour_seed": wave[0]}, slots=True)

  def _batch(self, seeds: list[int], cfg_kwargs: dict, slots: bool = False) -> None:
    from mjlab_tasks.demos import rollouts as dr
    from mjlab_tasks.engine import states as engine_states

    run = self.collection
    start = time.perf_counter()
    env, episode_seeds = dr.build_env(
      self.task, run.num_envs, run.device, run.engine, **cfg_kwargs
    )
    self.build_s += time.perf_counter() - start
    states = engine_states(env)
    if self.writer is None:
      self.writer = self.writer_factory(env_args(run, env, states))
    # BinPick: seed s runs in slot s - pour_seed (its place in the pour).
    jobs = [dr.Job(s, env=(i if slots else None)) for i, s in enumerate(seeds)]
    expert = None
    noise = [None] * run.num_envs  # Per environment: its episode's generator.

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
      if run.action_noise == 0.0:
        return actions
      executed = actions.copy()
      for i in live:
        shake = noise[i].normal(0.0, run.action_noise, ARM_DIMS)
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
    rec, verdict = finished.recording, finished.verdict
    self.steps += len(rec.actions)
    self.successes += int(verdict.success)
    kept = not (self.collection.only_success and not verdict.success)
    if kept:
      extra = {}
      if self.task.one_episode_per_build:
        extra["pour_seed"] = rec.seed - rec.env
      self.writer.add(rec.episode(verdict, extra))
      self.kept += 1
    if self.on_episode is not None:
      self.on_episode(self, kept)


def collect_demos(
  run: Collection,
  output: Path,
  on_episode: Callable[[Collector, bool], None] | None = None,
) -> tuple[Collector, Path]:
  """Run the collection into a new demo file ``output`` (it appears only
  when complete); the collector (its counts) and the file's path."""
  writers: list[DemoWriter] = []

  def open_writer(env_args_: dict) -> DemoWriter:
    writers.append(DemoWriter(output, env_args_))
    return writers[0]

  collector = Collector(run, open_writer, on_episode)
  try:
    collector.run()
    path = writers[0].finish()
  except BaseException:
    for writer in writers:
      writer.abort()
    raise
  return collector, path
