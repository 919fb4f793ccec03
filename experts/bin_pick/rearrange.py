"""Non-prehensile rearrangement moves: pushes with the closed gripper.

For an object that cannot be grasped where it lies (by a wall, standing,
wedged across the bin, after failed grasps, or blocked by others), a short
straight push of the closed hand, along the bin's long axis, toward its centre
line, or diagonally, moves it somewhere graspable. Two kinds:

  push   pad centre at the object's middle height (the pads' lowest point at
         least ``floor_clearance`` above the bin floor): slides it
  tip    pad centre 12 mm below its top, only for objects taller than 40 mm:
         tips a standing object over in the push direction
  roll   for a round object lying by a wall or across the bin (a capsule
         or cylinder on its side, a sphere), which no hand fits behind: the
         closed pads come down on its top, press ``roll_press`` into it and
         move away from the wall; the object rolls under them, its centre
         moving about half as far as the hand (pad and floor friction are
         equal, 1.0, so a flat object cannot be dragged this way: only
         rolling moves it)
  topple for a standing object by a wall, which no hand fits behind: the
         closed pads press on its top and move away from the wall across
         its thin side, its thickness and ``topple_overshoot`` farther; the
         top goes with them and the object falls over, away from the wall.
         Also (``topple_only``) for any object by a wall at least as tall
         as it is thick that way

The hand is untilted (approach straight down) and closed, with its closing
axis across the push (the closed pads' edges push) or along it (the pads'
faces push; the housing's narrow side is across the push, so it fits nearer
a wall), each also half turned. The move: vertical approach from the transit
height down to the start, behind the object, then the straight push; it may
shove neighbours (only the walls bound its length; more free room in front
orders the directions).

Feasibility is checked on the ``GraspReplica`` (kinematics and collision
detection only; the target does not move there), in this order, the first
failure naming the rejection:

  no_room             room to the wall in front of the object below
                      ``min_distance``
  ik                  no converged IK at the transit point, the start or a
                      sampled point of the approach or the push
  wall_clearance      robot geometry closer than ``wall_clearance`` to a bin
                      wall at the start or a sampled push point
  bin_floor           ... closer than ``floor_clearance`` to the bin floor
  start_collision     at the start the robot penetrates an object (the
                      target included) or the table
  approach_collision  robot geometry penetrates anything at a sampled point
                      of the vertical approach
  path_collision      at a sampled push point robot geometry penetrates an
                      object other than the target, or the table
  lands_too_wide      (a topple) lying after it, the object would be wider
                      than ``topple_max_width`` on both horizontal sides:
                      no grasp takes it there either
  too_flat            (a topple) the object is lower than it is thick along
                      the move: pressed on its top, it does not tip over

A sampled feasibility check, not a continuous collision-free motion proof.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import mujoco
import numpy as np

from assets.ur5_rg2.model import RG2_PAD_HALF
from experts.bin_pick.grasps import tool_rotation

REARRANGE_REASONS = ("wall", "standing", "across", "failed_grasps", "blocked")
PUSH_REJECTIONS = (
  "no_room",
  "ik",
  "wall_clearance",
  "bin_floor",
  "start_collision",
  "approach_collision",
  "path_collision",
  "lands_too_wide",
  "too_flat",
)
PUSH_KINDS = ("push", "tip", "roll", "topple")
_ROUND_GEOMS = (
  mujoco.mjtGeom.mjGEOM_CAPSULE,
  mujoco.mjtGeom.mjGEOM_CYLINDER,
  mujoco.mjtGeom.mjGEOM_SPHERE,
  mujoco.mjtGeom.mjGEOM_ELLIPSOID,
)
ROLL_MAX_AXIS_TILT = math.radians(30.0)
"""A capsule or cylinder rolls when its axis is within this of horizontal."""

# object_situation thresholds.
STANDING_RATIO = 1.3
STANDING_MIN_HEIGHT = 0.05
ACROSS_FRACTION = 0.75
WALL_GAP = 0.025
# Tip pushes: pad centre this far below the top, only for taller objects.
TIP_BELOW_TOP = 0.012
TIP_MIN_HEIGHT = 0.04
# Added to the floor rule's tool height: IK converges to 0.1 mm [m].
IK_SLACK = 0.0005
CLOSED_FINGER_HALF = 0.016
"""The closed hand's half extent along its closing axis: pad 6 mm and finger
link 10 mm (the link above the pad) [m]."""
# Free room kept in front of the pushed object [m].
ROOM_MARGIN = 0.005
# Rolls: checked this far above the object's top; the top is the mean of the
# surface points within the band below it; shorter rolls are not worth one.
ROLL_TOUCH_GAP = 0.001
ROLL_TOP_BAND = 0.002
ROLL_MIN_SHIFT = 0.01
ROLL_MIN_AWAY = 0.5
"""A roll leaves the wall only when its direction points this much away
(cosine with the wall's inward normal)."""
ROLL_OFFSETS = (0.0, 0.005, 0.01, 0.015)
"""Hand starts off the object's top toward the roll [m]; the pads' 25 mm
width keeps the top under their flat bottom up to 12.5 mm; at 15 mm their
trailing edge presses 2.5 mm past the top line, where a round object of 8
mm radius or more lies within 0.4 mm of its top (the press is 3 mm).
Measured on the replica (pour and object seed 3, environment 2, at
``e07fb10``): a cylinder in a corner, rolled off the end wall along the
bin, had the housing 1.2 mm from the long wall at 10 mm, 3 mm or more at
15."""
TOPPLE_OFFSETS = (0.0, 0.005, 0.01, 0.015)
"""As ``ROLL_OFFSETS`` for a topple: 15 mm off still leaves the pads on 10 mm
of a 26 mm top, and lets the housing clear the wall behind a thin object
(measured on the replica: an L-block standing on edge 1 mm from a long wall
had no topple within 10 mm)."""


@dataclass(frozen=True)
class PushCfg:
  distance: float = 0.06
  """Push length of the object [m] (shortened to the free room, at least
  ``min_distance``)."""
  min_distance: float = 0.025
  approach_gap: float = 0.01
  """Gap between the pads and the object at the push start [m]."""
  wall_clearance: float = 0.003
  """Robot geometry from the bin walls along the whole move [m]."""
  floor_clearance: float = 0.004
  """Lowest robot point above the bin floor [m]."""
  step: float = 0.015
  """Spacing of sampled points on the vertical approach and the push line [m]."""
  max_checks: int = 80
  """Replica checks (each hand yaw counts) before giving the object up."""
  roll_shift: float = 0.025
  """How far a roll should move a round object off its wall [m]: the hand
  travels twice that (measured on the replica: 10 to 20 mm off a long wall
  made every undelivered object of a development run graspable)."""
  roll_press: float = 0.003
  """How far below the object's top the closed pads aim while rolling it
  (the arm's position servo then presses) [m]."""
  topple_overshoot: float = 0.015
  """How much farther than a standing object's thickness the pads carry its
  top in a topple [m]: its centre of mass passes over the edge it tips on
  once the top has moved about the thickness."""
  topple_max_width: float = 0.08
  """A topple is planned only when the object, lying after it (its height
  along the move, its width across), is at most this wide one way: the
  grasp's ``ReplicaCfg.max_width`` (measured: a wide flat box standing by a
  wall toppled flat, 96 x 139 mm, and no grasp took it) [m]."""


@dataclass
class PushPlan:
  """A feasible push for one object (world frame)."""

  object_index: int
  reason: str
  """One of ``REARRANGE_REASONS``: why the object is moved."""
  kind: str
  """``"push"`` (low, at the object's middle height), ``"tip"`` (near its top),
  ``"roll"`` or ``"topple"`` (both pressing on its top)."""
  direction_w: np.ndarray
  """Unit horizontal push direction [3]."""
  start_w: np.ndarray
  """Tool site (pad centre) at the push start [3]."""
  end_w: np.ndarray
  """Tool site at the push end [3]."""
  rotation_w: np.ndarray
  """Tool rotation for the whole move [3, 3] (y along the push direction)."""
  transit_z: float
  """Tool height of the vertical approach's start [m]."""


@dataclass(frozen=True)
class BinInterior:
  """Inner bounds of the posed bin (world frame, axis-aligned)."""

  lo: np.ndarray
  """Inner (x, y) minimum [2]."""
  hi: np.ndarray
  """Inner (x, y) maximum [2]."""
  floor_z: float
  """Top of the bin floor [m]."""

  @property
  def centre(self) -> np.ndarray:
    return 0.5 * (self.lo + self.hi)


def bin_interior(replica) -> BinInterior:
  """Inner bounds from the replica's posed bin geoms (walls: the faces
  toward the floor's centre; floor: its top)."""
  m, d = replica.model, replica.data
  floor = m.geom("bin/bin_floor").id
  rot = d.geom_xmat[floor].reshape(3, 3)
  floor_half = np.abs(rot) @ m.geom_size[floor]
  centre = d.geom_xpos[floor]
  floor_z = float(centre[2] + floor_half[2])
  lo = centre[:2] - floor_half[:2]
  hi = centre[:2] + floor_half[:2]
  for g in replica.bin_geoms:
    if not replica._is_wall[g]:
      continue
    half = np.abs(d.geom_xmat[g].reshape(3, 3)) @ m.geom_size[g]
    w_lo, w_hi = d.geom_xpos[g] - half, d.geom_xpos[g] + half
    for a in range(2):
      if w_hi[a] <= centre[a]:
        lo[a] = max(lo[a], w_hi[a])
      elif w_lo[a] >= centre[a]:
        hi[a] = min(hi[a], w_lo[a])
  return BinInterior(lo=lo, hi=hi, floor_z=floor_z)


def _surface_points(tri: np.ndarray, n: int = 4) -> np.ndarray:
  """Points on the triangles (a barycentric grid, ``n`` divisions per edge),
  so large faces count inside bands, not only at their corners [P, 3]."""
  ij = [(i, j) for i in range(n + 1) for j in range(n + 1 - i)]
  w = np.array([(i / n, j / n, 1 - (i + j) / n) for i, j in ij])  # [W, 3]
  return np.einsum("wk,tkd->twd", w, tri).reshape(-1, 3)


def _horizontal_widths(points: np.ndarray, directions: int = 36) -> np.ndarray:
  angles = np.pi * np.arange(directions) / directions
  axes = np.stack([np.cos(angles), np.sin(angles)], 1)
  proj = points[:, :2] @ axes.T
  return proj.max(0) - proj.min(0)


def object_situation(replica, k: int) -> str:
  """Why object ``k`` is hard to grasp, from its posed collision triangles and
  the bin: ``"standing"`` (height over 1.3x its smallest horizontal extent
  and over 50 mm), ``"across"`` (world x extent over 0.75 of the bin's inner
  width), ``"wall"`` (gap to the nearest wall under 25 mm), else
  ``"blocked"``."""
  pts = replica.object_triangles(k).reshape(-1, 3)
  interior = bin_interior(replica)
  height = float(pts[:, 2].max() - pts[:, 2].min())
  smallest = float(_horizontal_widths(pts).min())
  if height > STANDING_RATIO * smallest and height > STANDING_MIN_HEIGHT:
    return "standing"
  lo, hi = pts[:, :2].min(0), pts[:, :2].max(0)
  inner_width = float(interior.hi[0] - interior.lo[0])
  if hi[0] - lo[0] > ACROSS_FRACTION * inner_width:
    return "across"
  gap = min(float((lo - interior.lo).min()), float((interior.hi - hi).min()))
  if gap < WALL_GAP:
    return "wall"
  return "blocked"


def roll_axis(replica, k: int) -> np.ndarray | None:
  """Object ``k`` rolls across the floor when every geom is a sphere or
  ellipsoid (any direction: returns a zero axis), or a capsule or cylinder
  whose axis is within ``ROLL_MAX_AXIS_TILT`` of horizontal (returns that
  axis's horizontal unit direction [3]: it rolls across it); else None."""
  m, d = replica.model, replica.data
  axis = np.zeros(3)
  for g in replica.object_geoms[k]:
    kind = m.geom_type[g]
    if kind not in _ROUND_GEOMS:
      return None
    if kind in (mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER):
      a = d.geom_xmat[g].reshape(3, 3)[:, 2]
      if abs(float(a[2])) > math.sin(ROLL_MAX_AXIS_TILT):
        return None
      axis = np.array([a[0], a[1], 0.0]) / float(np.linalg.norm(a[:2]))
  return axis


def rolls(replica, k: int) -> bool:
  """Object ``k`` is round and lies so that it rolls (``roll_axis``)."""
  return roll_axis(replica, k) is not None


def _roll_directions(replica, k: int, points: np.ndarray, interior) -> list:
  """Where a roll may take object ``k`` off a wall: across its axis (a
  capsule rolls only that way), either side, wherever a wall lies behind it
  within ``WALL_GAP`` (the nearest such wall first); a sphere straight off
  its nearest wall. Each with the room to the walls that way."""
  axis = roll_axis(replica, k)
  if axis is None:
    return []
  if not axis.any():  # A sphere: straight off the wall.
    inward = _nearest_wall_inward(points, interior)
    return [(inward, _room_to_walls(points, inward, interior))]
  across = np.array([-axis[1], axis[0], 0.0])
  return _off_wall_directions(points, interior, (across, -across))


def _off_wall_directions(points: np.ndarray, interior, directions) -> list:
  """Those of ``directions`` that lead off a wall lying behind the points
  within ``WALL_GAP`` (the direction pointing at least ``ROLL_MIN_AWAY``
  along that wall's inward normal), nearest wall first, each with the room
  to the walls that way."""
  gaps, normals = _wall_gaps(points, interior)
  found = []
  for direction in directions:
    away = normals @ direction >= ROLL_MIN_AWAY
    behind = gaps[away].tolist()
    if behind and min(behind) < WALL_GAP:
      found.append((min(behind), direction))
  found.sort(key=lambda f: f[0])
  return [(d, _room_to_walls(points, d, interior)) for _, d in found]


def _wall_gaps(points: np.ndarray, interior) -> tuple[np.ndarray, np.ndarray]:
  """Gaps from the points to the four walls [4] and the walls' inward unit
  normals [4, 3]."""
  gaps = np.array(
    [
      points[:, 0].min() - interior.lo[0],
      interior.hi[0] - points[:, 0].max(),
      points[:, 1].min() - interior.lo[1],
      interior.hi[1] - points[:, 1].max(),
    ]
  )
  normals = np.array([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, -1.0, 0]])
  return gaps, normals


