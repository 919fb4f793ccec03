"""Action terms shared by every task: Cartesian IK, joint targets, gripper.

Control scheme (the bin-picking specification's): policy actions at 20 Hz over 1 kHz physics. Both
arm terms write, every physics step, a position target ``q + dq`` whose joint
step is bounded by ``max_dq`` with direction-preserving limiting (the whole
step is scaled, never clipped per joint), and add the arm's bias forces
(gravity, Coriolis) as applied joint forces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from mjlab.managers.action_manager import ActionTerm, ActionTermCfg
from mjlab.utils.lab_api.math import (
  axis_angle_from_quat,
  quat_from_angle_axis,
  quat_from_matrix,
  quat_inv,
  quat_mul,
)

from assets.ur5_rg2.kinematics import dls_step_batched

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


def require_finite(actions: torch.Tensor, term_name: str) -> None:
  """Raise ``ValueError`` naming the environments whose actions are NaN/inf.

  MuJoCo Warp would silently clamp such controls to the control bounds.
  """
  bad = ~torch.isfinite(actions).all(dim=-1)
  if bool(bad.any()):
    env_ids = torch.nonzero(bad).flatten().tolist()
    raise ValueError(
      f"Action term '{term_name}' received NaN or infinite actions in "
      f"environment(s) {env_ids}."
    )


def limit_joint_step(dq: torch.Tensor, max_dq: float) -> torch.Tensor:
  """Scale each row of ``dq`` [B, n] so its largest entry is at most ``max_dq``.

  The direction of the joint step is preserved.
  """
  largest = dq.abs().amax(dim=-1, keepdim=True)
  scale = torch.clamp(max_dq / largest.clamp_min(1e-12), max=1.0)
  return dq * scale


class _ArmActionBase(ActionTerm):
  """Resolves the arm joints and applies the bounded target and bias terms."""

  cfg: _ArmActionCfgBase

  def __init__(self, cfg: _ArmActionCfgBase, env: ManagerBasedRlEnv):
    super().__init__(cfg=cfg, env=env)
    local_ids, names = self._entity.find_joints(cfg.joint_names, preserve_order=True)
    self._joint_local_ids = torch.tensor(local_ids, device=self.device)
    self._joint_names = names
    self._joint_global_ids = self._entity.indexing.joint_ids[self._joint_local_ids]
    self._dof_ids = self._entity.indexing.joint_v_adr[self._joint_local_ids]
    self._qpos_ids = self._entity.indexing.joint_q_adr[self._joint_local_ids]
    n = len(local_ids)
    # Last joint steps, kept for inspection (tests, diagnostics).
    self.unlimited_dq = torch.zeros(self.num_envs, n, device=self.device)
    self.limited_dq = torch.zeros(self.num_envs, n, device=self.device)

  def _joint_pos(self) -> torch.Tensor:
    return self._env.sim.data.qpos[:, self._qpos_ids]

  def _apply_joint_step(self, dq: torch.Tensor) -> None:
    self.unlimited_dq[:] = dq
    self.limited_dq[:] = limit_joint_step(dq, self.cfg.max_dq)
    target = self._joint_pos() + self.limited_dq
    self._entity.set_joint_position_target(target, joint_ids=self._joint_local_ids)
    if self.cfg.bias_compensation:
      data = self._env.sim.data
      data.qfrc_applied[:, self._dof_ids] = data.qfrc_bias[:, self._dof_ids]


@dataclass(kw_only=True)
class _ArmActionCfgBase(ActionTermCfg):
  joint_names: tuple[str, ...]
  """Arm joints controlled by the term, in action order."""

  max_dq: float = 0.025
  """Largest joint step [rad] per physics step (direction-preserving)."""

  bias_compensation: bool = True
  """Add the arm's bias forces (gravity, Coriolis) as applied joint forces."""


