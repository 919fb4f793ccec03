"""Bin-pick delivery evaluator (``evaluators/bin_pick.py``) against worked
examples computed by hand and a per-object NumPy reference of the rule that
docs/bin_pick.md states.

``delivery_reference`` is also the reference the end-to-end expert test
(tests/test_bin_pick_expert.py) applies to the final simulator state.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.bin_pick import (
  CONDITIONS,
  BinLayout,
  BinPickObjectState,
  DeliveryThresholds,
  evaluate_deliveries,
  failed_condition,
)

# The default bin (inner 128 x 400 mm, 10 mm walls, centred at (0.5, 0)) and
# the drop destination, written out by hand: x 0.426..0.574, y -0.21..0.21.
LAYOUT = BinLayout((0.426, 0.574), (-0.21, 0.21), (0.30, 0.40))


def delivery_reference(
  lo, hi, pos, lin_vel, ang_vel, robot_contact, layout: BinLayout, th
) -> dict[str, bool]:
  """The delivery rule of docs/bin_pick.md for ONE object, plain Python.

  A non-finite state satisfies no geometric or speed condition; ``released``
  is about contacts only.
  """
  values = [*lo, *hi, *pos, *lin_vel, *ang_vel]
  valid = all(math.isfinite(float(v)) for v in values)
  (x0, x1), (y0, y1) = layout.bin_outer_x, layout.bin_outer_y
  # Wholly outside the outer footprint: beyond one of its four sides.
  outside = hi[0] < x0 or lo[0] > x1 or hi[1] < y0 or lo[1] > y1
  near = math.hypot(pos[0] - layout.drop_xy[0], pos[1] - layout.drop_xy[1])
  supported = abs(lo[2] - layout.table_z) <= th.support_tolerance
  slow = (
    math.sqrt(sum(float(v) ** 2 for v in lin_vel)) <= th.max_linear_speed
    and math.sqrt(sum(float(v) ** 2 for v in ang_vel)) <= th.max_angular_speed
  )
  out = {
    "valid": valid,
    "outside_bin": valid and outside,
    "near_drop": valid and near <= th.drop_radius,
    "supported": valid and supported,
    "released": not robot_contact,
    "slow": valid and slow,
  }
  out["delivered"] = all(out[c] for c in CONDITIONS)
  return out


def _state(rows: list[dict], dtype=torch.float32) -> BinPickObjectState:
  """One environment's objects from per-object rows (lo, hi, pos, ...)."""

  def field(name, default):
    return torch.tensor(
      [[r.get(name, default) for r in rows]], dtype=dtype
    )  # [1, K, ...]

  pos = field("pos", None)
  half = torch.tensor([[r.get("half", (0.02, 0.02, 0.02)) for r in rows]], dtype=dtype)
  return BinPickObjectState(
    lo=pos - half,
    hi=pos + half,
    pos=pos,
    lin_vel=field("lin_vel", (0.0, 0.0, 0.0)),
    ang_vel=field("ang_vel", (0.0, 0.0, 0.0)),
    robot_contact=torch.tensor([[r.get("contact", False) for r in rows]]),
    poured=torch.tensor([[r.get("poured", True) for r in rows]]),
  )


def test_bin_cleared_when_every_poured_object_is_delivered():
  # Two poured objects resting near the drop point (20 mm cubes, lowest point
  # at the table top), a third slot the pourer never filled, parked far away.
  rows = [
    {"pos": (0.30, 0.40, 0.02)},
    {"pos": (0.38, 0.40, 0.021)},  # 80 mm from the drop point, 1 mm up.
    {"pos": (-1.2, -0.8, 0.02), "poured": False},
  ]
  v = evaluate_deliveries(_state(rows), LAYOUT)
  assert v["delivered"][0].tolist() == [True, True, False]
  assert int(v["delivered_count"][0]) == 2
  assert int(v["poured_count"][0]) == 2
  assert bool(v["bin_cleared"][0]) and bool(v["success"][0])
  # The parked slot fails near_drop first (its bounds lie outside the bin).
  assert failed_condition(v)[0].tolist() == [
    len(CONDITIONS),
    len(CONDITIONS),
    CONDITIONS.index("near_drop"),
  ]


def test_near_drop_fails_just_beyond_the_drop_radius():
  # Centres 149 mm and 151 mm from the drop point (along the diagonal), on
  # the table, released and still: only the first is delivered.
  d = 1 / math.sqrt(2)
  rows = [
    {"pos": (0.30 + 0.149 * d, 0.40 + 0.149 * d, 0.02)},
    {"pos": (0.30 + 0.151 * d, 0.40 + 0.151 * d, 0.02)},
  ]
  v = evaluate_deliveries(_state(rows), LAYOUT)
  assert v["near_drop"][0].tolist() == [True, False]
  assert v["delivered"][0].tolist() == [True, False]
  for c in ("valid", "outside_bin", "supported", "released", "slow"):
    assert v[c][0].tolist() == [True, True], c
  assert failed_condition(v)[0, 1] == CONDITIONS.index("near_drop")
  assert not bool(v["bin_cleared"][0])


