"""Glass pushing examiner, as specified: tables, readings, the push routine,
tipping, filming, hiding, scoring and the CLI. CPU, C MuJoCo: the glass
world on the GlassPush environment, the hand's segments compiled."""

from __future__ import annotations

import ast
import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mujoco
import numpy as np
import pytest
from script_runner import run_script
from test_glass_hiding import object_graph

from mjlab_tasks.glass_push import (
  EVALUATION_TABLES,
  TRAINING_TABLES,
  BudgetSpent,
  Exam,
  Examiner,
  ExaminerBatch,
  NoOffscreenGL,
  TrainingExaminer,
)
from mjlab_tasks.glass_push.examiner.routine import JAM_FORCE, TOUCH_FORCE
from mjlab_tasks.glass_push.examiner.world import GlassTable, GlassWorld
from mjlab_tasks.glass_push.hidden import (
  NOISE_HEIGHT,
  NOISE_POSITION,
  NOISE_WIDTH,
  Friction,
  PhysicsConfig,
)
from mjlab_tasks.glass_push.rules.tables import Glass, draw_table, training_table

ROOT = Path(__file__).resolve().parents[1]


def tumbler(gid, x, y, height=0.07, widest=0.07, foot=0.06, mass=0.15):
  return Glass(gid, "tumbler", x, y, height, widest, foot, mass)


def lone_world(*glasses, pushes=5, **physics) -> GlassTable:
  glasses = glasses or (tumbler(0, 0.45, -0.25),)
  physics = PhysicsConfig(glasses=tuple(glasses), **physics)
  return GlassTable.alone(10_001, pushes, physics)


def glass_xy(world: GlassTable, gid: int) -> np.ndarray:
  return np.array([[s["x"], s["y"]] for s in world.glass_states() if s["id"] == gid])[0]


def request(glass, start, heading=0.0, reach=0.08, travel=0.04, aim=(0.5, -0.25)):
  return dict(
    glass=glass,
    start=list(start),
    heading=heading,
    reach=reach,
    travel=travel,
    aim=list(aim),
  )


# -- tables and readings -------------------------------------------------------


def test_same_table_number_same_table_and_disjoint_ranges():
  a, b = draw_table(10025), draw_table(10025)
  assert a == b
  assert a != draw_table(10026)
  assert 7 <= len(a) <= 10
  assert {g.kind for t in range(10000, 10010) for g in draw_table(t)} == {
    "tumbler",
    "stemmed",
  }
  assert 10025 in EVALUATION_TABLES and 10025 not in TRAINING_TABLES
  assert set(TRAINING_TABLES).isdisjoint(EVALUATION_TABLES)
  # Non-overlapping placement: widest circles keep apart.
  for t in (10025, 10026, 3):
    gs = draw_table(t)
    for i, g in enumerate(gs):
      for h in gs[i + 1 :]:
        assert math.hypot(g.x - h.x, g.y - h.y) >= (g.widest + h.widest) / 2
  # The lightest glass slides under about a quarter newton (seed).
  lightest = min(g.mass for t in range(10000, 10050) for g in draw_table(t))
  assert 0.2 < lightest * Friction().glass_table * 9.81 < 0.3
  with pytest.raises(PermissionError):
    training_table(10025)
  assert training_table(5) == draw_table(5)
  with pytest.raises(ValueError):
    draw_table(20_000)


def test_drawn_tables_are_crowded_and_the_hand_fits_around():
  """Evaluation and training tables: most glasses have no room at the start
  (the examiner's room rule on the truth), taking glasses with room without
  any push leaves most of them on the table, and the hand can come down on
  every side of every glass, within reach and on the table top."""
  from mjlab_tasks.glass_push.rules.hand import REACH_MAX, REACH_MIN
  from mjlab_tasks.glass_push.rules.room import has_room
  from mjlab_tasks.glass_push.rules.tables import TABLE_Y, takeable_without_pushing

  for tables in (range(10000, 10020), range(0, 20)):
    glasses = room = takeable = 0
    for t in tables:
      gs = draw_table(t)
      xy = np.array([[g.x, g.y] for g in gs])
      widest = np.array([g.widest for g in gs])
      glasses += len(gs)
      room += sum(
        has_room(xy[i], widest[i], np.delete(xy, i, 0), np.delete(widest, i))
        for i in range(len(gs))
      )
      takeable += len(takeable_without_pushing(xy, widest))
      # Packed: every glass within 5 mm of another.
      gaps = (
        np.linalg.norm(xy[:, None] - xy[None], axis=2)
        - (widest[:, None] + widest[None]) / 2
      )
      np.fill_diagonal(gaps, np.inf)
      assert np.all(gaps.min(1) <= 0.005) and gaps.min() >= 0.0
      # A hand 40 mm outside any glass is within reach and on the table.
      dist = np.linalg.norm(xy, axis=1)
      assert np.all(dist + widest / 2 + 0.04 <= REACH_MAX)
      assert np.all(dist - widest / 2 - 0.04 >= REACH_MIN)
      assert np.all(xy[:, 1] - widest / 2 - 0.04 > TABLE_Y[0])
    assert room < 0.25 * glasses, (tables, room, glasses)
    assert takeable < 0.35 * glasses, (tables, takeable, glasses)


