"""Grasp candidates from cross-sections of an object's collision geometry.

A candidate is a tool pose (pad centre and rotation) plus the width the pads
will meet. The search runs over closing directions (horizontal, every
180/12 degrees: the RG2 is symmetric under a half turn), tilts about the
closing axis and grasp heights along the tool's approach axis.

For each tool rotation the object's collision triangles are expressed in the
tool frame (u along the closing axis, v along the pad width, s along the
approach axis, pointing down) and cut by planes ``s = const``: each triangle
edge that crosses the plane contributes an intersection point, so each cut
triangle gives a segment of the cross-section. Along the section three pad
contact strips (``|v - v_k| <= pad half width``) are placed, and two edge
strips with the pad flush with either end of the three cuts' span; the width a
pad pair meets in a strip is the extent along u of the section clipped to
that strip, taken over three cuts spanning the pad's height (the pads meet
the widest part within their reach).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from assets.ur5_rg2.model import RG2_MAX_OPENING, RG2_PAD_HALF


@dataclass(frozen=True)
class GraspSearchCfg:
  directions: int = 12
  """Horizontal closing directions over half a turn."""
  tilts_deg: tuple[float, ...] = (0.0, -15.0, 15.0, -30.0, 30.0)
  """Tool tilts about the closing axis (0: approach straight down)."""
  height_fractions: tuple[float, ...] = (0.5, 0.3, 0.7, 0.15)
  """Grasp heights as fractions of the object's span along the approach axis,
  from its top; plus one level with the pad's lowest point just above the
  object's lowest point (``floor_clearance``)."""
  floor_clearance: float = 0.004
  """Pad's lowest point above the object's lowest point at the lowest level,
  in world height [m]. A tilted pad's lower corner hangs below its bottom
  edge's centre by the pad half width times the tilt's sine, and a tilted
  approach axis meets a flat object's lowest point off the pad: until
  2026-12-07 (fourteenth session) the level was taken along that axis, and
  the tilted lowest levels of flat objects put the pads 6 to 13 mm into
  the floor (pair 25's irregular hull against a long wall, whose untilted
  grasps hit the wall)."""
  min_pad_overlap: float = 0.006
  """Least overlap of pad height and object along the approach axis [m]."""
  pad_half_width: float = RG2_PAD_HALF[1]
  pad_half_height: float = RG2_PAD_HALF[2]
  open_clearance: float = 0.005
  """Free space each side between the open pads and the widest point [m]."""
  min_width: float = 0.005
  contact_tolerance: float = 0.0015
  """Section points within this of a pad face count as its contact patch [m]."""
  taper_rise: float = 0.005
  """Height over which ``grasp_taper`` is measured [m]."""
  area_weight: float = 1.0
  """Score per missing fraction of pad contact (1: no flat contact)."""
  com_weight: float = 1.0
  """Score per ``torque_ref`` of gravity torque about the closing line."""
  torque_ref: float = 0.03
  """Gravity torque about the closing line that costs ``com_weight`` [N m]
  (a 100 g object held 30 mm from its centre of mass)."""


@dataclass
class GraspCandidates:
  """Candidates for one object, best first (arrays over candidates)."""

  position_w: np.ndarray
  """Pad centre (tool site) positions [N, 3], world frame."""
  rotation_w: np.ndarray
  """Tool rotations [N, 3, 3] (x: closing axis, z: approach, down)."""
  width: np.ndarray
  """Width the pads meet [N] [m]."""
  direction: np.ndarray
  """Closing-direction index [N]."""
  tilt: np.ndarray
  """Tilt about the closing axis [N] [rad]."""
  strip: np.ndarray
  """Pad strip index [N]: 0 centre, -1/1 side strips."""
  level: np.ndarray
  """Height level index [N] (last: the lowest level)."""
  patch: np.ndarray
  """Pad contact patch [N]: mean over the three cuts of the shorter of the
  two faces' contact lengths, over the pad width (1: flat faces over the
  whole pad; near 0: point contacts)."""
  com_distance: np.ndarray
  """Distance of the object's centre of mass from the closing line [N] [m]."""

  def __len__(self) -> int:
    return len(self.width)


