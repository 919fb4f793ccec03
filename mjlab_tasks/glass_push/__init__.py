"""Pushing glasses apart (docs/glass_push.md): the rules, the mjlab task and
the examiner.

- ``rules/``: what a solution may know (tables, the hand's numbers, request
  checks, the room rule, ``touched`` / ``pushed``, scoring, errors);
- ``hidden.py``: the hidden truth (friction, true glasses and states, noisy
  readings), examiner-only;
- the mjlab task ``GlassPush-UR5-RG2``: ``env_cfg.py``, ``mdp.py``,
  ``scene.py``, ``events.py``, ``physics.py`` (registered with mjlab by
  ``mjlab_tasks.tasks``);
- ``examiner/``: the glass world on the task's environment, its worker
  processes and clients.

Solutions use ``Examiner`` / ``ExaminerBatch`` and the public names below
only; ``Exam`` is the runner's handle (records with the truth, for
scoring); ``TrainingExaminer`` serves the truth as labels on training
tables. Importing this package imports no mjlab and no MuJoCo: the physics
runs in the examiner's worker processes.
"""

from mjlab_tasks.glass_push.examiner.client import (
  Examiner,
  ExaminerBatch,
  TrainingExaminer,
)
from mjlab_tasks.glass_push.examiner.exam import Exam
from mjlab_tasks.glass_push.rules import (
  EVALUATION_TABLES,
  HAND,
  TRAINING_TABLES,
  BudgetSpent,
  ExaminerClosed,
  NoOffscreenGL,
  has_room,
  push_request,
  start_is_clear,
)

TASK_ID = "GlassPush-UR5-RG2"

__all__ = [
  "EVALUATION_TABLES",
  "HAND",
  "TASK_ID",
  "TRAINING_TABLES",
  "BudgetSpent",
  "Exam",
  "Examiner",
  "ExaminerBatch",
  "ExaminerClosed",
  "NoOffscreenGL",
  "TrainingExaminer",
  "has_room",
  "push_request",
  "start_is_clear",
]
