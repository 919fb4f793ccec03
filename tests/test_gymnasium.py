"""The tasks through Gymnasium: registration, spaces, API checks, parity with mjlab.

Everything runs on the C engine (CPU, bitwise deterministic) with 1 to 3
environments. References are mjlab environments built and stepped directly
(``make_env``), never through the Gymnasium wrappers: ``MjlabVectorEnv``
(``gym.make_vec``) and the single ``MjlabEnv`` (``gym.make``).
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils import env_checker, passive_env_checker
from gymnasium.vector import AutoresetMode, VectorEnv
from mjlab.tasks.registry import load_env_cfg

import mjlab_tasks.tasks  # noqa: F401 - mjlab's registry (load_env_cfg)
from assets.ur5_rg2.model import ARM_JOINT_LIMIT
from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
from mjlab_tasks.common.gym_env import MjlabEnv, MjlabVectorEnv
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.engine import make_env

CUBE = "CubeTray-UR5-RG2"
BIN = "BinPick-UR5-RG2"
GLASS = "GlassPush-UR5-RG2"
IDS = (CUBE, f"{CUBE}-Play", BIN, f"{BIN}-Play", GLASS, f"{GLASS}-Play")


def _cfg(task: str, num_envs: int, play: bool = False):
  """A task's configuration; BinPick with 2 objects to keep the pour short."""
  cfg = (
    bin_pick_env_cfg(objects=2, play=play) if task == BIN else load_env_cfg(task, play)
  )
  cfg.scene.num_envs = num_envs
  return cfg


def _make(task: str, num_envs: int, **kwargs) -> MjlabVectorEnv:
  kwargs.setdefault("env_cfg", _cfg(task, num_envs, kwargs.get("play", False)))
  return gym.make_vec(task, num_envs=num_envs, engine="mujoco", **kwargs)


def _make_one(task: str, **kwargs) -> gym.Env:
  """The single environment, through ``gym.make`` (Gymnasium's wrappers on)."""
  kwargs.setdefault("env_cfg", _cfg(task, 1, kwargs.get("play", False)))
  return gym.make(task, engine="mujoco", **kwargs)


def _actions(space: gym.Space, steps: int, seed: int) -> list[np.ndarray]:
  space.seed(seed)
  return [space.sample() for _ in range(steps)]


def _gym_warnings(record: list) -> list[str]:
  return [str(w.message) for w in record if "gymnasium" in str(w.filename)]


def _rollout(env: MjlabVectorEnv, seed: int, actions: list) -> list[tuple]:
  """(obs, reward, terminated, truncated, info) after reset and each action."""
  obs, info = env.reset(seed=seed)
  return [(obs, None, None, None, info)] + [env.step(a) for a in actions]


def _mjlab_rollout(cfg, seed: int, actions: list, group: str = "actor") -> list[tuple]:
  """The same through mjlab directly, with its own auto-reset or, when
  ``cfg.auto_reset`` is False, resetting ended environments by hand."""
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    obs, _ = env.reset(seed=seed)
    out = [(obs[group].clone(), None, None, None)]
    for a in actions:
      obs, reward, term, trunc, _ = env.step(torch.as_tensor(a))
      row = (obs[group].clone(), reward.clone(), term.clone(), trunc.clone())
      ended = (term | trunc).nonzero().flatten()
      if not cfg.auto_reset and len(ended):
        env.reset(env_ids=ended)
      out.append(row)
    return out
  finally:
    env.close()


