"""The suite's tasks as Gymnasium environments, for users outside mjlab.

  import gymnasium as gym
  import mjlab_tasks  # registers the ids (or use gym.make("mjlab_tasks:<id>", ...))
  env = gym.make("CubeTray-UR5-RG2", engine="mujoco")  # one environment
  obs, info = env.reset(seed=0)
  obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
  envs = gym.make_vec("CubeTray-UR5-RG2", num_envs=8, engine="mujoco")  # a batch

``MjlabVectorEnv`` is a ``gymnasium.vector.VectorEnv`` over one batched mjlab
``ManagerBasedRlEnv`` built from the task's registered configuration (the same
environment ``train`` uses) on MuJoCo Warp or the C MuJoCo engine. Arrays are
NumPy by default (Gymnasium's convention) or torch tensors on the
environment's device with ``array_type="torch"``. Ended environments are reset
inside ``step`` (``AutoresetMode.SAME_STEP``); their last observation is in
``info["final_obs"]``. ``MjlabEnv`` (what ``gym.make`` returns) is a plain
``gymnasium.Env``: one mjlab environment, scalar reward and flags, reset by
its caller. Both bound their action space to the range the task's action terms
respond to (``action_bounds``). See docs/gymnasium.md.

Importing this module is light (Gymnasium and NumPy): ``import mjlab_tasks``
registers the ids through it. torch, the engines and mjlab (with the suite's
mjlab tasks, ``mjlab_tasks.tasks``) are imported when an environment is built.
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from mjlab_tasks.engine import default_device

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg

ArrayType = Literal["numpy", "torch"]
PLAY_SUFFIX = "-Play"
ENTRY_POINT = "mjlab_tasks.common.gym_env:MjlabEnv"
VECTOR_ENTRY_POINT = "mjlab_tasks.common.gym_env:MjlabVectorEnv"


class MjlabVectorEnv(VectorEnv):
  """A registered mjlab task as a Gymnasium vector environment.

  Args:
    task_id: The mjlab task id (e.g. ``CubeTray-UR5-RG2``).
    num_envs: Parallel environments (one mjlab batch).
    engine: ``"warp"`` (MuJoCo Warp), ``"mujoco"`` (C MuJoCo, CPU) or None:
      warp on CUDA, mujoco on the CPU.
    device: ``"cpu"`` or ``"cuda:N"``; None: ``cuda:0`` when CUDA is there
      and the engine is not ``"mujoco"``, else ``cpu``.
    play: The task's evaluation configuration (mjlab's ``play``).
    obs_group: Observation group returned (a Box; ``"actor"``: the policy's
      observations), or None for a Dict of every group (e.g. actor and the
      privileged critic group).
    array_type: ``"numpy"`` (default) or ``"torch"`` (tensors on ``device``).
    clip_actions: Override of the action space: ``[-c, c]`` in every
      dimension. None (default): each dimension's range from the task's
      action terms (``action_bounds``). Actions are clamped to the space.
    env_cfg: A configuration to use instead of the registered one (e.g.
      ``bin_pick_env_cfg(objects=2)``); its ``num_envs`` and
      ``auto_reset`` are replaced.
    verbose: Show mjlab's build tables on stdout.
    render_mode: None, or ``"rgb_array"``: ``render()`` returns one frame,
      mjlab's offscreen camera on environment ``cfg.viewer.env_idx``.
  """

  metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"]}

  def __init__(
    self,
    task_id: str,
    num_envs: int = 1,
    engine: str | None = None,
    device: str | None = None,
    *,
    play: bool = False,
    obs_group: str | None = "actor",
    array_type: ArrayType = "numpy",
    clip_actions: float | None = None,
    env_cfg: ManagerBasedRlEnvCfg | None = None,
    verbose: bool = False,
    render_mode: str | None = None,
  ):
    import torch

    from mjlab_tasks.engine import make_env, resolve_engine

    _check_args(num_envs, array_type, clip_actions, render_mode)
    device = device or default_device(engine)
    engine = resolve_engine(engine, device)
    cfg = copy.deepcopy(env_cfg) if env_cfg is not None else _registered(task_id, play)
    cfg.scene.num_envs = int(num_envs)
    if obs_group is not None and obs_group not in cfg.observations:
      raise ValueError(
        f"obs_group {obs_group!r} not in this task's groups {list(cfg.observations)}"
      )
    # Ended environments are reset here, after their final observation is
    # kept (mjlab's auto-reset would return only the post-reset one).
    cfg.auto_reset = False
    self.task_id, self.engine, self.device = task_id, engine, device
    self.array_type: ArrayType = array_type
    self.verbose = verbose
    self.render_mode = render_mode
    if render_mode is not None:
      from mjlab_tasks.common.gl import headless_gl

      headless_gl()  # headless OpenGL (EGL or OSMesa) unless MUJOCO_GL is set
    with self._quiet():
      self.mjlab_env: ManagerBasedRlEnv = make_env(
        cfg, device=device, engine=engine, render_mode=render_mode
      )
    self.metadata = {**self.metadata, "render_fps": 1.0 / self.mjlab_env.step_dt}
    self.num_envs = int(num_envs)
    self.obs_group = obs_group
    self.single_observation_space = _observation_space(self.mjlab_env, obs_group)
    self.single_action_space = _action_space(self.mjlab_env, clip_actions)
    # Clamp bounds on the device (infinite where a term's range is unknown).
    self._action_low, self._action_high = (
      torch.as_tensor(bound, device=self.mjlab_env.device)
      for bound in (self.single_action_space.low, self.single_action_space.high)
    )
    self.observation_space = batch_space(self.single_observation_space, self.num_envs)
    self.action_space = batch_space(self.single_action_space, self.num_envs)
    self._obs: Any = None  # Last returned observation (torch), for partial resets.

  # Gymnasium's vector API.

  def reset(
    self, *, seed: int | None = None, options: dict[str, Any] | None = None
  ) -> tuple[Any, dict[str, Any]]:
    """Reset every environment, or those in ``options["reset_mask"]``.

    ``seed`` seeds mjlab's random generators (Python, NumPy, torch, Warp:
    process-wide, as mjlab does) and this environment's ``np_random``.
    """
    if seed is not None and not isinstance(seed, (int, np.integer)):
      raise ValueError(
        f"seed must be one int for the whole batch (mjlab seeds once), got {seed!r}"
      )
    super().reset(seed=None if seed is None else int(seed))
    env_ids = self._reset_ids(options)
    with self._quiet():
      obs, extras = self.mjlab_env.reset(
        seed=None if seed is None else int(seed), env_ids=env_ids
      )
    obs = _clone(self._select(obs))
    if env_ids is not None and self._obs is not None:
      # Environments not reset keep the observation they were given last.
      obs = _put_rows(_clone(self._obs), obs, env_ids)
    self._obs = obs
    return self._out(obs), self._info(extras)

  def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """One step of every environment; ended ones are reset (SAME_STEP)."""
    env = self.mjlab_env
    obs, reward, terminated, truncated, info = self._step_batch(actions)
    ended = (terminated | truncated).nonzero().flatten()
    if len(ended):
      final_obs = _take_rows(obs, ended)
      with self._quiet():
        reset_obs, reset_extras = env.reset(env_ids=ended)
      obs = _put_rows(obs, _clone(self._select(reset_obs)), ended)
      info.update(self._info(reset_extras))
      info["final_obs"], info["_final_obs"] = self._final_obs(final_obs, ended)
    self._obs = obs
    return (
      self._out(obs),
      self._out(reward),
      self._out(terminated),
      self._out(truncated),
      info,
    )

  def render(self) -> tuple[np.ndarray, ...] | None:
    """With ``render_mode="rgb_array"``: a tuple of one uint8 frame [H, W, 3]
    (mjlab renders one camera, on one environment and its neighbours)."""
    if self.render_mode is None:
      return None
    return (self.mjlab_env.render(),)

  def close_extras(self, **kwargs: Any) -> None:
    self.mjlab_env.close()
    close_sim = getattr(self.mjlab_env.sim, "close", None)  # the C engine's threads
    if close_sim is not None:
      close_sim()

  # Internals.

  def _step_batch(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """One mjlab step, no reset: observation, reward, terminated, truncated
    (torch, cloned: [num_envs, ...]) and the info dict."""
    obs, reward, terminated, truncated, extras = self.mjlab_env.step(
      self._actions(actions)
    )
    obs = _clone(self._select(obs))
    reward, terminated, truncated = (
      reward.clone(),
      terminated.clone(),
      truncated.clone(),
    )
    if self.mjlab_env.cfg.is_finite_horizon:
      # A time limit that is part of the task ends it: no bootstrapping.
      terminated |= truncated
      truncated[:] = False
    return obs, reward, terminated, truncated, self._info(extras)

  def _quiet(self):
    """mjlab prints its manager tables while building; hidden unless verbose."""
    if self.verbose:
      return contextlib.nullcontext()
    return contextlib.redirect_stdout(io.StringIO())

  def _select(self, obs: dict[str, Any]) -> Any:
    return obs if self.obs_group is None else obs[self.obs_group]

  def _reset_ids(self, options: dict[str, Any] | None) -> torch.Tensor | None:
    """Environment ids from Gymnasium's ``reset_mask`` option (None: all)."""
    import torch

    mask = (options or {}).get("reset_mask")
    if mask is None:
      return None
    mask = torch.as_tensor(np.asarray(mask) if not torch.is_tensor(mask) else mask)
    if mask.dtype != torch.bool or mask.shape != (self.num_envs,):
      raise ValueError(
        f"reset_mask must be a bool array of shape ({self.num_envs},), "
        f"got {mask.dtype} {tuple(mask.shape)}"
      )
    return mask.nonzero().flatten().to(self.mjlab_env.device)

  def _actions(self, actions: Any) -> torch.Tensor:
    """Actions [num_envs, action_dim] as a float32 tensor on the device."""
    import torch

    if torch.is_tensor(actions):
      tensor = actions.to(device=self.mjlab_env.device, dtype=torch.float32)
    else:
      tensor = torch.as_tensor(
        np.asarray(actions, dtype=np.float32), device=self.mjlab_env.device
      )
    if tuple(tensor.shape) != self.action_space.shape:
      raise ValueError(
        f"actions must have shape {self.action_space.shape}, got {tuple(tensor.shape)}"
      )
    # To the action space: beyond it the terms do nothing more (action_bounds).
    return tensor.clamp(self._action_low, self._action_high)

  def _out(self, value: Any) -> Any:
    """Torch (cloned already) as returned, or NumPy copies on the host."""
    if self.array_type == "torch":
      return value
    # A copy: NumPy views of CPU tensors would share the kept observation.
    return _map(value, lambda t: t.detach().to("cpu", copy=True).numpy())

  def _info(self, extras: dict[str, Any]) -> dict[str, Any]:
    """mjlab's episode log (means over the environments that just ended)."""
    import torch

    log = extras.get("log") or {}
    if not log:
      return {}
    if self.array_type == "torch":
      return {
        "log": {k: _clone(v) if torch.is_tensor(v) else v for k, v in log.items()}
      }
    return {"log": {k: float(v) for k, v in log.items()}}

  def _final_obs(self, final_obs: Any, ended: torch.Tensor) -> tuple[np.ndarray, Any]:
    """Gymnasium's layout: an object array with each ended environment's last
    observation (None elsewhere), and its bool mask."""
    import torch

    array = np.full(self.num_envs, None, dtype=object)
    for row, env_id in enumerate(ended.tolist()):
      array[env_id] = self._out(_map(final_obs, lambda t, r=row: t[r].clone()))
    mask = torch.zeros(self.num_envs, dtype=torch.bool, device=ended.device)
    mask[ended] = True
    return array, self._out(mask)


