"""Expert rollouts for demonstration files: tasks, seeded resets, simulator
state capture and restore, the batched episode loop. Shared by
``collect_demos.py`` (the expert acts) and ``replay_demos.py`` (recorded
actions act, from recorded initial states).

Episodes are reproducible from their seed: every randomizing reset event of
the task runs once per environment under a torch generator seeded from that
environment's episode seed (the task's own event functions and ranges, only
their random stream chosen per episode), so an episode's initial scene does
not depend on the batch, the other environments or the order of resets.

States: on the C engine, ``mujoco.mj_getState(mjSTATE_INTEGRATION)`` of each
environment's ``MjData`` (float64; time, qpos, qvel, act, warm start, controls,
applied forces, mocap poses, ...), everything ``mj_step`` reads; on MuJoCo
Warp the same vector, assembled from Warp's float32 arrays.

Imports mjlab and the tasks lazily (inside functions): the tools check their
flags first.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg

ACTOR = "actor"
CAMERA = "camera"
"""The image observation group (mjlab_tasks.common.cameras), when cameras exist."""
TASKS = ("CubeTray-UR5-RG2", "BinPick-UR5-RG2")
# mjtState components of mjSTATE_INTEGRATION, in the state vector's order,
# with the name of the matching data field.
STATE_FIELDS = (
  ("mjSTATE_TIME", "time"),
  ("mjSTATE_QPOS", "qpos"),
  ("mjSTATE_QVEL", "qvel"),
  ("mjSTATE_ACT", "act"),
  ("mjSTATE_WARMSTART", "qacc_warmstart"),
  ("mjSTATE_CTRL", "ctrl"),
  ("mjSTATE_QFRC_APPLIED", "qfrc_applied"),
  ("mjSTATE_XFRC_APPLIED", "xfrc_applied"),
  ("mjSTATE_EQ_ACTIVE", "eq_active"),
  ("mjSTATE_MOCAP_POS", "mocap_pos"),
  ("mjSTATE_MOCAP_QUAT", "mocap_quat"),
  ("mjSTATE_USERDATA", "userdata"),
  ("mjSTATE_PLUGIN", "plugin_state"),
)


# Tasks.


@dataclass
class Verdict:
  """The end of one episode as the task's evaluator sees it."""

  success: bool
  outcome: str
  reason: str


@dataclass
class TaskSpec:
  """What collection and replay need to know about one task."""

  task_id: str
  env_kwargs: dict
  """The configuration that matters (recorded in env_args, rebuilt from it)."""
  make_cfg: Callable[[dict, int], ManagerBasedRlEnvCfg]
  make_expert: Callable[[ManagerBasedRlEnv], object]
  judge: Callable[[ManagerBasedRlEnv, int, bool, bool], Verdict]
  """(env, env index, terminated, truncated) at an episode's last step."""
  one_episode_per_build: bool = False
  """BinPick: a reset restores the same pour, so every episode needs a new
  environment (its pour seed); episodes run in waves of num_envs."""
  expert_finished: Callable[[object], torch.Tensor] | None = None
  expert_name: str = ""


def _steps_to_seconds(cfg, steps: int) -> float:
  return steps * cfg.decimation * cfg.sim.mujoco.timestep


def _with_cameras(env_kwargs: dict, cameras: tuple[str, ...]) -> dict:
  """env_kwargs plus the cameras, only when there are any: a state-only
  collection records exactly the env_args it did before cameras existed."""
  return {**env_kwargs, "cameras": list(cameras)} if cameras else env_kwargs


