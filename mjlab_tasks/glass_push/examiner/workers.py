"""The examiner's worker processes, seen from the clients' side: started
(``multiprocessing``, spawn, without OpenGL), asked, closed.

``Workers`` starts the processes (``server.serve``) that hold a list of
tables and routes each table to its worker; ``call`` sends one request per
table and gathers the replies; ``raise_reply`` turns an error reply into
the exception the solution sees. This module imports neither mjlab nor
MuJoCo.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

from mjlab_tasks.common.gl import default_backend
from mjlab_tasks.engine import ENGINES, traits
from mjlab_tasks.glass_push.examiner.server import serve
from mjlab_tasks.glass_push.rules.errors import BudgetSpent, NoOffscreenGL

_ERRORS = {
  "ValueError": ValueError,
  "TypeError": TypeError,
  "PermissionError": PermissionError,
  "BudgetSpent": BudgetSpent,
  "NoOffscreenGL": NoOffscreenGL,
  "RuntimeError": RuntimeError,
}
# A worker starts with MUJOCO_GL=disable set in this process's environment for
# the moment of its start: one start at a time, so that two threads starting
# workers cannot leave it set.
_START_LOCK = threading.Lock()


def raise_reply(reply, table: int):
  """Raise the exception an error reply names, with the table's number."""
  _, name, message = reply
  raise _ERRORS.get(name, RuntimeError)(f"table {table}: {message}")


def _picture_gl(engine: str) -> str:
  """The OpenGL backend for a worker's pictures, by the suite's policy: the
  user's ``MUJOCO_GL``, else the engine's headless one (EGL for the Warp
  worker, OSMesa for the C one)."""
  return default_backend(engine)


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


class Workers:
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
    n = 1 if traits(engine).one_process else max(1, min(workers, len(tables)))
    groups = [list(range(len(tables)))[k::n] for k in range(n)]
    self.route: list[tuple[int, int]] = [(0, 0)] * len(tables)
    self.conns, self.admins, self.procs = [], [], []
    for w, group in enumerate(groups):
      conn, child = ctx.Pipe()
      admin, child_admin = ctx.Pipe()
      jobs = [(tables[i], pushes, physics, film) for i in group]
      proc = ctx.Process(
        target=serve,
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
        raise_reply(reply, tables[groups[w][0]])

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


def call(conns, route, tables, op, args_per_table):
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
    raise_reply(*first_error)
  return out
