"""Every task this suite registers: found by mjlab, builds, resets and steps.

Modelled on mjlab's own tests/test_task_configs.py.
"""

from __future__ import annotations

import pytest
import torch
from mjlab.tasks.registry import list_tasks, load_env_cfg

import mjlab_tasks  # noqa: F401
from mjlab_tasks.common.c_engine import make_env

SUITE_TASKS = ("CubeTray-UR5-RG2", "BinPick-UR5-RG2", "GlassPush-UR5-RG2")


def test_suite_tasks_registered_through_entry_point():
  # mjlab imports the suite itself (entry point group "mjlab.tasks").
  for task in SUITE_TASKS:
    assert task in list_tasks()


@pytest.mark.parametrize("task", SUITE_TASKS)
@pytest.mark.parametrize("play", [False, True])
def test_task_builds_resets_and_steps(task, play, rng_seed):
  cfg = load_env_cfg(task, play=play)
  cfg.scene.num_envs = 2
  # The CPU default (C engine); MuJoCo Warp runs these tasks in the other tests.
  env = make_env(cfg, device="cpu")
  try:
    gen = torch.Generator().manual_seed(rng_seed)
    obs, _ = env.reset()
    action_dim = env.action_manager.total_action_dim
    for _ in range(3):
      action = torch.rand(env.num_envs, action_dim, generator=gen) * 2 - 1
      obs, reward, terminated, truncated, _ = env.step(action)
      assert reward.shape == (env.num_envs,) and torch.isfinite(reward).all()
      assert terminated.shape == truncated.shape == (env.num_envs,)
      for group, value in obs.items():
        assert value.shape[0] == env.num_envs, group
        assert torch.isfinite(value).all(), group
  finally:
    env.close()
