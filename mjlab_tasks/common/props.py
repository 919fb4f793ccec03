"""Static props shared by the tasks' scenes."""

from __future__ import annotations

import mujoco


def open_box_spec(
  name: str,
  inner_x: float,
  inner_y: float,
  wall_height: float,
  wall: float,
  floor: float,
  rgba: tuple[float, float, float, float],
) -> mujoco.MjSpec:
  """An open box (tray, bin): a floor and four walls around an inner footprint.

  Geoms ``{name}_floor`` and ``{name}_wall_{px,nx,py,ny}``; the floor's top is
  ``floor`` above the body origin, the inner footprint ``inner_x`` by
  ``inner_y`` is centred on it and the walls stand ``wall_height`` above the
  floor.

  Returns:
    A spec whose root body is named ``name``.
  """
  spec = mujoco.MjSpec()
  body = spec.worldbody.add_body(name=name)
  hx, hy = inner_x / 2 + wall, inner_y / 2 + wall
  box = mujoco.mjtGeom.mjGEOM_BOX
  body.add_geom(
    name=f"{name}_floor",
    type=box,
    size=[hx, hy, floor / 2],
    pos=[0, 0, floor / 2],
    rgba=list(rgba),
  )
  z, hz = floor + wall_height / 2, wall_height / 2
  cx, cy = inner_x / 2 + wall / 2, inner_y / 2 + wall / 2
  walls = (
    ("px", (cx, 0), (wall / 2, hy)),
    ("nx", (-cx, 0), (wall / 2, hy)),
    ("py", (0, cy), (inner_x / 2, wall / 2)),
    ("ny", (0, -cy), (inner_x / 2, wall / 2)),
  )
  for side, (x, y), (sx, sy) in walls:
    body.add_geom(
      name=f"{name}_wall_{side}",
      type=box,
      size=[sx, sy, hz],
      pos=[x, y, z],
      rgba=list(rgba),
    )
  return spec
