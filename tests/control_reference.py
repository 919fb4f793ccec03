"""The torch action terms' arithmetic in float64 (a reference for the
compiled control's parity tests: the terms themselves compute in float32)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from mjlab.utils.lab_api.math import (
  axis_angle_from_quat,
  quat_from_matrix,
  quat_inv,
  quat_mul,
)

from assets.ur5_rg2.kinematics import dls_step_batched
from mjlab_tasks.common.actions import CartesianPoseAction, limit_joint_step
from mjlab_tasks.engine import worlds


def world_state64(env) -> SimpleNamespace:
  """The C engine's worlds' own float64 fields the terms read, batched."""
  fields = ("qpos", "site_xpos", "site_xmat", "xaxis", "xanchor")
  return SimpleNamespace(
    **{
      f: torch.from_numpy(np.stack([getattr(d, f) for d in worlds(env)]))
      for f in fields
    }
  )


def targets64(env, term, data=None) -> tuple[torch.Tensor, torch.Tensor]:
  """The torch term's arithmetic in float64 on the same state (the data
  tensors, float32, by default; or ``data``, e.g. ``world_state64``): joint
  targets and unlimited joint steps.

  On float32 state two correct implementations differ by more than float64
  rounding: float32 rotation matrices are orthonormal only to about 1e-7,
  different quaternion formulas read that differently, and the damped solve
  amplifies it near low-manipulability poses (measured up to 6e-7 rad)."""
  data = env.sim.data if data is None else data
  q = data.qpos[:, term._qpos_ids].double()
  if isinstance(term, CartesianPoseAction):
    p = data.site_xpos[:, term._site_id].double()
    quat = quat_from_matrix(data.site_xmat[:, term._site_id].double().reshape(-1, 3, 3))
    rot = axis_angle_from_quat(quat_mul(term.desired_quat_w.double(), quat_inv(quat)))
    err = torch.cat([term.desired_pos_w.double() - p, rot], dim=-1)
    err[~term.has_target] = 0.0
    dq = dls_step_batched(arm_jacobian(term, data), err, term.cfg.damping)
  else:
    dq = term.raw_action.double() - q
    dq[~term._has_target] = 0.0
  return q + limit_joint_step(dq, term.cfg.max_dq), dq


def arm_jacobian(term, data) -> torch.Tensor:
  """The tool site's Jacobian over the arm's hinges, float64 [B, 6, n]."""
  p = data.site_xpos[:, term._site_id].double()
  axis = data.xaxis[:, term._joint_global_ids].double()
  anchor = data.xanchor[:, term._joint_global_ids].double()
  jacp = torch.cross(axis, p.unsqueeze(1) - anchor, dim=-1)
  return torch.cat([jacp, axis], dim=-1).transpose(1, 2)


# Comparisons on float32 state: the noise of the float32 inputs (rotation
# matrices orthonormal to about 1e-7) goes through the damped solve, which
# amplifies it as 1 / (smallest singular value of J + damping). Measured over
# 6,000 random states (seeds 7 and 8, the draws of test_warp_control.py): the
# difference times (sigma_min + damping) reached 1.2e-7 rad between two
# float64 implementations, 5.3e-7 rad for the float32 torch term.
FLOAT64_PER_UNIT = 4e-7
FLOAT32_TERM_PER_UNIT = 2e-6


def solve_tolerance(env, term, per_unit: float, floor: float) -> torch.Tensor:
  """Per-environment bound [B, 1] [rad] for joint targets computed two ways
  on the same float32 state: ``per_unit / (sigma_min(J) + damping)``, at
  least ``floor`` (joint-target terms have no solve: ``floor``)."""
  floor_t = torch.full((env.num_envs, 1), floor, dtype=torch.float64)
  if not isinstance(term, CartesianPoseAction):
    return floor_t
  sigma = torch.linalg.svdvals(arm_jacobian(term, env.sim.data))[:, -1:]
  return torch.maximum(floor_t, per_unit / (sigma + term.cfg.damping))