def _nearest_wall_inward(points: np.ndarray, interior) -> np.ndarray:
  """The inward unit normal [3] of the bin wall nearest to the points."""
  gaps, normals = _wall_gaps(points, interior)
  return normals[int(np.argmin(gaps))]


def _room_to_walls(points: np.ndarray, direction: np.ndarray, interior) -> float:
  """How far the points can translate along ``direction`` inside the bin."""
  room = np.inf
  for a in range(2):
    if direction[a] > 1e-9:
      room = min(room, float(((interior.hi[a] - points[:, a]) / direction[a]).min()))
    elif direction[a] < -1e-9:
      room = min(room, float(((interior.lo[a] - points[:, a]) / direction[a]).min()))
  return room


def _room_to_objects(
  points: np.ndarray, direction: np.ndarray, others: np.ndarray
) -> float:
  """Free distance in front of the object along ``direction`` to the other
  objects' surface points within its lateral band and height range."""
  if len(others) == 0:
    return np.inf
  normal = np.array([-direction[1], direction[0], 0.0])
  lat = points @ normal
  front = float((points @ direction).max())
  z_lo, z_hi = points[:, 2].min(), points[:, 2].max()
  o_lat, o_s = others @ normal, others @ direction
  band = (
    (o_lat >= lat.min())
    & (o_lat <= lat.max())
    & (others[:, 2] >= z_lo)
    & (others[:, 2] <= z_hi)
    & (o_s > front - 1e-3)
  )
  if not band.any():
    return np.inf
  return max(float(o_s[band].min() - front), 0.0)