def test_first_look_identical_across_examiners_second_differs():
  with Exam([10025, 10025], pushes=3) as exam:
    first = [e.look() for e in exam.examiners]
    second = [e.look() for e in exam.examiners]
  assert first[0] == first[1]
  assert second[0] == second[1]
  assert second[0] != first[0]
  assert {tuple(r) for r in first[0]} == {
    ("id", "x", "y", "height", "widest", "foot", "standing")
  }


def test_look_noise_sizes_position_smallest_width_largest():
  world = GlassTable.alone(10025, 3)
  truth = {g.id: g for g in world.glasses}
  errs = {"pos": [], "height": [], "widest": [], "foot": []}
  for _ in range(40):
    for r in world.look():
      g = truth[r["id"]]
      errs["pos"] += [r["x"] - g.x, r["y"] - g.y]
      errs["height"].append(r["height"] - g.height)
      errs["widest"].append(r["widest"] - g.widest)
      errs["foot"].append(r["foot"] - g.foot)
  std = {k: float(np.std(v)) for k, v in errs.items()}
  assert std["pos"] == pytest.approx(NOISE_POSITION, rel=0.25)
  assert std["height"] == pytest.approx(NOISE_HEIGHT, rel=0.25)
  assert std["widest"] == pytest.approx(NOISE_WIDTH, rel=0.25)
  assert std["pos"] < std["height"] < min(std["widest"], std["foot"])


@pytest.mark.slow  # three examiner workers; the hiding tests use ExaminerBatch too
def test_batch_form_matches_single_examiners():
  batch = ExaminerBatch(tables=[10025, 10026], pushes=2, workers=2)
  try:
    looks = batch.look()
    g = looks[1][0]
    reports = batch.push(
      [None, request(g["id"], (g["x"], g["y"] + 0.3), heading=0.0, reach=0.02)]
    )
    assert reports[0] is None and reports[1]["touched"] is None
    with pytest.raises(ValueError, match="table 10025: unknown glass"):
      batch.take([99, None])
  finally:
    batch.close()
  with Exam([10025]) as exam:
    assert exam.examiners[0].look() == looks[0]
  with pytest.raises(ValueError, match="engine"):
    ExaminerBatch(tables=[10025], engine="bullet")


def force_log(world: GlassTable) -> list[np.ndarray]:
  """Record the wrist reading (the hand's net contact force, a 3-vector in
  the world frame) of every physics step from now on."""
  return world.log_forces()


def sliding_balance(log, heading, mu, mass) -> tuple[float, float]:
  """Over the steady slide (0.2 s after the first reading over the touch
  threshold to 50 ms before the last): the mean push along the heading, and
  what Coulomb friction asks of it at constant speed, mu (m g + the hand's
  mean downward push; the reading is the force the hand exerts)."""
  f = np.array(log)
  on = np.flatnonzero(np.linalg.norm(f, axis=1) > TOUCH_FORCE)
  slide = f[on[0] + 100 : on[-1] - 25]
  assert len(slide) > 500  # over a second of sliding
  forward = float(np.mean(slide @ [math.cos(heading), math.sin(heading), 0.0]))
  return forward, mu * (mass * 9.81 - float(np.mean(slide[:, 2])))


