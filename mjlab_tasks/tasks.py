"""Registers every suite task with mjlab (and, through the package, Gymnasium).

mjlab imports this module through the ``mjlab.tasks`` entry point (see
pyproject.toml), so ``list-envs``, ``train`` and ``play`` see the tasks with
no extra import. Code outside mjlab that needs mjlab's registry
(``load_env_cfg``, ``load_rl_cfg``, ``list_tasks``) imports it explicitly:

  import mjlab_tasks.tasks  # noqa: F401 - registers the suite's tasks

Importing it imports mjlab, its example tasks and rsl_rl (10+ s); importing
``mjlab_tasks`` or a task package (``mjlab_tasks.cube_tray``, ...) does not.
The Gymnasium ids are registered by ``mjlab_tasks`` itself (cheaply, without
mjlab), which every import of this module runs first.
"""

from mjlab.tasks.registry import register_mjlab_task

from mjlab_tasks import TASK_IDS, bin_pick, cube_tray, glass_push
from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
from mjlab_tasks.common.rl_cfg import ppo_runner_cfg
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

__all__ = ["TASK_IDS"]

# Cube in tray.
register_mjlab_task(
  task_id=cube_tray.TASK_ID,
  env_cfg=cube_tray_env_cfg(end_on_success=False),
  play_env_cfg=cube_tray_env_cfg(play=True),
  # gamma 0.95: measured side by side on one reward, the cube was over the
  # tray in about 45 % of episodes at iterations 600 to 900 with 0.95 and in
  # 2 % with 0.98 (docs/training.md).
  rl_cfg=ppo_runner_cfg("cube_tray_ur5_rg2", gamma=0.95),
)

# Bin picking with a pourer. Training is on what BinPick is scored on: the
# 140 x 60 mm development bin with two object slots, a pool of four pours per
# environment (resets draw from it), 45 s episodes (room for two deliveries
# at the expert's pace when it was set, 15.4 s per delivery on this bin, and
# 7 s for the last object to come to rest; the expert now takes 9.0 s here
# and 11.5 to 14.7 s on the default bin, docs/bin_pick.md, so the length
# leaves a learner slack; kept, as the training runs measured it), the
# cleared bin absorbing. The
# actor sees the same number of objects with any slot count, so a policy
# trained here runs in the play scene. Play: the evaluation scene
# (the default bin, twelve slots, each environment's own pour, ends when
# cleared; scripts/evaluate_binpick.py sets the bin and the slots).
TRAIN_OBJECTS, TRAIN_POUR_ROUNDS, TRAIN_EPISODE_S = 2, 4, 45.0
TRAIN_BIN_WIDTH, TRAIN_BIN_HEIGHT = 0.14, 0.06

register_mjlab_task(
  task_id=bin_pick.TASK_ID,
  env_cfg=bin_pick_env_cfg(
    objects=TRAIN_OBJECTS,
    bin_width=TRAIN_BIN_WIDTH,
    bin_height=TRAIN_BIN_HEIGHT,
    pour_rounds=TRAIN_POUR_ROUNDS,
    end_on_clear=False,
    episode_length_s=TRAIN_EPISODE_S,
  ),
  play_env_cfg=bin_pick_env_cfg(play=True),
  # gamma 0.95 as on cube in tray, where it decided whether the held cube
  # was carried on (docs/training.md).
  rl_cfg=ppo_runner_cfg("bin_pick_ur5_rg2", gamma=0.95),
)

# Pushing glasses apart (docs/glass_push.md).
register_mjlab_task(
  task_id=glass_push.TASK_ID,
  env_cfg=glass_push_env_cfg(end_on_success=False),
  play_env_cfg=glass_push_env_cfg(play=True),
  rl_cfg=ppo_runner_cfg("glass_push_ur5_rg2"),
)
