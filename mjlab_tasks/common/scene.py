"""The suite's common environment: UR5 + RG2 on a table, 1 kHz physics, 20 Hz policy."""

from __future__ import annotations

from typing import Literal

import mujoco
from mjlab.entity import EntityCfg
from mjlab.envs import ManagerBasedRlEnvCfg
from mjlab.envs.mdp import observations as mjlab_obs
from mjlab.managers.action_manager import ActionTermCfg
from mjlab.managers.observation_manager import ObservationGroupCfg, ObservationTermCfg
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.scene import SceneCfg
from mjlab.sensor import ContactMatch, ContactSensorCfg
from mjlab.sim import MujocoCfg, SimulationCfg
from mjlab.terrains import TerrainEntityCfg
from mjlab.viewer import ViewerConfig

from assets.ur5_rg2 import (
  ARM_JOINT_NAMES,
  GRIPPER_ACTUATOR_NAME,
  HAND_BODY_NAME,
  TCP_SITE_NAME,
  ur5_rg2_entity_cfg,
)
from mjlab_tasks.common import mdp
from mjlab_tasks.common.actions import (
  CartesianPoseActionCfg,
  GripperActionCfg,
  JointTargetActionCfg,
)

PHYSICS_DT = 0.001  # 1 kHz physics (the bin-picking specification).
POLICY_DT = 0.05  # 20 Hz policy actions.
DECIMATION = round(POLICY_DT / PHYSICS_DT)

ROBOT = "robot"


def physics_cfg(nconmax: int | None = None, njmax: int | None = None) -> SimulationCfg:
  """1 kHz implicitfast physics with an elliptic cone and impratio 10.

  The elliptic cone with impratio 10 keeps soft-contact creep of a parallel
  pinch below a millimetre over seconds (shared/notes/pinch-hold.md).
  """
  return SimulationCfg(
    nconmax=nconmax,
    njmax=njmax,
    mujoco=MujocoCfg(
      timestep=PHYSICS_DT,
      integrator="implicitfast",
      cone="elliptic",
      impratio=10.0,
      iterations=20,
      ls_iterations=20,
    ),
  )


def wrist_force_sensor_cfg(entity: str = ROBOT) -> ContactSensorCfg:
  """Wrist force/torque: the net contact wrench on the hand, gravity excluded.

  The sum of every contact force acting on the RG2 subtree (fingers, pads and
  any attached camera), which is what a flange sensor reads after its tare.
  """
  return ContactSensorCfg(
    name="wrist_force",
    primary=ContactMatch(mode="subtree", pattern=HAND_BODY_NAME, entity=entity),
    fields=("found", "force", "torque"),
    reduce="netforce",
  )


def arm_action_cfg(
  kind: Literal["cartesian", "joint"], unit_bounds: bool = False
) -> ActionTermCfg:
  """The arm's action term. ``unit_bounds`` (Cartesian only): scale the
  actions so that +-1 is the term's bound (``CartesianPoseAction.bounds``,
  20 mm of target lead twice over and 4 degrees per step), as ManiSkill's
  normalized ``pd_ee_delta_pose``: every useful action is then in [-1, 1],
  the demonstration format's range. Without it, 1 unit is 5 mm and 1 degree
  (the bounds are +-8 and +-4)."""
  if kind == "cartesian":
    cfg = CartesianPoseActionCfg(
      entity_name=ROBOT, joint_names=ARM_JOINT_NAMES, site_name=TCP_SITE_NAME
    )
    if unit_bounds:
      cfg.translation_scale = 2.0 * cfg.max_target_lead
      cfg.rotation_scale = cfg.rotation_bound
    return cfg
  if kind == "joint":
    return JointTargetActionCfg(entity_name=ROBOT, joint_names=ARM_JOINT_NAMES)
  raise ValueError(f"Unknown arm action kind '{kind}' (use 'cartesian' or 'joint').")


