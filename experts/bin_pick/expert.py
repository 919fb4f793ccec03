"""Bin-picking expert, as specified: replica-planned grasps, live batched execution.

Privileged: reads object poses and shapes. Planning runs on a CPU kinematic
replica (``GraspReplica``) per environment, only when an environment needs a
new grasp, in a thread pool. Execution is one state machine over all
environments at once (tensor code), issuing the task's own 20 Hz Cartesian
actions (5 mm / 1 degree per unit) and normalized gripper actions:

  plan       replica: the first feasible grasp over eligible objects, once
             the objects in reach are still (at most ``settle_time``)
  move_above transit height above the grasp, hand turned to the grasp
  descend    vertical approach to the open grasp
  (the gripper is pre-shaped: opened to the grasp width plus a margin)
  close      gripper position target inside the object (planned width minus
             ``grip_squeeze`` per side): the actuator presses within its
             original effort bound [-3, 3]; once the pads are on the object
             the target follows the opening so that each pad presses
             ``grip_ratio`` times the object's weight (also while held)
  lift       vertical, to the carry height (object clear of the rim)
  carry      at the carry height until the object is clear of the bin's
             walls, then straight down and across to just above the drop
             zone's tallest object, over a free drop slot
  lower      near the table (object just above it)
  release    gripper open
  retreat    vertical, until the pads clear the drop zone's objects, then
             plan again at once: the placed object's delivery verdict is
             awaited meanwhile (``verify_time``), and it is left out of
             planning until then
  recover    after a slip, an empty grasp or a motion timeout: open and
             rise vertically, then plan again
  done       bin cleared, or no feasible grasp or rearrangement left
             (``finished``)

When no eligible object has a feasible grasp, the expert rearranges the
pile (``rearrange.py``, checked on the replica like a grasp): with the
gripper closed it pushes an object low toward free floor, high to tip a
standing one over, or, pressing on its top, rolls a round one off its wall
or topples a standing one away from its wall, then plans again:

  push_above  transit height above the push start, gripper closed
  push_down   vertical, to the push start beside the object
  push        a straight line along the push direction (a roll then holds
              the object pinned until it is still)
  push_up     vertical, back to the transit height (the move's outcome,
              the object's displacement and turn, is logged)

Every move out of the bin and back in is routed (``segment_box_span``):
level while the hand or the held object is above the bin's walls, diagonal
outside them; translation actions are bounded per axis, so descending or
rising beside a horizontal move costs no time.

Slips are seen as object-relative motion: the object's position in the tool
frame moving more than ``slip_tolerance`` from where the close left it.
No pick order is prescribed: the planner tries the highest objects first;
an object that slipped onto the reachable table stays eligible.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch
from mjlab.utils.lab_api.math import (
  axis_angle_from_quat,
  matrix_from_quat,
  quat_from_angle_axis,
  quat_from_matrix,
  quat_inv,
  quat_mul,
)

from assets.ur5_rg2.model import (
  GRIPPER_EFFORT_LIMIT,
  GRIPPER_KP,
  RG2_MAX_OPENING,
  RG2_OPENING_TENDON_COEF,
  RG2_PAD_HALF,
  RG2_TCP_OFFSET,
)
from evaluators.bin_pick import CONDITIONS, failed_condition
from experts.bin_pick.drop_zone import choose, directions, grid, separations, supports
from experts.bin_pick.rearrange import (
  PushCfg,
  PushPlan,
  object_situation,
  plan_push,
  roll_axis,
)
from experts.bin_pick.replica import GraspReplica, PlanResult, ReplicaCfg, object_mass
from mjlab_tasks.bin_pick.env_cfg import (
  DROP_DESTINATION,
  PARKING_X,
  object_bounds,
  object_geom_points,
  pourer,
)
from mjlab_tasks.bin_pick.mdp import delivery_rule
from mjlab_tasks.common.scene import ROBOT
from mjlab_tasks.common.verdict import task_verdict

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


class Stage(IntEnum):
  PLAN = 0
  MOVE_ABOVE = 1
  DESCEND = 2
  CLOSE = 3
  LIFT = 4
  CARRY = 5
  LOWER = 6
  RELEASE = 7
  RETREAT = 8
  RECOVER = 10
  DONE = 11
  PUSH_ABOVE = 12
  PUSH_DOWN = 13
  PUSH = 14
  PUSH_UP = 15


STAGE_NAMES = {s: s.name.lower() for s in Stage}
_MOTION = (
  Stage.MOVE_ABOVE,
  Stage.DESCEND,
  Stage.LIFT,
  Stage.CARRY,
  Stage.LOWER,
  Stage.RETREAT,
  Stage.RECOVER,
  Stage.PUSH_ABOVE,
  Stage.PUSH_DOWN,
  Stage.PUSH,
  Stage.PUSH_UP,
)
_PUSHING = (Stage.PUSH_ABOVE, Stage.PUSH_DOWN, Stage.PUSH)
# Moves of the hand without an object (``transit_speed``).
_TRANSIT = (
  Stage.MOVE_ABOVE,
  Stage.DESCEND,
  Stage.RETREAT,
  Stage.RECOVER,
  Stage.PUSH_ABOVE,
  Stage.PUSH_UP,
)
# Which objects are rearranged first: those lying across the bin or standing
# block the others; then objects whose grasps failed, then those by a wall.
_SITUATION_ORDER = ("across", "standing", "failed_grasps", "wall", "blocked")
GRIPPER_OPEN, GRIPPER_CLOSED = 1.0, -1.0
# Objects whose centre lies this near the drop destination count as the drop
# zone's (delivered ones lie within the evaluator's 0.15 m) [m].
_ZONE_RADIUS = 0.2
# The open hand's reach about the tool point across its closing axis [m].
_HAND_REACH = 0.5 * RG2_MAX_OPENING + 2 * RG2_PAD_HALF[0]
# A placed object counts as verified once delivered this long after the
# retreat (its first steps on the table may still be a bounce) [s].
_VERIFY_AFTER = 0.2
# Directions of the footprints' support functions: a footprint's gap is
# understated by at most the widths times sin(pi / 64), 5 % of them.
_FOOTPRINT_DIRECTIONS = 64


def _command(width):
  """The gripper's normalized command [-1, 1] for an opening ``width`` [m]."""
  return 2.0 * width / RG2_MAX_OPENING - 1.0


def _width(command):
  """The opening [m] of a normalized gripper command or reading [-1, 1]."""
  return 0.5 * (command + 1.0) * RG2_MAX_OPENING


def _capsules(model, object_geoms, device) -> tuple[torch.Tensor, torch.Tensor]:
  """Per object: its geom if it is one capsule, else -1 [K]; the capsule's
  full length, end to end, else 0 [K] [m]."""
  geom, length = [], []
  for gs in object_geoms:
    one = len(gs) == 1 and model.geom_type[gs[0]] == mujoco.mjtGeom.mjGEOM_CAPSULE
    radius, half = model.geom_size[gs[0]][:2]
    geom.append(gs[0] if one else -1)
    length.append(2.0 * (radius + half) if one else 0.0)
  return (
    torch.tensor(geom, dtype=torch.long, device=device),
    torch.tensor(length, dtype=torch.float32, device=device),
  )


def fall_radius(
  geom_xmat: torch.Tensor,
  capsule_geom: torch.Tensor,
  capsule_length: torch.Tensor,
  obj: torch.Tensor,
  standing_tilt: float,
) -> torch.Tensor:
  """Radius [n] about a held object's centre that it sweeps falling over
  once let go: a capsule held standing (its axis within ``standing_tilt``
  of vertical) cannot stand on its round end and falls its full length
  (traced on pour and object seed 49 in a trial of four hold tiers: a
  capsule set down standing fell and threw a delivered cylinder 2 m). 0
  for any other object. ``geom_xmat``: each environment's geom frames [n,
  G, 3, 3]; ``capsule_geom`` and ``capsule_length`` as ``_capsules``
  gives them; ``obj``: the held object of each environment [n]."""
  geom = capsule_geom[obj]
  rows = torch.arange(len(obj), device=obj.device)
  axis_z = geom_xmat[rows, geom.clamp_min(0), 2, 2]
  standing = (geom >= 0) & (axis_z.abs() > math.cos(standing_tilt))
  return torch.where(standing, capsule_length[obj], 0.0)


def _body_roll_axis(replica, k: int) -> tuple[np.ndarray, np.ndarray] | None:
  """Object k's roll axis (``rearrange.roll_axis``) on the posed replica, in
  the world and in the object's body frame; None when it does not roll."""
  axis = roll_axis(replica, k)
  if axis is None:
    return None
  body = replica.model.geom_bodyid[replica.object_geoms[k][0]]
  return axis, replica.data.xmat[body].reshape(3, 3).T @ axis


def _within(v: torch.Tensor, limit: torch.Tensor | float) -> torch.Tensor:
  """``v`` [B, 3] scaled down, direction preserved, so that no component
  exceeds ``limit`` in size."""
  return v / (v.abs().amax(-1, keepdim=True) / limit).clamp_min(1.0)


