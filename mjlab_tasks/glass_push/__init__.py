"""Pushing glasses apart (docs/glass_push.md): the mjlab task and the examiner.

The task is registered with mjlab by ``mjlab_tasks.tasks``. Solutions use
``Examiner`` / ``ExaminerBatch`` only; ``Exam`` is the runner's handle
(records with the truth, for scoring); ``TrainingExaminer`` serves the truth
as labels on training tables. Importing this package imports no mjlab and no
MuJoCo: the physics runs in the examiner's worker processes.
"""

from evaluators.glass_push import (
  EVALUATION_TABLES,
  HAND,
  TRAINING_TABLES,
  BudgetSpent,
  ExaminerClosed,
  NoOffscreenGL,
  has_room,
)
from mjlab_tasks.glass_push.examiner import (
  Exam,
  Examiner,
  ExaminerBatch,
  TrainingExaminer,
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
]