@pytest.mark.parametrize(
  "field, index", [("pos", 0), ("lin_vel", 2), ("ang_vel", 1), ("lo", 2), ("hi", 0)]
)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_object_is_not_delivered(field, index, bad):
  # An otherwise delivered object with one non-finite number.
  state = _state([{"pos": (0.30, 0.40, 0.02)}, {"pos": (0.33, 0.40, 0.02)}])
  getattr(state, field)[0, 0, index] = bad
  v = evaluate_deliveries(state, LAYOUT)
  assert v["valid"][0].tolist() == [False, True]
  assert v["delivered"][0].tolist() == [False, True]
  # Nothing that compares its numbers holds; released is about contacts.
  for c in ("outside_bin", "near_drop", "supported", "slow"):
    assert not bool(v[c][0, 0]), c
  assert bool(v["released"][0, 0])
  assert failed_condition(v)[0, 0] == CONDITIONS.index("valid")
  assert int(v["delivered_count"][0]) == 1 and not bool(v["bin_cleared"][0])


def test_unpoured_objects_are_left_out_of_the_counts():
  # env 0: an unpoured slot delivered at the drop point is not counted; the
  # poured one is delivered: cleared. env 1: an unpoured slot still in the
  # bin does not block the poured one: cleared. env 2: nothing poured: not
  # cleared (no bin to clear). env 3: poured object in the bin: 0 of 1.
  at_drop, in_bin = (0.30, 0.40, 0.02), (0.50, 0.0, 0.03)
  rows = [
    [{"pos": at_drop, "poured": False}, {"pos": at_drop}],
    [{"pos": in_bin, "poured": False}, {"pos": at_drop}],
    [{"pos": at_drop, "poured": False}, {"pos": at_drop, "poured": False}],
    [{"pos": in_bin}, {"pos": at_drop, "poured": False}],
  ]
  states = [_state(r) for r in rows]
  state = BinPickObjectState(
    **{
      f: torch.cat([getattr(s, f) for s in states])
      for f in BinPickObjectState.__dataclass_fields__
    }
  )
  v = evaluate_deliveries(state, LAYOUT)
  assert v["delivered"].tolist() == [
    [True, True],
    [False, True],
    [True, True],
    [False, True],
  ]
  assert v["poured_count"].tolist() == [1, 1, 0, 1]
  assert v["delivered_count"].tolist() == [1, 1, 0, 0]
  assert v["bin_cleared"].tolist() == [True, True, False, False]


def _random_batch(rng: np.random.Generator, b: int, k: int) -> dict[str, np.ndarray]:
  """Objects around the bin, the drop zone and the table top; speeds and
  heights straddle the thresholds; a few contacts and non-finite numbers."""
  centre = np.where(
    rng.random((b, k, 1)) < 0.6,
    np.array([0.30, 0.40, 0.0]) + rng.uniform(-0.2, 0.2, (b, k, 3)),
    np.array([0.50, 0.0, 0.0])
    + rng.uniform([-0.12, -0.3, 0], [0.12, 0.3, 0], (b, k, 3)),
  )
  half = rng.uniform(0.01, 0.06, (b, k, 3))
  lift = rng.choice([0.0, 1.0], (b, k), p=[0.7, 0.3]) * rng.uniform(0, 0.1, (b, k))
  lo_z = rng.uniform(-0.015, 0.015, (b, k)) + lift
  pos = centre.copy()
  pos[..., 2] = lo_z + half[..., 2]
  lo, hi = pos - half, pos + half
  speed = rng.uniform(0, 0.02, (b, k, 1)) * _unit(rng, (b, k))
  spin = rng.uniform(0, 0.2, (b, k, 1)) * _unit(rng, (b, k))
  data = {
    "lo": lo,
    "hi": hi,
    "pos": pos,
    "lin_vel": speed,
    "ang_vel": spin,
    "robot_contact": rng.random((b, k)) < 0.2,
    "poured": rng.random((b, k)) < 0.8,
  }
  for name in ("lo", "hi", "pos", "lin_vel", "ang_vel"):
    bad = rng.random((b, k)) < 0.03
    data[name][bad, rng.integers(0, 3)] = rng.choice([np.nan, np.inf, -np.inf])
  return data


def _unit(rng, shape):
  v = rng.normal(size=(*shape, 3))
  return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_verdicts_match_the_per_object_reference(rng):
  th = DeliveryThresholds()
  b, k = 64, 12
  data = _random_batch(rng, b, k)
  # float64: ties with the thresholds are then a measure-zero event.
  state = BinPickObjectState(
    **{
      n: torch.tensor(a, dtype=torch.bool if a.dtype == bool else torch.float64)
      for n, a in data.items()
    }
  )
  v = evaluate_deliveries(state, LAYOUT, th)
  first = failed_condition(v)
  for i in range(b):
    counted = 0
    for j in range(k):
      ref = delivery_reference(
        *(data[n][i, j] for n in ("lo", "hi", "pos", "lin_vel", "ang_vel")),
        bool(data["robot_contact"][i, j]),
        LAYOUT,
        th,
      )
      for c in (*CONDITIONS, "delivered"):
        assert bool(v[c][i, j]) == ref[c], (i, j, c, ref)
      failing = [n for n, c in enumerate(CONDITIONS) if not ref[c]]
      assert int(first[i, j]) == (failing[0] if failing else len(CONDITIONS))
      counted += ref["delivered"] and bool(data["poured"][i, j])
    poured = int(data["poured"][i].sum())
    assert int(v["delivered_count"][i]) == counted
    assert int(v["poured_count"][i]) == poured
    assert bool(v["bin_cleared"][i]) == (poured > 0 and counted == poured)
  # The random batch exercised every outcome.
  assert v["delivered"].any() and not v["delivered"].all()
  for c in CONDITIONS:
    assert not v[c].all(), c
