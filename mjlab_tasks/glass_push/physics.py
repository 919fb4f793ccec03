"""The glass table's physics step and fixed scene, built into a MuJoCo spec.

``TIMESTEP`` is the task's physics step (the examiner's hand runs on it
too); ``add_table``, ``add_cameras_and_lights`` and ``set_hand_friction``
build the floor, table, rack, optional obstacle, cameras and the hand's
friction into a spec (the task's scene uses them), with the hidden friction
of a ``hidden.PhysicsConfig``. Light: MuJoCo and NumPy only.
"""

from __future__ import annotations

import mujoco
import numpy as np

from assets.ur5_rg2.model import HAND_BODY_NAME
from mjlab_tasks.glass_push.hidden import Friction, PhysicsConfig
from mjlab_tasks.glass_push.rules.tables import (
  RACK_CENTER,
  RACK_SHELF_HALF,
  RACK_SHELF_TOP,
  TABLE_HEIGHT,
  TABLE_X,
  TABLE_Y,
  TOP_VIEW_FOVY,
  TOP_VIEW_HEIGHT,
  ZONE_CENTER,
)

TIMESTEP = 0.002  # s, the physics step of the task and the examiner


def _look_at_quat(pos, target, up=(0.0, 0.0, 1.0)) -> list[float]:
  f = np.subtract(target, pos)
  f = f / np.linalg.norm(f)
  x = np.cross(f, up)
  if np.linalg.norm(x) < 1e-9:
    x = np.array([1.0, 0.0, 0.0])
  x = x / np.linalg.norm(x)
  y = np.cross(x, f)
  quat = np.zeros(4)
  mujoco.mju_mat2Quat(quat, np.column_stack([x, y, -f]).ravel())
  return quat.tolist()


def set_hand_friction(spec: mujoco.MjSpec, friction: Friction) -> None:
  """Every hand geom meets glass with the pad friction (priority 1)."""
  hand = spec.body(HAND_BODY_NAME)
  for body in [hand, *hand.bodies]:
    for geom in body.geoms:
      geom.priority = 1
      geom.friction = [friction.pad_glass, 0.005, 0.0001]


def add_table(world: mujoco.MjsBody, physics: PhysicsConfig) -> None:
  """Floor, table top, rack and the optional obstacle: glass-on-table
  friction (priority 2)."""
  fr = physics.friction
  fixed = dict(priority=2, condim=4, friction=[fr.glass_table, 0.002, 0.0001])
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


def add_cameras_and_lights(world: mujoco.MjsBody) -> None:
  """``top_view`` above the zone and ``film`` from the robot's right."""
  zx, zy = ZONE_CENTER
  world.add_camera(
    name="top_view",
    pos=[zx, zy, TOP_VIEW_HEIGHT],
    quat=[1, 0, 0, 0],
    fovy=TOP_VIEW_FOVY,
    resolution=[384, 384],
  )
  # The film: from the robot's right, framing the arm, the glass zone (with
  # room for groups at its near edge) and the rack behind (checked by eye on
  # the tables with the nearest and farthest groups of 10000-10099).
  film_pos = (0.30, -1.12, 1.05)
  world.add_camera(
    name="film",
    pos=list(film_pos),
    quat=_look_at_quat(film_pos, (0.30, -0.08, 0.17)),
    fovy=42.0,
  )
  world.add_light(pos=[zx, zy, 2.0], dir=[0, 0, -1], diffuse=[0.7, 0.7, 0.7])
  world.add_light(pos=[-0.5, 0.0, 1.5], dir=[0.5, -0.3, -1], diffuse=[0.3, 0.3, 0.3])
