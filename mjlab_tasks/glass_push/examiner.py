"""The examiner's client side: what a solution holds.

The physics runs in worker processes (``multiprocessing``, spawn), each
holding one ``world.GlassWorld``: the GlassPush environment with one table
per environment (this module imports neither mjlab nor MuJoCo). A
solution holds an ``Examiner`` (one table) or an ``ExaminerBatch`` (many
tables): thin clients whose only state is a pipe end, the table number and
the budget; every call sends a request and returns plain Python data. The
true poses, shapes, masses and friction stay in the worker. Each worker
also has an admin pipe, told at its start which private requests it serves:
for an ``Exam`` (the runner, who scores) the record and the films; for a
directly built ``Examiner`` or ``ExaminerBatch`` none (only closing); for a
``TrainingExaminer`` the truth, which the worker itself refuses for
evaluation tables; for an ``Exam`` built with ``oracle=True`` also the truth
with the friction, for the oracle (not a valid solution). See
docs/glass_push.md.

Workers start with ``MUJOCO_GL=disable``: importing mujoco then loads no
OpenGL, so every call but the pictures works on a machine without any GL
library; the pictures' backend is handed over and loaded at the first
picture.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from multiprocessing.connection import Connection, wait

import numpy as np

from evaluators.glass_push.errors import BudgetSpent, ExaminerClosed, NoOffscreenGL
from evaluators.glass_push.tables import TRAINING_TABLES, is_training_table

ENGINES = ("mujoco", "warp")
_ERRORS = {
  "ValueError": ValueError,
  "TypeError": TypeError,
  "PermissionError": PermissionError,
  "BudgetSpent": BudgetSpent,
  "NoOffscreenGL": NoOffscreenGL,
  "RuntimeError": RuntimeError,
}
# Requests the solution's pipe serves; the admin pipe serves only the private
# ones its worker was started with (a subset of PRIVATE) and "close".
PUBLIC = frozenset({"look", "top_view", "push", "follow", "take", "refuse"})
PRIVATE = frozenset({"record", "write_film", "truth", "oracle_truth"})
# A worker starts with MUJOCO_GL=disable set in this process's environment for
# the moment of its start: one start at a time, so that two threads starting
# workers cannot leave it set.
_START_LOCK = threading.Lock()


def _with_friction(truth: dict, physics) -> dict:
  """The oracle's truth: the true glasses and poses and the friction."""
  return truth | {"friction": vars(physics.friction) | {}}


def _reply(fn, *args) -> tuple:
  try:
    return ("ok", fn(*args))
  except Exception as err:  # noqa: BLE001 - reported to the client
    return ("error", type(err).__name__, str(err))


class _Tables:
  """A worker's tables: one ``GlassWorld`` (one GlassPush environment, one
  table per environment) on either engine. The pushes and follows of one
  request batch run together, then its takes; on the C engine only the
  acting tables step, in parallel threads."""

  def __init__(self, jobs: list[tuple], engine: str):
    # mjlab then silences Warp's module messages, which would bury the
    # runner's progress bars.
    os.environ.setdefault("MJLAB_WARP_QUIET", "1")
    from mjlab_tasks.glass_push.world import GlassWorld

    _, pushes, physics, film = jobs[0]
    tables = [job[0] for job in jobs]
    self.world = GlassWorld(tables, pushes, physics, film, engine)

  def answer(self, batch: list[tuple]) -> list[tuple]:
    slots = [slot for slot, _, _ in batch]
    if len(set(slots)) != len(slots):
      raise RuntimeError("one request per table per batch")
    acts = {slot: (op, *args) for slot, op, args in batch if op in ("push", "follow")}
    takes = {slot: args[0] for slot, op, args in batch if op == "take"}
    done = {}
    if acts:
      done |= {("act", k): v for k, v in self.world.act(acts).items()}
    if takes:
      done |= {("take", k): v for k, v in self.world.take(takes).items()}
    replies = []
    for slot, op, args in batch:
      if op in ("push", "follow"):
        replies.append(done[("act", slot)])
      elif op == "take":
        replies.append(done[("take", slot)])
      elif op == "oracle_truth":
        replies.append(_reply(self._oracle_truth, slot))
      else:
        replies.append(_reply(getattr(self.world, op), slot, *args))
    return replies

  def _oracle_truth(self, slot: int) -> dict:
    return _with_friction(self.world.truth(slot), self.world.physics)

  def close(self) -> None:
    self.world.close()