##
# Collision geometry as triangles.
##


def _box_triangles(half: np.ndarray) -> np.ndarray:
  corners = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1], indexing="ij")).reshape(
    3, -1
  ).T * np.asarray(half)
  faces = []
  for axis in range(3):
    for sign in (-1, 1):
      idx = np.nonzero(np.sign(corners[:, axis]) == sign)[0]
      others = [a for a in range(3) if a != axis]
      # Order the face's 4 corners around it.
      pts = corners[idx]
      angle = np.arctan2(pts[:, others[1]], pts[:, others[0]])
      quad = pts[np.argsort(angle)]
      faces += [quad[[0, 1, 2]], quad[[0, 2, 3]]]
  return np.array(faces)


def _revolve_triangles(profile: np.ndarray, segments: int) -> np.ndarray:
  """Triangles of a surface of revolution about z; ``profile`` is [P, 2] of
  (radius, z), traversed from bottom to top."""
  phi = np.linspace(0.0, 2 * math.pi, segments + 1)
  ring = np.stack(
    [
      profile[:, None, 0] * np.cos(phi)[None],
      profile[:, None, 0] * np.sin(phi)[None],
      np.repeat(profile[:, None, 1], segments + 1, axis=1),
    ],
    axis=-1,
  )  # [P, S+1, 3]
  a, b = ring[:-1, :-1], ring[:-1, 1:]
  c, d = ring[1:, :-1], ring[1:, 1:]
  tris = np.concatenate(
    [np.stack([a, b, d], axis=-2), np.stack([a, d, c], axis=-2)], axis=0
  )
  return tris.reshape(-1, 3, 3)


def _capsule_profile(radius: float, half_length: float, rings: int = 8) -> np.ndarray:
  """(radius, z) from the bottom pole to the top pole of a capsule."""
  down = np.linspace(-math.pi / 2, 0.0, rings + 1)
  up = np.linspace(0.0, math.pi / 2, rings + 1)
  bottom = np.stack([radius * np.cos(down), -half_length + radius * np.sin(down)], 1)
  top = np.stack([radius * np.cos(up), half_length + radius * np.sin(up)], 1)
  return np.concatenate([bottom, top])


def geom_triangles(model: mujoco.MjModel, gid: int, segments: int = 64) -> np.ndarray:
  """A collision geom's surface as triangles [T, 3, 3] in the geom frame.

  Boxes and meshes are exact (a mesh collides as its convex hull, so the hull
  is used); capsules, cylinders and spheres are tessellated with ``segments``
  around the axis (width error below 0.13% at 64).
  """
  gtype, size = int(model.geom_type[gid]), model.geom_size[gid]
  if gtype == mujoco.mjtGeom.mjGEOM_BOX:
    return _box_triangles(size)
  if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE:
    return _revolve_triangles(_capsule_profile(size[0], size[1]), segments)
  if gtype == mujoco.mjtGeom.mjGEOM_CYLINDER:
    r, h = size[0], size[1]
    profile = np.array([[0.0, -h], [r, -h], [r, h], [0.0, h]])
    return _revolve_triangles(profile, segments)
  if gtype == mujoco.mjtGeom.mjGEOM_SPHERE:
    return _revolve_triangles(_capsule_profile(size[0], 0.0), segments)
  if gtype == mujoco.mjtGeom.mjGEOM_MESH:
    from scipy.spatial import ConvexHull

    mesh = model.geom_dataid[gid]
    start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
    verts = np.array(model.mesh_vert[start : start + count], dtype=float)
    hull = ConvexHull(verts)
    return verts[hull.simplices]
  raise ValueError(f"geom {gid}: type {gtype} has no cross-section support.")