def line_chunk(x0, x1, y, z, speed=0.02):
  """Waypoints (x, y, z, heading 0) at 50 Hz along +x."""
  n = int(round(abs(x1 - x0) / (speed * 0.02))) + 1
  xs = np.linspace(x0, x1, n)
  return np.stack([xs, np.full(n, y), np.full(n, z), np.zeros(n)], 1)


# -- the push routine ----------------------------------------------------------


def test_low_push_slides_an_isolated_glass():
  world = lone_world()
  before = glass_xy(world, 0)
  log = force_log(world)
  report = world.push(request(0, (0.35, -0.25), travel=0.04, aim=(0.49, -0.25)))
  assert report["blocked"] is False and report["jammed"] is False
  # Pads (12.5 mm ahead of the tool) meet the 60-65 mm wide base after
  # about 100 - 32 - 12.5 = 55 mm of feeling.
  assert report["touched"] == pytest.approx(0.055, abs=0.004)
  # The peak is the largest reading of any step of the action, exactly.
  assert report["peak"] == float(np.max(np.linalg.norm(log, axis=1)))
  # Sliding 150 g at mu 0.35 takes mu (m g + the hand's downward push) on
  # average. The task's tumbler is three convex slices, and the pads, which
  # span the lowest slice's top seam, press it down by about 0.3 N (the
  # examiner's former single-hull tumbler: forward within 3 % of mu m g).
  forward, coulomb = sliding_balance(log, 0.0, Friction().glass_table, 0.15)
  assert forward == pytest.approx(coulomb, rel=0.03)
  assert 0.35 * 0.15 * 9.81 <= forward < 0.35 * 0.15 * 9.81 * 1.3
  assert report["pushed"] == pytest.approx(0.04, abs=0.003)
  moved = glass_xy(world, 0) - before
  assert moved[0] == pytest.approx(0.04, abs=0.008) and abs(moved[1]) < 0.005
  assert world.glass_states()[0]["standing"]
  action = world.actions[-1]
  assert action["aim_error"] == pytest.approx(
    float(np.hypot(*(glass_xy(world, 0) - (0.49, -0.25)))), abs=1e-9
  )
  # The hand path is recorded at 50 Hz: time, x, y, z, heading, force.
  path = action["path"]
  assert path.shape[1] == 6 and np.allclose(np.diff(path[:, 0]), 0.02)
  # Its force column samples every 10th step's reading, so never above the peak.
  assert TOUCH_FORCE < path[:, 5].max() <= report["peak"]


@pytest.mark.parametrize("mu", [0.35, 0.6])
def test_sliding_push_force_is_coulomb_friction(mu):
  """A glass slid at constant speed: the mean push along the heading equals
  the table's friction, mu times the normal force (weight plus the hand's
  mean downward push), from the PhysicsConfig's mu and the glass's mass.
  Tolerance 3 %: the glass's speed is only nearly constant (its small
  accelerations average out over 1.8 s, not exactly) and MuJoCo's soft
  contacts let friction sit a little inside the cone; measured within 1.5 %
  at mu 0.2, 0.35 and 0.6 and masses 0.1-0.3 kg."""
  world = lone_world(friction=Friction(glass_table=mu))
  log = force_log(world)
  world.push(request(0, (0.35, -0.25), travel=0.04))
  forward, coulomb = sliding_balance(log, 0.0, mu, 0.15)
  assert forward == pytest.approx(coulomb, rel=0.03)
  # And the force scales with mu: at least the weight's share.
  assert forward >= 0.97 * mu * 0.15 * 9.81


def test_push_started_on_top_of_a_glass_is_blocked():
  world = lone_world()
  report = world.push(request(0, (0.45, -0.25)))
  assert report["blocked"] is True
  assert report["touched"] is None and report["pushed"] == 0.0
  assert report["peak"] > TOUCH_FORCE
  assert world.hand_position()[2] >= world.z_safe - 0.002  # went back up


def test_push_into_a_fixed_obstacle_jams():
  world = lone_world(tumbler(0, 0.45, -0.42), obstacle=(0.50, -0.20))
  report = world.push(request(0, (0.38, -0.20), reach=0.08, travel=0.06))
  assert report["touched"] is not None and report["jammed"] is True
  assert report["peak"] > JAM_FORCE
  assert report["pushed"] < 0.01  # stopped where it jammed
  # The same through follow(): waypoints into the post jam and back off.
  world = lone_world(tumbler(0, 0.45, -0.42), obstacle=(0.50, -0.20))
  report = world.follow(line_chunk(0.40, 0.50, -0.20, 0.03))
  assert report["touched"] is not None and report["jammed"] is True
  assert report["peak"] > JAM_FORCE
  assert world.hand_position()[0] < 0.47 - 0.0125 - 0.01  # backed off