@dataclass(kw_only=True)
class CartesianPoseActionCfg(_ArmActionCfgBase):
  """6-D delta pose of a tool site, tracked by bounded position-target IK.

  Action ``[dx, dy, dz, rx, ry, rz]`` in the world frame: translation in units
  of ``translation_scale`` metres, rotation (axis-angle) in units of
  ``rotation_scale`` radians. Damped least squares IK runs every physics step.

  With ``use_target`` (default) each action moves the previous target pose,
  as ManiSkill's ``pd_ee_delta_pose`` with ``use_target=True`` does: a zero
  action holds the pose without drift and servo lag does not accumulate. The
  target never leads the tool by more than ``max_target_lead`` metres, so a
  blocked arm does not wind up. Without it, deltas apply to the tool pose when
  the action arrives (mjlab's and Isaac Lab's relative mode).
  """

  site_name: str
  """Tool centre point site on the entity."""

  translation_scale: float = 0.005
  rotation_scale: float = math.radians(1.0)
  damping: float = 0.01
  """DLS damping (lambda) of the 6x6 task-space solve."""

  use_target: bool = True
  """Apply deltas to the previous target pose rather than the current pose."""

  max_target_lead: float = 0.02
  """Largest distance [m] the target position may lead the tool."""

  rotation_bound: float = math.radians(4.0)
  """The rotation actions' useful range [rad] per policy step (4 degrees:
  80 degrees/s at 20 Hz; +-4 actions at 1 degree per unit). A choice, not a
  limit of the controller, which turns the target by any rotation;
  translation is bounded by the controller itself (``bounds``). The scripted
  cube-in-tray expert never exceeds 1 unit, the bin-picking expert 4."""

  def build(self, env: ManagerBasedRlEnv) -> CartesianPoseAction:
    return CartesianPoseAction(self, env)


