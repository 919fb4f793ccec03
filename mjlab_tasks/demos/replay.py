"""Replaying demo files: recorded actions from recorded initial states,
compared step by step; and camera images rendered from recorded states.

``replay_episodes(env_args, episodes, device, engine)`` rebuilds the task from the
file's env_args (same configuration and number of environments), and for
each episode resets its environment slot the way collection did (the
episode's seed), restores the recorded initial simulator state
(``states[0]``), applies the recorded actions one by one and compares, at
every step, the simulator state, the observations, the reward and the done
flag with the recorded ones, and at the end the task evaluator's verdict and
the episode length (``Result``). On the C engine a file recorded there must
replay bitwise (``Result.exact``; ``both_exact``).

``render_file`` writes a copy of a file with the camera images of every
recorded state added as ``obs/<term>`` (``scripts/replay_demos.py
--render-cameras``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mjlab_tasks.demos.format import Episode
from mjlab_tasks.registry import demo_task_from_env_args


@dataclass
class Result:
  demo: str
  seed: int
  env: int
  steps: int
  replayed_steps: int
  max_state_divergence: float
  max_obs_divergence: float
  max_reward_divergence: float
  dones_match: bool
  recorded: list
  replayed: list
  exact: bool = False

  @property
  def verdict_reproduced(self) -> bool:
    return self.recorded == self.replayed and self.steps == self.replayed_steps


def load_episodes(path: Path) -> list[tuple[str, Episode]]:
  from mjlab_tasks.demos.format import iter_episodes, open_demos

  with open_demos(path) as f:
    return list(iter_episodes(f))


def both_exact(engine: str, recorded: str | None) -> bool:
  """Whether a replay must repeat the recording bit for bit: both runs on
  an engine whose states are exact."""
  from mjlab_tasks.engine import ENGINES, traits

  return (
    traits(engine).exact_states
    and recorded in ENGINES
    and traits(recorded).exact_states
  )


def compare(name: str, episode: Episode, finished, exact_expected: bool) -> Result:
  """One replayed episode against its recording."""
  rec = finished.recording.arrays()
  steps = min(len(rec["actions"]), episode.num_samples)

  def gap(a, b) -> float:
    if a.dtype == np.uint8:  # RGB images: exact integers, no float64 copy.
      diff = a[:steps].astype(np.int16) - b[:steps].astype(np.int16)
      return float(np.abs(diff).max(initial=0))
    return float(np.abs(np.asarray(a[:steps], np.float64) - b[:steps]).max(initial=0.0))

  verdict = finished.verdict
  result = Result(
    demo=name,
    seed=episode.seed,
    env=episode.env,
    steps=episode.num_samples,
    replayed_steps=len(rec["actions"]),
    max_state_divergence=gap(rec["states"], episode.states),
    max_obs_divergence=max(
      [gap(rec["obs"][k], episode.obs[k]) for k in episode.obs]
      + [gap(rec["next_obs"][k], v) for k, v in (episode.next_obs or {}).items()]
    ),
    max_reward_divergence=gap(rec["rewards"], episode.rewards),
    dones_match=bool(np.array_equal(rec["dones"], episode.dones)),
    recorded=[episode.success, episode.outcome, episode.reason],
    replayed=[verdict.success, verdict.outcome, verdict.reason],
  )
  result.exact = (
    result.verdict_reproduced
    and result.dones_match
    and result.max_state_divergence == 0.0
    and result.max_obs_divergence == 0.0
    and result.max_reward_divergence == 0.0
  )
  return result


def replay_episodes(
  env_args: dict,
  episodes: list[tuple[str, Episode]],
  device: str,
  engine: str,
  on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
  """Every episode, in waves per environment build (BinPick: per pour seed);
  ``on_result`` follows each replayed episode. Results in the file's order."""
  from mjlab_tasks.demos import rollouts as dr

  task = demo_task_from_env_args(env_args)
  num_envs = int(env_args["env_kwargs"]["num_envs"])
  exact_expected = both_exact(engine, env_args.get("engine"))
  groups: dict[int | None, list] = {}
  for name, episode in episodes:
    key = int(episode.attrs["pour_seed"]) if task.one_episode_per_build else None
    groups.setdefault(key, []).append((name, episode))
  results: list[Result] = []
  for pour_seed, group in groups.items():
    cfg_kwargs = {} if pour_seed is None else {"pour_seed": pour_seed}
    env, seeds = dr.build_env(task, num_envs, device, engine, **cfg_kwargs)
    try:
      results += replay_group(env, seeds, task, group, exact_expected, on_result)
    finally:
      env.close()
  order = {name: i for i, (name, _) in enumerate(episodes)}
  return sorted(results, key=lambda r: order[r.demo])