def _serve(
  conn: Connection,
  admin: Connection,
  jobs: list[tuple],
  engine: str,
  admin_ops: frozenset,
  picture_gl: str,
) -> None:
  """Worker process: owns the worlds, answers requests until closed.

  ``conn`` (the solution's) serves ``PUBLIC``; ``admin`` serves ``admin_ops``
  and "close". "truth" is refused for every evaluation table. Pictures use
  the OpenGL backend ``picture_gl``, loaded at the first one.
  """
  try:
    from mjlab_tasks.glass_push.pictures import use_picture_gl

    use_picture_gl(picture_gl)
    worlds = _Tables(jobs, engine)
  except Exception as err:  # noqa: BLE001 - reported to the client
    conn.send([("error", type(err).__name__, str(err))])
    return
  conn.send([("ok", None)])
  admin_ops = frozenset(admin_ops) & PRIVATE

  def refusal(slot, op, allowed):
    if op not in allowed:
      return ("error", "ValueError", f"unknown request {op!r}")
    if op == "truth" and not is_training_table(jobs[slot][0]):
      return (
        "error",
        "PermissionError",
        f"table {jobs[slot][0]} is an evaluation table: its truth is never handed out",
      )
    return None

  live = {conn, admin}
  while live:
    for c in wait(list(live)):
      try:
        batch = c.recv()
      except EOFError:
        live.discard(c)
        continue
      if c is admin and batch == "close":
        worlds.close()
        c.send("closed")
        return
      try:
        batch = [(int(slot), str(op), tuple(args)) for slot, op, args in batch]
        if not batch or any(not 0 <= slot < len(jobs) for slot, _, _ in batch):
          raise ValueError
      except Exception:  # noqa: BLE001 - anything else is not a request
        c.send([("error", "ValueError", "malformed request")])
        continue
      allowed = PUBLIC if c is conn else admin_ops
      refused = [refusal(slot, op, allowed) for slot, op, _ in batch]
      asked = [r for r, no in zip(batch, refused, strict=True) if no is None]
      try:
        answers = iter(worlds.answer(asked) if asked else [])
      except Exception as err:  # noqa: BLE001 - reported to the client
        answers = iter([("error", type(err).__name__, str(err))] * len(asked))
      c.send([next(answers) if no is None else no for no in refused])


def _raise(reply, table: int):
  _, name, message = reply
  raise _ERRORS.get(name, RuntimeError)(f"table {table}: {message}")


def _picture_gl(engine: str) -> str:
  """The OpenGL backend for a worker's pictures: the user's ``MUJOCO_GL``,
  else GLFW with a display, else headless: EGL for the Warp worker (it
  imports torch; OSMesa with torch can crash), OSMesa for the C one."""
  chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
  if chosen:
    return chosen
  if os.environ.get("DISPLAY"):
    return "glfw"
  return "egl" if engine == "warp" else "osmesa"


def _start_without_gl(proc) -> None:
  """Start a worker with ``MUJOCO_GL=disable`` (mujoco, and mjlab, which
  sets MUJOCO_GL=egl unless it is set, then load no OpenGL when imported);
  this process keeps its own setting."""
  with _START_LOCK:
    mine = os.environ.get("MUJOCO_GL")
    os.environ["MUJOCO_GL"] = "disable"
    try:
      proc.start()
    finally:
      if mine is None:
        del os.environ["MUJOCO_GL"]
      else:
        os.environ["MUJOCO_GL"] = mine


class _Workers:
  """Worker processes holding a list of tables (examiner side)."""

  def __init__(
    self, tables, pushes, film, physics, workers, engine="mujoco", admin_ops=()
  ):
    if engine not in ENGINES:
      raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    ctx = mp.get_context("spawn")
    tables = [int(t) for t in tables]
    # Read under the lock: another thread's start sets MUJOCO_GL=disable in
    # this process for a moment.
    with _START_LOCK:
      picture_gl = _picture_gl(engine)
    # MuJoCo Warp: one process steps every table as one batch.
    n = 1 if engine == "warp" else max(1, min(workers, len(tables)))
    groups = [list(range(len(tables)))[k::n] for k in range(n)]
    self.route: list[tuple[int, int]] = [(0, 0)] * len(tables)
    self.conns, self.admins, self.procs = [], [], []
    for w, group in enumerate(groups):
      conn, child = ctx.Pipe()
      admin, child_admin = ctx.Pipe()
      jobs = [(tables[i], pushes, physics, film) for i in group]
      proc = ctx.Process(
        target=_serve,
        args=(
          child,
          child_admin,
          jobs,
          engine,
          frozenset(admin_ops),
          picture_gl,
        ),
        daemon=True,
        name=f"glass-examiner-{w}",
      )
      _start_without_gl(proc)
      child.close()
      child_admin.close()
      self.conns.append(conn)
      self.admins.append(admin)
      self.procs.append(proc)
      for slot, i in enumerate(group):
        self.route[i] = (w, slot)
    for w, conn in enumerate(self.conns):
      try:
        reply = conn.recv()[0]
      except EOFError:
        self.procs[w].join(timeout=5)
        code = self.procs[w].exitcode
        self.close()
        raise RuntimeError(
          f"the examiner's worker process ended while starting (exit code "
          f"{code}); see its error output above"
        ) from None
      if reply[0] == "error":
        self.close()
        _raise(reply, tables[groups[w][0]])

  def close(self) -> None:
    for c in self.admins:
      try:
        c.send("close")
        c.recv()
      except (OSError, EOFError):
        pass
    for p in self.procs:
      p.join(timeout=10)
      if p.is_alive():
        p.terminate()
    for c in self.conns + self.admins:
      c.close()


