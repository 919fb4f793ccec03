"""The room rule (``room.has_room``) and the scoring (``scoring.score_record``)
on worked examples computed by hand. Pure Python, no physics.

Numbers for a 70 mm glass (room.py): each finger's footprint is 16 mm deep
and 25 mm wide, its centre 35 + 5 + 8 = 48 mm from the glass's centre along
the closing direction, so it spans 40 to 56 mm out and +-12.5 mm across. A
70 mm neighbour blocks it when its centre is nearer than 35 + 5 = 40 mm to
that rectangle.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mjlab_tasks.glass_push.rules import room
from mjlab_tasks.glass_push.rules.room import has_room
from mjlab_tasks.glass_push.rules.scoring import markdown, score_record, summarize

W = 0.07
ORIGIN = np.zeros(2)


def only(monkeypatch, degrees: float) -> None:
  """Judge one closing direction only."""
  monkeypatch.setattr(room, "DIRECTIONS", np.radians([degrees]))


def test_a_lone_glass_has_room_unless_wider_than_the_opening():
  """110 mm opening: widest + 2 x 5 mm must fit. 99 mm + 10 = 109 fits,
  101 mm + 10 = 111 does not, even with nothing around."""
  none = np.zeros((0, 2))
  assert has_room(ORIGIN, W, none, [])
  assert has_room(ORIGIN, 0.099, none, [])
  assert not has_room(ORIGIN, 0.101, none, [])
  assert not has_room(ORIGIN, 0.101, [[1.0, 1.0]], [W])


def test_both_fingers_must_fit_room_on_one_side_is_not_enough(monkeypatch):
  """A neighbour 2 mm off on +x (centre at 72 mm). Closing along x: the +x
  finger spans 40-56 mm, 72 - 56 = 16 mm < 40 mm from the neighbour's
  centre: blocked, although the -x finger is free. Closing along y: the
  fingers at y = +-48 mm span x +-12.5 mm; the neighbour's centre is
  hypot(72 - 12.5, 40) = 71.7 mm > 40 mm from each: room."""
  others, widest = [[0.072, 0.0]], [W]
  only(monkeypatch, 0)
  assert not has_room(ORIGIN, W, others, widest)
  only(monkeypatch, 90)
  assert has_room(ORIGIN, W, others, widest)
  monkeypatch.undo()
  assert has_room(ORIGIN, W, others, widest)  # some direction works


def test_the_clearance_threshold_along_one_direction(monkeypatch):
  """Closing along x with a neighbour on +x: it must keep 40 mm from the
  finger's outer edge at 56 mm, so its centre at 97 mm fits and at 95 mm
  does not."""
  only(monkeypatch, 0)
  assert has_room(ORIGIN, W, [[0.097, 0.0]], [W])
  assert not has_room(ORIGIN, W, [[0.095, 0.0]], [W])
  # A narrower neighbour (50 mm: 25 + 5 = 30 mm) fits from 56 + 30 = 86 mm.
  assert has_room(ORIGIN, W, [[0.087, 0.0]], [0.05])
  assert not has_room(ORIGIN, W, [[0.085, 0.0]], [0.05])


def test_a_ring_of_six_leaves_no_direction():
  """Six neighbours 2 mm off all round (centres 72 mm away, every 60
  degrees). Any finger direction is within 30 degrees of a neighbour: the
  finger's centre (48 mm out) is then at most sqrt(48^2 + 72^2 - 2 48 72
  cos 30) = 38.8 mm from that neighbour's centre, under 40 mm even before
  the rectangle's size: no room."""
  a = np.radians(np.arange(0, 360, 60) + 7.0)
  ring = 0.072 * np.stack([np.cos(a), np.sin(a)], 1)
  worst = math.sqrt(0.048**2 + 0.072**2 - 2 * 0.048 * 0.072 * math.cos(math.pi / 6))
  assert worst == pytest.approx(0.0388, abs=1e-4) and worst < 0.040
  assert not has_room(ORIGIN, W, ring, [W] * 6)
  # Without one of the six the opposite finger is still blocked; without
  # two opposite ones, closing along their line: each of the four left is
  # 60 degrees off, 72 cos 60 = 36 mm along and 72 sin 60 = 62.4 mm across,
  # so hypot(40 - 36, 62.4 - 12.5) = 50.0 mm > 40 mm from the finger: room.
  assert not has_room(ORIGIN, W, ring[1:], [W] * 5)
  assert has_room(ORIGIN, W, ring[[1, 2, 4, 5]], [W] * 4)


def glass(gid, x, y):
  return dict(id=gid, kind="tumbler", x=x, y=y, height=0.1, widest=W, foot=0.06)


