"""Shove: short shoves into the group, re-planned after every look.

Loop: look three times and average the readings (the noise is new on every
look); take every standing glass that has room by them, one at a time,
looking again after each take. When none has room, shove: of every
standing glass, 16 headings, travels of 30, 20 and 10 mm and a clear place
to put the hand down, the shove that the first-order prediction
(``geometric.shove_prediction``: the glasses met are carried along the
contact normal) says gives the most glasses room, the longer travel first;
with no predicted gain, the one most directly towards the group's middle.
A shove may carry at most ``MAX_CARRIED`` glasses, each squat (half its
foot over its height, ``squatness``, at least ``SQUAT``), and keep every
glass it moves inside the aim box; the shoved glass itself needs a
squatness of at least ``PUSHED_SQUAT``. A shove that gained nothing is not
repeated (same glass and heading); a glass is shoved at most ``MAX_TRIES``
times, and not again after a shove that felt more than ``STUCK_FORCE``.

Why the pushed glass needs no tipping limit here: a shove at the lowest
height meets a tall glass with the housing and its foot with the pads,
which carry it. On training tables the glasses that toppled were carried
ones, all with half their foot under a quarter of their height
(docs/glass_push.md, "The shove solution"; the rules and numbers here were
chosen on training tables 0-59 and checked on 60-179). It reads only the
readings and its reports.
"""

from __future__ import annotations

import math

import numpy as np

from experts.glass_push.common import arrays, in_aim_box, room_by_readings
from experts.glass_push.geometric import HEADINGS, _room_count, shove_prediction
from mjlab_tasks.glass_push import BudgetSpent, Examiner, push_request, start_is_clear

TRAVELS = (0.03, 0.02, 0.01)  # m per shove, in order of preference
MAX_CARRIED = 3  # glasses a shove may be predicted to carry
SQUAT = 0.23  # a carried glass's half foot over its height, at least
LOOKS = 3  # looks averaged per decision
PUSHED_SQUAT = 0.16  # the pushed glass's half foot over its height, at least
MAX_TRIES = 2  # shoves of one glass
STUCK_FORCE = 10.0  # N: a shove that felt more leaves that glass alone
# Squatness is judged on readings: a narrower foot and a taller glass by
# about two standard deviations of an averaged reading.
FOOT_MARGIN, HEIGHT_MARGIN = 0.004, 0.003


def squatness(reading: dict) -> float:
  """Half the foot over the height, pessimistic for the reading noise."""
  return (reading["foot"] - FOOT_MARGIN) / 2 / (reading["height"] + HEIGHT_MARGIN)


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


def _allowed(readings, k, new, xy) -> bool:
  moved = [j for j in range(len(readings)) if np.linalg.norm(new[j] - xy[j]) > 1e-9]
  carried = [j for j in moved if j != k]
  return (
    len(carried) <= MAX_CARRIED
    and all(
      readings[j]["standing"] and squatness(readings[j]) >= SQUAT for j in carried
    )
    and all(in_aim_box(new[j]) for j in carried)
  )


def plan(readings: list[dict], in_vain: set, done=frozenset()) -> dict | None:
  """The allowed shove with the most predicted glasses with room, else the
  one most directly towards the group's middle; None when there is none.
  Glasses in ``done`` are not shoved again."""
  _, xy, *_ = arrays(readings)
  standing = [k for k, r in enumerate(readings) if r["standing"]]
  middle = xy[standing].mean(axis=0)
  now = _room_count(readings, xy)
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
        gained = _room_count(readings, new) - now
        u = np.array([math.cos(heading), math.sin(heading)])
        key = (max(gained, 0), -rank, float(u @ inward))
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
          examiner.refuse(r["id"], "no shove carries only squat glasses to room")
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
