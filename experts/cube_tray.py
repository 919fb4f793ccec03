"""Reference expert for cube in tray (seed 000), batched over environments.

Privileged: reads the cube's and the tray's true poses. For each environment
it prepares seven joint-space actions with IK on the CPU replica (C MuJoCo),
then executes them through the simulated actuators:

  1 approach   above the cube, gripper open, closing axis on a face pair
  2 descend    to the grasp pose
  3 close      gripper closed (-1), arm holds
  4 lift       straight up
  5 traverse   above the tray centre, cube turned square to the tray
  6 lower      cube bottom just above the tray floor
  7 release    gripper half open (+0 = 55 mm, clear of the walls) while the
               tool rises ``retreat_height``: the fingers open within a few
               milliseconds, long before the bounded arm step has moved the
               tool, and rising keeps a grazing pad off the released cube

An action ends when every arm joint is within ``joint_tol`` of its target and
its minimum duration has passed, or at its timeout. Execution is tensor code
over all environments; the CPU IK runs only when environments get a new plan
(at reset), in a thread pool.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from mjlab.utils.lab_api.math import yaw_quat

from assets.ur5_rg2 import ARM_JOINT_NAMES
from mjlab_tasks.common.kinematics import ArmKinematics, tool_down_rotation

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

ACTION_NAMES = ("approach", "descend", "close", "lift", "traverse", "lower", "release")
GRIPPER_OPEN, GRIPPER_CLOSED, GRIPPER_RELEASE = 1.0, -1.0, 0.0


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
  min_duration: tuple[float, ...] = (0.5, 0.3, 0.5, 0.3, 0.5, 0.3, 0.4)
  """Shortest time per action [s] (gripper actions need it to act)."""
  timeout: float = 3.0
  """Longest time per action [s]."""
  joint_tol: float = 0.01
  """Arm joint error [rad] that counts as having reached an action's target."""
  num_workers: int = 2
  """Threads for CPU IK planning."""


@dataclass
class CubeTrayPlan:
  """Per-environment plan: joint targets [7, 6], gripper commands [7]."""

  joints: np.ndarray
  gripper: np.ndarray
  ok: bool
  """All seven IK solutions converged."""


def nearest_square_yaw(yaw: float, reference: float) -> float:
  """The angle ``yaw + k * 90 degrees`` closest to ``reference``.

  A cube is square under quarter turns and the gripper under half turns, so
  every such tool yaw closes on a pair of faces; the nearest one turns the
  wrist least.
  """
  quarter = math.pi / 2
  return yaw + quarter * round((reference - yaw) / quarter)


def tool_yaw(rot: np.ndarray) -> float:
  """Yaw of the tool's closing axis (its x axis) about world z."""
  return math.atan2(rot[1, 0], rot[0, 0])


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
  yaw = nearest_square_yaw(cube_yaw, tool_yaw(kin.tool_pose(q_start)[1]))
  # Square to the tray (a multiple of 90 degrees) with the least wrist turn.
  place_yaw = nearest_square_yaw(0.0, yaw)
  grasp = np.array([cube_pos[0], cube_pos[1], cube_pos[2]])
  above_cube = grasp + [0.0, 0.0, cfg.approach_height]
  lifted = np.array([grasp[0], grasp[1], cfg.carry_height])
  above_tray = np.array([tray_pos[0], tray_pos[1], cfg.carry_height])
  release_z = tray_pos[2] + cfg.tray_floor_top + cfg.cube_half + cfg.release_gap
  in_tray = np.array([tray_pos[0], tray_pos[1], release_z])
  retreat = in_tray + [0.0, 0.0, cfg.retreat_height]
  poses = (
    (above_cube, yaw),
    (grasp, yaw),
    None,  # close: hold the grasp pose
    (lifted, yaw),
    (above_tray, place_yaw),
    (in_tray, place_yaw),
    (retreat, place_yaw),
  )
  joints = np.zeros((len(poses), 6))
  ok = True
  q = q_start
  for i, pose in enumerate(poses):
    if pose is not None:
      result = kin.solve(pose[0], tool_down_rotation(pose[1]), q)
      ok &= result.converged
      q = result.q
    joints[i] = q
  gripper = np.array(
    [GRIPPER_OPEN, GRIPPER_OPEN, GRIPPER_CLOSED, GRIPPER_CLOSED, GRIPPER_CLOSED]
    + [GRIPPER_CLOSED, GRIPPER_RELEASE]
  )
  return CubeTrayPlan(joints, gripper, bool(ok))


class CubeTrayExpert:
  """Batched executor of per-environment seven-action plans.

  The environment must use joint-target arm actions
  (``cube_tray_env_cfg(arm_action="joint")``).
  """

  def __init__(
    self,
    env: ManagerBasedRlEnv,
    cfg: CubeTrayExpertCfg = CubeTrayExpertCfg(),
    cube: str = "cube",
    tray: str = "tray",
    robot: str = "robot",
  ):
    self.env, self.cfg = env, cfg
    self._cube, self._tray, self._robot = (
      env.scene[cube],
      env.scene[tray],
      env.scene[robot],
    )
    self._arm_ids, _ = self._robot.find_joints(ARM_JOINT_NAMES, preserve_order=True)
    n, dev = env.num_envs, env.device
    self.joints = torch.zeros(n, len(ACTION_NAMES), 6, device=dev)
    self.gripper = torch.zeros(n, len(ACTION_NAMES), device=dev)
    self.index = torch.zeros(n, dtype=torch.long, device=dev)
    self.elapsed = torch.zeros(n, device=dev)
    self.plan_ok = torch.zeros(n, dtype=torch.bool, device=dev)
    self.timeouts = torch.zeros(n, dtype=torch.long, device=dev)
    self._min = torch.tensor(cfg.min_duration, device=dev)
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
    dev = self.env.device
    self.joints[env_ids] = torch.tensor(
      np.stack([p.joints for p in plans]), dtype=torch.float32, device=dev
    )
    self.gripper[env_ids] = torch.tensor(
      np.stack([p.gripper for p in plans]), dtype=torch.float32, device=dev
    )
    self.plan_ok[env_ids] = torch.tensor([p.ok for p in plans], device=dev)
    self.index[env_ids] = 0
    self.elapsed[env_ids] = 0.0
    self.timeouts[env_ids] = 0

  def act(self) -> torch.Tensor:
    """Actions [num_envs, 7] (6 joint targets, gripper) for the next env step."""
    last = len(ACTION_NAMES) - 1
    rows = torch.arange(self.env.num_envs, device=self.env.device)
    target = self.joints[rows, self.index]
    q = self._robot.data.joint_pos[:, self._arm_ids]
    reached = (q - target).abs().amax(dim=-1) < self.cfg.joint_tol
    long_enough = self.elapsed >= self._min[self.index]
    timed_out = self.elapsed >= self.cfg.timeout
    advance = ((reached & long_enough) | timed_out) & (self.index < last)
    self.timeouts += (timed_out & ~(reached & long_enough) & (self.index < last)).long()
    self.index = torch.where(advance, self.index + 1, self.index)
    self.elapsed = torch.where(advance, torch.zeros_like(self.elapsed), self.elapsed)
    self.elapsed += self.env.step_dt
    actions = torch.cat(
      [self.joints[rows, self.index], self.gripper[rows, self.index].unsqueeze(-1)],
      dim=-1,
    )
    return actions

  def close(self) -> None:
    self._pool.shutdown(wait=True)