def _call(conns, route, tables, op, args_per_table):
  """Send one request per table (None: skip), wait for every worker."""
  per_worker: dict[int, list] = {}
  for i, args in enumerate(args_per_table):
    if args is None:
      continue
    w, slot = route[i]
    per_worker.setdefault(w, []).append((i, (slot, op, args)))
  for w, items in per_worker.items():
    conns[w].send([req for _, req in items])
  out = [None] * len(tables)
  first_error = None
  for w, items in per_worker.items():
    replies = conns[w].recv()
    for (i, _), reply in zip(items, replies, strict=True):
      if reply[0] == "ok":
        out[i] = reply[1]
      elif first_error is None:
        first_error = (reply, tables[i])
  if first_error is not None:
    _raise(*first_error)
  return out


class Examiner:
  """One table, seen from a solution: look, top_view, push, follow, take,
  refuse. Holds nothing but a pipe end, the table number and the budget.

  Args:
    table: the table number.
    pushes: the push budget (each push() or follow() uses one).
    engine: "mujoco" (C MuJoCo on the CPU, deterministic) or "warp" (MuJoCo
      Warp on Warp's default device: the GPU when there is one).
  """

  __slots__ = ("_conn", "_slot", "_owner", "table", "pushes")
  _ADMIN_OPS: tuple[str, ...] = ()  # private requests its worker serves

  def __init__(self, table: int, pushes: int = 15, engine: str = "mujoco"):
    self._owner = _Workers(
      [table], pushes, False, None, 1, engine, admin_ops=self._ADMIN_OPS
    )
    self._conn = self._owner.conns[0]
    self._slot = 0
    self.table = int(table)
    self.pushes = int(pushes)

  @classmethod
  def _attach(cls, conn: Connection, slot: int, table: int, pushes: int):
    self = object.__new__(cls)
    self._owner = None
    self._conn, self._slot, self.table, self.pushes = conn, slot, table, pushes
    return self

  def _ask(self, op: str, *args):
    if self._conn is None or self._conn.closed:
      raise ExaminerClosed(f"table {self.table}: the run is closed")
    self._conn.send([(self._slot, op, args)])
    reply = self._conn.recv()[0]
    if reply[0] != "ok":
      _raise(reply, self.table)
    return reply[1]

  def look(self) -> list[dict]:
    """Noisy readings {"id", "x", "y", "height", "widest", "foot", "standing"}
    of every glass still on the table (metres)."""
    return self._ask("look")

  def top_view(self) -> np.ndarray:
    """384x384x3 uint8 picture of the table from 750 mm above the zone."""
    return self._ask("top_view")

  def push(self, request: dict) -> dict:
    """One parameterized push; returns {"blocked", "touched", "jammed",
    "peak", "pushed"}. Raises BudgetSpent once the budget is used up."""
    return self._ask("push", request)

  def follow(self, chunk, glass: int | None = None, aim=None) -> dict:
    """Hand waypoints [K, 4] (x, y, z, heading) at 50 Hz; reported like push."""
    return self._ask("follow", np.asarray(chunk, dtype=float).tolist(), glass, aim)

  def take(self, glass: int) -> None:
    """Take a glass off the table into the rack."""
    self._ask("take", glass)

  def refuse(self, glass: int, reason: str) -> None:
    """Record that the solution refuses a glass, with its reason."""
    self._ask("refuse", glass, reason)

  def close(self) -> None:
    """End the run (only for an examiner made directly, not by an Exam)."""
    if self._owner is not None:
      self._owner.close()
      self._owner = None
    self._conn = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def __repr__(self) -> str:
    return f"Examiner(table={self.table}, pushes={self.pushes})"


