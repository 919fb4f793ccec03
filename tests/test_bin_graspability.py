"""The graspability measurement (scripts/measure_bin_graspability.py) agrees
with cases checkable by hand (a small cube in the default bin's centre has a
grasp, a wide flat box lying flat has none, a box rests on its faces, a squat
cylinder on its side and on its end), and the default object set is
graspable by construction: every object it draws, in each resting pose
alone at the default bin's centre, has a grasp the expert's planner accepts
(one fresh random object seed here; seeds 0-499 in the slow tier)."""

from __future__ import annotations

import os
from typing import get_args

import numpy as np
import pytest
from script_runner import load_tool

from assets.objects import OBJECT_SETS, ObjectDesc, ObjectSet, describe_objects

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


def test_a_squat_cylinder_rests_on_its_side_and_on_its_end(tool):
  """Radius 25 mm, 40 mm long: its centre of mass lies over its flat end
  and, on its side, above its line of contact; both are resting poses, and
  no other (the rim is not)."""
  desc = ObjectDesc(
    "obj_00", "cylinder", 600.0, (0.025, 0.025, 0.02),
    {"radius": 0.025, "half_length": 0.02},
  )  # fmt: skip
  # Drops that end rolling on the side (still rolling after 4 s) are not
  # counted; most come to rest.
  poses, restless = tool.resting_poses(desc, 4, np.random.default_rng(1))
  assert restless < 10
  downs = sorted(tuple(np.round(p.down, 2)) for p in poses)
  assert downs == [(0.0, 0.0, 1.0), (1.0, 0.0, 0.0)]


def test_the_default_set_is_the_hard_set_with_cylinders_for_wide_boxes():
  """The former default set is kept object for object as the hard set; the
  default one differs where the hard set draws its wide boxes, and in its
  L-blocks' least thickness."""
  seed = int(np.random.default_rng().integers(1_000_000))
  default = describe_objects(20, seed)
  hard = describe_objects(20, seed, object_set="hard")
  for d, h in zip(default, hard, strict=True):
    if h.kind == "wide":
      assert d.kind == "cylinder" and d.density == h.density
      assert 0.015 <= d.params["radius"] <= 0.028
      assert 0.02 <= d.params["half_length"] <= 0.045
    elif h.kind == "ell":
      # The same draws; only the thickness range starts at 25 mm, not 20.
      assert d.density == h.density
      assert d.params["long"] == h.params["long"]
      assert d.params["short"] == h.params["short"]
      assert 0.0125 <= d.params["thick"] <= 0.015
      assert 0.01 <= h.params["thick"] <= d.params["thick"]
    else:
      assert d == h
  assert {d.kind for d in default} == set(OBJECT_SETS["default"])
  # The flags' choices are the sets.
  assert get_args(ObjectSet) == tuple(OBJECT_SETS)
  with pytest.raises(ValueError, match="object set 'soft'"):
    describe_objects(3, seed, object_set="soft")


def _ungraspable(tool, seeds) -> list[str]:
  """Every pose without an accepted grasp, over ``seeds`` of the default set."""
  args = tool.Args(workers=min(len(seeds), os.cpu_count() or 1))
  objects = tool.measure_seeds(args, seeds)
  assert len(objects) == len(seeds) * tool.expert_setup().objects
  assert all(o["poses"] for o in objects)
  return [
    f"seed {o['seed']} {o['name']} ({o['kind']}) pose {p['pose']}: {p['why']}"
    for o in objects
    for p in o["poses"]
    if not p["accepted"]
  ]


def test_every_pose_of_a_fresh_default_object_seed_has_a_grasp(tool):
  seed = int(np.random.default_rng().integers(500, 1_000_000))
  assert _ungraspable(tool, range(seed, seed + 1)) == [], f"object seed {seed}"


@pytest.mark.slow
def test_every_pose_of_default_object_seeds_0_to_499_has_a_grasp(tool):
  """The issue's property over 500 seeds (about 6,000 objects, 21,000
  poses: an hour on two cores)."""
  assert _ungraspable(tool, range(500)) == []
