"""stable-baselines3's ``VecEnv`` over the suite's batched Gymnasium environment.

  import gymnasium as gym
  import mjlab_tasks
  from stable_baselines3 import PPO
  from stable_baselines3.common.vec_env import VecMonitor
  from mjlab_tasks.common.sb3_env import MjlabSB3VecEnv

  vec = VecMonitor(MjlabSB3VecEnv(gym.make_vec("CubeTray-UR5-RG2", num_envs=4)))
  PPO("MlpPolicy", vec).learn(10_000)

One mjlab batch steps every environment at once (no worker process per
environment, as SB3's ``DummyVecEnv`` or ``SubprocVecEnv`` would need). SB3's
conventions: NumPy observations, float32 rewards and bool dones per
environment; an environment whose episode ends is reset in the same step, its
last observation in ``infos[i]["terminal_observation"]`` and
``infos[i]["TimeLimit.truncated"]`` True when the time limit (not the task)
ended it. Modelled on ManiSkill3's ``ManiSkillSB3VectorEnv``.

Needs the ``sb3`` extra: ``pip install 'manipulation-suite[sb3]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

try:
  from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as error:  # pragma: no cover - depends on the installed extras
  raise ImportError(
    "mjlab_tasks.common.sb3_env needs stable-baselines3: "
    "pip install 'manipulation-suite[sb3]'"
  ) from error

if TYPE_CHECKING:
  import gymnasium as gym

  from mjlab_tasks.common.gym_env import MjlabVectorEnv


class MjlabSB3VecEnv(VecEnv):
  """An ``MjlabVectorEnv`` as a stable-baselines3 ``VecEnv``.

  The batch is one mjlab environment, so what SB3 asks per environment is
  answered for the batch: ``get_attr`` returns the batch's attribute once per
  index, ``env_method`` calls the batch's method once (for every index
  together) and ``set_attr`` sets it for all; a subset of indices is refused.
  mjlab seeds its generators once per batch: ``seed(s)`` makes the next
  ``reset()`` call ``reset(seed=s)`` on the batch.

  Args:
    env: The batched environment, with NumPy arrays (``array_type="numpy"``,
      the default of ``gym.make_vec``) and a Box or Dict observation space.
      Closed when this is closed.
  """

  def __init__(self, env: MjlabVectorEnv):
    if getattr(env, "array_type", "numpy") != "numpy":
      raise ValueError("MjlabSB3VecEnv needs array_type='numpy' (SB3 takes NumPy)")
    self.env = env
    self._seed: int | None = None
    self._actions: np.ndarray | None = None
    super().__init__(
      env.num_envs, env.single_observation_space, env.single_action_space
    )

  # SB3's VecEnv API.

  def reset(self) -> Any:
    """Reset every environment: observations [num_envs, ...]."""
    options = self._common_options()
    obs, info = self.env.reset(seed=self._seed, options=options)
    # Per-environment reset infos (SB3 keeps them); mjlab's log is the batch's.
    self.reset_infos = [dict(info) for _ in range(self.num_envs)]
    self._seed = None  # Seeds and options are used once, as in SB3.
    self._reset_seeds()
    self._reset_options()
    return obs

  def step_async(self, actions: np.ndarray) -> None:
    self._actions = np.asarray(actions, dtype=np.float32)

  def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Observations, rewards [num_envs] float32, dones [num_envs] bool, infos."""
    if self._actions is None:
      raise RuntimeError("step_wait() without step_async()")
    obs, reward, terminated, truncated, info = self.env.step(self._actions)
    self._actions = None
    dones = terminated | truncated
    infos: list[dict[str, Any]] = [
      # SB3 bootstraps the value of episodes the time limit cut short.
      {"TimeLimit.truncated": bool(truncated[i] and not terminated[i])}
      for i in range(self.num_envs)
    ]
    for i in np.flatnonzero(dones):
      infos[i]["terminal_observation"] = info["final_obs"][i]
    if "log" in info:
      # mjlab's episode log, averaged over the environments that just ended.
      for i in np.flatnonzero(dones):
        infos[i]["episode_log"] = dict(info["log"])
    return obs, reward.astype(np.float32), dones.astype(bool), infos

  def close(self) -> None:
    self.env.close()

  def seed(self, seed: int | None = None) -> Sequence[int | None]:
    """The seed of the next ``reset()``, for the whole batch (None: mjlab's
    generators go on unseeded). Returns it once per environment."""
    self._seed = None if seed is None else int(seed)
    return [self._seed] * self.num_envs

  def get_attr(
    self, attr_name: str, indices: Iterable[int] | int | None = None
  ) -> list:
    """The batch's attribute ``attr_name``, once per index."""
    value = getattr(self.env, attr_name)
    return [value] * len(self._all_indices(indices, allow_subset=True))

  def set_attr(
    self, attr_name: str, value: Any, indices: Iterable[int] | int | None = None
  ) -> None:
    """Set the batch's attribute (every environment; subsets are refused)."""
    self._all_indices(indices, allow_subset=False)
    setattr(self.env, attr_name, value)

  def env_method(
    self,
    method_name: str,
    *method_args,
    indices: Iterable[int] | int | None = None,
    **method_kwargs,
  ) -> list:
    """Call the batch's method once (every environment; subsets are refused);
    its result is returned once per environment."""
    self._all_indices(indices, allow_subset=False)
    result = getattr(self.env, method_name)(*method_args, **method_kwargs)
    return [result] * self.num_envs

  def env_is_wrapped(
    self, wrapper_class: type[gym.Wrapper], indices: Iterable[int] | int | None = None
  ) -> list[bool]:
    """False for each index: the batch is no single environment a Gymnasium
    wrapper could wrap (wrap this with SB3's ``VecMonitor`` for episode
    statistics)."""
    return [False] * len(self._all_indices(indices, allow_subset=True))

  def get_images(self) -> Sequence[np.ndarray | None]:
    """One frame (uint8 [H, W, 3]) for the batch with ``render_mode="rgb_array"``:
    mjlab renders one camera, on one environment and its neighbours."""
    frames = self.env.render()
    return list(frames) if frames is not None else [None]

  # Internals.

  def _all_indices(self, indices: Iterable[int] | int | None, allow_subset: bool):
    ids = list(self._get_indices(indices))
    if not allow_subset and sorted(ids) != list(range(self.num_envs)):
      raise ValueError(
        f"one mjlab batch holds all {self.num_envs} environments: indices "
        f"{ids} cannot be addressed apart (pass indices=None)"
      )
    return ids

  def _common_options(self) -> dict[str, Any] | None:
    """The options of ``set_options``, the same for every environment."""
    options = [o for o in self._options if o]
    if not options:
      return None
    if len(options) != self.num_envs or any(o != options[0] for o in options):
      raise ValueError("per-environment reset options differ; the batch resets once")
    return options[0]
