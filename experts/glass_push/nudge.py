"""Blind nudge: the baseline that ignores the force readings.

One look; every glass without room (by the readings) is nudged once, 30 mm,
in the direction (of 8) that leads most directly away from its nearest
neighbour among those where the hand can come down beside it; one more look;
every standing glass that now seems to have room is taken. It never refuses,
never reads a report and never thinks about tipping.
"""

from __future__ import annotations

import math

import numpy as np

from experts.glass_push.common import (
  arrays,
  push_request,
  room_by_readings,
  start_is_clear,
)
from mjlab_tasks.glass_push import BudgetSpent, Examiner

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
    away /= np.linalg.norm(away)
    options = [
      push_request(reading, float(h), NUDGE) for h in np.radians(range(0, 360, 45))
    ]
    options = [r for r in options if start_is_clear(r, readings)]
    if not options:
      continue
    request = max(
      options,
      key=lambda r: math.cos(r["heading"]) * away[0] + math.sin(r["heading"]) * away[1],
    )
    try:
      examiner.push(request)
    except BudgetSpent:
      break
  readings = examiner.look()
  for k, reading in enumerate(readings):
    if reading["standing"] and room_by_readings(readings, k):
      examiner.take(reading["id"])
