"""Recording any policy's rollouts into a demo file.

``Recorder`` wraps a built mjlab environment (``ManagerBasedRlEnv``) and
writes every episode that runs through it to a demo file in the layout of
``collect`` (robomimic's, ``mjlab_tasks.demos.format``): actor observations
(and camera images where the environment has cameras), actions, rewards,
dones, the simulator state before every action (so ``replay`` restores each
episode's initial state and repeats it; exactly on the C engine) and the
task evaluator's verdict. Its API follows ManiSkill's ``RecordEpisode``
wrapper (``reset``, ``step``, the file written when closed); like Isaac
Lab's recorder manager it records the batch of environments at once, each
episode ending where its environment's does::

  task = cube_tray_demo_task(max_steps=60)
  env = make_env(task.make_cfg(task.env_kwargs, 2), device="cpu", engine="mujoco")
  with Recorder(env, "demos/mine.hdf5", task, policy="random") as rec:
    obs, _ = rec.reset(seed=0)
    for _ in range(100):
      obs, rewards, terminated, truncated, extras = rec.step(actions)

The environment must be built from the task's configuration
(``task.make_cfg(task.env_kwargs, num_envs)``): the file records the task
and its ``env_kwargs``, from which a replay rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mjlab_tasks.demos.format import DemoWriter
from mjlab_tasks.demos.rollouts import (
  EpisodeSeeds,
  Recording,
  actor_obs,
  camera_obs,
  check_actions,
)
from mjlab_tasks.registry import DemoTask

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv

RECORDER = "mjlab_tasks.demos.Recorder"


def seed_ranges(seeds: list[int]) -> list[list[int]]:
  """Half-open ranges [lo, hi) covering ``seeds`` (sorted, merged)."""
  ranges: list[list[int]] = []
  for seed in sorted(set(seeds)):
    if ranges and ranges[-1][1] == seed:
      ranges[-1][1] = seed + 1
    else:
      ranges.append([seed, seed + 1])
  return ranges


class Recorder:
  """Records the rollouts of any policy in ``env`` into the new demo file
  ``path`` (it appears when the recorder is closed; an existing file is
  refused).

  Args:
    env: The built environment (its ``num_envs`` environments are recorded
      together). Left open: it is yours; the recorder resets its ended
      environments itself while recording (mjlab's auto-reset would lose the
      last observation and the verdict of each episode).
    path: The demo file to write (``.hdf5``).
    task: The ``DemoTask`` whose configuration built ``env``
      (``mjlab_tasks.registry``: ``cube_tray_demo_task``,
      ``bin_pick_demo_task``), or a task id (its default configuration).
    policy: What acted, recorded in ``env_args["policy"]``.
    seeds: The environment's episode seeds where it was built with
      ``build_env`` (seeded resets): episode seed s then reproduces its
      scene. Otherwise ``reset(seed=...)`` seeds mjlab's generators.
    only_success: Write only the episodes the task's evaluator scores a
      success.
    save_unfinished: Also write the episodes still running at ``reset`` or
      ``close`` (judged in their current state; a replay repeats them).
    attrs: Extra attributes of every demo; BinPick needs ``pour_seed`` (the
      ``pour_seed`` its environment was built with).

  Actions must be finite and in [-1, 1] (``ActionError`` otherwise): the
  layout holds normalized actions only.
  """

  def __init__(
    self,
    env: ManagerBasedRlEnv,
    path: str | Path,
    task: DemoTask | str,
    *,
    policy: str = "",
    seeds: EpisodeSeeds | None = None,
    only_success: bool = False,
    save_unfinished: bool = True,
    attrs: dict | None = None,
  ):
    from mjlab_tasks.demos.collect import environment_args, make_task
    from mjlab_tasks.engine import engine_of, states
    from mjlab_tasks.registry import DEMO_TASKS

    if isinstance(task, str) and task not in DEMO_TASKS:
      raise ValueError(f"task must be one of {', '.join(DEMO_TASKS)}, got {task!r}")
    self.task = make_task(task) if isinstance(task, str) else task
    self.attrs = dict(attrs or {})
    if self.task.one_episode_per_build and "pour_seed" not in self.attrs:
      raise ValueError(
        f"{self.task.task_id}: give attrs={{'pour_seed': ...}}, the pour seed "
        "the environment was built with (a replay rebuilds the pour from it)."
      )
    self.path = Path(path)
    if self.path.exists():
      raise FileExistsError(f"{self.path} exists; a recorder writes a new file.")
    self.env, self.episode_seeds = env, seeds
    self.policy, self.only_success = policy, only_success
    self.save_unfinished = save_unfinished
    self.states = states(env)
    engine = engine_of(env)
    self.env_args = environment_args(
      self.task, env.num_envs, engine, str(env.device), env, self.states
    )
    self.writer = DemoWriter(self.path, self.env_args)
    self.auto_reset = env.cfg.auto_reset
    env.cfg.auto_reset = False  # Ended environments are reset here, after recording.
    self.slots: list[Recording | None] = [None] * env.num_envs
    self.next_seed = 0
    self.seeds: list[int] = []
    self.episodes = self.successes = 0
    """Episodes ended (or cut) so far, and their successes."""

  # The environment's interface, recorded.

  def reset(
    self, seed: int | None = None
  ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Reset every environment and start recording a new episode in each
    (episode seeds ``seed``, ``seed + 1``, ...; later episodes continue
    the count). Episodes still running are written first (``save_unfinished``)
    or dropped. mjlab's (observations, extras)."""
    self._cut()
    if seed is not None:
      self.next_seed = seed
    if self.episode_seeds is None and seed is not None:
      self.env.seed(seed)  # mjlab's generators: the batch is reproducible.
    self._start(list(range(self.env.num_envs)))
    return self.env.obs_buf, self.env.extras

  def step(self, actions: torch.Tensor | np.ndarray) -> tuple:
    """One step of every environment, recorded; mjlab's (observations,
    rewards, terminated, truncated, extras). Environments whose episode
    ended are reset (a new episode recorded) and their observations are the
    new episode's first, as with mjlab's auto-reset."""
    import torch

    env = self.env
    if any(slot is None for slot in self.slots):
      raise RuntimeError("Recorder.step before Recorder.reset")
    obs, frames, state = actor_obs(env), camera_obs(env), self.states.get()
    actions = torch.as_tensor(actions, dtype=torch.float32, device=env.device)
    executed = actions.detach().cpu().numpy().reshape(env.num_envs, -1)
    check_actions(executed, self.policy or "the policy")
    _, rewards, terminated, truncated, extras = env.step(actions)
    rewards, terminated, truncated = (
      rewards.clone(),
      terminated.clone(),
      truncated.clone(),
    )
    after = actor_obs(env)  # Before any reset: an ended episode's last observation.
    reward = rewards.detach().cpu().numpy()
    ended = (terminated | truncated).cpu().numpy()
    for i, rec in enumerate(self.slots):
      rec.obs.append({k: v[i] for k, v in obs.items()})
      if frames:
        rec.images.append({k: v[i].copy() for k, v in frames.items()})
      rec.next_obs.append({k: v[i] for k, v in after.items()})
      rec.actions.append(executed[i])
      rec.rewards.append(float(reward[i]))
      rec.states.append(state[i])
      rec.dones.append(int(ended[i]))
    restart = [int(i) for i in np.flatnonzero(ended)]
    for i in restart:
      self._end(i, bool(terminated[i]), bool(truncated[i]))
    if restart:
      self._start(restart)
    return env.obs_buf, rewards, terminated, truncated, extras

  def record(
    self,
    policy: Callable[[dict], Any] | Any,
    steps: int | None = None,
    episodes: int | None = None,
    seed: int | None = 0,
  ) -> int:
    """Run ``policy`` from a reset (``seed``) until ``episodes`` episodes
    ended or ``steps`` steps ran (whichever comes first; one of them is
    needed). ``policy``: a callable (observations -> actions [num_envs, A])
    or an object with ``act()`` (the experts, ``load_policy``'s policies),
    whose ``reset(env_ids)`` follows every reset. The demos written so far."""
    import torch

    if steps is None and episodes is None:
      raise ValueError("record needs steps or episodes")
    act = policy.act if hasattr(policy, "act") else None
    reset = getattr(policy, "reset", None) if act is not None else None
    obs, _ = self.reset(seed)
    if reset is not None:
      reset(torch.arange(self.env.num_envs, device=self.env.device))
    start, taken = self.episodes, 0
    while (steps is None or taken < steps) and (
      episodes is None or self.episodes - start < episodes
    ):
      obs, _, terminated, truncated, _ = self.step(act() if act else policy(obs))
      taken += 1
      ended = (terminated | truncated).nonzero().flatten()
      if reset is not None and len(ended):
        reset(ended)
    return len(self.writer.names)

  def close(self) -> Path | None:
    """Write the episodes still running (``save_unfinished``), then the
    file; its path. The environment stays open, with its own reset mode."""
    if not self.writer.file.id.valid:
      return None
    try:
      self._cut()
      self.env_args.update(self._seed_args())
      path = self.writer.finish()
    except BaseException:
      self.writer.abort()
      raise
    finally:
      self.env.cfg.auto_reset = self.auto_reset
    return path

  def abort(self) -> None:
    """Drop the recording: no file appears."""
    self.writer.abort()
    self.env.cfg.auto_reset = self.auto_reset

  def __enter__(self) -> Recorder:
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    if exc_type is None:
      self.close()
    else:
      self.abort()

  # Episodes.

  def _start(self, ids: list[int]) -> None:
    import torch

    for i in ids:
      self.slots[i] = Recording(self.next_seed, i)
      if self.episode_seeds is not None:
        self.episode_seeds.values[i] = self.next_seed
      self.next_seed += 1
    self.env.reset(env_ids=torch.tensor(ids, device=self.env.device))

  def _end(self, i: int, terminated: bool, truncated: bool) -> None:
    """Environment ``i``'s episode ended (or is cut): judged, written if kept."""
    rec, self.slots[i] = self.slots[i], None
    verdict = self.task.judge(self.env, i, terminated, truncated)
    self.episodes += 1
    self.successes += int(verdict.success)
    self.seeds.append(rec.seed)
    if self.only_success and not verdict.success:
      return
    self.writer.add(rec.episode(verdict, self.attrs))

  def _cut(self) -> None:
    """The episodes still running, written as they are or dropped."""
    for i, rec in enumerate(self.slots):
      if rec is not None and rec.actions and self.save_unfinished:
        rec.dones[-1] = 1  # The file's episode ends here.
        self._end(i, False, False)
      self.slots[i] = None

  def _seed_args(self) -> dict:
    ranges = seed_ranges(self.seeds) or [[0, 0]]
    return {
      "seed": ranges[0][0],
      "shard": "0/1",
      "seed_ranges": ranges,
      "only_success": self.only_success,
      "policy": self.policy,
      "recorder": RECORDER,
    }
