"""Reference expert for cube in tray (the cube-in-tray specification), batched
over environments.

Privileged: reads the cube's and the tray's true poses. For each environment
it plans seven tool poses (``plan_tool_poses``) and executes them in one of
two modes, chosen by the environment's arm action term:

  joint      (``arm_action="joint"``) each pose becomes an absolute joint
             target, solved with IK on the CPU replica (C MuJoCo)
  cartesian  (``arm_action="cartesian"``, the policy's action space) each
             step issues the task's 20 Hz normalized delta pose toward the
             pose, within [-1, 1], and the gripper command

The seven actions:

  1 approach   above the cube, gripper open, closing axis on a face pair
  2 descend    to the grasp pose
  3 close      gripper closed (-1), arm holds
  4 lift       straight up
  5 traverse   above the tray centre, cube turned square to the tray
  6 lower      cube bottom just above the tray floor
  7 release    first relaxed for ``release_relax`` (the gripper held at its
               current opening, the arm at the lowered pose), then half open
               (+0 = 55 mm, clear of the walls) while the tool rises
               ``retreat_height``: the fingers open within a few
               milliseconds, long before the bounded arm step has moved the
               tool, and rising keeps a grazing pad off the released cube

An action ends when its target is reached (every arm joint within
``joint_tol``; in Cartesian mode the tool within ``pose_tol`` of the pose and
``yaw_tol`` of its turn) and its minimum duration has passed, or at its
timeout. Execution is tensor code over all environments; planning runs only
when environments get a new plan (at reset): the joint mode's IK in a thread
pool, the Cartesian mode's poses as array code.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from mjlab.utils.lab_api.math import (
  axis_angle_from_quat,
  matrix_from_quat,
  quat_from_matrix,
  quat_inv,
  quat_mul,
  yaw_quat,
)

from assets.ur5_rg2 import ARM_JOINT_NAMES
from assets.ur5_rg2.kinematics import ArmKinematics, tool_down_rotation
from mjlab_tasks.common.actions import CartesianPoseAction, JointTargetAction

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

ACTION_NAMES = ("approach", "descend", "close", "lift", "traverse", "lower", "release")
GRIPPER_OPEN, GRIPPER_CLOSED, GRIPPER_RELEASE = 1.0, -1.0, 0.0
GRIPPER_PLAN = (GRIPPER_OPEN, GRIPPER_OPEN) + (GRIPPER_CLOSED,) * 4 + (GRIPPER_RELEASE,)
"""Gripper command of each action."""


@dataclass(frozen=True)
class CubeTrayExpertCfg:
  cube_half: float = 0.02
  tray_floor_top: float = 0.005
  approach_height: float = 0.10
  """Tool height above the grasp point for the approach [m]."""
  carry_height: float = 0.15
  """Cube centre height while carried [m]."""
  release_gap: float = 0.002
  """Cube bottom above the tray floor at release [m]."""
  retreat_height: float = 0.05
  """How far the tool rises during the release action [m]."""
  release_relax: float = 0.2
  """How long the release first holds the gripper at its current opening
  [s], so the closed pads' spring-back (they sink millimetres into the cube)
  dies out before they open. Opened at once, the two pads' unequal
  spring-back shifted half the cubes by over 3 mm and threw some 20 mm, one
  against a tray wall where it came to rest tilted; opened after 0.1 s, still
  springing, it threw more; after 0.15 to 0.4 s none moved over 2 mm
  (measured: 48 placements per value, 224 at 0.2 s)."""
  min_duration: tuple[float, ...] = (0.5, 0.3, 0.5, 0.3, 0.5, 0.3, 0.4)
  """Shortest time per action [s] (gripper actions need it to act)."""
  timeout: float = 3.0
  """Longest time per action [s]."""
  joint_tol: float = 0.01
  """Joint mode: arm joint error [rad] that counts as having reached an
  action's target."""
  pose_tol: tuple[float, ...] = (0.02, 0.003, 0.01, 0.03, 0.04, 0.003, 0.01)
  """Cartesian mode: tool position error [m] per action that counts as having
  reached its pose. Loose for the poses the tool only passes (approach, lift,
  traverse), so the arm does not stop at them: the next action's straight
  path ends on an exact pose and takes up the rest. Approach: the open pads
  still clear the cube's faces by over 20 mm as they pass its top. Lift: the
  cube clears the tray's walls (35 mm) before the traverse. Traverse: the
  lowering cube passes the near wall's top 19 mm above it."""
  yaw_tol: float = math.radians(2.0)
  """Cartesian mode: tool rotation error [rad] that counts as reached."""
  num_workers: int = 2
  """Threads for CPU IK planning (joint mode)."""


