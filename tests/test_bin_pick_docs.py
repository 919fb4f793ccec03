"""The numbers docs/bin_pick.md quotes, read from the page and compared with
the constants and configs the code uses (no environment is built).

Each quote is found by a pattern on the page with whitespace collapsed; a
reworded sentence fails here too, so the page and this test change together.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from assets.objects import describe_objects, object_spec
from assets.ur5_rg2.model import RG2_MAX_OPENING, RG2_PAD_HALF
from evaluators.bin_pick import DeliveryThresholds
from experts.bin_pick import expert as expert_module
from experts.bin_pick.expert import BinPickExpertCfg
from experts.bin_pick.grasps import GraspSearchCfg
from experts.bin_pick.replica import ReplicaCfg
from mjlab_tasks.bin_pick import env_cfg as bp

DOC = Path(__file__).resolve().parents[1] / "docs" / "bin_pick.md"
TEXT = " ".join(DOC.read_text().split())


def quoted(pattern: str) -> tuple[float, ...]:
  """The numbers a pattern captures on the page (it must match exactly once)."""
  found = re.findall(pattern, TEXT)
  assert len(found) == 1, f"{pattern!r} found {len(found)} times in {DOC.name}"
  groups = found[0] if isinstance(found[0], tuple) else (found[0],)
  return tuple(float(g) for g in groups)


def mm(*metres: float) -> tuple[float, ...]:
  return tuple(round(m * 1000, 6) for m in metres)


def test_replica_check_budget_per_object():
  (budget,) = quoted(r"At most (\d+) checks per object")
  assert budget == ReplicaCfg().max_checks_per_object


def test_bin_geometry_and_drop_destination():
  got = quoted(
    r"inner (\d+) mm \(along world y\) x (\d+) mm \(x\) x (\d+) mm \(wall height\) "
    r"by default; walls and floor (\d+) mm; centred at \(([\d.]+), ([\d.]+)\) m; "
    r"floor top at (\d+) mm"
  )
  assert got == (
    *mm(bp.BIN_LENGTH, bp.DEFAULT_BIN_WIDTH, bp.DEFAULT_BIN_HEIGHT, bp.BIN_WALL),
    *bp.BIN_CENTRE,
    *mm(bp.BIN_FLOOR),
  )
  assert bp.BIN_WALL == bp.BIN_FLOOR  # "walls and floor": one number.
  diameter, x, y = quoted(
    r"a (\d+) mm disc marker on the table at \(([\d.]+), ([\d.]+)\) m"
  )
  assert (x, y) == bp.DROP_DESTINATION
  spec = bp.bin_spec(bp.BinGeometry())
  assert diameter == mm(2 * spec.geom("drop_destination").size[0])[0]
  delivery = quoted(r"the drop destination \(([\d.]+), ([\d.]+)\) m \|")
  assert delivery == bp.DROP_DESTINATION


def test_accepted_bin_sizes():
  w0, w1, h0, h1 = quoted(
    r"accepted ([\d.]+) to ([\d.]+) m wide and ([\d.]+) to ([\d.]+) m high"
  )
  for width, height in ((w0, h0), (w1, h1)):
    bp.bin_pick_env_cfg(bin_width=width, bin_height=height)  # Accepted.
  for width, height in (
    (w0 - 1e-3, h0),
    (w1 + 1e-3, h0),
    (w0, h0 - 1e-3),
    (w0, h1 + 1e-3),
  ):
    with pytest.raises(ValueError, match="outside the supported"):
      bp.bin_pick_env_cfg(bin_width=width, bin_height=height)


@pytest.mark.parametrize("objects", [1, 12])
def test_physics_and_contact_buffers(objects):
  cfg = bp.bin_pick_env_cfg(objects=objects)
  khz, impratio = quoted(r"\| physics \| (\d+) kHz, elliptic cone, impratio (\d+);")
  assert cfg.sim.mujoco.timestep == pytest.approx(1e-3 / khz)
  assert cfg.sim.mujoco.cone == "elliptic" and cfg.sim.mujoco.impratio == impratio
  base, per, factor = quoted(
    r"`nconmax = (\d+) \+ (\d+) x objects`, `njmax = (\d+) x nconmax`"
  )
  assert cfg.sim.nconmax == base + per * objects
  assert cfg.sim.njmax == factor * cfg.sim.nconmax


def test_pourer_numbers():
  pour = bp.bin_pick_env_cfg().events["pour"].params["pour"]
  (parking,) = quoted(r"out of the robot's reach at x = (-[\d.]+) m")
  assert parking == bp.PARKING_X
  clearance, settle = quoted(
    r"each from (\d+) cm above the current pile .*? then ([\d.]+) s of settling"
  )
  assert clearance / 100 == pour.drop_clearance
  assert settle == pour.drop_settle_s
  (percent,) = quoted(r"reaches (\d+) % of the wall height")
  assert percent / 100 == bp.STOP_FRACTION
  assert bp.BinGeometry(height=0.06).stop_height == pytest.approx(0.06 * percent / 100)
  (final,) = quoted(r"then (\d+) s of final settling")
  assert final == pour.final_settle_s
  still, extra = quoted(r"moves faster than ([\d.]+) m/s, for at most (\d+) s more")
  assert still == pour.still_speed
  assert extra == pour.max_extra_settle_s


def test_object_table_matches_the_generated_set():
  kinds = {
    "box": "box",
    "capsule": "capsule",
    "irregular": "irregular",
    "ell": "L-block",
    "cylinder": "cylinder",
  }
  rows = re.findall(
    r"^\| (obj_\d\d) \| ([^|]+) \| (\d+) x (\d+) x (\d+) \| (\d+) \| (\d+) \|$",
    DOC.read_text(),
    flags=re.MULTILINE,
  )
  descs = describe_objects(12, seed=0)
  assert [r[0] for r in rows] == [d.name for d in descs]
  for row, desc in zip(rows, descs, strict=True):
    model = object_spec(desc).compile()
    assert row[1].startswith(kinds[desc.kind]), row
    assert tuple(int(v) for v in row[2:5]) == tuple(
      round(2000 * e) for e in desc.extent
    )
    assert int(row[5]) == round(desc.density)
    assert int(row[6]) == round(1000 * model.body_mass[1])
  lo, hi = quoted(r"Densities (\d+) to (\d+) kg/m\^3")
  assert all(lo <= d.density <= hi for d in describe_objects(200, seed=3))
  (stroke,) = quoted(r"Most fit the RG2's (\d+) mm stroke")
  assert stroke == mm(RG2_MAX_OPENING)[0]


def test_camera_sizes():
  sensors = {
    s.name: s
    for s in bp.bin_pick_env_cfg(cameras=True).scene.sensors
    if hasattr(s, "width")
  }
  w, h = quoted(r"`wrist_d415` \(the D415 on the RG2, (\d+) x (\d+),")
  assert (sensors["wrist_d415"].width, sensors["wrist_d415"].height) == (w, h)
  w, h = quoted(r"`scene_camera` \((\d+) x (\d+) RGB")
  assert (sensors["scene_camera"].width, sensors["scene_camera"].height) == (w, h)


def test_delivery_thresholds():
  th = DeliveryThresholds()
  (radius,) = quoted(r"its centre within (\d+) mm \(horizontally\)")
  assert radius == mm(th.drop_radius)[0]
  (support,) = quoted(r"its lowest point within (\d+) mm of the table top")
  assert support == mm(th.support_tolerance)[0]
  lin, ang = quoted(r"linear speed <= ([\d.]+) m/s and angular speed <= ([\d.]+) rad/s")
  assert (lin, ang) == (th.max_linear_speed, th.max_angular_speed)


def test_grasp_search_numbers():
  cfg = GraspSearchCfg()
  directions, every = quoted(
    r"For each of (\d+) horizontal closing directions \(every (\d+) degrees"
  )
  assert directions == cfg.directions and every == 180 / cfg.directions
  tilts = quoted(
    r"(\d+) tilts about the closing axis \((\d+), \+-(\d+), \+-(\d+) degrees\)"
  )
  assert tilts[0] == len(cfg.tilts_deg)
  assert sorted(cfg.tilts_deg) == sorted(
    [tilts[1], *(s * t for t in tilts[2:] for s in (-1, 1))]
  )
  *heights, lowest = quoted(
    r"at (\d+) heights \((\d+), (\d+), (\d+) and (\d+) % of the object's span from "
    r"its top, and the lowest level: the pad's lowest corner (\d+) mm above"
  )
  assert heights[0] == len(cfg.height_fractions) + 1
  assert sorted(heights[1:]) == sorted(100 * f for f in cfg.height_fractions)
  assert lowest == mm(cfg.floor_clearance)[0]
  (pad,) = quoted(r"\(pad width (\d+) mm;")
  assert pad == mm(2 * cfg.pad_half_width)[0] == mm(2 * RG2_PAD_HALF[1])[0]
  (pad_h,) = quoted(r"spanning the pad's (\d+) mm height")
  assert pad_h == mm(2 * cfg.pad_half_height)[0]
  lo, hi, free, stroke = quoted(
    r"Widths from (\d+) mm to (\d+) mm are kept \((\d+) mm free on each side of "
    r"the (\d+) mm stroke\)"
  )
  assert (lo, free, stroke) == mm(cfg.min_width, cfg.open_clearance, RG2_MAX_OPENING)
  assert hi == stroke - 2 * free
  (tol,) = quoted(r"lying within ([\d.]+) mm of each closed pad face")
  assert tol == mm(cfg.contact_tolerance)[0]
  area, torque = quoted(
    r"(\d+) x \(1 - patch\) and 1 per ([\d.]+) N m of gravity torque"
  )
  assert (area, torque) == (cfg.area_weight, cfg.torque_ref) and cfg.com_weight == 1
  sure = quoted(
    r"sure\s+grasps \(a patch of at least ([\d.]+), a width of at most (\d+) mm "
    r"and the centre\s+of mass within (\d+) mm of the closing line\)"
  )
  held = quoted(
    r"well-held ones\s+\(a patch of at least ([\d.]+), a width of at most (\d+) mm "
    r"and the centre of mass\s+within (\d+) mm of the closing line\)"
  )
  (widest,) = quoted(r"No grasp closes on more than\s+(\d+) mm")
  replica = ReplicaCfg()
  assert sure[0] == held[0] == replica.min_patch
  assert sure[1:] == mm(replica.sure_width, replica.sure_com_distance)
  assert held[1:] == mm(replica.max_held_width, replica.max_com_distance)
  assert widest == mm(replica.max_width)[0]


def test_rearrangement_numbers():
  from experts.bin_pick.rearrange import (
    ACROSS_FRACTION,
    STANDING_MIN_HEIGHT,
    STANDING_RATIO,
    TIP_BELOW_TOP,
    TIP_MIN_HEIGHT,
    TOPPLE_OFFSETS,
    WALL_GAP,
    PushCfg,
  )

  push, expert = PushCfg(), BinPickExpertCfg()
  (across,) = quoted(r"extent across the bin is over ([\d.]+) of the inner width")
  assert across == ACROSS_FRACTION
  ratio, tall = quoted(
    r"height is over ([\d.]+) times its smallest horizontal extent and over (\d+) mm"
  )
  assert (ratio, tall) == (STANDING_RATIO, mm(STANDING_MIN_HEIGHT)[0])
  (gap,) = quoted(r"it lies within (\d+) mm of a wall")
  assert gap == mm(WALL_GAP)[0]
  above, below, tip_tall = quoted(
    r"pads at least (\d+) mm above the floor\) or a `tip` (\d+) mm below its top "
    r"\(objects over (\d+) mm tall\)"
  )
  assert (above, below, tip_tall) == mm(
    push.floor_clearance, TIP_BELOW_TOP, TIP_MIN_HEIGHT
  )
  behind, length, least = quoted(
    r"the push starts (\d+) mm behind the object and moves it (\d+) mm, or less "
    r"where a wall is nearer \(at least (\d+) mm\)"
  )
  assert (behind, length, least) == mm(
    push.approach_gap, push.distance, push.min_distance
  )
  wall, floor = quoted(
    r"the closed hand (\d+) mm from the walls and (\d+) mm above the floor at the start"
  )
  assert (wall, floor) == mm(push.wall_clearance, push.floor_clearance)
  (step,) = quoted(r"at sampled points \(every (\d+) mm\) of the push line")
  assert step == mm(push.step)[0]
  per_object, per_env = quoted(
    r"At most (\d+) moves per object and (\d+) per environment"
  )
  assert (per_object, per_env) == (expert.max_pushes_per_object, expert.max_pushes)
  (speed,) = quoted(r"`push` \(the line, at ([\d.]+) m/s\)")
  assert speed == expert.push_speed
  (jam,) = quoted(r"A push that takes longer than (\d+) s \(jammed\)")
  assert jam == expert.stage_timeout
  (overshoot,) = quoted(r"its thickness and (\d+) mm farther")
  assert overshoot == mm(push.topple_overshoot)[0]
  (offset,) = quoted(r"start may be up to (\d+) mm off the top's middle")
  assert offset == mm(max(TOPPLE_OFFSETS))[0]
  (lying,) = quoted(r"would be over (\d+) mm wide both\s+ways")
  assert lying == mm(push.topple_max_width)[0]


def test_replica_numbers():
  cfg = ReplicaCfg()
  (wall,) = quoted(r"is at least (\d+) mm from every bin wall")
  assert wall == mm(cfg.wall_clearance)[0]
  (floor,) = quoted(r"at least (\d+) mm above the bin floor")
  assert floor == mm(cfg.floor_clearance)[0]
  (squeeze,) = quoted(r"predicted closure \(measured width minus (\d+) mm\)")
  assert squeeze == mm(cfg.closure_squeeze)[0]
  (step,) = quoted(r"at sampled points \(every (\d+) mm\) of the vertical approach")
  assert step == mm(cfg.approach_step)[0]
  margin, stroke = quoted(
    r"measured width plus (\d+) mm on each side \(at most the (\d+) mm stroke\)"
  )
  assert (margin, stroke) == mm(cfg.open_margin, RG2_MAX_OPENING)
  (tight,) = quoted(r"the smaller one, (\d+) mm on each side, is tried")
  assert tight == mm(cfg.tight_open_margin)[0]


def test_expert_numbers():
  cfg = BinPickExpertCfg()
  speed, careful = quoted(
    r"`lift` \(vertical, at ([\d.]+) m/s\s+over the first (\d+) mm"
  )
  assert careful == mm(cfg.careful_lift)[0] and speed == cfg.lift_speed
  (transit,) = quoted(r"transit height: rim \+ (\d+) mm \+ pad half height")
  assert transit == mm(cfg.transit_clearance)[0]
  turn, clearance = quoted(
    r"turned within (\d+) degrees of the grasp's orientation, `descent_turn`.*?"
    r"fingers' lowest point is (\d+) mm, `blend_clearance`"
  )
  assert turn == pytest.approx(math.degrees(cfg.descent_turn))
  assert clearance == mm(cfg.blend_clearance)[0]
  (empty_hand,) = quoted(r"to and from a push\) at ([\d.]+) m/s \(20 mm per 20 Hz")
  assert empty_hand == cfg.transit_speed
  close, squeeze = quoted(
    r"`close` \(([\d.]+) s; the gripper's position target is the planned width "
    r"minus (\d+) mm per side"
  )
  assert (close, squeeze / 1000) == (cfg.close_time, cfg.grip_squeeze)
  (carry,) = quoted(r"object's lowest point is (\d+) mm above the rim, or earlier")
  assert carry == mm(cfg.carry_clearance)[0]
  spacing, radius, knock = quoted(
    r"grid of (\d+) mm within (\d+) mm of the drop destination, (\d+) mm inside"
  )
  assert (spacing, knock) == (mm(cfg.placement_spacing)[0], mm(cfg.knock_margin)[0])
  assert radius == mm(DeliveryThresholds().drop_radius - cfg.knock_margin)[0]
  gap, watch, directions = quoted(
    r"stays (\d+) mm from the\s+footprint of every object within ([\d.]+) m of "
    r"the drop destination.*?support\s+functions on (\d+) directions"
  )
  assert (gap, watch) == (mm(cfg.drop_gap)[0], cfg.zone_watch)
  assert directions == expert_module._FOOTPRINT_DIRECTIONS
  (release_margin,) = quoted(r"to the grasp width plus (\d+) mm per side")
  assert release_margin == mm(cfg.release_margin)[0]
  gap, fingers, tolerance, settle = quoted(
    r"`lower` \(vertical, until the held object's lowest point, as it is\s+"
    r"held then, is (\d+) mm above the table, or the fingers' lowest point \(pads"
    r"\s+and links, as the hand is posed\) is (\d+) mm above it, whichever comes "
    r"first,\s+within ([\d.]+) mm; then until\s+the "
    r"object is still by the evaluator's speed limits, at most (\d+) s"
  )
  assert (gap, fingers) == (mm(cfg.release_gap)[0], mm(cfg.finger_clearance)[0])
  (standing,) = quoted(r"a capsule held standing, its axis within\s+(\d+) degrees")
  assert standing == pytest.approx(math.degrees(cfg.standing_tilt))
  assert tolerance == cfg.release_tolerance * 1000
  assert settle == cfg.release_settle
  (opening,) = quoted(r"then opening at ([\d.]+) m/s to the grasp\s+width")
  assert opening == cfg.release_open_speed
  route, zone, zone_radius = quoted(
    r"about its centre and (\d+) mm, is over the bin's outer walls, then "
    r"straight\s+down and across until the object's lowest point is (\d+) mm "
    r"above the top of\s+the tallest other object within ([\d.]+) m"
  )
  assert route == mm(cfg.route_margin)[0] and zone == mm(cfg.zone_clearance)[0]
  assert zone_radius == expert_module._ZONE_RADIUS
  hand, reach_mm, margin = quoted(
    r"height from (\d+) mm outside the walls on: the open fingers reach "
    r"(\d+) mm from\s+the tool axis, plus a (\d+) mm margin"
  )
  assert reach_mm == round(expert_module._HAND_REACH * 1000)
  assert (hand, margin) == (reach_mm + margin, mm(cfg.route_margin)[0])
  (pads,) = quoted(r"until the pads' lowest point is (\d+) mm above the released")
  assert pads == mm(cfg.zone_clearance)[0]
  (settle_time,) = quoted(
    r"`plan` \(it waits, at most ([\d.]+) s, until every undelivered object"
  )
  assert settle_time == cfg.settle_time
  release, relax = quoted(
    r"`release` \(([\d.]+) s: for the first ([\d.]+) s the gripper's\s+target"
  )
  assert (release, relax) == (cfg.release_time, cfg.release_relax)
  verify, early = quoted(
    r"awaited while the expert moves on \(up to (\d+) s after the retreat; "
    r"delivered\s+from ([\d.]+) s on"
  )
  assert (verify, early) == (cfg.verify_time, expert_module._VERIFY_AFTER)
  (empty,) = quoted(r"the fingers closed to within (\d+) mm of fully closed")
  assert empty == mm(cfg.empty_margin)[0]
  (slip,) = quoted(r"moves more than (\d+) mm while held")
  assert slip == mm(cfg.slip_tolerance)[0]
  (timeout,) = quoted(r"a motion stage taking longer than (\d+) s")
  assert timeout == cfg.stage_timeout
  stall, still = quoted(
    r"descent whose tool has moved less than (\d+) mm for ([\d.]+) s off its target"
  )
  assert (stall, still) == (mm(cfg.stall_distance)[0], cfg.stall_time)
  (lead,) = quoted(r"Turns lead the hand by at most (\d+) degrees\*\* \(`turn_lead`")
  assert lead == pytest.approx(math.degrees(cfg.turn_lead))
  (release_open,) = quoted(r"([\d.]+) s into the opening at the earliest")
  assert release_open == cfg.release_open
  (lowering,) = quoted(r"and the lowering at\s+([\d.]+) m/s")
  assert lowering == cfg.lower_speed
  relaxed_wall, strict_wall, overlap = quoted(
    r"\(`ReplicaCfg.relaxed`\): (\d+) mm from the walls instead of (\d+), and the "
    r"open\s+fingers \(and the hand on its way down\) may overlap other objects "
    r"by up to\s+(\d+) mm"
  )
  replica = ReplicaCfg()
  assert (relaxed_wall, strict_wall, overlap) == mm(
    replica.last_resort_wall_clearance,
    replica.wall_clearance,
    replica.last_resort_overlap,
  )
  (moved,) = quoted(r"whose target has moved more than\s+(\d+) mm \(horizontally\)")
  assert moved == mm(cfg.moved_tolerance)[0]
  ring, edge = quoted(
    r"a free one of the edge ring\s+\(the same grid out to (\d+) mm, (\d+) mm inside "
    r"the delivery radius"
  )
  radius = DeliveryThresholds().drop_radius
  assert (ring, edge) == mm(radius - cfg.edge_margin, cfg.edge_margin)
  follow, follow_turn = quoted(
    r"while that is within (\d+) mm of where it was planned and\s+its axis has "
    r"turned by at most (\d+) degrees"
  )
  assert follow == mm(cfg.follow_distance)[0]
  assert follow_turn == pytest.approx(math.degrees(cfg.follow_turn))
  (turn_timeout,) = quoted(r"after\s+`turn_timeout` \((\d+) s\)")
  assert turn_timeout == cfg.turn_timeout
  (swing_lo, swing_hi) = quoted(r"swings of (\d+) to (\d+) degrees, random grasp yaws")
  assert (swing_lo, swing_hi) == (30, 75)  # tests/test_bin_pick_replica_order.py
  assert "beyond half a turn from zero (`ReplicaCfg.wrist_range`" in TEXT
  assert ReplicaCfg().wrist_range == pytest.approx(math.pi)
  (attempts,) = quoted(r"given up after (\d+) failed attempts")
  assert attempts == cfg.max_attempts
  reach = quoted(r"reachable table \(([\d.]+) to ([\d.]+) m from the base, `reach`;")
  assert reach == cfg.reach
  (route,) = quoted(r"would pass within ([\d.]+) m of the base axis \(`route_radius`")
  assert route == cfg.route_radius
  hz, step_mm, step_deg = quoted(
    r"the task's own (\d+) Hz Cartesian actions \(normalized: 1 unit is the\s+"
    r"term's bound, (\d+) mm and (\d+) degrees per step"
  )
  env = bp.bin_pick_env_cfg()
  action = env.actions["arm"]
  assert step_mm == mm(action.translation_scale)[0]
  assert step_deg == pytest.approx(math.degrees(action.rotation_scale))
  assert env.decimation * env.sim.mujoco.timestep == pytest.approx(1 / hz)
