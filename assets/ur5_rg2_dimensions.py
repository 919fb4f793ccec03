"""The OnRobot RG2's plain numbers: no MuJoCo, no NumPy.

``ur5_rg2/model.py`` builds the gripper from them, and code that must not
import MuJoCo (the glass-pushing rules, ``mjlab_tasks.glass_push.rules.hand``)
reads them here. A module beside the ``ur5_rg2`` package, not in it:
importing anything in that package imports its model, and so MuJoCo.
"""

RG2_MASS = 0.78  # Datasheet product weight [kg].
RG2_MAX_OPENING = 0.110  # Stroke 0..110 mm.
RG2_TCP_OFFSET = 0.195  # Flange to pad centre along the tool axis [m].
RG2_PAD_HALF = (0.003, 0.0125, 0.0175)  # Pad box half sizes (x: closing axis).
RG2_FINGER_MASS = 0.05
# The housing box in the RG2 (flange) frame: centre and half sizes (60 x 44
# mm, 120 mm tall; y: the pads' width).
RG2_HOUSING_POS = (0, 0, 0.075)
RG2_HOUSING_HALF = (0.03, 0.022, 0.06)
