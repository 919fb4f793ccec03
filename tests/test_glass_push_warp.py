"""The glass examiner's ``GlassWorld`` on MuJoCo Warp (``engine="warp"``)
against the same world on C MuJoCo (``engine="mujoco"``): the same tables,
readings, push routine, follow(), take() and records, several tables
stepped as one batch. CPU Warp (every table steps, one physics step at a
time through mjlab's managers: about 30 steps a second for two tables on two
CPU cores, so a push takes minutes and the pushes are in the slow tier)."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from mjlab.envs import ManagerBasedRlEnv
from test_glass_hiding import object_graph
from test_glass_push import sliding_balance

from mjlab_tasks.glass_push import Exam
from mjlab_tasks.glass_push.examiner.hand import HandRunner
from mjlab_tasks.glass_push.examiner.routine import JAM_FORCE
from mjlab_tasks.glass_push.examiner.world import GlassTable, GlassWorld
from mjlab_tasks.glass_push.hidden import Friction, PhysicsConfig
from mjlab_tasks.glass_push.rules.glasses import glass_parts
from mjlab_tasks.glass_push.rules.tables import Glass, draw_table

HIDDEN = (
  mujoco.MjModel,
  mujoco.MjData,
  GlassWorld,
  GlassTable,
  HandRunner,
  ManagerBasedRlEnv,
  Glass,
  torch.Tensor,
  wp.array,
  np.ndarray,
)

NOTHING = {
  "blocked": False,
  "touched": None,
  "jammed": False,
  "peak": 0.0,
  "pushed": 0.0,
}


def push(start, heading=0.0, reach=0.08, travel=0.04, aim=(0.5, -0.42)):
  return dict(
    glass=0,
    start=list(start),
    heading=heading,
    reach=reach,
    travel=travel,
    aim=list(aim),
  )


def line_chunk(x0, x1, y, z, speed=0.02):
  """Waypoints (x, y, z, heading 0) at 50 Hz along +x."""
  n = int(round(abs(x1 - x0) / (speed * 0.02))) + 1
  xs = np.linspace(x0, x1, n)
  return np.stack([xs, np.full(n, y), np.full(n, z), np.zeros(n)], 1)


def test_glass_parts_keep_mass_and_shape(rng):
  for kind in ("tumbler", "stemmed"):
    h = rng.uniform(0.08, 0.2)
    g = Glass(0, kind, 0.0, 0.0, h, 0.08, 0.06, 0.2, 0.4 * h, 0.004, 0.004)
    parts = glass_parts(g)
    assert sum(mass for _, mass in parts) == pytest.approx(g.mass)
    verts = np.concatenate([v for v, _ in parts])
    assert verts[:, 2].min() == pytest.approx(0.0) and verts[
      :, 2
    ].max() == pytest.approx(h)
    radius = np.hypot(verts[:, 0], verts[:, 1])
    assert radius.max() == pytest.approx(0.04)  # the widest ring
    assert radius[verts[:, 2] < 1e-9].max() == pytest.approx(0.03)  # the foot


@pytest.mark.slow  # minutes of MuJoCo Warp on 2 CPU cores; the C-engine tests cover the rules
def test_batched_pushes_and_follow_match_the_c_world():
  """Four tables in one Warp world, each doing something else, against the
  same four tables in one C world: a low push slides the glass, a push into
  a fixed post jams, a follow() into the post jams and backs off, a push
  with nothing in reach reports no touch."""
  physics = PhysicsConfig(
    glasses=(Glass(0, "tumbler", 0.45, -0.42, 0.07, 0.07, 0.06, 0.15),),
    obstacle=(0.50, -0.20),
  )
  actions = [
    ("push", push((0.35, -0.42))),
    ("push", push((0.38, -0.20), reach=0.08, travel=0.06)),
    ("follow", line_chunk(0.40, 0.50, -0.20, 0.03), None, None),
    ("push", push((0.45, 0.05), reach=0.05, travel=0.02)),
  ]
  batch = GlassWorld([10_001] * 4, 3, physics, engine="warp", device="cpu")
  # Every physics step's wrist reading of every acting table.
  batch.hand.force_log = log = [[] for _ in actions]
  replies = batch.act(dict(enumerate(actions)))
  warp = [replies[i][1] for i in range(4)]
  c_world = GlassWorld([10_001] * 4, 3, physics, engine="mujoco")
  c_replies = c_world.act(dict(enumerate(actions)))
  c = [c_replies[i][1] for i in range(4)]
  assert [replies[i][0] for i in range(4)] == ["ok"] * 4
  assert [c_replies[i][0] for i in range(4)] == ["ok"] * 4
  for i, (w, r) in enumerate(zip(warp, c, strict=True)):
    print(f"table {i}: Warp {w}\n         C    {r}")
  for w, r in zip(warp, c, strict=True):
    assert (w["blocked"], w["jammed"]) == (r["blocked"], r["jammed"])
    assert (w["touched"] is None) == (r["touched"] is None)
  # The slide: where the glass was met, how far it was pushed, where it ended.
  assert warp[0]["touched"] == pytest.approx(c[0]["touched"], abs=0.003)
  assert warp[0]["pushed"] == pytest.approx(c[0]["pushed"], abs=0.003)
  # Coulomb sliding, as on the C engine (test_sliding_push_force_is_coulomb_
  # friction): the mean push along the heading is mu times the normal force.
  # 5 %: float32 physics and MuJoCo Warp's own contacts on top of the C
  # check's 3 %.
  forward, coulomb = sliding_balance(log[0], 0.0, Friction().glass_table, 0.15)
  assert forward == pytest.approx(coulomb, rel=0.05)
  assert warp[0]["peak"] == pytest.approx(
    float(np.max(np.linalg.norm(log[0], axis=1))), rel=1e-6
  )
  end_w = batch.glass_states(0)[0]
  end_c = c_world.glass_states(0)[0]
  print(f"glass end: Warp {end_w}\n           C    {end_c}")
  assert end_w["standing"] and end_c["standing"]
  assert np.hypot(end_w["x"] - end_c["x"], end_w["y"] - end_c["y"]) < 0.004
  assert batch.actions[0][0]["aim_error"] == pytest.approx(
    np.hypot(end_w["x"] - 0.5, end_w["y"] + 0.42), abs=1e-6
  )
  # Into the post: jammed past 20 N, stopped where it jammed.
  for report in (warp[1], warp[2]):
    assert report["jammed"] and report["peak"] > JAM_FORCE
  assert warp[1]["pushed"] < 0.01
  assert batch.hand_positions()[2, 0] < 0.47 - 0.0125 - 0.01  # follow backed off
  # Nothing in reach: exactly nothing, the glass untouched.
  assert warp[3] == NOTHING == c[3]
  # Every action's hand path at 50 Hz; one push of the budget each.
  for i in range(4):
    path = batch.actions[i][0]["path"]
    assert path.shape[1] == 6 and len(path) > 50
    assert np.allclose(np.diff(path[:, 0]), 0.02, atol=1e-3)
  assert list(batch.pushes_left) == [2, 2, 2, 2]
  assert [r["engine"] for r in (batch.record(0), c_world.record(0))] == [
    "warp",
    "mujoco",
  ]
  c_world.close()
  # The slide's recorded path replayed through follow() on a fresh identical
  # world: the push's own touched and pushed (felt_distances, the one rule
  # of both engines), within 2 mm as on the C engine.
  chunk = batch.actions[0][0]["path"][:, 1:5]
  batch.close()
  fresh = GlassWorld([10_001], 3, physics, engine="warp", device="cpu")
  (reply,) = fresh.act({0: ("follow", chunk, 0, (0.5, -0.42))}).values()
  assert reply[0] == "ok"
  replay = reply[1]
  print(f"Warp push {warp[0]}\nWarp replay through follow() {replay}")
  assert replay["blocked"] is False and replay["jammed"] is False
  assert replay["touched"] == pytest.approx(warp[0]["touched"], abs=0.002)
  assert replay["pushed"] == pytest.approx(warp[0]["pushed"], abs=0.002)
  end_r = fresh.glass_states(0)[0]
  assert np.hypot(end_r["x"] - end_w["x"], end_r["y"] - end_w["y"]) < 0.005
  fresh.close()


@pytest.mark.slow  # 45 s: Warp on the CPU; the overflow test keeps Warp in the fast tier
def test_warp_examiner_serves_drawn_tables_like_the_c_one(tmp_path):
  """Two different drawn tables in one Warp world: the same glasses standing
  in the same places as in the C world (so each table's meshes, masses and
  places reached its own environment), the same first look, and the calls."""
  tables = [10025, 10026]
  truth = [g for t in tables for g in draw_table(t)]
  secret_floats = {g.mass for g in truth} | {g.x for g in truth}
  secret_floats |= {g.height for g in truth} | set(vars(Friction()).values())
  c_world = GlassWorld(tables, 3, engine="mujoco")
  c_looks = [c_world.look(i) for i in range(len(tables))]
  c_world.close()
  with Exam(tables, pushes=1, engine="warp", film=True) as exam:
    looks = exam.batch.look()
    for look, c_look in zip(looks, c_looks, strict=True):
      assert [r["id"] for r in look] == [r["id"] for r in c_look]
      for r, rc in zip(look, c_look, strict=True):
        for key in ("height", "widest", "foot", "standing"):
          assert r[key] == rc[key]
        assert abs(r["x"] - rc["x"]) <= 0.0006 and abs(r["y"] - rc["y"]) <= 0.0006
    assert exam.batch.look() != looks  # the second look differs
    # Nothing hidden reachable from what a solution holds: the clients, and
    # the examiner a solution gets inside run_together (lockstep).
    seen = []
    exam.run_together(lambda examiner: seen.extend(object_graph(examiner.look)))
    for client in (exam.examiners[0].look, exam.batch.push, *seen):
      for obj in object_graph(client) if callable(client) else [client]:
        assert not isinstance(obj, HIDDEN), type(obj)
        assert not isinstance(obj, float) or obj not in secret_floats
    pictures = exam.batch.top_view()
    assert [p.shape for p in pictures] == [(384, 384, 3)] * 2
    assert pictures[0].dtype == np.uint8 and not np.array_equal(*pictures)
    first = looks[0][0]["id"]
    exam.batch.take([first, None])
    exam.batch.refuse([None, looks[1][0]["id"]], [None, "tips before it slides"])
    with pytest.raises(ValueError, match="already taken"):
      exam.examiners[0].take(first)
    with pytest.raises(ValueError, match="needs exactly the keys"):
      exam.examiners[1].push({"glass": 0})
    assert first not in [r["id"] for r in exam.examiners[0].look()]
    records = exam.records()
    films = [tmp_path / f"{t}.mp4" for t in tables]
    frames = exam.write_films(films)
  # The start's 0.5 s settle and the take's 0.2 s hold at 10 fps (as on the
  # C engine; the former Warp batch dropped the start); the film files are
  # there.
  assert frames == [7, 7] and all(f.stat().st_size > 0 for f in films)
  assert [r["engine"] for r in records] == ["warp", "warp"]
  assert list(records[0]["taken"]) == [first]
  assert records[0]["final"][0]["where"] == "rack"
  assert records[1]["refused"] == {looks[1][0]["id"]: "tips before it slides"}
  assert [r["pushes_used"] for r in records] == [0, 0]


@pytest.mark.slow
def test_cli_examines_tables_in_one_warp_batch(tmp_path):
  """The CLI's --engine warp path: every table one world of one batch, the
  solution's pushes stepped together, the same outputs as on the C engine."""
  from script_runner import run_script

  out = tmp_path / "exam"
  result = run_script(
    "glass_push_exam.py",
    *("--solution", "geometric", "--tables", "10000-10001", "--pushes", "2"),
    *("--engine", "warp", "--output", str(out)),
    timeout=3600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "scores.json").read_text())
  assert report["engine"] == "warp"
  assert [r["table"] for r in report["rows"]] == [10000, 10001]
  for table in (10000, 10001):
    record = json.loads((out / "tables" / f"{table}.json").read_text())
    assert record["engine"] == "warp" and "friction" not in record
    demos = np.load(out / "demos" / f"{table}.npz")
    assert (
      len([k for k in demos.files if k.startswith("action_")])
      == (record["pushes_used"])
    )


def test_buffer_overflow_is_flagged_not_silent():
  """Too few constraint rows for a table's pile: MuJoCo Warp drops
  constraints, and the world says so (warning and record). The rows are cut
  to 8 after the build (a settled table 10025 needs 153; MuJoCo Warp
  refuses fewer rows at the build than mjlab's template data holds, 3781,
  every glass slot at its default place), then the take's
  hold steps the physics. One table: Warp on the CPU is slow."""
  world = GlassWorld([10025], 1, engine="warp", device="cpu")
  assert world.record(0)["physics_overflow"] == 0
  world.sim.wp_data.njmax = 8
  with pytest.warns(RuntimeWarning, match=r"overflowed .* tables \[10025\]"):
    world.take({0: world.glasses[0][0].id})
  assert world.record(0)["physics_overflow"] != 0
  world.close()
