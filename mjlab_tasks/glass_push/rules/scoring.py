"""Scoring a run after it ends, from the examiner's record (truth included).

Every solution is marked the same way, per table:

- ``room_at_start``: glasses that had room on the drawn table, before any
  action (``room.has_room`` on the true centres and widest rings), and
  ``takeable_without_pushing``: how many could be taken one after another
  with room and no push at all (``tables.takeable_without_pushing``); both
  describe the table, not the solution;
- ``taken_with_room`` / ``taken_without_room``: takes whose glass really had
  room (``room.has_room`` on the true geometry at the moment of the take);
- ``toppled``: glasses lying down at the end (or when taken), on the table,
  in the rack or on the floor;
- ``knocked_off``: glasses that left the table top;
- ``pushes_used`` of ``budget``; ``blocked`` and ``jammed`` actions;
- ``aim_error_mean`` / ``aim_error_max``: distance of the pushed glass from
  the request's aim once everything stopped moving, over actions that named
  a glass and an aim;
- ``refusals`` (with reasons) and ``left_on_table`` (standing, not taken);
- when the refusals were judged (``examiner/judge.py``, the record's
  ``refusal_verdicts``): ``refusals_right`` and ``refusals_wrong``, and
  ``resolved``: glasses taken with room plus rightly refused glasses not
  taken after all. A right
  refusal counts as a result (the glass could not be given room by a push
  within the limits without losing a glass); a wrong one counts like a
  glass left behind. ``taken_with_room`` stays the main mark.
"""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push.rules.room import has_room
from mjlab_tasks.glass_push.rules.tables import takeable_without_pushing


def score_record(record: dict) -> dict:
  """One table's marks from its record (``Exam.records()``)."""
  taken = record["taken"]
  taken_ids = {str(g) for g in taken}
  final = {s["id"]: s for s in record["final"]}
  with_room = sum(1 for t in taken.values() if t["room"])
  toppled = 0
  for gid, state in final.items():
    if gid in taken:
      toppled += not taken[gid]["state"]["standing"]
    else:
      toppled += not state["standing"]
  knocked_off = sum(1 for s in final.values() if s["where"] == "off")
  left = sum(1 for s in final.values() if s["where"] == "table" and s["standing"])
  aims = [a["aim_error"] for a in record["actions"] if "aim_error" in a]
  xy = np.array([[g["x"], g["y"]] for g in record["glasses"]]).reshape(-1, 2)
  widest = np.array([g["widest"] for g in record["glasses"]])
  room_at_start = sum(
    has_room(xy[i], widest[i], np.delete(xy, i, 0), np.delete(widest, i))
    for i in range(len(widest))
  )
  reports = [a["report"] for a in record["actions"]]
  judged = record.get("refusal_verdicts")
  right = right_left = None
  if judged is not None:
    right = sum(v["right"] for v in judged.values())
    # A glass refused rightly and then taken anyway is counted once.
    right_left = sum(v["right"] for g, v in judged.items() if str(g) not in taken_ids)
  return {
    "table": record["table"],
    "glasses": len(record["glasses"]),
    "room_at_start": int(room_at_start),
    "takeable_without_pushing": len(takeable_without_pushing(xy, widest)),
    "taken_with_room": with_room,
    "taken_without_room": len(taken) - with_room,
    "toppled": toppled,
    "knocked_off": knocked_off,
    "left_on_table": left,
    "pushes_used": record["pushes_used"],
    "budget": record["budget"],
    "blocked": sum(r["blocked"] for r in reports),
    "jammed": sum(r["jammed"] for r in reports),
    "aim_error_mean": float(np.mean(aims)) if aims else None,
    "aim_error_max": float(np.max(aims)) if aims else None,
    "refusals": len(record["refused"]),
    "refusal_reasons": {str(k): v for k, v in record["refused"].items()},
    "refusals_right": right,
    "refusals_wrong": None if judged is None else len(judged) - right,
    "resolved": None if judged is None else with_room + right_left,
    "sim_time_s": record["sim_time"],
  }


_SUMMED = (
  "glasses",
  "room_at_start",
  "takeable_without_pushing",
  "taken_with_room",
  "taken_without_room",
  "toppled",
  "knocked_off",
  "left_on_table",
  "pushes_used",
  "budget",
  "blocked",
  "jammed",
  "refusals",
)


_JUDGED = ("refusals_right", "refusals_wrong", "resolved")


def summarize(rows: list[dict]) -> dict:
  """Totals over tables; the aim error is the mean over every aimed action."""
  total = {k: int(sum(r[k] for r in rows)) for k in _SUMMED}
  for k in _JUDGED:  # only when every table's refusals were judged
    values = [r.get(k) for r in rows]
    total[k] = None if None in values else int(sum(values))
  total["tables"] = len(rows)
  means = [r["aim_error_mean"] for r in rows if r["aim_error_mean"] is not None]
  total["aim_error_mean_of_tables"] = float(np.mean(means)) if means else None
  total["taken_with_room_rate"] = (
    total["taken_with_room"] / total["glasses"] if total["glasses"] else 0.0
  )
  return total


def _mm(value) -> str:
  return "-" if value is None or not math.isfinite(value) else f"{1000 * value:.1f}"


def _refusals(r: dict) -> str:
  if r.get("refusals_right") is None:
    return f"{r['refusals']}"
  return f"{r['refusals']} ({r['refusals_right']} right, {r['refusals_wrong']} wrong)"


def markdown(solution: str, rows: list[dict], total: dict) -> str:
  """A Markdown table of one solution's marks, one row per table + total."""
  head = (
    "| table | glasses | room at start | takeable without pushing | taken with room | taken without room | toppled | "
    "knocked off | left standing | pushes | blocked | jammed | aim error mean "
    "[mm] | aim error max [mm] | refusals |"
  )
  lines = [f"## Solution `{solution}`", "", head, "|" + " --- |" * 15]
  for r in rows:
    lines.append(
      f"| {r['table']} | {r['glasses']} | {r['room_at_start']} | "
      f"{r['takeable_without_pushing']} | {r['taken_with_room']} | "
      f"{r['taken_without_room']} | {r['toppled']} | {r['knocked_off']} | "
      f"{r['left_on_table']} | {r['pushes_used']}/{r['budget']} | {r['blocked']} | "
      f"{r['jammed']} | {_mm(r['aim_error_mean'])} | {_mm(r['aim_error_max'])} | "
      f"{_refusals(r)} |"
    )
  t = total
  lines.append(
    f"| **all {t['tables']}** | {t['glasses']} | {t['room_at_start']} | "
    f"{t['takeable_without_pushing']} | {t['taken_with_room']} | "
    f"{t['taken_without_room']} | {t['toppled']} | {t['knocked_off']} | "
    f"{t['left_on_table']} | {t['pushes_used']}/{t['budget']} | {t['blocked']} | "
    f"{t['jammed']} | {_mm(t['aim_error_mean_of_tables'])} | | {_refusals(t)} |"
  )
  return "\n".join(lines) + "\n"
