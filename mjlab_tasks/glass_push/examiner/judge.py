"""Refusals judged against the truth, after the run (the scoring side).

A solution may refuse a glass with a reason; the specification counts a
refusal as a result. The judge replays the run's actions and takes on a
fresh C MuJoCo world of the table (``trials.Trials``: deterministic, so it
passes through the run's own states; the final states are compared with the
record's) up to the moment of each refusal, and there asks, on copies of the
true world, what the refused glass allowed:

- it had room (truth): the refusal is **wrong**;
- some candidate push of it (``trials.candidate_pushes``: 16 headings,
  15 / 30 / 50 mm, a clear start) gave it room with nothing toppled or
  knocked off and no blocked descent: **wrong** (the push is named);
- otherwise **right**: no clear place to put the hand down, every push that
  met it toppled or knocked off a glass, or no push within the limits gave
  it room.

A glass no longer standing on the table when refused is judged right (there
is nothing to take). See docs/glass_push.md, "Refusals judged".
"""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push.examiner.trials import (
  Trials,
  candidate_pushes,
  room_now,
)


def events(record: dict) -> list[tuple]:
  """The run's actions and takes in the order they were made: ("act",
  action index) and ("take", glass id); a take made after ``a`` actions
  comes before action ``a``."""
  takes = list(record["taken"].items())
  out, t = [], 0
  for a in range(len(record["actions"]) + 1):
    while t < len(takes) and takes[t][1]["after_action"] == a:
      out.append(("take", int(takes[t][0])))
      t += 1
    if a < len(record["actions"]):
      out.append(("act", a))
  return out


def _replay(trials: Trials, record: dict, event: tuple) -> None:
  kind, ref = event
  if kind == "take":
    k = [g.id for g in trials.glasses].index(ref)
    trials.take(k)
    return
  entry = record["actions"][ref]
  if entry["kind"] == "push":
    request = ("push", entry["request"])
  else:
    request = ("follow", np.asarray(entry["request"]), entry["glass"], entry["aim"])
  (reply,) = trials.world.act({0: request}).values()
  if reply[0] != "ok":
    raise RuntimeError(f"table {record['table']}: replaying action {ref}: {reply[2]}")


def verdicts_at(trials: Trials, refused: list[int], on_trial=None) -> dict[int, dict]:
  """Verdicts for the glasses ``refused`` (ids) on the scored world as it is."""
  glasses = trials.glasses
  states = trials.states()
  index = {g.id: k for k, g in enumerate(glasses)}
  out, ask = {}, []
  for gid in refused:
    k = index[gid]
    s = states[k]
    if s["where"] != "table" or not s["standing"]:
      out[gid] = dict(right=True, why="not standing on the table")
    elif room_now(states, glasses, k):
      out[gid] = dict(right=False, why="it had room")
    else:
      ask.append(gid)
  requests = candidate_pushes(states, glasses, only=set(ask))
  outcomes = trials.try_pushes(requests, on_trial)
  for gid in ask:
    k = index[gid]
    mine = [o for o in outcomes if o.request["glass"] == gid]
    gave = [
      o
      for o in mine
      if o.error is None
      and not o.report["blocked"]
      and not o.lost
      and room_now(o.states, glasses, k)
    ]
    met = [o for o in mine if o.report is not None and o.report["touched"] is not None]
    if gave:
      best = min(gave, key=lambda o: o.request["travel"])
      out[gid] = dict(right=False, why="a push gave it room", push=best.request)
    elif not mine:
      out[gid] = dict(right=True, why="no clear place to put the hand down")
    elif met and all(o.lost for o in met):
      out[gid] = dict(
        right=True, why="every push that met it toppled or knocked off a glass"
      )
    else:
      out[gid] = dict(right=True, why="no push within the limits gave it room")
    out[gid]["tried"] = len(mine)
    out[gid]["met"] = len(met)  # trial pushes that touched something
    out[gid]["toppled_it"] = sum(not o.states[k]["standing"] for o in met)
  return out


def judge_record(record: dict, copies: int = 8, on_trial=None, physics=None) -> dict:
  """Every refusal of one table's record (C engine) judged; returns
  {"verdicts": {glass id: {"right", "why", ...}}, "replay_difference_m"}:
  how far the replay's final glasses ended from the record's (0 on the C
  engine; a Warp run's record replays on C only approximately)."""
  moments = record.get("refused_at", {})
  if not record["refused"]:
    return dict(verdicts={}, replay_difference_m=0.0)
  if set(moments) != {int(k) for k in record["refused"]}:
    raise ValueError(f"table {record['table']}: the record lacks refusal moments")
  order = events(record)
  by_moment: dict[tuple, list[int]] = {}
  for gid, m in moments.items():
    by_moment.setdefault((m["actions"], m["takes"]), []).append(int(gid))
  verdicts: dict[int, dict] = {}
  with Trials(record["table"], record["budget"], copies, physics) as trials:
    done = acts = takes = 0
    for a, t in sorted(by_moment):
      while (acts, takes) != (a, t):
        if done >= len(order):
          raise ValueError(
            f"table {record['table']}: a refusal moment is not in the run"
          )
        kind = order[done][0]
        _replay(trials, record, order[done])
        acts, takes, done = acts + (kind == "act"), takes + (kind == "take"), done + 1
      verdicts |= verdicts_at(trials, by_moment[(a, t)], on_trial)
    for event in order[done:]:
      _replay(trials, record, event)
    final = {s["id"]: s for s in record["final"]}
    difference = max(
      math.hypot(s["x"] - final[s["id"]]["x"], s["y"] - final[s["id"]]["y"])
      for s in trials.states()
    )
  return dict(verdicts=verdicts, replay_difference_m=float(difference))
