"""What one action reports as ``touched`` and ``pushed``: one rule for
``push()`` and ``follow()`` on both engines (docs/glass_push.md).

Pure NumPy on the tool point's positions, so the C MuJoCo world, the MuJoCo
Warp batch and the tests all measure a push the same way.
"""

from __future__ import annotations

import math

import numpy as np

# The hand is "at working height" while its tool point is at most this far
# above its height at the touch. It must take in the end of the descent (the
# hand trails its command: push()'s feel starts with the tool point 10 mm
# above its later touch height, measured) and leave out transit and lift
# (the safe height puts the tool point at least 30 mm above any touch, and
# over 100 mm above a touch at the lowest height).
WORKING_BAND = 0.025  # m


def felt_distances(
  positions: np.ndarray, touch: int | None, heading: float
) -> tuple[float | None, float]:
  """``touched`` and ``pushed`` of one action.

  Forward is the hand's heading at the touch, in the horizontal plane.

  - ``touched``: forward displacement from where the final approach at
    working height began to the touch. The approach is the run of positions
    just before the touch that stay within ``WORKING_BAND`` above the touch
    height (transit and most of the descent are above it); it begins at the
    run's first position (the touch itself if the run is empty).
  - ``pushed``: the farthest the hand got forward of the touch, over the
    positions after it up to the first one that leaves working height (a
    lift), never negative. Backing off after the push moves the hand back,
    not forward, so it does not count either.

  Args:
    positions: tool-point positions [P, 3] of the action, in order.
    touch: index in ``positions`` of the position at the first touch, or
      None if the hand never touched anything.
    heading: the hand's heading at the touch [rad].

  Returns:
    (touched [m] or None, pushed [m]); (None, 0.0) without a touch.
  """
  if touch is None:
    return None, 0.0
  p = np.asarray(positions, dtype=float).reshape(-1, 3)
  u = np.array([math.cos(heading), math.sin(heading)])
  at = p[touch]
  high = p[:, 2] > at[2] + WORKING_BAND
  above_before = np.flatnonzero(high[:touch])
  start = above_before[-1] + 1 if above_before.size else 0
  touched = float((at[:2] - p[start, :2]) @ u)
  later = p[touch:]
  lifted = np.flatnonzero(high[touch:])
  if lifted.size:
    later = later[: lifted[0]]
  pushed = float(max(0.0, np.max((later[:, :2] - at[:2]) @ u)))
  return touched, pushed
