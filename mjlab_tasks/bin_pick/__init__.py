"""Bin picking with a pourer: task registration."""

from mjlab.tasks.registry import register_mjlab_task

from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
from mjlab_tasks.common.rl_cfg import ppo_runner_cfg

TASK_ID = "BinPick-UR5-RG2"

register_mjlab_task(
  task_id=TASK_ID,
  env_cfg=bin_pick_env_cfg(),
  play_env_cfg=bin_pick_env_cfg(play=True),
  rl_cfg=ppo_runner_cfg("bin_pick_ur5_rg2"),
)
