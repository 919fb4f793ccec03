"""The scoring side's trial pushes: copies of the true world, the
search-based limit and the refusal judge (docs/glass_push.md, "The limit of
the tables" and "Refusals judged"). CPU, C MuJoCo."""

from __future__ import annotations

import json

import numpy as np
import pytest
from script_runner import run_script

from mjlab_tasks.glass_push.examiner import judge, limit
from mjlab_tasks.glass_push.examiner.trials import (
  Trials,
  candidate_pushes,
  true_readings,
)
from mjlab_tasks.glass_push.examiner.world import GlassTable
from mjlab_tasks.glass_push.hidden import PhysicsConfig
from mjlab_tasks.glass_push.rules.room import has_room
from mjlab_tasks.glass_push.rules.scoring import score_record, summarize
from mjlab_tasks.glass_push.rules.tables import Glass


def tumbler(gid, x, y, widest=0.07):
  return Glass(gid, "tumbler", x, y, 0.07, widest, 0.06, 0.15)


PAIR = PhysicsConfig(glasses=(tumbler(0, 0.45, -0.25), tumbler(1, 0.45, -0.05)))


def push_of(gid, start, heading=0.0, travel=0.03):
  aim = [0.45 + travel * np.cos(heading), -0.25 + travel * np.sin(heading)]
  return dict(
    glass=gid, start=list(start), heading=heading, reach=0.04, travel=travel, aim=aim
  )


def test_shortfall_is_zero_exactly_when_the_room_rule_gives_room():
  """Against the room rule itself (``has_room``), on fresh random groups."""
  rng = np.random.default_rng()
  for _ in range(300):
    n = int(rng.integers(1, 7))
    others = rng.uniform(-0.12, 0.12, (n, 2))
    widest = rng.uniform(0.055, 0.09, n)
    mine = float(rng.uniform(0.055, 0.09))
    room = has_room(np.zeros(2), mine, others, widest)
    short = limit.shortfall(np.zeros(2), mine, others, widest)
    assert (short == 0.0) == room, (others, widest, mine)
    assert short >= 0.0


def test_a_trial_on_a_copy_ends_exactly_as_on_the_scored_world():
  with Trials(10_001, pushes=4, copies=2, physics=PAIR) as trials:
    before = trials.states()
    requests = [
      push_of(0, (0.45, -0.37), heading=np.pi / 2),
      push_of(0, (0.39, -0.25), heading=0.0, travel=0.04),
    ]
    outcomes = trials.try_pushes(requests)
    assert [o.error for o in outcomes] == [None, None]
    assert outcomes[0].report["touched"] is None
    assert trials.states() == before  # the scored world did not move
    assert trials.pushes_left == 4
    moved = [abs(o.states[0]["x"] - before[0]["x"]) for o in outcomes]
    assert moved[1] > 0.02  # the second push moved the glass along +x
    report = trials.push(requests[1])
    assert report == outcomes[1].report
    assert trials.states() == outcomes[1].states  # bitwise: the same floats
    assert trials.pushes_left == 3
    # With the takes after it: the copy takes what has room, as the scored
    # world then does, and ends the same.
    (then,) = trials.try_pushes(requests[:1], take_after=True)
    assert then.taken == [0, 1]
    trials.push(requests[0])
    assert trials.take_all_with_room() == [0, 1]
    assert trials.states() == then.states


def test_candidate_pushes_start_clear_of_every_other_glass():
  from mjlab_tasks.glass_push.rules.pushes import start_is_clear
  from mjlab_tasks.glass_push.rules.tables import training_table

  glasses = training_table(3)
  states = [dict(id=g.id, x=g.x, y=g.y, standing=True, where="table") for g in glasses]
  readings = true_readings(states, glasses)
  requests = candidate_pushes(states, glasses)
  assert requests and all(start_is_clear(r, readings) for r in requests)
  only = candidate_pushes(states, glasses, only={glasses[0].id})
  assert {r["glass"] for r in only} <= {glasses[0].id}


