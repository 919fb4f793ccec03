"""The push routine and ``follow()``, written once for both engines.

Each call is a small program per table: a generator that yields the hand's
segments (a straight ``Line`` of the commanded tool point, stopped by the
wrist force; follow()'s ``Waypoints``; a ``Hold`` until the glasses are
still) and is sent each segment's outcome. ``hand.HandRunner`` runs many
tables' programs together on the GlassPush environment, on either engine.
The numbers are the glass-pushing specification's (docs/glass_push.md, "What
push() does").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mjlab_tasks.glass_push.physics import TIMESTEP
from mjlab_tasks.glass_push.rules import requests as rq
from mjlab_tasks.glass_push.rules.felt import felt_distances
from mjlab_tasks.glass_push.rules.hand import JAM_FORCE, LOWEST_TCP_Z

DESCEND_SPEED = 0.200  # m/s
FEEL_SPEED = 0.010
PUSH_SPEED = 0.020
BACK_OFF = 0.020  # m
BACK_OFF_SPEED = 0.050
LIFT_SPEED = 0.200
TRANSIT_SPEED = 0.200
TURN_SPEED = math.pi / 2  # rad/s, heading change in transit
TOUCH_FORCE = 0.1  # N, descent and feel
LIFT_CLEARANCE = 0.03  # pad bottoms above the tallest glass [m]
RECORD_EVERY = int(round(rq.WAYPOINT_DT / TIMESTEP))  # physics steps per sample
# A glass has stopped once it moves slower than these for 0.1 s.
STILL_LIN, STILL_ANG = 0.002, 0.05
STILL_STEPS = 50
SETTLE_MAX_S = 3.0


@dataclass
class Line:
  """A straight line of the commanded tool point to ``target`` (table
  frame), turning to ``heading``, at ``speed``; stopped by a wrist force
  above ``stop``. Sends back whether the force stopped it."""

  target: np.ndarray
  heading: float
  speed: float
  stop: float = math.inf


@dataclass
class Waypoints:
  """follow()'s waypoints [K, 4] (x, y, z, heading), one per RECORD_EVERY
  steps; the first force above TOUCH_FORCE is the touch, a later one above
  JAM_FORCE ends them. Sends back (touched, jammed, pushed) and the last
  waypoint step's commanded start and end (for the back-off)."""

  way: np.ndarray


@dataclass
class Hold:
  """Hold the hand until every glass has stopped (at most SETTLE_MAX_S)."""


def lift(hand, i: int):
  """Up to the safe height if below it."""
  cmd = hand.cmd[i]
  if cmd[2] < hand.z_safe[i] - 1e-9:
    target = np.array([cmd[0], cmd[1], hand.z_safe[i]])
    yield Line(target, hand.heading[i], LIFT_SPEED)


def push(hand, i: int, start, heading: float, reach: float, travel: float):
  """The specification's six steps on table ``i``; returns (blocked, touched, jammed,
  pushed)."""
  u = np.array([math.cos(heading), math.sin(heading), 0.0])
  yield from lift(hand, i)
  yield Line(np.array([start[0], start[1], hand.z_safe[i]]), heading, TRANSIT_SPEED)
  down = np.array([start[0], start[1], LOWEST_TCP_Z])
  blocked = yield Line(down, heading, DESCEND_SPEED, TOUCH_FORCE)
  touched, jammed, pushed = None, False, 0.0
  if not blocked:
    p_feel = hand.hand_positions()[i]
    if (yield Line(hand.cmd[i] + reach * u, heading, FEEL_SPEED, TOUCH_FORCE)):
      p_touch = hand.hand_positions()[i]
      jammed = yield Line(hand.cmd[i] + travel * u, heading, PUSH_SPEED, JAM_FORCE)
      # The rule follow() uses too: from the start of the feel to the touch,
      # and from the touch to the end of step 4.
      touched, pushed = felt_distances(
        [p_feel, p_touch, hand.hand_positions()[i]], 1, heading
      )
      yield Line(hand.cmd[i] - BACK_OFF * u, heading, BACK_OFF_SPEED)
  yield from lift(hand, i)
  yield Hold()
  return blocked, touched, jammed, pushed


def follow(hand, i: int, way: np.ndarray):
  """follow(chunk) on table ``i``; returns (blocked, touched, jammed, pushed)."""
  blocked = False
  first = way[0]
  if (
    np.linalg.norm(first[:3] - hand.cmd[i]) > rq.MAX_WAYPOINT_STEP
    or abs(rq.wrap_angle(first[3] - hand.heading[i])) > rq.MAX_WAYPOINT_TURN
  ):
    # Approach like a push: up, across, down (a touch on the way is blocked).
    yield from lift(hand, i)
    above = np.array([first[0], first[1], hand.z_safe[i]])
    yield Line(above, first[3], TRANSIT_SPEED)
    blocked = yield Line(first[:3], first[3], DESCEND_SPEED, TOUCH_FORCE)
  touched, jammed, pushed = None, False, 0.0
  if blocked:
    yield from lift(hand, i)
  else:
    (touched, jammed, pushed), (p0, p1) = yield Waypoints(way)
    if jammed:
      # Back 20 mm against the last waypoint step's horizontal direction.
      move = np.array([p1[0] - p0[0], p1[1] - p0[1], 0.0])
      length = float(np.linalg.norm(move))
      if length < 1e-9:
        h = hand.heading[i]
        move, length = np.array([math.cos(h), math.sin(h), 0.0]), 1.0
      back = hand.cmd[i] - BACK_OFF * move / length
      yield Line(back, hand.heading[i], BACK_OFF_SPEED)
  yield Hold()
  return blocked, touched, jammed, pushed