def test_ids_are_registered_and_make_returns_one_env():
  for gym_id in IDS:
    assert gym_id in gym.registry
    assert gym.envs.registration.parse_env_id(gym_id) == (None, gym_id, None)
  env = gym.make(CUBE, engine="mujoco")
  try:
    assert isinstance(env, gym.Env) and not isinstance(env, VectorEnv)
    # Gymnasium's default wrappers around the suite's environment.
    assert isinstance(env, gym.wrappers.OrderEnforcing)
    assert type(env.unwrapped) is MjlabEnv and env.spec.id == CUBE
    assert env.unwrapped.mjlab_env.num_envs == 1
    assert env.unwrapped.engine == "mujoco" and env.unwrapped.device == "cpu"
  finally:
    env.close()
  with pytest.raises(
    ValueError, match=r"gym\.make_vec\('CubeTray-UR5-RG2', num_envs=8"
  ):
    gym.make(CUBE, num_envs=8, engine="mujoco")


def test_make_vec_returns_the_vector_env():
  env = gym.make_vec(CUBE, num_envs=2, engine="mujoco")
  try:
    assert isinstance(env, VectorEnv) and type(env) is MjlabVectorEnv
    assert env.num_envs == 2 and env.spec.id == CUBE
    assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert env.engine == "mujoco" and env.device == "cpu"
    assert not env.mjlab_env.cfg.auto_reset  # the wrapper resets, keeping final obs
  finally:
    env.close()
  assert env.closed


def test_make_vec_uses_the_vector_entry_point():
  with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    env = gym.make_vec(f"{CUBE}-Play", num_envs=3, engine="mujoco")
  try:
    assert type(env) is MjlabVectorEnv and env.num_envs == 3
    assert env.mjlab_env.num_envs == 3
    # The play configuration: 20 s episodes instead of 12 s.
    assert (
      env.mjlab_env.cfg.episode_length_s == load_env_cfg(CUBE, True).episode_length_s
    )
    assert not [m for m in _gym_warnings(record) if "autoreset" in m.lower()]
  finally:
    env.close()


def test_module_colon_id_needs_no_prior_import():
  """``gym.make("mjlab_tasks:<id>")`` in a fresh interpreter that never
  imported the suite: the ids register on that import (without mjlab), the
  mjlab task when the environment is built."""
  code = (
    "import sys, gymnasium as gym\n"
    "assert 'mjlab_tasks' not in sys.modules\n"
    "env = gym.make('mjlab_tasks:CubeTray-UR5-RG2', engine='mujoco')\n"
    "obs, info = env.reset(seed=0)\n"
    "assert type(env.unwrapped).__name__ == 'MjlabEnv'\n"
    "assert obs in env.observation_space\n"
    "env.close()\n"
    "print('ok')\n"
  )
  run = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
  )
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip().splitlines()[-1] == "ok"


def test_rgb_array_renders_after_mujoco_bound_glfw():
  """A process that imported mujoco before any ``MUJOCO_GL`` (so mujoco
  bound GLFW), then got ``MUJOCO_GL=egl`` (as mjlab sets it when imported
  later): ``render_mode="rgb_array"`` still renders headless (the CI failure
  of 2026-12-01, when ``import mjlab_tasks`` stopped importing mjlab first)."""
  code = (
    "import os\n"
    "os.environ.pop('MUJOCO_GL', None)\n"
    "import mujoco\n"
    "os.environ['MUJOCO_GL'] = 'egl'\n"
    "import gymnasium as gym, mjlab_tasks\n"
    "env = gym.make('CubeTray-UR5-RG2', engine='mujoco', render_mode='rgb_array')\n"
    "env.reset(seed=0)\n"
    "frame = env.render()\n"
    "assert frame.shape[2] == 3 and frame.std() > 0\n"
    "env.close()\n"
    "print('ok')\n"
  )
  environ = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
  run = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    timeout=300,
    env=environ,
  )
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip().splitlines()[-1] == "ok"