class MjlabEnv(gym.Env):
  """A registered mjlab task as one Gymnasium environment (``gym.make``).

  One mjlab environment (``num_envs=1``) on MuJoCo Warp or the C engine:
  observations [D] (or a Dict of them), a float reward, bool ``terminated``
  and ``truncated``. It is not reset inside ``step``: after an episode ends,
  call ``reset()`` (stepping on raises ``RuntimeError``). The episode's log
  (mjlab's reward terms, metrics and terminations) comes in the info of that
  ``reset()``, under ``"log"``.

  Args:
    task_id: The mjlab task id (e.g. ``CubeTray-UR5-RG2``).
    engine: ``"warp"``, ``"mujoco"`` or None, as ``MjlabVectorEnv``.
    device: ``"cpu"``, ``"cuda:N"`` or None, as ``MjlabVectorEnv``.
    num_envs: Must be 1: ``gym.make`` builds one environment; a batch is
      ``gym.make_vec(task_id, num_envs=N)``.
    play: The task's evaluation configuration (mjlab's ``play``).
    obs_group: As ``MjlabVectorEnv``.
    clip_actions: As ``MjlabVectorEnv``.
    env_cfg: As ``MjlabVectorEnv``.
    verbose: Show mjlab's build tables on stdout.
    render_mode: None, or ``"rgb_array"``: ``render()`` returns one uint8
      frame [H, W, 3].
  """

  metadata = {"render_modes": ["rgb_array"]}

  def __init__(
    self,
    task_id: str,
    engine: str | None = None,
    device: str | None = None,
    *,
    num_envs: int = 1,
    play: bool = False,
    obs_group: str | None = "actor",
    clip_actions: float | None = None,
    env_cfg: ManagerBasedRlEnvCfg | None = None,
    verbose: bool = False,
    render_mode: str | None = None,
  ):
    if num_envs != 1:
      raise ValueError(
        f"gym.make builds one environment, got num_envs={num_envs!r}: for a batch "
        f"use gym.make_vec({task_id!r}, num_envs={num_envs!r}, ...) "
        "(an MjlabVectorEnv)"
      )
    self._vector = MjlabVectorEnv(
      task_id,
      1,
      engine,
      device,
      play=play,
      obs_group=obs_group,
      clip_actions=clip_actions,
      env_cfg=env_cfg,
      verbose=verbose,
      render_mode=render_mode,
    )
    self.mjlab_env: ManagerBasedRlEnv = self._vector.mjlab_env
    self.task_id, self.engine = task_id, self._vector.engine
    self.device = self._vector.device
    self.obs_group = obs_group
    self.render_mode = render_mode
    self.metadata = {**self.metadata, "render_fps": self._vector.metadata["render_fps"]}
    self.observation_space = self._vector.single_observation_space
    self.action_space = self._vector.single_action_space
    self._ended = False

  def reset(
    self, *, seed: int | None = None, options: dict[str, Any] | None = None
  ) -> tuple[Any, dict[str, Any]]:
    """Start an episode. ``seed`` seeds mjlab's generators (process-wide, as
    mjlab does) and ``np_random``; ``options`` are not used."""
    super().reset(seed=seed)
    obs, info = self._vector.reset(seed=seed)
    self._ended = False
    return _first(obs), info

  def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """One policy step with ``action`` [A], clamped to ``action_space``."""
    if self._ended:
      raise RuntimeError("the episode has ended: call reset() before step()")
    action = np.asarray(action, dtype=np.float32)
    if action.shape != self.action_space.shape:
      raise ValueError(
        f"action must have shape {self.action_space.shape}, got {action.shape}"
      )
    obs, reward, terminated, truncated, info = self._vector._step_batch(action[None])
    terminated, truncated = bool(terminated[0]), bool(truncated[0])
    self._ended = terminated or truncated
    return (
      _first(self._vector._out(obs)),
      float(reward[0]),
      terminated,
      truncated,
      info,
    )

  def render(self) -> np.ndarray | None:
    """With ``render_mode="rgb_array"``: one uint8 frame [H, W, 3]."""
    if self.render_mode is None:
      return None
    (frame,) = self._vector.render()
    return frame

  def close(self) -> None:
    self._vector.close()  # Closing twice is allowed (VectorEnv.close).


