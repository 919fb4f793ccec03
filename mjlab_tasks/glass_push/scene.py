"""The glass-pushing scene as mjlab entities: table, rack, glass slots, robot.

One compiled scene serves many tables: every environment has ``SLOTS``
glass entities of ``PARTS`` convex mesh parts each, and which meshes a slot
uses (with the masses and inertias that follow) is per environment, through
mjlab's per-world mesh variants (``VariantEntityCfg``): each table of the
task's pool is one variant of every slot, environment ``i`` gets table
``pool[i % len(pool)]``. A slot the table does not fill holds a small
parked glass on the floor beyond the table, which no term reads.

Physics, friction and placements are the examiner's (docs/glass_push.md).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from mjlab.entity import EntityCfg
from mjlab.entity.variants import VariantEntityCfg

from assets.ur5_rg2 import HAND_BODY_NAME, build_ur5_rg2_spec, ur5_rg2_entity_cfg
from evaluators.glass_push.tables import (
  MAX_GLASSES,
  RACK_CENTER,
  RACK_SHELF_HALF,
  RACK_SHELF_TOP,
  TABLE_HEIGHT,
  TABLE_X,
  TABLE_Y,
  ZONE_CENTER,
  Glass,
  _draw_table,
  takeable_without_pushing,
)

SLOTS = MAX_GLASSES
PARTS = 3
TIMESTEP = 0.002  # the examiner's physics step [s]
# The hand's start: tool point 0.30 m above the table, 0.25 m to the left of
# the zone's centre, level and pointing along +x (``hand_rotation(0)``); the
# joint positions are the IK solution (tests check the pose).
START_TOOL_POS = (ZONE_CENTER[0], ZONE_CENTER[1] + 0.25, 0.30)
START_JOINT_POS = {
  "shoulder_pan": -0.2892,
  "shoulder_lift": -1.6754,
  "elbow": 1.5077,
  "wrist_1": -1.4031,
  "wrist_2": -1.5708,
  "wrist_3": -3.4308,
  ".*_finger_joint": -0.0275,  # closed
}
GLASS_ENTITY = "glass_{slot}"
TABLE_ENTITY = "table"
# An unused slot's glass: a small tumbler standing on the floor.
PARKED = Glass(
  id=-1, kind="tumbler", x=0.0, y=0.0, height=0.06, widest=0.06, foot=0.05, mass=0.1
)
PALETTE = {"tumbler": (0.75, 0.88, 0.95, 0.55), "stemmed": (0.85, 0.95, 0.85, 0.55)}


@dataclass(frozen=True)
class Friction:
  """Sliding friction coefficients (hidden from solutions and policies).

  Attributes:
    glass_table: glass on the table top (and floor and rack).
    glass_glass: glass on glass.
    pad_glass: the hand (pads and every other hand part) on glass.
  """

  glass_table: float = 0.35
  glass_glass: float = 0.5
  pad_glass: float = 0.9


@dataclass(frozen=True)
class PhysicsConfig:
  """Private physics settings for tests and training tools.

  Solutions never pass this: an examiner built without it uses the hidden
  defaults. Attributes:
    friction: the three coefficients.
    glasses: replace the drawn glasses of every table (a training/test
      fixture), or None.
    obstacle: centre (x, y) of a fixed 60 mm box post on the table, or None.
  """

  friction: Friction = Friction()
  glasses: tuple[Glass, ...] | None = None
  obstacle: tuple[float, float] | None = None


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


@functools.cache
def table_glasses(table: int) -> tuple[Glass, ...]:
  """A table's true glasses (drawn once per process: about 0.15 s each)."""
  return tuple(_draw_table(table))


def table_glasses_of(table: int, physics: PhysicsConfig) -> tuple[Glass, ...]:
  """The glasses of a table: drawn from its number, or the physics fixture's."""
  if physics.glasses is None:
    return table_glasses(table)
  glasses = tuple(physics.glasses)
  if not 1 <= len(glasses) <= SLOTS:
    raise ValueError(f"a table holds 1 to {SLOTS} glasses")
  if len({g.id for g in glasses}) != len(glasses):
    raise ValueError("glass ids must be unique")
  return glasses


def slot_glass(glasses: tuple[Glass, ...], slot: int) -> Glass:
  return glasses[slot] if slot < len(glasses) else PARKED