@pytest.mark.parametrize("task, num_envs", [(CUBE, 2), (BIN, 1)])
def test_spaces_hold_what_reset_and_step_return(task, num_envs):
  env = _make(task, num_envs)
  try:
    manager = env.mjlab_env.observation_manager
    actor_dim = manager.group_obs_dim["actor"]
    assert env.single_observation_space == gym.spaces.Box(
      -np.inf, np.inf, actor_dim, np.float32
    )
    assert env.observation_space.shape == (num_envs, *actor_dim)
    action_dim = env.mjlab_env.action_manager.total_action_dim
    assert env.single_action_space.shape == (action_dim,)
    assert env.action_space.shape == (num_envs, action_dim)
    for space in (env.single_observation_space, env.observation_space):
      passive_env_checker.check_observation_space(space)
    for space in (env.single_action_space, env.action_space):
      passive_env_checker.check_action_space(space)

    with warnings.catch_warnings(record=True) as record:
      warnings.simplefilter("always")
      obs, info = passive_env_checker.env_reset_passive_checker(env, seed=1)
      for action in _actions(env.action_space, 3, seed=1):
        obs, reward, terminated, truncated, info = env.step(action)
        passive_env_checker.check_obs(obs, env.observation_space, "step")
        assert isinstance(info, dict)
        assert reward.shape == (num_envs,) and reward.dtype == np.float32
        for flag in (terminated, truncated):
          assert flag.shape == (num_envs,) and flag.dtype == np.bool_
        assert np.all(np.isfinite(reward))
    assert _gym_warnings(record) == []
    assert obs.dtype == np.float32 and obs in env.observation_space
  finally:
    env.close()


@pytest.mark.parametrize("task, num_envs", [(CUBE, 2), (BIN, 1)])
def test_same_results_as_the_mjlab_env_stepped_directly(task, num_envs):
  """Registered (training) configuration, mjlab's own auto-reset in the
  reference; no episode ends in these steps."""
  env = _make(task, num_envs)
  actions = _actions(env.action_space, 4, seed=2)
  try:
    got = _rollout(env, 11, actions)
  finally:
    env.close()
  want = _mjlab_rollout(_cfg(task, num_envs), 11, actions)
  assert len(got) == len(want)
  for (obs, reward, term, trunc, _), (w_obs, w_reward, w_term, w_trunc) in zip(
    got, want, strict=True
  ):
    np.testing.assert_array_equal(obs, w_obs.numpy())
    if reward is not None:
      np.testing.assert_array_equal(reward, w_reward.numpy())
      np.testing.assert_array_equal(term, w_term.numpy())
      np.testing.assert_array_equal(trunc, w_trunc.numpy())


def test_torch_arrays_and_dict_observations_match_numpy():
  actions = None
  runs = {}
  for array_type in ("numpy", "torch"):
    env = _make(CUBE, 2, array_type=array_type, obs_group=None)
    actions = actions or _actions(env.action_space, 3, seed=3)
    actor_dim = env.single_observation_space["actor"].shape[0]
    try:
      assert set(env.single_observation_space.spaces) == {"actor", "critic"}
      runs[array_type] = _rollout(env, 5, actions)
    finally:
      env.close()
  for np_step, torch_step in zip(runs["numpy"], runs["torch"], strict=True):
    for group in ("actor", "critic"):
      assert isinstance(torch_step[0][group], torch.Tensor)
      np.testing.assert_array_equal(np_step[0][group], torch_step[0][group].numpy())
    for k in (1, 2, 3):
      if np_step[k] is not None:
        assert isinstance(torch_step[k], torch.Tensor)
        np.testing.assert_array_equal(np_step[k], torch_step[k].numpy())
  assert runs["torch"][1][2].dtype == torch.bool
  # The critic reads the actor's terms plus the cube's and the tray's poses
  # (7 each) and the cube's velocity (6).
  critic_box = gym.spaces.Box(-np.inf, np.inf, (2, actor_dim + 20))
  assert runs["numpy"][1][0]["critic"] in critic_box


def _short_episode_cfg(num_envs: int, auto_reset: bool, steps: int = 4):
  """Play configuration (no observation noise, so the random draws happen in
  the same order whoever resets) with episodes of ``steps`` steps."""
  cfg = _cfg(CUBE, num_envs, play=True)
  cfg.episode_length_s = steps * cfg.decimation * cfg.sim.mujoco.timestep
  cfg.auto_reset = auto_reset
  return cfg


