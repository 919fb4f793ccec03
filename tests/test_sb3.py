"""stable-baselines3 on the suite: SB3's checker on the single environment, the
``MjlabSB3VecEnv`` adapter against independent references, a short PPO run.

C engine, play configuration (no observation noise) with 4-step episodes, 1
or 2 environments. References: SB3's own ``DummyVecEnv`` over the single
Gymnasium environment (SB3's conventions as SB3 implements them), and
mjlab's environment stepped directly. Skipped without stable-baselines3
(the ``sb3`` extra, part of ``test``).
"""

from __future__ import annotations

import importlib
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from mjlab.tasks.registry import load_env_cfg

import mjlab_tasks.tasks  # noqa: F401 - mjlab's registry (load_env_cfg)
from mjlab_tasks.engine import make_env

CUBE = "CubeTray-UR5-RG2"
STEPS = 4  # Episode length [policy steps].


def _sb3():
  return pytest.importorskip("stable_baselines3")


def _cfg(num_envs: int, auto_reset: bool = True):
  """Play configuration with episodes of ``STEPS`` steps."""
  cfg = load_env_cfg(CUBE, True)
  cfg.scene.num_envs = num_envs
  cfg.episode_length_s = STEPS * cfg.decimation * cfg.sim.mujoco.timestep
  cfg.auto_reset = auto_reset
  return cfg


def _adapter(num_envs: int, **kwargs):
  from mjlab_tasks.common.sb3_env import MjlabSB3VecEnv

  kwargs.setdefault("env_cfg", _cfg(num_envs))
  venv = gym.make_vec(f"{CUBE}-Play", num_envs=num_envs, engine="mujoco", **kwargs)
  return MjlabSB3VecEnv(venv)


def _actions(space: gym.Space, num_envs: int, steps: int, seed: int) -> list:
  space.seed(seed)
  return [np.stack([space.sample() for _ in range(num_envs)]) for _ in range(steps)]


def _vec_rollout(vec, seed: int, actions: list) -> tuple[np.ndarray, list]:
  """SB3's loop: ``seed``, ``reset``, then ``step`` per action."""
  vec.seed(seed)
  obs = vec.reset()
  return obs, [vec.step(a) for a in actions]


def test_sb3_env_checker_passes_on_the_single_env():
  _sb3()
  from stable_baselines3.common.env_checker import check_env

  env = gym.make(f"{CUBE}-Play", engine="mujoco", env_cfg=_cfg(1))
  try:
    with warnings.catch_warnings(record=True) as record:
      warnings.simplefilter("always")
      check_env(env.unwrapped, warn=True)
    # Its one remark: actions are in the task's units, not [-1, 1].
    messages = [str(w.message) for w in record]
    assert all("normalized Box action space" in m for m in messages), messages
  finally:
    env.close()


def test_adapter_equals_sb3_dummy_vec_env_over_the_single_env():
  """Across two episode ends: observations, rewards, dones, terminal
  observations and ``TimeLimit.truncated`` equal SB3's ``DummyVecEnv`` over
  ``gym.make`` (one environment: the batch is seeded as a whole)."""
  _sb3()
  from stable_baselines3.common.vec_env import DummyVecEnv

  vec = _adapter(1)
  actions = _actions(vec.action_space, 1, 2 * STEPS + 1, seed=3)
  try:
    got = _vec_rollout(vec, 17, actions)
  finally:
    vec.close()
  ref = DummyVecEnv(
    [lambda: gym.make(f"{CUBE}-Play", engine="mujoco", env_cfg=_cfg(1))]
  )
  try:
    want = _vec_rollout(ref, 17, actions)
  finally:
    ref.close()
  np.testing.assert_array_equal(got[0], want[0])
  dones = []
  for (obs, reward, done, infos), (w_obs, w_reward, w_done, w_infos) in zip(
    got[1], want[1], strict=True
  ):
    np.testing.assert_array_equal(obs, w_obs)
    np.testing.assert_array_equal(reward, w_reward)
    np.testing.assert_array_equal(done, w_done)
    assert reward.dtype == np.float32 and done.dtype == np.bool_
    assert infos[0]["TimeLimit.truncated"] is w_infos[0]["TimeLimit.truncated"]
    assert ("terminal_observation" in infos[0]) == bool(done[0])
    if done[0]:
      np.testing.assert_array_equal(
        infos[0]["terminal_observation"], w_infos[0]["terminal_observation"]
      )
    dones.append(bool(done[0]))
  assert [t for t, d in enumerate(dones, 1) if d] == [STEPS, 2 * STEPS]