def cube_tray_task(max_steps: int | None, cameras: tuple[str, ...] = ()) -> TaskSpec:
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg

  env_kwargs = {
    "play": True,
    "arm_action": "cartesian",
    "randomize": True,
    "max_steps": max_steps or 240,
  }

  def make_cfg(kwargs: dict, num_envs: int):
    cfg = cube_tray_env_cfg(
      play=kwargs["play"],
      arm_action=kwargs["arm_action"],
      randomize=kwargs["randomize"],
      num_envs=num_envs,
      cameras=tuple(kwargs.get("cameras", ())),
    )
    cfg.episode_length_s = _steps_to_seconds(cfg, kwargs["max_steps"])
    return cfg

  def judge(env, i: int, terminated: bool, truncated: bool) -> Verdict:
    from evaluators.cube_tray import OUTCOME_NAMES, REASON_NAMES, Outcome, Reason
    from mjlab_tasks.cube_tray.mdp import cube_tray_verdict

    verdict = cube_tray_verdict(env)
    success = bool(verdict["success"][i])
    outcome = Outcome(int(verdict["outcome"][i]))
    return Verdict(
      success=success,
      # Ended (time-out) before success: a failure, as evaluate_cube_tray says.
      outcome="failure" if outcome == Outcome.IN_PROGRESS else OUTCOME_NAMES[outcome],
      reason="" if success else REASON_NAMES[Reason(int(verdict["reason"][i]))],
    )

  return TaskSpec(
    task_id="CubeTray-UR5-RG2",
    env_kwargs=_with_cameras(env_kwargs, cameras),
    make_cfg=make_cfg,
    make_expert=make_cube_tray_expert,
    judge=judge,
    expert_name="experts.cube_tray.CubeTrayExpert (Cartesian actions)",
  )


def make_cube_tray_expert(env):
  """The cube-in-tray expert; it acts in the task's Cartesian action space
  because the environment's arm term is Cartesian (it picks its mode from it)."""
  from experts.cube_tray import CubeTrayExpert

  expert = CubeTrayExpert(env)
  if expert.mode != "cartesian":
    raise ValueError("demonstrations need the task's Cartesian arm actions")
  expert.reset()
  return expert


def bin_pick_task(
  max_steps: int | None,
  objects: int,
  bin_width: float,
  bin_height: float,
  object_seed: int,
  cameras: tuple[str, ...] = (),
) -> TaskSpec:
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg

  env_kwargs = {
    "play": True,
    "objects": objects,
    "bin_width": bin_width,
    "bin_height": bin_height,
    "object_seed": object_seed,
    "max_steps": max_steps or 3600,
  }

  def make_cfg(kwargs: dict, num_envs: int, pour_seed: int = 0):
    cfg = bin_pick_env_cfg(
      play=kwargs["play"],
      objects=kwargs["objects"],
      bin_width=kwargs["bin_width"],
      bin_height=kwargs["bin_height"],
      num_envs=num_envs,
      object_seed=kwargs["object_seed"],
      pour_seed=pour_seed,
      cameras=tuple(kwargs.get("cameras", ())),
    )
    cfg.episode_length_s = _steps_to_seconds(cfg, kwargs["max_steps"])
    return cfg

  def judge(env, i: int, terminated: bool, truncated: bool) -> Verdict:
    from evaluators.bin_pick import CONDITIONS, failed_condition
    from mjlab_tasks.bin_pick.env_cfg import pourer
    from mjlab_tasks.bin_pick.mdp import bin_pick_verdict

    verdict = bin_pick_verdict(env)
    names = pourer(env).cfg.names
    first = failed_condition(verdict)[i]
    poured = pourer(env).in_bin[i]
    undelivered = [
      f"{names[k]}:{CONDITIONS[int(first[k])]}"
      for k in range(len(names))
      if bool(poured[k]) and not bool(verdict["delivered"][i, k])
    ]
    success = bool(verdict["bin_cleared"][i])
    if success:
      outcome = "bin_cleared"
    elif truncated:
      outcome = "timeout"
    elif terminated:
      outcome = "physics_reset"  # mjlab ended it otherwise (a NaN state)
    else:
      outcome = "finished"  # The controller stopped: nothing left it can grasp.
    return Verdict(success, outcome, " ".join(undelivered))

  def make_expert(env):
    from experts.bin_pick.expert import BinPickExpert

    return BinPickExpert(env)

  return TaskSpec(
    task_id="BinPick-UR5-RG2",
    env_kwargs=_with_cameras(env_kwargs, cameras),
    make_cfg=make_cfg,
    make_expert=make_expert,
    judge=judge,
    one_episode_per_build=True,
    expert_finished=lambda expert: expert.done,
    expert_name="experts.bin_pick.BinPickExpert",
  )