def test_same_step_autoreset_matches_mjlab_and_keeps_final_obs():
  steps = 4
  env = _make(CUBE, 2, env_cfg=_short_episode_cfg(2, True, steps))
  assert env.mjlab_env.max_episode_length == steps
  actions = _actions(env.action_space, 2 * steps + 2, seed=4)
  try:
    got = _rollout(env, 21, actions)
  finally:
    env.close()
  # mjlab's own auto-reset: the observations after a reset; mjlab without
  # auto-reset: the terminal observations.
  after_reset = _mjlab_rollout(_short_episode_cfg(2, True, steps), 21, actions)
  terminal = _mjlab_rollout(_short_episode_cfg(2, False, steps), 21, actions)
  ended_steps = []
  for t, (obs, reward, term, trunc, info) in enumerate(got):
    np.testing.assert_array_equal(obs, after_reset[t][0].numpy())
    if t == 0:
      continue
    np.testing.assert_array_equal(reward, after_reset[t][1].numpy())
    np.testing.assert_array_equal(term, after_reset[t][2].numpy())
    np.testing.assert_array_equal(trunc, after_reset[t][3].numpy())
    if not trunc.any():
      assert "final_obs" not in info
      continue
    ended_steps.append(t)
    assert trunc.all() and not term.any()  # the time limit, in both envs
    assert info["_final_obs"].dtype == np.bool_ and info["_final_obs"].all()
    assert info["final_obs"].dtype == object and info["final_obs"].shape == (2,)
    for i in range(2):
      np.testing.assert_array_equal(info["final_obs"][i], terminal[t][0][i].numpy())
      assert not np.array_equal(info["final_obs"][i], obs[i])
    assert "Episode_Termination/time_out" in info["log"]
  assert ended_steps == [steps, 2 * steps]


def test_reset_seed_determinism_on_the_c_engine():
  env = _make(CUBE, 2)
  actions = _actions(env.action_space, 3, seed=5)
  try:
    first = _rollout(env, 7, actions)
    again = _rollout(env, 7, actions)
    other = _rollout(env, 8, actions)
  finally:
    env.close()
  for a, b in zip(first, again, strict=True):
    for k in range(4):
      if a[k] is not None:
        np.testing.assert_array_equal(a[k], b[k])
  # The seed matters: cube and tray poses are randomized at reset.
  assert not np.array_equal(first[0][0], other[0][0])


def test_gymnasium_reset_checks():
  """Gymnasium's own checks that hold for a vector environment (``check_env``
  as a whole is for single environments: see the single env's test)."""
  env = _make(CUBE, 1)
  try:
    env_checker.check_reset_return_type(env)
    env_checker.check_reset_seed_determinism(env)
    env_checker.check_reset_options(env)
    env_checker.check_returned_data_not_reused(env)
  finally:
    env.close()


def test_reset_mask_resets_only_the_masked_envs():
  env = _make(CUBE, 2)
  try:
    env.reset(seed=9)
    for action in _actions(env.action_space, 2, seed=9):
      obs, *_ = env.step(action)
    again, _ = env.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_array_equal(again[1], obs[1])
    assert not np.array_equal(again[0], obs[0])
    with pytest.raises(ValueError, match="reset_mask"):
      env.reset(options={"reset_mask": np.array([1, 0])})
  finally:
    env.close()


def test_clip_actions_bounds_the_space_and_clamps():
  results = []
  for clip, scale in ((None, 1.0), (1.0, 5.0)):
    env = _make(CUBE, 2, clip_actions=clip)
    try:
      if clip is not None:
        assert np.all(env.single_action_space.high == clip)
        assert np.all(env.single_action_space.low == -clip)
      env.reset(seed=3)
      signs = np.resize([1.0, -1.0, 0.0], env.single_action_space.shape[0])
      action = np.tile(signs, (2, 1))
      results.append(env.step((scale * action).astype(np.float32))[0])
    finally:
      env.close()
  # Clamped to [-1, 1], five times -1, 0, 1 acts as -1, 0, 1 themselves.
  np.testing.assert_array_equal(results[0], results[1])