def body_triangles_w(
  model: mujoco.MjModel,
  data: mujoco.MjData,
  geom_ids: list[int],
  local: list[np.ndarray] | None = None,
) -> np.ndarray:
  """Triangles [T, 3, 3] of the given collision geoms, posed in the world;
  ``local``: their ``geom_triangles``, when the caller keeps them."""
  if local is None:
    local = [geom_triangles(model, gid) for gid in geom_ids]
  out = []
  for gid, tri in zip(geom_ids, local, strict=True):
    rot = data.geom_xmat[gid].reshape(3, 3)
    out.append(tri @ rot.T + data.geom_xpos[gid])
  return np.concatenate(out)


##
# Cross-sections.
##


def section_segments(tri: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
  """Cut triangles [T, 3, 3] (u, v, s coordinates) with the plane ``s = level``.

  Returns segment end points ``a, b`` [M, 2] in (u, v): one segment per cut
  triangle, from the intersections of its edges with the plane.
  """
  s = tri[..., 2] - level  # [T, 3]
  p0, p1 = tri, np.roll(tri, -1, axis=1)  # Edges (0,1), (1,2), (2,0).
  s0, s1 = s, np.roll(s, -1, axis=1)
  crosses = (s0 * s1 <= 0.0) & (s0 != s1)
  t = np.where(crosses, s0 / np.where(s0 != s1, s0 - s1, 1.0), 0.0)
  points = p0[..., :2] + t[..., None] * (p1[..., :2] - p0[..., :2])  # [T, 3, 2]
  count = crosses.sum(axis=1)
  cut = count >= 2
  if not cut.any():
    return np.zeros((0, 2)), np.zeros((0, 2))
  pts, mask = points[cut], crosses[cut]
  # The first and the last crossing edge of each cut triangle.
  first = np.argmax(mask, axis=1)
  last = 2 - np.argmax(mask[:, ::-1], axis=1)
  rows = np.arange(len(pts))
  return pts[rows, first], pts[rows, last]


def clip_to_strip(
  a: np.ndarray, b: np.ndarray, v_centre: float, half_width: float
) -> tuple[np.ndarray, np.ndarray]:
  """Segments [M, 2] (u, v) clipped to ``|v - v_centre| <= half_width``:
  the clipped end points (empty where no segment reaches the strip)."""
  if len(a) == 0:
    return np.zeros((0, 2)), np.zeros((0, 2))
  lo, hi = v_centre - half_width, v_centre + half_width
  dv = b[:, 1] - a[:, 1]
  flat = np.abs(dv) < 1e-12
  with np.errstate(divide="ignore", invalid="ignore"):
    t_lo = np.where(flat, -np.inf, (lo - a[:, 1]) / dv)
    t_hi = np.where(flat, np.inf, (hi - a[:, 1]) / dv)
  t0 = np.maximum(np.minimum(t_lo, t_hi), 0.0)
  t1 = np.minimum(np.maximum(t_lo, t_hi), 1.0)
  inside_flat = flat & (a[:, 1] >= lo) & (a[:, 1] <= hi)
  keep = np.where(flat, inside_flat, t1 >= t0)
  t0 = np.where(flat, 0.0, t0)[keep]
  t1 = np.where(flat, 1.0, t1)[keep]
  a, d = a[keep], (b - a)[keep]
  return a + t0[:, None] * d, a + t1[:, None] * d


def strip_extent(
  a: np.ndarray, b: np.ndarray, v_centre: float, half_width: float
) -> tuple[float, float] | None:
  """Extent (u_min, u_max) of segments clipped to ``|v - v_centre| <= half_width``.

  None when no segment reaches the strip.
  """
  pa, pb = clip_to_strip(a, b, v_centre, half_width)
  if len(pa) == 0:
    return None
  u = np.concatenate([pa[:, 0], pb[:, 0]])
  return float(u.min()), float(u.max())


def _face_length(pa: np.ndarray, pb: np.ndarray, u_face: float, tol: float) -> float:
  """Length along v of the clipped section lying within ``tol`` of the pad
  face at ``u_face`` (by the segments' end points: a flat face along v has
  both ends there, a curved surface touches at a point)."""
  pts = np.concatenate([pa, pb])
  near = np.abs(pts[:, 0] - u_face) <= tol
  if near.sum() < 2:
    return 0.0
  return float(np.ptp(pts[near, 1]))


def contact_patch(
  sections: list[tuple[np.ndarray, np.ndarray]],
  v_centre: float,
  half_width: float,
  u_lo: float,
  u_hi: float,
  tol: float,
) -> float:
  """Pad contact patch in [0, 1]: over the cuts, the shorter of the two
  faces' contact lengths (within ``tol`` of the closed pads at ``u_lo`` and
  ``u_hi``) over the pad width, averaged over the cuts."""
  total = 0.0
  for a, b in sections:
    pa, pb = clip_to_strip(a, b, v_centre, half_width)
    if len(pa) == 0:
      continue
    both = min(_face_length(pa, pb, u_lo, tol), _face_length(pa, pb, u_hi, tol))
    total += min(1.0, both / (2 * half_width))
  return total / len(sections)


def tool_rotation(direction: float, tilt: float) -> np.ndarray:
  """Tool rotation: closing axis (x) horizontal at ``direction`` about world z,
  approach (z) straight down, then tilted by ``tilt`` about the closing axis."""
  c, s = math.cos(direction), math.sin(direction)
  x = np.array([c, s, 0.0])
  z = np.array([0.0, 0.0, -1.0])
  y = np.cross(z, x)
  down = np.stack([x, y, z], axis=1)
  ct, st = math.cos(tilt), math.sin(tilt)
  about_x = np.array([[1.0, 0.0, 0.0], [0.0, ct, -st], [0.0, st, ct]])
  return down @ about_x


def _sections(
  tri: np.ndarray, level: float, ph: float, s_top: float, s_bottom: float
) -> list[tuple[np.ndarray, np.ndarray]]:
  """The pad's three cuts at ``level`` (middle first, repeats dropped)."""
  cuts = np.clip([level, level - 0.9 * ph, level + 0.9 * ph], s_top, s_bottom)
  _, first = np.unique(cuts, return_index=True)
  return [section_segments(tri, float(cuts[j])) for j in sorted(first)]


def _floor_level(
  level: float, v_c: float, tilt: float, z_lowest: float, cfg: GraspSearchCfg
) -> float:
  """``level``, raised (less along the approach axis) until the pad centred
  at ``v_c`` keeps its lowest corner ``floor_clearance`` above the world
  height ``z_lowest``. A tool point (u, v, s) lies at world height
  -sin(tilt) v - cos(tilt) s (``tool_rotation``)."""
  st, ct = math.sin(tilt), math.cos(tilt)
  hw, ph = cfg.pad_half_width, cfg.pad_half_height
  highest = (-st * v_c - abs(st) * hw - z_lowest - cfg.floor_clearance) / ct - ph
  return min(level, highest)


def grasp_candidates(
  triangles_w: np.ndarray,
  cfg: GraspSearchCfg = GraspSearchCfg(),
  com_w: np.ndarray | None = None,
  weight: float = 0.0,
) -> GraspCandidates:
  """Every candidate over directions, tilts, heights and strips, best first.

  Order (lowest score first), a weighted sum: no tilt before tilts, the
  centre strip before the side strips, the preferred heights in
  ``height_fractions`` order, narrower widths (more room for the open pads),
  and the grasp's hold: flat pad contact over the pad width
  (``contact_patch``) and a small gravity torque about the closing line
  (the object's ``weight`` [N] at ``com_w``'s distance from it; the pads'
  friction resists a twist about that line only through their small
  torsional friction).
  """
  com = triangles_w.reshape(-1, 3).mean(0) if com_w is None else np.asarray(com_w)
  max_width = RG2_MAX_OPENING - 2 * cfg.open_clearance
  ph, hw = cfg.pad_half_height, cfg.pad_half_width
  z_lowest = float(triangles_w[..., 2].min())
  rows: list[tuple] = []
  for d in range(cfg.directions):
    direction = math.pi * d / cfg.directions
    for tilt_deg in cfg.tilts_deg:
      tilt = math.radians(tilt_deg)
      rot = tool_rotation(direction, tilt)
      tri = triangles_w @ rot  # World points in tool coordinates (u, v, s).
      s_top, s_bottom = float(tri[..., 2].min()), float(tri[..., 2].max())
      span = s_bottom - s_top
      levels = [s_top + f * span for f in cfg.height_fractions]
      levels.append(s_bottom - ph - cfg.floor_clearance)
      for k, level in enumerate(levels):
        # The pad must overlap the object by min_pad_overlap along the approach.
        if level + ph < s_top + cfg.min_pad_overlap or level > s_bottom:
          continue
        # The middle cut first: it also places the strips.
        sections = _sections(tri, level, ph, s_top, s_bottom)
        a_mid, b_mid = sections[0]
        if len(a_mid) == 0:
          continue
        v_all = np.concatenate([a_mid[:, 1], b_mid[:, 1]])
        v_lo, v_hi = float(v_all.min()), float(v_all.max())
        v_mid = 0.5 * (v_lo + v_hi)
        offset = max(0.0, 0.5 * (v_hi - v_lo) - hw) / 2
        centres = {0: v_mid}
        if offset >= 0.002:
          centres.update({-1: v_mid - offset, 1: v_mid + offset})
        # Edge strips: the pads flush with the ends of every cut's section, so
        # that the hand's wider parts (housing, finger links) shift off a
        # wall the object lies against (the lower cuts of a hull can be wider
        # than the middle one).
        v_any = np.concatenate([p[:, 1] for a, b in sections for p in (a, b)])
        if 0.5 * (v_any.max() - v_any.min()) - hw >= 0.004:
          centres.update({-2: v_any.min() + hw, 2: v_any.max() - hw})
        for strip, v_c in centres.items():
          at, strip_sections = level, sections
          if k == len(cfg.height_fractions):
            at = _floor_level(level, v_c, tilt, z_lowest, cfg)
            if at + ph < s_top + cfg.min_pad_overlap:
              continue
            if at < level - 1e-4:
              strip_sections = _sections(tri, at, ph, s_top, s_bottom)
          extents = [strip_extent(a, b, v_c, hw) for a, b in strip_sections]
          extents = [e for e in extents if e is not None]
          if not extents:
            continue
          u_lo = min(e[0] for e in extents)
          u_hi = max(e[1] for e in extents)
          width = u_hi - u_lo
          if not cfg.min_width <= width <= max_width:
            continue
          centre = rot @ np.array([0.5 * (u_lo + u_hi), v_c, at])
          patch = contact_patch(
            strip_sections, v_c, hw, u_lo, u_hi, cfg.contact_tolerance
          )
          arm = com - centre
          com_distance = float(np.linalg.norm(arm - (arm @ rot[:, 0]) * rot[:, 0]))
          torque = weight * com_distance
          score = (
            abs(tilt_deg) / 15.0
            + 0.5 * abs(strip)
            + (1.0 if abs(strip) == 2 else 0.0)  # Edge strips after the others.
            + 0.3 * min(k, len(cfg.height_fractions))
            + width / max_width
            + cfg.area_weight * (1.0 - patch)
            + cfg.com_weight * torque / cfg.torque_ref
          )
          rows.append(
            (score, centre, rot, width, d, tilt, strip, k, patch, com_distance)
          )
  rows.sort(key=lambda r: r[0])
  if not rows:
    empty = np.zeros((0,))
    return GraspCandidates(
      np.zeros((0, 3)), np.zeros((0, 3, 3)), empty, empty.astype(int), empty,
      empty.astype(int), empty.astype(int), empty, empty,
    )  # fmt: skip
  return GraspCandidates(
    position_w=np.array([r[1] for r in rows]),
    rotation_w=np.array([r[2] for r in rows]),
    width=np.array([r[3] for r in rows]),
    direction=np.array([r[4] for r in rows]),
    tilt=np.array([r[5] for r in rows]),
    strip=np.array([r[6] for r in rows]),
    level=np.array([r[7] for r in rows]),
    patch=np.array([r[8] for r in rows]),
    com_distance=np.array([r[9] for r in rows]),
  )


def grasp_taper(
  triangles_w: np.ndarray,
  position_w: np.ndarray,
  rotation_w: np.ndarray,
  cfg: GraspSearchCfg = GraspSearchCfg(),
) -> tuple[float, float]:
  """A candidate's taper (at ``grasp_candidates``' ``position_w`` and
  ``rotation_w``): how steeply the object widens downward where the pads'
  lower edge meets it, each face (closing-axis low, high side): the outward run of
  its section over the lowest cut's last ``taper_rise`` of height, where the
  lowest cut is that face's outermost (0 elsewhere: the pads meet the face
  higher, where it is no wider below). The pads' squeeze then pushes the
  object down along that face. Traced: a box grasped 5 mm below its
  top was pressed into the floor with ten times its weight while the
  fingers closed, and the pads slid off it as the lift began. Logged in
  the plan notes; not used in the order: on pour and object seeds 0 to 11
  at ``8ccc9e3``, 18 of the 23 lifts whose two tapers summed to 1 or more
  slipped (73 of the 497 others), but such grasps were mostly the only
  ones left, and planning them after every other grasp (one hold tier
  more) gave 86 slips against 91 on those pairs but 398 deliveries against
  401 and 33 bins cleared against 36 (docs/bin_pick_history.md). Used
  after a slip: a wedge (``ReplicaCfg.wedge_taper``) of an object whose
  wedge slipped is skipped by the first search until the object is
  rearranged.
  """
  tri = triangles_w @ rotation_w  # Tool coordinates (u, v, s).
  _, v_c, level = rotation_w.T @ position_w
  s_top, s_bottom = float(tri[..., 2].min()), float(tri[..., 2].max())
  ph, hw = cfg.pad_half_height, cfg.pad_half_width
  cuts = np.clip([level, level - 0.9 * ph, level + 0.9 * ph], s_top, s_bottom)
  if len(np.unique(cuts)) < 3 or level + 0.9 * ph >= s_bottom:
    return (0.0, 0.0)  # The pads reach below the object: no lowest cut.
  extents = [strip_extent(*section_segments(tri, float(z)), v_c, hw) for z in cuts]
  rim = strip_extent(*section_segments(tri, float(cuts[2] - cfg.taper_rise)), v_c, hw)
  if extents[-1] is None:
    return (0.0, 0.0)
  return _taper(extents, rim, cfg.taper_rise)


def _taper(
  extents: list[tuple[float, float] | None],
  rim: tuple[float, float] | None,
  rise: float,
) -> tuple[float, float]:
  """Each face's outward run from the cut ``rise`` above the lowest one
  (``rim``) to the lowest (``extents[-1]``), over ``rise``, where the lowest
  cut is that face's outermost (``grasp_taper``)."""
  if rim is None:
    return (0.0, 0.0)
  low = extents[-1]
  lo = min(e[0] for e in extents if e is not None)
  hi = max(e[1] for e in extents if e is not None)
  tol = 1e-4
  return (
    max(0.0, rim[0] - low[0]) / rise if low[0] <= lo + tol else 0.0,
    max(0.0, low[1] - rim[1]) / rise if low[1] >= hi - tol else 0.0,
  )
