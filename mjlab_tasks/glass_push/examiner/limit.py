"""The limit of the tables: a search told the truth. NOT A VALID SOLUTION.

Scoring side only (it holds the table's true world): a greedy search over
pushes tried on copies of the true world (``trials.Trials``). On the scored
world it takes every glass that truly has room; then, while pushes are
left, it tries every candidate push (``trials.candidate_pushes``: each
standing glass, 16 headings, 15 / 30 / 50 mm, a clear start) on copies,
takes on each copy what then truly has room, drops the pushes after which
a glass is toppled or knocked off (takes included: a glass leaning on a
neighbour can fall when the neighbour is taken) or whose descent was
blocked, and keeps the one after which the most glasses were taken with
room (a push that clears the table ends the trials at once); with no such
gain, the one that shrinks the glasses' room shortfall
(``room_shortfall``) most, by at least ``MIN_PROGRESS``; otherwise it stops.
The kept push is replayed on the scored world (ending exactly as on its
copy: the C engine is deterministic) and what has room is taken. One push
of lookahead: the number is what this search found, a reference for valid
solutions, not a proof that no sequence does better.
"""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push.examiner.trials import (
  Trials,
  candidate_pushes,
  on_table,
)
from mjlab_tasks.glass_push.rules.room import (
  CLEARANCE,
  DIRECTIONS,
  FINGER_DEPTH,
  FINGER_WIDTH,
)

NAME = "limit"
LABEL = "limit (not a valid solution: a search told the truth)"
MIN_PROGRESS = 0.002  # m of summed room shortfall a push without a gain must remove


def shortfall(center, widest: float, others, others_widest) -> float:
  """How far glass ``center`` is from room [m]: over closing directions, the
  smallest of the deepest intrusion of another glass's ring (plus the
  clearance) into a finger's place; 0 when it has room."""
  others = np.asarray(others, dtype=float).reshape(-1, 2)
  if others.shape[0] == 0:
    return 0.0
  radii = np.asarray(others_widest, dtype=float) / 2 + CLEARANCE
  d = np.stack([np.cos(DIRECTIONS), np.sin(DIRECTIONS)], -1)  # [D, 2]
  n = np.stack([-d[:, 1], d[:, 0]], -1)
  offset = widest / 2 + CLEARANCE + FINGER_DEPTH / 2
  half = np.array([FINGER_DEPTH / 2, FINGER_WIDTH / 2])
  worst = np.zeros(len(DIRECTIONS))
  for side in (1.0, -1.0):
    rel = others[None] - (np.asarray(center) + side * offset * d)[:, None]  # [D, N, 2]
    local = np.abs(
      np.stack([(rel * d[:, None]).sum(-1), (rel * n[:, None]).sum(-1)], -1)
    )
    gap = np.linalg.norm(np.maximum(local - half, 0.0), axis=-1)
    worst = np.maximum(worst, np.max(radii - gap, axis=1))
  return float(max(worst.min(), 0.0))


def room_shortfall(states: list[dict], glasses) -> float:
  """Summed ``shortfall`` of the standing glasses on the table [m]."""
  here = on_table(states)
  total = 0.0
  for k in here:
    if not states[k]["standing"]:
      continue
    others = [j for j in here if j != k]
    total += shortfall(
      [states[k]["x"], states[k]["y"]],
      glasses[k].widest,
      [[states[j]["x"], states[j]["y"]] for j in others],
      [glasses[j].widest for j in others],
    )
  return total


def value(outcome, glasses) -> tuple[int, float] | None:
  """(glasses taken with room after it on the copy, minus the room
  shortfall of those left); None when the push is not allowed: an error, a
  blocked descent, anything lost (after the takes too)."""
  if outcome.error is not None or outcome.report["blocked"] or outcome.lost:
    return None
  return len(outcome.taken), -room_shortfall(outcome.states, glasses)


def search(trials: Trials, on_trial=None) -> list[dict]:
  """Run the search on ``trials``' scored world; returns one entry per kept
  push (request, what the copy predicted, what the scored world did)."""
  glasses = trials.glasses
  kept = []
  trials.take_all_with_room()
  while trials.pushes_left > 0:
    states = trials.states()
    if not any(states[k]["standing"] for k in on_table(states)):
      break
    now = -room_shortfall(states, glasses)
    left = sum(s["standing"] for s in (states[k] for k in on_table(states)))

    def clears(outcome, left=left) -> bool:  # nothing better to find
      v = value(outcome, glasses)
      return v is not None and v[0] == left

    outcomes = trials.try_pushes(
      candidate_pushes(states, glasses), on_trial, take_after=True, enough=clears
    )
    scored = [(value(o, glasses), o) for o in outcomes]
    scored = [(v, o) for v, o in scored if v is not None]
    if not scored:
      break
    best_value, best = max(scored, key=lambda vo: (vo[0], -vo[1].request["travel"]))
    if best_value[0] == 0 and best_value[1] < now + MIN_PROGRESS:
      break
    report = trials.push(best.request)
    taken = trials.take_all_with_room()
    after = trials.states()  # as on the copy: the push, then the takes
    moved = max(
      math.hypot(a["x"] - b["x"], a["y"] - b["y"])
      for a, b in zip(after, best.states, strict=True)
    )
    kept.append(
      dict(
        request=best.request,
        report=report,
        predicted_taken=best_value[0],
        taken=len(taken),
        tried=len(outcomes),
        allowed=len(scored),
        replay_difference_m=moved,
      )
    )
  return kept


def search_table(table: int, pushes: int, copies: int = 8, on_trial=None) -> dict:
  """The limit on one table: its scored world's record (truth included, as
  ``Exam.records()`` gives) with the search's log under ``"search"``."""
  with Trials(table, pushes, copies) as trials:
    kept = search(trials, on_trial)
    record = trials.world.record(0)
    record["search"] = dict(kept=kept, tried=trials.tried, copies=copies)
  return record