def task_from_env_args(args: dict) -> TaskSpec:
  """The task as a demo file's env_args describe it (for replay)."""
  kwargs = dict(args["env_kwargs"])
  if args["env_name"] == "CubeTray-UR5-RG2":
    task = cube_tray_task(kwargs["max_steps"])
  elif args["env_name"] == "BinPick-UR5-RG2":
    task = bin_pick_task(
      kwargs["max_steps"],
      kwargs["objects"],
      kwargs["bin_width"],
      kwargs["bin_height"],
      kwargs["object_seed"],
    )
  else:
    raise ValueError(f"unknown task {args['env_name']!r}")
  task.env_kwargs = kwargs
  return task


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


def build_env(task: TaskSpec, num_envs: int, device: str, engine: str, **cfg_kwargs):
  """The task's environment with seeded resets and no automatic reset (the
  loop resets ended environments itself, after reading their last step)."""
  import contextlib
  import io

  from mjlab_tasks.common.c_engine import make_env

  cfg = task.make_cfg(task.env_kwargs, num_envs, **cfg_kwargs)
  cfg.auto_reset = False
  seeds = EpisodeSeeds(num_envs)
  seed_reset_events(cfg, seeds)
  with contextlib.redirect_stdout(io.StringIO()):  # mjlab's manager tables
    env = make_env(cfg, device=device, engine=engine)
  return env, seeds


# Simulator state.


def state_layout(model) -> list[tuple[str, int]]:
  """(data field, size) of each non-empty component of the integration state."""
  import mujoco

  layout = []
  for bit, name in STATE_FIELDS:
    size = mujoco.mj_stateSize(model, int(getattr(mujoco.mjtState, bit)))
    if size:
      layout.append((name, size))
  return layout


class CStates:
  """Full integration state of each world of the C engine (float64, exact:
  the float32 tensors it shows mjlab round the state, which an exact replay
  cannot afford)."""

  def __init__(self, env):
    import mujoco

    self.sim = env.sim
    self.spec = int(mujoco.mjtState.mjSTATE_INTEGRATION)
    self.size = mujoco.mj_stateSize(env.sim.mj_model, self.spec)
    if self.sim.expanded_fields:
      raise NotImplementedError("per-world model fields: states would need them too")

  def get(self) -> np.ndarray:
    return self.sim.get_state(self.spec)

  def set(self, ids: list[int], states: np.ndarray) -> None:
    """Restore worlds ``ids`` and recompute their derived quantities."""
    self.sim.set_state(ids, states, self.spec)


class WarpStates:
  """The same state vector from MuJoCo Warp's arrays (float32 values)."""

  def __init__(self, env):
    self.sim = env.sim
    self.layout = state_layout(env.sim.mj_model)
    self.size = sum(size for _, size in self.layout)

  def get(self) -> np.ndarray:
    import torch

    data, n = self.sim.data, self.sim.num_envs
    parts = [
      getattr(data, name).reshape(n, -1).to(torch.float64) for name, _ in self.layout
    ]
    return torch.cat(parts, dim=1).cpu().numpy()

  def set(self, ids: list[int], states: np.ndarray) -> None:
    import torch

    data, offset = self.sim.data, 0
    rows = torch.tensor(ids, device=self.sim.device)
    for name, size in self.layout:
      field = getattr(data, name)
      values = torch.as_tensor(states[:, offset : offset + size], device=field.device)
      field[rows] = values.reshape(len(ids), *field.shape[1:]).to(field.dtype)
      offset += size
    self.sim.forward()


def state_io(env, engine: str):
  return CStates(env) if engine == "mujoco" else WarpStates(env)


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
  verdict: Verdict


def run_episodes(
  env,
  seeds: EpisodeSeeds,
  task: TaskSpec,
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