def replay_group(
  env, seeds, task, group, exact_expected, on_result=None
) -> list[Result]:
  import torch

  from mjlab_tasks.demos import rollouts as dr
  from mjlab_tasks.engine import states as engine_states

  states = engine_states(env)
  jobs = [dr.Job(ep.seed, env=ep.env, episode=(name, ep)) for name, ep in group]
  running: dict[int, Episode] = {}
  action_dim = group[0][1].actions.shape[1]
  results: list[Result] = []

  def on_reset(ids, started):
    restore = [(i, job) for i, job in zip(ids, started, strict=True) if job is not None]
    for i, job in restore:
      running[i] = job.episode[1]
    if restore:
      rows = [i for i, _ in restore]
      states.set(rows, np.stack([job.episode[1].states[0] for _, job in restore]))
      if dr.CAMERA in env.obs_buf:  # The restored state's pictures.
        env.sim.sense()
      # The observations of the restored state (as collection read them).
      env.obs_buf = env.observation_manager.compute(
        update_history=True, env_ids=torch.tensor(rows, device=env.device)
      )

  def act(slots):
    actions = np.zeros((env.num_envs, action_dim), dtype=np.float32)
    for i, rec in enumerate(slots):
      if rec is not None:
        actions[i] = running[i].actions[len(rec.actions)]
    return actions

  def all_played(slots):
    return np.array(
      [
        rec is not None and len(rec.actions) >= running[i].num_samples
        for i, rec in enumerate(slots)
      ]
    )

  def on_end(finished):
    name, episode = finished.job.episode
    results.append(compare(name, episode, finished, exact_expected))
    if on_result is not None:
      on_result(results[-1])

  dr.run_episodes(env, seeds, task, jobs, act, on_reset, on_end, states, all_played)
  return results


