"""Pushing glasses apart: the examiner (seed 003, docs/glass_push.md).

Solutions use ``Examiner`` / ``ExaminerBatch`` only. ``Exam`` is the runner's
handle (records with the truth, for scoring); ``TrainingExaminer`` serves the
truth as labels on training tables.
"""

from evaluators.glass_push.errors import BudgetSpent, ExaminerClosed
from evaluators.glass_push.examiner import (
  Exam,
  Examiner,
  ExaminerBatch,
  TrainingExaminer,
)
from evaluators.glass_push.room import has_room
from evaluators.glass_push.tables import EVALUATION_TABLES, TRAINING_TABLES
from evaluators.glass_push.world import (
  LOWEST_TCP_Z,
  PAD_HALF_Z,
  PAD_LEAD,
  REACH_MAX,
  REACH_MIN,
)

# The hand's own numbers, which a solution may use (no truth about the table):
HAND = {
  "lowest_tcp_z": LOWEST_TCP_Z,  # tool point at the lowest reachable height [m]
  "pad_half_z": PAD_HALF_Z,  # pads reach this far below the tool point
  "pad_lead": PAD_LEAD,  # pad edges lead the tool axis along the heading
  # The housing (30 x 44 mm, 120 mm tall) starts 60 mm above the tool point
  # and leads the tool axis by 22 mm along the heading.
  "housing_above_tcp": 0.06,
  "housing_lead": 0.022,
  "reach_min": REACH_MIN,  # start points: distance from the base axis [m]
  "reach_max": REACH_MAX,
}

__all__ = [
  "EVALUATION_TABLES",
  "HAND",
  "TRAINING_TABLES",
  "BudgetSpent",
  "Exam",
  "Examiner",
  "ExaminerBatch",
  "ExaminerClosed",
  "TrainingExaminer",
  "has_room",
]
