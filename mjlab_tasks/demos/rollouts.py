"""Rollouts for demonstration files: seeded resets, observation capture,
the batched episode loop. Shared by ``collect`` (the expert acts) and
``replay`` (recorded actions act, from recorded initial states); the
``Recorder`` reads observations the same way.

Episodes are reproducible from their seed: every randomizing reset event of
the task runs once per environment under a torch generator seeded from that
environment's episode seed (the task's own event functions and ranges, only
their random stream chosen per episode), so an episode's initial scene does
not depend on the batch, the other environments or the order of resets.

States: ``mjlab_tasks.engine.states`` (MuJoCo's integration state of each
environment, exact on the C engine).

Imports mjlab and the tasks lazily (inside functions): the tools check their
flags first. Tasks: ``mjlab_tasks.registry`` (``DemoTask``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mjlab_tasks.registry import DemoTask, EpisodeVerdict

ACTOR = "actor"
CAMERA = "camera"
"""The image observation group (mjlab_tasks.common.cameras), when cameras exist."""

# Seeded resets.


class EpisodeSeeds:
  """The episode seed of each environment, read by the seeded reset events."""

  def __init__(self, num_envs: int):
    self.values = [0] * num_envs


def _torch_seed(episode_seed: int, salt: int) -> int:
  state = np.random.SeedSequence([episode_seed, salt]).generate_state(2, np.uint32)
  return (int(state[0]) << 31) ^ int(state[1])


def _seeded_event(func, seeds: EpisodeSeeds, salt: int):
  """A reset event that runs ``func`` per environment on its episode's stream."""
  import torch

  def event(env, env_ids, *args, **kwargs):
    ids = range(env.num_envs) if env_ids is None else env_ids.tolist()
    devices = [torch.device(env.device).index or 0] if "cuda" in str(env.device) else []
    for i in ids:
      with torch.random.fork_rng(devices=devices):
        torch.manual_seed(_torch_seed(seeds.values[i], salt))
        func(env, torch.tensor([i], device=env.device), *args, **kwargs)

  return event


def seed_reset_events(cfg, seeds: EpisodeSeeds) -> None:
  """Make every function-type reset event draw from its episode's seed.

  Class-type events (BinPick's pourer: it restores a fixed pour) are left as
  they are."""
  for name, term in cfg.events.items():
    if term.mode == "reset" and not isinstance(term.func, type):
      term.func = _seeded_event(term.func, seeds, zlib.crc32(name.encode()))


def build_env(task: DemoTask, num_envs: int, device: str, engine: str, **cfg_kwargs):
  """The task's environment with seeded resets and no automatic reset (the
  loop resets ended environments itself, after reading their last step)."""
  import contextlib
  import io

  from mjlab_tasks.engine import make_env

  cfg = task.make_cfg(task.env_kwargs, num_envs, **cfg_kwargs)
  cfg.auto_reset = False
  seeds = EpisodeSeeds(num_envs)
  seed_reset_events(cfg, seeds)
  with contextlib.redirect_stdout(io.StringIO()):  # mjlab's manager tables
    env = make_env(cfg, device=device, engine=engine)
  return env, seeds


# Observations.


def actor_obs(env) -> dict[str, np.ndarray]:
  """The actor observation, one array per term [num_envs, ...] (float32)."""
  manager = env.observation_manager
  names = manager.active_terms[ACTOR]
  dims = manager.group_obs_term_dim[ACTOR]
  buf = env.obs_buf[ACTOR]
  if isinstance(buf, dict):
    return {k: buf[k].detach().cpu().float().numpy() for k in names}
  out, start = {}, 0
  for name, dim in zip(names, dims, strict=True):
    width = int(np.prod(dim))
    out[name] = (
      buf[:, start : start + width].reshape(-1, *dim).detach().cpu().float().numpy()
    )
    start += width
  return out


def camera_obs(env) -> dict[str, np.ndarray]:
  """The camera group's images, one array per term [num_envs, H, W, C]
  (uint8 RGB, float32 depth [m]); empty without cameras (nothing read).

  Views of the sensors' buffers, which the next render overwrites: copy
  what is kept."""
  buf = env.obs_buf.get(CAMERA)
  if buf is None:
    return {}
  return {k: v.detach().cpu().numpy() for k, v in buf.items()}


def render_camera_obs(env) -> dict[str, np.ndarray]:
  """The camera group's images of the simulator's current state (rendered
  now; after a state restore, which the observation buffer predates)."""
  env.sim.sense()
  group = env.observation_manager.compute_group(CAMERA)
  return {k: v.detach().cpu().numpy() for k, v in group.items()}


# The episode loop.


