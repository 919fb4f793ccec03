"""Bin picking with a pourer: task registration."""

from mjlab.tasks.registry import register_mjlab_task

from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
from mjlab_tasks.common.rl_cfg import ppo_runner_cfg

TASK_ID = "BinPick-UR5-RG2"

# Training: four object slots on the default bin, a pool of four pours per
# environment (resets draw from it), 90 s episodes (four deliveries at the
# expert's 20 s pace), the cleared bin absorbing. Play: the evaluation scene
# (twelve slots, each environment's own pour, ends when cleared).
TRAIN_OBJECTS, TRAIN_POUR_ROUNDS, TRAIN_EPISODE_S = 4, 4, 90.0

register_mjlab_task(
  task_id=TASK_ID,
  env_cfg=bin_pick_env_cfg(
    objects=TRAIN_OBJECTS,
    pour_rounds=TRAIN_POUR_ROUNDS,
    end_on_clear=False,
    episode_length_s=TRAIN_EPISODE_S,
  ),
  play_env_cfg=bin_pick_env_cfg(play=True),
  rl_cfg=ppo_runner_cfg("bin_pick_ur5_rg2"),
)
