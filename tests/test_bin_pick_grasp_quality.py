"""Bin-picking grasp quality: the pads' contact patch and the gravity torque
about the closing line, against hand computations on posed primitives."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from experts.bin_pick.grasps import (
  GraspSearchCfg,
  body_triangles_w,
  contact_patch,
  grasp_candidates,
  grasp_taper,
  section_segments,
  strip_extent,
  tool_rotation,
)

HW = 0.0125  # Pad half width.
TOL = GraspSearchCfg().contact_tolerance


def _triangles(geom_kwargs: dict, quat=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
  spec = mujoco.MjSpec()
  body = spec.worldbody.add_body(name="o", quat=list(quat))
  body.add_geom(name="g", **geom_kwargs)
  model = spec.compile()
  data = mujoco.MjData(model)
  mujoco.mj_forward(model, data)
  return body_triangles_w(model, data, [0])


def _patch(triangles: np.ndarray, direction: float, levels, v_centre: float):
  sections = [
    section_segments(triangles @ tool_rotation(direction, 0.0), z) for z in levels
  ]
  extents = [strip_extent(a, b, v_centre, HW) for a, b in sections]
  u_lo = min(e[0] for e in extents if e)
  u_hi = max(e[1] for e in extents if e)
  return contact_patch(sections, v_centre, HW, u_lo, u_hi, TOL)


def test_flat_box_faces_cover_the_pad_or_the_box(rng):
  """A box closed across x: the faces are flat, so each cut's patch is the
  box's extent along the pad width, clipped to the pad (25 mm)."""
  for _ in range(4):
    half = rng.uniform([0.01, 0.004, 0.02], [0.04, 0.03, 0.04])
    tri = _triangles(dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=half))
    levels = [0.0, -0.5 * half[2], 0.5 * half[2]]
    v_centre = rng.uniform(-0.5, 0.5) * half[1]
    covered = min(v_centre + HW, half[1]) - max(v_centre - HW, -half[1])
    expected = min(1.0, covered / (2 * HW))
    assert _patch(tri, 0.0, levels, v_centre) == pytest.approx(expected, abs=1e-9)


def test_lying_cylinder_touches_along_a_line(rng):
  """A cylinder lying with its axis along the pad width (world y), closed
  across x: only the cut through its axis reaches the widest part, where the
  contact is the cylinder's length clipped to the pad; the cuts above and
  below meet narrower chords (no contact within the tolerance)."""
  for _ in range(3):
    radius, half_len = rng.uniform(0.018, 0.03), rng.uniform(0.02, 0.05)
    # Axis along y: a quarter turn about x.
    q = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)
    tri = _triangles(
      dict(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[radius, half_len, 0]), q
    )
    dz = 0.8 * radius  # The other cuts' chords: 2 r sqrt(1 - 0.64) = 1.2 r.
    expected = min(1.0, 2 * half_len / (2 * HW)) / 3
    # Just off the tessellation's vertex line (a cut exactly through it is
    # degenerate).
    got = _patch(tri, 0.0, [1e-6, -dz, dz], 0.0)
    assert got == pytest.approx(expected, abs=1e-6)


def test_sphere_patch_is_the_chord_within_the_tolerance(rng):
  """A sphere (64-gon tessellation): the points within the tolerance of the
  widest point span a chord 2 sqrt(r^2 - (r - tol)^2) on the middle cut,
  nothing on cuts far above or below; within the tessellation's step."""
  radius = rng.uniform(0.02, 0.03)
  tri = _triangles(dict(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0]))
  chord = 2 * math.sqrt(radius**2 - (radius - TOL) ** 2)
  step = 2 * math.pi * radius / 64
  got = _patch(tri, 0.0, [0.0, -0.7 * radius, 0.7 * radius], 0.0)
  assert got * 3 * 2 * HW == pytest.approx(chord, abs=2 * step)


def _box_candidates(com, mass):
  half = np.array([0.015, 0.045, 0.02])  # Long along y.
  tri = _triangles(dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=half))
  weight = mass * 9.81  # Standard gravity, as the task's model has.
  return grasp_candidates(tri, GraspSearchCfg(), com_w=np.asarray(com), weight=weight)


def test_com_distance_is_the_distance_from_the_closing_line(rng):
  """Closing across x (direction 0), untilted, centre strip, middle height:
  the closing line runs along x through (y, z) = (0, 0), so the centre of
  mass at (x, y, z) lies sqrt(y^2 + z^2) from it."""
  com = rng.uniform([-0.01, -0.03, -0.015], [0.01, 0.03, 0.015])
  c = _box_candidates(com, 0.1)
  pick = (c.direction == 0) & (c.tilt == 0.0) & (c.strip == 0) & (c.level == 0)
  (j,) = np.nonzero(pick)[0]
  np.testing.assert_allclose(c.position_w[j], [0, 0, 0], atol=1e-9)
  assert c.com_distance[j] == pytest.approx(math.hypot(com[1], com[2]), abs=1e-9)
  assert c.patch[j] == pytest.approx(1.0)


def test_a_heavy_object_is_held_near_its_centre_of_mass():
  """The same box with its centre of mass near one end (a weight inside):
  weightless, the first candidate closes across its middle; at 0.4 kg the
  first candidate's closing line passes nearer the centre of mass."""
  com = [0.0, 0.035, 0.0]
  light, heavy = _box_candidates(com, 0.0), _box_candidates(com, 0.4)
  assert light.com_distance[0] == pytest.approx(0.035, abs=1e-6)
  assert heavy.com_distance[0] < 0.02


