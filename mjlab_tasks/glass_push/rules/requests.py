"""The examiner's requests: checked before they cost a push.

Every malformed request raises ``ValueError`` with the reason and costs
nothing (docs/glass_push.md).
"""

from __future__ import annotations

import math

import numpy as np

from mjlab_tasks.glass_push.rules.errors import BudgetSpent  # noqa: F401 - re-exported
from mjlab_tasks.glass_push.rules.hand import LOWEST_TCP_Z, REACH_MAX, REACH_MIN

MAX_REACH_REQUEST = 0.30  # m, longest feel
MAX_TRAVEL_REQUEST = 0.30  # m
# follow(): waypoints at the recording rate, at most this far apart.
WAYPOINT_DT = 0.02  # s (50 Hz)
MAX_WAYPOINT_STEP = 0.006  # m per waypoint (0.3 m/s)
MAX_WAYPOINT_TURN = math.radians(4.0)
MAX_CHUNK = 2000


def wrap_angle(angle: float) -> float:
  """``angle`` wrapped to [-pi, pi)."""
  return (angle + math.pi) % (2 * math.pi) - math.pi


def _number(value, name: str) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
    raise ValueError(f"{name} must be a number, got {value!r}")
  value = float(value)
  if not math.isfinite(value):
    raise ValueError(f"{name} must be finite, got {value}")
  return value


def _point(value, name: str) -> np.ndarray:
  try:
    arr = np.asarray(value, dtype=float)
  except (TypeError, ValueError) as err:
    raise ValueError(f"{name} must be [x, y], got {value!r}") from err
  if arr.shape != (2,) or not np.all(np.isfinite(arr)):
    raise ValueError(f"{name} must be two finite numbers [x, y], got {value!r}")
  return arr


def check_reach(xy: np.ndarray, name: str) -> None:
  r = float(np.hypot(*xy))
  if not REACH_MIN <= r <= REACH_MAX:
    raise ValueError(
      f"{name} {xy.tolist()} is out of the arm's reach: keep it "
      f"{REACH_MIN}-{REACH_MAX} m from the robot base at (0, 0)"
    )


def glass_index(glasses, taken, glass) -> int:
  """Index of a glass id on the table; ValueError for an unknown or taken one."""
  if isinstance(glass, bool) or not isinstance(glass, (int, np.integer)):
    raise ValueError(f"glass must be an int id, got {glass!r}")
  ids = [g.id for g in glasses]
  if int(glass) not in ids:
    raise ValueError(f"unknown glass id {glass}; this table's ids are {ids}")
  if int(glass) in taken:
    raise ValueError(f"glass {glass} was already taken to the rack")
  return ids.index(int(glass))


def parse_push(request, glasses, taken):
  """Check a push request; returns (glass, start, heading, reach, travel, aim,
  the request as plain data for the record) or raises ValueError with the
  reason."""
  if not isinstance(request, dict):
    raise ValueError(f"push() takes a dict, got {type(request).__name__}")
  need = {"glass", "start", "heading", "reach", "travel", "aim"}
  if set(request) != need:
    raise ValueError(
      f"push() needs exactly the keys {sorted(need)}, got {sorted(request)}"
    )
  glass = glasses[glass_index(glasses, taken, request["glass"])].id
  start = _point(request["start"], "start")
  aim = _point(request["aim"], "aim")
  heading = _number(request["heading"], "heading")
  reach = _number(request["reach"], "reach")
  travel = _number(request["travel"], "travel")
  if not 0.0 < reach <= MAX_REACH_REQUEST:
    raise ValueError(f"reach must be in (0, {MAX_REACH_REQUEST}] m, got {reach}")
  if not 0.0 <= travel <= MAX_TRAVEL_REQUEST:
    raise ValueError(f"travel must be in [0, {MAX_TRAVEL_REQUEST}] m, got {travel}")
  check_reach(start, "start")
  u = np.array([math.cos(heading), math.sin(heading)])
  check_reach(start + (reach + travel) * u, "start + (reach+travel)")
  clean = dict(
    glass=glass,
    start=start.tolist(),
    heading=heading,
    reach=reach,
    travel=travel,
    aim=aim.tolist(),
  )
  return glass, start, heading, reach, travel, aim, clean


def parse_follow(chunk, glass, aim, glasses, taken):
  """Check a follow() chunk; returns (waypoints [K, 4], glass, aim) or raises
  ValueError with the reason."""
  try:
    way = np.array(chunk, dtype=float)
  except (TypeError, ValueError) as err:
    raise ValueError("chunk must be an array of [x, y, z, heading] rows") from err
  if way.ndim != 2 or way.shape[1] != 4 or not 1 <= way.shape[0] <= MAX_CHUNK:
    raise ValueError(
      f"chunk must have shape [K, 4] (x, y, z, heading) with 1 <= K <= "
      f"{MAX_CHUNK}, got {way.shape}"
    )
  if not np.all(np.isfinite(way)):
    raise ValueError("chunk holds NaN or infinite values")
  if glass is not None:
    glass = glasses[glass_index(glasses, taken, glass)].id
  if aim is not None:
    aim = _point(aim, "aim").tolist()
  # Recorded paths sag a fraction of a millimetre below the lowest height:
  # accept 2 mm and hold the hand at the lowest height.
  if np.any(way[:, 2] < LOWEST_TCP_Z - 0.002) or np.any(way[:, 2] > 0.6):
    raise ValueError(f"waypoint heights must be within [{LOWEST_TCP_Z}, 0.6] m")
  way[:, 2] = np.maximum(way[:, 2], LOWEST_TCP_Z)
  for k, row in enumerate(way):
    check_reach(row[:2], f"waypoint {k}")
  steps = np.linalg.norm(np.diff(way[:, :3], axis=0), axis=1)
  turns = np.abs([wrap_angle(a) for a in np.diff(way[:, 3])])
  if np.any(steps > MAX_WAYPOINT_STEP + 1e-12) or np.any(turns > MAX_WAYPOINT_TURN):
    raise ValueError(
      f"consecutive waypoints (every {WAYPOINT_DT} s) may move at most "
      f"{MAX_WAYPOINT_STEP} m and {math.degrees(MAX_WAYPOINT_TURN):.0f} degrees"
    )
  return way, glass, aim