class ExaminerBatch:
  """Many tables at once: list in, list out, tables spread over worker
  processes that run in parallel on the CPU (``engine="mujoco"``), or all in
  one MuJoCo Warp batch in one process, the pushes and follows of one call
  stepped together (``engine="warp"``). A ``None`` entry in a request list
  skips that table for the call.

  Args:
    tables: table numbers.
    pushes: the push budget of every table.
    workers: worker processes for "mujoco" (default: 2, or fewer for fewer
      tables); "warp" uses one.
    engine: "mujoco" or "warp".
  """

  __slots__ = ("_conns", "_route", "_owner", "tables", "pushes")

  def __init__(
    self, tables, pushes: int = 15, workers: int = 2, engine: str = "mujoco"
  ):
    self._owner = _Workers(list(tables), pushes, False, None, workers, engine)
    self._conns, self._route = self._owner.conns, self._owner.route
    self.tables = [int(t) for t in tables]
    self.pushes = int(pushes)

  @classmethod
  def _attach(cls, conns, route, tables, pushes):
    self = object.__new__(cls)
    self._owner = None
    self._conns, self._route, self.tables, self.pushes = conns, route, tables, pushes
    return self

  def _all(self, op: str, per_table) -> list:
    per_table = list(per_table)
    if len(per_table) != len(self.tables):
      raise ValueError(f"expected {len(self.tables)} entries, got {len(per_table)}")
    return _call(self._conns, self._route, self.tables, op, per_table)

  def look(self) -> list[list[dict]]:
    return self._all("look", [()] * len(self.tables))

  def top_view(self) -> list[np.ndarray]:
    return self._all("top_view", [()] * len(self.tables))

  def push(self, requests: list[dict | None]) -> list[dict | None]:
    return self._all("push", [None if r is None else (r,) for r in requests])

  def follow(self, chunks, glasses=None, aims=None) -> list[dict | None]:
    n = len(self.tables)
    glasses = glasses or [None] * n
    aims = aims or [None] * n
    return self._all(
      "follow",
      [
        None if c is None else (np.asarray(c, float).tolist(), g, a)
        for c, g, a in zip(chunks, glasses, aims, strict=True)
      ],
    )

  def take(self, glasses: list[int | None]) -> None:
    self._all("take", [None if g is None else (g,) for g in glasses])

  def refuse(self, glasses: list[int | None], reasons: list[str | None]) -> None:
    self._all(
      "refuse",
      [None if g is None else (g, r) for g, r in zip(glasses, reasons, strict=True)],
    )

  def close(self) -> None:
    if self._owner is not None:
      self._owner.close()
      self._owner = None


class _Lockstep:
  """Per-table solutions in threads over one worker: each call that steps
  the physics (push, follow, take) waits until every running solution has
  made one (or finished), then they all go as one request batch (on Warp,
  the pushes and follows stepped together, then the takes together). Other
  calls go straight through, one at a time."""

  def __init__(self, conn: Connection, slots: list[int], on_round=None):
    self._conn = conn
    self._on_round = on_round
    self._cond = threading.Condition()
    self._running = set(slots)
    self._waiting: dict[int, tuple] = {}
    self._replies: dict[int, tuple] = {}

  def ask(self, slot: int, op: str, args) -> tuple:
    with self._cond:
      if op not in ("push", "follow", "take"):
        self._conn.send([(slot, op, args)])
        return self._conn.recv()[0]
      self._waiting[slot] = (slot, op, args)
      self._flush()
      while slot not in self._replies:
        self._cond.wait()
      return self._replies.pop(slot)

  def finished(self, slot: int) -> None:
    with self._cond:
      self._running.discard(slot)
      self._flush()

  def _flush(self) -> None:
    if self._waiting and set(self._waiting) >= self._running:
      batch = list(self._waiting.values())
      self._waiting.clear()
      self._conn.send(batch)
      for (slot, _, _), reply in zip(batch, self._conn.recv(), strict=True):
        self._replies[slot] = reply
      if self._on_round is not None:
        self._on_round(len(batch))
      self._cond.notify_all()


class _GateEnd:
  """A solution thread's pipe end into a ``_Lockstep`` (what ``Examiner``
  sends on and receives from)."""

  __slots__ = ("_gate", "_slot", "_reply", "closed")

  def __init__(self, gate: _Lockstep, slot: int):
    self._gate, self._slot, self._reply, self.closed = gate, slot, None, False

  def send(self, batch) -> None:
    ((slot, op, args),) = batch
    self._reply = self._gate.ask(slot, op, args)

  def recv(self):
    return [self._reply]