def action_bounds(env: ManagerBasedRlEnv) -> tuple[np.ndarray, np.ndarray]:
  """Each action dimension's range, from the environment's action terms
  (``mjlab_tasks.common.actions.action_bounds``: the Cartesian delta pose's
  translation to +-8 units, as far as its target can move; rotation to +-4
  degrees per step, a choice; the gripper to [-1, 1]; joint targets to the
  joint limits; other terms unbounded).

  Returns:
    low, high: float32 arrays [total_action_dim], in the action's own units.
  """
  from mjlab_tasks.common import actions

  low, high = actions.action_bounds(env)
  return (
    low.cpu().numpy().astype(np.float32),
    high.cpu().numpy().astype(np.float32),
  )


def register_gymnasium_envs(task_ids: Sequence[str]) -> None:
  """Register each task id, and ``<id>-Play`` for its evaluation variant:
  ``gymnasium.make`` builds one ``MjlabEnv`` (with Gymnasium's default
  wrappers: passive checker, order enforcing), ``gymnasium.make_vec`` one
  ``MjlabVectorEnv``."""
  for task_id in task_ids:
    for gym_id, play in ((task_id, False), (task_id + PLAY_SUFFIX, True)):
      gym.register(
        id=gym_id,
        entry_point=ENTRY_POINT,
        vector_entry_point=VECTOR_ENTRY_POINT,
        kwargs={"task_id": task_id, "play": play},
      )