def state(gid, where="table", standing=True):
  return dict(id=gid, x=0.0, y=0.0, z=0.0, upright=1.0, standing=standing, where=where)


def constructed_record() -> dict:
  """Six glasses 200 mm apart (all have room at the start, all takeable).
  0: taken with room, standing. 1: taken without room, lying when taken
  (it stands in the rack afterwards). 2: knocked off, lying on the floor.
  3: knocked off, standing on the floor. 4: toppled on the table. 5: left
  standing, refused. Three actions: aim errors 10 and 30 mm and one
  without an aim; one blocked, one jammed."""
  glasses = [glass(k, 0.3 + 0.2 * (k % 3), -0.3 + 0.2 * (k // 3)) for k in range(6)]
  final = [
    state(0, "rack"),
    state(1, "rack"),
    state(2, "off", standing=False),
    state(3, "off"),
    state(4, "table", standing=False),
    state(5),
  ]
  report = dict(blocked=False, touched=0.01, jammed=False, peak=1.0, pushed=0.02)
  actions = [
    dict(report=report, aim_error=0.01),
    dict(report=report | {"jammed": True}, aim_error=0.03),
    dict(report=report | {"blocked": True, "touched": None}),
  ]
  return dict(
    table=10_001,
    budget=5,
    pushes_used=3,
    glasses=glasses,
    final=final,
    taken={
      0: dict(room=True, state=state(0)),
      1: dict(room=False, state=state(1, standing=False)),
    },
    refused={5: "tips before it slides"},
    actions=actions,
    sim_time=12.5,
  )


def test_scoring_of_toppled_knocked_off_and_taken_without_room():
  row = score_record(constructed_record())
  assert row == {
    "table": 10_001,
    "glasses": 6,
    "room_at_start": 6,
    "takeable_without_pushing": 6,
    "taken_with_room": 1,
    "taken_without_room": 1,
    # 1 (lying when taken, though standing in the rack), 2 (off, lying),
    # 4 (lying on the table); 3 stands on the floor: knocked off only.
    "toppled": 3,
    "knocked_off": 2,
    "left_on_table": 1,
    "pushes_used": 3,
    "budget": 5,
    "blocked": 1,
    "jammed": 1,
    "aim_error_mean": pytest.approx(0.02),
    "aim_error_max": pytest.approx(0.03),
    "refusals": 1,
    "refusal_reasons": {"5": "tips before it slides"},
    "refusals_right": None,  # not judged (examiner/judge.py)
    "refusals_wrong": None,
    "resolved": None,
    "sim_time_s": 12.5,
  }
  total = summarize([row, row])
  assert total["toppled"] == 6 and total["knocked_off"] == 4
  assert total["taken_with_room_rate"] == pytest.approx(2 / 12)
  assert total["aim_error_mean_of_tables"] == pytest.approx(0.02)
  table = markdown("x", [row], summarize([row]))
  assert (
    "| 10001 | 6 | 6 | 6 | 1 | 1 | 3 | 2 | 1 | 3/5 | 1 | 1 | 20.0 | 30.0 | 1 |" in table
  )
  # Judged: the refusal of glass 5 (standing on the table, not taken) right.
  judged = score_record(
    constructed_record() | {"refusal_verdicts": {5: dict(right=True, why="x")}}
  )
  assert (judged["refusals_right"], judged["refusals_wrong"]) == (1, 0)
  assert judged["resolved"] == 1 + 1
  assert "| 1 (1 right, 0 wrong) |" in markdown("x", [judged], summarize([judged]))


def test_room_at_start_counts_the_truth_before_any_action():
  """A glass ringed by six (as in the ring test) plus one far away. The
  centre has no room (ring test). Each ring glass has neighbours 72 mm off
  at -60, 0 and +60 degrees from its inward direction; of any two opposite
  fingers one points within 90 degrees of inward, so within 30 degrees of a
  neighbour: blocked (38.8 mm < 40 mm), no room either. Only the far glass
  has room, and taking it frees nothing: 1 and 1."""
  record = constructed_record()
  a = np.radians(np.arange(0, 360, 60) + 7.0)
  ring = np.array([0.45, -0.1]) + 0.072 * np.stack([np.cos(a), np.sin(a)], 1)
  record["glasses"] = [
    glass(0, 0.45, -0.1),
    *(glass(k + 1, *ring[k]) for k in range(6)),
    glass(7, 0.45, 0.3),
  ]
  record["final"] = [state(k) for k in range(8)]
  record["taken"] = {}
  row = score_record(record)
  assert row["room_at_start"] == 1
  assert row["takeable_without_pushing"] == 1
  assert row["left_on_table"] == 8 and row["toppled"] == 0
