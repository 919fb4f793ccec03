"""Pushing glasses apart: the examiner (seed 003, docs/glass_push.md).

Solutions use ``Examiner`` / ``ExaminerBatch`` only. ``Exam`` is the runner's
handle (records with the truth, for scoring); ``TrainingExaminer`` serves the
truth as labels on training tables.
"""

from evaluators.glass_push.errors import BudgetSpent, ExaminerClosed, NoOffscreenGL
from evaluators.glass_push.examiner import (
  Exam,
  Examiner,
  ExaminerBatch,
  TrainingExaminer,
)
from evaluators.glass_push.hand import HAND
from evaluators.glass_push.room import has_room
from evaluators.glass_push.tables import EVALUATION_TABLES, TRAINING_TABLES

__all__ = [
  "EVALUATION_TABLES",
  "HAND",
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