@dataclass
class _Move:
  priority: tuple
  direction: np.ndarray
  kind: str
  room: float


def _candidate_moves(replica, k: int, reason: str, interior, points) -> list[_Move]:
  """Directions x kinds, most useful first for the situation."""
  centre = 0.5 * (points.min(0) + points.max(0))
  off_x = float(interior.centre[0] - centre[0])
  toward = [np.sign(off_x)] if abs(off_x) > 1e-3 else [1.0, -1.0]
  dirs = [np.array([0.0, 1.0]), np.array([0.0, -1.0])]
  for sx in toward:
    dirs.append(np.array([sx, 0.0]))
  for sx in toward:
    for sy in (1.0, -1.0):
      dirs.append(np.array([sx, sy]) / math.sqrt(2.0))
  others = [
    _surface_points(replica.object_triangles(j))
    for j in range(len(replica.object_geoms))
    if j != k
  ]
  others = np.concatenate(others) if others else np.zeros((0, 3))
  height = float(points[:, 2].max() - points[:, 2].min())
  kinds = ["push"] + (["tip"] if height > TIP_MIN_HEIGHT else [])
  # The nearest wall's inward normal, for "wall" objects.
  inward = _nearest_wall_inward(points, interior)[:2]
  moves = []
  for d2 in dirs:
    direction = np.array([d2[0], d2[1], 0.0])
    # The push may shove neighbours (rearranging the pile); only the walls
    # bound its length. Free room in front still orders the directions.
    room = _room_to_walls(points, direction, interior)
    free = min(room, _room_to_objects(points, direction, others))
    for kind in kinds:
      if reason == "standing":
        first = 0 if kind == "tip" else 1  # Tip it over first.
      elif reason == "wall":
        first = 0 if float(d2 @ inward) > 0.5 else 1  # Away from the wall.
      elif reason == "across":
        first = 0 if abs(d2[0]) < 1e-9 else 1  # Along the long axis.
      else:
        first = 0
      kind_rank = 0 if (kind == "tip") == (reason == "standing") else 1
      # More free room first (rounded: near-ties keep the listed order).
      moves.append(
        _Move((first, kind_rank, -round(min(free, 1.0), 3)), direction, kind, room)
      )
  moves.sort(key=lambda mv: mv.priority)
  return moves


