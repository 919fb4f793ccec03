"""The closed RG2's own numbers for pushing (public; no truth about tables).

Read from the robot's plain numbers (``assets/ur5_rg2_dimensions.py``, which
the robot model is built from), so that importing the package does not
import MuJoCo.
"""

from __future__ import annotations

from assets.ur5_rg2_dimensions import (
  RG2_HOUSING_HALF,
  RG2_HOUSING_POS,
  RG2_PAD_HALF,
  RG2_TCP_OFFSET,
)

# The hand points down; its pads hang this far below the tool point.
PAD_HALF_Z = RG2_PAD_HALF[2]
# Lowest reachable tool height: pad bottoms 2 mm above the table top.
LOWEST_TCP_Z = PAD_HALF_Z + 0.002
# Pads lead the tool axis by half their width along the heading.
PAD_LEAD = RG2_PAD_HALF[1]
# The housing (60 x 44 mm, 120 mm tall) starts 60 mm above the tool point and
# leads the tool axis by 22 mm along the heading.
HOUSING_ABOVE_TCP = RG2_TCP_OFFSET - (RG2_HOUSING_POS[2] + RG2_HOUSING_HALF[2])
HOUSING_LEAD = RG2_HOUSING_HALF[1]
# Reachable start points: horizontal distance from the robot base axis [m].
REACH_MIN, REACH_MAX = 0.25, 0.72
# The examiner's push stops when the wrist feels this force (jammed) [N].
JAM_FORCE = 20.0

HAND = {
  "lowest_tcp_z": LOWEST_TCP_Z,
  "pad_half_z": PAD_HALF_Z,
  "pad_lead": PAD_LEAD,
  "housing_above_tcp": HOUSING_ABOVE_TCP,
  "housing_lead": HOUSING_LEAD,
  "housing_half": (RG2_HOUSING_HALF[0], RG2_HOUSING_HALF[1]),
  "pad_half_width": RG2_PAD_HALF[1],
  "reach_min": REACH_MIN,
  "reach_max": REACH_MAX,
}
