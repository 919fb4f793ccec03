"""The suite's mjlab tasks. Importing this package registers every task.

mjlab imports it through the ``mjlab.tasks`` entry point, so ``list-envs``,
``train`` and ``play`` see the tasks with no extra import.
"""

from mjlab_tasks import bin_pick, cube_tray  # noqa: F401  (register their tasks)