@dataclass
class Recording:
  """One environment's episode in progress."""

  seed: int
  env: int
  obs: list[dict[str, np.ndarray]] = field(default_factory=list)
  next_obs: list[dict[str, np.ndarray]] = field(default_factory=list)
  actions: list[np.ndarray] = field(default_factory=list)
  expert_actions: list[np.ndarray] = field(default_factory=list)
  """The expert's own actions, when the executed ones had noise added."""
  rewards: list[float] = field(default_factory=list)
  dones: list[int] = field(default_factory=list)
  states: list[np.ndarray] = field(default_factory=list)
  images: list[dict[str, np.ndarray]] = field(default_factory=list)
  """Camera frames before each action (only with cameras). Written as obs,
  not as next_obs: the frame after the last action is not in the recorded
  states, so a re-render from states could not make it."""

  def episode(self, verdict: EpisodeVerdict, attrs: dict):
    """The recorded episode, as the demonstration file stores it."""
    from mjlab_tasks.demos.format import Episode

    return Episode(
      seed=self.seed,
      env=self.env,
      success=verdict.success,
      outcome=verdict.outcome,
      reason=verdict.reason,
      attrs=attrs,
      **self.arrays(),
    )

  def arrays(self) -> dict:
    obs = {k: np.stack([o[k] for o in self.obs]) for k in self.obs[0]}
    if self.images:
      obs |= {k: np.stack([o[k] for o in self.images]) for k in self.images[0]}
    return {
      "obs": obs,
      "next_obs": {k: np.stack([o[k] for o in self.next_obs]) for k in self.obs[0]},
      "actions": np.stack(self.actions).astype(np.float32),
      "expert_actions": np.stack(self.expert_actions).astype(np.float32)
      if self.expert_actions
      else None,
      "rewards": np.asarray(self.rewards, dtype=np.float32),
      "dones": np.asarray(self.dones, dtype=np.int64),
      "states": np.stack(self.states),
    }


class ActionError(RuntimeError):
  """An action outside [-1, 1] or not finite: not a demonstration."""


def check_actions(actions: np.ndarray, who: str) -> None:
  bad = ~np.isfinite(actions).all(axis=1) | (np.abs(actions) > 1.0).any(axis=1)
  if bad.any():
    i = int(np.argmax(bad))
    raise ActionError(
      f"{who} issued an action outside [-1, 1] in env {i}: {actions[i].tolist()}"
    )


@dataclass
class Job:
  """An episode to run: its seed, and for a replay its recorded slot and data."""

  seed: int
  env: int | None = None
  """The environment it must run in (None: any)."""
  episode: object = None


@dataclass
class Finished:
  """An ended episode handed to the caller."""

  job: Job
  recording: Recording
  verdict: EpisodeVerdict


def run_episodes(
  env,
  seeds: EpisodeSeeds,
  task: DemoTask,
  jobs: list[Job],
  act: Callable[[list[Recording | None]], np.ndarray],
  on_reset: Callable[[list[int], list[Job | None]], None],
  on_end: Callable[[Finished], None],
  states,
  controller_done: Callable[[list[Recording | None]], np.ndarray] | None = None,
) -> None:
  """Run ``jobs`` (in order) on the batch.

  Each environment takes the next job it may run when its episode ends;
  environments without one keep stepping unrecorded until all jobs end.
  ``act(slots)`` gives the actions [num_envs, A] (the expert's, or recorded
  ones), or (executed, expert's) when noise is added to the expert's; ``on_reset(ids, jobs)`` runs after environments ``ids`` were reset
  (the expert plans; a replay restores the recorded initial state);
  ``controller_done(slots)`` [num_envs] bool ends episodes the environment
  did not end; ``on_end`` receives each ended episode with the task's
  verdict on its last state.
  """
  import torch

  n = env.num_envs
  pending = list(jobs)
  slots: list[Recording | None] = [None] * n
  running: list[Job | None] = [None] * n

  def take(i: int) -> Job | None:
    for k, job in enumerate(pending):
      if job.env is None or job.env == i:
        return pending.pop(k)
    return None

  def start(ids: list[int]) -> None:
    for i in ids:
      running[i] = take(i)
      slots[i] = None if running[i] is None else Recording(running[i].seed, i)
      if running[i] is not None:  # Idle slots keep their seed, never recorded.
        seeds.values[i] = running[i].seed
    env.reset(env_ids=torch.tensor(ids, device=env.device))
    on_reset(ids, [running[i] for i in ids])

  start(list(range(n)))
  while any(s is not None for s in slots):
    obs = actor_obs(env)
    frames = camera_obs(env)
    state = states.get()
    actions = act(slots)
    actions, labels = actions if isinstance(actions, tuple) else (actions, None)
    _, rewards, terminated, truncated, _ = env.step(
      torch.as_tensor(actions, dtype=torch.float32, device=env.device)
    )
    after = actor_obs(env)  # Before any reset: an ended episode's last observation.
    rewards = rewards.detach().cpu().numpy()
    terminated = terminated.cpu().numpy()
    truncated = truncated.cpu().numpy()
    for i, rec in enumerate(slots):
      if rec is not None:
        rec.obs.append({k: v[i] for k, v in obs.items()})
        if frames:
          rec.images.append({k: v[i].copy() for k, v in frames.items()})
        rec.next_obs.append({k: v[i] for k, v in after.items()})
        rec.actions.append(actions[i])
        if labels is not None:
          rec.expert_actions.append(labels[i])
        rec.rewards.append(float(rewards[i]))
        rec.states.append(state[i])
    stopped = np.zeros(n, bool) if controller_done is None else controller_done(slots)
    ended = terminated | truncated | stopped
    for i, rec in enumerate(slots):
      if rec is not None:
        rec.dones.append(int(ended[i]))
        if ended[i]:
          verdict = task.judge(env, i, bool(terminated[i]), bool(truncated[i]))
          on_end(Finished(running[i], rec, verdict))
    # mjlab needs a reset of every terminated env; ended recorded ones start anew.
    restart = [
      i
      for i in range(n)
      if (ended[i] and slots[i] is not None) or terminated[i] or truncated[i]
    ]
    if restart:
      start(restart)
