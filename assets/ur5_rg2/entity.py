"""mjlab entity configuration for the UR5 + RG2."""

from __future__ import annotations

import functools
import math

from mjlab.actuator import BuiltinPositionActuatorCfg
from mjlab.actuator.actuator import TransmissionType
from mjlab.entity import EntityArticulationInfoCfg, EntityCfg

from assets.ur5_rg2.model import (
  ARM_JOINT_EFFORT_LIMIT,
  ARM_JOINT_NAMES,
  build_ur5_rg2_spec,
)

GRIPPER_ACTUATOR_NAME = "rg2_opening"
# UR's base frame has the home pose's tool at -x; a half turn puts it at +x.
BASE_QUAT_FACING_X = (0.0, 0.0, 0.0, 1.0)
ARM_ACTUATOR_NAMES = ARM_JOINT_NAMES

# Tool pointing straight down in front of the robot, elbow up.
HOME_JOINT_POS: dict[str, float] = {
  "shoulder_pan": 0.0,
  "shoulder_lift": -math.pi / 2,
  "elbow": math.pi / 2,
  "wrist_1": -math.pi / 2,
  "wrist_2": -math.pi / 2,
  "wrist_3": 0.0,
  ".*_finger_joint": 0.0275,  # Fully open.
}

# Joint servo gains. UR does not publish its servo gains. Every joint has the
# same stiffness-to-damping ratio, so a bounded IK step turns into joint
# velocities in the same proportions and the tool keeps its Cartesian
# direction (docs/robot.md).
_ARM_STIFFNESS = (2000.0, 2000.0, 1500.0, 300.0, 300.0, 300.0)
_ARM_DAMPING = tuple(kp / 20.0 for kp in _ARM_STIFFNESS)
# Reflected rotor inertia (not published either; order of magnitude of a
# 100:1 harmonic drive).
_ARM_ARMATURE = (0.3, 0.3, 0.2, 0.05, 0.05, 0.05)

# Gripper: normalized position actuator on the opening tendon, seed numbers.
GRIPPER_KP = 12.0
GRIPPER_KV = 0.4
GRIPPER_EFFORT_LIMIT = 3.0


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
      _ARM_STIFFNESS,
      _ARM_DAMPING,
      ARM_JOINT_EFFORT_LIMIT,
      _ARM_ARMATURE,
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