class CartesianPoseAction(_ArmActionBase):
  cfg: CartesianPoseActionCfg

  def __init__(self, cfg: CartesianPoseActionCfg, env: ManagerBasedRlEnv):
    super().__init__(cfg=cfg, env=env)
    site_local, _ = self._entity.find_sites(cfg.site_name, preserve_order=True)
    if len(site_local) != 1:
      raise ValueError(f"Site '{cfg.site_name}' must match exactly one site.")
    self._site_id = int(self._entity.indexing.site_ids[site_local[0]])
    self._raw_actions = torch.zeros(self.num_envs, 6, device=self.device)
    self.desired_pos_w = torch.zeros(self.num_envs, 3, device=self.device)
    self.desired_quat_w = torch.zeros(self.num_envs, 4, device=self.device)
    self.desired_quat_w[:, 0] = 1.0
    self._has_target = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

  @property
  def site_id(self) -> int:
    """The tool site's model index."""
    return self._site_id

  @property
  def joint_local_ids(self) -> torch.Tensor:
    """The arm joints' indices within the robot entity."""
    return self._joint_local_ids

  @property
  def action_dim(self) -> int:
    return 6

  @property
  def raw_action(self) -> torch.Tensor:
    return self._raw_actions

  @property
  def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
    """Each action's useful range, low and high [6] (action units).

    Translation: ``max_target_lead / translation_scale``, twice that with
    ``use_target``: the term moves its previous target, which may lead the
    tool by up to ``max_target_lead``, and keeps the new target within
    ``max_target_lead`` of the tool, so every target it can set is set
    within the bound (20 mm lead, 5 mm units: +-8); past it along the
    previous lead's axis the same target is set as at it. Rotation:
    ``rotation_bound / rotation_scale`` (a choice: the term has no limit).
    """
    cfg = self.cfg
    move = (2.0 if cfg.use_target else 1.0) * cfg.max_target_lead
    move /= cfg.translation_scale
    turn = cfg.rotation_bound / cfg.rotation_scale
    high = torch.tensor([move] * 3 + [turn] * 3, device=self.device)
    return -high, high

  def target_lead_w(self) -> torch.Tensor:
    """How far the target position leads the tool now, world frame [B, 3]
    (zero before the first action after a reset): a tool pressing on
    something it cannot move holds it at ``max_target_lead``."""
    lead = self.desired_pos_w - self.tool_pose_w()[0]
    return lead * self._has_target.unsqueeze(-1)

  @property
  def has_target(self) -> torch.Tensor:
    """Environments whose target pose is set (an action arrived since reset) [B];
    set rows in place to hold a pose commanded directly."""
    return self._has_target

  def tool_pose_w(self) -> tuple[torch.Tensor, torch.Tensor]:
    """Current tool position [B, 3] and quaternion (w, x, y, z) [B, 4]."""
    data = self._env.sim.data
    pos = data.site_xpos[:, self._site_id]
    quat = quat_from_matrix(data.site_xmat[:, self._site_id].reshape(-1, 3, 3))
    return pos, quat

  def process_actions(self, actions: torch.Tensor) -> None:
    require_finite(actions, "cartesian_pose")
    self._raw_actions[:] = actions
    pos, quat = self.tool_pose_w()
    if self.cfg.use_target:
      keep = self._has_target.unsqueeze(-1)
      pos_base = torch.where(keep, self.desired_pos_w, pos)
      quat_base = torch.where(keep, self.desired_quat_w, quat)
    else:
      pos_base, quat_base = pos, quat
    target = pos_base + actions[:, :3] * self.cfg.translation_scale
    lead = target - pos
    lead_norm = torch.linalg.vector_norm(lead, dim=-1, keepdim=True)
    shrink = torch.clamp(self.cfg.max_target_lead / lead_norm.clamp_min(1e-12), max=1.0)
    self.desired_pos_w[:] = pos + lead * shrink
    rotvec = actions[:, 3:6] * self.cfg.rotation_scale
    angle = torch.linalg.vector_norm(rotvec, dim=-1)
    axis = rotvec / angle.clamp_min(1e-12).unsqueeze(-1)
    axis[angle < 1e-12] = torch.tensor([1.0, 0.0, 0.0], device=self.device)
    self.desired_quat_w[:] = quat_mul(quat_from_angle_axis(angle, axis), quat_base)
    self._has_target[:] = True

  def jacobian(self) -> torch.Tensor:
    """Geometric Jacobian [B, 6, n] of the tool site for the arm joints.

    Exact for a serial chain of hinge joints: column j is
    ``[axis_j x (p - anchor_j); axis_j]`` in the world frame.
    """
    data = self._env.sim.data
    axis = data.xaxis[:, self._joint_global_ids]  # [B, n, 3]
    anchor = data.xanchor[:, self._joint_global_ids]  # [B, n, 3]
    p = data.site_xpos[:, self._site_id].unsqueeze(1)  # [B, 1, 3]
    jacp = torch.cross(axis, p - anchor, dim=-1)
    return torch.cat([jacp, axis], dim=-1).transpose(1, 2)

  def apply_actions(self) -> None:
    pos, quat = self.tool_pose_w()
    pos_err = self.desired_pos_w - pos
    rot_err = axis_angle_from_quat(quat_mul(self.desired_quat_w, quat_inv(quat)))
    err = torch.cat([pos_err, rot_err], dim=-1)  # [B, 6]
    # Hold the current pose until the first action after a reset arrives.
    err[~self._has_target] = 0.0
    dq = dls_step_batched(self.jacobian(), err, self.cfg.damping)
    self._apply_joint_step(dq)

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    if env_ids is None:
      env_ids = slice(None)
    self._raw_actions[env_ids] = 0.0
    self._has_target[env_ids] = False


def action_bounds(env: ManagerBasedRlEnv) -> tuple[torch.Tensor, torch.Tensor]:
  """Each action's useful range in the action manager's order, low and high
  [total_action_dim]: beyond it an action does nothing more (each term's
  ``bounds``; unbounded for a term without them)."""
  manager = env.action_manager
  lows, highs = [], []
  for name in manager.active_terms:
    term = manager.get_term(name)
    bounds = getattr(term, "bounds", None)
    if bounds is None:
      inf = torch.full((term.action_dim,), torch.inf, device=env.device)
      bounds = (-inf, inf)
    lows.append(bounds[0])
    highs.append(bounds[1])
  if not lows:
    empty = torch.zeros(0, device=env.device)
    return empty, empty
  return torch.cat(lows), torch.cat(highs)