def plan_push(
  replica,
  k: int,
  reason: str,
  transit_z: float,
  q_now: np.ndarray,
  cfg: PushCfg = PushCfg(),
  topple_only: bool = False,
) -> tuple[PushPlan | None, Counter]:
  """The first feasible push of object ``k`` on the posed replica, with the
  rejections counted (reasons in ``PUSH_REJECTIONS``). The replica's joint
  positions are restored afterwards. ``topple_only``: only a topple (of an
  object by a wall that is not standing too, which the expert tries after
  every other object's rolls and pushes)."""
  if reason not in REARRANGE_REASONS:
    raise ValueError(f"unknown rearrangement reason {reason!r}")
  # Contacts are reported within the robot geoms' margin only.
  margin = float(replica.model.geom_margin[replica.robot_geoms].min())
  if max(cfg.wall_clearance, cfg.floor_clearance) >= margin:
    raise ValueError(f"clearances must stay below the replica's margin {margin}")
  rejections: Counter = Counter()
  interior = bin_interior(replica)
  points = _surface_points(replica.object_triangles(k))
  z_lo, z_hi = float(points[:, 2].min()), float(points[:, 2].max())
  ph, hw = RG2_PAD_HALF[2], RG2_PAD_HALF[1]
  # The floor rule, plus the IK's position tolerance (else the pads' measured
  # clearance lands a hair under floor_clearance).
  lowest = interior.floor_z + ph + cfg.floor_clearance + IK_SLACK
  heights = {
    "push": max(0.5 * (z_lo + z_hi), lowest),
    "tip": max(z_hi - TIP_BELOW_TOP, lowest),
    "roll": z_hi + ph + ROLL_TOUCH_GAP,  # Checked 1 mm above the top.
  }
  centre = 0.5 * (points.min(0) + points.max(0))
  top = points[points[:, 2] >= z_hi - ROLL_TOP_BAND, :2].mean(0)
  saved = replica.data.qpos.copy()
  budget = cfg.max_checks
  # Nothing fits behind an object by a wall: roll a round one (one lying
  # across the bin too: against an end wall, neither a grasp nor a push fits
  # behind it), topple a standing one, pressing on its top.
  rolls, topples = [], []
  if reason in ("wall", "standing", "across") and not topple_only:
    rolls = [
      _Move((), direction, "roll", room)
      for direction, room in _roll_directions(replica, k, points, interior)
    ]
  if reason in ("wall", "standing") and not rolls:
    topples = [
      _Move((), direction, "topple", room)
      for direction, room in _topple_directions(points, interior)
    ]

  def press_on_top(moves: list) -> PushPlan | None:
    nonlocal budget
    for move in moves:
      if move.kind == "roll":
        # It rolls under the pads: its centre moves half as far as the hand.
        travel = 2.0 * min(cfg.roll_shift, move.room - ROOM_MARGIN)
      else:
        across = np.array([-move.direction[1], move.direction[0], 0.0])
        lying = min(z_hi - z_lo, float(np.ptp(points @ across)))
        if lying > cfg.topple_max_width:
          rejections["lands_too_wide"] += 1
          continue
        thickness = float(np.ptp(points @ move.direction))
        if z_hi - z_lo < thickness:
          rejections["too_flat"] += 1
          continue
        travel = min(thickness + cfg.topple_overshoot, move.room - ROOM_MARGIN)
      if travel < 2.0 * ROLL_MIN_SHIFT:
        rejections["no_room"] += 1
        continue
      offsets = ROLL_OFFSETS if move.kind == "roll" else TOPPLE_OFFSETS
      variants = _top_variants(top, heights["roll"], move.direction, travel, offsets)
      budget, plan = _first_feasible(
        replica, k, move, reason, variants, transit_z, q_now, cfg, saved, budget,
        rejections, press=ROLL_TOUCH_GAP + cfg.roll_press,
      )  # fmt: skip
      if plan is not None:
        return plan
    return None

  try:
    # Pads and floor have equal friction, so the pads' pull on the top (at
    # most their press) tips the object over its leading bottom edge only if
    # its height exceeds the press's distance from that edge, up to its
    # thickness (too_flat).
    if topple_only:
      return press_on_top(topples), rejections
    first = press_on_top(rolls + (topples if reason == "standing" else []))
    if first is not None:
      return first, rejections
    for move in _candidate_moves(replica, k, reason, interior, points):
      if budget <= 0:
        break
      direction = move.direction
      z = heights[move.kind]
      d = min(cfg.distance, move.room - ROOM_MARGIN) + cfg.approach_gap
      if d < cfg.min_distance + cfg.approach_gap:
        rejections["no_room"] += 1
        continue
      # The object's rear extent within the pads' height band.
      band = points[np.abs(points[:, 2] - z) <= ph]
      rear = float(((band if len(band) else points) @ direction).min())
      heading = math.atan2(direction[1], direction[0])
      # Two hand yaws: the closing axis across the push (the two closed pads'
      # 12 mm edge pushes, the housing's 60 mm side across the push) or along
      # it (the closed pads' 25 mm face pushes, the finger link 10 mm ahead of
      # it; the housing's 44 mm side across: it fits nearer a wall).
      variants = []
      for turn, reach in ((math.pi / 2, hw), (0.0, CLOSED_FINGER_HALF)):
        rot = tool_rotation(heading + turn, 0.0)
        ahead = rear if turn else float((points @ direction).min())
        behind = ahead - cfg.approach_gap - reach - float(centre @ direction)
        start = centre + behind * direction
        start[2] = z
        for r in (rot, rot @ np.diag([-1.0, -1.0, 1.0])):
          variants.append((r, start, start + d * direction))
      budget, plan = _first_feasible(
        replica, k, move, reason, variants, transit_z, q_now, cfg, saved, budget,
        rejections,
      )  # fmt: skip
      if plan is not None:
        return plan, rejections
    return None, rejections
  finally:
    replica.data.qpos[:] = saved
    mujoco.mj_kinematics(replica.model, replica.data)


