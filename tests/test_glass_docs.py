"""The numbers docs/glass_push.md quotes, against the code's constants: each
row is a phrase that must stand in the page and the constant it quotes, with
the number as written there (changing either side fails this test)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mjlab_tasks.glass_push import hidden, scene
from mjlab_tasks.glass_push.examiner import pictures
from mjlab_tasks.glass_push.examiner import routine as world
from mjlab_tasks.glass_push.examiner import world as glass_world
from mjlab_tasks.glass_push.rules import felt, glasses, hand, requests, room, tables

DOC = (Path(__file__).resolve().parents[1] / "docs" / "glass_push.md").read_text()
PAGE = " ".join(DOC.split())  # line breaks as spaces

# (phrase in the page, the code's value, the number the phrase states)
QUOTES = [
  ("Any hand force above 0.1 N on the way", world.TOUCH_FORCE, 0.1),
  ("A force above 20 N: `jammed`", world.JAM_FORCE, 20.0),
  ("Down at 200 mm/s", world.DESCEND_SPEED, 0.200),
  ("across (200 mm/s)", world.TRANSIT_SPEED, 0.200),
  ("Forward at 10 mm/s", world.FEEL_SPEED, 0.010),
  ("`travel` at 20 mm/s", world.PUSH_SPEED, 0.020),
  ("Back 20 mm at 50 mm/s", world.BACK_OFF, 0.020),
  ("Back 20 mm at 50 mm/s", world.BACK_OFF_SPEED, 0.050),
  ("Up to the safe height at 200 mm/s", world.LIFT_SPEED, 0.200),
  ("turn the hand at 90 degrees/s", world.TURN_SPEED, math.pi / 2),
  ("slower than 2 mm/s", world.STILL_LIN, 0.002),
  ("and 0.05 rad/s for 0.1 s, at most 3 s", world.STILL_ANG, 0.05),
  ("and 0.05 rad/s for 0.1 s, at most 3 s", world.SETTLE_MAX_S, 3.0),
  ("its pad bottoms 30 mm above the tallest glass", world.LIFT_CLEARANCE, 0.03),
  ("`reach` outside (0, 0.30] m", requests.MAX_REACH_REQUEST, 0.30),
  ("`travel` outside [0, 0.30] m", requests.MAX_TRAVEL_REQUEST, 0.30),
  ("keep 0.25 to 0.72 m from the robot base", hand.REACH_MIN, 0.25),
  ("keep 0.25 to 0.72 m from the robot base", hand.REACH_MAX, 0.72),
  ("at most 6 mm and 4 degrees apart", requests.MAX_WAYPOINT_STEP, 0.006),
  ("at most 6 mm and 4 degrees apart", requests.MAX_WAYPOINT_TURN, math.radians(4)),
  ("heights 19.5-600 mm", hand.LOWEST_TCP_Z, 0.0195),
  ("K <= 2000", requests.MAX_CHUNK, 2000),
  ("at 50 Hz (every 10 physics steps)", world.RECORD_EVERY, 10),
  ("2 ms step", world.TIMESTEP, 0.002),
  ("(12.5 mm ahead of the tool axis)", hand.PAD_LEAD, 0.0125),
  (
    "starts 79.5 mm above the table",
    hand.LOWEST_TCP_Z + hand.HOUSING_ABOVE_TCP,
    0.0795,
  ),
  ("leads the tool axis by 22 mm", hand.HOUSING_LEAD, 0.022),
  ("most 25 mm above the tool point's height", felt.WORKING_BAND, 0.025),
  ("| x, y | 1.0 mm |", hidden.NOISE_POSITION, 0.001),
  ("| height | 2.0 mm |", hidden.NOISE_HEIGHT, 0.002),
  ("| widest, foot | 3.0 mm |", hidden.NOISE_WIDTH, 0.003),
  ("a rectangle 16 mm deep", room.FINGER_DEPTH, 0.016),
  ("and 25 mm wide, placed 5 mm outside", room.FINGER_WIDTH, 0.025),
  ("and 25 mm wide, placed 5 mm outside", room.CLEARANCE, 0.005),
  ("fits the 110 mm opening", room.MAX_OPENING, 0.110),
  ("(every 10 degrees over half a turn)", len(room.DIRECTIONS), 18),
  ("tilted less than 30 degrees", hidden.TOPPLED_COS, math.cos(math.radians(30))),
  ("**Training tables are 0-9999", tables.TRAINING_TABLES.stop, 10_000),
  ("evaluation tables 10000-19999**", tables.EVALUATION_TABLES.stop, 20_000),
  ("| glasses | 7 to 10;", tables.MIN_GLASSES, 7),
  ("| glasses | 7 to 10;", tables.MAX_GLASSES, 10),
  ("0.75 m above the floor", tables.TABLE_HEIGHT, 0.75),
  ("x 0.45 +- 0.14 m, y -0.27 +- 0.15 m", tables.ZONE_CENTER, (0.45, -0.27)),
  ("x 0.45 +- 0.14 m, y -0.27 +- 0.15 m", tables.ZONE_HALF, (0.14, 0.15)),
  ("(0.26 to 0.71 m from the base axis)", tables.REACH_BAND, (0.26, 0.71)),
  ("1 to 5 mm between neighbouring widest rings", tables.MIN_GAP, 0.001),
  ("1 to 5 mm between neighbouring widest rings", tables.MAX_CROWD_GAP, 0.005),
  ("Six such packings", tables.PACKINGS, 6),
  ("a shelf at (0.35, 0.38), 100 mm high", tables.RACK_CENTER, (0.35, 0.38)),
  ("a shelf at (0.35, 0.38), 100 mm high", tables.RACK_SHELF_TOP, 0.10),
  ("its 10 slots", len(glass_world.RACK_SLOTS), 10),
  ("records the poses at 10 fps", pictures.FILM_FPS, 10),
  ("`films/<table>.mp4` (480 x 360)", pictures.FILM_SIZE, (480, 360)),
  ("every table gets 10 glass slots of 3 convex mesh parts", scene.SLOTS, 10),
  ("every table gets 10 glass slots of 3 convex mesh parts", glasses.PARTS, 3),
]


@pytest.mark.parametrize("phrase, value, stated", QUOTES, ids=lambda v: str(v)[:40])
def test_the_page_quotes_the_code(phrase, value, stated):
  assert phrase in PAGE, f"docs/glass_push.md no longer says {phrase!r}"
  assert value == pytest.approx(stated, abs=1e-12), phrase


def test_the_cameras_are_as_described():
  """750 mm above the zone's centre, 44 degrees, 384 x 384."""
  assert "camera `top_view` 750 mm above the zone's centre" in PAGE
  assert "44 degree field of view" in PAGE and "384 x 384 RGB" in PAGE
  spec = scene.table_spec(hidden.PhysicsConfig())
  top = spec.camera("top_view")
  assert list(top.pos) == pytest.approx([*tables.ZONE_CENTER, 0.75])
  assert top.fovy == 44.0 and list(top.resolution) == [384, 384]
  assert "(at x = 0.30, y = -1.12, z = 1.05 m, 42 degree field of view" in PAGE
  film = spec.camera("film")
  assert list(film.pos) == pytest.approx([0.30, -1.12, 1.05])
  assert film.fovy == 42.0
  assert "](images/glass_push_frame.png)" in PAGE
  image = Path(__file__).resolve().parents[1] / "docs/images/glass_push_frame.png"
  assert image.stat().st_size < 300_000
