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

On a packed crowd no clean push exists (the hand can only come down outside
the crowd, so every push drives a glass into its neighbours). Then, before
any evidence, it makes one 10 mm probe push to measure the friction (too
short to topple a glass that tips instead of sliding), and afterwards
"shoves": pushes into the crowd that a first-order prediction (the glasses
met are carried along the contact normal) says give more glasses room,
within the tipping limit of the pushed glass and of every glass it carries.
"""

from __future__ import annotations

import math

import numpy as np

from experts.glass_push.common import (
  arrays,
  in_aim_box,
  push_request,
  room_by_readings,
  start_is_clear,
)
from mjlab_tasks.glass_push import HAND, BudgetSpent, Examiner

G = 9.81
MU_PRIOR = 0.5  # before any evidence: a pessimistic guess for glass on a table
SAFETY = 1.2  # push only when h * SAFETY <= b / mu
TRAVELS = (0.015, 0.025, 0.035, 0.05)
HEADINGS = np.radians(np.arange(0.0, 360.0, 22.5))
SWEEP_GAP = 0.004  # the pushed glass's path keeps this clear of others
MAX_TRIES = 2  # pushes per glass before it is refused
SHOVES = (0.015, 0.03, 0.05)  # travels of a shove into the crowd
PROBE = 0.010  # travel of the friction probe (FrictionEstimate needs 8 mm)
MAX_SHOVES = 8  # shoves per table


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

  def add(self, reading: dict, report: dict, mass: float | None = None) -> None:
    """``mass``: the estimated mass the push moved (default: the glass's
    own); a shove that carries neighbours counts theirs too."""
    if report["blocked"] or report["jammed"] or report["touched"] is None:
      return
    if report["pushed"] < 0.008:
      return
    mass = mass_estimate(reading) if mass is None else mass
    self.samples.append(report["peak"] / (mass * G))

  @property
  def mu(self) -> float:
    return float(np.median(self.samples)) if self.samples else MU_PRIOR


class Sensed:
  """What the planner knows: the examiner's noisy readings and the friction
  estimated from its own pushes (the oracle swaps in the truth)."""

  def __init__(self, examiner: Examiner):
    self.examiner = examiner
    self.friction = FrictionEstimate()

  def look(self) -> list[dict]:
    return self.examiner.look()

  @property
  def mu(self) -> float:
    return self.friction.mu

  @property
  def known(self) -> bool:
    """Whether mu rests on evidence (else a probe first, no refusals yet)."""
    return bool(self.friction.samples)

  def learn(self, reading: dict, report: dict, mass: float | None = None) -> None:
    self.friction.add(reading, report, mass)

  def mu_text(self) -> str:
    """mu as a refusal reason gives it."""
    return f"{self.mu:.2f}"


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


def shove_prediction(readings, k, heading, travel) -> np.ndarray:
  """First-order quasi-static shove: glass k moves ``travel`` along
  ``heading``; each glass its path meets is carried along the contact normal
  by the rest of the travel times the normal's share of the heading (one
  level: what those glasses meet is ignored). Predicted centres [N, 2]."""
  _, xy, widest, *_ = arrays(readings)
  u = np.array([math.cos(heading), math.sin(heading)])
  new = xy.copy()
  new[k] = xy[k] + travel * u
  for j in range(len(readings)):
    if j == k:
      continue
    rel = xy[j] - xy[k]
    along = float(rel @ u)
    lateral = abs(float(rel[0] * u[1] - rel[1] * u[0]))
    touch = (widest[j] + widest[k]) / 2
    if along <= 0 or lateral >= touch:
      continue
    hit = along - math.sqrt(touch**2 - lateral**2)  # travel at first contact
    if hit >= travel:
      continue
    normal = xy[j] - (xy[k] + max(hit, 0.0) * u)
    normal /= np.linalg.norm(normal)
    new[j] = xy[j] + (travel - max(hit, 0.0)) * max(float(normal @ u), 0.0) * normal
  return new


def _room_count(readings, centres) -> int:
  moved = [
    dict(r, x=float(p[0]), y=float(p[1]))
    for r, p in zip(readings, centres, strict=True)
  ]
  return sum(r["standing"] and room_by_readings(moved, j) for j, r in enumerate(moved))


def plan_shove(readings, refused, mu, probe) -> tuple[dict, float] | None:
  """When no clean push exists: the shove that the first-order prediction
  says gives the most glasses room (then the shortest), within the hand's
  tipping limit for the shoved glass and, for every glass it carries, the
  limit at the height where the two glasses meet (taken as the lower of
  their tops; both pessimistic).

  ``probe`` (no friction evidence yet): a PROBE push instead, to measure
  the friction: 10 mm of travel, which tilts a glass that tips instead of
  sliding by at most about 10 mm / 79.5 mm (7 degrees), far short of
  toppling it, so it falls back; the glass that carries fewest others.
  Returns (request, estimated mass it moves) or None."""
  now = _room_count(readings, arrays(readings)[1])
  best, best_key = None, None
  _, xy, *_ = arrays(readings)
  for k, reading in enumerate(readings):
    if not reading["standing"] or reading["id"] in refused:
      continue
    if not probe and not tipping_limit_ok(reading, mu):
      continue
    for travel in (PROBE,) if probe else SHOVES:
      for heading in HEADINGS:
        request = push_request(reading, float(heading), travel)
        if not in_aim_box(request["aim"]) or not start_is_clear(request, readings):
          continue
        new = shove_prediction(readings, k, float(heading), travel)
        carried = [
          j
          for j in range(len(readings))
          if j != k and np.linalg.norm(new[j] - xy[j]) > 1e-9
        ]
        if any(not readings[j]["standing"] for j in carried):
          continue
        if probe:
          key = (-len(carried), -contact_height(reading) / reading["foot"])
        else:
          if any(
            min(reading["height"], readings[j]["height"]) * SAFETY
            > (readings[j]["foot"] / 2) / mu
            for j in carried
          ):
            continue
          gained = _room_count(readings, new) - now
          if gained <= 0:
            continue
          key = (gained, -travel, -len(carried))
        if best_key is None or key > best_key:
          mass = mass_estimate(reading) + sum(
            mass_estimate(readings[j]) for j in carried
          )
          best, best_key = (request, mass), key
  return best


def solve(examiner: Examiner, sensed: Sensed | None = None) -> None:
  """Plan and push on ``examiner`` from ``sensed`` (default: its readings
  and the friction estimated from the pushes)."""
  sensed = Sensed(examiner) if sensed is None else sensed
  tries: dict[int, int] = {}
  refused: set[int] = set()
  shoves = 0
  while True:
    readings = sensed.look()
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
      mu = sensed.mu
      if not tipping_limit_ok(reading, mu):
        if sensed.known:  # judged with evidence: refuse for good
          h, b = contact_height(reading), reading["foot"] / 2
          examiner.refuse(
            gid,
            f"tips before it slides: push height {h * 1000:.0f} mm x {SAFETY} "
            f"> b/mu = {b * 1000:.0f} mm / {sensed.mu_text()}",
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
      sensed.learn(reading, report)
      pushed = True
      break
    if not pushed and shoves < MAX_SHOVES:
      probe = not sensed.known
      shove = plan_shove(readings, refused, sensed.mu, probe)
      if shove is not None:
        request, mass = shove
        shoves += 1
        try:
          report = examiner.push(request)
        except BudgetSpent:
          return
        k = next(i for i, r in enumerate(readings) if r["id"] == request["glass"])
        sensed.learn(readings[k], report, mass)
        continue
    if not pushed:
      for reading in readings:
        if reading["standing"] and reading["id"] not in refused:
          examiner.refuse(reading["id"], "no safe push gives it room")
      return
