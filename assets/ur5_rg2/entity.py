"""mjlab entity configuration for the UR5 + RG2."""

from __future__ import annotations

import functools

from mjlab.actuator import BuiltinPositionActuatorCfg
from mjlab.actuator.actuator import TransmissionType
from mjlab.entity import EntityArticulationInfoCfg, EntityCfg

from assets.ur5_rg2.model import (
  ARM_ARMATURE,
  ARM_DAMPING,
  ARM_JOINT_EFFORT_LIMIT,
  ARM_JOINT_NAMES,
  ARM_STIFFNESS,
  BASE_QUAT_FACING_X,
  GRIPPER_EFFORT_LIMIT,
  GRIPPER_KP,
  GRIPPER_KV,
  HOME_ARM_Q,
  build_ur5_rg2_spec,
)

GRIPPER_ACTUATOR_NAME = "rg2_opening"
ARM_ACTUATOR_NAMES = ARM_JOINT_NAMES

HOME_JOINT_POS: dict[str, float] = {
  **dict(zip(ARM_JOINT_NAMES, HOME_ARM_Q, strict=True)),
  ".*_finger_joint": 0.0275,  # Fully open.
}


def _arm_actuators() -> tuple[BuiltinPositionActuatorCfg, ...]:
  return tuple(
    BuiltinPositionActuatorCfg(
      target_names_expr=(name,),
      stiffness=kp,
      damping=kv,
      effort_limit=effort,
      armature=armature,
    )
    for name, kp, kv, effort, armature in zip(
      ARM_JOINT_NAMES,
      ARM_STIFFNESS,
      ARM_DAMPING,
      ARM_JOINT_EFFORT_LIMIT,
      ARM_ARMATURE,
      strict=True,
    )
  )


def ur5_rg2_entity_cfg(
  with_camera: bool = False,
  base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0),
  base_quat: tuple[float, float, float, float] = BASE_QUAT_FACING_X,
  joint_pos: dict[str, float] | None = None,
) -> EntityCfg:
  """Entity config for the UR5 + RG2.

  Args:
    with_camera: Attach the wrist D415 on mount v4.
    base_pos: Robot base position in the environment frame.
    base_quat: Robot base orientation (w, x, y, z); by default turned half a
      turn about z so that the home pose reaches along +x.
    joint_pos: Initial joint positions (defaults to ``HOME_JOINT_POS``).
  """
  gripper = BuiltinPositionActuatorCfg(
    target_names_expr=(GRIPPER_ACTUATOR_NAME,),
    transmission_type=TransmissionType.TENDON,
    stiffness=GRIPPER_KP,
    damping=GRIPPER_KV,
    effort_limit=GRIPPER_EFFORT_LIMIT,
  )
  return EntityCfg(
    init_state=EntityCfg.InitialStateCfg(
      pos=base_pos,
      rot=base_quat,
      joint_pos=dict(joint_pos or HOME_JOINT_POS),
      joint_vel={".*": 0.0},
    ),
    spec_fn=functools.partial(build_ur5_rg2_spec, with_camera=with_camera),
    articulation=EntityArticulationInfoCfg(actuators=(*_arm_actuators(), gripper)),
  )