def test_push_with_nothing_in_reach_reports_no_touch():
  world = lone_world()
  report = world.push(request(0, (0.40, -0.05), reach=0.06))
  assert report == {
    "blocked": False,
    "touched": None,
    "jammed": False,
    "peak": 0.0,
    "pushed": 0.0,
  }


def test_tipping_follows_friction():
  """A 75 mm glass, foot half-width b = 20 mm, test friction mu = 0.4 on the
  table (b/mu = 50 mm). The lowest push meets it with the pads below 37 mm:
  it slides. Waypoints with the pads at 52-88 mm meet its upper wall, above
  b/mu: it topples. With mu = 0.1 (b/mu = 200 mm) the same high push slides."""
  glass = tumbler(0, 0.45, -0.25, height=0.075, widest=0.06, foot=0.04)
  high = line_chunk(0.36, 0.46, -0.25, 0.07)
  fr = Friction(glass_table=0.4, glass_glass=0.5, pad_glass=0.3)
  world = lone_world(glass, friction=fr)
  world.push(request(0, (0.36, -0.25), reach=0.07, travel=0.05))
  low_push = world.glass_states()[0]
  assert low_push["standing"] and low_push["x"] > 0.48
  world = lone_world(glass, friction=fr)
  report = world.follow(high, glass=0)
  assert report["touched"] is not None
  assert not world.glass_states()[0]["standing"]
  world = lone_world(glass, friction=Friction(0.1, 0.5, 0.3))
  world.follow(high, glass=0)
  slid = world.glass_states()[0]
  assert slid["standing"] and slid["x"] > 0.48


def test_follow_replays_a_recorded_push_as_a_demonstration():
  """A recorded push replayed through follow() on a fresh identical world
  reports the push's own touched and pushed (one rule, felt_distances: the
  forward distance of the approach at working height, and of the push
  after the touch; transit, descent, back-off and lift do not count)."""
  world = lone_world()
  pushed = world.push(request(0, (0.35, -0.25), travel=0.04))
  path = world.actions[-1]["path"]
  chunk = path[:, 1:5]  # x, y, z, heading at 50 Hz
  replay = lone_world()
  log = force_log(replay)
  report = replay.follow(chunk, glass=0, aim=(0.49, -0.25))
  assert report["blocked"] is False and report["jammed"] is False
  # The replayed hand trails the recorded one by one servo lag more, and
  # the approach starts at a 50 Hz sample, not the exact step: 2 mm.
  assert report["touched"] == pytest.approx(pushed["touched"], abs=0.002)
  assert report["pushed"] == pytest.approx(pushed["pushed"], abs=0.002)
  assert np.linalg.norm(glass_xy(replay, 0) - glass_xy(world, 0)) < 0.005
  forward, coulomb = sliding_balance(log, 0.0, Friction().glass_table, 0.15)
  assert forward == pytest.approx(coulomb, rel=0.03)
  assert report["peak"] == float(np.max(np.linalg.norm(log, axis=1)))
  assert replay.pushes_left == replay.budget - 1


def test_budget_and_bad_input():
  world = lone_world(tumbler(0, 0.45, -0.25), tumbler(1, 0.35, -0.05), pushes=1)
  with pytest.raises(ValueError, match="unknown glass"):
    world.push(request(7, (0.35, -0.25)))
  with pytest.raises(ValueError, match="reach"):
    world.push(request(0, (0.35, -0.25), reach=-0.01))
  with pytest.raises(ValueError, match="out of the arm's reach"):
    world.push(request(0, (0.05, 0.0)))
  with pytest.raises(ValueError, match="keys"):
    world.push({"glass": 0})
  with pytest.raises(ValueError, match="chunk"):
    world.follow([[0.4, -0.2, 0.1]])
  assert world.pushes_left == 1  # rejected requests cost nothing
  world.push(request(0, (0.40, -0.05), reach=0.02))
  with pytest.raises(BudgetSpent):
    world.push(request(0, (0.40, -0.05), reach=0.02))
  world.take(0)
  with pytest.raises(ValueError, match="already taken"):
    world.take(0)
  with pytest.raises(ValueError, match="already taken"):
    world.refuse(0, "too late")
  with pytest.raises(ValueError, match="reason"):
    world.refuse(1, "")
  world.refuse(1, "tips before it slides")