def glass_spec(glass: Glass, friction: Friction) -> mujoco.MjSpec:
  """One glass slot: a free body of ``PARTS`` mesh parts, origin at its foot."""
  spec = mujoco.MjSpec()
  body = spec.worldbody.add_body(name="glass")
  body.add_freejoint(name="glass")
  for k, (verts, mass) in enumerate(glass_parts(glass)):
    spec.add_mesh(name=f"part_{k}", uservert=verts.ravel())
    body.add_geom(
      name=f"part_{k}",
      type=mujoco.mjtGeom.mjGEOM_MESH,
      meshname=f"part_{k}",
      mass=mass,
      rgba=list(PALETTE[glass.kind]),
      group=1,
      condim=4,
      # Glass-on-glass friction: the table and the hand win by priority.
      friction=[friction.glass_glass, 0.002, 0.0001],
    )
  return spec


def glass_entity_cfg(slot: int, pool: tuple[int, ...], physics: PhysicsConfig):
  """Slot ``slot`` of every table in ``pool``: one variant per table."""

  def variant(table: int) -> mujoco.MjSpec:
    glass = slot_glass(table_glasses_of(table, physics), slot)
    return glass_spec(glass, physics.friction)

  return VariantEntityCfg(
    init_state=EntityCfg.InitialStateCfg(pos=parked_place(slot)),
    variants={f"table_{t}": functools.partial(variant, t) for t in pool},
    assignment=lambda num_envs: [i % len(pool) for i in range(num_envs)],
  )


def table_spec(physics: PhysicsConfig) -> mujoco.MjSpec:
  """Floor, table top and rack (glass-on-table friction, priority 2), the
  examiner's cameras and lights."""
  friction = physics.friction
  spec = mujoco.MjSpec()
  spec.visual.global_.offwidth = 640
  spec.visual.global_.offheight = 480
  world = spec.worldbody
  fixed = dict(priority=2, condim=4, friction=[friction.glass_table, 0.002, 0.0001])
  tx, ty = TABLE_X, TABLE_Y
  world.add_geom(
    name="floor",
    type=mujoco.mjtGeom.mjGEOM_PLANE,
    size=[3, 3, 0.1],
    pos=[0, 0, -TABLE_HEIGHT],
    rgba=[0.45, 0.45, 0.5, 1],
    **fixed,
  )
  world.add_geom(
    name="table_top",
    type=mujoco.mjtGeom.mjGEOM_BOX,
    size=[(tx[1] - tx[0]) / 2, (ty[1] - ty[0]) / 2, 0.02],
    pos=[(tx[0] + tx[1]) / 2, (ty[0] + ty[1]) / 2, -0.02],
    rgba=[0.62, 0.5, 0.36, 1],
    **fixed,
  )
  rx, ry = RACK_CENTER
  hx, hy, hz = RACK_SHELF_HALF
  rack = dict(rgba=[0.35, 0.3, 0.25, 1], **fixed)
  world.add_geom(
    name="rack_shelf",
    type=mujoco.mjtGeom.mjGEOM_BOX,
    size=[hx, hy, hz],
    pos=[rx, ry, RACK_SHELF_TOP - hz],
    **rack,
  )
  for k, sx in enumerate((-1, 1)):
    world.add_geom(
      name=f"rack_leg_{k}",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[0.01, hy, (RACK_SHELF_TOP - 2 * hz) / 2],
      pos=[rx + sx * (hx - 0.01), ry, (RACK_SHELF_TOP - 2 * hz) / 2],
      **rack,
    )
  if physics.obstacle is not None:
    world.add_geom(
      name="obstacle",
      type=mujoco.mjtGeom.mjGEOM_BOX,
      size=[0.03, 0.03, 0.1],
      pos=[*physics.obstacle, 0.1],
      rgba=[0.6, 0.2, 0.2, 1],
      **fixed,
    )
  add_cameras_and_lights(world)
  return spec


def _look_at_quat(pos, target, up=(0.0, 0.0, 1.0)) -> list[float]:
  f = np.subtract(target, pos)
  f = f / np.linalg.norm(f)
  x = np.cross(f, up)
  x = x / np.linalg.norm(x)
  y = np.cross(x, f)
  quat = np.zeros(4)
  mujoco.mju_mat2Quat(quat, np.column_stack([x, y, -f]).ravel())
  return quat.tolist()