def replay_file(
  path: Path,
  device: str = "cpu",
  engine: str | None = None,
  on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
  """Replay every episode of a demo file (checked first: DemoFileError);
  ``engine`` None: the one it was recorded with."""
  from mjlab_tasks.demos.format import validate_file

  env_args = validate_file(path)
  engine = engine or env_args.get("engine")
  return replay_episodes(env_args, load_episodes(path), device, engine, on_result)


# Rendering camera images from recorded states.


def with_cameras(env_args: dict, cameras: tuple[str, ...]) -> dict:
  """A file's env_args with the cameras added to its configuration."""
  kwargs = env_args["env_kwargs"]
  return {**env_args, "env_kwargs": {**kwargs, "cameras": list(cameras)}}


def render_file(
  source: Path,
  output: Path,
  new_args: dict,
  device: str,
  engine: str,
  progress: Callable[[int], object] | None = None,
) -> Path:
  """A copy of ``source`` with the camera images of every recorded state,
  as ``output``; ``new_args``: its env_args with the cameras
  (``with_cameras``). ``progress(total)`` may return a bar (``update(1)``
  per episode, ``close()`` at the end)."""
  from mjlab_tasks.demos.format import (
    DATA,
    DemoWriter,
    demo_names,
    open_demos,
  )

  task = demo_task_from_env_args(new_args)
  num_envs = int(new_args["env_kwargs"]["num_envs"])
  with open_demos(source) as f, DemoWriter(output, new_args) as writer:
    data = f[DATA]
    names = demo_names(f)
    for name in names:  # Same names, same order; images added below.
      writer.add_copy(data[name])
    groups: dict[int | None, list[str]] = {}
    for name in names:  # BinPick: one environment build per pour.
      pour = data[name].attrs.get("pour_seed") if task.one_episode_per_build else None
      groups.setdefault(None if pour is None else int(pour), []).append(name)
    bar = progress(len(names)) if progress is not None else None
    try:
      for pour_seed, group in groups.items():
        build = (task, num_envs, device, engine, pour_seed)
        render_group(source, build, group, data, writer, bar)
    finally:
      if bar is not None:
        bar.close()  # an error's line then starts on a line of its own
    return writer.finish()


def render_group(source: Path, build: tuple, group, data, writer, bar) -> None:
  """Render the episodes ``group`` of ``source`` (its data group ``data``)
  in one environment build (task, num_envs, device, engine, pour seed) into
  the writer."""
  from mjlab_tasks.demos import rollouts as dr
  from mjlab_tasks.demos.format import write_obs
  from mjlab_tasks.engine import states as engine_states

  task, num_envs, device, engine, pour_seed = build
  new_args = writer.env_args
  cfg_kwargs = {} if pour_seed is None else {"pour_seed": pour_seed}
  env, _ = dr.build_env(task, num_envs, device, engine, **cfg_kwargs)
  try:
    env.reset()
    terms = env.observation_manager.active_terms[dr.CAMERA]
    new_args["camera_keys"] = sorted(terms)
    episodes = [(n, int(data[n].attrs["env"]), data[n]["states"][()]) for n in group]
    check_state_size(source, episodes, engine_states(env).size, new_args)
    for name, images in render_episodes(env, engine_states(env), episodes):
      for key, frames in images.items():
        write_obs(writer.data[name]["obs"], key, frames)
      if bar is not None:
        bar.update(1)
  finally:
    env.close()


def check_state_size(source: Path, episodes, size: int, new_args: dict) -> None:
  """DemoFileError when the recorded states do not fit the world with the
  cameras: the wrist camera mounts the D415 on the hand (two bodies more),
  so a file collected without it has other dynamics and cannot be drawn
  from the wrist."""
  from mjlab_tasks.demos.format import DemoFileError

  widths = {s.shape[1] for _, _, s in episodes}
  if widths != {size}:
    cameras = ",".join(new_args["env_kwargs"].get("cameras", ()))
    raise DemoFileError(
      f"{source}: its states hold {sorted(widths)} numbers, a world with the "
      f"camera(s) {cameras} {size}: the wrist camera needs the D415 on the hand "
      "when the episodes were collected (collect_demos.py --cameras wrist); "
      "the scene camera renders from any file."
    )


def render_episodes(env, states, episodes):
  """(name, {term: [T, H, W, C]}) of each episode: the episodes of different
  slots rendered together (a render draws every environment), each in its
  recorded slot (states are in world coordinates, and each slot has its own
  origin)."""
  from mjlab_tasks.demos import rollouts as dr

  queues: dict[int, list] = {}
  for episode in episodes:
    queues.setdefault(episode[1], []).append(episode)
  while any(queues.values()):
    batch = [queue.pop(0) for queue in queues.values() if queue]
    frames = {name: [] for name, _, _ in batch}
    for t in range(max(len(s) for _, _, s in batch)):
      live = [(name, slot, s[t]) for name, slot, s in batch if t < len(s)]
      states.set([slot for _, slot, _ in live], np.stack([row for *_, row in live]))
      images = dr.render_camera_obs(env)
      for name, slot, _ in live:
        frames[name].append({k: v[slot].copy() for k, v in images.items()})
    for name, per_step in frames.items():
      yield name, {k: np.stack([f[k] for f in per_step]) for k in per_step[0]}
