"""The suite's mjlab tasks. Importing this package registers every task.

mjlab imports it through the ``mjlab.tasks`` entry point, so ``list-envs``,
``train`` and ``play`` see the tasks with no extra import. Importing it also
registers each task with Gymnasium (``gymnasium.make`` / ``make_vec``, the
same ids plus ``-Play``; see docs/gymnasium.md).
"""

from mjlab_tasks import bin_pick, cube_tray, glass_push  # (registering their tasks)
from mjlab_tasks.common.gym_env import register_gymnasium_envs

register_gymnasium_envs((cube_tray.TASK_ID, bin_pick.TASK_ID, glass_push.TASK_ID))
