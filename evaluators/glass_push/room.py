"""Whether a glass has room to be taken: a clear place for both RG2 fingers.

The rule (docs/glass_push.md): a standing glass has room when, for some
closing direction (every 10 degrees over half a turn), both closed-around
fingers fit beside its widest ring: each finger's footprint, a rectangle
``FINGER_DEPTH`` deep (along the closing direction) and ``FINGER_WIDTH`` wide,
placed ``CLEARANCE`` outside the widest ring, keeps ``CLEARANCE`` from the
widest ring of every other glass on the table; and the widest ring plus twice
the clearance fits the RG2's 110 mm opening. Every glass is taken as a
vertical cylinder of its widest diameter (conservative for tapered glasses).
"""

from __future__ import annotations

import numpy as np

FINGER_DEPTH = 0.016  # pad 6 mm + finger link 10 mm along the closing axis
FINGER_WIDTH = 0.025  # pad width across the closing axis
CLEARANCE = 0.005
MAX_OPENING = 0.110
DIRECTIONS = np.radians(np.arange(0.0, 180.0, 10.0))


def has_room(
  center: np.ndarray, widest: float, others: np.ndarray, others_widest: np.ndarray
) -> bool:
  """Room for both fingers around one glass.

  Args:
    center: the glass's centre [2].
    widest: its widest diameter.
    others: centres of the other glasses on the table [N, 2].
    others_widest: their widest diameters [N].
  """
  if widest + 2 * CLEARANCE > MAX_OPENING:
    return False
  others = np.asarray(others, dtype=float).reshape(-1, 2)
  radii = np.asarray(others_widest, dtype=float).reshape(-1) / 2 + CLEARANCE
  if others.shape[0] == 0:
    return True
  offset = widest / 2 + CLEARANCE + FINGER_DEPTH / 2
  half = np.array([FINGER_DEPTH / 2, FINGER_WIDTH / 2])
  for a in DIRECTIONS:
    d = np.array([np.cos(a), np.sin(a)])
    n = np.array([-d[1], d[0]])
    ok = True
    for side in (1.0, -1.0):
      c = center + side * offset * d
      rel = others - c  # [N, 2] in the finger rectangle's frame:
      local = np.abs(np.stack([rel @ d, rel @ n], 1))
      gap = np.linalg.norm(np.maximum(local - half, 0.0), axis=1)
      if np.any(gap < radii):
        ok = False
        break
    if ok:
      return True
  return False
