"""CPU kinematics on the C MuJoCo engine: a replica of the robot for planning.

Used by experts to prepare joint waypoints; never touches live simulation
state (it works on its own ``MjData``).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from assets.ur5_rg2 import ARM_JOINT_NAMES, TCP_SITE_NAME, build_ur5_rg2_spec
from assets.ur5_rg2.model import BASE_QUAT_FACING_X


@dataclass
class IkResult:
  q: np.ndarray
  """Arm joint positions [6]."""
  pos_error: float
  """Remaining position error [m]."""
  rot_error: float
  """Remaining rotation error [rad]."""
  converged: bool


class ArmKinematics:
  """Forward and inverse kinematics of the UR5 + RG2 tool site (C MuJoCo).

  Poses are in the robot's environment frame: the base at ``base_pos`` with
  orientation ``base_quat``, as placed by ``ur5_rg2_entity_cfg``.
  """

  def __init__(
    self,
    base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0),
    base_quat: tuple[float, float, float, float] = BASE_QUAT_FACING_X,
    *,
    model: mujoco.MjModel | None = None,
    data: mujoco.MjData | None = None,
    prefix: str = "",
  ):
    """Robot-only model with its base at ``base_pos``/``base_quat``; or, given
    ``model`` and ``data``, the robot (names prefixed ``prefix``) inside a
    larger scene, posed in that scene's world frame (``base_*`` unused)."""
    if model is None:
      spec = build_ur5_rg2_spec()
      base = spec.body("base")
      base.pos = list(base_pos)
      base.quat = list(base_quat)
      model = spec.compile()
    self.model = model
    self.data = mujoco.MjData(model) if data is None else data
    self._site = model.site(prefix + TCP_SITE_NAME).id
    joints = [model.joint(prefix + n) for n in ARM_JOINT_NAMES]
    self._dofs = np.array([j.dofadr[0] for j in joints])
    self._qadr = np.array([j.qposadr[0] for j in joints])
    self._lo = model.jnt_range[[j.id for j in joints], 0]
    self._hi = model.jnt_range[[j.id for j in joints], 1]

  @property
  def site_id(self) -> int:
    """Id of the tool site in the model."""
    return self._site

  @property
  def qpos_adr(self) -> np.ndarray:
    """qpos addresses of the arm joints [6]."""
    return self._qadr

  def tool_pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tool site position [3] and rotation matrix [3, 3] at arm joints ``q``."""
    self.data.qpos[self._qadr] = q
    mujoco.mj_kinematics(self.model, self.data)
    return (
      self.data.site_xpos[self._site].copy(),
      self.data.site_xmat[self._site].reshape(3, 3).copy(),
    )

  def solve(
    self,
    target_pos: np.ndarray,
    target_rot: np.ndarray,
    q_init: np.ndarray,
    iterations: int = 200,
    damping: float = 1e-3,
    pos_tol: float = 1e-5,
    rot_tol: float = 1e-4,
  ) -> IkResult:
    """Damped least-squares IK for the tool pose, started from ``q_init``."""
    q = np.array(q_init, dtype=float)
    jacp = np.zeros((3, self.model.nv))
    jacr = np.zeros((3, self.model.nv))
    pos_err = rot_err = np.inf
    for _ in range(iterations):
      pos, rot = self.tool_pose(q)
      e_pos = target_pos - pos
      e_rot = np.zeros(3)
      quat = np.zeros(4)
      mujoco.mju_mat2Quat(quat, (target_rot @ rot.T).ravel())
      mujoco.mju_quat2Vel(e_rot, quat, 1.0)
      pos_err, rot_err = float(np.linalg.norm(e_pos)), float(np.linalg.norm(e_rot))
      if pos_err < pos_tol and rot_err < rot_tol:
        break
      mujoco.mj_comPos(self.model, self.data)
      mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self._site)
      jac = np.vstack([jacp[:, self._dofs], jacr[:, self._dofs]])
      err = np.concatenate([e_pos, e_rot])
      dq = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(6), err)
      q = np.clip(q + dq, self._lo, self._hi)
    return IkResult(
      q, pos_err, rot_err, pos_err < pos_tol * 10 and rot_err < rot_tol * 10
    )


def tool_down_rotation(yaw: float = 0.0) -> np.ndarray:
  """Rotation of a tool pointing straight down (tool z = -world z), closing
  axis (tool x) at ``yaw`` about the world z axis."""
  c, s = np.cos(yaw), np.sin(yaw)
  x = np.array([c, s, 0.0])
  z = np.array([0.0, 0.0, -1.0])
  y = np.cross(z, x)
  return np.stack([x, y, z], axis=1)
