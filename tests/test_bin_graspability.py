"""The graspability measurement (scripts/measure_bin_graspability.py) agrees
with cases checkable by hand: a small cube in the default bin's centre has a
grasp, a wide flat box lying flat has none, and a box rests on its faces."""

from __future__ import annotations

import numpy as np
import pytest
from script_runner import load_tool

from assets.objects import ObjectDesc

FLAT = np.array([1.0, 0.0, 0.0, 0.0])


def _box(half: tuple[float, float, float], kind: str = "box") -> ObjectDesc:
  return ObjectDesc("obj_00", kind, 600.0, half, {"half": list(half)})


@pytest.fixture(scope="module")
def tool():
  return load_tool("measure_bin_graspability.py")


@pytest.fixture(scope="module")
def setup(tool):
  return tool.expert_setup()


def _check_flat(tool, setup, desc: ObjectDesc) -> dict:
  planner = tool.LoneObjectPlanner(desc, setup)
  return planner.check(*planner.place(FLAT))


def test_a_40_mm_cube_in_the_bin_centre_has_a_well_held_grasp(tool, setup):
  result = _check_flat(tool, setup, _box((0.02, 0.02, 0.02)))
  assert result["in_reach"]
  assert result["height_mm"] == pytest.approx(40.0, abs=0.1)
  # Placed on the floor at the centre: footprint 40 x 40 mm, bottom at 10 mm.
  assert result["position"][:2] == pytest.approx(list(setup.bin_centre), abs=1e-4)
  assert result["position"][2] == pytest.approx(setup.floor_z + 0.02, abs=1e-4)
  assert result["accepted"] and result["budget"] == "first"
  assert result["grasp"]["width_mm"] == pytest.approx(40.0, abs=0.5)
  assert result["grasp"]["well_held"]


def test_a_wide_flat_box_lying_flat_has_no_grasp(tool, setup):
  """100 x 130 x 20 mm flat: 100 mm across is over the 80 mm width limit,
  130 mm is over the stroke, and the closing axis is horizontal, so the
  20 mm thickness is never a closing width."""
  result = _check_flat(tool, setup, _box((0.05, 0.065, 0.01), kind="wide"))
  # Yawed to fit: its 100 mm side across the 128 mm bin.
  assert result["footprint_mm"] == pytest.approx([100.0, 130.0], abs=0.2)
  assert not result["accepted"]
  assert result["why"]


def test_a_box_rests_on_its_three_pairs_of_faces(tool):
  poses, restless = tool.resting_poses(
    _box((0.015, 0.025, 0.035)), random_drops=0, rng=np.random.default_rng(0)
  )
  assert restless == 0
  downs = sorted(tuple(p.down) for p in poses)
  assert downs == [(0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)]
