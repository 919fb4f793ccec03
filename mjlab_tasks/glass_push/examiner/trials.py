"""Pushes tried on copies of one table's true world (the scoring side only).

``Trials`` holds one table as a ``GlassWorld`` of ``1 + copies`` C MuJoCo
environments: environment 0 is the scored world, the others are its copies,
restored from it before every batch of trial pushes (each world's whole
C MuJoCo data, the hand's command and the arm's targets, the takes and the
budget left). A trial push on a copy therefore ends bitwise as the same
push on the scored world would (tested). The search-based limit
(``limit.py``) and the refusal judge (``judge.py``) use it; solutions never
do: it holds the truth. See docs/glass_push.md, "The limit of the tables".
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from mjlab_tasks.glass_push import hidden
from mjlab_tasks.glass_push.rules.pushes import push_request, start_is_clear

# The candidate pushes "within the limits": every standing glass, 16
# headings, the geometric solution's shove travels, the hand coming down
# 15 mm behind the glass where its footprint misses every other glass.
HEADINGS = np.radians(np.arange(0.0, 360.0, 22.5))
TRAVELS = (0.015, 0.03, 0.05)


@dataclass
class Outcome:
  """A trial push's result on a copy: the report (or the request's error),
  the glasses then taken with room (``take_after``) and the true glass
  states after all that."""

  request: dict
  report: dict | None
  states: list[dict]
  error: str | None = None
  taken: list[int] = field(default_factory=list)  # with ``take_after``

  @property
  def lost(self) -> int:
    """Glasses toppled or knocked off (taken ones count if toppled)."""
    return sum(
      (s["where"] == "off") or (s["where"] == "table" and not s["standing"])
      for s in self.states
    )


def true_readings(states: list[dict], glasses) -> list[dict]:
  """What ``look()`` would say without noise: every glass on the table, at
  its body origin (a standing glass's foot centre)."""
  return [
    {
      "id": g.id,
      "x": s["x"],
      "y": s["y"],
      "height": g.height,
      "widest": g.widest,
      "foot": g.foot,
      "standing": s["standing"],
    }
    for s, g in zip(states, glasses, strict=True)
    if s["where"] == "table"
  ]


def candidate_pushes(states: list[dict], glasses, only=None) -> list[dict]:
  """Push requests (``rules.pushes.push_request``) for every standing glass
  on the table (or the ids in ``only``), every heading and travel, whose
  start is clear of the other glasses and in reach (true readings)."""
  readings = true_readings(states, glasses)
  out = []
  for reading in readings:
    if not reading["standing"] or (only is not None and reading["id"] not in only):
      continue
    for heading in HEADINGS:
      for travel in TRAVELS:
        request = push_request(reading, float(heading), travel)
        if start_is_clear(request, readings):
          out.append(request)
  return out


def on_table(states: list[dict]) -> list[int]:
  """Indices of the glasses still on the table (standing or not)."""
  return [k for k, s in enumerate(states) if s["where"] == "table"]


def room_now(states: list[dict], glasses, k: int) -> bool:
  """``has_room`` for glass ``k`` against the others on the table (truth)."""
  return hidden.had_room(k, states, glasses)


class Trials:
  """One table's scored world and its copies (C engine, compiled hand).

  Args:
    table: the table number.
    pushes: the scored world's push budget.
    copies: worlds that try pushes in parallel (the engine's threads).
    physics: the private physics fixture (tests).
  """

  def __init__(self, table: int, pushes: int, copies: int = 8, physics=None):
    from mjlab_tasks.glass_push.examiner.world import GlassWorld

    if copies < 1:
      raise ValueError(f"copies must be at least 1, got {copies}")
    self.world = GlassWorld([int(table)] * (1 + copies), pushes, physics)
    if not self.world.hand.compiled:
      raise RuntimeError("trials need the compiled hand (C engine with a compiler)")
    self.table, self.copies = int(table), int(copies)
    self.glasses = self.world.glasses[0]
    self.tried = 0

  # -- the scored world --------------------------------------------------------------

  def states(self, i: int = 0) -> list[dict]:
    return self.world.glass_states(i)

  @property
  def pushes_left(self) -> int:
    return int(self.world.pushes_left[0])

  def push(self, request: dict) -> dict:
    """A push on the scored world; returns its report."""
    (reply,) = self.world.act({0: ("push", request)}).values()
    if reply[0] != "ok":
      raise ValueError(reply[2])
    return reply[1]

  def take(self, k: int) -> None:
    reply = self.world.take({0: self.glasses[k].id})[0]
    if reply[0] != "ok":
      raise ValueError(reply[2])

  def take_all_with_room(self) -> list[int]:
    """Take every glass of the scored world that truly has room, one at a
    time, until none has; returns their indices."""
    return self._take_all([0])[0]

  # -- copies ----------------------------------------------------------------------------

  def _restore(self, rows: list[int]) -> None:
    """Copies ``rows`` become the scored world: state, hand, takes, budget."""
    w, hand = self.world, self.world.hand
    w.sim.copy_world(0, rows)
    for j in rows:
      hand.cmd[j], hand.heading[j] = hand.cmd[0], hand.heading[0]
      hand._params[j] = hand._params[0]
      hand.steps[j], hand.peak[j] = hand.steps[0], hand.peak[0]
      hand.rec[j] = []
      w.pushes_left[j] = w.pushes_left[0]
      w.taken[j] = copy.deepcopy(w.taken[0])
      w.actions[j] = []

  def try_pushes(
    self, requests: list[dict], progress=None, take_after=False, enough=None
  ) -> list[Outcome]:
    """Requests tried once each, each on a fresh copy of the scored world
    (``copies`` at a time); the scored world does not change.

    ``take_after``: then, on each copy, take every glass that truly has room
    until none has (``Outcome.taken``), as the scored world would: a glass
    leaning on a neighbour can fall when the neighbour goes. ``enough``
    (outcome -> bool): stop after the batch where an outcome satisfies it."""
    out: list[Outcome] = []
    for first in range(0, len(requests), self.copies):
      batch = requests[first : first + self.copies]
      rows = list(range(1, 1 + len(batch)))
      self._restore(rows)
      replies = self.world.act(
        {j: ("push", r) for j, r in zip(rows, batch, strict=True)}
      )
      ok = {j for j in rows if replies[j][0] == "ok"}
      taken = self._take_all(sorted(ok)) if take_after else {}
      for j, r in zip(rows, batch, strict=True):
        out.append(
          Outcome(
            request=r,
            report=replies[j][1] if j in ok else None,
            states=self.states(j),
            error=None if j in ok else replies[j][2],
            taken=taken.get(j, []),
          )
        )
      self.tried += len(batch)
      if progress is not None:
        progress(len(batch))
      if enough is not None and any(enough(o) for o in out[-len(batch) :]):
        break
    return out

  def _take_all(self, rows: list[int]) -> dict[int, list[int]]:
    """On worlds ``rows`` (copies, or the scored world 0), rounds of takes (one glass per copy per round,
    together) of glasses that truly have room, until none has; returns the
    indices taken per copy."""
    taken: dict[int, list[int]] = {j: [] for j in rows}
    while True:
      asks = {}
      for j in rows:
        states = self.states(j)
        ready = [k for k in on_table(states) if room_now(states, self.glasses, k)]
        if ready:
          asks[j] = ready[0]
      if not asks:
        return taken
      replies = self.world.take({j: self.glasses[k].id for j, k in asks.items()})
      for reply in replies.values():
        if reply[0] != "ok":
          raise ValueError(reply[2])
      for j, k in asks.items():
        taken[j].append(k)

  def close(self) -> None:
    self.world.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