def test_take_records_true_room():
  world = lone_world(
    tumbler(0, 0.45, -0.25),
    tumbler(1, 0.45 + 0.072, -0.25),  # 2 mm from glass 0
    tumbler(2, 0.45 - 0.073, -0.25),
    tumbler(3, 0.45, -0.25 + 0.073),
    tumbler(4, 0.45, -0.25 - 0.073),
    tumbler(5, 0.35, -0.05),
  )
  world.take(0)  # boxed in on four sides: no room for a finger pair
  world.take(5)  # alone
  assert world.taken[0]["room"] is False
  assert world.taken[5]["room"] is True
  assert {r["id"] for r in world.look()} == {1, 2, 3, 4}
  world.refuse(1, "no clear place to go")
  assert world.record()["refused"] == {1: "no clear place to go"}


# -- pictures ------------------------------------------------------------------


def test_top_view_and_film_leave_the_scored_world_unchanged(tmp_path):
  """Table 10025 filmed (and pictured) and not: bitwise the same final glass
  positions. That check always runs; only the pictures' own checks are
  skipped, and only when the worker reports no offscreen OpenGL at all
  (NoOffscreenGL, raised solely by failing to make a GL context)."""

  def run(film: bool):
    no_gl = None
    with Exam([10025], pushes=2, film=film) as exam:
      (examiner,) = exam.examiners
      g = examiner.look()[0]
      if film:
        try:
          image = examiner.top_view()
        except NoOffscreenGL as err:
          no_gl = err
        else:
          assert image.shape == (384, 384, 3) and image.dtype == np.uint8
          assert image.std() > 5  # not blank
      examiner.push(request(g["id"], (g["x"] - 0.09, g["y"]), travel=0.03))
      examiner.take(g["id"])
      (record,) = exam.records()
      if film and no_gl is None:
        (frames,) = exam.write_films([tmp_path / "film.mp4"])
        assert frames > 10 and (tmp_path / "film.mp4").stat().st_size > 10_000
    return np.array([[s["x"], s["y"], s["z"]] for s in record["final"]]), no_gl

  # Both runs at once, each in its own worker process.
  with ThreadPoolExecutor(2) as pool:
    (plain, _), (filmed, no_gl) = pool.map(run, (False, True))
  finals = [plain, filmed]
  np.testing.assert_array_equal(finals[0], finals[1])
  if no_gl is not None:
    pytest.skip(f"final positions equal; pictures unchecked: {no_gl}")


def slot_colours(model) -> dict[int, set]:
  """The colours of each glass slot's geoms, read from the model by name."""
  out: dict[int, set] = {}
  for g in range(model.ngeom):
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
    if name.startswith("glass_"):
      slot = int(name.split("/")[0].split("_")[1])
      out.setdefault(slot, set()).add(tuple(np.round(model.geom_rgba[g], 4)))
  return out


def test_each_tables_picture_model_has_its_own_glass_colours():
  """A table's picture model colours each slot by the kind of that table's
  glass (hand reference: the palette and the drawn table), also when it
  is not the first table of its world: the colours are not per-world
  fields, and were once the first table's for every table."""
  from mjlab_tasks.glass_push.rules.glasses import PALETTE
  from mjlab_tasks.glass_push.scene import SLOTS, slot_glass

  world = GlassWorld([10025, 10032], 2)
  try:
    models = [world._table_model(0), world._table_model(1)]
    glasses = world.glasses
  finally:
    world.close()
  kinds = [[slot_glass(glasses[i], s).kind for s in range(SLOTS)] for i in (0, 1)]
  assert kinds[0] != kinds[1]  # the case that went wrong
  for i, model in enumerate(models):
    colours = slot_colours(model)
    assert sorted(colours) == list(range(SLOTS))
    for slot in range(SLOTS):
      expected = tuple(np.round(np.array(PALETTE[kinds[i][slot]], np.float32), 4))
      assert colours[slot] == {expected}, (i, slot)


