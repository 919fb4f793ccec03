"""Tables drawn from a table number: glasses, their places, the zone and rack.

The table's geometry and how its glasses are drawn are rules (documented);
the glasses drawn for a table are the examiner's truth. Solutions never
draw a table (they read it through ``Examiner.look()``); the examiner reads
it through ``hidden.table_glasses`` and the training interface
(``training_table``) hands it out for training tables only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from mjlab_tasks.glass_push.rules.room import has_room

# Disjoint table-number ranges. The glass-pushing specification's example
# table 10025 is an evaluation table.
TRAINING_TABLES = range(0, 10_000)
EVALUATION_TABLES = range(10_000, 20_000)

# Table top at z = 0 (table frame = world frame), robot base at the origin on
# the table's back edge, reaching along +x.
TABLE_X = (-0.20, 0.80)
TABLE_Y = (-0.50, 0.55)
TABLE_HEIGHT = 0.75
# The glass zone: the middle of each table's group of glasses is drawn
# inside it (the glasses themselves may stand a little outside).
ZONE_CENTER = (0.45, -0.27)
ZONE_HALF = (0.14, 0.15)
# Rack to the left of the robot: taken glasses stand on its shelf.
RACK_CENTER = (0.35, 0.38)
RACK_SHELF_HALF = (0.25, 0.09, 0.01)
RACK_SHELF_TOP = 0.10
MIN_GLASSES, MAX_GLASSES = 7, 10
# Crowding: the glasses stand packed in one tight group, each new glass set
# against two already there (or against the first), MIN_GAP to MAX_CROWD_GAP
# between widest rings, where it touches the most glasses, then as close to
# the group's middle as it fits: far too little for a finger (the room rule
# needs about 26 mm on both sides). 7 to 10 glasses: fewer make a group
# whose every glass can be peeled off its edge without a push.
MIN_GAP = 0.001  # Clearance between widest rings at placement [m].
MAX_CROWD_GAP = 0.005
# Placement jitter: each candidate place's distance to the group's middle
# gets up to this much noise, so the groups are compact but not all alike.
PACK_JITTER = 0.015
PACKINGS = 6  # packings drawn per table; the least takeable one is kept
TOUCH_BONUS = 0.05  # [m] of distance to the middle that one more touch is worth
# The hand must come down beside every glass of the group: a ring this far
# outside each glass's widest ring stays within the arm's reach
# (hand.REACH_MIN/REACH_MAX, with 10 mm to spare) and on the table top.
HAND_RING = 0.04
REACH_BAND = (0.26, 0.71)
EDGE_KEEP = 0.01
VIEW_HALF = 0.21  # every glass's widest ring this near the zone's middle
TALLEST_GLASS = 0.22  # m, the tallest a stemmed glass is drawn
# The examiner's top view: a camera TOP_VIEW_HEIGHT above the zone's middle,
# looking straight down. A glass's top rim is the part of it nearest the
# camera, so it reaches farthest out in the picture: a rim VIEW_HALF out at
# TALLEST_GLASS needs 2 atan(0.21 / 0.53) = 43.2 degrees; 44 frames every
# glass whole (0.61 x 0.61 m at the table top, 1.6 mm per pixel).
TOP_VIEW_HEIGHT = 0.75
TOP_VIEW_FOVY = 44.0  # degrees, the picture is square

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
  height = rng.uniform(0.150, TALLEST_GLASS)
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


def _pack(rng: np.random.Generator, radii: list[float]) -> np.ndarray:
  """A compact group of circles, in order: each goes where it touches (with a
  gap of MIN_GAP to MAX_CROWD_GAP) one or two circles already placed, at the
  free place nearest the group's middle (plus jitter). Centres [N, 2]."""
  n = len(radii)
  xy = np.zeros((n, 2))
  for k in range(1, n):
    r = radii[k]
    mid = xy[:k].mean(0)
    cands = []
    for i in range(k):
      # Beside glass i alone, at 12 angles (the second glass, or an open side).
      d_i = radii[i] + r + rng.uniform(MIN_GAP, MAX_CROWD_GAP)
      for a in rng.uniform(0, 2 * math.pi) + np.arange(12) * math.pi / 6:
        cands.append(xy[i] + d_i * np.array([math.cos(a), math.sin(a)]))
      for j in range(i):
        # Against both i and j: the two intersections of their rings.
        d_j = radii[j] + r + rng.uniform(MIN_GAP, MAX_CROWD_GAP)
        base = xy[j] - xy[i]
        dist = float(np.linalg.norm(base))
        if dist == 0 or dist > d_i + d_j or dist < abs(d_i - d_j):
          continue
        along = (d_i**2 - d_j**2 + dist**2) / (2 * dist)
        across = math.sqrt(max(d_i**2 - along**2, 0.0))
        u = base / dist
        n_ = np.array([-u[1], u[0]])
        for s in (1.0, -1.0):
          cands.append(xy[i] + along * u + s * across * n_)
    cands = np.array(cands)
    need = np.array(radii[:k]) + r + MIN_GAP - 1e-9
    clear = np.all(
      np.linalg.norm(cands[:, None, :] - xy[None, :k], axis=2) >= need, axis=1
    )
    cands = cands[clear]
    # Most glasses touched first (a nook between three beats a side of two),
    # then nearest the middle.
    gaps = np.linalg.norm(cands[:, None, :] - xy[None, :k], axis=2) - (
      np.array(radii[:k]) + r
    )
    touching = np.sum(gaps <= MAX_CROWD_GAP + 1e-6, axis=1)
    score = (
      np.linalg.norm(cands - mid, axis=1)
      + rng.uniform(0, PACK_JITTER, len(cands))
      - TOUCH_BONUS * touching
    )
    xy[k] = cands[int(np.argmin(score))]
  return xy


