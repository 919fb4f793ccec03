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
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from mjlab.entity import EntityCfg
from mjlab.entity.variants import VariantEntityCfg

from assets.ur5_rg2 import build_ur5_rg2_spec, ur5_rg2_entity_cfg
from mjlab_tasks.glass_push.hidden import Friction, PhysicsConfig, table_glasses
from mjlab_tasks.glass_push.physics import (
  add_cameras_and_lights,
  add_table,
  set_hand_friction,
)
from mjlab_tasks.glass_push.rules.glasses import (
  PALETTE,
  PARKED,
  glass_parts,
  parked_place,
)
from mjlab_tasks.glass_push.rules.tables import (
  MAX_GLASSES,
  ZONE_CENTER,
  Glass,
  takeable_without_pushing,
)

SLOTS = MAX_GLASSES
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
    glass = slot_glass(table_glasses(table, physics), slot)
    return glass_spec(glass, physics.friction)

  tables = list(dict.fromkeys(pool))  # a table in the pool twice: one variant
  return VariantEntityCfg(
    init_state=EntityCfg.InitialStateCfg(pos=parked_place(slot)),
    variants={f"table_{t}": functools.partial(variant, t) for t in tables},
    assignment=lambda num_envs: [
      tables.index(pool[i % len(pool)]) for i in range(num_envs)
    ],
  )


def table_spec(physics: PhysicsConfig) -> mujoco.MjSpec:
  """Floor, table top and rack (glass-on-table friction), the cameras and
  lights: the examiner's own (``physics.add_table``)."""
  spec = mujoco.MjSpec()
  spec.visual.global_.offwidth = 640
  spec.visual.global_.offheight = 480
  add_table(spec.worldbody, physics)
  add_cameras_and_lights(spec.worldbody)
  return spec


def robot_entity_cfg(friction: Friction) -> EntityCfg:
  """The UR5 + RG2 (``assets/``), hand closed above the zone, hand friction."""
  cfg = ur5_rg2_entity_cfg(joint_pos=START_JOINT_POS)

  def spec() -> mujoco.MjSpec:
    robot = build_ur5_rg2_spec()
    set_hand_friction(robot, friction)
    return robot

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
    glasses = table_glasses(table, physics)
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