@dataclass(kw_only=True)
class JointTargetActionCfg(_ArmActionCfgBase):
  """Absolute arm joint targets [rad], approached with the bounded joint step."""

  def build(self, env: ManagerBasedRlEnv) -> JointTargetAction:
    return JointTargetAction(self, env)


class JointTargetAction(_ArmActionBase):
  cfg: JointTargetActionCfg

  def __init__(self, cfg: JointTargetActionCfg, env: ManagerBasedRlEnv):
    super().__init__(cfg=cfg, env=env)
    self._raw_actions = torch.zeros(
      self.num_envs, len(self._joint_names), device=self.device
    )
    self._has_target = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

  @property
  def action_dim(self) -> int:
    return len(self._joint_names)

  @property
  def raw_action(self) -> torch.Tensor:
    return self._raw_actions

  @property
  def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
    """The joints' position limits, low and high [n] [rad] (unbounded for an
    unlimited joint): no target beyond them is reached."""
    model = self._env.sim.mj_model
    ids = self._joint_global_ids.cpu().numpy()
    limited = torch.as_tensor(model.jnt_limited[ids].astype(bool))
    limits = torch.as_tensor(model.jnt_range[ids], dtype=torch.float32)
    inf = torch.full_like(limits[:, 0], torch.inf)
    low = torch.where(limited, limits[:, 0], -inf)
    high = torch.where(limited, limits[:, 1], inf)
    return low.to(self.device), high.to(self.device)

  def process_actions(self, actions: torch.Tensor) -> None:
    require_finite(actions, "joint_target")
    self._raw_actions[:] = actions
    self._has_target[:] = True

  def apply_actions(self) -> None:
    dq = self._raw_actions - self._joint_pos()
    dq[~self._has_target] = 0.0
    self._apply_joint_step(dq)

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    if env_ids is None:
      env_ids = slice(None)
    self._raw_actions[env_ids] = 0.0
    self._has_target[env_ids] = False


@dataclass(kw_only=True)
class GripperActionCfg(ActionTermCfg):
  """Normalized gripper position: -1 closed, +1 open.

  Drives a position actuator on a tendon whose length is the normalized
  opening; out-of-range actions are clipped to [-1, 1].
  """

  tendon_name: str

  held_at: float | None = None
  """Hold the gripper at this opening and take no action (action_dim 0)."""

  def build(self, env: ManagerBasedRlEnv) -> GripperAction:
    return GripperAction(self, env)


class GripperAction(ActionTerm):
  cfg: GripperActionCfg

  def __init__(self, cfg: GripperActionCfg, env: ManagerBasedRlEnv):
    super().__init__(cfg=cfg, env=env)
    ids, _ = self._entity.find_tendons(cfg.tendon_name, preserve_order=True)
    if len(ids) != 1:
      raise ValueError(f"Tendon '{cfg.tendon_name}' must match exactly one tendon.")
    self._tendon_ids = torch.tensor(ids, device=self.device)
    self._raw_actions = torch.ones(self.num_envs, 1, device=self.device)
    if cfg.held_at is not None:
      self._raw_actions[:] = cfg.held_at

  @property
  def action_dim(self) -> int:
    return 0 if self.cfg.held_at is not None else 1

  @property
  def bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
    """The action's range, low and high [action_dim]: the term clips to
    [-1, 1]."""
    high = torch.ones(self.action_dim, device=self.device)
    return -high, high

  @property
  def raw_action(self) -> torch.Tensor:
    return self._raw_actions

  @property
  def opening(self) -> torch.Tensor:
    """The gripper's current normalized opening, the tendon's length [B]
    (the action that would hold it where it is)."""
    return self._entity.data.tendon_len[:, self._tendon_ids[0]]

  def process_actions(self, actions: torch.Tensor) -> None:
    if self.cfg.held_at is not None:
      return
    require_finite(actions, "gripper")
    self._raw_actions[:] = actions

  def apply_actions(self) -> None:
    self._entity.set_tendon_len_target(
      self._raw_actions.clamp(-1.0, 1.0), tendon_ids=self._tendon_ids
    )

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    if env_ids is None:
      env_ids = slice(None)
    held = self.cfg.held_at
    self._raw_actions[env_ids] = 1.0 if held is None else held