CARTESIAN_EXPERT_CFG = CubeTrayExpertCfg(
  # The policy's actions move the tool at most 5 mm per step and axis
  # (0.1 m/s), far slower than joint targets: a lower flight and no dwell at
  # the pass-through poses keep the worst placements inside the 12 s episode.
  approach_height=0.06,  # pad bottoms 22 mm above the cube's top
  carry_height=0.09,  # cube bottom 35 mm above the tray's walls
  min_duration=(0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.4),
  timeout=6.0,  # the longest traverse (0.5 m) takes 5 s
)
"""Defaults of the Cartesian mode."""


@dataclass
class CubeTrayPlan:
  """Per-environment joint-mode plan: joint targets [7, 6]."""

  joints: np.ndarray
  ok: bool
  """All six IK solutions converged."""


def nearest_square_yaw(yaw, reference):
  """The angle ``yaw + k * 90 degrees`` closest to ``reference`` (elementwise).

  A cube is square under quarter turns and the gripper under half turns, so
  every such tool yaw closes on a pair of faces; the nearest one turns the
  wrist least.
  """
  quarter = math.pi / 2
  return yaw + quarter * np.round((reference - yaw) / quarter)


def tool_yaw(rot: np.ndarray):
  """Yaw of the tool's closing axis (its x axis) about world z; ``rot`` [..., 3, 3]."""
  return np.arctan2(rot[..., 1, 0], rot[..., 0, 0])


def plan_tool_poses(
  cube_pos: np.ndarray,
  cube_yaw,
  tray_pos: np.ndarray,
  start_yaw,
  cfg: CubeTrayExpertCfg = CubeTrayExpertCfg(),
) -> tuple[np.ndarray, np.ndarray]:
  """Tool positions [..., 7, 3] and closing-axis yaws [..., 7] of the seven
  actions (environment frame; the tool points down), for one environment or
  a batch along the leading dimensions. ``start_yaw``: the tool's yaw now."""
  grasp = np.asarray(cube_pos, dtype=float)
  tray = np.asarray(tray_pos, dtype=float)
  yaw = nearest_square_yaw(np.asarray(cube_yaw, dtype=float), start_yaw)
  # Square to the tray (a multiple of 90 degrees) with the least wrist turn.
  place_yaw = nearest_square_yaw(0.0, yaw)
  up = np.array([0.0, 0.0, 1.0])
  above_cube = grasp + cfg.approach_height * up
  lifted = grasp.copy()
  lifted[..., 2] = cfg.carry_height
  above_tray = tray.copy()
  above_tray[..., 2] = cfg.carry_height
  in_tray = tray.copy()
  # Summed term by term in the input's precision, as the joint expert always
  # has, so that its earlier runs replay bit for bit.
  in_tray[..., 2] = (
    np.asarray(tray_pos)[..., 2] + cfg.tray_floor_top + cfg.cube_half + cfg.release_gap
  )
  retreat = in_tray + cfg.retreat_height * up
  positions = np.stack(
    (above_cube, grasp, grasp, lifted, above_tray, in_tray, retreat), axis=-2
  )
  yaws = np.stack((yaw, yaw, yaw, yaw, place_yaw, place_yaw, place_yaw), axis=-1)
  return positions, yaws


def plan_cube_tray(
  kin: ArmKinematics,
  cube_pos: np.ndarray,
  cube_yaw: float,
  tray_pos: np.ndarray,
  q_start: np.ndarray,
  cfg: CubeTrayExpertCfg = CubeTrayExpertCfg(),
) -> CubeTrayPlan:
  """Seven joint-space actions for one environment (environment frame poses)."""
  q_start = np.asarray(q_start, dtype=float)
  start_yaw = tool_yaw(kin.tool_pose(q_start)[1])
  positions, yaws = plan_tool_poses(cube_pos, cube_yaw, tray_pos, start_yaw, cfg)
  joints = np.zeros((len(ACTION_NAMES), 6))
  ok = True
  q = q_start
  for i, name in enumerate(ACTION_NAMES):
    if name != "close":  # Closing holds the grasp's joints.
      result = kin.solve(positions[i], tool_down_rotation(yaws[i]), q)
      ok &= result.converged
      q = result.q
    joints[i] = q
  return CubeTrayPlan(joints, bool(ok))


def tool_down_quat(yaws: np.ndarray) -> torch.Tensor:
  """Quaternions (w, x, y, z) [..., 4] of ``tool_down_rotation`` at ``yaws``."""
  rots = np.stack([tool_down_rotation(y) for y in np.ravel(yaws)])
  quats = quat_from_matrix(torch.tensor(rots, dtype=torch.float32))
  return quats.reshape(*np.shape(yaws), 4)


def _into_unit_box(v: torch.Tensor) -> torch.Tensor:
  """Scale each row down as a whole (its direction kept) into [-1, 1]."""
  return v / v.abs().amax(dim=-1, keepdim=True).clamp_min(1.0)