def _check_args(num_envs, array_type, clip_actions, render_mode) -> None:
  if int(num_envs) != num_envs or num_envs < 1:
    raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
  if array_type not in ("numpy", "torch"):
    raise ValueError(f"array_type must be 'numpy' or 'torch', got {array_type!r}")
  if clip_actions is not None and not clip_actions > 0:
    raise ValueError(f"clip_actions must be positive, got {clip_actions!r}")
  if render_mode not in (None, "rgb_array"):
    raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")


def _registered(task_id: str, play: bool) -> ManagerBasedRlEnvCfg:
  """The task's registered configuration (a copy)."""
  with warnings.catch_warnings():
    # mjlab's import decorates with torch.jit.script, which torch deprecates.
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated")
    from mjlab.tasks.registry import list_tasks, load_env_cfg

    import mjlab_tasks.tasks  # noqa: F401  (fills mjlab's registry, the suite's tasks)

  if task_id not in list_tasks():
    raise ValueError(f"unknown mjlab task {task_id!r}")
  return load_env_cfg(task_id, play=play)


def _box(space) -> spaces.Box:
  """A Gymnasium Box from an mjlab Box (shape, bounds, dtype)."""
  return spaces.Box(
    low=np.broadcast_to(np.asarray(space.low, dtype=space.dtype), space.shape),
    high=np.broadcast_to(np.asarray(space.high, dtype=space.dtype), space.shape),
    shape=space.shape,
    dtype=np.dtype(space.dtype),
  )