def test_judge_replays_the_run_and_judges_a_refusal():
  """A push, a take, then a refusal of a glass that has room: wrong. The
  replay passes through the run's own states (final difference 0)."""
  world = GlassTable.alone(10_001, 4, PAIR)
  try:
    world.push(push_of(0, (0.39, -0.25)))
    world.take(1)
    world.refuse(0, "testing")
    record = world.record()
  finally:
    world.close()
  assert record["refused_at"] == {0: dict(actions=1, takes=1)}
  assert judge.events(record) == [("act", 0), ("take", 1)]
  judged = judge.judge_record(record, copies=1, physics=PAIR)
  assert judged["replay_difference_m"] == 0.0
  assert judged["verdicts"][0]["right"] is False
  assert judged["verdicts"][0]["why"] == "it had room"


def test_events_put_takes_before_the_action_they_preceded():
  record = dict(
    actions=[{}, {}],
    taken={5: dict(after_action=0), 2: dict(after_action=2), 7: dict(after_action=2)},
  )
  assert judge.events(record) == [
    ("take", 5),
    ("act", 0),
    ("act", 1),
    ("take", 2),
    ("take", 7),
  ]


def test_scores_count_judged_refusals():
  glasses = [tumbler(k, 0.3 + 0.1 * k, -0.25).as_dict() for k in range(3)]
  state = dict(x=0.3, y=-0.25, z=0.0, upright=1.0, standing=True, where="table")
  record = dict(
    table=10_001,
    budget=15,
    pushes_used=0,
    glasses=glasses,
    final=[dict(state, id=k) for k in range(3)],
    taken={2: dict(room=True, state=dict(state, id=2))},
    refused={0: "tips", 1: "no place", 2: "changed my mind"},
    actions=[],
    sim_time=0.0,
    refusal_verdicts={
      0: dict(right=True, why="x"),
      1: dict(right=False, why="y"),
      2: dict(right=True, why="z"),
    },
  )
  row = score_record(record)
  assert (row["refusals_right"], row["refusals_wrong"]) == (2, 1)
  assert row["resolved"] == 1 + 1  # glass 2 taken with room counts once
  unjudged = score_record({k: v for k, v in record.items() if k != "refusal_verdicts"})
  assert unjudged["resolved"] is None
  assert summarize([row, unjudged])["resolved"] is None
  assert summarize([row, row])["refusals_wrong"] == 2
  # Judged with nothing to judge (the CLI's table without refusals): 0 and 0.
  none = score_record(record | {"refused": {}, "refusal_verdicts": {}})
  assert (none["refusals_right"], none["refusals_wrong"], none["resolved"]) == (0, 0, 1)
  assert summarize([row, none])["resolved"] == 3


@pytest.mark.slow
def test_the_cli_runs_the_limit_labelled_not_valid(tmp_path):
  """One evaluation table: every kept push replayed exactly, nothing lost,
  at least what could be taken without pushing, labelled."""
  out = tmp_path / "limit"
  result = run_script(
    "glass_push_exam.py",
    *("--solution", "limit", "--tables", "10025", "--output", str(out)),
    timeout=1200,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.count(limit.LABEL) >= 2
  report = json.loads((out / "scores.json").read_text())
  assert report["valid_solution"] is False and report["label"] == limit.LABEL
  (row,) = report["rows"]
  assert row["toppled"] == 0 and row["knocked_off"] == 0
  assert row["taken_without_room"] == 0
  assert row["taken_with_room"] >= row["takeable_without_pushing"]
  record = json.loads((out / "tables" / "10025.json").read_text())
  assert record["search"]["kept"], "table 10025 needs a push"
  for kept in record["search"]["kept"]:
    assert kept["replay_difference_m"] == 0.0


@pytest.mark.slow
def test_the_cli_judges_the_geometric_solutions_refusals(tmp_path):
  out = tmp_path / "geometric"
  result = run_script(
    "glass_push_exam.py",
    *("--solution", "geometric", "--tables", "10002", "--output", str(out)),
    timeout=1800,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  (row,) = json.loads((out / "scores.json").read_text())["rows"]
  assert row["refusals"] > 0
  assert row["refusals_right"] + row["refusals_wrong"] == row["refusals"]
  record = json.loads((out / "tables" / "10002.json").read_text())
  assert record["refusal_replay_difference_m"] == 0.0
  assert "right" in (out / "scores.md").read_text()