def test_bad_arguments_are_refused():
  with pytest.raises(ValueError, match="render_mode"):
    MjlabVectorEnv(CUBE, num_envs=1, engine="mujoco", render_mode="human")
  with pytest.raises(ValueError, match="array_type"):
    gym.make_vec(CUBE, num_envs=1, engine="mujoco", array_type="jax")
  with pytest.raises(ValueError, match="num_envs"):
    gym.make_vec(CUBE, num_envs=0, engine="mujoco")
  with pytest.raises(ValueError, match="obs_group"):
    gym.make_vec(CUBE, num_envs=1, engine="mujoco", obs_group="policy")
  with pytest.raises(ValueError, match="obs_group"):
    gym.make(CUBE, engine="mujoco", obs_group="policy")
  env = _make(CUBE, 2)
  try:
    with pytest.raises(ValueError, match="seed"):
      env.reset(seed=[1, 2])
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
      env.step(np.zeros((1, env.single_action_space.shape[0]), np.float32))
  finally:
    env.close()


def test_gymnasium_vector_wrappers_see_whole_episodes():
  """Gymnasium's episode statistics wrapper reads the SAME_STEP mode from
  the metadata: episodes of exactly the time limit, returns summed."""
  steps = 3
  env = _make(CUBE, 2, env_cfg=_short_episode_cfg(2, True, steps))
  stats = gym.wrappers.vector.RecordEpisodeStatistics(env)
  try:
    stats.reset(seed=1)
    total = np.zeros(2)
    for t, action in enumerate(_actions(stats.action_space, steps, seed=1), 1):
      _, reward, _, truncated, info = stats.step(action)
      total += reward
      assert truncated.all() == (t == steps)
    np.testing.assert_array_equal(info["episode"]["l"], [steps, steps])
    np.testing.assert_allclose(info["episode"]["r"], total, rtol=1e-6)
  finally:
    stats.close()