def _top_variants(
  top: np.ndarray, z: float, direction: np.ndarray, travel: float, offsets: tuple
):
  """Hand poses for a move pressing on the object's top (a roll or a
  topple), from the top toward ``direction`` for ``travel``. First the
  closing axis across the move (the pads' 25 mm width along it, the
  housing's narrow side toward the wall), then along it; each also half
  turned, and started ``offsets`` off the top toward the move
  (the top stays under the pads' flat bottom, and the housing clears a wall
  that the top lies too near)."""
  heading = math.atan2(direction[1], direction[0])
  variants = []
  for turn, starts in ((math.pi / 2, offsets), (0.0, offsets[:1])):
    rot = tool_rotation(heading + turn, 0.0)
    for offset in starts:
      start = np.array([top[0], top[1], z]) + offset * direction
      end = start + travel * direction
      for r in (rot, rot @ np.diag([-1.0, -1.0, 1.0])):
        variants.append((r, start, end))
  return variants


def _topple_directions(points: np.ndarray, interior) -> list:
  """Across a standing object's thin side (the horizontal direction of its
  smallest width), either way, where a wall lies behind it within
  ``WALL_GAP``; with the room to the walls that way."""
  widths = _horizontal_widths(points)
  angle = math.pi * int(np.argmin(widths)) / len(widths)
  thin = np.array([math.cos(angle), math.sin(angle), 0.0])
  return _off_wall_directions(points, interior, (thin, -thin))


