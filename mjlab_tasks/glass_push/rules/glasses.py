"""The glasses' solids: convex parts, and the parked glass of an unused slot.

Shared by the examiner's MuJoCo Warp world and the GlassPush task (one
compiled model, many tables: every slot has the same number of parts).
"""

from __future__ import annotations

import numpy as np

from mjlab_tasks.glass_push.rules.tables import TABLE_HEIGHT, Glass

PARTS = 3
# Clear glass, a little tinted so the two kinds tell apart in pictures.
PALETTE = {"tumbler": (0.75, 0.88, 0.95, 0.55), "stemmed": (0.85, 0.95, 0.85, 0.55)}
# An unused slot's glass: a small tumbler standing on the floor.
PARKED = Glass(
  id=-1, kind="tumbler", x=0.0, y=0.0, height=0.06, widest=0.06, foot=0.05, mass=0.1
)


def parked_place(slot: int) -> tuple[float, float, float]:
  """Where an unused slot's glass stands: on the floor beyond the table."""
  return (1.2 + 0.15 * slot, 1.2, -TABLE_HEIGHT)


def ring(radius: float, z: float, n: int = 20) -> np.ndarray:
  a = np.linspace(0, 2 * np.pi, n, endpoint=False)
  return np.stack([radius * np.cos(a), radius * np.sin(a), np.full(n, z)], 1)


def glass_parts(g: Glass) -> list[tuple[np.ndarray, float]]:
  """A glass as ``PARTS`` convex parts: (vertices [V, 3] in its frame, mass).

  Stemmed: foot disk, stem, bowl (35/10/55 % of the mass). Tumbler: its
  frustum cut into equal-height slices, mass by volume, so the solid, its
  mass and its inertia are those of the single frustum.
  """
  if g.kind == "tumbler":
    z = np.linspace(0.0, g.height, PARTS + 1)
    r = g.foot / 2 + (g.widest - g.foot) / 2 * z / g.height
    volume = np.pi * np.diff(z) / 3 * (r[:-1] ** 2 + r[:-1] * r[1:] + r[1:] ** 2)
    return [
      (
        np.concatenate([ring(r[k], z[k]), ring(r[k + 1], z[k + 1])]),
        g.mass * volume[k] / volume.sum(),
      )
      for k in range(PARTS)
    ]
  ft, st = g.foot_thickness, g.stem_top
  bowl_h = g.height - st
  rw = g.widest / 2
  bowl = np.concatenate(
    [
      ring(0.012, st),
      ring(0.8 * rw, st + 0.25 * bowl_h),
      ring(rw, st + 0.6 * bowl_h),
      ring(0.85 * rw, g.height),
    ]
  )
  return [
    (np.concatenate([ring(g.foot / 2, 0.0), ring(g.foot / 2, ft)]), 0.35 * g.mass),
    (
      np.concatenate(
        [ring(g.stem_radius, ft - 0.002), ring(g.stem_radius, st + 0.002)]
      ),
      0.10 * g.mass,
    ),
    (bowl, 0.55 * g.mass),
  ]
