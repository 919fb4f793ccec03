"""Tables drawn from a table number: glasses, their places, the zone and rack.

Everything here is the examiner's truth. Solutions never import it (they read
the table through ``Examiner.look()``); the training interface
(``training_table``) hands it out for training tables only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

# Disjoint table-number ranges. The seed's example table 10025 is an
# evaluation table.
TRAINING_TABLES = range(0, 10_000)
EVALUATION_TABLES = range(10_000, 20_000)

# Table top at z = 0 (table frame = world frame), robot base at the origin on
# the table's back edge, reaching along +x.
TABLE_X = (-0.20, 0.80)
TABLE_Y = (-0.50, 0.55)
TABLE_HEIGHT = 0.75
# The crowded glass zone: glass centres are drawn inside it.
ZONE_CENTER = (0.45, -0.27)
ZONE_HALF = (0.14, 0.15)
# Rack to the left of the robot: taken glasses stand on its shelf.
RACK_CENTER = (0.35, 0.38)
RACK_SHELF_HALF = (0.25, 0.09, 0.01)
RACK_SHELF_TOP = 0.10
MIN_GLASSES, MAX_GLASSES = 5, 10
MIN_GAP = 0.002  # Clearance between widest circles at placement [m].
# Crowding: most glasses are placed beside one already there, with a gap of
# MIN_GAP to MAX_CROWD_GAP between widest rings (too little for a finger).
CLUSTER = 0.85
MAX_CROWD_GAP = 0.012

# Glass material numbers used for masses: soda-lime glass density, wall and
# base thickness of ordinary drinking glasses.
GLASS_DENSITY = 2500.0  # kg/m^3
WALL = 0.0018  # m
BASE = 0.005  # m


@dataclass(frozen=True)
class Glass:
  """One glass as the examiner knows it (all lengths in metres).

  ``tumbler``: a plain glass, a solid-of-revolution frustum from the foot
  (diameter ``foot`` at z = 0) to the rim (diameter ``widest`` at
  ``height``). ``stemmed``: a foot disk (``foot`` wide, ``foot_thickness``
  thick), a stem up to ``stem_top`` and a bowl whose widest ring
  (``widest``) is at 60 % of the bowl's height, narrowing to 85 % at the rim.
  """

  id: int
  kind: str
  x: float
  y: float
  height: float
  widest: float
  foot: float
  mass: float
  stem_top: float = 0.0
  stem_radius: float = 0.0
  foot_thickness: float = 0.0

  def as_dict(self) -> dict:
    return asdict(self)


def _check_number(table: int) -> int:
  if isinstance(table, bool) or not isinstance(table, (int, np.integer)):
    raise TypeError(f"table number must be an int, got {table!r}")
  table = int(table)
  if table not in TRAINING_TABLES and table not in EVALUATION_TABLES:
    raise ValueError(
      f"table {table} is outside every range: training tables are "
      f"{TRAINING_TABLES.start}-{TRAINING_TABLES.stop - 1}, evaluation tables "
      f"{EVALUATION_TABLES.start}-{EVALUATION_TABLES.stop - 1}"
    )
  return table


def is_training_table(table: int) -> bool:
  return _check_number(table) in TRAINING_TABLES


def _tumbler_mass(height: float, widest: float, foot: float) -> float:
  r0, r1 = foot / 2, widest / 2
  side = math.pi * (r0 + r1) * math.hypot(height, r1 - r0)
  return GLASS_DENSITY * (side * WALL + math.pi * r0**2 * BASE)


def _draw_shape(rng: np.random.Generator, gid: int) -> dict:
  if rng.random() < 0.6:
    height = rng.uniform(0.075, 0.150)
    widest = rng.uniform(0.058, 0.090)
    foot = rng.uniform(0.70, 0.92) * widest
    mass = _tumbler_mass(height, widest, foot) * rng.uniform(0.9, 1.1)
    return dict(
      id=gid, kind="tumbler", height=height, widest=widest, foot=foot, mass=mass
    )
  height = rng.uniform(0.150, 0.220)
  widest = rng.uniform(0.066, 0.092)
  foot = rng.uniform(0.060, 0.078)
  stem_top = rng.uniform(0.35, 0.45) * height
  bowl_h = height - stem_top
  rw = widest / 2
  bowl = math.pi * rw * 1.6 * bowl_h * WALL * GLASS_DENSITY
  foot_mass = math.pi * (foot / 2) ** 2 * 0.004 * GLASS_DENSITY
  stem = math.pi * 0.004**2 * stem_top * GLASS_DENSITY
  mass = (bowl + foot_mass + stem) * rng.uniform(0.9, 1.1)
  return dict(
    id=gid,
    kind="stemmed",
    height=height,
    widest=widest,
    foot=foot,
    mass=mass,
    stem_top=stem_top,
    stem_radius=0.004,
    foot_thickness=0.004,
  )


def _draw(table: int) -> list[Glass]:
  rng = np.random.default_rng([table, 0x67_6C_61_73])  # "glas"
  count = int(rng.integers(MIN_GLASSES, MAX_GLASSES + 1))
  shapes = [_draw_shape(rng, k) for k in range(count)]
  # Widest first: large glasses find room in the crowd, small ones fill in.
  order = sorted(range(count), key=lambda k: -shapes[k]["widest"])
  placed: dict[int, tuple[float, float]] = {}
  cx, cy = ZONE_CENTER
  hx, hy = ZONE_HALF
  for k in order:
    r = shapes[k]["widest"] / 2
    for _ in range(4000):
      if placed and rng.random() < CLUSTER:
        # Crowd: next to a glass already placed, a few millimetres away.
        j = list(placed)[int(rng.integers(len(placed)))]
        a = rng.uniform(0, 2 * math.pi)
        dist = r + shapes[j]["widest"] / 2 + rng.uniform(MIN_GAP, MAX_CROWD_GAP)
        x, y = placed[j][0] + dist * math.cos(a), placed[j][1] + dist * math.sin(a)
        if abs(x - cx) > hx or abs(y - cy) > hy:
          continue
      else:
        x = cx + rng.uniform(-hx, hx)
        y = cy + rng.uniform(-hy, hy)
      if all(
        math.hypot(x - px, y - py) >= r + shapes[j]["widest"] / 2 + MIN_GAP
        for j, (px, py) in placed.items()
      ):
        placed[k] = (x, y)
        break
  glasses = []
  for new_id, k in enumerate(k for k in range(count) if k in placed):
    shape = dict(shapes[k], id=new_id)
    glasses.append(Glass(x=placed[k][0], y=placed[k][1], **shape))
  return glasses


def _draw_table(table: int) -> list[Glass]:
  """The true glasses of any table (examiner side only)."""
  return _draw(_check_number(table))


def training_table(table: int) -> list[Glass]:
  """True glasses of a training table, as labels for learned solutions.

  Raises:
    PermissionError: for an evaluation table: its truth is never handed out.
  """
  if not is_training_table(table):
    raise PermissionError(
      f"table {table} is an evaluation table; its truth is only read by the "
      f"scoring after a run (training tables are {TRAINING_TABLES.start}-"
      f"{TRAINING_TABLES.stop - 1})"
    )
  return _draw(int(table))
