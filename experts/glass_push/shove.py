"""Shove: short shoves into the group, re-planned after every look.

Loop: look three times and average the readings (the noise is new on every
look); take every standing glass that has room by them, one at a time,
looking again after each take. When none has room, shove: of every
standing glass, 16 headings, travels of 30, 20 and 10 mm and a clear place
to put the hand down, the shove after which the first-order prediction
(``geometric.shove_prediction``: the glasses met are carried along the
contact normal) lets the most glasses be taken in turn, the shortest
travel first; with no predicted gain, the longest one most directly
towards the group's middle. A shove may carry at most ``MAX_CARRIED``
glasses and keep every glass it moves inside the aim box; each carried
glass needs a ``lever`` of at least ``LEVER``: half its foot over the
height at which the shoved glass meets it (both outlines modelled from the
readings), so a tall glass may be carried by a short one that meets it low.
The shoved glass itself needs a squatness (half its foot over its height)
of at least ``PUSHED_SQUAT``. A shove that gained nothing is not repeated
(same glass and heading); a glass is shoved at most ``MAX_TRIES`` times,
and not again after a shove that felt more than ``STUCK_FORCE``.

Why the pushed glass needs no tipping limit here: a shove at the lowest
height meets a tall glass with the housing and its foot with the pads,
which carry it. The glasses that topple are carried ones, met high up
relative to their foot; the height where they are met separates them
better than their own height (docs/glass_push.md, "The shove solution":
the rules and numbers here were chosen on training tables only). It reads
only the readings and its reports.
"""

from __future__ import annotations

import math

import numpy as np

from experts.glass_push.common import arrays, in_aim_box, room_by_readings
from experts.glass_push.geometric import HEADINGS, shove_prediction
from mjlab_tasks.glass_push import BudgetSpent, Examiner, push_request, start_is_clear

TRAVELS = (0.03, 0.02, 0.01)  # m per shove
MAX_CARRIED = 3  # glasses a shove may be predicted to carry
LEVER = 0.26  # a carried glass's half foot over the height where it is met
LOOKS = 3  # looks averaged per decision
PUSHED_SQUAT = 0.16  # the pushed glass's half foot over its height, at least
MAX_TRIES = 2  # shoves of one glass
STUCK_FORCE = 10.0  # N: a shove that felt more leaves that glass alone
# Feet and heights are judged on readings: a narrower foot and a higher
# lever by about two standard deviations of an averaged reading.
FOOT_MARGIN, HEIGHT_MARGIN = 0.004, 0.003
# The two kinds of glass, as the tables are drawn (docs/glass_push.md,
# "Tables"): tumblers up to 150 mm, stemmed glasses from 150 mm. A reading
# within KIND_BAND of that is judged both ways.
STEMMED_FROM, KIND_BAND = 0.150, 0.004
# Two outlines meet at the height of their widest summed radius; of the
# heights within MEET_BAND of it (the readings are noisy), the highest.
MEET_BAND = 0.004


def squatness(reading: dict) -> float:
  """Half the foot over the height, pessimistic for the reading noise."""
  return (reading["foot"] - FOOT_MARGIN) / 2 / (reading["height"] + HEIGHT_MARGIN)


def outline(reading: dict, z: np.ndarray, stemmed: bool) -> np.ndarray:
  """The glass's radius at heights ``z`` (0 above it), from its readings:
  a tumbler is a frustum from its foot to its rim; a stemmed glass a foot
  disk, a thin stem to 40 % of its height and a bowl widest at 60 % of the
  bowl's height, narrowing to 85 % at the rim."""
  h, widest, foot = reading["height"], reading["widest"], reading["foot"]
  if not stemmed:
    radius = foot / 2 + (widest - foot) / 2 * z / h
  else:
    stem_top, rw = 0.4 * h, widest / 2
    bowl = h - stem_top
    heights = [0.0, 0.004, 0.0041, stem_top, stem_top + 0.25 * bowl]
    heights += [stem_top + 0.6 * bowl, h]
    radii = [foot / 2, foot / 2, 0.004, 0.012, 0.8 * rw, rw, 0.85 * rw]
    radius = np.interp(z, heights, radii)
  return np.where(z <= h, radius, 0.0)


def _stemmed(reading: dict, lean: bool) -> bool:
  if abs(reading["height"] - STEMMED_FROM) < KIND_BAND:
    return lean
  return reading["height"] > STEMMED_FROM


def meeting_height(a: dict, b: dict) -> float:
  """Where two glasses meet when one is shoved into the other: the height
  of their widest summed outline, the higher for either reading of an
  ambiguous kind."""
  z = np.linspace(0.0, min(a["height"], b["height"]), 60)
  best = 0.0
  for lean in (False, True):
    total = outline(a, z, _stemmed(a, lean)) + outline(b, z, _stemmed(b, lean))
    best = max(best, float(z[np.nonzero(total >= total.max() - MEET_BAND)[0].max()]))
  return best


