"""Seeded, varied object sets for bin picking, built procedurally.

Two sets (``OBJECT_SETS``), each cycling through five kinds with dimensions
drawn from the object seed:

- ``default``: box, capsule, irregular, ell, cylinder. Graspable by
  construction: every object, in each of its resting poses alone at the
  default bin's centre, has a grasp the expert's planner accepts
  (``tests/test_bin_graspability.py``; docs/bin_pick.md).
- ``hard``: box, capsule, irregular, ell, wide -- the former default set,
  object for object (a cylinder and a wide box draw the same number of
  random numbers, so boxes, capsules and irregular hulls are identical in
  both sets, and L-blocks differ only in thickness). Its wide
  flat boxes have no two-finger grasp lying flat in the default bin: for
  non-prehensile work.

Kinds:

- ``box``: a cuboid, 25 to 70 mm sides;
- ``capsule``: 15 to 25 mm radius, 30 to 80 mm long;
- ``irregular``: a convex hull of 14 random points on a squashed ellipsoid
  (an irregular mesh; MuJoCo collides with its convex hull);
- ``ell``: an L-shaped block made of two boxes, i.e. a non-convex object
  given by its convex decomposition, 25 to 30 mm thick (20 to 30 mm in the
  hard set);
- ``cylinder``: 15 to 28 mm radius, 40 to 90 mm long;
- ``wide``: a flat box 90 to 104 by 120 to 140 mm, 20 mm thick: wider than
  the RG2's 110 mm stroke along its long axis, so it is graspable only across
  its width or its thickness.

Masses follow from densities of 300 to 900 kg/m^3 (plastic, wood, packed
goods). Every object has a free joint and collides as convex pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import mujoco
import numpy as np

ObjectSet = Literal["default", "hard"]
"""The object sets by name (command-line flags take these)."""
OBJECT_SETS: dict[ObjectSet, tuple[str, ...]] = {
  "default": ("box", "capsule", "irregular", "ell", "cylinder"),
  "hard": ("box", "capsule", "irregular", "ell", "wide"),
}
KINDS = ("box", "capsule", "irregular", "ell", "cylinder", "wide")
# Least half thickness of an L-block [m]. Lying flat, a 20 mm L-block with
# 79 mm arms in the default bin had no grasp (the hand reaching that low
# meets a wall; object seed 31, docs/bin_pick.md); at 25 mm, as thin as the
# thinnest box, it has. Same draw: the hard set keeps its 20 mm.
ELL_MIN_HALF_THICKNESS = {"default": 0.0125, "hard": 0.01}


@dataclass(frozen=True)
class ObjectDesc:
  """What the generator chose for one object slot."""

  name: str
  kind: str
  density: float
  extent: tuple[float, float, float]
  """Half extents of the object's bounding box in its body frame [m]."""
  params: dict


def describe_objects(
  count: int, seed: int = 0, object_set: ObjectSet = "default"
) -> list[ObjectDesc]:
  """Deterministic descriptions of ``count`` objects of ``object_set`` for
  ``seed``."""
  if object_set not in OBJECT_SETS:
    raise ValueError(
      f"object set {object_set!r} is not one of {', '.join(OBJECT_SETS)}."
    )
  kinds = OBJECT_SETS[object_set]
  rng = np.random.default_rng(seed)
  out = []
  for i in range(count):
    kind = kinds[i % len(kinds)]
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
        rng.uniform(ELL_MIN_HALF_THICKNESS[object_set], 0.015),
      )
      params = {"long": float(a), "short": float(b), "thick": float(t)}
      extent = np.array([a, a, t])
    elif kind == "cylinder":
      # Two draws, as the wide box's: the other slots match the hard set's.
      radius, half_len = rng.uniform(0.015, 0.028), rng.uniform(0.02, 0.045)
      params = {"radius": float(radius), "half_length": float(half_len)}
      extent = np.array([radius, radius, half_len])
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
  elif desc.kind == "cylinder":
    body.add_geom(
      name="g0",
      type=mujoco.mjtGeom.mjGEOM_CYLINDER,
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
