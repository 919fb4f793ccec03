"""Bin-picking evaluator, as specified: per-object delivery, batched.

Pure torch over ``[num_envs, num_objects]``; it reads simulated state only,
so it scores the expert and any policy the same way. An object counts as
delivered when, at the same step:

- ``valid``: its position, velocity and bounds are finite;
- ``outside_bin``: its geometry (world-aligned bounds of its collision geoms)
  lies wholly outside the bin's outer footprint;
- ``near_drop``: its centre is within ``drop_radius`` of the drop destination
  (horizontally);
- ``supported``: its lowest point is within ``support_tolerance`` of the
  table top (so resting on the table, not held up or stacked high);
- ``released``: no robot body touches it (the simulator's contact report);
- ``slow``: linear speed <= ``max_linear_speed`` and angular speed <=
  ``max_angular_speed``.

Reaching the drop point alone is not a success. Episode verdict:
``bin_cleared`` when every poured object is delivered at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CONDITIONS = ("valid", "outside_bin", "near_drop", "supported", "released", "slow")


@dataclass(frozen=True)
class DeliveryThresholds:
  drop_radius: float = 0.15
  """Largest horizontal distance of the object centre from the drop point [m]."""
  support_tolerance: float = 0.01
  """Largest height of the object's lowest point above the table top [m]."""
  max_linear_speed: float = 0.01
  """[m/s] (as the cube-in-tray rule)"""
  max_angular_speed: float = 0.1
  """[rad/s] (a rolling object is not delivered)"""


@dataclass
class BinPickObjectState:
  """Simulated state of every object slot; every field is batched [B, K, ...]."""

  lo: torch.Tensor  # [B, K, 3] world-aligned lower bounds (env frame)
  hi: torch.Tensor  # [B, K, 3] upper bounds
  pos: torch.Tensor  # [B, K, 3] centre (env frame)
  lin_vel: torch.Tensor  # [B, K, 3]
  ang_vel: torch.Tensor  # [B, K, 3]
  robot_contact: torch.Tensor  # [B, K] bool
  poured: torch.Tensor  # [B, K] bool: placed in the bin by the pourer


@dataclass(frozen=True)
class BinLayout:
  """Where things are in the environment frame."""

  bin_outer_x: tuple[float, float]
  bin_outer_y: tuple[float, float]
  drop_xy: tuple[float, float]
  table_z: float = 0.0


def evaluate_deliveries(
  state: BinPickObjectState,
  layout: BinLayout,
  th: DeliveryThresholds = DeliveryThresholds(),
) -> dict[str, torch.Tensor]:
  """Conditions and verdicts, ManiSkill-style: one dict of batched tensors.

  Returns every condition in ``CONDITIONS`` and ``delivered`` as [B, K]
  bool; ``delivered_count``, ``poured_count`` [B] long; ``bin_cleared`` and
  ``success`` (the same) [B] bool.
  """
  finite = (
    torch.isfinite(state.pos).all(-1)
    & torch.isfinite(state.lin_vel).all(-1)
    & torch.isfinite(state.ang_vel).all(-1)
    & torch.isfinite(state.lo).all(-1)
    & torch.isfinite(state.hi).all(-1)
  )
  (x0, x1), (y0, y1) = layout.bin_outer_x, layout.bin_outer_y
  lo, hi = state.lo, state.hi
  outside_bin = (
    (hi[..., 0] < x0) | (lo[..., 0] > x1) | (hi[..., 1] < y0) | (lo[..., 1] > y1)
  )
  drop = torch.tensor(layout.drop_xy, dtype=state.pos.dtype, device=state.pos.device)
  near_drop = (
    torch.linalg.vector_norm(state.pos[..., :2] - drop, dim=-1) <= th.drop_radius
  )
  supported = (lo[..., 2] - layout.table_z).abs() <= th.support_tolerance
  released = ~state.robot_contact
  slow = (torch.linalg.vector_norm(state.lin_vel, dim=-1) <= th.max_linear_speed) & (
    torch.linalg.vector_norm(state.ang_vel, dim=-1) <= th.max_angular_speed
  )
  conditions = {
    "valid": finite,
    "outside_bin": outside_bin & finite,
    "near_drop": near_drop & finite,
    "supported": supported & finite,
    "released": released,
    "slow": slow & finite,
  }
  delivered = torch.stack(list(conditions.values()), dim=0).all(dim=0)
  delivered_count = (delivered & state.poured).sum(-1)
  poured_count = state.poured.sum(-1)
  bin_cleared = (poured_count > 0) & (delivered_count == poured_count)
  return {
    **conditions,
    "delivered": delivered,
    "delivered_count": delivered_count,
    "poured_count": poured_count,
    "bin_cleared": bin_cleared,
    "success": bin_cleared,
  }


def failed_condition(verdict: dict[str, torch.Tensor]) -> torch.Tensor:
  """Index into ``CONDITIONS`` of the first failing condition [B, K]
  (``len(CONDITIONS)`` where all hold)."""
  failing = torch.stack([~verdict[c] for c in CONDITIONS], dim=-1)
  first = torch.argmax(failing.int(), dim=-1)
  return torch.where(failing.any(-1), first, len(CONDITIONS))