def lever(carried: dict, pusher: dict) -> float:
  """Half the carried glass's foot over the height at which the pusher
  meets it, pessimistic for the reading noise: the larger, the less a
  push there tips it."""
  z = meeting_height(pusher, carried)
  return (carried["foot"] - FOOT_MARGIN) / 2 / (z + HEIGHT_MARGIN)


def averaged_look(examiner: Examiner, looks: int = LOOKS) -> list[dict]:
  """The mean of ``looks`` looks (the glasses present in the last one)."""
  seen = [examiner.look() for _ in range(looks)]
  out = []
  for reading in seen[-1]:
    same = [r for look in seen for r in look if r["id"] == reading["id"]]
    mean = {k: float(np.mean([r[k] for r in same])) for k in ("x", "y", "widest")}
    mean |= {k: float(np.mean([r[k] for r in same])) for k in ("height", "foot")}
    out.append(reading | mean)
  return out


def take_ready(examiner: Examiner) -> list[dict]:
  """Take every standing glass with room (by averaged readings), one at a
  time; returns the last averaged look."""
  while True:
    readings = averaged_look(examiner)
    ready = [
      r
      for k, r in enumerate(readings)
      if r["standing"] and room_by_readings(readings, k)
    ]
    if not ready:
      return readings
    examiner.take(ready[0]["id"])


def taken_in_turn(readings: list[dict], centres: np.ndarray) -> int:
  """How many standing glasses at ``centres`` could be taken one after the
  other, each with room once those before it are gone."""
  left = [
    dict(r, x=float(p[0]), y=float(p[1]))
    for r, p in zip(readings, centres, strict=True)
    if r["standing"]
  ]
  taken = 0
  while True:
    ready = [j for j in range(len(left)) if room_by_readings(left, j)]
    if not ready:
      return taken
    left.pop(ready[0])
    taken += 1


def carried_by(k, new, xy) -> list[int]:
  """The glasses other than ``k`` that the prediction moves."""
  moved = np.linalg.norm(new - xy, axis=1) > 1e-6
  return [j for j in np.nonzero(moved)[0].tolist() if j != k]


def _allowed(readings, k, new, xy) -> bool:
  carried = carried_by(k, new, xy)
  return len(carried) <= MAX_CARRIED and all(
    readings[j]["standing"]
    and in_aim_box(new[j])
    and lever(readings[j], readings[k]) >= LEVER
    for j in carried
  )


def plan(readings: list[dict], in_vain: set, done=frozenset()) -> dict | None:
  """The allowed shove after which the most glasses can be taken in turn
  (the shortest such), else the longest most directly towards the group's
  middle; None when there is none. Glasses in ``done`` are not shoved
  again."""
  _, xy, *_ = arrays(readings)
  standing = [k for k, r in enumerate(readings) if r["standing"]]
  middle = xy[standing].mean(axis=0)
  now = taken_in_turn(readings, xy)
  best, best_key = None, None
  for k in standing:
    reading = readings[k]
    if reading["id"] in done or squatness(reading) < PUSHED_SQUAT:
      continue
    inward = middle - xy[k]
    inward /= max(float(np.linalg.norm(inward)), 1e-9)
    for rank, travel in enumerate(TRAVELS):
      for heading in HEADINGS:
        if (reading["id"], round(float(heading), 3)) in in_vain:
          continue
        request = push_request(reading, float(heading), travel)
        if not in_aim_box(request["aim"]) or not start_is_clear(request, readings):
          continue
        new = shove_prediction(readings, k, float(heading), travel)
        if not _allowed(readings, k, new, xy):
          continue
        gained = taken_in_turn(readings, new) - now
        u = np.array([math.cos(heading), math.sin(heading)])
        # A predicted gain: the shortest shove that gives it. None: the
        # longest (it freed more on training tables than the shortest).
        key = (max(gained, 0), rank if gained > 0 else -rank, float(u @ inward))
        if best_key is None or key > best_key:
          best, best_key = request, key
  return best


def solve(examiner: Examiner) -> None:
  in_vain: set[tuple[int, float]] = set()
  tries: dict[int, int] = {}
  done: set[int] = set()  # shoved MAX_TRIES times, or felt stuck
  readings = take_ready(examiner)
  while any(r["standing"] for r in readings):
    request = plan(readings, in_vain, done)
    if request is None:
      for r in readings:
        if r["standing"]:
          examiner.refuse(r["id"], "no shove carries only glasses met low enough")
      return
    try:
      report = examiner.push(request)
    except BudgetSpent:
      take_ready(examiner)
      return
    gid = request["glass"]
    tries[gid] = tries.get(gid, 0) + 1
    if tries[gid] >= MAX_TRIES or report["peak"] > STUCK_FORCE or report["jammed"]:
      done.add(gid)
    after = take_ready(examiner)
    if len(after) == len(readings):
      in_vain.add((request["glass"], round(request["heading"], 3)))
    readings = after