def delta_pose_action(
  arm: CartesianPoseAction, pos_w: torch.Tensor, quat_w: torch.Tensor
) -> torch.Tensor:
  """Normalized Cartesian actions [B, 6] that move the term's target pose
  toward ``pos_w`` [B, 3] and ``quat_w`` [B, 4] (world frame) as fast as the
  action space allows; translation and rotation each within [-1, 1].

  Deltas are taken from the pose the term applies them to: its previous
  target (``use_target``), else (or before the first action after a reset)
  the tool pose."""
  tool_pos, tool_quat = arm.tool_pose_w()
  has = (arm.has_target & arm.cfg.use_target).unsqueeze(-1)
  base_pos = torch.where(has, arm.desired_pos_w, tool_pos)
  base_quat = torch.where(has, arm.desired_quat_w, tool_quat)
  move = (pos_w - base_pos) / arm.cfg.translation_scale
  # World-frame rotation vector, composed on the left as the term applies it.
  turn = axis_angle_from_quat(quat_mul(quat_w, quat_inv(base_quat)))
  return torch.cat(
    [_into_unit_box(move), _into_unit_box(turn / arm.cfg.rotation_scale)], dim=-1
  )


class CubeTrayExpert:
  """Batched executor of per-environment seven-action plans, acting in the
  environment's arm action space: joint targets
  (``cube_tray_env_cfg(arm_action="joint")``) or the task's normalized
  Cartesian deltas (``arm_action="cartesian"``, the policy's), found from
  the action term. ``cfg`` defaults to ``CubeTrayExpertCfg()`` in joint mode
  and ``CARTESIAN_EXPERT_CFG`` in Cartesian mode.
  """

  def __init__(
    self,
    env: ManagerBasedRlEnv,
    cfg: CubeTrayExpertCfg | None = None,
    cube: str = "cube",
    tray: str = "tray",
    robot: str = "robot",
    arm: str = "arm",
    gripper: str = "gripper",
  ):
    self._arm = env.action_manager.get_term(arm)
    if isinstance(self._arm, CartesianPoseAction):
      self.mode = "cartesian"
    elif isinstance(self._arm, JointTargetAction):
      self.mode = "joint"
    else:
      raise ValueError(
        f"CubeTrayExpert needs joint-target or Cartesian arm actions, not "
        f"{type(self._arm).__name__}."
      )
    if cfg is None:
      cfg = CARTESIAN_EXPERT_CFG if self.mode == "cartesian" else CubeTrayExpertCfg()
    self.env, self.cfg = env, cfg
    self._cube, self._tray, self._robot = (
      env.scene[cube],
      env.scene[tray],
      env.scene[robot],
    )
    self._arm_ids, _ = self._robot.find_joints(ARM_JOINT_NAMES, preserve_order=True)
    self._gripper_term = env.action_manager.get_term(gripper)
    n, k, dev = env.num_envs, len(ACTION_NAMES), env.device
    self.joints = torch.zeros(n, k, 6, device=dev)
    """Joint mode: joint targets of each action [rad]."""
    self.positions = torch.zeros(n, k, 3, device=dev)
    """Cartesian mode: tool position of each action (environment frame)."""
    self.quats = torch.zeros(n, k, 4, device=dev)
    """Cartesian mode: tool orientation (w, x, y, z) of each action."""
    self.gripper = torch.zeros(n, k, device=dev)
    self.index = torch.zeros(n, dtype=torch.long, device=dev)
    self.elapsed = torch.zeros(n, device=dev)
    self.plan_ok = torch.zeros(n, dtype=torch.bool, device=dev)
    self.timeouts = torch.zeros(n, dtype=torch.long, device=dev)
    self._min = torch.tensor(cfg.min_duration, device=dev)
    self._pose_tol = torch.tensor(cfg.pose_tol, device=dev)
    self._gripper_plan = torch.tensor(GRIPPER_PLAN, device=dev)
    self._local = threading.local()
    self._pool = ThreadPoolExecutor(max_workers=max(1, cfg.num_workers))

  def _kinematics(self) -> ArmKinematics:
    if not hasattr(self._local, "kin"):
      self._local.kin = ArmKinematics()
    return self._local.kin

  @property
  def done(self) -> torch.Tensor:
    """Environments that have issued their last action, [num_envs] bool."""
    return self.index >= len(ACTION_NAMES) - 1

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """Plan new actions for ``env_ids`` (default: all) from the current state."""
    if env_ids is None:
      env_ids = torch.arange(self.env.num_envs, device=self.env.device)
    if len(env_ids) == 0:
      return
    origins = self.env.scene.env_origins[env_ids]
    cube_pos = (self._cube.data.root_link_pos_w[env_ids] - origins).cpu().numpy()
    quat = yaw_quat(self._cube.data.root_link_quat_w[env_ids]).cpu().numpy()
    cube_yaw = 2.0 * np.arctan2(quat[:, 3], quat[:, 0])
    tray_pos = (self._tray.data.root_link_pos_w[env_ids] - origins).cpu().numpy()
    if self.mode == "joint":
      self._plan_joints(env_ids, cube_pos, cube_yaw, tray_pos)
    else:
      self._plan_poses(env_ids, cube_pos, cube_yaw, tray_pos)
    self.gripper[env_ids] = self._gripper_plan
    self.index[env_ids] = 0
    self.elapsed[env_ids] = 0.0
    self.timeouts[env_ids] = 0

  def _plan_joints(self, env_ids, cube_pos, cube_yaw, tray_pos) -> None:
    """Joint mode: IK for every environment in ``env_ids`` (thread pool)."""
    q_now = self._robot.data.joint_pos[env_ids][:, self._arm_ids].cpu().numpy()
    plans = list(
      self._pool.map(
        lambda i: plan_cube_tray(
          self._kinematics(),
          cube_pos[i],
          float(cube_yaw[i]),
          tray_pos[i],
          q_now[i],
          self.cfg,
        ),
        range(len(env_ids)),
      )
    )
    self.joints[env_ids] = torch.tensor(
      np.stack([p.joints for p in plans]), dtype=torch.float32, device=self.env.device
    )
    self.plan_ok[env_ids] = torch.tensor([p.ok for p in plans], device=self.env.device)

  def _plan_poses(self, env_ids, cube_pos, cube_yaw, tray_pos) -> None:
    """Cartesian mode: the poses themselves (the action term solves IK)."""
    tool_rot = matrix_from_quat(self._arm.tool_pose_w()[1][env_ids]).cpu().numpy()
    positions, yaws = plan_tool_poses(
      cube_pos, cube_yaw, tray_pos, tool_yaw(tool_rot), self.cfg
    )
    dev = self.env.device
    self.positions[env_ids] = torch.tensor(positions, dtype=torch.float32, device=dev)
    self.quats[env_ids] = tool_down_quat(yaws).to(dev)
    self.plan_ok[env_ids] = True

  def _reached(self) -> torch.Tensor:
    """Environments whose arm has reached the current action's target [B]."""
    rows = torch.arange(self.env.num_envs, device=self.env.device)
    if self.mode == "joint":
      q = self._robot.data.joint_pos[:, self._arm_ids]
      error = (q - self.joints[rows, self.index]).abs().amax(dim=-1)
      return error < self.cfg.joint_tol
    tool_pos, tool_quat = self._arm.tool_pose_w()
    target_pos = self.positions[rows, self.index] + self.env.scene.env_origins
    pos_err = torch.linalg.vector_norm(target_pos - tool_pos, dim=-1)
    rot_err = torch.linalg.vector_norm(
      axis_angle_from_quat(quat_mul(self.quats[rows, self.index], quat_inv(tool_quat))),
      dim=-1,
    )
    return (pos_err < self._pose_tol[self.index]) & (rot_err < self.cfg.yaw_tol)

  def _arm_action(self, index: torch.Tensor) -> torch.Tensor:
    """The arm's part of the action toward action ``index``'s target [B, 6]."""
    rows = torch.arange(self.env.num_envs, device=self.env.device)
    if self.mode == "joint":
      return self.joints[rows, index]
    target_pos = self.positions[rows, index] + self.env.scene.env_origins
    return delta_pose_action(self._arm, target_pos, self.quats[rows, index])

  def act(self) -> torch.Tensor:
    """Actions [num_envs, 7] (arm, gripper) for the next env step: 6 joint
    targets, or 6 normalized Cartesian deltas in [-1, 1]; gripper in [-1, 1]."""
    last = len(ACTION_NAMES) - 1
    rows = torch.arange(self.env.num_envs, device=self.env.device)
    reached = self._reached() & (self.elapsed >= self._min[self.index])
    timed_out = self.elapsed >= self.cfg.timeout
    advance = (reached | timed_out) & (self.index < last)
    self.timeouts += (timed_out & ~reached & (self.index < last)).long()
    self.index = torch.where(advance, self.index + 1, self.index)
    self.elapsed = torch.where(advance, torch.zeros_like(self.elapsed), self.elapsed)
    self.elapsed += self.env.step_dt
    # Relaxing: the arm stays lowered, the gripper holds its current opening.
    relaxing = (self.index == last) & (self.elapsed <= self.cfg.release_relax + 1e-6)
    gripper = torch.where(
      relaxing,
      self._gripper_term.opening.clamp(-1.0, 1.0),
      self.gripper[rows, self.index],
    )
    index = torch.where(relaxing, self.index - 1, self.index)
    return torch.cat([self._arm_action(index), gripper.unsqueeze(-1)], dim=-1)

  def close(self) -> None:
    self._pool.shutdown(wait=True)