@pytest.mark.slow  # Two worlds and two pictures; the default tier is full.
def test_a_tables_picture_does_not_depend_on_the_tables_beside_it():
  """Table 10032's top view alone and as the second table of a world:
  bitwise the same."""
  alone, beside = GlassWorld([10032], 2), GlassWorld([10025, 10032], 2)
  try:
    try:
      first = alone.top_view(0)
    except NoOffscreenGL as err:
      pytest.skip(f"no offscreen OpenGL: {err}")
    np.testing.assert_array_equal(first, beside.top_view(1))
  finally:
    alone.close()
    beside.close()


@pytest.mark.slow  # A two-table world and three pictures; the default tier is full.
def test_a_renderer_let_go_draws_the_same_picture_again(monkeypatch):
  """A world keeps at most RENDERERS_KEPT picture renderers (each holds a
  model copy and a GL context; 32 tables once took 12 GB): here one, so
  table 10026's picture lets table 10025's renderer go, and the one built
  again draws 10025 bitwise as before."""
  from mjlab_tasks.glass_push.examiner import world as world_module

  monkeypatch.setattr(world_module, "RENDERERS_KEPT", 1)
  world = GlassWorld([10025, 10026], 2)
  try:
    try:
      first = world.top_view(0)
    except NoOffscreenGL as err:
      pytest.skip(f"no offscreen OpenGL: {err}")
    other = world.top_view(1)
    assert list(world._renderers) == [1]
    again = world.top_view(0)
    assert list(world._renderers) == [0]
  finally:
    world.close()
  np.testing.assert_array_equal(first, again)
  assert not np.array_equal(first, other)


# -- hiding --------------------------------------------------------------------


def test_nothing_hidden_is_reachable_from_the_solution_api():
  # The three examiners start at once (each has its own worker processes).
  with ThreadPoolExecutor(3) as pool:
    starting = [
      pool.submit(Examiner, table=10025, pushes=2),
      pool.submit(ExaminerBatch, tables=[10025, 10026], pushes=2, workers=2),
      pool.submit(TrainingExaminer, 5, pushes=1),
    ]
  started = [f.result() for f in starting if f.exception() is None]
  try:
    assert len(started) == 3, [f.exception() for f in starting]
    examiner, batch, trainer = started
    examiner.look()
    truth = draw_table(10025)
    secret_floats = {g.mass for g in truth} | {g.x for g in truth}
    secret_floats |= {g.height for g in truth} | set(vars(Friction()).values())
    for name in ("look", "push", "take", "follow", "top_view", "refuse"):
      objs = object_graph(getattr(examiner, name))
      for obj in objs:
        assert not isinstance(
          obj, (mujoco.MjModel, mujoco.MjData, GlassWorld, GlassTable, Glass)
        )
        assert not isinstance(obj, np.ndarray) or obj.size == 0
        if isinstance(obj, float):
          assert obj not in secret_floats, obj
    assert not hasattr(examiner, "__dict__")
    with pytest.raises(AttributeError):
      examiner.record  # noqa: B018
    with pytest.raises(ValueError, match="unknown request"):
      examiner._ask("record")
    for name in ("look", "push", "follow", "take", "top_view", "refuse"):
      for obj in object_graph(getattr(batch, name)):
        assert not isinstance(
          obj, (mujoco.MjModel, mujoco.MjData, GlassWorld, GlassTable, Glass)
        )
        assert not isinstance(obj, float) or obj not in secret_floats
    with pytest.raises(PermissionError):
      TrainingExaminer(10025)
    # The training interface hands out the truth, for training tables only.
    truth = trainer.truth()
    assert [Glass(**g) for g in truth["glasses"]] == training_table(5)
    assert "friction" not in truth
  finally:
    for started_examiner in started:
      started_examiner.close()


def _imported_modules(path: Path) -> list[str]:
  """Every module a file imports (``from X import`` and ``import X``)."""
  out = []
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom):
      out.append(node.module or "")
    if isinstance(node, ast.Import):
      out += [a.name for a in node.names]
  return out


