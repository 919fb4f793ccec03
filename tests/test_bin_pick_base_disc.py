"""Objects lying against the arm's base are left out of planning: the
upper arm's capsule meets them in nearly every pose, and the live arm only
nudges them (``BinPickExpert._by_base``, ``GraspReplica.set_aside``).
One environment (C engine, CPU), objects placed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from experts.bin_pick.expert import BinPickExpert
from mjlab_tasks.bin_pick.env_cfg import (
  BIN_CENTRE,
  BIN_FLOOR,
  PARKING_X,
  bin_pick_env_cfg,
  object_bounds,
)
from mjlab_tasks.engine import make_env

# The cylinder that stopped pair 69, environment 1 (at bfc62ff), as its run
# left it: lying on the table 81 mm from the base's axis (env frame).
BY_BASE_XY = (0.07362, 0.10727)
BY_BASE_QUAT = (0.693916, 0.007595, -0.707066, -0.135941)


@pytest.fixture(scope="module")
def env():
  # Five objects of the default set: obj_00 a box, obj_04 a cylinder.
  env = make_env(
    bin_pick_env_cfg(num_envs=1, objects=5, object_seed=0),
    device="cpu",
    engine="mujoco",
  )
  env.reset()
  yield env
  env.close()


def _put(env, name: str, xy, quat, floor: float) -> None:
  """Object ``name`` at ``xy`` (env frame), turned by ``quat``, resting on
  ``floor`` (its lowest point 0.5 mm above it)."""
  obj = env.scene[name]
  origin = env.scene.env_origins[0]
  state = torch.cat([obj.data.root_link_pose_w, torch.zeros(1, 6)], dim=-1)
  state[0, :3] = origin + torch.tensor([*xy, 0.2])
  state[0, 3:7] = torch.tensor(quat, dtype=torch.float32)
  obj.write_root_state_to_sim(state)
  env.sim.forward()
  lowest = float(object_bounds(env, name)[0][0, 2])
  state[0, 2] += floor + 0.0005 - lowest
  obj.write_root_state_to_sim(state)
  env.sim.forward()


def _first_plan(env, cylinder_xy) -> tuple[str, list[bool]]:
  """The box in the bin's middle, the cylinder at ``cylinder_xy``, the rest
  parked: the note of the grasp a fresh expert plans, and its objects by
  the base."""
  for j, name in enumerate(("obj_01", "obj_02", "obj_03")):
    _put(env, name, (PARKING_X, 0.3 * j), (1.0, 0.0, 0.0, 0.0), 0.0)
  _put(env, "obj_00", BIN_CENTRE[:2], (1.0, 0.0, 0.0, 0.0), BIN_FLOOR)
  _put(env, "obj_04", cylinder_xy, BY_BASE_QUAT, 0.0)
  expert = BinPickExpert(env)
  try:
    by_base = expert._by_base()[0].tolist()
    expert._plan([0], torch.zeros(1, dtype=torch.bool))
    notes = [t["note"] for t in expert.logs[0].transitions]
  finally:
    expert.close()
  grasps = [n for n in notes if n.startswith("grasp obj_00")]
  assert len(grasps) == 1, notes
  return grasps[0], by_base


def test_an_object_against_the_base_does_not_change_the_plan(env):
  """With a cylinder lying against the base (where one stopped an
  environment: the shoulder link met it at every grasp of the last object),
  the box in the bin gets the grasp it gets with the cylinder parked far
  away: the same candidate, checked as many times."""
  far, far_by_base = _first_plan(env, (PARKING_X, 0.9))
  near, near_by_base = _first_plan(env, BY_BASE_XY)
  assert far_by_base == [False] * 5
  assert near_by_base == [False, False, False, False, True]
  assert near == far


def test_objects_by_the_base_are_those_nearer_than_the_reach_band(env, rng):
  """``_by_base`` against the distance written out here: object centres at
  random bearings and distances from the base, either side of the reach
  band's inner radius (0.14 m)."""
  expert = BinPickExpert(env)
  try:
    base = expert._base_xy[0].numpy().astype(float)
    inner = expert.cfg.reach[0]
    names = [f"obj_{k:02d}" for k in range(5)]
    dists = rng.uniform(0.5 * inner, 2.0 * inner, 5)
    dists[0], dists[1] = inner - 0.01, inner + 0.01  # Both sides, always.
    for name, dist in zip(names, dists, strict=True):
      bearing = rng.uniform(0.0, 2.0 * math.pi)
      xy = base + dist * np.array([math.cos(bearing), math.sin(bearing)])
      _put(env, name, xy, (1.0, 0.0, 0.0, 0.0), 0.0)
    got = expert._by_base()[0].tolist()
    centres = expert._object_pos()[0, :, :2].numpy()
  finally:
    expert.close()
  expected = [bool(np.linalg.norm(c - base) < inner) for c in centres]
  assert got == expected
  assert got[0] and not got[1]
