"""Cube in tray: the reward makes finishing the best thing a policy can do.

Measured as the training configuration pays it (C engine, 4 randomized
environments, success absorbing): from the moment the expert releases the
cube, letting go and settling is worth more (discounted return with the
registered PPO runner's gamma) than holding the cube over the tray forever; no state
before success pays as much per step as the settled state.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import torch
from mjlab.tasks.registry import load_rl_cfg

import mjlab_tasks.tasks  # noqa: F401  (registers the tasks)
from experts.cube_tray import ACTION_NAMES, CubeTrayExpert
from mjlab_tasks import cube_tray
from mjlab_tasks.common.verdict import task_verdict
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.cube_tray.mdp import SETTLED
from mjlab_tasks.engine import make_env

RELEASE = ACTION_NAMES.index("release")
STEPS = 220  # 11 s: the expert settles the cube within 4.5 to 9.4 s (docs).


def _rollout(
  seed: int, hold_after_release: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Per-step rewards [T, 4] (undone dt scaling), the release step per env,
  and the evaluator's settled verdict after every step [T, 4]."""
  cfg = cube_tray_env_cfg(arm_action="joint", num_envs=4, end_on_success=False)
  cfg.seed = seed
  cfg.episode_length_s = 30.0  # no time-out inside the window
  with contextlib.redirect_stdout(io.StringIO()):
    env = make_env(cfg)
  try:
    env.reset()
    expert = CubeTrayExpert(env)
    expert.reset()
    rewards, settled, release = [], [], np.full(4, -1)
    for t in range(STEPS):
      action = expert.act()
      releasing = (expert.index >= RELEASE).numpy()
      release[(release < 0) & releasing] = t
      if hold_after_release:
        action[torch.from_numpy(releasing), 6] = -1.0  # keep the pinch
      _, reward, terminated, truncated, _ = env.step(action)
      assert not (terminated | truncated).any()
      rewards.append(reward.numpy() / env.step_dt)
      settled.append(task_verdict(env)["settled"].numpy().copy())
    expert.close()
    return np.array(rewards), release, np.array(settled)
  finally:
    env.close()


def _return_from(rewards: np.ndarray, start: int, gamma: float) -> float:
  """Discounted return from ``start``; the last reward continues forever
  (both end states are steady: settled, or holding still)."""
  tail = rewards[start:]
  disc = gamma ** np.arange(len(tail))
  return float(disc @ tail + gamma ** len(tail) * tail[-1] / (1 - gamma))


def test_letting_go_beats_holding_the_cube_over_the_tray(rng_seed):
  gamma = load_rl_cfg(cube_tray.TASK_ID).algorithm.gamma
  seed = int(rng_seed % (1 << 31))
  let_go, release, settled = _rollout(seed, hold_after_release=False)
  hold, release_hold, settled_hold = _rollout(seed, hold_after_release=True)
  assert (release >= 0).all() and np.array_equal(release, release_hold)
  assert settled[-1].all() and not settled_hold.any()
  for i in range(4):
    # Before the release both runs are the same run.
    np.testing.assert_array_equal(let_go[: release[i], i], hold[: release[i], i])
    g_let_go = _return_from(let_go[:, i], release[i], gamma)
    g_hold = _return_from(hold[:, i], release[i], gamma)
    print(f"env {i}: let go {g_let_go:.1f}, hold {g_hold:.1f} (gamma {gamma})")
    assert g_let_go > 1.2 * g_hold
    # Holding still pays less per step than the settled state.
    assert hold[-1, i] < 0.7 * SETTLED
  # The steps the evaluator judges settled pay the most of any state the
  # expert went through; every other step pays clearly less.
  assert let_go.max() <= SETTLED + 1e-6
  np.testing.assert_allclose(let_go[settled], SETTLED, atol=1e-3)
  assert (let_go[~settled] < 0.96).all()


def test_task_vectors_are_in_the_robot_base_frame(rng_seed):
  """The actor's tool-to-cube and cube-to-goal vectors against a SciPy
  rotation of the world vectors into the base frame (randomized scenes)."""
  from scipy.spatial.transform import Rotation

  from assets.ur5_rg2 import TCP_SITE_NAME
  from mjlab_tasks.cube_tray.env_cfg import CUBE_HALF, TRAY_FLOOR

  cfg = cube_tray_env_cfg(num_envs=3, play=True)  # play: no observation noise
  cfg.seed = int(rng_seed % (1 << 31))
  with contextlib.redirect_stdout(io.StringIO()):
    env = make_env(cfg)
  try:
    obs, _ = env.reset()
    terms = env.observation_manager.active_terms["actor"]
    dims = env.observation_manager.group_obs_term_dim["actor"]
    split = dict(
      zip(terms, torch.split(obs["actor"], [d[0] for d in dims], dim=-1), strict=True)
    )
    robot = env.scene["robot"]
    base = Rotation.from_quat(
      robot.data.root_link_quat_w.double().numpy(), scalar_first=True
    )
    site = robot.indexing.site_ids[robot.find_sites(TCP_SITE_NAME)[0][0]]
    tcp = env.sim.data.site_xpos[:, site].double().numpy()
    cube = env.scene["cube"].data.root_link_pos_w.double().numpy()
    goal = env.scene["tray"].data.root_link_pos_w.double().numpy()
    goal[:, 2] += TRAY_FLOOR + CUBE_HALF
    np.testing.assert_allclose(
      split["tcp_to_cube"], base.inv().apply(cube - tcp), atol=1e-5
    )
    np.testing.assert_allclose(
      split["cube_to_goal"], base.inv().apply(goal - cube), atol=1e-5
    )
    # The base faces +x in the world with yaw 0 or pi: not an identity check.
    assert not np.allclose(split["tcp_to_cube"].numpy(), cube - tcp, atol=1e-3)
    assert split["grasped"].eq(0).all()  # Nothing held at reset.
  finally:
    env.close()
