"""Cube in tray: task registration."""

from mjlab.tasks.registry import register_mjlab_task

from mjlab_tasks.common.rl_cfg import ppo_runner_cfg
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg

TASK_ID = "CubeTray-UR5-RG2"

register_mjlab_task(
  task_id=TASK_ID,
  env_cfg=cube_tray_env_cfg(end_on_success=False),
  play_env_cfg=cube_tray_env_cfg(play=True),
  rl_cfg=ppo_runner_cfg("cube_tray_ur5_rg2"),
)
