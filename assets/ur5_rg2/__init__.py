"""UR5 CB3 + OnRobot RG2 (+ optional D415 on mount v4) for mjlab.

The model builder needs only MuJoCo; the mjlab entity names load on first use
(PEP 562), so code that builds the robot in plain MuJoCo (the glass examiner's
worker) never imports mjlab or torch.
"""

from assets.ur5_rg2.model import (
  ARM_JOINT_NAMES,
  D415_IMAGE_SIZE,
  D415_MOUNT_POS_TOLERANCE,
  D415_MOUNT_ROT_TOLERANCE_DEG,
  HAND_BODY_NAME,
  PAD_GEOM_NAMES,
  TCP_SITE_NAME,
  build_ur5_rg2_spec,
  d415_nominal_intrinsics,
)

_ENTITY_NAMES = (
  "ARM_ACTUATOR_NAMES",
  "GRIPPER_ACTUATOR_NAME",
  "HOME_JOINT_POS",
  "ur5_rg2_entity_cfg",
)


def __getattr__(name: str):
  if name in _ENTITY_NAMES:
    # mjlab first: importing it loads this suite's tasks (entry point), which
    # import these names; entity.py then loads in that one order.
    import mjlab  # noqa: F401

    from assets.ur5_rg2 import entity

    return getattr(entity, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
  "ARM_ACTUATOR_NAMES",
  "ARM_JOINT_NAMES",
  "D415_IMAGE_SIZE",
  "D415_MOUNT_POS_TOLERANCE",
  "D415_MOUNT_ROT_TOLERANCE_DEG",
  "GRIPPER_ACTUATOR_NAME",
  "HAND_BODY_NAME",
  "HOME_JOINT_POS",
  "PAD_GEOM_NAMES",
  "TCP_SITE_NAME",
  "build_ur5_rg2_spec",
  "d415_nominal_intrinsics",
  "ur5_rg2_entity_cfg",
]
