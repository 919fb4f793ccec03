"""A seeded, varied object set for bin picking, built procedurally.

Kinds (cycled, dimensions drawn from the object seed):

- ``box``: a cuboid, 25 to 70 mm sides;
- ``capsule``: 15 to 25 mm radius, 30 to 80 mm long;
- ``irregular``: a convex hull of 14 random points on a squashed ellipsoid
  (an irregular mesh; MuJoCo collides with its convex hull);
- ``ell``: an L-shaped block made of two boxes, i.e. a non-convex object
  given by its convex decomposition;
- ``wide``: a flat box 90 to 104 by 120 to 140 mm, 20 mm thick: wider than
  the RG2's 110 mm stroke along its long axis, so it is graspable only across
  its width or its thickness.

Masses follow from densities of 300 to 900 kg/m^3 (plastic, wood, packed
goods). Every object has a free joint and collides as convex pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

KINDS = ("box", "capsule", "irregular", "ell", "wide")


@dataclass(frozen=True)
class ObjectDesc:
  """What the generator chose for one object slot."""

  name: str
  kind: str
  density: float
  extent: tuple[float, float, float]
  """Half extents of the object's bounding box in its body frame [m]."""
  params: dict


def describe_objects(count: int, seed: int = 0) -> list[ObjectDesc]:
  """Deterministic descriptions of ``count`` objects for ``seed``."""
  rng = np.random.default_rng(seed)
  out = []
  for i in range(count):
    kind = KINDS[i % len(KINDS)]
    density = float(rng.uniform(300, 900))
    if kind == "box":
      half = rng.uniform(0.0125, 0.035, 3)
      params = {"half": half.tolist()}
      extent = half
    elif kind == "capsule":
      radius, half_len = rng.uniform(0.015, 0.025), rng.uniform(0.015, 0.04)
      params = {"radius": float(radius), "half_length": float(half_len)}
      extent = np.array([radius, radius, half_len + radius])
    elif kind == "irregular":
      radii = rng.uniform(0.018, 0.035, 3)
      dirs = rng.normal(size=(14, 3))
      dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
      points = dirs * radii * rng.uniform(0.8, 1.0, (14, 1))
      params = {"vertices": points.tolist()}
      extent = np.abs(points).max(axis=0)
    elif kind == "ell":
      a, b, t = (
        rng.uniform(0.03, 0.045),
        rng.uniform(0.025, 0.035),
        rng.uniform(0.01, 0.015),
      )
      params = {"long": float(a), "short": float(b), "thick": float(t)}
      extent = np.array([a, a, t])
    else:  # wide
      params = {
        "half": [float(rng.uniform(0.045, 0.052)), float(rng.uniform(0.06, 0.07)), 0.01]
      }
      extent = np.array(params["half"])
    out.append(
      ObjectDesc(f"obj_{i:02d}", kind, density, tuple(map(float, extent)), params)
    )
  return out


def object_spec(desc: ObjectDesc, rgba=(0.3, 0.6, 0.8, 1.0)) -> mujoco.MjSpec:
  """MuJoCo spec of one free object (body ``obj``)."""
  spec = mujoco.MjSpec()
  body = spec.worldbody.add_body(name="obj")
  body.add_freejoint(name="obj_joint")
  common = dict(
    density=desc.density, rgba=list(rgba), condim=6, friction=[0.8, 0.005, 0.0001]
  )
  p = desc.params
  if desc.kind in ("box", "wide"):
    body.add_geom(name="g0", type=mujoco.mjtGeom.mjGEOM_BOX, size=p["half"], **common)
  elif desc.kind == "capsule":
    body.add_geom(
      name="g0",
      type=mujoco.mjtGeom.mjGEOM_CAPSULE,
      size=[p["radius"], p["half_length"], 0],
      **common,
    )
  elif desc.kind == "irregular":
    spec.add_mesh(name=f"{desc.name}_hull", uservert=np.ravel(p["vertices"]))
    body.add_geom(
      name="g0", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"{desc.name}_hull", **common
    )
  else:  # ell: two convex parts
    a, b, t = p["long"], p["short"], p["thick"]
    body.add_geom(
      name="g0",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[a, b / 2, t],
      pos=[0, -a + b / 2, 0],
      **common,
    )
    body.add_geom(
      name="g1",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[b / 2, a - b / 2, t],
      pos=[-a + b / 2, b / 2, 0],
      **common,
    )
  return spec
