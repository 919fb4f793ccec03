"""What a solution can reach from the glass examiner's clients: every pipe or
anything else with send/recv found in their object graphs, asked every
request name, must never answer with hidden state (true masses, shapes,
poses, friction). The training interface answers the truth only for
training tables, never friction. Valid look, top_view, push, follow, take
and refuse requests answer exactly the documented keys and types, and no
value equal to a hidden one. CPU, C MuJoCo."""

from __future__ import annotations

import gc
import types
from multiprocessing.connection import Connection

import numpy as np
import pytest

from mjlab_tasks.glass_push import Exam, Examiner, ExaminerBatch, TrainingExaminer
from mjlab_tasks.glass_push.examiner.server import PRIVATE, PUBLIC
from mjlab_tasks.glass_push.examiner.world import GlassTable
from mjlab_tasks.glass_push.hidden import Friction
from mjlab_tasks.glass_push.rules.tables import draw_table, training_table

# Every request name the worker knows, and a few it does not.
OPS = sorted(PUBLIC | PRIVATE | {"close", "glass_states", "physics", "__init__"})
WALK_LIMIT = 200_000  # objects; the clients' graphs hold a few thousand


def object_graph(root) -> list:
  """Everything reachable from ``root`` through attributes, slots,
  containers, bound methods, closures and defaults (``gc.get_referents``),
  not through classes, modules or functions' globals, which any import
  reaches anyway."""
  seen, out, stack = set(), [], [root]
  while stack:
    obj = stack.pop()
    if id(obj) in seen:
      continue
    seen.add(id(obj))
    out.append(obj)
    assert len(out) < WALK_LIMIT, "object graph larger than expected"
    if isinstance(obj, (type, types.ModuleType, types.CodeType)):
      continue
    if isinstance(obj, types.FunctionType):
      stack.extend(c.cell_contents for c in obj.__closure__ or () if _filled(c))
      stack.extend(obj.__defaults__ or ())
      stack.extend((obj.__kwdefaults__ or {}).values())
      continue
    for cls in type(obj).__mro__:
      for slot in cls.__dict__.get("__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
          stack.append(getattr(obj, slot))
    stack.extend(gc.get_referents(obj))
  return out


def _filled(cell) -> bool:
  try:
    cell.cell_contents  # noqa: B018
  except ValueError:
    return False
  return True


def _channels(root) -> list:
  """Every pipe end and every other object with send() and recv()."""
  return [
    obj
    for obj in object_graph(root)
    if not isinstance(obj, type)
    and (
      isinstance(obj, Connection)
      or (
        callable(getattr(type(obj), "send", None))
        and callable(getattr(type(obj), "recv", None))
      )
    )
  ]


def _secrets(tables, glasses_now) -> tuple[set, set]:
  """(floats, words) that must never come back: the tables' true shapes,
  masses and places and the true poses now (full-precision floats, which a
  reading rounded to 0.1 mm never equals), and the friction's key names.
  The friction coefficients themselves are short decimals that a reading
  can equal by chance (x = 0.35 m): ``_hidden_in`` looks for all three
  together instead."""
  floats = set()
  for t in tables:
    for g in draw_table(t):
      floats |= {g.x, g.y, g.height, g.widest, g.foot, g.mass}
  for states in glasses_now:
    for s in states:
      floats |= {s["x"], s["y"], s["z"], s["upright"]}
  return floats, {"friction", "mass", "glass_table", "pad_glass", "glass_glass"}


FRICTION = set(vars(Friction()).values())


def _hidden_in(value, floats, words, path="reply") -> list[str]:
  """Where ``value`` holds a secret float, a secret key or every friction
  coefficient in one container."""
  found = []
  if isinstance(value, (dict, list, tuple)):
    items = value.items() if isinstance(value, dict) else enumerate(value)
    items = list(items)
    if FRICTION <= {v for _, v in items if isinstance(v, float)}:
      found.append(f"{path}: the friction coefficients")
    for k, v in items:
      if isinstance(value, dict) and str(k) in words:
        found.append(f"{path} key {k!r}")
      found += _hidden_in(v, floats, words, f"{path}[{k!r}]")
  elif isinstance(value, np.ndarray):
    if value.dtype.kind == "f" and np.isin(value, list(floats)).any():
      found.append(f"{path}: array with a secret value")
  elif isinstance(value, float):
    if value in floats:
      found.append(f"{path} = {value!r}")
  elif isinstance(value, str):
    found += [f"{path}: text {value!r}" for f in floats if repr(f) in value]
  return found


def _ask(channel, op: str):
  """One request (slot 0, no arguments) on a channel; its reply, or None if
  the channel is closed."""
  if isinstance(channel, Connection):
    if channel.closed:
      with pytest.raises(OSError):
        channel.send([(0, op, ())])
      return None
    channel.send([(0, op, ())])
    assert channel.poll(120), f"no answer to {op!r}"
  else:
    channel.send([(0, op, ())])
  return channel.recv()


def _probe(root, floats, words, allowed=()) -> dict:
  """Ask every channel reachable from ``root`` every request; assert that no
  reply holds a secret, except replies to the ``allowed`` requests, which
  are returned ({op: [replies]}) for the caller to check."""
  channels = _channels(root)
  assert channels, "the walk found no pipe at all"
  served = {}
  for channel in channels:
    for op in OPS:
      if op == "close":
        continue  # closing is allowed to any holder and ends the run
      reply = _ask(channel, op)
      if reply is None:
        continue
      if op in allowed and reply[0][0] == "ok":
        served.setdefault(op, []).append(reply[0][1])
        continue
      assert not _hidden_in(reply, floats, words), (op, channel)
      if op in PRIVATE:
        assert reply[0][0] == "error", (op, reply)
  return served


def _true_states(table: int) -> list[dict]:
  return GlassTable.alone(table, 2).glass_states()


def test_direct_examiner_and_batch_serve_no_hidden_state():
  """A solution that builds Examiner(10025) or ExaminerBatch itself: its
  pipe and the admin pipe (held for closing) answer no private request and
  nothing in any answer is hidden state."""
  floats, words = _secrets([10025, 10026], [_true_states(10025), _true_states(10026)])
  with Examiner(table=10025, pushes=2) as examiner:
    conns = [c for c in _channels(examiner) if not c.closed]
    assert len(conns) == 2  # the solution's pipe and the admin pipe
    assert _probe(examiner, floats, words) == {}
    # A leak closed before: the admin pipe of a directly built examiner answers
    # no private request.
    admin = examiner._owner.admins[0]
    for op in sorted(PRIVATE):
      admin.send([(0, op, ())])
      assert admin.recv()[0][:2] == ("error", "ValueError"), op
    # A non-request on the solution's pipe is refused; the run goes on.
    examiner._conn.send("close")
    assert examiner._conn.recv()[0][0] == "error"
    assert examiner.look()
  batch = ExaminerBatch(tables=[10025, 10026], pushes=2, workers=2)
  try:
    assert _probe(batch, floats, words) == {}
    assert len(batch.look()) == 2
  finally:
    batch.close()


def test_examiners_handed_out_by_an_exam_serve_no_hidden_state():
  """What the runner hands a solution (its examiners, the batch, and the
  lockstep examiner of run_together) reaches only the solution's pipe; the
  runner's own Exam still reads the record."""
  floats, words = _secrets([10025], [_true_states(10025)])
  with Exam([10025], pushes=2) as exam:
    _probe(exam.examiners[0], floats, words)
    _probe(exam.batch, floats, words)
    assert not [c for c in _channels(exam.examiners[0]) if c is exam._workers.admins[0]]
    errors = exam.run_together(lambda ex: _probe(ex, floats, words))
    assert errors == [None]
    (record,) = exam.records()
  assert record["friction"] == vars(Friction())  # the runner's side


def test_training_examiner_serves_truth_for_training_tables_only():
  """Training table 5: "truth" (and nothing else private) on its admin pipe,
  shapes, masses and poses, never friction. Evaluation table 10025 through
  the same class, built around its own check: the worker refuses the truth."""
  floats, words = _secrets([5], [_true_states(5)])
  with TrainingExaminer(5, pushes=1) as trainer:
    served = _probe(trainer, floats, words, allowed=("truth",))
    (truth,) = served["truth"]
    assert truth == trainer.truth()
  assert [g for g in truth["glasses"]] == [g.as_dict() for g in training_table(5)]
  assert [s["x"] for s in truth["states"]] == [s["x"] for s in _true_states(5)]
  assert not _hidden_in(truth, set(), {"friction"})

  with pytest.raises(PermissionError):
    TrainingExaminer(10025)
  floats, words = _secrets([10025], [_true_states(10025)])
  cheat = object.__new__(TrainingExaminer)
  Examiner.__init__(cheat, 10025, pushes=1)  # skips the client's own check
  try:
    assert _probe(cheat, floats, words) == {}
    with pytest.raises(PermissionError, match="evaluation table"):
      cheat.truth()
  finally:
    cheat.close()


def test_secret_search_finds_what_it_looks_for():
  """The probe's own check, on replies that do hold secrets (so the tests
  above can fail): a mass, a friction key, the three coefficients, a true
  place in an array or in text; and not a reading's rounded value."""
  floats, words = _secrets([10025], [])
  g = draw_table(10025)[0]
  assert _hidden_in({"glasses": [{"id": 0, "mass": g.mass}]}, floats, words)
  assert _hidden_in([("ok", {"friction": {"a": 1}})], floats, words)
  assert _hidden_in(("ok", [list(vars(Friction()).values())]), floats, words)
  assert _hidden_in(("ok", np.array([0.0, g.x])), floats, words)
  assert _hidden_in(("error", "X", f"at {g.y!r}"), floats, words)
  assert not _hidden_in(("ok", [{"x": round(g.x, 4), "y": 0.35}]), floats, words)


# What the solution's requests may answer, key by key (docs/glass_push.md).
READING = {
  "id": int,
  "x": float,
  "y": float,
  "height": float,
  "widest": float,
  "foot": float,
  "standing": bool,
}
REPORT = {
  "blocked": bool,
  "touched": (float, type(None)),
  "jammed": bool,
  "peak": float,
  "pushed": float,
}


def _schema_faults(value, schema: dict, path: str) -> list[str]:
  """Keys outside ``schema`` or missing, and values of another type."""
  if not isinstance(value, dict):
    return [f"{path}: {type(value).__name__}, not a dict"]
  faults = [f"{path}: key {k!r} outside the schema" for k in set(value) - set(schema)]
  faults += [f"{path}: key {k!r} missing" for k in set(schema) - set(value)]
  for k, kind in schema.items():
    v = value.get(k)
    if k in value and (
      not isinstance(v, kind) or (kind is int and isinstance(v, bool))
    ):
      faults.append(f"{path}[{k!r}] = {v!r}, not {kind}")
  return faults


def _equal_secrets(value, secrets: set[float], path: str) -> list[str]:
  return [
    f"{path}[{k!r}] = {v!r} is hidden"
    for k, v in value.items()
    if isinstance(v, float) and v in secrets
  ]


def _valid_push(readings: list[dict], rng) -> dict:
  """A push of a random glass along a random heading whose start the
  readings say is clear (gap 30 mm: the hand comes down beside the glass)."""
  from experts.glass_push.common import push_request, start_is_clear

  for k in rng.permutation(len(readings)):
    for heading in rng.permutation(8) * np.pi / 4:
      request = push_request(readings[k], float(heading), 0.03, gap=0.03)
      if start_is_clear(request, readings):
        return request
  pytest.fail("no clear push start on the table")


def test_valid_requests_answer_within_the_schema_and_never_the_truth(rng):
  """look, top_view, push, follow, take and refuse, each a valid request on a
  random evaluation table: every reply has exactly the documented keys and
  types, and no value in it equals a friction coefficient (push and follow
  reports), a mass, a true shape or a true pose (before or after any request,
  read on the runner's side), and readings are rounded to 0.1 mm, so no
  full-precision number can ride in them."""
  table = int(rng.integers(10000, 10050))
  with Exam([table], pushes=3, oracle=True) as exam:
    examiner = exam.examiners[0]
    secrets: set[float] = set()

    def learn_truth() -> None:
      truth = exam.oracle_truth(table)
      for g in truth["glasses"]:
        secrets.update(v for v in g.values() if isinstance(v, float))
      for s in truth["states"]:
        secrets.update(v for k, v in s.items() if k in ("x", "y", "z", "upright"))
      # A tumbler's absent stem and foot are 0.0, and so is a push that
      # moved nothing: a zero reveals no hidden number.
      secrets.discard(0.0)

    learn_truth()
    readings_seen, reports = [examiner.look()], []
    picture = examiner.top_view()
    assert isinstance(picture, np.ndarray) and picture.dtype == np.uint8
    assert picture.shape == (384, 384, 3)
    request = _valid_push(readings_seen[-1], rng)
    reports.append(examiner.push(request))
    learn_truth()
    readings_seen.append(examiner.look())
    request = _valid_push(readings_seen[-1], rng)
    heading = request["heading"]
    step = 0.004 * np.array([np.cos(heading), np.sin(heading)])
    chunk = [
      [*(np.array(request["start"]) + k * step), 0.03, heading] for k in range(25)
    ]
    reports.append(examiner.follow(chunk))
    learn_truth()
    readings_seen.append(examiner.look())
    glasses = [r["id"] for r in readings_seen[-1]]
    assert examiner.refuse(glasses[0], "too close to the edge") is None
    assert examiner.take(glasses[-1]) is None
    learn_truth()
    readings_seen.append(examiner.look())

  faults = []
  for n, report in enumerate(reports):
    faults += _schema_faults(report, REPORT, f"report {n}")
    faults += _equal_secrets(report, secrets | FRICTION, f"report {n}")
  for n, readings in enumerate(readings_seen):
    assert readings, "look() read no glass"
    for r in readings:
      faults += _schema_faults(r, READING, f"look {n} glass {r.get('id')}")
      faults += _equal_secrets(r, secrets, f"look {n} glass {r.get('id')}")
      faults += [
        f"look {n} glass {r['id']}: {k} = {v!r} is not rounded to 0.1 mm"
        for k, v in r.items()
        if isinstance(v, float) and v != round(v, 4)
      ]
  assert not faults, faults
  assert any(not r["blocked"] for r in reports), "no push reached a glass"