def robot_observations() -> dict[str, ObservationTermCfg]:
  """Proprioception available to any policy."""
  return {
    "joint_pos": ObservationTermCfg(
      func=mjlab_obs.joint_pos_rel,
      params={"asset_cfg": SceneEntityCfg(ROBOT, joint_names=ARM_JOINT_NAMES)},
    ),
    "joint_vel": ObservationTermCfg(
      func=mjlab_obs.joint_vel_rel,
      params={"asset_cfg": SceneEntityCfg(ROBOT, joint_names=ARM_JOINT_NAMES)},
    ),
    "tcp_pose": ObservationTermCfg(
      func=mdp.site_pose_w,
      params={"asset_cfg": SceneEntityCfg(ROBOT, site_names=(TCP_SITE_NAME,))},
    ),
    "gripper_opening": ObservationTermCfg(
      func=mdp.tendon_length,
      params={
        "asset_cfg": SceneEntityCfg(ROBOT, tendon_names=(GRIPPER_ACTUATOR_NAME,))
      },
    ),
    "actions": ObservationTermCfg(func=mjlab_obs.last_action),
  }


def make_robot_env_cfg(
  entities: dict[str, EntityCfg] | None = None,
  arm_action: Literal["cartesian", "joint"] = "cartesian",
  with_camera: bool = False,
  num_envs: int = 1,
  episode_length_s: float = 20.0,
  env_spacing: float = 2.0,
  unit_bounds: bool = False,
) -> ManagerBasedRlEnvCfg:
  """UR5 + RG2 on a table top (the z = 0 plane), plus the given entities.

  Args:
    entities: Extra scene entities (objects, trays, bins) by name.
    arm_action: ``"cartesian"`` (6-D delta pose, IK) or ``"joint"`` (targets).
    with_camera: Attach the wrist D415 on mount v4 (no camera sensor is created
      here; tasks add one only when images are requested).
    num_envs: Number of parallel environments.
    episode_length_s: Episode length in simulated seconds.
    env_spacing: Distance between environment origins [m].
    unit_bounds: Cartesian actions scaled so that +-1 is the term's bound
      (``arm_action_cfg``).
  """
  scene_entities = {ROBOT: ur5_rg2_entity_cfg(with_camera=with_camera)}
  scene_entities.update(entities or {})
  return ManagerBasedRlEnvCfg(
    scene=SceneCfg(
      num_envs=num_envs,
      env_spacing=env_spacing,
      terrain=TerrainEntityCfg(terrain_type="plane"),
      entities=scene_entities,
      sensors=(wrist_force_sensor_cfg(),),
    ),
    observations={
      "actor": ObservationGroupCfg(robot_observations(), enable_corruption=False),
    },
    actions={
      "arm": arm_action_cfg(arm_action, unit_bounds),
      "gripper": GripperActionCfg(entity_name=ROBOT, tendon_name=GRIPPER_ACTUATOR_NAME),
    },
    sim=physics_cfg(),
    decimation=DECIMATION,
    episode_length_s=episode_length_s,
    viewer=ViewerConfig(
      origin_type=ViewerConfig.OriginType.ASSET_BODY,
      entity_name=ROBOT,
      body_name=HAND_BODY_NAME,
      distance=1.5,
      elevation=-20.0,
      azimuth=135.0,
    ),
  )


def cube_entity_cfg(
  half_size: float = 0.02,
  mass: float = 0.05,
  pos: tuple[float, float, float] = (0.5, 0.0, 0.02),
  rgba: tuple[float, float, float, float] = (0.85, 0.2, 0.2, 1.0),
) -> EntityCfg:
  """A free cube (default: 40 mm, 50 g)."""

  def spec() -> mujoco.MjSpec:
    s = mujoco.MjSpec()
    body = s.worldbody.add_body(name="cube")
    body.add_freejoint(name="cube_joint")
    body.add_geom(
      name="cube_geom",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[half_size] * 3,
      mass=mass,
      rgba=list(rgba),
      condim=4,
      friction=[1.0, 0.005, 0.0001],
    )
    return s

  return EntityCfg(init_state=EntityCfg.InitialStateCfg(pos=pos), spec_fn=spec)
