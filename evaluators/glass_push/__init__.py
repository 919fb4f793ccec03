"""Pushing glasses apart: the examiner's rules (seed 003, docs/glass_push.md).

The tables, the request checks, the true states and noisy readings, the
room rule, the ``touched`` / ``pushed`` rule and the scoring. The physics
(the glass world on the GlassPush environment) and the examiner's clients
live with the task, in ``mjlab_tasks.glass_push``.
"""

from evaluators.glass_push.errors import BudgetSpent, ExaminerClosed, NoOffscreenGL
from evaluators.glass_push.hand import HAND
from evaluators.glass_push.room import has_room
from evaluators.glass_push.tables import EVALUATION_TABLES, TRAINING_TABLES

__all__ = [
  "EVALUATION_TABLES",
  "HAND",
  "TRAINING_TABLES",
  "BudgetSpent",
  "ExaminerClosed",
  "NoOffscreenGL",
  "has_room",
]
