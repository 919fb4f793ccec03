"""Geometric solution: plans pushes from the readings, estimates friction
from the force readings and respects the tipping limit.

Loop: look; take every standing glass that has room (by the readings, with a
margin for their noise); otherwise plan the shortest push that gives one
glass room without sweeping it into another, and push. Before pushing it
checks the tipping limit: a quasi-static push at height h tips a glass of
foot half-width b first when h > b / mu. The height h is the hand's own
number: the pads' top edge for a glass lower than the housing, else the
housing's lower edge. mu is unknown: the solution starts from a pessimistic
prior and replaces it with the median of peak / (m g) over its clean pushes,
m estimated from the glass's measured size. A glass over the limit, or with
no safe push, is refused with the reason.
"""

from __future__ import annotations

import math

import numpy as np

from evaluators.glass_push import HAND, BudgetSpent, Examiner
from experts.glass_push.common import (
  arrays,
  in_aim_box,
  push_request,
  room_by_readings,
  start_is_clear,
)

G = 9.81
MU_PRIOR = 0.5  # before any evidence: a pessimistic guess for glass on a table
SAFETY = 1.2  # push only when h * SAFETY <= b / mu
TRAVELS = (0.015, 0.025, 0.035, 0.05)
HEADINGS = np.radians(np.arange(0.0, 360.0, 22.5))
SWEEP_GAP = 0.004  # the pushed glass's path keeps this clear of others
MAX_TRIES = 2  # pushes per glass before it is refused


def mass_estimate(reading: dict) -> float:
  """A thin-walled glass of the measured size (2 mm walls, 4 mm base)."""
  side = math.pi * reading["widest"] * reading["height"] * 0.002
  base = math.pi * (reading["foot"] / 2) ** 2 * 0.004
  return 2500.0 * (side + base)


def contact_height(reading: dict) -> float:
  """Height of the hand's lowest leading edge that meets this glass."""
  housing = HAND["lowest_tcp_z"] + HAND["housing_above_tcp"]
  if reading["height"] > housing:
    return housing
  return HAND["lowest_tcp_z"] + HAND["pad_half_z"]


class FrictionEstimate:
  """mu from force readings: peak / (estimated mass * g) of clean pushes."""

  def __init__(self):
    self.samples: list[float] = []

  def add(self, reading: dict, report: dict) -> None:
    if report["blocked"] or report["jammed"] or report["touched"] is None:
      return
    if report["pushed"] < 0.008:
      return
    self.samples.append(report["peak"] / (mass_estimate(reading) * G))

  @property
  def mu(self) -> float:
    return float(np.median(self.samples)) if self.samples else MU_PRIOR


def tipping_limit_ok(reading: dict, mu: float) -> bool:
  return contact_height(reading) * SAFETY <= (reading["foot"] / 2) / mu


def _sweep_clear(readings, k, heading, travel) -> bool:
  _, xy, widest, *_ = arrays(readings)
  u = np.array([math.cos(heading), math.sin(heading)])
  rel = xy - xy[k]
  along = np.clip(rel @ u, 0.0, travel)
  dist = np.linalg.norm(rel - along[:, None] * u, axis=1)
  need = widest / 2 + widest[k] / 2 + SWEEP_GAP
  others = np.arange(len(readings)) != k
  return bool(np.all(dist[others] >= need[others]))


def _min_gap(readings, k, xy) -> float:
  _, centres, widest, *_ = arrays(readings)
  d = np.linalg.norm(centres - xy, axis=1) - widest / 2 - widest[k] / 2
  d[k] = np.inf
  return float(d.min()) if len(d) > 1 else np.inf


def plan(readings: list[dict], k: int) -> dict | None:
  """The shortest safe push that gives reading k room; else the safe push
  that widens its smallest gap most (by at least 8 mm); else None."""
  reading = readings[k]
  centre = np.array([reading["x"], reading["y"]])
  best, best_gap = None, _min_gap(readings, k, centre) + 0.008
  for travel in TRAVELS:
    for heading in HEADINGS:
      u = np.array([math.cos(heading), math.sin(heading)])
      new = centre + travel * u
      if not in_aim_box(new) or not _sweep_clear(readings, k, heading, travel):
        continue
      request = push_request(reading, float(heading), travel)
      if not start_is_clear(request, readings):
        continue
      if room_by_readings(readings, k, new):
        return request
      gap = _min_gap(readings, k, new)
      if gap > best_gap:
        best, best_gap = request, gap
  return best


def solve(examiner: Examiner) -> None:
  friction = FrictionEstimate()
  tries: dict[int, int] = {}
  refused: set[int] = set()
  while True:
    readings = examiner.look()
    took = False
    for k, reading in enumerate(readings):
      if reading["standing"] and room_by_readings(readings, k):
        examiner.take(reading["id"])
        took = True
        break  # one at a time: the next look sees the new room
    if took:
      continue
    # Least tipping risk first: the first pushes teach the friction.
    order = sorted(
      (k for k, r in enumerate(readings) if r["standing"] and r["id"] not in refused),
      key=lambda k: contact_height(readings[k]) / readings[k]["foot"],
    )
    pushed = False
    for k in order:
      reading = readings[k]
      gid = reading["id"]
      mu = friction.mu
      if not tipping_limit_ok(reading, mu):
        if friction.samples:  # judged with evidence: refuse for good
          h, b = contact_height(reading), reading["foot"] / 2
          examiner.refuse(
            gid,
            f"tips before it slides: push height {h * 1000:.0f} mm x {SAFETY} "
            f"> b/mu = {b * 1000:.0f} mm / {mu:.2f}",
          )
          refused.add(gid)
        continue
      if tries.get(gid, 0) >= MAX_TRIES:
        examiner.refuse(gid, f"{MAX_TRIES} pushes did not make room")
        refused.add(gid)
        continue
      request = plan(readings, k)
      if request is None:
        continue
      tries[gid] = tries.get(gid, 0) + 1
      try:
        report = examiner.push(request)
      except BudgetSpent:
        return
      friction.add(reading, report)
      pushed = True
      break
    if not pushed:
      for reading in readings:
        if reading["standing"] and reading["id"] not in refused:
          examiner.refuse(reading["id"], "no safe push gives it room")
      return
