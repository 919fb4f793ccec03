"""UR5 CB3 + OnRobot RG2 (+ optional D415 on mount v4) for mjlab."""

from assets.ur5_rg2.entity import (
  ARM_ACTUATOR_NAMES,
  GRIPPER_ACTUATOR_NAME,
  HOME_JOINT_POS,
  ur5_rg2_entity_cfg,
)
from assets.ur5_rg2.model import (
  ARM_JOINT_NAMES,
  HAND_BODY_NAME,
  PAD_GEOM_NAMES,
  TCP_SITE_NAME,
  build_ur5_rg2_spec,
  d415_nominal_intrinsics,
)

__all__ = [
  "ARM_ACTUATOR_NAMES",
  "ARM_JOINT_NAMES",
  "GRIPPER_ACTUATOR_NAME",
  "HAND_BODY_NAME",
  "HOME_JOINT_POS",
  "PAD_GEOM_NAMES",
  "TCP_SITE_NAME",
  "build_ur5_rg2_spec",
  "d415_nominal_intrinsics",
  "ur5_rg2_entity_cfg",
]
