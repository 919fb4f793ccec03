"""The glass-pushing imitation solution (experts/glass_push/imitation.py) and
its training tool (scripts/train_glass_imitation.py).

Checked against hand computations with fresh random inputs: where a table
point lies in the top view, the 8 symmetries moving a crop's pixels and a
chunk's points and heading together, the chunk the solution follows (its
spacing, heights and waypoints), the working part of a recorded path. Live:
the shipped policy works an evaluation table through the examiner's calls
only; slow: a collection pairs each teacher push with its own hand path.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from experts.glass_push import imitation as im
from experts.glass_push.perception import (
  CAMERA_HEIGHT,
  FOCAL,
  SIZE,
  ZONE_CENTER,
  table_pixel,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import train_glass_imitation as tool  # noqa: E402


def test_table_points_land_where_the_camera_sees_them(rng):
  xy = np.stack([rng.uniform(0.25, 0.65, 20), rng.uniform(-0.47, -0.07, 20)], -1)
  pix = table_pixel(xy)
  for (x, y), (col, row) in zip(xy, pix, strict=True):
    # Pinhole straight down from CAMERA_HEIGHT: image right +x, image up +y.
    assert col == pytest.approx(SIZE / 2 + FOCAL * (x - ZONE_CENTER[0]) / CAMERA_HEIGHT)
    assert row == pytest.approx(SIZE / 2 - FOCAL * (y - ZONE_CENTER[1]) / CAMERA_HEIGHT)


def test_crop_is_centred_on_the_point_and_pooled(rng):
  picture = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
  x, y = rng.uniform(0.35, 0.55), rng.uniform(-0.35, -0.2)
  col, row = np.round(table_pixel((x, y))).astype(int)
  picture[row, col] = 255  # One white pixel at the point.
  out = im.crop(picture, (x, y))
  assert out.shape == (3, im.INPUT_PX, im.INPUT_PX) and out.dtype == np.float32
  r, c = np.unravel_index(out[0].argmax(), out[0].shape)
  assert (r, c) == (im.INPUT_PX // 2, im.INPUT_PX // 2)
  assert out[0, r, c] == pytest.approx(1.0 / im.POOL**2)
  # Beyond the picture's edge: black, no error.
  assert im.crop(picture, (ZONE_CENTER[0] + 0.5, ZONE_CENTER[1])).max() == 0.0


@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("turn", [0, 1, 2, 3])
def test_symmetries_move_pixels_points_and_heading_together(rng, turn, mirror):
  n = im.INPUT_PX

  def about_centre(row, col):  # A pixel's centre from the crop's, world axes.
    return col + 0.5 - n / 2, n / 2 - (row + 0.5)

  row, col = (int(v) for v in rng.integers(0, n, 2))
  image = np.zeros((3, n, n), dtype=np.float32)
  image[:, row, col] = 1.0
  heading = rng.uniform(-math.pi, math.pi)
  offset = rng.normal(size=2)
  point = [about_centre(row, col)]
  out, points, h, off = im.dihedral(image, point, heading, offset, turn, mirror)
  assert about_centre(*np.unravel_index(out[0].argmax(), out[0].shape)) == (
    pytest.approx(tuple(points[0]))
  )
  # The heading's direction and the offset move as points do.
  _, way, _, moved = im.dihedral(
    image, [[math.cos(heading), math.sin(heading)], offset], 0.0, offset, turn, mirror
  )
  assert way[0] == pytest.approx([math.cos(h), math.sin(h)], abs=1e-9)
  assert way[1] == pytest.approx(off, abs=1e-9) and moved == pytest.approx(off)


def test_push_frame_by_hand_and_under_the_symmetries(rng):
  # By hand: heading +90 degrees (along +y); a point 50 mm along +y and
  # 10 mm towards -x is 50 mm along, 10 mm to the left (across +).
  frame = im.push_frame([[-0.01, 0.05, 0.02]], math.pi / 2)
  assert frame[0] == pytest.approx([0.05, 0.01, 0.02])
  points = rng.normal(scale=0.05, size=(im.K, 3))
  for k in range(im.HEADINGS):
    heading = im.heading_of(k)
    assert im.heading_class(heading + rng.uniform(-0.19, 0.19)) == k
    local = im.push_frame(points, heading)
    np.testing.assert_allclose(im.world_frame(local, heading), points, atol=1e-12)
    for turn in range(4):
      for mirror in (False, True):
        # The training's rule: the class moves, the push frame's across axis
        # flips with a mirror; the world points must move as dihedral says.
        moved_class = im.class_symmetry(k, turn, mirror)
        moved_local = local * np.array([1.0, -1.0 if mirror else 1.0, 1.0])
        got = im.world_frame(moved_local, im.heading_of(moved_class))
        image = np.zeros((3, 4, 4), dtype=np.float32)
        _, want, h, _ = im.dihedral(image, points[:, :2], heading, [0, 0], turn, mirror)
        np.testing.assert_allclose(got[:, :2], want, atol=1e-12)
        assert im.heading_class(h) == moved_class


def test_followed_chunk_passes_every_waypoint_at_the_teachers_pace(rng):
  points = np.cumsum(rng.normal(scale=0.01, size=(im.K, 3)), 0)
  points[:, 2] = rng.uniform(0.0, 0.05, im.K)
  glass = rng.uniform(0.3, 0.6, 2)
  spacing = 0.0004
  chunk = im.to_chunk(points, 1.25, glass, spacing)
  assert chunk.shape[1] == 4 and (chunk[:, 3] == 1.25).all()
  assert chunk[:, 2].min() >= im.MIN_Z
  steps = np.linalg.norm(np.diff(chunk[:, :3], axis=0), axis=1)
  assert steps.max() <= spacing + 1e-12  # follow() allows 6 mm
  expected = points.copy()
  expected[:, :2] += glass
  expected[:, 2] = np.maximum(expected[:, 2], im.MIN_Z)
  for p in expected:
    assert np.linalg.norm(chunk[:, :3] - p, axis=1).min() < 1e-12


def test_working_part_is_the_run_at_the_lowest_height():
  safe, low = 0.24, 0.02
  down = np.linspace(safe, low, 12)
  up = np.linspace(low, safe, 12)
  z = np.concatenate([np.full(5, safe), down, np.full(30, low), up, np.full(5, safe)])
  path = np.zeros((len(z), 6))
  path[:, 0] = np.arange(len(z)) * 0.02
  path[:, 3] = z
  part = tool.working_part(path)
  lows = np.flatnonzero(z < low + 0.01)
  assert (part == path[lows[0] : lows[-1] + 1]).all()


def test_shipped_policy_proposes_a_chunk_per_standing_glass(rng):
  """The shipped network on a plain picture: one proposal per standing
  glass, best first, each a chunk of K finite waypoints near its glass."""
  net, settings = im.load()
  assert 0 < settings["spacing"] < 0.006  # follow() allows 6 mm a step
  picture = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
  readings = [
    {
      "id": i,
      "x": x,
      "y": y,
      "height": 0.12,
      "widest": 0.07,
      "foot": 0.06,
      "standing": i != 2,
    }
    for i, (x, y) in enumerate(
      zip(rng.uniform(0.35, 0.55, 4), rng.uniform(-0.35, -0.2, 4), strict=True)
    )
  ]
  out = im.propose(net, picture, readings, skip={3})
  assert [k for _, k, _, _ in sorted(out, key=lambda o: o[1])] == [0, 1]
  assert out[0][0] >= out[1][0]
  for _, _, points, heading in out:
    assert points.shape == (im.K, 3) and np.isfinite(points).all()
    assert np.abs(points[:, :2]).max() < 0.3 and math.isfinite(heading)


def _picture_or_skip(examiner):
  from mjlab_tasks.glass_push import NoOffscreenGL

  try:
    return examiner.top_view()
  except NoOffscreenGL as error:
    pytest.skip(f"no offscreen OpenGL: {error}")


class _Calls:
  """An examiner seen through, counting the calls a solution makes."""

  def __init__(self, examiner):
    self._examiner, self.calls = examiner, []

  def __getattr__(self, name):
    self.calls.append(name)
    return getattr(self._examiner, name)


@pytest.mark.slow  # An examiner worker and pictures: about 20 s.
def test_shipped_policy_works_a_table_through_the_examiners_calls():
  from mjlab_tasks.glass_push import Examiner

  with Examiner(table=10025, pushes=2, engine="mujoco") as examiner:
    _picture_or_skip(examiner)
    seen = _Calls(examiner)
    im.solve(seen)
  assert set(seen.calls) <= {"look", "top_view", "follow", "take", "refuse"}
  assert "top_view" in seen.calls
  assert "push" not in seen.calls


@pytest.mark.slow  # A teacher's run on one training table, with pictures.
def test_collection_pairs_each_push_with_its_own_hand_path():
  from experts.glass_push import shove

  samples = tool.collect_share([3], shove.solve, pushes=3)
  pushes = [s for s in samples if s["glass"] is not None]
  assert pushes, "the teacher pushed nothing on table 3"
  for s in pushes:
    assert s["picture"].shape == (SIZE, SIZE, 3)
    part = tool.working_part(s["path"])
    glass = next(r for r in s["readings"] if r["id"] == s["glass"])
    # The push's working part starts behind its glass and moves towards it.
    start, end = part[0, 1:3], part[len(part) // 2, 1:3]
    centre = np.array([glass["x"], glass["y"]])
    assert np.linalg.norm(end - centre) < np.linalg.norm(start - centre)
  data = tool.to_arrays(samples)
  assert len(data["chosen"]) == len(samples)
  assert (data["count"] > 0).all() and data["start"][-1] + data["count"][-1] == len(
    data["crops"]
  )
