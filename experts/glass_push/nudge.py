"""Blind nudge: the baseline that ignores the force readings.

One look; every glass without room (by the readings) is nudged once, 30 mm
straight away from its nearest neighbour; one more look; every standing
glass that now seems to have room is taken. It never refuses, never reads a
report and never thinks about tipping.
"""

from __future__ import annotations

import math

import numpy as np

from evaluators.glass_push import BudgetSpent, Examiner
from experts.glass_push.common import (
  arrays,
  push_request,
  room_by_readings,
  start_is_clear,
)

NUDGE = 0.03  # m


def solve(examiner: Examiner) -> None:
  readings = examiner.look()
  _, xy, *_ = arrays(readings)
  for k, reading in enumerate(readings):
    if room_by_readings(readings, k) or len(readings) < 2:
      continue
    d = np.linalg.norm(xy - xy[k], axis=1)
    d[k] = np.inf
    away = xy[k] - xy[int(np.argmin(d))]
    heading = math.atan2(away[1], away[0])
    request = push_request(reading, heading, NUDGE)
    if not start_is_clear(request, []):  # only the arm's reach, blindly
      continue
    try:
      examiner.push(request)
    except BudgetSpent:
      break
  readings = examiner.look()
  for k, reading in enumerate(readings):
    if reading["standing"] and room_by_readings(readings, k):
      examiner.take(reading["id"])
