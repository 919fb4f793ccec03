"""What both shipped glass-pushing solutions share: readings to arrays, room
from readings, the push geometry (from the rules). Solutions see only the examiner's readings and
reports and the hand's own numbers (``mjlab_tasks.glass_push.HAND``)."""

from __future__ import annotations

import numpy as np

from mjlab_tasks.glass_push import has_room, push_request, start_is_clear

# The glass zone's safe interior for aims: away from the table edge (y -0.50)
# and inside the arm's comfortable reach (the solution's own choice).
AIM_X = (0.28, 0.66)
AIM_Y = (-0.44, -0.02)
# Readings are noisy (widths about 3 mm): judge room with this margin.
WIDTH_MARGIN = 0.006

# The push geometry (push_request, start_is_clear) is public, in the rules:
# the examiner's scoring side plans its candidate pushes with it too.
__all__ = ["push_request", "start_is_clear"]


def arrays(readings: list[dict]):
  """ids [N], centres [N, 2], widest [N], foot [N], height [N], standing [N]."""
  ids = np.array([r["id"] for r in readings], dtype=int)
  xy = np.array([[r["x"], r["y"]] for r in readings], dtype=float).reshape(-1, 2)
  widest = np.array([r["widest"] for r in readings], dtype=float)
  foot = np.array([r["foot"] for r in readings], dtype=float)
  height = np.array([r["height"] for r in readings], dtype=float)
  standing = np.array([r["standing"] for r in readings], dtype=bool)
  return ids, xy, widest, foot, height, standing


def room_by_readings(readings: list[dict], k: int, xy=None) -> bool:
  """Room for the fingers around reading k (optionally moved to ``xy``)."""
  _, centres, widest, *_ = arrays(readings)
  others = np.delete(np.arange(len(readings)), k)
  here = centres[k] if xy is None else np.asarray(xy)
  return has_room(
    here,
    widest[k] + WIDTH_MARGIN,
    centres[others],
    widest[others] + WIDTH_MARGIN,
  )


def in_aim_box(p) -> bool:
  return AIM_X[0] <= p[0] <= AIM_X[1] and AIM_Y[0] <= p[1] <= AIM_Y[1]
