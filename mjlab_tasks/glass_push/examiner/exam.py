"""The runner's side of a run: ``Exam``.

The runner (``scripts/glass_push_exam.py``, tests) builds an ``Exam`` over
tables, hands its examiners (or its batch) to a solution, and reads the
records (truth included) for scoring after the solution is done.
``run_together`` runs a solution per table in threads over one worker, in
lockstep: each round of pushes, follows and takes goes as one request
batch. See docs/glass_push.md.
"""

from __future__ import annotations

import threading
from multiprocessing.connection import Connection

from mjlab_tasks.glass_push.examiner.client import attached_batch, attached_examiner
from mjlab_tasks.glass_push.examiner.workers import Workers, call


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
  training fixture (``hidden.PhysicsConfig``); ``film`` records film poses;
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
    self._workers = Workers(
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
      attached_examiner(w.conns[wi], slot, t, self.pushes)
      for (wi, slot), t in zip(w.route, self.tables, strict=True)
    ]
    self.batch = attached_batch(w.conns, w.route, self.tables, self.pushes)

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
      examiner = attached_examiner(
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
      return call(self._workers.admins, self._workers.route, self.tables, op, per_table)

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
