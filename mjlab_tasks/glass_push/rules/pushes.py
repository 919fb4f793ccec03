"""Push geometry from readings and the hand's own numbers (public).

A push of one glass along a heading: where the closed hand comes down
behind the glass, how far it feels and pushes, and whether its footprint
misses every other glass there. The shipped solutions plan with these
(``experts/glass_push``); the examiner's scoring side uses the same ones
for its candidate pushes (the search-based limit, judging refusals), on
true readings. NumPy only.
"""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push.rules.hand import HAND

START_MARGIN = 0.004  # hand footprint clear of other glasses at the start
# The closed hand seen from above: the pads and finger links (+-16 mm across
# the heading, +-12.5 mm along it) go down to the table; the housing
# (+-30 x +-22 mm) only reaches heights above HOUSING_Z.
LOW_FOOTPRINT = math.hypot(0.016, HAND["pad_half_width"])
HIGH_FOOTPRINT = math.hypot(*HAND["housing_half"])
HOUSING_Z = HAND["lowest_tcp_z"] + HAND["housing_above_tcp"]


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
