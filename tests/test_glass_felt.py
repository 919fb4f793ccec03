"""The rule that turns an action's tool-point positions into its ``touched``
and ``pushed`` (``mjlab_tasks.glass_push.rules.felt``), on worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mjlab_tasks.glass_push.rules.felt import WORKING_BAND, felt_distances

LOW = 0.0195  # the lowest tool height


def recorded_push(heading: float = 0.0) -> tuple[np.ndarray, int]:
  """A push's positions as follow() sees a replayed one, along +x, then
  rotated to ``heading`` about the start point (0.30, 0):

  transit at 120 mm from x = 0.20 to 0.30, descent to the lowest height
  (30 and 40 mm above it: 10.5 and 20.5 mm above the touch height, inside
  the 25 mm band; 60 mm: outside), feel to the touch at x = 0.33 (index 7),
  push to x = 0.36, back off to 0.34, lift, transit on at 120 mm to 0.50."""
  rows = [
    (0.20, 0.0, 0.12),
    (0.30, 0.0, 0.12),
    (0.30, 0.0, LOW + 0.04),  # 40.5 mm above: above the band
    (0.30, 0.0, LOW + 0.0205),  # in the band: the approach starts here
    (0.30, 0.0, LOW + 0.0105),
    (0.30, 0.0, LOW),
    (0.315, 0.0, LOW),
    (0.33, 0.0, LOW),  # the touch
    (0.35, 0.0, LOW + 0.001),
    (0.36, 0.0, LOW),  # farthest forward at working height
    (0.34, 0.0, LOW),  # backing off
    (0.34, 0.0, 0.05),  # lifting
    (0.50, 0.0, 0.12),  # transit forward, above: not a push
  ]
  p = np.array(rows)
  c, s = math.cos(heading), math.sin(heading)
  rel = p[:, :2] - [0.30, 0.0]
  p[:, :2] = [0.30, 0.0] + rel @ np.array([[c, s], [-s, c]])
  return p, 7


@pytest.mark.parametrize("heading", [0.0, math.pi / 2, -2.5])
def test_touched_and_pushed_of_a_replayed_push(heading):
  """By hand: the approach at working height starts at x = 0.30 (the first
  position within 25 mm above the touch height after the last one above
  it), so touched = 0.33 - 0.30 = 30 mm; the farthest forward before the
  lift is x = 0.36, so pushed = 0.36 - 0.33 = 30 mm. The transit before
  (100 mm) and after (160 mm), the back-off and the lift do not count."""
  positions, touch = recorded_push(heading)
  touched, pushed = felt_distances(positions, touch, heading)
  assert touched == pytest.approx(0.030, abs=1e-12)
  assert pushed == pytest.approx(0.030, abs=1e-12)


def test_forward_is_along_the_heading_at_the_touch():
  """The same path judged with a heading 60 degrees off: forward distances
  are cos 60 = 1/2 of the path's; sideways motion counts for nothing."""
  positions, touch = recorded_push(0.0)
  touched, pushed = felt_distances(positions, touch, math.radians(60))
  assert touched == pytest.approx(0.015, abs=1e-12)
  assert pushed == pytest.approx(0.015, abs=1e-12)
  side = np.array([[0.3, 0.0, LOW], [0.3, 0.02, LOW], [0.3, 0.05, LOW]])
  assert felt_distances(side, 1, 0.0) == (0.0, 0.0)


def test_no_touch_and_edge_cases():
  positions, _ = recorded_push()
  assert felt_distances(positions, None, 0.0) == (None, 0.0)
  # A touch on the way down (the position before it is far above): the
  # approach is empty, touched 0; a touch that only ever moves back: pushed 0.
  down = np.array([[0.3, 0.0, 0.12], [0.3, 0.0, LOW + 0.002], [0.29, 0.0, LOW]])
  assert felt_distances(down, 1, 0.0) == (0.0, 0.0)
  # A touch at the first position: nothing before it.
  assert felt_distances(down[1:], 0, 0.0) == (0.0, 0.0)
  # The band's edge: exactly WORKING_BAND above is still working height.
  edge = np.array([[0.30, 0.0, LOW + WORKING_BAND], [0.31, 0.0, LOW]])
  assert felt_distances(edge, 1, 0.0)[0] == pytest.approx(0.01, abs=1e-12)
  # push() hands over exactly (feel start, touch, end of the push).
  feel, at, end = [0.35, -0.25, 0.0295], [0.4052, -0.25, 0.0195], [0.4445, -0.25, LOW]
  touched, pushed = felt_distances([feel, at, end], 1, 0.0)
  assert touched == pytest.approx(0.0552) and pushed == pytest.approx(0.0393)