def test_warp_engine_on_the_cpu_matches_mjlab():
  """The ``engine="warp"`` path (MuJoCo Warp on the CPU here), torch arrays."""
  env = gym.make_vec(CUBE, num_envs=1, engine="warp", device="cpu", array_type="torch")
  actions = _actions(env.action_space, 2, seed=6)
  try:
    assert env.engine == "warp"
    got = _rollout(env, 2, actions)
  finally:
    env.close()
  cfg = _cfg(CUBE, 1)
  ref = make_env(cfg, device="cpu", engine="warp")
  try:
    obs, _ = ref.reset(seed=2)
    want = [obs["actor"].clone()]
    for a in actions:
      want.append(ref.step(torch.as_tensor(a))[0]["actor"].clone())
  finally:
    ref.close()
  for (obs, *_), w_obs in zip(got, want, strict=True):
    assert isinstance(obs, torch.Tensor)
    torch.testing.assert_close(obs, w_obs, rtol=0.0, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_defaults_to_warp_with_tensors_on_the_gpu():
  env = gym.make_vec(CUBE, num_envs=64, array_type="torch")
  try:
    assert env.engine == "warp" and env.device == "cuda:0"
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(
      torch.zeros(env.action_space.shape, device="cuda:0")
    )
    for value in (obs, reward, terminated, truncated):
      assert value.device.type == "cuda" and value.shape[0] == 64
    assert torch.isfinite(obs).all()
  finally:
    env.close()


def test_rgb_array_render():
  env = _make(CUBE, 2, render_mode="rgb_array")
  try:
    assert env.render_mode == "rgb_array"
    env.reset(seed=0)
    (first,) = env.render()
    viewer = env.mjlab_env.cfg.viewer
    assert first.shape == (viewer.height, viewer.width, 3) and first.dtype == np.uint8
    assert first.std() > 0  # a picture, not a blank
    for action in _actions(env.action_space, 3, seed=0):
      env.step(3.0 * action)
    (later,) = env.render()
    assert not np.array_equal(first, later)  # the arm moved
  finally:
    env.close()
  plain = _make(CUBE, 1)
  try:
    assert plain.render() is None
  finally:
    plain.close()


# The single environment (gym.make).


def _unexpected(record: list) -> list[str]:
  """Warnings other than the three Gymnasium's ``check_env`` gives for these
  spaces by design: observations unbounded, actions in the terms' units."""
  expected = (
    "recommend using a symmetric and normalized space",
    "observation space minimum value is -infinity",
    "observation space maximum value is infinity",
  )
  return [
    str(w.message) for w in record if not any(e in str(w.message) for e in expected)
  ]


@pytest.mark.parametrize("task", [CUBE, BIN])
def test_single_env_passes_gymnasium_check_env(task):
  """Every default check of ``check_env``, step determinism, the render and
  close checks (each a new environment from the spec) included."""
  env = _make_one(task)
  try:
    with warnings.catch_warnings(record=True) as record:
      warnings.simplefilter("always")
      env_checker.check_env(env.unwrapped)
    assert _unexpected(record) == []
    obs, info = env.reset(seed=4)
    dim = env.unwrapped.mjlab_env.observation_manager.group_obs_dim["actor"]
    assert obs.shape == dim and obs.dtype == np.float32 and isinstance(info, dict)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs.shape == dim and obs in env.observation_space
    assert type(reward) is float and math.isfinite(reward)
    assert terminated is False and truncated is False and isinstance(info, dict)
  finally:
    env.close()


def test_single_env_matches_mjlab_across_an_episode_end():
  """Play configuration with 4-step episodes. References: mjlab without
  auto-reset, reset by hand (the terminal observation, then the next
  episode), and mjlab's own auto-reset (the first observation after it)."""
  steps = 4
  env = _make_one(CUBE, play=True, env_cfg=_short_episode_cfg(1, True, steps))
  actions = [a[None] for a in _actions(env.action_space, steps + 2, seed=12)]
  want = _mjlab_rollout(_short_episode_cfg(1, False, steps), 13, actions)
  after_reset = _mjlab_rollout(_short_episode_cfg(1, True, steps), 13, actions)
  try:
    obs, _ = env.reset(seed=13)
    np.testing.assert_array_equal(obs, want[0][0][0].numpy())
    for t, action in enumerate(actions, 1):
      if t == steps + 1:
        with pytest.raises(RuntimeError, match="reset"):
          env.step(action[0])
        obs, info = env.reset()
        np.testing.assert_array_equal(obs, after_reset[steps][0][0].numpy())
        # The episode's log comes with the reset that follows it.
        assert info["log"]["Episode_Termination/time_out"] == 1.0
      obs, reward, terminated, truncated, _ = env.step(action[0])
      np.testing.assert_array_equal(obs, want[t][0][0].numpy())
      assert reward == float(want[t][1][0])
      assert terminated is False and not want[t][2][0]
      assert truncated is (t == steps) and truncated == bool(want[t][3][0])
  finally:
    env.close()


def test_single_env_render_returns_one_frame():
  env = _make_one(CUBE, render_mode="rgb_array")
  try:
    env.reset(seed=0)
    frame = env.render()
    viewer = env.unwrapped.mjlab_env.cfg.viewer
    assert frame.shape == (viewer.height, viewer.width, 3) and frame.dtype == np.uint8
  finally:
    env.close()


# The action space: the range the action terms respond to.


def _cartesian_term(mjlab_env):
  from mjlab_tasks.common.actions import CartesianPoseAction

  manager = mjlab_env.action_manager
  (term,) = [
    manager.get_term(n)
    for n in manager.active_terms
    if isinstance(manager.get_term(n), CartesianPoseAction)
  ]
  return term


def _lead_after(arm, axis: int, sign: float, units: float) -> float:
  """How far [m] the Cartesian term's new target leads the tool along
  ``sign * axis`` after an action of ``units`` that way, its previous
  target leading the tool by ``max_target_lead`` the opposite way (the
  farthest a previous target can be)."""
  pos, quat = arm.tool_pose_w()
  direction = torch.zeros(3)
  direction[axis] = sign
  arm.desired_pos_w[:] = pos - arm.cfg.max_target_lead * direction
  arm.desired_quat_w[:] = quat
  arm.has_target[:] = True
  action = torch.zeros(1, 6)
  action[0, axis] = sign * float(units)
  arm.process_actions(action)
  return float((arm.desired_pos_w - pos)[0] @ direction)


def _saturating_units(arm, axis: int, sign: float) -> float:
  """The smallest action that takes the target as far as it can go, found by
  bisection on the term itself (no formula)."""
  lead = arm.cfg.max_target_lead
  low, high = 0.0, 1000.0
  assert _lead_after(arm, axis, sign, high) == pytest.approx(lead, abs=1e-7)
  for _ in range(50):
    mid = 0.5 * (low + high)
    if _lead_after(arm, axis, sign, mid) >= lead - 1e-7:
      high = mid
    else:
      low = mid
  return high


def test_action_bounds_are_the_terms_real_range():
  env = _make(CUBE, 1)
  try:
    space = env.single_action_space
    np.testing.assert_array_equal(space.low, -space.high)
    np.testing.assert_array_equal(env.action_space.high, space.high[None])
    arm = _cartesian_term(env.mjlab_env)
    env.reset(seed=0)
    for axis in range(3):
      for sign in (1.0, -1.0):
        found = _saturating_units(arm, axis, sign)
        assert space.high[axis] == pytest.approx(found, rel=1e-4)
      # Half the bound (4 units of 5 mm) cannot reverse a full lead.
      assert _lead_after(arm, axis, 1.0, space.high[axis] / 2) < 1e-6
    # Rotation: 4 degrees per step, the wrappers' choice (no controller limit).
    np.testing.assert_allclose(
      space.high[3:6] * arm.cfg.rotation_scale, math.radians(4.0), rtol=1e-6
    )
    assert space.high[6] == 1.0  # the gripper term clips to [-1, 1]
  finally:
    env.close()
  # Deltas from the tool pose instead of the previous target: half the range.
  cfg = _cfg(CUBE, 1)
  cfg.actions["arm"].use_target = False
  tool = _make(CUBE, 1, env_cfg=cfg)
  try:
    arm = _cartesian_term(tool.mjlab_env)
    tool.reset(seed=0)
    found = _saturating_units(arm, 0, 1.0)
    assert tool.single_action_space.high[0] == pytest.approx(found, rel=1e-4)
    lead_units = arm.cfg.max_target_lead / arm.cfg.translation_scale
    assert found == pytest.approx(lead_units, rel=1e-4)
  finally:
    tool.close()
  # Joint targets: the arm joints' limits (and the gripper).
  cfg = cube_tray_env_cfg(arm_action="joint", num_envs=1)
  joint = _make(CUBE, 1, env_cfg=cfg)
  try:
    high = joint.single_action_space.high
    np.testing.assert_allclose(high[:6], ARM_JOINT_LIMIT, rtol=1e-6)
    assert high[6] == 1.0
  finally:
    joint.close()


def _robot_state_after(cfg, seed: int, action, lead_axis: int | None = None):
  """qpos and qvel after one step of mjlab (no wrapper, no clamping) from a
  seeded reset; with ``lead_axis``, the previous target first leads the
  tool by ``max_target_lead`` along -axis."""
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    env.reset(seed=seed)
    if lead_axis is not None:
      arm = _cartesian_term(env)
      pos, quat = arm.tool_pose_w()
      arm.desired_pos_w[:] = pos
      arm.desired_pos_w[:, lead_axis] -= arm.cfg.max_target_lead
      arm.desired_quat_w[:] = quat
      arm.has_target[:] = True
    env.step(torch.as_tensor(np.asarray(action, np.float32)[None]))
    data = env.sim.data
    return torch.cat([data.qpos[0], data.qvel[0]]).numpy()
  finally:
    env.close()


def test_actions_beyond_the_bound_change_nothing_more():
  """mjlab stepped directly: an action past the bound along one axis gives the
  next state the bound gives, one at half the bound does not; through the
  wrapper, which clamps, past the bound and at it are the same step."""
  cfg = _cfg(CUBE, 1, play=True)
  env = _make_one(CUBE, play=True)
  high = env.action_space.high
  try:
    obs = []
    for scale in (1.0, 3.0):
      env.reset(seed=6)
      obs.append(env.step(scale * high)[0])
    np.testing.assert_array_equal(obs[0], obs[1])
  finally:
    env.close()
  # +x at the bound, past it, at half of it; the gripper open (as at reset).
  moves = np.zeros((3, 7), np.float32)
  moves[:, 0] = high[0] * np.array([1.0, 3.0, 0.5])
  moves[:, 6] = 1.0
  states = [_robot_state_after(cfg, 6, a, lead_axis=0) for a in moves]
  np.testing.assert_allclose(states[1], states[0], rtol=0, atol=1e-6)
  assert np.abs(states[2] - states[0]).max() > 1e-3
  # The gripper closing: at its bound, past it, inside it.
  grips = np.zeros((3, 7), np.float32)
  grips[:, 6] = [-1.0, -3.0, -0.5]
  states = [_robot_state_after(cfg, 6, a) for a in grips]
  np.testing.assert_array_equal(states[1], states[0])
  assert np.abs(states[2] - states[0]).max() > 1e-4


def test_clip_actions_overrides_the_bounds():
  env = _make(CUBE, 1, clip_actions=2.0)
  try:
    np.testing.assert_array_equal(env.single_action_space.high, np.full(7, 2.0))
  finally:
    env.close()


# No CUDA driver warning on the CPU.


def test_c_engine_seeds_what_mjlab_seeds_without_warp():
  """The C engine's seeding (no Warp runtime) leaves Python's, NumPy's and
  torch's generators and PYTHONHASHSEED as mjlab's own seed_rng does."""
  from mjlab.utils.random import seed_rng

  from mjlab_tasks.engine.c_engine import seed_rng_without_warp

  states = []
  for seed_fn in (seed_rng, seed_rng_without_warp):
    seed_fn(1234)
    states.append(
      (
        os.environ["PYTHONHASHSEED"],
        random.getstate(),
        np.random.get_state()[1].copy(),
        torch.get_rng_state(),
      )
    )
  (env_a, py_a, np_a, torch_a), (env_b, py_b, np_b, torch_b) = states
  assert env_a == env_b == "1234" and py_a == py_b
  np.testing.assert_array_equal(np_a, np_b)
  assert torch.equal(torch_a, torch_b)


def test_cpu_run_prints_no_cuda_warning():
  """A fresh interpreter builds, seeds and steps the single and the vector
  environment on the C engine: nothing about CUDA (or Warp, which printed
  "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver" when
  mjlab's seeding started it) on stderr."""
  code = (
    "import gymnasium as gym, mjlab_tasks\n"
    "env = gym.make('CubeTray-UR5-RG2', engine='mujoco')\n"
    "env.reset(seed=0)\n"
    "env.step(env.action_space.sample())\n"
    "envs = gym.make_vec('CubeTray-UR5-RG2', num_envs=2, engine='mujoco')\n"
    "envs.reset(seed=1)\n"
    "envs.step(envs.action_space.sample())\n"
    "print('ok')\n"
  )
  run = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
  )
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip().splitlines()[-1] == "ok"
  assert "CUDA" not in run.stderr and "Warp" not in run.stderr, run.stderr
