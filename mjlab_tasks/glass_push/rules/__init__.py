"""Pushing glasses apart: the rules, what a solution may know
(docs/glass_push.md).

How tables are drawn (``tables.py``; the glasses drawn for a table are
still the examiner's truth: a solution reads a table through
``Examiner.look()``) and what their glasses are made of (``glasses.py``),
the hand's public numbers (``hand.py``), the push geometry (``pushes.py``), the checks of a request
(``requests.py``), the ``touched`` / ``pushed`` rule (``felt.py``), the room
rule (``room.py``), the scoring (``scoring.py``) and the errors a solution
sees (``errors.py``). NumPy only: no MuJoCo, no mjlab, and no import of the
task, the examiner or the hidden truth (``hidden.py``).
"""

from mjlab_tasks.glass_push.rules.errors import (
  BudgetSpent,
  ExaminerClosed,
  NoOffscreenGL,
)
from mjlab_tasks.glass_push.rules.hand import HAND
from mjlab_tasks.glass_push.rules.pushes import push_request, start_is_clear
from mjlab_tasks.glass_push.rules.room import has_room
from mjlab_tasks.glass_push.rules.tables import EVALUATION_TABLES, TRAINING_TABLES

__all__ = [
  "EVALUATION_TABLES",
  "HAND",
  "TRAINING_TABLES",
  "BudgetSpent",
  "ExaminerClosed",
  "NoOffscreenGL",
  "has_room",
  "push_request",
  "start_is_clear",
]
