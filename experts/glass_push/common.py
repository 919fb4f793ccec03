"""What both shipped glass-pushing solutions share: readings to arrays, room
from readings, push geometry. Solutions see only the examiner's readings and
reports and the hand's own numbers (``mjlab_tasks.glass_push.HAND``)."""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push import HAND, has_room

# The glass zone's safe interior for aims: away from the table edge (y -0.50)
# and inside the arm's comfortable reach (the solution's own choice).
AIM_X = (0.28, 0.66)
AIM_Y = (-0.44, -0.02)
# Readings are noisy (widths about 3 mm): judge room with this margin.
WIDTH_MARGIN = 0.006
START_MARGIN = 0.004  # hand footprint clear of other glasses at the start
# The closed hand seen from above: the pads and finger links (+-16 mm across
# the heading, +-12.5 mm along it) go down to the table; the housing
# (+-30 x +-22 mm) only reaches heights above HOUSING_Z.
LOW_FOOTPRINT = math.hypot(0.016, HAND["pad_half_width"])
HIGH_FOOTPRINT = math.hypot(*HAND["housing_half"])
HOUSING_Z = HAND["lowest_tcp_z"] + HAND["housing_above_tcp"]


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


def reachable(p) -> bool:
  r = math.hypot(p[0], p[1])
  return HAND["reach_min"] + 0.01 <= r <= HAND["reach_max"] - 0.01


def leading_part(reading: dict) -> float:
  """How far the hand part that meets this glass leads the tool axis."""
  if reading["height"] > HOUSING_Z:
    return HAND["housing_lead"]
  return HAND["pad_lead"]


def push_request(reading: dict, heading: float, travel: float, gap: float = 0.015):
  """A push of one glass along ``heading``: the hand comes down ``gap`` behind
  the glass's widest ring, feels up to twice that, pushes ``travel``."""
  u = np.array([math.cos(heading), math.sin(heading)])
  centre = np.array([reading["x"], reading["y"]])
  start = centre - u * (reading["widest"] / 2 + leading_part(reading) + gap)
  aim = centre + u * travel
  return {
    "glass": int(reading["id"]),
    "start": [float(start[0]), float(start[1])],
    "heading": float(heading),
    "reach": float(2 * gap + 0.01),
    "travel": float(travel),
    "aim": [float(aim[0]), float(aim[1])],
  }


def start_is_clear(request: dict, readings: list[dict]) -> bool:
  """The hand's footprint at the start point misses every glass (by readings)."""
  start = np.array(request["start"])
  for r in readings:
    if r["id"] == request["glass"]:
      continue
    foot = HIGH_FOOTPRINT if r["height"] > HOUSING_Z else LOW_FOOTPRINT
    if math.hypot(r["x"] - start[0], r["y"] - start[1]) < (
      r["widest"] / 2 + foot + START_MARGIN
    ):
      return False
  end = start + (request["reach"] + request["travel"]) * np.array(
    [math.cos(request["heading"]), math.sin(request["heading"])]
  )
  return reachable(start) and reachable(end)


def in_aim_box(p) -> bool:
  return AIM_X[0] <= p[0] <= AIM_X[1] and AIM_Y[0] <= p[1] <= AIM_Y[1]
