"""mjlab's ``mjlab.tasks`` entry point (pyproject.toml): registers the suite's
tasks (``mjlab_tasks.tasks``) when mjlab is imported.

mjlab loads its entry points at the end of ``import mjlab``. When the first
import of mjlab comes from one of this suite's own modules (say
``mjlab_tasks.cube_tray.env_cfg``, imported before anything else), that
module is still half-imported at that moment and ``mjlab_tasks.tasks``, which
needs it, cannot be imported yet; mjlab would print the ImportError. Then the
registration is left to whoever needs mjlab's registry: they import
``mjlab_tasks.tasks`` (as this suite's scripts, tests and Gymnasium
environments do). Otherwise (mjlab's own ``list-envs``, ``train``, ``play``,
or any process that imports mjlab first) the tasks are registered here.
"""

import sys

# The top-level packages of this distribution (pyproject.toml).
_SUITE_PACKAGES = ("mjlab_tasks", "assets", "experts", "evaluators")


def _suite_module_importing() -> bool:
  """Whether one of the suite's modules is being imported (unfinished)."""
  for name, module in list(sys.modules.items()):
    if name.partition(".")[0] in _SUITE_PACKAGES and name != __name__:
      spec = getattr(module, "__spec__", None)
      if getattr(spec, "_initializing", False):
        return True
  return False


if not _suite_module_importing():
  import mjlab_tasks.tasks  # noqa: F401 - registers the suite's tasks with mjlab
