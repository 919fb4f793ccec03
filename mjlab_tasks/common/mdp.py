"""Observation and reward terms shared by the suite's tasks (pure functions of env)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.utils.lab_api.math import quat_apply_inverse, quat_mul

from mjlab_tasks.common.actions import action_bounds

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


def site_id(env: ManagerBasedRlEnv, site: str, entity_name: str = "robot") -> int:
  """Global MuJoCo id of one of an entity's sites (``find_sites`` matches
  regular expressions on every call: the id is found once per entity)."""
  entity = env.scene[entity_name]
  ids = entity.__dict__.setdefault("_site_id_by_name", {})
  if site not in ids:
    ids[site] = int(entity.indexing.site_ids[entity.find_sites(site)[0][0]])
  return ids[site]


def root_pos_w(env: ManagerBasedRlEnv, name: str) -> torch.Tensor:
  """An entity's root body position, world frame [num_envs, 3]: what
  ``entity.data.root_link_pos_w`` reads, without building the whole pose
  (these terms run every policy step; each saved tensor operation counts
  at one environment)."""
  return env.sim.data.xpos[:, env.scene[name].indexing.root_body_id]


def root_quat_w(env: ManagerBasedRlEnv, name: str) -> torch.Tensor:
  """An entity's root body quaternion (w, x, y, z), world frame [num_envs, 4]
  (``entity.data.root_link_quat_w``; see ``root_pos_w``)."""
  return env.sim.data.xquat[:, env.scene[name].indexing.root_body_id]


def site_pose_w(env: ManagerBasedRlEnv, asset_cfg: SceneEntityCfg) -> torch.Tensor:
  """Position and quaternion (w, x, y, z) of one site relative to the env origin.

  The quaternion is the site's body's ``xquat`` times the site's local
  ``site_quat`` (``quat_from_matrix`` of ``site_xmat`` costs about 0.13 ms a
  call at one environment), signed as ``quat_from_matrix`` signs it: the
  largest component positive.

  Returns:
    [num_envs, 7]
  """
  names = asset_cfg.site_names
  sid = site_id(env, names if isinstance(names, str) else names[0], asset_cfg.name)
  body = int(env.sim.mj_model.site_bodyid[sid])
  pos = env.sim.data.site_xpos[:, sid] - env.scene.env_origins
  quat = quat_mul(env.sim.data.xquat[:, body], env.sim.model.site_quat[:, sid])
  largest = quat.abs().argmax(dim=-1, keepdim=True)
  quat = quat * torch.gather(quat, -1, largest).sign()
  return torch.cat([pos, quat], dim=-1)


def tendon_length(env: ManagerBasedRlEnv, asset_cfg: SceneEntityCfg) -> torch.Tensor:
  """Lengths of the selected tendons (the RG2 opening is normalized to -1..+1).

  Returns:
    [num_envs, n_tendons]
  """
  entity = env.scene[asset_cfg.name]
  return entity.data.tendon_len[:, asset_cfg.tendon_ids]


def root_pose(env: ManagerBasedRlEnv, asset_cfg: SceneEntityCfg) -> torch.Tensor:
  """Root position (relative to the env origin) and quaternion of an entity.

  Returns:
    [num_envs, 7]
  """
  entity = env.scene[asset_cfg.name]
  pose = entity.data.root_link_pose_w.clone()
  pose[:, :3] -= env.scene.env_origins
  return pose


def wrist_force(
  env: ManagerBasedRlEnv, sensor_name: str = "wrist_force"
) -> torch.Tensor:
  """Net contact force acting on the hand, world frame, gravity excluded.

  MuJoCo's contact sensor reports the force the primary (the hand) exerts on
  the rest of the world; the wrist sensor reads its reaction.

  Returns:
    [num_envs, 3]
  """
  return -env.scene.sensors[sensor_name].data.force.reshape(env.num_envs, 3)


def wrist_torque(
  env: ManagerBasedRlEnv, sensor_name: str = "wrist_force"
) -> torch.Tensor:
  """Net contact torque acting on the hand, world frame (see ``wrist_force``).

  Returns:
    [num_envs, 3]
  """
  return -env.scene.sensors[sensor_name].data.torque.reshape(env.num_envs, 3)


def physics_health(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """Per-environment physics problems, on either engine (bool [num_envs] each).

  ``contact_overflow``: the contact or constraint buffer overflowed this step
  (MuJoCo Warp's per-world ``overflow`` bitmask; the C engine maps its
  arena warnings onto the same bits). ``nonfinite``: NaN or infinite
  positions or velocities, or a diverged acceleration.
  """
  data = env.sim.data
  overflow = torch.as_tensor(data.overflow[:]) != 0
  state = torch.cat([data.qpos[:], data.qvel[:]], dim=-1)
  nonfinite = ~torch.isfinite(state).all(dim=-1)
  unstable = getattr(data, "unstable", None)
  if unstable is not None:
    nonfinite = nonfinite | unstable
  return {"contact_overflow": overflow.to(nonfinite.device), "nonfinite": nonfinite}


def max_penetration(env: ManagerBasedRlEnv) -> tuple[torch.Tensor, torch.Tensor]:
  """Deepest contact penetration this step per environment [num_envs] [m]
  (0 where no contact penetrates), on either engine; and that contact's geom
  pair [num_envs, 2] where the engine reports it (C MuJoCo), else -1."""
  sim = env.sim
  if hasattr(sim, "contact_penetration"):  # C MuJoCo engine.
    depth, pair = sim.contact_penetration()
    return depth.to(env.device), pair.to(env.device)
  import warp as wp

  data = sim.wp_data
  count = int(data.nacon.numpy()[0])
  depth = torch.zeros(env.num_envs, device=env.device)
  if count:
    dist = wp.to_torch(data.contact.dist)[:count]
    world = wp.to_torch(data.contact.worldid)[:count].long()
    depth.scatter_reduce_(0, world, (-dist).clamp_min(0.0).float(), reduce="amax")
  return depth, torch.full((env.num_envs, 2), -1, dtype=torch.long, device=env.device)


def target_lead_b(
  env: ManagerBasedRlEnv, action: str = "arm", robot: str = "robot"
) -> torch.Tensor:
  """How far the Cartesian action's target leads the tool, in the robot base
  frame [m], [num_envs, 3]: the controller state the actions accumulate (a
  tool pushing on something holds it at ``max_target_lead``)."""
  lead = env.action_manager.get_term(action).target_lead_w()
  return quat_apply_inverse(root_quat_w(env, robot), lead)


def target_lead(env: ManagerBasedRlEnv, action: str = "arm") -> torch.Tensor:
  """Penalty: the target's lead on the tool over ``max_target_lead``, in
  [0, 1], [num_envs]. Pressing on what the tool cannot move costs 1 per
  step; tracking a reachable target costs little."""
  term = env.action_manager.get_term(action)
  lead = torch.linalg.vector_norm(term.target_lead_w(), dim=-1)
  return lead / term.cfg.max_target_lead


def action_beyond_bounds(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Penalty: how far the actions go beyond the range where they still act
  (``actions.action_bounds``), summed over the actions, [num_envs]. Beyond
  it a policy's mean action gets no signal from the task, so it can drift
  out of exploration's reach (e.g. a gripper command of -6 that no noise
  opens)."""
  low, high = action_bounds(env)
  action = env.action_manager.action
  excess = (action - high).clamp_min(0.0) + (low - action).clamp_min(0.0)
  return excess.sum(dim=-1)