class Exam:
  """The runner's side of a run over one or more tables.

  ``examiners`` (one ``Examiner`` per table) or ``batch`` go to the solution;
  the runner keeps the ``Exam`` and reads ``records()`` (truth included) for
  scoring after the solution is done. ``physics`` is the private test and
  training fixture (``world.PhysicsConfig``); ``film`` records film poses;
  ``engine`` is "mujoco" or "warp" (as for ``ExaminerBatch``). ``oracle``
  makes the admin pipe also serve ``oracle_truth``: the true glasses, poses
  and friction, for the oracle, which is not a valid solution (it measures
  the limit). The examiners handed to a solution never serve it.
  """

  def __init__(
    self,
    tables,
    pushes: int = 15,
    film: bool = False,
    physics=None,
    workers: int = 1,
    engine: str = "mujoco",
    oracle: bool = False,
  ):
    self.tables = [int(t) for t in tables]
    self.pushes = int(pushes)
    self.oracle = oracle is True  # only an explicit True serves the truth
    self._workers = _Workers(
      self.tables,
      pushes,
      film,
      physics,
      workers,
      engine,
      admin_ops=("record", "write_film") + (("oracle_truth",) if self.oracle else ()),
    )
    # The oracle's truth is asked from solution threads (run_together).
    self._admin_lock = threading.Lock()
    w = self._workers
    self.examiners = [
      Examiner._attach(w.conns[wi], slot, t, self.pushes)
      for (wi, slot), t in zip(w.route, self.tables, strict=True)
    ]
    self.batch = ExaminerBatch._attach(w.conns, w.route, self.tables, self.pushes)

  def run_together(self, solve, on_round=None) -> list[str | None]:
    """Run ``solve(examiner)`` for every table at once, one thread per table,
    their pushes, follows and takes batched in lockstep (for
    ``engine="warp"`` one Warp batch per round; ``on_round(requests in it)``
    after each). Returns each table's error text, or None."""
    if len(self._workers.conns) != 1:
      raise ValueError("run_together needs the tables in one worker")
    slots = [slot for _, slot in self._workers.route]
    gate = _Lockstep(self._workers.conns[0], slots, on_round)
    errors: list[str | None] = [None] * len(self.tables)

    def run(k: int, slot: int) -> None:
      examiner = Examiner._attach(
        _GateEnd(gate, slot), slot, self.tables[k], self.pushes
      )
      try:
        solve(examiner)
      except Exception as err:  # noqa: BLE001 - a crashing solution is a result
        errors[k] = f"{type(err).__name__}: {err}"
      finally:
        gate.finished(slot)

    threads = [
      threading.Thread(target=run, args=(k, slot), name=f"solution-{self.tables[k]}")
      for k, (_, slot) in enumerate(self._workers.route)
    ]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    return errors

  def _admin(self, op: str, per_table) -> list:
    with self._admin_lock:
      return _call(
        self._workers.admins, self._workers.route, self.tables, op, per_table
      )

  def oracle_truth(self, table: int) -> dict:
    """The oracle's view of one table now: {"glasses": true shapes and
    masses, "states": true poses, "friction": the three coefficients}. Only
    for an ``Exam(..., oracle=True)``; otherwise the worker refuses it."""
    k = self.tables.index(int(table))
    asked = [None] * len(self.tables)
    asked[k] = ()
    return self._admin("oracle_truth", asked)[k]

  def records(self) -> list[dict]:
    """Every table's record: truth, actions (with hand paths), final states."""
    return self._admin("record", [()] * len(self.tables))

  def write_films(self, paths) -> list[int]:
    return self._admin("write_film", [(str(p),) for p in paths])

  def close(self) -> None:
    self._workers.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


class TrainingExaminer(Examiner):
  """An ``Examiner`` for training tables that also hands out the truth
  (shapes, masses, true poses) as labels. Friction is never handed out.

  Raises:
    PermissionError: for an evaluation table.
  """

  __slots__ = ()
  _ADMIN_OPS = ("truth",)  # the worker refuses it for evaluation tables too

  def __init__(self, table: int, pushes: int = 15, engine: str = "mujoco"):
    if not is_training_table(table):
      raise PermissionError(
        f"table {table} is an evaluation table; the training interface serves "
        f"tables {TRAINING_TABLES.start}-{TRAINING_TABLES.stop - 1} only"
      )
    super().__init__(table, pushes, engine)

  def truth(self) -> dict:
    """{"glasses": true shapes and masses, "states": true poses now}."""
    w = self._owner
    w.admins[0].send([(0, "truth", ())])
    reply = w.admins[0].recv()[0]
    if reply[0] != "ok":
      _raise(reply, self.table)
    return reply[1]