def _first_feasible(
  replica, k, move, reason, variants, transit_z, q_now, cfg, saved, budget,
  rejections, press: float = 0.0,
) -> tuple[int, PushPlan | None]:  # fmt: skip
  """The first of ``variants`` (rotation, start, end) that passes ``_check``;
  the plan's start and end are lowered by ``press`` (a roll is checked
  touching the object's top, and executed pressing into it)."""
  down = np.array([0.0, 0.0, press])
  for variant, start, end in variants:
    if budget <= 0:
      break
    budget -= 1
    why = _check(replica, k, start, end, variant, transit_z, q_now, cfg)
    replica.data.qpos[:] = saved
    if why is None:
      return budget, PushPlan(
        object_index=k,
        reason=reason,
        kind=move.kind,
        direction_w=move.direction.copy(),
        start_w=start - down,
        end_w=end - down,
        rotation_w=variant.copy(),
        transit_z=float(max(transit_z, start[2])),
      )
    rejections[why] += 1
  return budget, None


def _check(
  replica,
  k: int,
  start: np.ndarray,
  end: np.ndarray,
  rot: np.ndarray,
  transit_z: float,
  q_seed: np.ndarray,
  cfg: PushCfg,
) -> str | None:
  """One move on the replica; the rejection reason or None."""
  kin = replica.kin
  top = max(transit_z, float(start[2]))
  transit = kin.solve(np.array([start[0], start[1], top]), rot, q_seed)
  if not transit.converged:
    return "ik"
  ik = kin.solve(start, rot, transit.q)
  if not ik.converged:
    return "ik"
  replica._set_fingers(0.0)

  def contacts(q):
    replica.data.qpos[kin.qpos_adr] = q
    _, other, dist = replica._robot_contacts()
    return other, dist, replica._owner[other]

  def clearance(other, dist) -> str | None:
    if np.any(replica._is_wall[other] & (dist < cfg.wall_clearance)):
      return "wall_clearance"
    floor = replica._is_bin[other] & ~replica._is_wall[other]
    if np.any(floor & (dist < cfg.floor_clearance)):
      return "bin_floor"
    return None

  other, dist, owner = contacts(ik.q)
  why = clearance(other, dist)
  if why is not None:
    return why
  if np.any(((owner >= 0) | replica._is_table[other]) & (dist < 0.0)):
    return "start_collision"
  # Vertical approach, from the transit height down to the start.
  q = transit.q
  drop = top - float(start[2])
  for s in np.arange(0.0, drop, cfg.step):
    point = np.array([start[0], start[1], top - s])
    step = kin.solve(point, rot, q)
    if not step.converged:
      return "ik"
    q = step.q
    _, dist, _ = contacts(q)
    if np.any(dist < 0.0):
      return "approach_collision"
  # The push line (the target stays put in the replica: contacts ignored).
  q = ik.q
  length = float(np.linalg.norm(end - start))
  direction = (end - start) / length
  samples = np.append(np.arange(cfg.step, length, cfg.step), length)
  for s in samples:
    step = kin.solve(start + s * direction, rot, q)
    if not step.converged:
      return "ik"
    q = step.q
    other, dist, owner = contacts(q)
    why = clearance(other, dist)
    if why is not None:
      return why
    hit = ((owner >= 0) & (owner != k)) | replica._is_table[other]
    if np.any(hit & (dist < 0.0)):
      return "path_collision"
  return None
