"""Pushing glasses apart: the mjlab task (docs/glass_push.md)."""

from mjlab.tasks.registry import register_mjlab_task

from mjlab_tasks.common.rl_cfg import ppo_runner_cfg
from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

TASK_ID = "GlassPush-UR5-RG2"

register_mjlab_task(
  task_id=TASK_ID,
  env_cfg=glass_push_env_cfg(end_on_success=False),
  play_env_cfg=glass_push_env_cfg(play=True),
  rl_cfg=ppo_runner_cfg("glass_push_ur5_rg2"),
)
