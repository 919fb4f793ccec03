"""The shove solution (experts/glass_push/shove.py): its rules checked
against the first-order prediction it plans with, on fresh random training
tables, and one run through the examiner."""

from __future__ import annotations

import numpy as np

from experts.glass_push import shove
from experts.glass_push.common import arrays, in_aim_box
from experts.glass_push.geometric import shove_prediction
from mjlab_tasks.glass_push import Exam, start_is_clear
from mjlab_tasks.glass_push.rules.scoring import score_record
from mjlab_tasks.glass_push.rules.tables import training_table


def readings_of(table: int) -> list[dict]:
  return [
    dict(
      id=g.id,
      x=g.x,
      y=g.y,
      height=g.height,
      widest=g.widest,
      foot=g.foot,
      standing=True,
    )
    for g in training_table(table)
  ]


def test_every_planned_shove_keeps_the_rules():
  """Whatever it picks: a clear start, the aim and every carried glass
  inside the aim box, at most MAX_CARRIED carried glasses, each met low
  enough for its foot (by the prediction recomputed here)."""
  rng = np.random.default_rng()
  planned = 0
  for table in rng.integers(0, 10_000, 12):
    readings = readings_of(int(table))
    request = shove.plan(readings, set())
    if request is None:
      continue
    planned += 1
    assert start_is_clear(request, readings) and in_aim_box(request["aim"])
    k = next(i for i, r in enumerate(readings) if r["id"] == request["glass"])
    new = shove_prediction(readings, k, request["heading"], request["travel"])
    _, xy, *_ = arrays(readings)
    carried = [
      j
      for j in range(len(readings))
      if j != k and np.linalg.norm(new[j] - xy[j]) > 1e-6  # moved at all
    ]
    assert len(carried) <= shove.MAX_CARRIED
    assert shove.squatness(readings[k]) >= shove.PUSHED_SQUAT
    for j in carried:
      assert shove.lever(readings[j], readings[k]) >= shove.LEVER
      assert in_aim_box(new[j])
    assert request["travel"] in shove.TRAVELS
  assert planned > 0


def test_a_shove_in_vain_is_not_planned_again():
  readings = next(
    r for r in map(readings_of, range(100)) if shove.plan(r, set()) is not None
  )
  first = shove.plan(readings, set())
  again = shove.plan(readings, {(first["glass"], round(first["heading"], 3))})
  assert again is None or (again["glass"], again["heading"]) != (
    first["glass"],
    first["heading"],
  )


def test_squatness_is_half_the_foot_over_the_height_with_margins():
  r = dict(foot=0.064, height=0.147)
  assert shove.squatness(r) == (0.064 - 0.004) / 2 / (0.147 + 0.003) == 0.2
  assert shove.squatness(r) < r["foot"] / 2 / r["height"]


def test_two_tumblers_meet_at_the_lower_rim():
  """Both outlines widen upwards: the shorter glass's rim is where they
  meet, so a short pusher gives a tall glass a long lever (hand-computed)."""
  tall = dict(height=0.140, widest=0.080, foot=0.064)
  short = dict(height=0.080, widest=0.070, foot=0.056)
  assert shove.meeting_height(short, tall) == 0.080
  assert shove.lever(tall, short) == (0.064 - 0.004) / 2 / (0.080 + 0.003)
  assert shove.lever(tall, short) > shove.squatness(tall)


def test_two_stemmed_glasses_meet_just_above_their_widest():
  """Equal stemmed glasses (200 mm, widest 80 mm at 40 % + 60 % x 60 % of
  the height = 152 mm, rim 85 % of it): the summed outline stays within
  MEET_BAND (4 mm) of its widest 80 mm up to 152 + 48 x 4 / 12 = 168 mm;
  the 60-point grid's highest height below that."""
  glass = dict(height=0.200, widest=0.080, foot=0.070)
  z = shove.meeting_height(glass, glass)
  step = 0.200 / 59
  assert 0.168 - step <= z <= 0.168


def test_taken_in_turn_matches_the_examiners_count_on_the_truth():
  """With the readings' width margin taken off, the glasses a greedy taker
  takes in turn are the table's takeable_without_pushing (the examiner's own
  count, an independent implementation), on fresh random training tables."""
  from experts.glass_push.common import WIDTH_MARGIN
  from mjlab_tasks.glass_push.rules.tables import takeable_without_pushing

  for table in np.random.default_rng().integers(0, 10_000, 8):
    readings = readings_of(int(table))
    _, xy, widest, *_ = arrays(readings)
    narrowed = [dict(r, widest=r["widest"] - WIDTH_MARGIN) for r in readings]
    expected = len(takeable_without_pushing(xy, widest))
    assert shove.taken_in_turn(narrowed, xy) == expected


class _Looks:
  """An examiner stand-in that answers fixed looks in turn."""

  def __init__(self, looks):
    self.looks = list(looks)

  def look(self):
    return self.looks.pop(0)


def test_averaged_look_is_the_mean_of_the_looks():
  base = dict(id=1, x=0.4, y=-0.2, height=0.1, widest=0.07, foot=0.06, standing=True)
  looks = [[dict(base, x=0.4 + d, widest=0.07 - d)] for d in (0.001, -0.002, 0.004)]
  (mean,) = shove.averaged_look(_Looks(looks), looks=3)
  assert mean["x"] == np.mean([0.401, 0.398, 0.404])
  assert mean["widest"] == np.mean([0.069, 0.072, 0.066])
  assert mean["id"] == 1 and mean["standing"] is True


def test_shove_runs_through_the_examiner():
  """Training table 9 (no glass can be taken without a push): its pushes
  free glasses, and it takes only glasses with room."""
  with Exam([9], pushes=15) as exam:
    shove.solve(exam.examiners[0])
    (record,) = exam.records()
  row = score_record(record)
  assert row["pushes_used"] >= 1
  assert row["taken_without_room"] == 0
  assert row["takeable_without_pushing"] == 0
  assert row["taken_with_room"] >= 1  # what its pushes freed
