"""The examiner's worker process: it owns the glass world and answers.

Each worker holds one ``world.GlassWorld``: the GlassPush environment with
one table per environment. It answers the solution's pipe (``PUBLIC``
requests) and an admin pipe, told at its start which private requests
(a subset of ``PRIVATE``) it serves: for an ``Exam`` (the runner, who
scores) the record and the films; for a directly built ``Examiner`` or
``ExaminerBatch`` none (only closing); for a ``TrainingExaminer`` the
truth, which the worker itself refuses for evaluation tables; for an
``Exam`` built with ``oracle=True`` also the truth with the friction, for
the oracle (not a valid solution). The true poses, shapes, masses and
friction never leave this process otherwise. See docs/glass_push.md.

Workers start with ``MUJOCO_GL=disable`` (``workers.py``): importing mujoco
then loads no OpenGL, so every call but the pictures works on a machine
without any GL library; the pictures' backend is handed over and loaded at
the first picture.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection, wait

from mjlab_tasks.glass_push.rules.tables import is_training_table

# Requests the solution's pipe serves; the admin pipe serves only the private
# ones its worker was started with (a subset of PRIVATE) and "close".
PUBLIC = frozenset({"look", "top_view", "push", "follow", "take", "refuse"})
PRIVATE = frozenset({"record", "write_film", "truth", "oracle_truth"})


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
    from mjlab_tasks.glass_push.examiner.world import GlassWorld

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


def serve(
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
    from mjlab_tasks.glass_push.examiner.pictures import use_picture_gl

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