def add_cameras_and_lights(world) -> None:
  """``top_view``: 750 mm above the zone's centre, straight down, 34 degrees;
  ``film``: from the robot's right, framing the arm, the glass zone (with
  room for groups at its near edge) and the rack behind (checked by eye on
  the tables with the nearest and farthest groups of 10000-10099)."""
  zx, zy = ZONE_CENTER
  world.add_camera(
    name="top_view",
    pos=[zx, zy, 0.75],
    quat=[1, 0, 0, 0],
    fovy=34.0,
    resolution=[384, 384],
  )
  film_pos = (0.30, -1.12, 1.05)
  world.add_camera(
    name="film",
    pos=list(film_pos),
    quat=_look_at_quat(film_pos, (0.30, -0.08, 0.17)),
    fovy=42.0,
  )
  world.add_light(pos=[zx, zy, 2.0], dir=[0, 0, -1], diffuse=[0.7, 0.7, 0.7])
  world.add_light(pos=[-0.5, 0.0, 1.5], dir=[0.5, -0.3, -1], diffuse=[0.3, 0.3, 0.3])


def set_hand_friction(spec: mujoco.MjSpec, friction: Friction) -> mujoco.MjSpec:
  """Every hand geom meets glass with the pad friction (priority 1)."""
  hand = spec.body(HAND_BODY_NAME)
  for body in [hand, *hand.bodies]:
    for geom in body.geoms:
      geom.priority = 1
      geom.friction = [friction.pad_glass, 0.005, 0.0001]
  return spec


def robot_entity_cfg(friction: Friction) -> EntityCfg:
  """The UR5 + RG2 (``assets/``), hand closed above the zone, hand friction."""
  cfg = ur5_rg2_entity_cfg(joint_pos=START_JOINT_POS)

  def spec() -> mujoco.MjSpec:
    return set_hand_friction(build_ur5_rg2_spec(), friction)

  cfg.spec_fn = spec
  return cfg


@dataclass(frozen=True)
class TableLayout:
  """The pool's tables as tensors [T, SLOTS(, ...)], for the task's terms.

  Attributes:
    tables: table numbers [T].
    present: the slot holds one of the table's glasses.
    xy: the glasses' drawn places (parked places for empty slots).
    height, widest, foot: the glasses' sizes (the parked glass's if empty).
    takeable_at_start: how many glasses could be taken without a push.
  """

  tables: torch.Tensor
  present: torch.Tensor
  xy: torch.Tensor
  height: torch.Tensor
  widest: torch.Tensor
  foot: torch.Tensor
  takeable_at_start: torch.Tensor


@functools.lru_cache(maxsize=8)
def table_layout(
  pool: tuple[int, ...], fixture: tuple[Glass, ...] | None = None
) -> TableLayout:
  """The pool's tables (or, with ``fixture``, those glasses on every table)."""
  physics = PhysicsConfig(glasses=fixture)
  present = np.zeros((len(pool), SLOTS), bool)
  xy = np.zeros((len(pool), SLOTS, 2))
  sizes = np.zeros((len(pool), SLOTS, 3))
  start = np.zeros(len(pool), int)
  for t, table in enumerate(pool):
    glasses = table_glasses_of(table, physics)
    start[t] = len(
      takeable_without_pushing(
        [(g.x, g.y) for g in glasses], [g.widest for g in glasses]
      )
    )
    for s in range(SLOTS):
      g = slot_glass(glasses, s)
      present[t, s] = s < len(glasses)
      xy[t, s] = (g.x, g.y) if present[t, s] else parked_place(s)[:2]
      sizes[t, s] = (g.height, g.widest, g.foot)
  f = functools.partial(torch.as_tensor, dtype=torch.float32)
  return TableLayout(
    tables=torch.as_tensor(pool),
    present=torch.as_tensor(present),
    xy=f(xy),
    height=f(sizes[..., 0]),
    widest=f(sizes[..., 1]),
    foot=f(sizes[..., 2]),
    takeable_at_start=torch.as_tensor(start),
  )


def hand_quat(heading: torch.Tensor) -> torch.Tensor:
  """``hand_rotation`` as quaternions (w, x, y, z) [..., 4]: a half turn
  about the horizontal (1, 1, 0) axis, then the heading about z."""
  a = math.sqrt(0.5)
  c, s = torch.cos(heading / 2), torch.sin(heading / 2)
  zero = torch.zeros_like(c)
  return torch.stack([zero, a * (c - s), a * (c + s), zero], -1)


def hand_rotation(heading: float) -> np.ndarray:
  """Level closed hand (tool axis straight down) pointing along the heading.

  Returns the tool frame's rotation [3, 3]: y (the pads' width, so their
  edges lead) along the heading, z down, x (closing axis) across.
  """
  c, s = math.cos(heading), math.sin(heading)
  return np.column_stack(([-s, c, 0.0], [c, s, 0.0], [0.0, 0.0, -1.0]))