def takeable_without_pushing(xy, widest) -> list[int]:
  """Indices of the glasses that can be taken one after another without a
  push: repeatedly take the first glass with room (``room.has_room`` on
  these true centres and widest rings) until none has room."""
  xy = np.asarray(xy, dtype=float).reshape(-1, 2)
  widest = np.asarray(widest, dtype=float)
  alive = list(range(len(widest)))
  taken = []
  while True:
    for i in alive:
      others = [j for j in alive if j != i]
      if has_room(xy[i], widest[i], xy[others], widest[others]):
        alive.remove(i)
        taken.append(i)
        break
    else:
      return taken


def top_view_reach(glass: Glass) -> float:
  """How far the glass's top rim reaches from the top view's axis, as the
  tangent of its angle to the axis (larger of x and y): the glass is whole
  in the picture when it is at most tan(TOP_VIEW_FOVY / 2). The rim is taken
  as the widest ring (a cylinder of the glass's height, which holds it)."""
  out = max(abs(glass.x - ZONE_CENTER[0]), abs(glass.y - ZONE_CENTER[1]))
  return (out + glass.widest / 2) / (TOP_VIEW_HEIGHT - glass.height)


def _fits(xy: np.ndarray, radii: np.ndarray) -> bool:
  """Every glass can be approached by the hand from any side: the ring
  HAND_RING outside it is within reach and on the table top; and every
  glass is whole in the top view."""
  dist = np.linalg.norm(xy, axis=1)
  outer = radii + HAND_RING
  return bool(
    np.all(dist + outer <= REACH_BAND[1])
    and np.all(dist - outer >= REACH_BAND[0])
    and np.all(xy[:, 1] - outer >= TABLE_Y[0] + EDGE_KEEP)
    and np.all(np.abs(xy - ZONE_CENTER) + radii[:, None] <= VIEW_HALF)
  )


def _draw(table: int) -> list[Glass]:
  rng = np.random.default_rng([table, 0x67_6C_61_73])  # "glas"
  count = int(rng.integers(MIN_GLASSES, MAX_GLASSES + 1))
  shapes = [_draw_shape(rng, k) for k in range(count)]
  # Packed in a random order: wide and narrow, tall and low glasses mix.
  order = [int(k) for k in rng.permutation(count)]
  radii = np.array([shapes[k]["widest"] / 2 for k in order])
  # Of PACKINGS packings, the one where taking glasses that have room, one
  # after another without any push, takes the fewest (the room rule itself
  # is unchanged: the table is made more crowded, not the rule stricter).
  packs = [_pack(rng, list(radii)) for _ in range(PACKINGS)]
  local = min(packs, key=lambda p: len(takeable_without_pushing(p, 2 * radii)))
  local -= local.mean(0)
  # The group's middle: drawn in the zone until the hand fits all round it
  # (a group that never fits is pulled to the zone's centre).
  cx, cy = ZONE_CENTER
  hx, hy = ZONE_HALF
  xy = local + np.array([cx, cy])
  for _ in range(200):
    trial = local + np.array([cx + rng.uniform(-hx, hx), cy + rng.uniform(-hy, hy)])
    if _fits(trial, radii):
      xy = trial
      break
  where = dict(zip(order, xy, strict=True))
  return [
    Glass(x=float(where[k][0]), y=float(where[k][1]), **shapes[k]) for k in range(count)
  ]


def draw_table(table: int) -> list[Glass]:
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
