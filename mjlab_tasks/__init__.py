"""The suite's mjlab tasks. Importing this package is light (no mjlab, no
torch): it registers the Gymnasium ids only.

- mjlab's registry: ``mjlab_tasks.tasks`` registers every task. mjlab imports
  it through the ``mjlab.tasks`` entry point, so ``list-envs``, ``train`` and
  ``play`` see the tasks with no extra import; other code that needs the
  registry imports ``mjlab_tasks.tasks``.
- Gymnasium: importing this package registers each task (``gymnasium.make`` /
  ``make_vec``, the same ids plus ``-Play``; see docs/gymnasium.md). Only
  entry-point strings are registered; mjlab is imported when an environment
  is built.
"""

from mjlab_tasks.common.gl import importable_backend

# Before anything imports mujoco (mjlab would choose EGL, which a machine
# without libEGL cannot import).
importable_backend()

from mjlab_tasks import bin_pick, cube_tray, glass_push  # noqa: E402
from mjlab_tasks.common.gym_env import register_gymnasium_envs  # noqa: E402

TASK_IDS = (cube_tray.TASK_ID, bin_pick.TASK_ID, glass_push.TASK_ID)

register_gymnasium_envs(TASK_IDS)