def _to_gym_space(space) -> spaces.Space:
  from mjlab.utils.spaces import Dict as MjlabDict

  if isinstance(space, MjlabDict):
    return spaces.Dict({k: _to_gym_space(v) for k, v in space.spaces.items()})
  return _box(space)


def _observation_space(env: ManagerBasedRlEnv, group: str | None) -> spaces.Space:
  """One environment's observation space, derived from mjlab's managers."""
  if group is None:
    return _to_gym_space(env.single_observation_space)
  return _to_gym_space(env.single_observation_space.spaces[group])


def _action_space(env: ManagerBasedRlEnv, clip: float | None) -> spaces.Box:
  """One environment's action space: ``action_bounds``, or ``[-clip, clip]``."""
  dim = int(env.action_manager.total_action_dim)
  if clip is not None:
    return spaces.Box(-clip, clip, shape=(dim,), dtype=np.float32)
  low, high = action_bounds(env)
  return spaces.Box(low, high, shape=(dim,), dtype=np.float32)


def _first(value: Any) -> Any:
  """Environment 0's row of a batched array or (nested) dict of them."""
  return _map(value, lambda a: a[0])


def _map(value: Any, fn) -> Any:
  """``fn`` applied to every tensor in a tensor or a (nested) dict of them."""
  if isinstance(value, dict):
    return {k: _map(v, fn) for k, v in value.items()}
  return fn(value)


def _clone(value: Any) -> Any:
  # mjlab reuses its buffers from step to step; what is returned must not change.
  return _map(value, lambda t: t.clone())


def _take_rows(value: Any, ids: torch.Tensor) -> Any:
  return _map(value, lambda t: t[ids])


def _put_rows(dst: Any, src: Any, ids: torch.Tensor) -> Any:
  """``dst`` with rows ``ids`` taken from ``src`` (same structure)."""
  if isinstance(dst, dict):
    return {k: _put_rows(dst[k], src[k], ids) for k in dst}
  dst[ids] = src[ids]
  return dst