def test_layout_imports():
  """The rules (``mjlab_tasks/glass_push/rules/``) import only each other and
  the robot's plain numbers: never the task, the examiner, the hidden truth,
  mjlab, MuJoCo, experts or scripts; they score any controller the same
  way. The hidden truth (``hidden.py``) reads only the rules. Shipped
  solutions use only the examiner's public API."""
  package = ROOT / "mjlab_tasks" / "glass_push"
  rules = sorted((package / "rules").glob("*.py"))
  assert len(rules) > 5
  never = ("mjlab", "mujoco", "evaluators", "experts", "scripts")
  for path in rules:
    for module in _imported_modules(path):
      top = module.split(".")[0]
      assert top not in never, (path, module)
      if top in ("mjlab_tasks", "assets"):
        assert module.startswith("mjlab_tasks.glass_push.rules.") or (
          module == "assets.ur5_rg2_dimensions"
        ), (path, module)
  for module in _imported_modules(package / "hidden.py"):
    top = module.split(".")[0]
    assert top not in (*never, "assets"), module
    if top == "mjlab_tasks":
      assert module.startswith("mjlab_tasks.glass_push.rules"), module
  for path in (ROOT / "experts" / "glass_push").glob("*.py"):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
      module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
      if module.startswith(("evaluators", "mjlab_tasks")):
        assert module == "mjlab_tasks.glass_push", (path, module)
        assert {a.name for a in node.names} <= {
          "Examiner",
          "ExaminerBatch",
          "BudgetSpent",
          "HAND",
          "has_room",
          "push_request",
          "start_is_clear",
        }, path
      if isinstance(node, ast.Import):
        assert not any(
          a.name.startswith(("evaluators", "mjlab_tasks")) for a in node.names
        )


# -- scoring, solutions, CLI -----------------------------------------------------


def test_scoring_counts_from_the_record():
  from mjlab_tasks.glass_push.rules.scoring import markdown, score_record, summarize

  world = lone_world(tumbler(0, 0.45, -0.25), tumbler(1, 0.35, -0.05), pushes=3)
  world.push(request(0, (0.35, -0.25), travel=0.03, aim=(0.50, -0.25)))
  world.take(1)
  world.refuse(0, "testing")
  row = score_record(world.record())
  assert row["taken_with_room"] == 1 and row["taken_without_room"] == 0
  assert row["pushes_used"] == 1 and row["budget"] == 3
  assert row["toppled"] == 0 and row["knocked_off"] == 0
  assert row["left_on_table"] == 1 and row["refusals"] == 1
  assert row["room_at_start"] == 2 and row["takeable_without_pushing"] == 2
  assert row["aim_error_mean"] == pytest.approx(world.actions[0]["aim_error"])
  total = summarize([row, row])
  assert total["taken_with_room"] == 2 and total["tables"] == 2
  assert "| 10001 |" in markdown("x", [row], summarize([row]))


def test_geometric_solution_respects_the_tipping_limit():
  from experts.glass_push.geometric import (
    MU_PRIOR,
    FrictionEstimate,
    contact_height,
    mass_estimate,
    tipping_limit_ok,
  )

  low = {"height": 0.07, "widest": 0.07, "foot": 0.06}
  tall = {"height": 0.15, "widest": 0.07, "foot": 0.045}
  assert contact_height(low) < 0.04 < 0.079 < contact_height(tall)
  assert tipping_limit_ok(low, MU_PRIOR)
  assert not tipping_limit_ok(tall, MU_PRIOR)
  est = FrictionEstimate()
  m = mass_estimate(tall)
  report = {"blocked": False, "jammed": False, "touched": 0.01, "pushed": 0.03}
  for mu in (0.15, 0.2, 0.25):
    est.add(tall, dict(report, peak=mu * m * 9.81))
  est.add(tall, dict(report, peak=99.0, jammed=True))  # not evidence
  assert est.mu == pytest.approx(0.2)
  assert tipping_limit_ok(tall, est.mu)


def test_geometric_shove_prediction_and_probe():
  from experts.glass_push.geometric import PROBE, plan_shove, shove_prediction

  def reading(gid, x, y, height=0.07):
    return dict(id=gid, x=x, y=y, height=height, widest=0.07, foot=0.06, standing=True)

  # Glass 0 pushed 30 mm along +x into glass 1 (2 mm ahead): 1 is carried
  # 28 mm; glass 2, beside the path, stays.
  row = [reading(0, 0.40, -0.25), reading(1, 0.472, -0.25), reading(2, 0.40, -0.15)]
  new = shove_prediction(row, 0, 0.0, 0.03)
  assert new[0] == pytest.approx([0.43, -0.25])
  assert new[1] == pytest.approx([0.50, -0.25])
  assert new[2] == pytest.approx([0.40, -0.15])
  # Before any friction evidence the shove is a 10 mm probe.
  crowd = [
    reading(g.id, g.x, g.y, g.height) | {"widest": g.widest, "foot": g.foot}
    for g in training_table(0)
  ]
  probe = plan_shove(crowd, set(), 0.5, probe=True)
  assert probe is not None and probe[0]["travel"] == PROBE and probe[1] > 0