def _rotation_2d(angle: torch.Tensor) -> torch.Tensor:
  """Rotations of the plane by ``angle`` [...] -> [..., 2, 2]."""
  c, s = angle.cos(), angle.sin()
  return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def _swing(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
  """Signed angle [rad] from horizontal directions ``a`` to ``b`` [..., 2]."""
  cross = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
  return torch.atan2(cross, (a * b).sum(-1))


def _finger_box_corners(model) -> torch.Tensor:
  """Corners [G, 8, 3] of the left finger's collision boxes (pad, link) in
  its frame shifted to the pad's inner face (x: outward, the closing axis).
  The finger frame is at the inner face at every opening (the slide's zero
  is half the stroke, and the pad spans x 0 to its thickness)."""
  body = model.body(f"{ROBOT}/left_finger").id
  adr, num = model.body_geomadr[body], model.body_geomnum[body]
  signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
  boxes = []
  for g in range(adr, adr + num):
    if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_BOX or not model.geom_contype[g]:
      continue
    if not np.allclose(model.geom_quat[g], [1, 0, 0, 0]):
      raise ValueError("finger boxes are expected aligned with the finger frame")
    boxes.append(model.geom_pos[g] + signs * model.geom_size[g])
  return torch.tensor(np.array(boxes), dtype=torch.float32)


def segment_box_span(
  a: torch.Tensor, b: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
  """Fractions ``(s_in, s_out)`` of the segments ``a + s (b - a)``, s in
  [0, 1], that lie inside the boxes ``lo`` .. ``hi`` (all [..., 2]);
  ``s_in > s_out`` where a segment misses its box."""
  d = b - a
  flat = d.abs() < 1e-9
  step = torch.where(flat, torch.ones_like(d), d)
  t1, t2 = (lo - a) / step, (hi - a) / step
  inside = (a >= lo) & (a <= hi)
  inf = torch.full_like(d, torch.inf)
  t_in = torch.where(flat, torch.where(inside, -inf, inf), torch.minimum(t1, t2))
  t_out = torch.where(flat, torch.where(inside, inf, -inf), torch.maximum(t1, t2))
  return t_in.amax(-1).clamp_min(0.0), t_out.amin(-1).clamp_max(1.0)


@dataclass(frozen=True)
class BinPickExpertCfg:
  transit_clearance: float = 0.06
  """Tool height above the rim (and the pile) for transit and approach [m]."""
  carry_clearance: float = 0.04
  """Carried object's lowest point above the rim [m]."""
  release_gap: float = 0.001
  """Object's lowest point above the table at release [m]."""
  finger_clearance: float = 0.003
  """Lowest point of the fingers (pads and links, as the hand is posed) above
  the table at release [m]."""
  release_tolerance: float = 0.0015
  """The lowering ends once the held object's lowest point, as it is held
  now, is within this of ``release_gap`` above the table [m]."""
  release_open_speed: float = 0.05
  """Opening speed of the fingers at release [m/s] (the target's ramp)."""
  min_release_tool_z: float = RG2_PAD_HALF[2] + 0.012
  """Planning's lowest tool height at release, for the approach's and the
  retreat's heights; the lowering itself ends by ``release_gap`` and
  ``finger_clearance``, as the object is held and the hand posed [m]."""
  knock_margin: float = 0.03
  """Drop positions (the held object's centre) lie this far inside the
  delivery radius: a delivery knocked by up to this stays delivered [m]."""
  edge_margin: float = 0.012
  """Drop positions between ``knock_margin`` and this inside the delivery
  radius are taken only when no position within ``knock_margin`` is free:
  traced on pour and object seed 3 at ``e07fb10`` (environment 3), the
  zone had no free position for the last three of 12 objects, and the one
  with the most clearance for the last overlapped a delivered cylinder by
  10 mm; the lowering knocked it rolling out of the zone [m]."""
  placement_spacing: float = 0.01
  """Spacing of the grid of drop positions considered [m]."""
  drop_gap: float = 0.015
  """A drop position is free when the held object and the released fingers
  there stay this far from every other object's footprint near the zone [m]."""
  standing_tilt: float = np.radians(45.0)
  """A held capsule whose axis is within this of vertical is set down
  standing and falls over: its drop position keeps ``drop_gap`` from the
  other objects' footprints all around, its full length out
  (``fall_radius``) [rad]."""
  release_margin: float = 0.008
  """Opening at release: the planned grasp width plus this on each side, so
  the opening fingers stay within the footprint that the gap kept clear [m]."""
  zone_watch: float = 0.3
  """Objects within this of the drop destination count for the slots [m]."""
  zone_clearance: float = 0.02
  """Held object's lowest point (where the carry ends) and the pads'
  (where the retreat ends) above the drop zone's tallest object [m]."""
  route_margin: float = 0.03
  """Horizontal margin around the bin's walls within which the hand and the
  held object stay at the carry or transit height [m]."""
  pos_tolerance: float = 0.004
  rot_tolerance: float = np.radians(3.0)
  close_time: float = 0.6
  release_time: float = 0.5
  release_relax: float = 0.15
  """First part of ``release``: the gripper's target is held at the
  fingers' opening, so the squeeze (and the contacts' stored spring) ends
  before the fingers part: a cylinder let go at once was measured leaping
  40 mm and rolling on for over 3 s [s]."""
  release_open: float = 0.1
  """Least time the gripper opens before the retreat may start; it starts
  then once the robot no longer touches the released object [s]."""
  release_settle: float = 2.0
  """Longest wait in ``lower`` for the held object to be still (the
  evaluator's speed limits) before it is released [s]."""
  verify_time: float = 3.0
  """Longest wait for a placed object's delivery verdict after the retreat;
  still undelivered then, the placement costs an attempt [s]."""
  grip_squeeze: float = 0.006
  """Closing target: the planned width minus this on each side [m]. The
  position actuator then presses with kp x (target error), within the
  original [-3, 3] bound, instead of driving to fully closed (-1): light
  objects are not crushed through by the soft contacts."""
  grip_ratio: float = 20.0
  """Least pad force, per pad, over the held object's weight. The pads sink
  into the soft contact and a fixed closing target loses force; measured on
  the first 25 lifts of seed (3, 3) at the lift's start (the weaker pad):
  all 16 pressing under 15 times the weight slipped, all 9 pressing 15 times
  or more held. Once the pads are on the object (``grip_after`` into the
  close) the target follows the opening so that the position servo presses
  this hard, within ``grip_effort_cap``."""
  grip_after: float = 0.3
  """Time into the close when the fingers have met the object [s] (they
  meet it within 0.2 s)."""
  grip_effort_cap: float = 0.9 * GRIPPER_EFFORT_LIMIT
  """Largest gripper effort the grip asks for (the bound itself unchanged)."""
  empty_margin: float = 0.001
  """A gripper closed to within this of fully closed holds nothing [m]."""
  slip_tolerance: float = 0.02
  """Object-relative motion [m] that counts as a slip."""
  moved_tolerance: float = 0.008
  """Horizontal motion of the target since planning [m] past which an
  approach (``move_above``, ``descend``) is dropped and planned again, no
  attempt counted: measured on the 140 x 60 mm bin (pour and object seed 0,
  environment 3), a capsule planned while still rolling moved 12 mm before
  the close, which pressed it against the wall; the lift then crawled at
  3 mm/s for 8 s and the object was given up with 134 s left. A round
  target is followed instead (``follow_distance``)."""
  follow_distance: float = 0.03
  """A round target (``rearrange.roll_axis``: a sphere, or a capsule or
  cylinder lying) that rolls during its approach is followed: the grasp
  moves with its centre, up to this far from where it was planned [m],
  while its axis turns by at most ``follow_turn``. Beyond, or for any
  other object, ``moved_tolerance`` applies. Measured on the four pairs at
  ``bf37fc7``: 19 of the 20 dropped approaches were of round objects,
  mostly just rolled off a wall, which roll on slowly (rolling friction
  0.1 mm); two such objects were given up."""
  table_follow_distance: float = 0.3
  """``follow_distance`` for a round target planned on the table, outside
  the bin's walls (one that slipped from the hand in the carry or rolled off
  the drop zone), followed while it stays in the arm's reach [m]: no wall
  is near it, and it rolls far (rolling friction 0.1 mm). In the latest
  runs of 24 pour and object seed pairs before it, 9 objects ended out of
  reach; each was a cylinder or capsule that fell from the hand in the
  carry or the lowering, or rolled off the drop zone, and on 4 of them
  approaches had been dropped as "target moved" while it rolled on the
  table (docs/bin_pick.md)."""
  follow_turn: float = math.radians(15.0)
  """Largest turn of a followed target's axis about the vertical [rad]."""
  lift_speed: float = 0.05
  """Largest hand speed while the held object is still within
  ``careful_lift`` of where it was grasped [m/s] (2.5 mm per step)."""
  transit_speed: float = 0.4
  """Largest hand speed without an object (move above, descend, retreat,
  recover, to and from a push) [m/s]. Measured on pour and object seed 1
  (docs/bin_pick.md): 0.1 m/s everywhere 20.0 s per delivery, 0.2 m/s
  (carry 0.2, turn 40 deg/s) 13.5 s, 0.3 m/s (carry 0.2, turn 80 deg/s)
  12.5 s; the target leads the tool by at most 20 mm. 0.4 m/s (20 mm per
  step) since 2026-12-07: on pour and object seed 56's first 30 s a move
  above a grasp took 1.90 s on average against 2.03 s at 0.3 m/s."""
  carry_speed: float = 0.2
  """Largest hand speed with a held object, past the careful lift and until
  the lowering (lift, carry) [m/s]."""
  lower_speed: float = 0.15
  """Largest hand speed of the lowering and of a push's descent [m/s]."""
  turn_speed: float = math.radians(80.0)
  """Largest rotation speed about each axis [rad/s] (the task's bound: 4
  degrees per step)."""
  turn_done: float = math.radians(1.0)
  """A commanded orientation within this of the target has turned [rad]."""
  turn_lead: float = math.radians(3.0)
  """Largest angle the commanded orientation may lead the tool's [rad].
  Every arm joint follows its IK step at most 0.5 rad/s (servo stiffness
  over damping, 20, times the 0.025 rad step bound), so a hand turns at
  about 29 degrees/s, not ``turn_speed``: a command turned further ahead
  made the rotation error dominate the IK step, whose bound then scaled the
  translation down with it (measured on pour and object seed 2: a 38 degree
  turn held a move at 0.03 m/s for 1.3 s, against 0.2 m/s without a turn).
  Within this lead the translation keeps its pace while the hand turns."""
  careful_lift: float = 0.03
  """Lift height over which the object leaves the pile slowly [m]."""
  descent_turn: float = math.radians(20.0)
  """A move above a grasp ends once the tool is at its position and turned
  within this of the grasp's orientation: the descent goes on turning, no
  lower than ``_descent_floor`` until turned within ``rot_tolerance``
  [rad]."""
  blend_clearance: float = 0.015
  """A lift ends, and the carry rises on to its level, once the held object
  and the hand are this far above the bin's rim and its pile; a descent
  still turning stays this far above them [m]."""
  settle_time: float = 1.5
  """Longest wait before planning for the undelivered objects within the
  arm's reach to be still (the evaluator's speed limits): an object that
  just slipped or was pushed, planned where it no longer is, closes an
  empty grasp [s]."""
  settle_retries: int = 3
  """Plans that found nothing while such an object still moved, after which
  the environment gives up all the same: the replica poses every object
  where it is, so one in flight (a slip's, over the arm) blocks grasps it
  does not block once landed (measured: pour and object seed 6,
  environment 1, gave up on its 3 other objects at 5 s: 4,704 candidates
  rejected with an object thrown from the hand over the arm's base; with
  that object where it landed, a grasp and two pushes were feasible)."""
  stage_timeout: float = 8.0
  """Longest time of one motion stage once its commanded turn is done [s]."""
  turn_timeout: float = 20.0
  """Longest time of one motion stage still turning [s]: a half turn of the
  hand takes about 6 s at the wrist's pace (0.5 rad/s) and 9 s at the
  task's 1 degree per step, but a hand held by a joint's stop never ends
  its turn (measured: a wrist driven to its stop held an environment in
  one move for the last 109 s of its episode)."""
  stall_time: float = 1.5
  """A descent or a lowering off its target whose tool has moved less than
  ``stall_distance`` for this long, its commanded turn done, has stalled
  (blocked by an object or the pile): a descent fails then as on its
  timeout, a lowering releases the object where it rests [s]. At 5 mm per
  step (a lowering's speed) the tool covers 150 mm in that time."""
  stall_distance: float = 0.002
  """Tool motion that counts as progress for ``stall_time`` [m]."""
  max_attempts: int = 3
  """Failed attempts after which an object is no longer tried."""
  reach: tuple[float, float] = (0.14, 0.8)
  """Horizontal distance from the robot base's axis of an eligible object
  [m]. The replica accepts grasps of a cylinder lying on the table from
  0.14 m out (probed at 0.08 to 0.2 m, five bearings); nearer, IK and the
  hand's collisions with the target and the table reject every candidate.
  Before 2026-12-07 (fourteenth session) 0.25: 4 cylinders that slipped
  from the hand and rolled to 0.16 to 0.25 m stayed undelivered."""
  route_radius: float = 0.25
  """A straight move not routed over the walls keeps at least this far from
  the base axis (``_keep_off_base``) [m]."""
  push_speed: float = 0.04
  """Largest hand speed along a push [m/s]."""
  max_pushes_per_object: int = 2
  max_pushes: int = 8
  """Rearrangements per environment and episode."""
  num_workers: int = 2
  replica: ReplicaCfg = field(default_factory=ReplicaCfg)
  push: PushCfg = field(default_factory=PushCfg)


@dataclass
class EnvLog:
  """What happened in one environment (for reports)."""

  transitions: list[dict] = field(default_factory=list)
  failures: Counter = field(default_factory=Counter)
  rejections: Counter = field(default_factory=Counter)
  plans: int = 0
  planned_candidates: int = 0
  delivery_times: list[float] = field(default_factory=list)
  outcome: str | None = None
  outcome_time: float | None = None
  planning_wall_s: float = 0.0
  rearrangements: list[dict] = field(default_factory=list)
  push_rejections: Counter = field(default_factory=Counter)


@dataclass
class _Step:
  """One step of ``BinPickExpert.act``: what it read of the environment, and
  the stage snapshot its decisions are made on."""

  verdict: dict[str, torch.Tensor]
  tool_pos: torch.Tensor
  tool_quat: torch.Tensor
  stage: torch.Tensor
  """Stages as the step found them; once the failures are handled, as those
  left them (one transition per environment and step)."""
  rows: torch.Tensor
  obj: torch.Tensor
  """Target object per environment (0 where there is none)."""
  obj_pos: torch.Tensor
  """Target object's centre, env frame [B, 3]."""
  rel: torch.Tensor
  """Target object's centre in the tool frame [B, 3]."""
  opening: torch.Tensor
  """Gripper tendon length [B]."""
  arrived: torch.Tensor
  """Tool at its target within the tolerances, no via point pending."""
  placed: torch.Tensor
  """Tool at its target position (``pos_tolerance``), no via point pending,
  its turn still within ``descent_turn`` of the target's."""
  turned: torch.Tensor
  """Tool within ``rot_tolerance`` of the target's orientation."""
  timed_out: torch.Tensor
  blocked: torch.Tensor
  """A descent that stalled (the open fingers rest on the pile)."""
  set_down: torch.Tensor
  """A lowering that stalled (the held object rests on something)."""
  slipped: torch.Tensor
  pile_top: torch.Tensor | None = None
  """``BinPickExpert._pile_top``, once a decision has asked for it."""

  def at(self, s: Stage) -> torch.Tensor:
    return self.stage == int(s)


class BinPickExpert:
  """Batched bin-picking expert; the environment must use Cartesian actions."""

  def __init__(
    self, env: ManagerBasedRlEnv, cfg: BinPickExpertCfg = BinPickExpertCfg()
  ):
    self.env, self.cfg = env, cfg
    self.arm = env.action_manager.get_term("arm")
    if not hasattr(self.arm, "desired_pos_w"):
      raise ValueError(
        "BinPickExpert needs Cartesian arm actions (arm_action='cartesian')."
      )
    self.pour = pourer(env)
    self.names = self.pour.cfg.names
    self.geometry = self.pour.cfg.geometry
    n, k, dev = env.num_envs, len(self.names), env.device
    self.device = dev
    self._objects = [env.scene[name] for name in self.names]
    self._object_geoms = [
      env.scene[name].indexing.geom_ids.cpu().tolist() for name in self.names
    ]
    self._gripper_term = env.action_manager.get_term("gripper")
    masses = [object_mass(env.sim.mj_model, g) for g in self._object_geoms]
    # Gripper effort that presses each pad with grip_ratio x the weight (the
    # tendon turns one effort unit into RG2_OPENING_TENDON_COEF N per finger).
    gravity = float(np.linalg.norm(env.sim.mj_model.opt.gravity))
    weight = torch.tensor(masses, dtype=torch.float32, device=dev) * gravity
    self._grip_effort = (cfg.grip_ratio * weight / RG2_OPENING_TENDON_COEF).clamp(
      max=cfg.grip_effort_cap
    )
    self._base_xy = (
      env.scene[ROBOT].data.root_link_pos_w[:, :2] - env.scene.env_origins[:, :2]
    )
    self.stage = torch.full((n,), int(Stage.PLAN), dtype=torch.long, device=dev)
    self.stage_time = torch.zeros(n, device=dev)
    self.time = torch.zeros(n, device=dev)
    self.target_obj = torch.full((n,), -1, dtype=torch.long, device=dev)
    self.target_pos = torch.zeros(n, 3, device=dev)
    self.target_quat = torch.zeros(n, 4, device=dev)
    self.target_quat[:, 0] = 1.0
    self.gripper = torch.full((n,), GRIPPER_OPEN, device=dev)
    self.open_command = torch.full((n,), GRIPPER_OPEN, device=dev)
    self.close_command = torch.full((n,), GRIPPER_CLOSED, device=dev)
    self.grasp_pos = torch.zeros(n, 3, device=dev)
    # The target object's centre when its grasp was planned (env frame).
    self.planned_at = torch.zeros(n, 3, device=dev)
    self.grasp_quat = torch.zeros(n, 4, device=dev)
    # A round target's roll axis when planned (world) and in its body frame,
    # zero for a sphere (both followed during the approach: follow_distance),
    # and whether it is round.
    self.follow_axis_w = torch.zeros(n, 3, device=dev)
    self.follow_axis = torch.zeros(n, 3, device=dev)
    self.follow = torch.zeros(n, dtype=torch.bool, device=dev)
    self.followed = torch.zeros(n, 2, device=dev)  # Shift applied to the grasp.
    self.carry_z = torch.zeros(n, device=dev)
    self.release_z = torch.zeros(n, device=dev)
    self.hold_offset = torch.zeros(n, 3, device=dev)  # Object in the tool frame.
    self.drop_xy = torch.zeros(n, 2, device=dev)
    # Where the carry ends and the retreat stops (tool heights), and the held
    # object's horizontal reach about its centre (planned).
    self.approach_z = torch.zeros(n, device=dev)
    self.retreat_z = torch.zeros(n, device=dev)
    self.hold_radius = torch.zeros(n, device=dev)
    # A point the tool passes through on the way to target_pos (routing).
    self.via = torch.zeros(n, 3, device=dev)
    self.via_on = torch.zeros(n, dtype=torch.bool, device=dev)
    # Descents not yet turned within rot_tolerance (_descent_floor).
    self.turn_pending = torch.zeros(n, dtype=torch.bool, device=dev)
    layout = self.geometry.layout()
    self._bin_lo = torch.tensor(
      [layout.bin_outer_x[0], layout.bin_outer_y[0]], dtype=torch.float32, device=dev
    )
    self._bin_hi = torch.tensor(
      [layout.bin_outer_x[1], layout.bin_outer_y[1]], dtype=torch.float32, device=dev
    )
    self.attempts = torch.zeros(n, k, dtype=torch.long, device=dev)
    # Per environment: object -> keys of grasps that failed on it (regrasp
    # changes direction, height or strip), and the current grasp's key.
    self.failed_grasps: list[dict[int, set]] = [{} for _ in range(n)]
    self.last_failure: list[dict[int, str]] = [{} for _ in range(n)]
    self.pushes = torch.zeros(n, k, dtype=torch.long, device=dev)
    # Objects whose used attempts were renewed once by the last-resort search.
    self.renewed = torch.zeros(n, k, dtype=torch.bool, device=dev)
    # Objects by a wall toppled once (_plan_rearrangement).
    self.wall_toppled = torch.zeros(n, k, dtype=torch.bool, device=dev)
    # Plans in a row that found nothing while an object moved (settle_retries).
    self._waits = [0] * n
    # Objects whose delivery the expert verified (the verdict is per step: a
    # delivered object knocked away or not still later is undelivered again).
    self.verified = torch.zeros(n, k, dtype=torch.bool, device=dev)
    # Placements that failed their verification: one that comes to rest in
    # the zone later is verified then.
    self.unverified = torch.zeros(n, k, dtype=torch.bool, device=dev)
    # The placed object whose verdict is awaited (-1: none), and for how long.
    self.checking = torch.full((n,), -1, dtype=torch.long, device=dev)
    self.check_time = torch.zeros(n, device=dev)
    # Planning found nothing to do but the awaited placement: wait for it.
    self.await_check = torch.zeros(n, dtype=torch.bool, device=dev)
    self.push_end = torch.zeros(n, 3, device=dev)
    # A roll ends pinning its object until it is still (else it rolls on).
    self.push_holds = torch.zeros(n, dtype=torch.bool, device=dev)
    # Where the tool last moved by stall_distance, and the stage time then.
    self.moved_at = torch.full((n, 3), float("inf"), device=dev)
    self.moved_time = torch.zeros(n, device=dev)
    self._push: list[PushPlan | None] = [None] * n
    self._push_from: list[tuple[np.ndarray, np.ndarray] | None] = [None] * n
    self._grasp_key: list[tuple | None] = [None] * n
    # Whether the current grasp is a wedge (ReplicaCfg.wedge_taper), and per
    # environment the objects whose wedge slipped since their last
    # rearrangement: the first search skips their wedges.
    self._grasp_wedge = [False] * n
    self.wedge_slipped: list[set[int]] = [set() for _ in range(n)]
    self.logs = [EnvLog() for _ in range(n)]
    self._local = threading.local()
    self._pool = ThreadPoolExecutor(max_workers=max(1, cfg.num_workers))
    drop_radius = delivery_rule(env)[1].drop_radius
    self._drop_candidates = grid(
      DROP_DESTINATION, drop_radius - cfg.edge_margin, cfg.placement_spacing
    ).to(dev)
    self._drop_centre = torch.tensor(DROP_DESTINATION, dtype=torch.float32, device=dev)
    # The largest bearing of a drop position from the destination's, seen
    # from the arm's base axis [rad] (the carry's turn aims at the latter).
    reach = torch.linalg.vector_norm(self._drop_candidates - self._drop_centre, dim=-1)
    away = torch.linalg.vector_norm(self._drop_centre - self._base_xy[0])
    self._zone_spread = torch.asin(reach.max() / away)
    self._wrist_joint = env.scene[ROBOT].joint_names.index("wrist_3")
    # Candidates by the carry's length from the bin's centre (the task's
    # actions are bounded per axis: the longer horizontal axis sets the time),
    # ties broken by the straight distance; those in the edge ring after all
    # others (edge_margin).
    centre = 0.5 * (self._bin_lo + self._bin_hi)
    offset = self._drop_candidates - centre
    from_destination = torch.linalg.vector_norm(
      self._drop_candidates - self._drop_centre, dim=-1
    )
    edge = from_destination > drop_radius - cfg.knock_margin + 1e-6
    self._drop_cost = offset.abs().amax(-1) + 1e-3 * offset.norm(dim=-1) + edge.float()
    self._dirs = directions(_FOOTPRINT_DIRECTIONS, dev)
    left = _finger_box_corners(env.sim.mj_model).to(dev)
    # Both fingers: the right one is the left turned half a turn about the
    # tool axis [2 G, 8, 3].
    self._finger_corners = torch.cat(
      [left, left * torch.tensor([-1.0, -1.0, 1.0], device=dev)]
    )
    # Footprint parts (collision geoms) in object order: each part's object,
    # and each object's first part and part count.
    counts = torch.tensor([len(g) for g in self._object_geoms], device=dev)
    self._part_owner = torch.repeat_interleave(torch.arange(k, device=dev), counts)
    self._part_start = torch.cumsum(counts, 0) - counts
    self._part_count = counts
    self._capsule_geom, self._capsule_length = _capsules(
      env.sim.mj_model, self._object_geoms, dev
    )
    self.release_command = torch.full((n,), GRIPPER_OPEN, device=dev)
    self.release_width = torch.zeros(n, device=dev)

  # Helpers.

  def _replica(self) -> GraspReplica:
    if not hasattr(self._local, "replica"):
      self._local.replica = GraspReplica(
        self.env.sim.mj_model, self._object_geoms, cfg=self.cfg.replica
      )
    return self._local.replica

  def _tool(self) -> tuple[torch.Tensor, torch.Tensor]:
    pos, quat = self.arm.tool_pose_w()
    return pos - self.env.scene.env_origins, quat

  def _object_pos(self) -> torch.Tensor:
    """Object centres, env frame [B, K, 3]."""
    origins = self.env.scene.env_origins.unsqueeze(1)
    return torch.stack([o.data.root_link_pos_w for o in self._objects], 1) - origins

  def _log(
    self, env_id: int, new: Stage | None, note: str = "", obj: int | None = None
  ) -> None:
    """A transition to ``new`` (None: an event that changes no stage) about
    object ``obj`` (default: the target)."""
    now = STAGE_NAMES[Stage(int(self.stage[env_id]))]
    self.logs[env_id].transitions.append(
      {
        "t": round(float(self.time[env_id]), 3),
        "from": now,
        "to": now if new is None else STAGE_NAMES[new],
        "object": int(self.target_obj[env_id]) if obj is None else obj,
        "note": note,
      }
    )

  def _enter(self, mask: torch.Tensor, new: Stage, note: str = "") -> None:
    for i in mask.nonzero().flatten().tolist():
      self._log(i, new, note)
    self._enter_quiet(mask, new)

  def _enter_quiet(self, mask: torch.Tensor, new: Stage) -> None:
    """Enter a stage whose transitions were logged already."""
    self.stage[mask] = int(new)
    self.stage_time[mask] = 0.0
    self.via_on[mask] = False
    self.moved_at[mask] = float("inf")  # Set to the tool on the next step.

  def _fail(self, mask: torch.Tensor, reason: str) -> None:
    """A failed attempt: count it and recover (open, rise vertically)."""
    if not bool(mask.any()):
      return
    ids = mask.nonzero().flatten()
    for i in ids.tolist():
      self.logs[i].failures[reason] += 1
      obj_i, key = int(self.target_obj[i]), self._grasp_key[i]
      if obj_i >= 0:
        self.last_failure[i][obj_i] = reason
      if obj_i >= 0 and key is not None:
        self.failed_grasps[i].setdefault(obj_i, set()).add(key)
      if obj_i >= 0 and reason == "slip" and self._grasp_wedge[i]:
        self.wedge_slipped[i].add(obj_i)
    obj = self.target_obj[ids]
    self.attempts[ids, obj.clamp_min(0)] += (obj >= 0).long()
    self._rise_open(mask, reason)

  def _rise_open(self, mask: torch.Tensor, note: str) -> None:
    """Recover: open the gripper and rise vertically to the carry height."""
    self._enter(mask, Stage.RECOVER, note)
    tool_pos, _ = self._tool()
    self.target_pos[mask] = tool_pos[mask]
    self.target_pos[mask, 2] = torch.maximum(tool_pos[mask, 2], self.carry_z[mask])
    self.gripper[mask] = GRIPPER_OPEN

  def why_undelivered(self, i: int, k: int) -> str:
    """Why object k of environment i is not delivered (for reports)."""
    if bool(self.verified[i, k]):
      first = int(failed_condition(task_verdict(self.env))[i, k])
      names = (*CONDITIONS, "none")  # Every condition holds: delivered.
      return f"lost_after_delivery ({names[first]})"
    if not bool(self.done[i]):
      return "timeout"
    if int(self.attempts[i, k]) >= self.cfg.max_attempts:
      return f"attempts_used ({self.last_failure[i].get(k, 'unknown')})"
    pos = self._object_pos()
    if pos[i, k, 0] <= PARKING_X + 0.3 or not bool(self._in_reach(pos)[i, k]):
      return "out_of_reach"
    return "no_feasible_grasp"

  @property
  def done(self) -> torch.Tensor:
    return self.stage == int(Stage.DONE)

  # Planning (CPU replica, parallel over environments).

  def _in_reach(self, pos: torch.Tensor, disc: bool = False) -> torch.Tensor:
    """Object centres [B, K, 3] (env frame) within the planning reach band
    around each environment's arm base (``disc``: or nearer the base) [B, K]."""
    dist = self._base_distance(pos)
    return ((dist >= self.cfg.reach[0]) | disc) & (dist <= self.cfg.reach[1])

  def _base_distance(self, pos: torch.Tensor) -> torch.Tensor:
    """Horizontal distance [B, K] of object centres [B, K, 3] (env frame)
    from each environment's arm base axis."""
    return torch.linalg.vector_norm(pos[..., :2] - self._base_xy.unsqueeze(1), dim=-1)

  def _by_base(self) -> torch.Tensor:
    """Objects lying nearer the arm's base than the reach band [B, K]: the
    upper arm's capsule (54 mm radius about the shoulder) meets an object
    there in nearly every pose, and would reject every plan, but the live
    arm only nudges it. Traced on pair 69, environment 1: a cylinder that
    had slipped and rolled against the base, 81 mm from its axis, put the
    shoulder link 8 mm into it at every grasp of the last object in the
    bin (an L-block, 155 s left), and the environment gave up."""
    return self._base_distance(self._object_pos()) < self.cfg.reach[0]

  def _undelivered_in_reach(
    self, verdict: dict[str, torch.Tensor], disc: bool = False
  ) -> torch.Tensor:
    """Poured, undelivered objects on the table in the arm's reach
    (``_in_reach``) [B, K], but for a placed object whose verdict is
    awaited."""
    pos = self._object_pos()
    checked = torch.zeros_like(self.pour.in_bin)
    pending = self.checking >= 0
    checked[pending, self.checking[pending]] = True
    return (
      self.pour.in_bin
      & ~verdict["delivered"]
      & ~checked
      & (pos[..., 0] > PARKING_X + 0.3)
      & self._in_reach(pos, disc)
    )

  def _unsettled(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    """Environments with a poured, undelivered object still moving within
    the arm's reach, the disc about its base included (where a slip can
    throw an object over the arm) [B]."""
    moving = self._undelivered_in_reach(verdict, disc=True) & ~verdict["slow"]
    return moving.any(-1)

  def _eligible(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    return self._undelivered_in_reach(verdict) & (self.attempts < self.cfg.max_attempts)

  def _renewable(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    """Objects whose attempts are used, which the last-resort search may try
    once more (``_last_resort``)."""
    used = (self.attempts >= self.cfg.max_attempts) & ~self.renewed
    return self._undelivered_in_reach(verdict) & used

  def _last_resort(
    self,
    replica: GraspReplica,
    objects: list[int],
    transit_z,
    arm_q,
    yaw,
    i: int,
    first: PlanResult,
    graze: bool = False,
  ) -> PlanResult:
    """Before an environment gives up: the grasp search with the larger
    budget (``ReplicaCfg.last_resort_checks_per_object``) and the relaxed
    checks (``ReplicaCfg.last_resort_overlap``) over the eligible objects and
    those whose attempts were used (not yet renewed); the time left would
    otherwise go unused. ``graze``: the final search's checks, made when
    that one found nothing (``ReplicaCfg.grazing``). Its counts include
    ``first``'s."""
    checks = replica.cfg.grazing() if graze else replica.cfg.relaxed()
    result = replica.plan(
      objects, transit_z, arm_q, yaw, avoid=self.failed_grasps[i],
      max_checks=replica.cfg.last_resort_checks_per_object, checks=checks,
    )  # fmt: skip
    result.search = "final" if graze else "last"
    result.rejections.update(first.rejections)
    result.checked += first.checked
    result.objects_tried += first.objects_tried
    return result

  def _pushable(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    """Objects a rearrangement may move: poured, undelivered, still inside
    the bin's walls, within their push budget (those whose grasps all failed
    included)."""
    pos = self._object_pos()
    (x0, x1), (y0, y1) = self.geometry.inner_bounds()
    inside = (
      (pos[..., 0] > x0) & (pos[..., 0] < x1) & (pos[..., 1] > y0) & (pos[..., 1] < y1)
    )
    budget = self.pushes.sum(-1, keepdim=True) < self.cfg.max_pushes
    return (
      self.pour.in_bin
      & ~verdict["delivered"]
      & (self.pushes < self.cfg.max_pushes_per_object)
      & budget
      & inside
      & self._in_reach(pos)
    )

  def _plan_rearrangement(
    self, replica: GraspReplica, i: int, pushable: np.ndarray, transit_z: float, arm_q
  ) -> tuple[PushPlan | None, Counter]:
    """The first feasible push over the pushable objects (see
    _SITUATION_ORDER); then, of the objects by a wall not toppled before,
    the first feasible topple."""
    rejections: Counter = Counter()
    exhausted = self.attempts[i].cpu().numpy() >= self.cfg.max_attempts
    order = []
    for k in np.nonzero(pushable)[0].tolist():
      reason = "failed_grasps" if exhausted[k] else object_situation(replica, k)
      top = float(replica.object_triangles(k)[..., 2].max())
      order.append((_SITUATION_ORDER.index(reason), -top, k, reason))
    for *_, k, reason in sorted(order):
      plan, rejected = plan_push(replica, k, reason, transit_z, arm_q, self.cfg.push)
      rejections.update(rejected)
      if plan is not None:
        return plan, rejections
    # Last, a topple of an object by a wall, once per object: at b49c348
    # (pour and object seeds 0 to 15), 5 of 12 moved their object more than
    # 5 mm; tried before other objects' pushes, one took a push's place.
    toppled = self.wall_toppled[i].cpu().numpy()
    for *_, k, reason in sorted(order):
      if reason != "wall" or toppled[k]:
        continue
      plan, rejected = plan_push(
        replica, k, reason, transit_z, arm_q, self.cfg.push, topple_only=True
      )
      rejections.update(rejected)
      if plan is not None:
        return plan, rejections
    return None, rejections

  def _plan(self, ids: list[int], moving: torch.Tensor) -> None:
    """Plan for environments ``ids``; ``moving`` [B]: whether an object
    within reach still moved (``_unsettled``)."""
    verdict = task_verdict(self.env)
    eligible = self._eligible(verdict).cpu().numpy()
    pushable = self._pushable(verdict).cpu().numpy()
    renewable = self._renewable(verdict).cpu().numpy()
    cleared = verdict["bin_cleared"].cpu().numpy()
    data = self.env.sim.data
    qpos = data.qpos.detach().cpu().double().numpy()
    mocap_pos = data.mocap_pos.detach().cpu().double().numpy()
    mocap_quat = data.mocap_quat.detach().cpu().double().numpy()
    _, tool_quat = self._tool()
    tool_rot = matrix_from_quat(tool_quat).cpu().numpy()
    origins = self.env.scene.env_origins.cpu().numpy()
    rim = self.geometry.rim_z
    transit_z = rim + self.cfg.transit_clearance + RG2_PAD_HALF[2]
    by_base = self._by_base().cpu().numpy()

    def plan_one(i: int) -> tuple[PlanResult | None, tuple, float, tuple]:
      if cleared[i]:
        return None, (None, Counter()), 0.0, ((), None)
      start = time.perf_counter()
      replica = self._replica()

      def pose() -> None:
        replica.pose(qpos[i], mocap_pos[i], mocap_quat[i])
        replica.set_aside(np.nonzero(by_base[i])[0].tolist())

      pose()
      arm_q = qpos[i][replica.kin.qpos_adr]
      yaw = float(np.arctan2(tool_rot[i, 1, 0], tool_rot[i, 0, 0]))
      result = replica.plan(
        np.nonzero(eligible[i])[0].tolist(),
        transit_z + origins[i, 2],
        arm_q,
        yaw,
        avoid=self.failed_grasps[i],
        no_wedges=frozenset(self.wedge_slipped[i]),
      )
      push = (None, Counter())
      if result.plan is None:
        push = self._plan_rearrangement(
          replica, i, pushable[i], transit_z + origins[i, 2], arm_q
        )
      if result.plan is None and push[0] is None:
        pose()
        objects = np.nonzero(eligible[i] | renewable[i])[0].tolist()
        result = self._last_resort(
          replica, objects, transit_z + origins[i, 2], arm_q, yaw, i, result
        )
        if result.plan is None:  # The walls may be pressed a little.
          pose()
          result = self._last_resort(
            replica, objects, transit_z + origins[i, 2], arm_q, yaw, i, result,
            graze=True,
          )  # fmt: skip
      facts, follow = (), None
      if result.plan is not None:
        pose()
        follow = _body_roll_axis(replica, result.plan.object_index)
        facts = self._drop_zone_facts(replica, result.plan.object_index, origins[i])
      return result, push, time.perf_counter() - start, (facts, follow)

    results = list(self._pool.map(plan_one, ids))
    dev = self.device
    for i, (result, (push, push_rejections), wall, (facts, follow)) in zip(
      ids, results, strict=True
    ):
      log = self.logs[i]
      log.planning_wall_s += wall
      log.push_rejections.update(push_rejections)
      if result is None:
        log.outcome, log.outcome_time = "bin_cleared", float(self.time[i])
        self._enter(
          torch.arange(self.env.num_envs, device=dev) == i, Stage.DONE, "bin_cleared"
        )
        continue
      log.plans += 1
      log.planned_candidates += result.checked
      log.rejections.update(result.rejections)
      mask = torch.arange(self.env.num_envs, device=dev) == i
      if result.plan is not None or push is not None:
        self._waits[i] = 0
      if result.plan is None and push is not None:
        self._start_push(i, push, torch.tensor(origins[i], device=dev))
        continue
      if result.plan is None and int(self.checking[i]) >= 0:
        self.await_check[i] = True
        continue
      retry = bool(moving[i]) and self._waits[i] < self.cfg.settle_retries
      if result.plan is None and retry:
        self._waits[i] += 1
        self.stage_time[i] = 0.0  # Wait settle_time again.
        self._log(i, None, "nothing feasible while an object moves: wait")
        continue
      if result.plan is None:
        log.outcome, log.outcome_time = "finished", float(self.time[i])
        self.target_obj[i] = -1
        self._enter(mask, Stage.DONE, "no feasible grasp or rearrangement left")
        continue
      plan = result.plan
      if int(self.attempts[i, plan.object_index]) >= self.cfg.max_attempts:
        self.attempts[i, plan.object_index] = self.cfg.max_attempts - 1
        self.renewed[i, plan.object_index] = True
      self._grasp_key[i] = plan.key
      self._grasp_wedge[i] = self.cfg.replica.is_wedge(plan.taper)
      origin = torch.tensor(origins[i], dtype=torch.float32, device=dev)
      self.target_obj[i] = plan.object_index
      self.planned_at[i] = self._object_pos()[i, plan.object_index]
      self.follow[i] = follow is not None
      axes = np.zeros((2, 3)) if follow is None else np.stack(follow)
      self.follow_axis_w[i], self.follow_axis[i] = torch.tensor(
        axes, dtype=torch.float32, device=dev
      )
      self.followed[i] = 0.0
      self.grasp_pos[i] = (
        torch.tensor(plan.position_w, dtype=torch.float32, device=dev) - origin
      )
      self.grasp_quat[i] = quat_from_matrix(
        torch.tensor(plan.rotation_w, dtype=torch.float32, device=dev).unsqueeze(0)
      )[0]
      self.carry_z[i] = max(
        transit_z, rim + self.cfg.carry_clearance + plan.grasp_above_bottom
      )
      self.release_z[i] = max(
        self.cfg.min_release_tool_z, self.cfg.release_gap + plan.grasp_above_bottom
      )
      zone_top, height, radius = facts
      low, high = float(self.release_z[i]), float(self.carry_z[i])
      clear = zone_top + self.cfg.zone_clearance
      above = float(plan.grasp_above_bottom)
      self.approach_z[i] = min(high, max(low, clear + above))
      released_top = self.cfg.release_gap + height
      pads_clear = max(clear, released_top + self.cfg.zone_clearance)
      self.retreat_z[i] = min(high, max(low, pads_clear + RG2_PAD_HALF[2]))
      self.hold_radius[i] = radius
      self.target_pos[i] = self.grasp_pos[i]
      self.target_pos[i, 2] = transit_z
      self.target_quat[i] = self.grasp_quat[i]
      # Pre-shaped: normalized position of the planned opening.
      self.open_command[i] = _command(plan.open_width)
      close_width = max(0.0, plan.width - 2 * self.cfg.grip_squeeze)
      self.close_command[i] = _command(close_width)
      self.release_width[i] = min(
        plan.open_width, plan.width + 2 * self.cfg.release_margin
      )
      self.release_command[i] = _command(self.release_width[i])
      self.gripper[i] = self.open_command[i]
      self._enter(
        mask,
        Stage.MOVE_ABOVE,
        f"grasp {self.names[plan.object_index]} width {plan.width * 1000:.1f} mm "
        f"tilt {plan.tilt_deg:.0f} deg level {plan.level} strip {plan.strip} "
        f"open {plan.open_width * 1000:.0f} mm patch {plan.patch:.2f} "
        f"com {plan.com_distance * 1000:.0f} mm "
        f"lever {plan.com_lever * 1000:.1f} mm below {plan.com_below * 1000:.1f} mm "
        f"taper {plan.taper[0]:.2f}/{plan.taper[1]:.2f} "
        f"(candidate {plan.candidate_rank}, {result.checked} checked, "
        f"{result.search} search)",
      )

  def _drop_zone_facts(
    self, replica: GraspReplica, k: int, origin: np.ndarray
  ) -> tuple[float, float, float]:
    """The top of the drop zone's tallest other object (env frame, the table
    if none), and object k's height and horizontal reach about its centre,
    as the replica is posed."""
    drop = np.asarray(DROP_DESTINATION) + origin[:2]
    top = 0.0
    for j, geoms in enumerate(replica.object_geoms):
      centre = replica.data.xpos[replica.model.geom_bodyid[geoms[0]]]
      if j != k and np.linalg.norm(centre[:2] - drop) <= _ZONE_RADIUS:
        top = max(top, float(replica.object_triangles(j)[..., 2].max()) - origin[2])
    points = replica.object_triangles(k).reshape(-1, 3)
    centre = replica.data.xpos[replica.model.geom_bodyid[replica.object_geoms[k][0]]]
    radius = float(np.linalg.norm(points[:, :2] - centre[:2], axis=-1).max())
    return float(top), float(np.ptp(points[:, 2])), radius

  def _route(
    self,
    mask: torch.Tensor,
    tool_pos: torch.Tensor,
    offset: torch.Tensor,
    margin: torch.Tensor,
    level_z: torch.Tensor,
    leaving: bool,
  ) -> None:
    """A via point for the tool's straight move to target_pos: a point
    ``offset`` from the tool (the held object's centre, or the tool itself)
    stays at ``level_z`` while within ``margin`` of the bin's walls; the
    move leaves the bin there (``leaving``), or enters it."""
    if not bool(mask.any()):
      return
    a, b = tool_pos[mask, :2], self.target_pos[mask, :2]
    lo = self._bin_lo - margin[mask, None] - offset[mask]
    hi = self._bin_hi + margin[mask, None] - offset[mask]
    s_in, s_out = segment_box_span(a, b, lo, hi)
    s = s_out if leaving else s_in
    need = s_in <= s_out
    if leaving:
      # A target within the margin (a drop position beside the bin): level
      # until over it, then down (measured: a diagonal toward one 80 mm
      # from the bin's outer wall pressed the held object on the wall until
      # the carry timed out).
      s = s.clamp_max(1.0)
      need &= s > 0.0
    else:
      need &= s < 1.0
      # A move that starts within the margin (a retreat beside the bin)
      # rises there first (s = 0): measured, a diagonal from the drop zone
      # pressed the hand against the bin's wall until the move timed out.
      need &= tool_pos[mask, 2] < level_z[mask] - 0.005
    via = torch.cat([a + s[:, None] * (b - a), level_z[mask, None]], dim=-1)
    ids = mask.nonzero().flatten()[need]
    self.via[ids] = via[need]
    self.via_on[ids] = True

  def _keep_off_base(self, mask: torch.Tensor, tool_pos: torch.Tensor) -> None:
    """A via point for a straight move to target_pos (one not routed over
    the bin's walls) that would pass nearer the arm's base axis than
    ``route_radius``: the segment's nearest point, pushed out to that
    radius, at the higher of the two ends. Measured (pour and object
    seed 6, environment 1): a carry from an object that had landed on the
    table beside the base passed 0.1 m from its axis, the arm went through
    the shoulder's singularity onto its other branch, the carry timed out,
    and from that branch no grasp or push was feasible for the object left
    in the bin."""
    m = mask & ~self.via_on
    if not bool(m.any()):
      return
    base = self._base_xy[m]
    a, b = tool_pos[m, :2] - base, self.target_pos[m, :2] - base
    ab = b - a
    s = (-(a * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)).clamp(0.0, 1.0)
    near = a + s[:, None] * ab
    dist = torch.linalg.vector_norm(near, dim=-1)
    # Straight over the axis: out across the move.
    across = torch.stack([-ab[:, 1], ab[:, 0]], dim=-1)
    out = torch.where(
      (dist > 1e-6)[:, None],
      near / dist.clamp_min(1e-6)[:, None],
      across / torch.linalg.vector_norm(across, dim=-1).clamp_min(1e-9)[:, None],
    )
    z = torch.maximum(tool_pos[m, 2], self.target_pos[m, 2])
    via = torch.cat([base + self.cfg.route_radius * out, z[:, None]], dim=-1)
    need = dist < self.cfg.route_radius
    ids = m.nonzero().flatten()[need]
    self.via[ids] = via[need]
    self.via_on[ids] = True

  def _start_push(self, i: int, plan: PushPlan, origin: torch.Tensor) -> None:
    dev = self.device
    k = plan.object_index
    self.target_obj[i] = k
    self.pushes[i, k] += 1
    self.wall_toppled[i, k] |= plan.kind == "topple" and plan.reason == "wall"
    self._push[i] = plan
    obj = self._objects[k].data
    self._push_from[i] = (
      obj.root_link_pos_w[i].cpu().numpy().copy(),
      obj.root_link_quat_w[i].cpu().numpy().copy(),
    )
    start = torch.tensor(plan.start_w, dtype=torch.float32, device=dev) - origin
    self.push_end[i] = (
      torch.tensor(plan.end_w, dtype=torch.float32, device=dev) - origin
    )
    self.target_pos[i] = start
    self.target_pos[i, 2] = plan.transit_z - float(origin[2])
    self.grasp_pos[i] = start  # Where push_down goes.
    self.target_quat[i] = quat_from_matrix(
      torch.tensor(plan.rotation_w, dtype=torch.float32, device=dev).unsqueeze(0)
    )[0]
    self.carry_z[i] = plan.transit_z - float(origin[2])
    self.gripper[i] = GRIPPER_CLOSED
    self.push_holds[i] = plan.kind == "roll"
    d = plan.direction_w
    self._enter(
      torch.arange(self.env.num_envs, device=dev) == i,
      Stage.PUSH_ABOVE,
      f"rearrange {self.names[k]} ({plan.reason}): {plan.kind} toward "
      f"({d[0]:+.2f}, {d[1]:+.2f}) over "
      f"{np.linalg.norm(plan.end_w - plan.start_w) * 1000:.0f} mm",
    )

  def _finish_push(self, i: int) -> str:
    """Log a finished rearrangement with its outcome; the object gets a
    fresh grasp search (and one more attempt if its attempts were used)."""
    plan, (pos0, quat0) = self._push[i], self._push_from[i]
    k = plan.object_index
    obj = self._objects[k].data
    pos1 = obj.root_link_pos_w[i].cpu().numpy()
    quat1 = obj.root_link_quat_w[i].cpu().numpy()
    moved = float(np.linalg.norm(pos1 - pos0))
    turned = float(np.degrees(2 * np.arccos(min(1.0, abs(float(quat0 @ quat1))))))
    self.logs[i].rearrangements.append(
      {
        "t": round(float(self.time[i]), 3),
        "object": self.names[k],
        "reason": plan.reason,
        "kind": plan.kind,
        "direction": [round(float(x), 3) for x in plan.direction_w[:2]],
        "moved_mm": round(moved * 1000, 1),
        "turned_deg": round(turned, 1),
      }
    )
    self.failed_grasps[i].pop(k, None)
    self.wedge_slipped[i].discard(k)
    if int(self.attempts[i, k]) >= self.cfg.max_attempts:
      self.attempts[i, k] = self.cfg.max_attempts - 1
    self._push[i] = None
    return f"rearranged: moved {moved * 1000:.0f} mm, turned {turned:.0f} deg"

  def _choose_drop(self, ids: torch.Tensor, now: _Step, rot: torch.Tensor) -> None:
    """The free drop position nearest the bin (the shortest carry and way
    back), ``knock_margin`` inside the delivery radius; free: the held
    object there, and the fingers opened to the release width, keep
    ``drop_gap`` from the footprint of every other object near the zone,
    the held object and the fingers turned by ``rot`` [n, 2, 2] about the
    tool (the carry's turn). When none is free, the position with the most
    clearance."""
    held, others, counted = self._footprints(ids, now, rot)
    sep = separations(self._drop_candidates, held, others, self._dirs)
    index, _ = choose(sep, counted, self._drop_cost, self.cfg.drop_gap)
    self.drop_xy[ids] = self._drop_candidates[index]

  def _footprints(
    self, ids: torch.Tensor, now: _Step, rot: torch.Tensor
  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Supports for ``separations``: the held object's and the released
    fingers' parts about the object's centre, turned by ``rot`` [n, 2, 2]
    [n, H, U], every object's parts [n, M, U], and which of those count
    [n, M] (other objects near the zone)."""
    dirs, n = self._dirs, len(ids)
    turned = (dirs @ rot)[:, None]  # R^T u per direction [n, 1, U, 2]
    shapes = [object_geom_points(self.env, name) for name in self.names]
    every, every_turned = (
      torch.cat([supports(p[ids, ..., :2], r[None], d) for p, r in shapes], 1)
      for d in (dirs, turned)
    )  # [n, M, U]
    owner, target = self._part_owner, self.target_obj[ids]
    centre = now.obj_pos[ids, :2]
    mine = owner[None] == target[:, None]  # [n, M]
    # About the held object's centre: h_{R (P - c)}(u) = h_P(R^T u) - c . R^T u.
    about = every_turned - (turned[:, 0] @ centre[..., None]).mT
    # Every env's held parts, padded with repeats of its last part.
    step = torch.arange(int(self._part_count.max()), device=self.device)
    last = (self._part_count[target] - 1)[:, None]
    picked = self._part_start[target][:, None] + torch.minimum(step, last)
    held = about[torch.arange(n, device=self.device)[:, None], picked]
    fall = self._fall_radius(ids)[:, None, None].expand(-1, 1, dirs.shape[0])
    held = torch.cat([held, self._finger_supports(ids, now, centre, turned), fall], 1)
    pos = self._object_pos()[ids, :, :2]
    near = (
      torch.linalg.vector_norm(pos - self._drop_centre, dim=-1) < self.cfg.zone_watch
    )
    counted = near[:, owner] & ~mine
    return held, every, counted

  def _fall_radius(self, ids: torch.Tensor) -> torch.Tensor:
    """``fall_radius`` of the objects held in environments ``ids`` [n]."""
    return fall_radius(
      self.env.sim.data.geom_xmat[ids],
      self._capsule_geom,
      self._capsule_length,
      self.target_obj[ids],
      self.cfg.standing_tilt,
    )

  def _finger_supports(
    self, ids: torch.Tensor, now: _Step, centre: torch.Tensor, dirs: torch.Tensor
  ) -> torch.Tensor:
    """The fingers' footprints (pads and links) [n, 2 G, U] about the held
    object's centre, opened to the release width, as the tool is now posed,
    on ``dirs`` (``supports``)."""
    world = self._finger_points(
      now.tool_pos[ids], now.tool_quat[ids], self.release_width[ids]
    )
    points = world[..., :2] - centre[:, None, None]
    return supports(points, torch.zeros(points.shape[:2], device=self.device), dirs)

  def _finger_points(
    self, tool_pos: torch.Tensor, tool_quat: torch.Tensor, width: torch.Tensor
  ) -> torch.Tensor:
    """Corners of the fingers' collision boxes (pads and links) [n, 2 G, 8, 3],
    env frame, the tool posed at ``tool_pos``, ``tool_quat`` [n, ...] and the
    fingers opened to ``width`` [n] [m]."""
    corners = self._finger_corners  # [2 G, 8, 3] finger frames, at the inner faces
    local = corners.expand(len(width), *corners.shape).clone()
    side = corners[..., 0].mean(-1, keepdim=True).sign()  # Outward, per part [2 G, 1].
    local[..., 0] += side * 0.5 * width[:, None, None]
    local[..., 2] -= RG2_TCP_OFFSET
    rot = matrix_from_quat(tool_quat)  # [n, 3, 3]
    return torch.einsum("nij,ngpj->ngpi", rot, local) + tool_pos[:, None, None]

  # One step.

  def act(self) -> torch.Tensor:
    """Actions [num_envs, 7] (6-D Cartesian delta, gripper) for the next step."""
    now = self._read()
    self._hold(now)
    self._motion_timeouts(now)
    self._push_timeouts(now)
    self._target_moved(now)
    # One transition per environment and step: decide on this snapshot.
    now.stage = self.stage.clone()
    now.arrived &= ~now.timed_out & ~now.slipped
    now.placed &= ~now.timed_out & ~now.slipped
    self._approach(now)
    self._close(now)
    self._lift(now)
    self._carry(now)
    self._lower(now)
    self._release(now)
    self._verify(now)
    self._check_placements(now)
    self._recover(now)
    self._rearrange(now)
    self._plan_when_settled(now)
    return self._actions(now)

  def _read(self) -> _Step:
    """The environment as the step finds it: the delivery verdict, the tool
    and the target object, and which motions arrived, timed out or stalled."""
    verdict = task_verdict(self.env)
    tool_pos, tool_quat = self._tool()
    stage = self.stage.clone()
    arrived, placed, turned = self._arrived(tool_pos, tool_quat)
    turning = self._turning(tool_quat)
    in_motion = torch.zeros_like(arrived)
    for s in _MOTION:
      in_motion |= stage == int(s)
    timed_out = in_motion & (
      ((self.stage_time > self.cfg.stage_timeout) & ~turning)
      | (self.stage_time > self.cfg.turn_timeout)
    )
    halted = self._stuck(tool_pos) & ~arrived & ~turning & ~timed_out
    rows, obj, obj_pos, rel = self._target_object(tool_pos, tool_quat)
    return _Step(
      verdict=verdict,
      tool_pos=tool_pos,
      tool_quat=tool_quat,
      stage=stage,
      rows=rows,
      obj=obj,
      obj_pos=obj_pos,
      rel=rel,
      opening=self._gripper_term.opening,
      arrived=arrived,
      placed=placed,
      turned=turned,
      timed_out=timed_out,
      # Only a descent (the open fingers rest on the pile) and a lowering (the
      # held object rests on something) stall: a lift still pulling on a
      # wedged object may free it (measured: one took 6.4 s and was delivered).
      blocked=halted & (stage == int(Stage.DESCEND)),
      set_down=halted & (stage == int(Stage.LOWER)),
      slipped=torch.zeros_like(arrived),  # Set by _hold.
    )

  def _arrived(
    self, tool_pos: torch.Tensor, tool_quat: torch.Tensor
  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tools at their targets within the tolerances, no via point pending;
    at the target position only, turned within ``descent_turn`` (``placed``);
    turned within ``rot_tolerance`` [B] each."""
    pos_err = torch.linalg.vector_norm(self.target_pos - tool_pos, dim=-1)
    rot_err = torch.linalg.vector_norm(
      axis_angle_from_quat(quat_mul(self.target_quat, quat_inv(tool_quat))), dim=-1
    )
    placed = (pos_err < self.cfg.pos_tolerance) & ~self.via_on
    turned = rot_err < self.cfg.rot_tolerance
    return placed & turned, placed & (rot_err < self.cfg.descent_turn), turned

  def _turning(self, tool_quat: torch.Tensor) -> torch.Tensor:
    """Hands whose commanded turn is not done yet (more than one step's turn
    from the target).

    A motion times out only once its commanded turn is done: a half turn of
    the hand alone takes 9 s at the task's 1 degree per step (measured: a
    roll whose hand turned 172 degrees timed out, tool on target, still
    turning)."""
    has = self.arm.has_target
    commanded = torch.where(has.unsqueeze(-1), self.arm.desired_quat_w, tool_quat)
    return (
      torch.linalg.vector_norm(
        axis_angle_from_quat(quat_mul(self.target_quat, quat_inv(commanded))), dim=-1
      )
      > self.cfg.turn_done
    )

  def _stuck(self, tool_pos: torch.Tensor) -> torch.Tensor:
    """Tools that moved less than ``stall_distance`` for ``stall_time``;
    notes where each tool last moved that far."""
    moved = (
      torch.linalg.vector_norm(tool_pos - self.moved_at, dim=-1)
      > self.cfg.stall_distance
    )
    self.moved_at[moved] = tool_pos[moved]
    self.moved_time[moved] = self.stage_time[moved]
    return self.stage_time - self.moved_time > self.cfg.stall_time

  def _target_object(
    self, tool_pos: torch.Tensor, tool_quat: torch.Tensor
  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Environment rows, the target object of each (0 where none), its
    centre (env frame) and that centre in the tool frame."""
    rows = torch.arange(self.env.num_envs, device=self.device)
    obj = self.target_obj.clamp_min(0)
    obj_pos = self._object_pos()[rows, obj]
    tool_rot = matrix_from_quat(tool_quat)
    rel = torch.einsum("bji,bj->bi", tool_rot, obj_pos - tool_pos)  # Tool frame.
    return rows, obj, obj_pos, rel

  def _hold(self, now: _Step) -> None:
    """Press the held object (and one being closed on, once the pads are on
    it) with its grip effort; a slip while it is held fails the attempt."""
    at = now.at
    held = at(Stage.LIFT) | at(Stage.CARRY) | at(Stage.LOWER)
    closing = at(Stage.CLOSE) & (self.stage_time >= self.cfg.grip_after)
    self._grip(held | closing, now.opening)
    now.slipped = held & (
      torch.linalg.vector_norm(now.rel - self.hold_offset, dim=-1)
      > self.cfg.slip_tolerance
    )
    self._fail(now.slipped, "slip")
    now.blocked &= ~now.slipped
    now.set_down &= ~now.slipped

  def _motion_timeouts(self, now: _Step) -> None:
    """A grasp's motion that timed out, or a descent that stalled, fails the
    attempt; a recovery or a retreat that timed out plans again."""
    at = now.at
    grasping = ~(at(Stage.RECOVER) | at(Stage.RETREAT))
    for s in (Stage.MOVE_ABOVE, Stage.DESCEND, Stage.LIFT, Stage.CARRY, Stage.LOWER):
      self._fail(grasping & now.timed_out & at(s), f"timeout_{STAGE_NAMES[s]}")
    self._fail(now.blocked, "stall_descend")
    now.timed_out |= now.blocked
    stalled = now.timed_out & (at(Stage.RECOVER) | at(Stage.RETREAT))
    self._enter(stalled, Stage.PLAN, "timeout")

  def _push_timeouts(self, now: _Step) -> None:
    """A push that timed out (the object or the pile stopped it) rises; a
    rise that timed out ends the rearrangement."""
    pushing = torch.zeros_like(now.timed_out)
    for s in _PUSHING:
      pushing |= now.at(s)
    jammed = now.timed_out & pushing
    self.target_pos[jammed, :2] = now.tool_pos[jammed, :2]
    self.target_pos[jammed, 2] = self.carry_z[jammed]
    self._enter(jammed, Stage.PUSH_UP, "push stalled")
    lost = now.timed_out & now.at(Stage.PUSH_UP)
    for i in lost.nonzero().flatten().tolist():
      self._log(i, Stage.PLAN, self._finish_push(i) + " (timeout)")
    self._enter_quiet(lost, Stage.PLAN)

  def _target_moved(self, now: _Step) -> None:
    """An approach follows a rolling round target (``follow_distance``, or
    ``table_follow_distance`` outside the bin) within the arm's reach;
    one whose target moved otherwise, more than ``moved_tolerance`` since
    planning, rises (open) and plans again; no attempt is counted."""
    approaching = now.at(Stage.MOVE_ABOVE) | now.at(Stage.DESCEND)
    approaching &= self.target_obj >= 0
    drift = (now.obj_pos - self.planned_at)[:, :2]
    shift = torch.linalg.vector_norm(drift, dim=-1)
    planned = self.planned_at[:, :2]
    on_table = ((planned < self._bin_lo) | (planned > self._bin_hi)).any(-1)
    limit = torch.where(
      on_table, self.cfg.table_follow_distance, self.cfg.follow_distance
    )
    in_reach = self._in_reach(now.obj_pos.unsqueeze(1))[:, 0]
    follow = approaching & self.follow & (shift <= limit) & in_reach
    follow &= self._axis_kept(now)
    step = torch.where(follow.unsqueeze(-1), drift - self.followed, 0.0)
    self.grasp_pos[:, :2] += step
    self.target_pos[:, :2] += step
    self.followed += step
    m = approaching & (shift > self.cfg.moved_tolerance) & ~follow
    if not bool(m.any()):
      return
    self._rise_open(m, "target moved")
    now.arrived &= ~m

  def _axis_kept(self, now: _Step) -> torch.Tensor:
    """Whether each target's roll axis has turned about the vertical by at
    most ``follow_turn`` since planning [B] (a sphere's always has)."""
    quat = torch.stack([o.data.root_link_quat_w for o in self._objects], 1)
    axis = torch.einsum(
      "bij,bj->bi", matrix_from_quat(quat[now.rows, now.obj]), self.follow_axis
    )
    planned = self.follow_axis_w[:, :2]
    sphere = ~self.follow_axis.any(-1)
    kept = (axis[:, :2] * planned).sum(-1).abs() >= math.cos(self.cfg.follow_turn)
    return sphere | kept

  def _approach(self, now: _Step) -> None:
    """Above the grasp (its turn may still end in the descent's first part,
    ``_descent_floor``): descend to it; at the grasp: close."""
    m = now.at(Stage.MOVE_ABOVE) & now.placed
    self.target_pos[m] = self.grasp_pos[m]
    self.turn_pending[m] = ~now.turned[m]
    # Once turned, a descent is not held up again (a contact may turn it).
    self.turn_pending &= ~now.turned
    self._enter(m, Stage.DESCEND)
    m = now.at(Stage.DESCEND) & now.arrived
    self.gripper[m] = self.close_command[m]
    self._enter(m, Stage.CLOSE)

  def _close(self, now: _Step) -> None:
    """Closed for ``close_time``: lift what is held, or fail an empty grasp."""
    m = now.at(Stage.CLOSE) & (self.stage_time >= self.cfg.close_time)
    # Nothing held: the robot does not touch the target (simulator contacts),
    # or the fingers closed to within a millimetre of fully closed.
    touching = ~now.verdict["released"][now.rows, now.obj]
    closed = _command(self.cfg.empty_margin)
    empty = m & (~touching | (now.opening < closed))
    self._fail(empty, "empty_grasp")
    m &= ~empty
    self.hold_offset[m] = now.rel[m]
    self.target_pos[m, 2] = self.carry_z[m]
    self._enter(m, Stage.LIFT)

  def _lift(self, now: _Step) -> None:
    """Lifted (or risen ``blend_clearance`` above the rim and the pile, from
    where the carry rises on to its level over the walls): carry the object
    over a free drop slot, level while it is over the bin's walls, the hand
    turning with the arm's swing."""
    m = now.at(Stage.LIFT) & (now.arrived | self._above_pile(now))
    if not bool(m.any()):
      return
    ids = m.nonzero().flatten()
    turn = self._carry_turn(now.tool_pos)
    rot = _rotation_2d(turn)
    # The object's centre from the tool, as the turn will leave it.
    held_at = (rot @ (now.obj_pos - now.tool_pos)[:, :2, None])[..., 0]
    self._choose_drop(ids, now, rot[ids])
    # Put the object's centre (not the tool) over the slot.
    self.target_pos[ids, :2] = self.drop_xy[ids] - held_at[ids]
    self.target_pos[ids, 2] = self.approach_z[ids]
    up = torch.tensor([0.0, 0.0, 1.0], device=self.device).expand(len(ids), 3)
    self.target_quat[ids] = quat_mul(
      quat_from_angle_axis(turn[ids], up), self.target_quat[ids]
    )
    self._enter(m, Stage.CARRY)
    # On its way the turn swings the object's centre about the tool axis.
    sweep = torch.linalg.vector_norm(held_at, dim=-1) * 2 * (turn.abs() / 2).sin()
    margin = self.hold_radius + self.cfg.route_margin + sweep
    self._route(m, now.tool_pos, held_at, margin, self.carry_z, leaving=True)
    self._keep_off_base(m, now.tool_pos)

  def _pile_top(self, now: _Step) -> torch.Tensor:
    """The bin's rim or the top of its highest object other than the target
    (any object whose centre lies within ``route_margin`` of the bin's
    walls), whichever is higher, env frame [B] [m]; read once per step
    (``now.pile_top``)."""
    if now.pile_top is not None:
      return now.pile_top
    top = torch.full_like(self.stage_time, self.geometry.rim_z)
    pos = self._object_pos()[..., :2]
    lo, hi = self._bin_lo - self.cfg.route_margin, self._bin_hi + self.cfg.route_margin
    near = ((pos >= lo) & (pos <= hi)).all(-1)
    for k, name in enumerate(self.names):
      other = near[:, k] & (self.target_obj != k)
      if bool(other.any()):
        high = object_bounds(self.env, name)[1][:, 2]
        top = torch.where(other, torch.maximum(top, high), top)
    now.pile_top = top
    return top

  def _fingers_lowest(self, now: _Step) -> torch.Tensor:
    """The fingers' lowest point (pads and links, as the hand is posed and
    opened now), env frame [B] [m]."""
    fingers = self._finger_points(now.tool_pos, now.tool_quat, _width(now.opening))
    return fingers[..., 2].flatten(1).amin(1)

  def _lowest(self, now: _Step, envs: torch.Tensor) -> torch.Tensor:
    """The lowest point of the hand (fingers as opened now) and, in a lift,
    of the held object, env frame [B] [m] (``envs`` [B], a mask)."""
    low = self._fingers_lowest(now)
    held = envs & now.at(Stage.LIFT)
    return torch.where(held, torch.minimum(low, self._held_bottom(now, held)), low)

  def _above_pile(self, now: _Step) -> torch.Tensor:
    """Lifts whose object and hand are ``blend_clearance`` above the rim and
    the pile (``_pile_top``) [B]."""
    lifting = now.at(Stage.LIFT) & ~now.timed_out & ~now.slipped
    if not bool(lifting.any()):
      return lifting
    clear = self._lowest(now, lifting) >= self._pile_top(now) + self.cfg.blend_clearance
    return lifting & clear

  def _descent_floor(self, now: _Step) -> torch.Tensor:
    """Descents still turning (``descent_turn``): the lowest tool height [B]
    at which the hand stays ``blend_clearance`` above the rim and the pile
    (``_pile_top``) until turned; -inf elsewhere."""
    floor = torch.full_like(self.stage_time, -math.inf)
    turning = self.turn_pending & (self.stage == int(Stage.DESCEND))
    if bool(turning.any()):
      above = now.tool_pos[:, 2] - self._fingers_lowest(now)
      top = self._pile_top(now) + self.cfg.blend_clearance + above
      floor = torch.where(turning, top, floor)
    return floor

  def _carry_turn(self, tool_pos: torch.Tensor) -> torch.Tensor:
    """The hand's turn about the vertical over a carry [B] [rad]: the arm's
    swing about its base axis from the tool to the drop destination (so the
    last wrist joint keeps its position), less a turn of the joint back
    toward zero of up to the swing less the drop zone's bearing spread.

    Every joint follows its IK step at most 0.5 rad/s, so a move takes as
    long as its largest joint change, the base's swing at the least. A hand
    that kept its yaw turned the wrist by the swing on the carry and back
    on the return plus the next grasp's yaw change: traced on pour and
    object seeds 0 and 3, the moves to a grasp that turned the wrist 90 to
    145 degrees (swinging the base 5 to 60) took 3.2 to 5.3 s."""
    swing = _swing(tool_pos[:, :2] - self._base_xy, self._drop_centre - self._base_xy)
    room = (swing.abs() - self._zone_spread).clamp_min(0.0)
    wrist = self.env.scene[ROBOT].data.joint_pos[:, self._wrist_joint]
    back = torch.maximum(torch.minimum(-wrist, room), -room)
    return swing - back

  def _carry(self, now: _Step) -> None:
    """Over the drop slot: lower the object to just above the table."""
    m = now.at(Stage.CARRY) & now.arrived
    self.target_pos[m, 2] = self.release_z[m]
    self._enter(m, Stage.LOWER)

  def _held_bottom(self, now: _Step, envs: torch.Tensor) -> torch.Tensor:
    """The lowest point of the object each of ``envs`` [B] (a mask) holds,
    env frame [B] [m] (0 elsewhere): the bounds of those objects only."""
    low = torch.zeros(len(envs), device=self.device)
    for k in now.obj[envs].unique().tolist():
      mine = envs & (now.obj == k)
      low = torch.where(mine, object_bounds(self.env, self.names[k])[0][:, 2], low)
    return low

  def _lowered(self, now: _Step) -> torch.Tensor:
    """Lowerings whose held object's lowest point is ``release_gap`` above the
    table, as the object is held now, or whose fingers' lowest point is
    ``finger_clearance`` above it, whichever comes first (within
    ``release_tolerance``); the lowering's target follows the hold [B]."""
    lowering = now.at(Stage.LOWER)
    if not bool(lowering.any()):
      return lowering
    finger_above = self._fingers_lowest(now) - self.cfg.finger_clearance
    held_above = self._held_bottom(now, lowering) - self.cfg.release_gap
    above = torch.minimum(held_above, finger_above)
    self.target_pos[:, 2] = torch.where(
      lowering, now.tool_pos[:, 2] - above, self.target_pos[:, 2]
    )
    return lowering & (above.abs() <= self.cfg.release_tolerance)

  def _lower(self, now: _Step) -> None:
    """Lowered, or set down by a stalled lowering: open the gripper."""
    # Release a still object: the carry's diagonal ends just above the
    # release point and a swinging capsule let go rolls off (measured).
    slow = now.verdict["slow"][now.rows, now.obj]
    still = slow | (self.stage_time >= self.cfg.release_settle)
    m = now.at(Stage.LOWER) & ((self._lowered(now) & still) | now.set_down)
    self.gripper[m] = now.opening[m]
    self._enter(m, Stage.RELEASE)

  def _release(self, now: _Step) -> None:
    """Relaxed for ``release_relax``, then opening at ``release_open_speed``
    (on into the retreat) until the robot no longer touches the object
    (``release_open`` at the least) or ``release_time``: retreat upward."""
    m = now.at(Stage.RELEASE) & (self.stage_time >= self.cfg.release_relax)
    # The opening ramps (also while retreating) up to the release width.
    step = 2.0 * self.cfg.release_open_speed * self.env.step_dt / RG2_MAX_OPENING
    m |= now.at(Stage.RETREAT) & (self.gripper < self.release_command)
    ramp = torch.minimum(self.gripper + step, self.release_command)
    self.gripper[m] = torch.maximum(self.gripper, ramp)[m]  # Never closing.
    opened = self.stage_time >= self.cfg.release_relax + self.cfg.release_open
    let_go = opened & now.verdict["released"][now.rows, now.obj]
    m = now.at(Stage.RELEASE) & (let_go | (self.stage_time >= self.cfg.release_time))
    self.target_pos[m, 2] = self.retreat_z[m]
    self._enter(m, Stage.RETREAT)

  def _verify(self, now: _Step) -> None:
    """Retreated: plan again at once and await the placed object's verdict
    meanwhile (``_check_placements``)."""
    m = now.at(Stage.RETREAT) & now.arrived
    self.checking[m] = now.obj[m]
    self.check_time[m] = 0.0
    self._enter(m, Stage.PLAN, "placed")

  def _check_placements(self, now: _Step) -> None:
    """A placed object delivered (0.2 s after the retreat at the earliest)
    is verified; one still undelivered ``verify_time`` after it costs an
    attempt, and is verified when it is delivered later (it came to rest
    in the zone)."""
    late = self.unverified & now.verdict["delivered"] & ~self.verified
    if bool(late.any()):
      self.verified |= late
      self.unverified &= ~late
      for i, k in late.nonzero().tolist():
        self.logs[i].delivery_times.append(round(float(self.time[i]), 3))
        self._log(i, None, "delivered after its placement failed", obj=k)
    pending = self.checking >= 0
    if not bool(pending.any()):
      return
    obj = self.checking.clamp_min(0)
    delivered = now.verdict["delivered"][now.rows, obj]
    ok = pending & delivered & (self.check_time >= _VERIFY_AFTER)
    self.verified[now.rows[ok], obj[ok]] = True
    for i in ok.nonzero().flatten().tolist():
      self.logs[i].delivery_times.append(round(float(self.time[i]), 3))
    bad = pending & ~delivered & (self.check_time >= self.cfg.verify_time)
    if bool(bad.any()):
      first = failed_condition(now.verdict)[now.rows, obj]
      for i in bad.nonzero().flatten().tolist():
        reason = f"placement_{CONDITIONS[int(first[i])]}"
        self.logs[i].failures[reason] += 1
        self.attempts[i, obj[i]] += 1
        self.unverified[i, obj[i]] = True
        self._log(i, None, f"placement failed: {reason}", obj=int(obj[i]))
    self.checking[ok | bad] = -1
    self.await_check[ok | bad] = False

  def _recover(self, now: _Step) -> None:
    """Risen after a failure: plan again."""
    self._enter(now.at(Stage.RECOVER) & now.arrived, Stage.PLAN)

  def _rearrange(self, now: _Step) -> None:
    """A push's moves: down beside the object, along the push, back up (a
    roll once its object is still), then plan again."""
    m = now.at(Stage.PUSH_ABOVE) & now.arrived
    self.target_pos[m] = self.grasp_pos[m]
    self._enter(m, Stage.PUSH_DOWN)
    m = now.at(Stage.PUSH_DOWN) & now.arrived
    self.target_pos[m] = self.push_end[m]
    self._enter(m, Stage.PUSH)
    # A rolled object barely slows by itself (rolling friction 0.1 mm): the
    # pads stay on it, pressing, until it is still, then rise.
    rolling = self.push_holds & ~now.verdict["slow"][now.rows, now.obj]
    m = now.at(Stage.PUSH) & now.arrived & ~rolling
    self.target_pos[m, 2] = self.carry_z[m]
    self._enter(m, Stage.PUSH_UP)
    m = now.at(Stage.PUSH_UP) & now.arrived
    for i in m.nonzero().flatten().tolist():
      self._log(i, Stage.PLAN, self._finish_push(i))
    self._enter_quiet(m, Stage.PLAN)

  def _plan_when_settled(self, now: _Step) -> None:
    """Plan for the environments waiting to, once the objects within reach
    are still (or ``settle_time`` has passed); a new move into the bin keeps
    the open hand level over its walls."""
    moving = self._unsettled(now.verdict)
    settled = ~moving | (self.stage_time >= self.cfg.settle_time)
    # Nothing else to do while a placement's verdict is awaited: wait for it
    # (a failed placement makes its object eligible again).
    idle = ~self._eligible(now.verdict).any(-1) | self.await_check
    settled &= ~((self.checking >= 0) & idle)
    plan_ids = (now.at(Stage.PLAN) & settled).nonzero().flatten().tolist()
    if not plan_ids:
      return
    self._plan(plan_ids, moving)
    m = (self.stage == int(Stage.MOVE_ABOVE)) | (self.stage == int(Stage.PUSH_ABOVE))
    m &= self.stage_time == 0.0
    hand = torch.full_like(self.stage_time, _HAND_REACH + self.cfg.route_margin)
    level = self.target_pos[:, 2]
    tool_pos = now.tool_pos
    self._route(m, tool_pos, torch.zeros_like(tool_pos[:, :2]), hand, level, False)
    self._keep_off_base(m, tool_pos)

  def _actions(self, now: _Step) -> torch.Tensor:
    """Actions toward the targets (direction preserving, within [-1, 1]) from
    where the arm's command stands, none while idle; the clocks advance."""
    has = self.arm.has_target.unsqueeze(-1)
    origins = self.env.scene.env_origins
    base_pos = torch.where(has, self.arm.desired_pos_w - origins, now.tool_pos)
    base_quat = torch.where(has, self.arm.desired_quat_w, now.tool_quat)
    move = self._translation(now, base_pos)
    turn = axis_angle_from_quat(quat_mul(self.target_quat, quat_inv(base_quat)))
    # The command turns on only while it leads the tool by under turn_lead.
    lead = axis_angle_from_quat(quat_mul(base_quat, quat_inv(now.tool_quat)))
    room = (self.cfg.turn_lead - torch.linalg.vector_norm(lead, dim=-1)).clamp_min(0)
    turn = _within(turn, self.cfg.turn_speed * self.env.step_dt)
    size = torch.linalg.vector_norm(turn, dim=-1)
    turn = turn * (room / size.clamp_min(1e-9)).clamp_max(1.0).unsqueeze(-1)
    move = move / self.arm.cfg.translation_scale
    turn = turn / self.arm.cfg.rotation_scale
    idle = self.done | now.at(Stage.PLAN)
    move[idle] = 0.0
    turn[idle] = 0.0
    self.stage_time += self.env.step_dt
    self.time += self.env.step_dt
    self.check_time += self.env.step_dt
    return torch.cat([move, turn, self.gripper.unsqueeze(-1)], dim=-1)

  def _translation(self, now: _Step, base_pos: torch.Tensor) -> torch.Tensor:
    """This step's translation [m] from ``base_pos`` toward the via point,
    once passed toward the target, at the stage's speed."""
    passed = torch.linalg.vector_norm(self.via - base_pos, dim=-1) < 2e-3
    self.via_on &= ~passed
    aim = torch.where(self.via_on.unsqueeze(-1), self.via, self.target_pos)
    aim[:, 2] = torch.maximum(aim[:, 2], self._descent_floor(now))
    move = aim - base_pos
    # Slow while a held object leaves the pile: neighbours drag on it.
    low = now.tool_pos[:, 2] < self.grasp_pos[:, 2] + self.cfg.careful_lift
    careful = now.at(Stage.LIFT) & low
    speed = torch.full_like(self.stage_time, self.cfg.lower_speed)
    for stage in _TRANSIT:
      speed[now.at(stage)] = self.cfg.transit_speed
    speed[now.at(Stage.LIFT) | now.at(Stage.CARRY)] = self.cfg.carry_speed
    speed[careful] = self.cfg.lift_speed
    speed[now.at(Stage.PUSH)] = self.cfg.push_speed
    return _within(move, (speed * self.env.step_dt).unsqueeze(-1))

  def _grip(self, mask: torch.Tensor, opening: torch.Tensor) -> None:
    """Closing targets that press the held object with its grip effort: the
    opening less effort / kp (never looser than the planned target)."""
    follow = opening - self._grip_effort[self.target_obj.clamp_min(0)] / GRIPPER_KP
    tight = torch.minimum(self.close_command, follow).clamp_min(GRIPPER_CLOSED)
    self.gripper[mask] = tight[mask]

  def close(self) -> None:
    self._pool.shutdown(wait=True)
