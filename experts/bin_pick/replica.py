"""CPU kinematic replica for grasp feasibility (C MuJoCo).

A copy of the compiled scene (robot, bin, table, objects) with its own
``MjData``, posed from one live environment's state. Candidate grasps are
checked on it by kinematics and collision detection only: nothing is
simulated and the live robot and objects are never touched.

Checks per candidate, cheapest first; the first failure names the rejection:

  ik                  no converged IK at the open grasp or an approach point
  wall_clearance      robot collision geometry, posed at the open grasp, closer
                      than ``wall_clearance`` to a bin wall
  bin_floor           ... closer than ``floor_clearance`` to the bin floor
  table_collision     robot geometry into the table at the open grasp
  open_grasp_target   the open hand already penetrates the target
  open_grasp_collision  the open hand penetrates another object
  pads_miss_target    at the predicted closure not both pads meet the target
  closure_collision   at the predicted closure a pad penetrates another object
  approach_collision  robot geometry penetrates anything at a sampled point of
                      the vertical approach from the transit height

and before them all, in the first search only: ``wedge_after_slip``, a
wedge (``ReplicaCfg.wedge_taper``) of an object whose wedge slipped.

This is a sampled feasibility check, not a continuous collision-free motion
proof (as the bin-picking specification says).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

import mujoco
import numpy as np

from assets.ur5_rg2.kinematics import ArmKinematics
from assets.ur5_rg2.model import ARM_JOINT_NAMES, PAD_GEOM_NAMES, RG2_MAX_OPENING
from experts.bin_pick.grasps import (
  GraspCandidates,
  GraspSearchCfg,
  body_triangles_w,
  geom_triangles,
  grasp_candidates,
  grasp_taper,
)
from mjlab_tasks.engine import copy_model

REJECTION_REASONS = (
  "ik",
  "wall_clearance",
  "bin_floor",
  "table_collision",
  "open_grasp_target",
  "open_grasp_collision",
  "pads_miss_target",
  "closure_collision",
  "approach_collision",
)


@dataclass(frozen=True)
class ReplicaCfg:
  wall_clearance: float = 0.003
  """Least distance from robot geometry to a bin wall at the open grasp [m]."""
  floor_clearance: float = 0.001
  """Least distance from robot geometry to the bin floor at the open grasp [m]."""
  open_margin: float = 0.015
  """Pre-shaped opening: the measured width plus this on each side (capped
  at the full 110 mm stroke); the open grasp is checked at that opening [m]."""
  tight_open_margin: float = 0.006
  """Second opening tried when the open hand at ``open_margin`` meets a wall
  or another object: fingers that open less fit beside a wall [m]."""
  closure_squeeze: float = 0.002
  """Predicted closure: opening = measured width minus this [m]."""
  min_patch: float = 0.2
  """A well-held grasp has at least this pad contact patch
  (``grasps.contact_patch``), ..."""
  max_held_width: float = 0.07
  """... closes on at most this width [m], ..."""
  max_com_distance: float = 0.025
  """... and passes this near the object's centre of mass [m] (measured on
  194 attempts: docs/bin_pick.md). Planning orders grasps by hold tier
  (``hold_tier``)."""
  sure_width: float = 0.06
  """A sure grasp is well held, closes on at most this width [m] ..."""
  sure_com_distance: float = 0.015
  """... and passes this near the centre of mass [m]. Measured on 1,304 lifts
  (docs/bin_pick.md): 3 % of sure grasps slipped, 14 % of the other
  well-held ones, 10 % of the poor ones within both bounds, 45 % of the
  rest. Planning tries them in that order of tiers (``hold_tier``)."""
  max_width: float = 0.08
  """No grasp closes on more than this [m]: 1 of 26 measured lifts at 80 mm
  or more held; such an object is rearranged instead."""
  approach_step: float = 0.03
  """Spacing of the sampled vertical approach points [m]."""
  max_checks_per_object: int = 100
  """Candidates checked per object before trying the next object."""
  last_resort_checks_per_object: int = 1000
  """The budget of the last search, made only when neither a grasp within
  ``max_checks_per_object`` nor a rearrangement was found, before an
  environment would give up (measured: a feasible grasp 163 checks deep was
  missed and the environment stopped with 120 s left: docs/bin_pick_history.md)."""
  last_resort_wall_clearance: float = 0.001
  """``wall_clearance`` of the last search [m] ..."""
  graze_wall_clearance: float = -0.002
  """... and of a final search, made only when that one found nothing
  either, before an environment gives up: the open hand and its approach
  may press a wall by up to this much [m] (negative). Measured on the 22
  objects left with no feasible grasp over pour and object seeds 0 to
  23 at ``a205ed3``: for 5 the candidate nearest to clearing the walls
  pressed a wall by 0.2 to 2.0 mm (a pad or a finger link). Rerun on
  those five pairs, 2 of the 5 were delivered and their bins cleared
  (docs/bin_pick.md)."""
  last_resort_overlap: float = 0.003
  """... which also lets the open fingers (and the hand on its way down)
  overlap other objects by up to this [m]: the descent pushes a neighbour
  aside a little. Measured on a pile packed from wall to wall (pour and
  object seed 3, environment 1), the strict checks found neither a grasp
  nor a push for 7 objects with 140 s left; the shallowest overlaps were
  2.5 to 9 mm, and most rejections were wall clearances under 3 mm."""
  neighbour_overlap: float = 0.0
  """Overlap of the open hand with other objects a check accepts [m] (the
  last search uses ``last_resort_overlap``)."""
  edge_strips: bool = False
  """Whether candidates on the edge strips (``grasps.grasp_candidates``) are
  checked; the last search checks them. Taken by the first searches, 7 of 10
  such lifts slipped (pairs 0 and 1 at ``ce5994c``)."""
  wrist_range: float = math.pi
  """Largest size of the last wrist joint's position at a grasp [rad]: a
  hand yaw whose turn would take the joint beyond is tried after the
  half-turned one. The joint's range is 2 pi each way, and a hand that
  cannot turn to its grasp waits there (until the expert's
  ``turn_timeout``, then again on each new plan). The yaw of the shorter
  wrist turn is tried first, and the carry turns the hand with the base's
  swing and the joint back toward zero within it (``BinPickExpert``'s
  carry). The task's command turns the hand the short way in the world, so
  a joint far from zero can have both of its turns outward: with a carry
  that left the joint alone, simulated cycles took it more than a quarter
  turn past this range in 4 % of runs (tests/test_bin_pick_replica_order.py). (When
  the carry kept the hand's yaw, and so turned the joint by the swing, the
  shorter turn drove it one way until the hand stuck: pour and object seed
  0, environment 1, 109 s before the episode's end.)"""
  wedge_taper: float = 1.0
  """A candidate whose two tapers (``grasps.grasp_taper``) sum to at least
  this is a wedge: the pads press the object down along faces that widen
  below them. After a wedge of an object slipped, the first search skips
  that object's wedges until it is rearranged (``plan``'s ``no_wedges``;
  the last and final searches take them). Measured over pour and object
  seeds 0 to 31 at ``774ebcf``: 65 of 77 wedge lifts slipped (193 of 1,345
  others), and 28 of the 29 wedges planned right after a wedge of the same
  object slipped slipped again (pair 28, environment 2: eight in a row on
  two objects)."""
  search: GraspSearchCfg = field(default_factory=GraspSearchCfg)

  def relaxed(self) -> ReplicaCfg:
    """The last search's checks: ``last_resort_wall_clearance``,
    ``last_resort_overlap`` and the edge strips."""
    return replace(
      self,
      wall_clearance=self.last_resort_wall_clearance,
      neighbour_overlap=self.last_resort_overlap,
      edge_strips=True,
    )

  def is_wedge(self, taper: tuple[float, float]) -> bool:
    """Whether a grasp with these tapers is a wedge (``wedge_taper``)."""
    return sum(taper) >= self.wedge_taper

  def grazing(self) -> ReplicaCfg:
    """The final search's checks: the last search's, the walls pressed by
    up to ``-graze_wall_clearance``."""
    return replace(self.relaxed(), wall_clearance=self.graze_wall_clearance)


@dataclass
class GraspPlan:
  """A feasible grasp for one object (world frame)."""

  object_index: int
  position_w: np.ndarray
  """Tool site (pad centre) at the grasp [3]."""
  rotation_w: np.ndarray
  """Tool rotation at the grasp [3, 3]."""
  width: float
  """Width the pads meet [m]."""
  open_width: float
  """Pre-shaped pad opening for the approach and the release [m]."""
  transit_z: float
  """Tool height of the vertical approach's start [m]."""
  grasp_above_bottom: float
  """Tool site height above the object's lowest point at the grasp [m]."""
  candidate_rank: int
  tilt_deg: float
  """Tilt about the closing axis [deg]."""
  level: int
  """Height level index (``GraspSearchCfg.height_fractions``, then the lowest)."""
  strip: int
  """Pad strip (0 centre, -1/1 side)."""
  direction: int
  """Closing-direction index (``GraspSearchCfg.directions`` per half turn)."""
  patch: float
  """Pad contact patch in [0, 1] (``grasps.contact_patch``)."""
  com_distance: float
  """Object's centre of mass from the closing line [m]."""
  com_lever: float = 0.0
  """Horizontal lever of the object's weight about the closing line [m]:
  the gravity torque about it over the weight."""
  com_below: float = 0.0
  """Height of the closing line above the centre of mass [m] (negative:
  the centre of mass lies above it)."""
  taper: tuple[float, float] = (0.0, 0.0)
  """The faces' taper at the pads' lower edge (``grasps.grasp_taper``)."""

  @property
  def key(self) -> tuple[int, int, int]:
    """What a regrasp after a failure must change: direction, height, strip."""
    return (self.direction, self.level, self.strip)


@dataclass
class PlanResult:
  plan: GraspPlan | None
  rejections: Counter
  checked: int
  objects_tried: int
  search: str = "first"
  """Which search made it: ``first``, ``last`` (``ReplicaCfg.relaxed``'s
  checks) or ``final`` (``ReplicaCfg.grazing``'s); set by the caller."""


class GraspReplica:
  """Posed copy of a scene for grasp feasibility checks.

  Args:
    model: The live environment's compiled model (copied, never modified).
    object_geoms: Collision geom ids per object slot, in slot order.
    robot_prefix: Name prefix of the robot's elements in the scene.
    bin_prefix: Name prefix of the bin's geoms.
  """

  def __init__(
    self,
    model: mujoco.MjModel,
    object_geoms: list[list[int]],
    robot_prefix: str = "robot/",
    bin_prefix: str = "bin/",
    cfg: ReplicaCfg = ReplicaCfg(),
  ):
    self.cfg = cfg
    self.model = copy_model(model)
    self.data = mujoco.MjData(self.model)
    m = self.model
    names = [m.geom(g).name for g in range(m.ngeom)]
    collides = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
    self.robot_geoms = np.array(
      [g for g in range(m.ngeom) if names[g].startswith(robot_prefix) and collides[g]],
      dtype=int,
    )
    self.bin_geoms = np.array(
      [g for g in range(m.ngeom) if names[g].startswith(bin_prefix) and collides[g]],
      dtype=int,
    )
    objects = np.concatenate([np.asarray(g, dtype=int) for g in object_geoms])
    # The table: whatever else collides (the terrain plane).
    self.table_geoms = np.array(
      [
        g
        for g in range(m.ngeom)
        if collides[g]
        and g not in self.robot_geoms
        and g not in self.bin_geoms
        and g not in objects
      ],
      dtype=int,
    )
    self.pad_geoms = np.array([m.geom(robot_prefix + n).id for n in PAD_GEOM_NAMES])
    self.object_geoms = [np.asarray(g) for g in object_geoms]
    # The objects' surfaces in their geom frames, built once: a mesh's is a
    # convex hull, and planning poses every object several times.
    self._local_triangles = [
      [geom_triangles(m, int(g)) for g in gids] for gids in self.object_geoms
    ]
    self._owner = np.full(m.ngeom, -1)
    for k, gids in enumerate(self.object_geoms):
      self._owner[gids] = k
    self._is_robot = np.zeros(m.ngeom, bool)
    self._is_robot[self.robot_geoms] = True
    self._is_bin = np.zeros(m.ngeom, bool)
    self._is_bin[self.bin_geoms] = True
    self._is_wall = self._is_bin.copy()
    self._is_wall[m.geom(bin_prefix + "bin_floor").id] = False
    self._is_table = np.zeros(m.ngeom, bool)
    self._is_table[self.table_geoms] = True
    # Contacts within the margin are reported, so clearances can be measured.
    m.geom_margin[self.robot_geoms] = cfg.wall_clearance + 0.002
    self._fingers = np.array(
      [m.joint(f"{robot_prefix}{s}_finger_joint").qposadr[0] for s in ("left", "right")]
    )
    self.kin = ArmKinematics(model=m, data=self.data, prefix=robot_prefix)
    self._pan_joint = m.joint(f"{robot_prefix}{ARM_JOINT_NAMES[0]}").id
    self._corners0, self._corners_rate = self._hand_corners(robot_prefix)

  # Posing.

  def pose(
    self, qpos: np.ndarray, mocap_pos: np.ndarray, mocap_quat: np.ndarray
  ) -> None:
    """Copy one live world's positions into the replica (read only)."""
    self.data.qpos[:] = qpos
    self.data.qvel[:] = 0.0
    if self.model.nmocap:
      self.data.mocap_pos[:] = mocap_pos
      self.data.mocap_quat[:] = mocap_quat
    mujoco.mj_kinematics(self.model, self.data)

  def set_aside(self, objects) -> None:
    """Move ``objects`` (indices) far below the posed scene, out of every
    check: objects the arm only nudges, which no plan should avoid."""
    m = self.model
    for k in objects:
      body = m.geom_bodyid[self.object_geoms[k][0]]
      adr = int(m.jnt_qposadr[m.body_jntadr[body]])
      self.data.qpos[adr : adr + 3] = (0.0, 0.0, -10.0 - k)
    mujoco.mj_kinematics(self.model, self.data)

  def _set_fingers(self, opening: float) -> None:
    q = np.clip(
      opening / 2 - RG2_MAX_OPENING / 4, -RG2_MAX_OPENING / 4, RG2_MAX_OPENING / 4
    )
    self.data.qpos[self._fingers] = q

  def _robot_contacts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(robot geom, other geom, distance) of every contact involving the robot."""
    mujoco.mj_kinematics(self.model, self.data)
    mujoco.mj_collision(self.model, self.data)
    n = self.data.ncon
    if n == 0:
      return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    geom = self.data.contact.geom[:n]
    dist = self.data.contact.dist[:n].copy()
    first_robot = self._is_robot[geom[:, 0]]
    second_robot = self._is_robot[geom[:, 1]]
    keep = first_robot ^ second_robot
    robot = np.where(first_robot, geom[:, 0], geom[:, 1])[keep]
    other = np.where(first_robot, geom[:, 1], geom[:, 0])[keep]
    return robot, other, dist[keep]

  # Checks.

  def check(
    self,
    target: int,
    position: np.ndarray,
    rotation: np.ndarray,
    width: float,
    transit_z: float,
    q_seed: np.ndarray,
  ) -> tuple[str | None, np.ndarray | None, float]:
    """Check one candidate; returns (rejection reason or None, grasp joints,
    the pre-shaped opening that passed)."""
    cfg = self.cfg
    # Transit point first (from the current arm), then down to the grasp: the
    # solutions then lie on one branch, as the executed motion does.
    above = np.array([position[0], position[1], max(transit_z, position[2])])
    transit = self.kin.solve(above, rotation, q_seed)
    if not transit.converged:
      return "ik", None, 0.0
    ik = self.kin.solve(position, rotation, transit.q)
    if not ik.converged:
      return "ik", None, 0.0
    self.data.qpos[self.kin.qpos_adr] = ik.q
    for margin in (cfg.open_margin, cfg.tight_open_margin):
      opening = self.open_width(width, margin)
      reason = self._open_hand_reason(target, opening)
      if reason not in _OPENING_REASONS:
        break
    if reason is not None:
      return reason, None, 0.0
    # Predicted closure: both pads must meet the target.
    self._set_fingers(max(width - cfg.closure_squeeze, 0.0))
    robot, other, dist = self._robot_contacts()
    owner = self._owner[other]
    on_target = (owner == target) & (dist < 0.0)
    for pad in self.pad_geoms:
      if not np.any(on_target & (robot == pad)):
        return "pads_miss_target", None, 0.0
    pads = np.isin(robot, self.pad_geoms)
    if np.any(pads & (owner >= 0) & (owner != target) & (dist < -0.001)):
      return "closure_collision", None, 0.0
    # Sampled vertical approach, from the grasp up to the transit height.
    self._set_fingers(opening)
    q = ik.q
    rise = max(transit_z - position[2], 0.0)
    for z in np.arange(cfg.approach_step, rise + 1e-9, cfg.approach_step):
      point = position + np.array([0.0, 0.0, min(z, rise)])
      step = self.kin.solve(point, rotation, q)
      if not step.converged:
        return "ik", None, 0.0
      q = step.q
      self.data.qpos[self.kin.qpos_adr] = q
      _, other, dist = self._robot_contacts()
      pressed = max(0.0, -cfg.wall_clearance) * self._is_wall[other]
      allowed = np.where(self._owner[other] >= 0, cfg.neighbour_overlap, pressed)
      if np.any(dist < -allowed):
        return "approach_collision", None, 0.0
    return None, ik.q, opening

  def _open_hand_reason(self, target: int, opening: float) -> str | None:
    """Why the hand, posed open at ``opening``, is not clear (None: clear)."""
    cfg = self.cfg
    self._set_fingers(opening)
    _, other, dist = self._robot_contacts()
    if np.any(self._is_wall[other] & (dist < cfg.wall_clearance)):
      return "wall_clearance"
    floor = self._is_bin[other] & ~self._is_wall[other]
    if np.any(floor & (dist < cfg.floor_clearance)):
      return "bin_floor"
    if np.any(self._is_table[other] & (dist < 0.0)):
      return "table_collision"
    owner = self._owner[other]
    if np.any((owner == target) & (dist < 0.0)):
      return "open_grasp_target"
    if np.any((owner >= 0) & (owner != target) & (dist < -cfg.neighbour_overlap)):
      return "open_grasp_collision"
    return None

  def open_width(self, width: float, margin: float | None = None) -> float:
    margin = self.cfg.open_margin if margin is None else margin
    return min(RG2_MAX_OPENING, width + 2 * margin)

  def object_mass(self, k: int) -> tuple[np.ndarray, float]:
    """Object k's centre of mass (world) and mass [kg]."""
    body = self.model.geom_bodyid[self.object_geoms[k][0]]
    return self.data.xipos[body].copy(), object_mass(self.model, self.object_geoms[k])

  def _hand_corners(self, robot_prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Surface points of the hand's collision boxes (housing, coupling,
    fingers, pads) in the tool frame at half opening [P, 3], and their rate
    of change with each finger's slide position [P, 3]."""
    m = self.model
    data = mujoco.MjData(m)
    hand_bodies = {
      m.body(robot_prefix + b).id for b in ("rg2_base", "left_finger", "right_finger")
    }
    boxes = [
      g
      for g in self.robot_geoms
      if m.geom_bodyid[g] in hand_bodies and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
    ]
    site = self.kin.site_id

    def surface_points(half: np.ndarray) -> np.ndarray:
      # A grid on every face, at most 10 mm apart: a wall edge crossing a
      # face is caught, not only a corner inside a wall.
      axes = [np.linspace(-h, h, int(np.ceil(2 * h / 0.01)) + 1) for h in half]
      grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
      on_face = (np.abs(np.abs(grid) - half) < 1e-9).any(-1)
      return grid[on_face]

    local_points = {g: surface_points(m.geom_size[g]) for g in boxes}

    def corners(q: float) -> np.ndarray:
      data.qpos[self._fingers] = q
      mujoco.mj_kinematics(m, data)
      rot_t, pos_t = data.site_xmat[site].reshape(3, 3), data.site_xpos[site]
      out = []
      for g in boxes:
        world = local_points[g] @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
        out.append((world - pos_t) @ rot_t)
      return np.concatenate(out)

    base, moved = corners(0.0), corners(1e-3)
    return base, (moved - base) / 1e-3

  def _hand_clear(self, candidates: GraspCandidates, idx: np.ndarray) -> np.ndarray:
    """Whether every surface point of the hand's collision boxes, posed at
    each open candidate in ``idx``, is ``wall_clearance`` from the bin walls
    and ``floor_clearance`` above its floor (signed distances) [len(idx)]."""
    if len(idx) == 0:
      return np.zeros(0, bool)
    # The smaller opening: the order is a cheap guess, the check decides.
    open_width = np.minimum(
      RG2_MAX_OPENING, candidates.width[idx] + 2 * self.cfg.tight_open_margin
    )
    finger_q = open_width / 2 - RG2_MAX_OPENING / 4  # [N]
    corners = self._corners0 + finger_q[:, None, None] * self._corners_rate  # [N, P, 3]
    points = (
      np.einsum("nij,npj->npi", candidates.rotation_w[idx], corners)
      + candidates.position_w[idx, None]
    )
    clear = np.ones(len(idx), bool)
    for g in self.bin_geoms:
      if self.model.geom_type[g] != mujoco.mjtGeom.mjGEOM_BOX:
        continue
      rot = self.data.geom_xmat[g].reshape(3, 3)
      local = (points - self.data.geom_xpos[g]) @ rot
      q = np.abs(local) - self.model.geom_size[g]
      sdf = np.linalg.norm(np.maximum(q, 0.0), axis=-1) + np.minimum(q.max(-1), 0.0)
      need = self.cfg.wall_clearance if self._is_wall[g] else self.cfg.floor_clearance
      clear &= sdf.min(axis=-1) >= need
    return clear

  def _clear_first(self, candidates: GraspCandidates, idx: np.ndarray):
    """``idx`` (candidate ranks, ascending) with the hand-clear ones first,
    each group in rank order; clearance is computed a chunk at a time, as
    far as the caller reads (most plans succeed on the first candidate)."""
    unclear = []
    for start in range(0, len(idx), _CLEAR_CHUNK):
      chunk = idx[start : start + _CLEAR_CHUNK]
      clear = self._hand_clear(candidates, chunk)
      yield from chunk[clear]
      unclear.append(chunk[~clear])
    for chunk in unclear:
      yield from chunk

  def _bearing(self, point: np.ndarray) -> float:
    """Horizontal direction of ``point`` from the arm's base axis [rad], as
    the replica is posed."""
    axis = self.data.xanchor[self._pan_joint]
    return float(np.arctan2(point[1] - axis[1], point[0] - axis[0]))

  def object_triangles(self, k: int) -> np.ndarray:
    """Object k's surface triangles [T, 3, 3], posed as the replica is."""
    return body_triangles_w(
      self.model, self.data, list(self.object_geoms[k]), self._local_triangles[k]
    )

  def plan(
    self,
    eligible: list[int],
    transit_z: float,
    q_now: np.ndarray,
    tool_yaw_now: float,
    avoid: dict[int, set] | None = None,
    max_checks: int | None = None,
    checks: ReplicaCfg | None = None,
    no_wedges: frozenset[int] | set[int] = frozenset(),
  ) -> PlanResult:
    """The first feasible grasp over ``eligible`` objects (highest top first).

    Three passes, one per hold tier (``hold_tier``: sure grasps, then the
    well-held or narrow ones, then the rest), each over every object: a
    surer grasp of another object comes before a poorer grasp of this one
    (measured: point contacts, wide grasps and grasps far from the centre of
    mass slipped in most lifts). Each candidate is tried with the hand yaw
    of the shorter last-wrist turn first and the half-turned hand second
    (the D415 side differs), unless the first would turn the joint beyond
    ``ReplicaCfg.wrist_range`` (``_first_of_two``). ``avoid`` maps
    an object to the ``GraspPlan.key`` of grasps that failed on it (slipped
    or held nothing): a regrasp changes the direction, the height or the
    strip. ``max_checks`` replaces the budget
    per object and pass (``ReplicaCfg.max_checks_per_object``). ``checks``
    replaces ``self.cfg`` for this search (the last search's
    ``ReplicaCfg.relaxed``, the final one's ``ReplicaCfg.grazing``).
    ``no_wedges``: objects whose wedges (``ReplicaCfg.wedge_taper``) are
    skipped, counted as ``wedge_after_slip``.
    """
    if checks is not None:
      own = self.cfg
      self.cfg = checks
      try:
        return self.plan(
          eligible, transit_z, q_now, tool_yaw_now, avoid, max_checks,
          no_wedges=no_wedges,
        )  # fmt: skip
      finally:
        self.cfg = own
    avoid = avoid or {}
    result = PlanResult(None, Counter(), 0, 0)
    budget = self.cfg.max_checks_per_object if max_checks is None else max_checks
    arm_q = self.data.qpos[self.kin.qpos_adr].copy()
    tops = {k: float(self.object_triangles(k)[..., 2].max()) for k in eligible}
    hand_now = (
      tool_yaw_now,
      self._bearing(self.data.site_xpos[self.kin.site_id]),
      float(arm_q[-1]),  # The last wrist joint.
    )
    gravity = float(np.linalg.norm(self.model.opt.gravity))
    objects = sorted(eligible, key=lambda k: -tops[k])
    candidates = {}
    for k in objects:
      com, mass = self.object_mass(k)
      candidates[k] = grasp_candidates(
        self.object_triangles(k), self.cfg.search, com_w=com, weight=mass * gravity
      )
    for tier in (0, 1, 2):
      for k in objects:
        result.objects_tried += tier == 0
        plan = self._plan_object(
          k, candidates[k], tier, avoid.get(k, set()), transit_z, q_now,
          hand_now, arm_q, result, budget, k in no_wedges,
        )  # fmt: skip
        if plan is not None:
          result.plan = plan
          return result
    return result

  def _plan_object(
    self,
    k: int,
    candidates: GraspCandidates,
    tier: int,
    failed: set,
    transit_z: float,
    q_now: np.ndarray,
    hand_now: tuple[float, float, float],
    arm_q: np.ndarray,
    result: PlanResult,
    budget: int,
    no_wedges: bool = False,
  ) -> GraspPlan | None:
    """The first feasible candidate of object k in one pass (the candidates
    of one hold tier), counted into ``result``; the budget is per object and
    pass. ``no_wedges``: its wedges are skipped (``plan``)."""
    triangles = self.object_triangles(k)
    bottom = float(triangles[..., 2].min())
    # Candidates whose posed hand boxes clear the bin first (by their surface
    # points: cheap, for all candidates at once), so tilted grasps come early
    # for objects by a wall. The replica's collision check decides.
    tiers = hold_tier(
      candidates.width, candidates.patch, candidates.com_distance, self.cfg
    )
    keep = (tiers == tier) & (candidates.width <= self.cfg.max_width)
    if not self.cfg.edge_strips:
      keep &= np.abs(candidates.strip) < 2
    for rank in self._clear_first(candidates, np.flatnonzero(keep)):
      if budget <= 0:
        break
      key = (
        int(candidates.direction[rank]),
        int(candidates.level[rank]),
        int(candidates.strip[rank]),
      )
      if key in failed:
        continue
      rot = candidates.rotation_w[rank]
      flipped = rot @ np.diag([-1.0, -1.0, 1.0])
      pos = candidates.position_w[rank]
      taper = None
      if no_wedges:
        taper = grasp_taper(triangles, pos, rot, self.cfg.search)
        if self.cfg.is_wedge(taper):
          result.rejections["wedge_after_slip"] += 1
          continue
      bearing = self._bearing(pos)
      yaws = [_yaw(r) for r in (rot, flipped)]
      turns = [_wrist_turn(y, bearing, *hand_now[:2]) for y in yaws]
      shorter_first = _first_of_two(turns, hand_now[2], self.cfg.wrist_range)
      for variant in (rot, flipped) if shorter_first else (flipped, rot):
        budget -= 1
        result.checked += 1
        width = float(candidates.width[rank])
        reason, _, opening = self.check(k, pos, variant, width, transit_z, q_now)
        self.data.qpos[self.kin.qpos_adr] = arm_q
        if reason is None:
          com = self.object_mass(k)[0]
          arm = com - pos
          return GraspPlan(
            object_index=k,
            position_w=pos.copy(),
            rotation_w=variant.copy(),
            width=width,
            open_width=opening,
            transit_z=transit_z,
            grasp_above_bottom=float(pos[2] - bottom),
            candidate_rank=int(rank),
            tilt_deg=float(np.degrees(candidates.tilt[rank])),
            level=int(candidates.level[rank]),
            strip=int(candidates.strip[rank]),
            direction=int(candidates.direction[rank]),
            patch=float(candidates.patch[rank]),
            com_distance=float(candidates.com_distance[rank]),
            com_lever=abs(float(variant[:, 0] @ np.cross(arm, [0.0, 0.0, 1.0]))),
            com_below=float(-arm[2]),
            taper=taper or grasp_taper(triangles, pos, rot, self.cfg.search),
          )
        result.rejections[reason] += 1
        if reason not in _HAND_SIDE_REASONS:
          break  # The pads are symmetric: the half-turned hand fails alike.
    return None


def well_held(width, patch, com_distance, cfg: ReplicaCfg) -> np.ndarray:
  """Grasps that hold in most lifts (``ReplicaCfg.min_patch``), by their
  closing width [m], pad contact patch and centre-of-mass distance [m]
  (arrays or numbers, as ``GraspCandidates`` and ``GraspPlan`` hold them)."""
  return (
    (np.asarray(patch) >= cfg.min_patch)
    & (np.asarray(width) <= cfg.max_held_width)
    & (np.asarray(com_distance) <= cfg.max_com_distance)
  )


def hold_tier(width, patch, com_distance, cfg: ReplicaCfg) -> np.ndarray:
  """Each grasp's planning tier (arguments as ``well_held``): 0 sure (well
  held, narrow, near the centre of mass), 1 well held or narrow and near
  it, 2 the rest."""
  held = well_held(width, patch, com_distance, cfg)
  near = (np.asarray(width) <= cfg.sure_width) & (
    np.asarray(com_distance) <= cfg.sure_com_distance
  )
  return np.where(held & near, 0, np.where(held | near, 1, 2))


def object_mass(model: mujoco.MjModel, geom_ids) -> float:
  """Mass [kg] of the body an object's collision geoms belong to."""
  return float(model.body_mass[model.geom_bodyid[geom_ids[0]]])


# Rejections of the open hand that a smaller pre-shaped opening may avoid.
_OPENING_REASONS = ("wall_clearance", "open_grasp_collision", "open_grasp_target")

# Rejections that the half-turned hand (camera on the other side) may avoid.
_HAND_SIDE_REASONS = ("wall_clearance", "table_collision", "approach_collision")


def _wrist_turn(
  yaw: float, bearing: float, yaw_now: float, bearing_now: float
) -> float:
  """The last wrist joint's change [rad] to a downward hand at ``yaw``
  (``_yaw``) whose position lies at ``bearing`` about the arm's base axis,
  from a hand at ``yaw_now`` and ``bearing_now``: the task's command turns
  the hand the short way in the world frame while the base swings the arm,
  and the wrist (its axis pointing down) makes up the difference."""
  return _wrap(bearing - bearing_now) - _wrap(yaw - yaw_now)


def _first_of_two(turns: list[float], wrist: float, wrist_range: float) -> bool:
  """Whether the first of two hand yaws (a hand and the half-turned one)
  comes first: the one of the shorter last-wrist turn (``turns``, from the
  joint's position ``wrist``), unless it would take the joint beyond
  ``wrist_range``; the two turns differ by half a turn, so one of them
  stays within. Every joint follows its IK step at most 0.5 rad/s, so the
  wrist's turn beyond the base's swing is what a hand's turn costs."""
  cost = [(max(abs(wrist + t) - wrist_range, 0.0), abs(t)) for t in turns]
  return cost[0] <= cost[1]


def _yaw(rotation: np.ndarray) -> float:
  """Yaw of a hand's closing axis (its x axis) [rad]."""
  return float(np.arctan2(rotation[1, 0], rotation[0, 0]))


def _wrap(angle: float) -> float:
  return (angle + np.pi) % (2 * np.pi) - np.pi


# Candidates whose hand clearance is computed at once (_clear_first).
_CLEAR_CHUNK = 64