def test_strips_of_a_box_section_by_hand(rng):
  """A box closed across x, untilted: at every height the pad strips lie at
  the section's middle; where it is wider than a pad, half way from there
  to where a pad would reach its end (when that is 2 mm or more), and with
  the pad flush with each end (when that is 4 mm or more from the middle:
  the edge strips)."""
  cfg = GraspSearchCfg()
  for half_y in (0.012, 0.016, 0.02, *rng.uniform(0.008, 0.045, 3)):
    half = np.array([rng.uniform(0.01, 0.04), half_y, rng.uniform(0.015, 0.04)])
    found = grasp_candidates(
      _triangles(dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=half))
    )
    reach = max(0.0, half[1] - HW)
    expected, strips = [0.0], [0]
    if reach / 2 >= 0.002:
      expected, strips = [-reach / 2, *expected, reach / 2], [-1, 0, 1]
    if reach >= 0.004:
      expected, strips = [-reach, *expected, reach], [-2, *strips, 2]
    for k in range(len(cfg.height_fractions) + 1):
      pick = (found.direction == 0) & (found.tilt == 0.0) & (found.level == k)
      assert pick.any()
      # Tool frame of direction 0, untilted: v = -y.
      v = -found.position_w[pick, 1]
      assert sorted(v) == pytest.approx(expected, abs=1e-9)
      assert sorted(found.strip[pick]) == strips


def test_hold_tiers_order_sure_then_held_or_near_then_the_rest(rng):
  """Planning tiers of random candidates, against the rules written out per
  candidate: sure (patch >= 0.2, width <= 60 mm, centre of mass within
  15 mm), then well held (70 mm, 25 mm) or within the sure bounds, then the
  rest."""
  from experts.bin_pick.replica import ReplicaCfg, hold_tier

  n = 400
  patch = rng.uniform(0.0, 1.0, n)
  width = rng.uniform(0.02, 0.09, n)
  com = rng.uniform(0.0, 0.04, n)
  tiers = hold_tier(width, patch, com, ReplicaCfg())
  for i in range(n):
    held = patch[i] >= 0.2 and width[i] <= 0.07 and com[i] <= 0.025
    near = width[i] <= 0.06 and com[i] <= 0.015
    expected = 0 if held and near else 1 if held or near else 2
    assert tiers[i] == expected
  assert set(tiers.tolist()) == {0, 1, 2}


def test_a_diamond_section_tapers_by_the_tangents_of_its_tilt(rng):
  """A square prism along the pad width, turned by theta about it: above
  both side corners its section is a diamond's top, whose faces widen
  downward by tan(theta) on the low side of the closing axis (world x) and
  cot(theta) on the high side; pads whose middle cut lies below both side
  corners meet it where it narrows downward (no taper)."""
  ph = GraspSearchCfg().pad_half_height
  for _ in range(4):
    theta = rng.uniform(math.radians(30), math.radians(60))
    h = rng.uniform(0.035, 0.045)
    quat = (math.cos(theta / 2), 0.0, math.sin(theta / 2), 0.0)  # About y.
    tri = _triangles(dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=[h, 0.02, h]), quat)
    c = grasp_candidates(tri)
    side = h * abs(math.cos(theta) - math.sin(theta))  # Higher side corner.
    upper = lower = 0
    for i in range(len(c)):
      if c.direction[i] != 0 or c.tilt[i] != 0.0 or c.strip[i] != 0:
        continue
      z_mid = c.position_w[i][2]
      if z_mid - 0.9 * ph > side + 1e-4:
        expected = [math.tan(theta), 1.0 / math.tan(theta)]
        upper += 1
      elif z_mid < -side - 1e-4:
        expected = [0.0, 0.0]
        lower += 1
      else:
        continue
      taper = grasp_taper(tri, c.position_w[i], c.rotation_w[i])
      np.testing.assert_allclose(taper, expected, atol=1e-6)
    assert upper and lower


def _pad_corners_z(position: np.ndarray, rotation: np.ndarray, width: float):
  """World heights of both closed pads' eight corners [16]: each pad a box of
  half size (pad thickness, HW, pad half height) beside the width."""
  from assets.ur5_rg2.model import RG2_PAD_HALF

  t, ph = RG2_PAD_HALF[0], GraspSearchCfg().pad_half_height
  corners = []
  for side in (-1.0, 1.0):
    for du in (-t, t):
      for dv in (-HW, HW):
        for ds in (-ph, ph):
          local = np.array([side * (0.5 * width + t) + du, dv, ds])
          corners.append(position[2] + (rotation @ local)[2])
  return np.array(corners)


def test_the_lowest_level_keeps_every_pad_corner_off_the_floor(rng):
  """A flat box lying turned on the floor: at the lowest level, every
  candidate's pads (tilted or not) keep their lowest corner at least
  floor_clearance above the box's bottom, and the level is as low as that
  allows (the lowest corner at exactly that height) where the box is tall
  enough; posed here from the pad's box, not the search's formula."""
  cfg = GraspSearchCfg()
  lowest = len(cfg.height_fractions)
  for _ in range(3):
    half = rng.uniform([0.02, 0.02, 0.008], [0.05, 0.05, 0.015])
    yaw = rng.uniform(0.0, np.pi)
    quat = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
    tri = _triangles(dict(type=mujoco.mjtGeom.mjGEOM_BOX, size=half), quat)
    found = grasp_candidates(tri)
    pick = np.nonzero(found.level == lowest)[0]
    tilts = {round(math.degrees(found.tilt[j])) for j in pick}
    assert {0, 15, -15} <= tilts
    for j in pick:
      z = _pad_corners_z(found.position_w[j], found.rotation_w[j], found.width[j])
      assert z.min() >= -half[2] + cfg.floor_clearance - 1e-9
      assert z.min() == pytest.approx(-half[2] + cfg.floor_clearance, abs=1e-9)