def run_cli(*args: str):
  return run_script("glass_push_exam.py", *args, timeout=900)


def test_cli_scores_a_table_range_and_refuses_an_existing_folder(tmp_path):
  out = tmp_path / "exam"
  result = run_cli(
    "--solution", "nudge", "--tables", "10000-10001", "--output", str(out)
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "scores.json").read_text())
  assert [r["table"] for r in report["rows"]] == [10000, 10001]
  assert report["total"]["glasses"] == sum(len(draw_table(t)) for t in (10000, 10001))
  assert report["source"]["sources_sha256"]
  assert "| **all 2** |" in (out / "scores.md").read_text()
  record = json.loads((out / "tables" / "10000.json").read_text())
  assert "friction" not in record
  demos = np.load(out / "demos" / "10000.npz")
  actions = [k for k in demos.files if k.startswith("action_")]
  assert len(actions) == record["pushes_used"]
  for k in actions:
    assert demos[k].shape[1] == 6
  again = run_cli("--solution", "nudge", "--tables", "10000", "--output", str(out))
  assert again.returncode != 0 and "already exists" in again.stderr
  bad = run_cli(
    "--solution", "nudge", "--tables", "9-3", "--output", str(tmp_path / "b")
  )
  assert bad.returncode != 0 and "empty" in bad.stderr
  help_text = run_cli("--help").stdout
  for flag in (
    "--solution",
    "--tables",
    "--output",
    "--pushes",
    "--film",
    "--jobs",
    "--engine",
  ):
    assert flag in help_text


def test_lockstep_run_gives_each_table_its_own_run():
  """Exam.run_together runs per-table solutions in threads with their pushes
  batched (the Warp CLI's path); on the deterministic C engine every table
  must end exactly as when run alone."""
  from experts.glass_push import SOLUTIONS

  tables = [10000, 10003]

  def lockstep() -> tuple[list, list, list]:
    with Exam(tables, pushes=4, workers=1) as exam:
      rounds = []
      errors = exam.run_together(SOLUTIONS["nudge"], on_round=rounds.append)
      return errors, rounds, exam.records()

  def alone(table: int) -> dict:
    with Exam([table], pushes=4) as exam:
      SOLUTIONS["nudge"](exam.examiners[0])
      (single,) = exam.records()
    return single

  # The three exams at once, each in its own worker process.
  with ThreadPoolExecutor(3) as pool:
    together_run = pool.submit(lockstep)
    singles = list(pool.map(alone, tables))
    errors, rounds, together = together_run.result()
  assert errors == [None, None]
  # Both tables' pushes went out together (a request past the budget is
  # answered with BudgetSpent and uses no push).
  assert max(rounds) == 2
  assert sum(rounds) >= sum(r["pushes_used"] for r in together) > 0
  for record, single in zip(together, singles, strict=True):
    assert record["final"] == single["final"]
    assert record["taken"] == single["taken"]
    assert [a["report"] for a in record["actions"]] == [
      a["report"] for a in single["actions"]
    ]


def test_hand_numbers_match_the_robot_model():
  from assets.ur5_rg2.model import RG2_TCP_OFFSET, build_ur5_rg2_spec
  from mjlab_tasks.glass_push import HAND

  model = build_ur5_rg2_spec().compile()
  housing = model.geom("rg2_housing")
  pad = model.geom("left_pad")
  # The tool points down; the hand's y axis leads along the heading.
  top_of_housing_gap = RG2_TCP_OFFSET - (housing.pos[2] + housing.size[2])
  assert HAND["housing_above_tcp"] == pytest.approx(top_of_housing_gap)
  assert HAND["housing_lead"] == pytest.approx(housing.size[1])
  assert HAND["pad_lead"] == pytest.approx(pad.size[1])
  assert HAND["pad_half_z"] == pytest.approx(pad.size[2])
  assert HAND["lowest_tcp_z"] == pytest.approx(pad.size[2] + 0.002)