def test_terminal_observation_is_the_episode_last_one():
  """Two environments: ``terminal_observation`` equals mjlab's own last
  observation of the episode (auto-reset off), the returned observation
  mjlab's first one after its auto-reset."""
  _sb3()
  vec = _adapter(2)
  actions = _actions(vec.action_space, 2, STEPS + 1, seed=4)
  try:
    _, steps = _vec_rollout(vec, 23, actions)
  finally:
    vec.close()
  references = {}
  for auto_reset in (False, True):
    env = make_env(_cfg(2, auto_reset), device="cpu", engine="mujoco")
    try:
      env.reset(seed=23)
      rows = []
      for a in actions:
        obs, _, term, trunc, _ = env.step(torch.as_tensor(a))
        rows.append(obs["actor"].clone().numpy())
        ended = (term | trunc).nonzero().flatten()
        if not auto_reset and len(ended):
          env.reset(env_ids=ended)
      references[auto_reset] = rows
    finally:
      env.close()
  for t, (obs, _, done, infos) in enumerate(steps, 1):
    np.testing.assert_array_equal(obs, references[True][t - 1])
    assert done.all() == (t == STEPS) and done.any() == (t == STEPS)
    for i in range(2):
      if t == STEPS:
        assert infos[i]["TimeLimit.truncated"] is True
        np.testing.assert_array_equal(
          infos[i]["terminal_observation"], references[False][t - 1][i]
        )
        assert "Episode_Termination/time_out" in infos[i]["episode_log"]
      else:
        assert infos[i] == {"TimeLimit.truncated": False}


def test_short_ppo_run_trains_and_acts():
  """PPO through SB3's own wrappers (``VecMonitor``, ``VecCheckNan`` raising):
  two rollouts of 16 steps in 2 environments, one update each."""
  _sb3()
  from stable_baselines3 import PPO
  from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor

  vec = VecMonitor(VecCheckNan(_adapter(2), raise_exception=True))
  try:
    model = PPO(
      "MlpPolicy", vec, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu"
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=64)
    assert model.num_timesteps == 64
    after = list(model.policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    # Episodes of 4 steps: VecMonitor saw 2 x 64 / (2 x 4) = 16 of them.
    assert len(model.ep_info_buffer) == 16
    assert all(info["l"] == STEPS for info in model.ep_info_buffer)
    obs = vec.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (2, 7) and all(a in vec.action_space for a in action)
    obs, reward, done, _ = vec.step(action)
    assert obs.shape == (2, *vec.observation_space.shape)
    assert np.isfinite(obs).all() and np.isfinite(reward).all()
  finally:
    vec.close()


def test_adapter_attributes_methods_and_seeding():
  _sb3()
  from stable_baselines3.common.monitor import Monitor

  vec = _adapter(2)
  try:
    assert vec.num_envs == 2 and vec.render_mode is None
    assert vec.observation_space == vec.env.single_observation_space
    assert vec.action_space == vec.env.single_action_space
    assert vec.get_attr("num_envs") == [2, 2] and vec.get_attr("engine", 1) == [
      "mujoco"
    ]
    assert vec.env_is_wrapped(Monitor) == [False, False]
    assert vec.env_method("render") == [None, None]
    vec.set_attr("verbose", True)
    assert vec.env.verbose is True
    with pytest.raises(ValueError, match="indices"):
      vec.set_attr("verbose", False, indices=[0])
    with pytest.raises(ValueError, match="indices"):
      vec.env_method("render", indices=1)
    with pytest.raises(AttributeError):
      vec.get_attr("no_such_attribute")
    # seed(s): the next reset only; the same seed, the same observations.
    assert vec.seed(5) == [5, 5]
    first = vec.reset()
    vec.reset()
    assert vec.seed(5) == [5, 5]
    np.testing.assert_array_equal(vec.reset(), first)
  finally:
    vec.close()
  assert vec.env.closed
  with pytest.raises(ValueError, match="numpy"):
    from mjlab_tasks.common.sb3_env import MjlabSB3VecEnv

    MjlabSB3VecEnv(gym.make_vec(CUBE, num_envs=1, engine="mujoco", array_type="torch"))


def test_adapter_renders_through_sb3():
  _sb3()
  vec = _adapter(2, render_mode="rgb_array")
  try:
    vec.reset()
    frame = vec.render()
    viewer = vec.env.mjlab_env.cfg.viewer
    assert frame.shape == (viewer.height, viewer.width, 3) and frame.dtype == np.uint8
  finally:
    vec.close()


def test_without_sb3_the_import_names_the_extra(monkeypatch):
  """With stable-baselines3 missing (here: hidden), importing the adapter
  fails with the extra to install."""
  for name in [*sys.modules, "stable_baselines3"]:
    if name.partition(".")[0] == "stable_baselines3":
      monkeypatch.setitem(sys.modules, name, None)
  monkeypatch.delitem(sys.modules, "mjlab_tasks.common.sb3_env", raising=False)
  with pytest.raises(ImportError, match=r"manipulation-suite\[sb3\]"):
    importlib.import_module("mjlab_tasks.common.sb3_env")
