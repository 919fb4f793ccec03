"""Where in the drop zone the held object goes: packing by footprint.

An object's footprint is the convex hulls of its collision geoms seen from
above (each geom's posed points, swept by its sphere radius). A footprint is
stored as its support function on ``n`` evenly spaced horizontal directions
``u``: ``h(u) = max_p u . p + r``. Two convex footprints A and B are at least

    max_u [ min_{a in A} u . a - max_{b in B} u . b ] = max_u [-h_A(-u) - h_B(u)]

apart: exact where a sampled direction is normal to their gap, never more
than the true distance otherwise (a direction off by ``pi / n`` understates
it by at most the footprints' widths times ``sin(pi / n)``), so a placement
judged free is free.

Pure torch, batched over environments and candidate positions.
"""

from __future__ import annotations

import math

import torch


def directions(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
  """``n`` (even) unit directions evenly spaced about the vertical [n, 2];
  direction ``i + n / 2`` is the opposite of direction ``i``."""
  if n % 2:
    raise ValueError(f"directions: n must be even, got {n}")
  a = torch.arange(n, device=device, dtype=torch.float32) * (2 * math.pi / n)
  return torch.stack([a.cos(), a.sin()], -1)


def supports(
  points: torch.Tensor, radius: torch.Tensor, dirs: torch.Tensor
) -> torch.Tensor:
  """Support values [..., U] of footprints given as points [..., P, 2]
  (horizontal) swept by ``radius`` [...], on directions [U, 2] or, per
  leading index, [..., 1, U, 2] (a footprint turned by R has on u the
  support the unturned one has on R^T u)."""
  return (points @ dirs.mT).amax(-2) + radius[..., None]


def grid(centre: tuple[float, float], radius: float, spacing: float) -> torch.Tensor:
  """Candidate positions [C, 2]: a square grid of ``spacing`` within
  ``radius`` of ``centre``, the centre included."""
  n = int(radius / spacing)
  steps = torch.arange(-n, n + 1, dtype=torch.float32) * spacing
  xy = torch.stack(torch.meshgrid(steps, steps, indexing="ij"), -1).reshape(-1, 2)
  xy = xy[torch.linalg.vector_norm(xy, dim=-1) <= radius + 1e-9]
  return xy + torch.tensor(centre, dtype=torch.float32)


def separations(
  candidates: torch.Tensor,
  held: torch.Tensor,
  others: torch.Tensor,
  dirs: torch.Tensor,
) -> torch.Tensor:
  """Least separation [B, C, M] between the held footprint placed at each
  candidate and each other footprint.

  Args:
    candidates: [C, 2] positions of the held footprint's reference point.
    held: [B, H, U] supports of the held footprint's parts about that point.
    others: [B, M, U] supports of the other footprints' parts, in place.
    dirs: [U, 2] from ``directions``.
  """
  half = dirs.shape[0] // 2
  lowest = -held.roll(half, dims=-1)  # min over the held part of u . p
  along = candidates @ dirs.T  # [C, U]
  low = along[None, :, None] + lowest[:, None]  # [B, C, H, U]
  gap = low[:, :, :, None] - others[:, None, None]  # [B, C, H, M, U]
  return gap.amax(-1).amin(2)


def choose(
  separation: torch.Tensor, counted: torch.Tensor, cost: torch.Tensor, gap: float
) -> tuple[torch.Tensor, torch.Tensor]:
  """The free candidate of least ``cost`` [C], free where the held footprint
  keeps ``gap`` from every ``counted`` [B, M] part; where none is free, the
  one with the largest clearance. Returns (index [B], free [B])."""
  clearance = torch.where(counted[:, None], separation, torch.inf).amin(-1)  # [B, C]
  free = clearance >= gap
  cheapest = torch.where(free, cost, torch.inf).argmin(-1)
  roomiest = clearance.argmax(-1)
  any_free = free.any(-1)
  return torch.where(any_free, cheapest, roomiest), any_free
