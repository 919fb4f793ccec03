"""The hidden truth, examiner-only: what a solution never reads directly.

The friction and the private physics settings (``Friction``,
``PhysicsConfig``: the defaults are the hidden values; tests and training
tools pass fixtures), the glasses a table really holds
(``table_glasses``), the true state of the glasses, the noisy readings made
from it, and whether a glass truly had room when it was taken
(docs/glass_push.md). NumPy only: the examiner's world, the task's scene and
terms read it; solutions never import it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from mjlab_tasks.glass_push.rules import room as room_rule
from mjlab_tasks.glass_push.rules.tables import (
  MAX_GLASSES,
  TABLE_X,
  TABLE_Y,
  Glass,
  draw_table,
)

TOPPLED_COS = math.cos(math.radians(30.0))
OFF_TABLE_Z = -0.05  # glass origin below this: knocked off
# Reading noise (standard deviations, metres): see docs/glass_push.md.
NOISE_POSITION = 0.001
NOISE_HEIGHT = 0.002
NOISE_WIDTH = 0.003


@dataclass(frozen=True)
class Friction:
  """Sliding friction coefficients (hidden from solutions).

  Attributes:
    glass_table: glass on the table top.
    glass_glass: glass on glass.
    pad_glass: the hand (pads and every other hand part) on glass.
  """

  glass_table: float = 0.35
  glass_glass: float = 0.5
  pad_glass: float = 0.9


@dataclass(frozen=True)
class PhysicsConfig:
  """Private physics settings for tests and training tools.

  Solutions never pass this: an ``Examiner`` built without it uses the hidden
  defaults. Attributes:
    friction: the three coefficients.
    glasses: replace the drawn glasses (a training/test fixture), or None.
    obstacle: centre (x, y) of a fixed 60 mm box post on the table, or None.
  """

  friction: Friction = Friction()
  glasses: tuple[Glass, ...] | None = None
  obstacle: tuple[float, float] | None = None


@functools.cache
def _drawn(table: int) -> tuple[Glass, ...]:
  """A table's drawn glasses, once per process (about 0.15 s each)."""
  return tuple(draw_table(table))


def table_glasses(
  table: int, physics: PhysicsConfig | None = None
) -> tuple[Glass, ...]:
  """The glasses a table really holds: drawn from its number (once per
  process), or the physics fixture's (checked)."""
  if physics is None or physics.glasses is None:
    return _drawn(table)
  glasses = tuple(physics.glasses)
  if not 1 <= len(glasses) <= MAX_GLASSES:
    raise ValueError(f"a table holds 1 to {MAX_GLASSES} glasses")
  if len({g.id for g in glasses}) != len(glasses):
    raise ValueError("glass ids must be unique")
  return glasses


def glass_states(glasses, xpos, xmat, taken) -> list[dict]:
  """True state of every glass from its body poses (xpos [G, 3], xmat [G, 9]):
  position, uprightness, and where it is (table, off, rack)."""
  out = []
  for g, pos, mat in zip(glasses, xpos, xmat, strict=True):
    up = float(np.ravel(mat)[8])
    if g.id in taken:
      where = "rack"
    elif (
      pos[2] < OFF_TABLE_Z
      or not TABLE_X[0] <= pos[0] <= TABLE_X[1]
      or not TABLE_Y[0] <= pos[1] <= TABLE_Y[1]
    ):
      where = "off"
    else:
      where = "table"
    out.append(
      dict(
        id=g.id,
        x=float(pos[0]),
        y=float(pos[1]),
        z=float(pos[2]),
        upright=up,
        standing=bool(up > TOPPLED_COS),
        where=where,
      )
    )
  return out


def readings(table, look, glasses, states, xpos, xmat) -> list[dict]:
  """The noisy readings of look number ``look`` (noise from table and look)."""
  rng = np.random.default_rng([table, look, 0x6C6F6F6B])
  sigma = np.array(
    [NOISE_POSITION, NOISE_POSITION, NOISE_HEIGHT, NOISE_WIDTH, NOISE_WIDTH]
  )
  noise = rng.normal(size=(len(glasses), 5)) * sigma  # [G, 5]
  out = []
  for k, (g, s) in enumerate(zip(glasses, states, strict=True)):
    if s["where"] != "table":
      continue
    if s["standing"]:
      xy = np.array([s["x"], s["y"]])
    else:  # the middle of its axis
      rot = np.reshape(xmat[k], (3, 3))
      xy = (np.asarray(xpos[k]) + rot @ np.array([0.0, 0.0, g.height / 2]))[:2]
    x, y = xy + noise[k, :2]
    out.append(
      {
        "id": g.id,
        "x": round(float(x), 4),
        "y": round(float(y), 4),
        "height": round(g.height + float(noise[k, 2]), 4),
        "widest": round(g.widest + float(noise[k, 3]), 4),
        "foot": round(g.foot + float(noise[k, 4]), 4),
        "standing": s["standing"],
      }
    )
  return out


def had_room(k: int, states: list[dict], glasses) -> bool:
  """Whether glass ``k`` has room to be taken, on the true states."""
  me = states[k]
  others = [
    (s, g)
    for s, g in zip(states, glasses, strict=True)
    if s["where"] == "table" and s["id"] != me["id"]
  ]
  return bool(
    me["where"] == "table"
    and me["standing"]
    and room_rule.has_room(
      np.array([me["x"], me["y"]]),
      glasses[k].widest,
      np.array([[s["x"], s["y"]] for s, _ in others]).reshape(-1, 2),
      np.array([g.widest for _, g in others]),
    )
  )
