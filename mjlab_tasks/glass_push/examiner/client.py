"""The examiner's client side: what a solution holds.

The physics runs in worker processes (``server.py``, started by
``workers.py``), each holding one ``world.GlassWorld``: the GlassPush
environment with one table per environment (this module imports neither
mjlab nor MuJoCo). A solution holds an ``Examiner`` (one table) or an
``ExaminerBatch`` (many tables): thin clients whose only state is a pipe
end, the table number and the budget; every call sends a request and
returns plain Python data. The true poses, shapes, masses and friction
stay in the worker. A ``TrainingExaminer`` also serves the truth as labels
on training tables. See docs/glass_push.md.
"""

from __future__ import annotations

import numpy as np

from mjlab_tasks.glass_push.examiner.workers import Workers, call, raise_reply
from mjlab_tasks.glass_push.rules.errors import ExaminerClosed
from mjlab_tasks.glass_push.rules.tables import TRAINING_TABLES, is_training_table


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
    self._owner = Workers(
      [table], pushes, False, None, 1, engine, admin_ops=self._ADMIN_OPS
    )
    self._conn = self._owner.conns[0]
    self._slot = 0
    self.table = int(table)
    self.pushes = int(pushes)

  def _ask(self, op: str, *args):
    if self._conn is None or self._conn.closed:
      raise ExaminerClosed(f"table {self.table}: the run is closed")
    self._conn.send([(self._slot, op, args)])
    reply = self._conn.recv()[0]
    if reply[0] != "ok":
      raise_reply(reply, self.table)
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
    self._owner = Workers(list(tables), pushes, False, None, workers, engine)
    self._conns, self._route = self._owner.conns, self._owner.route
    self.tables = [int(t) for t in tables]
    self.pushes = int(pushes)

  def _all(self, op: str, per_table) -> list:
    per_table = list(per_table)
    if len(per_table) != len(self.tables):
      raise ValueError(f"expected {len(self.tables)} entries, got {len(per_table)}")
    return call(self._conns, self._route, self.tables, op, per_table)

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
      raise_reply(reply, self.table)
    return reply[1]


def attached_examiner(conn, slot: int, table: int, pushes: int) -> Examiner:
  """An ``Examiner`` on a pipe end it does not own (an ``Exam``'s worker, or
  a lockstep gate's end): closing it only lets go of the pipe."""
  examiner = object.__new__(Examiner)
  examiner._owner = None
  examiner._conn, examiner._slot = conn, slot
  examiner.table, examiner.pushes = table, pushes
  return examiner


def attached_batch(conns, route, tables, pushes: int) -> ExaminerBatch:
  """An ``ExaminerBatch`` on an ``Exam``'s workers (``route``: each table's
  worker and slot); closing it leaves them running."""
  batch = object.__new__(ExaminerBatch)
  batch._owner = None
  batch._conns, batch._route, batch.tables, batch.pushes = conns, route, tables, pushes
  return batch
