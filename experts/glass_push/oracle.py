"""The oracle: NOT A VALID SOLUTION. It is told the truth.

It measures the limit of the geometric planner, not a way to solve the task:
the runner (``Exam(..., oracle=True)``, which holds the truth for scoring)
hands it the true glass poses and shapes and the true friction coefficients
through a callback; a solution only ever gets an ``Examiner``, whose pipes
never return any of that (docs/glass_push.md, "What a solution is never
told").

Otherwise it plans exactly like ``geometric`` (the same planner, margins and
limits): its readings are the true x, y, height, widest, foot and standing of
every glass on the table (no noise), its mu is the true glass-on-table
friction from the start (no probe, no estimate). So oracle minus geometric is
what the unknown friction and the reading noise cost the planner; what the
oracle still leaves is the tables and the planner itself.
"""

from __future__ import annotations

from collections.abc import Callable

from experts.glass_push import geometric
from mjlab_tasks.glass_push import Examiner

NAME = "oracle"
LABEL = "oracle (not a valid solution: told the truth)"


def true_readings(truth: dict) -> list[dict]:
  """What ``look()`` would say with no noise, from the true glasses and
  poses: every glass still on the table (a toppled one at its origin)."""
  glasses = {g["id"]: g for g in truth["glasses"]}
  return [
    {
      "id": s["id"],
      "x": s["x"],
      "y": s["y"],
      "height": glasses[s["id"]]["height"],
      "widest": glasses[s["id"]]["widest"],
      "foot": glasses[s["id"]]["foot"],
      "standing": s["standing"],
    }
    for s in truth["states"]
    if s["where"] == "table"
  ]


class Told:
  """The planner's knowledge, told: true readings and the true
  glass-on-table friction (known from the start, so never probed)."""

  def __init__(self, truth: Callable[[], dict]):
    self._truth = truth
    self._mu: float | None = None

  def look(self) -> list[dict]:
    truth = self._truth()
    self._mu = float(truth["friction"]["glass_table"])
    return true_readings(truth)

  @property
  def mu(self) -> float:
    if self._mu is None:
      self.look()
    return self._mu

  known = True  # no probe: mu is the truth

  def learn(self, reading: dict, report: dict, mass: float | None = None) -> None:
    """Nothing to learn: the friction is told."""

  def mu_text(self) -> str:
    """The refusal reasons go into the scores: the hidden value stays out."""
    return "the true mu"


def solve(examiner: Examiner, truth: Callable[[], dict]) -> None:
  """The geometric planner on ``examiner``, told ``truth()`` (this table's
  {"glasses", "states", "friction"}, e.g. ``Exam.oracle_truth``)."""
  geometric.solve(examiner, Told(truth))


def solver(truth_of: Callable[[int], dict]) -> Callable[[Examiner], None]:
  """``solve(examiner)`` for a runner: ``truth_of(table)`` gives a table's
  truth (``Exam(..., oracle=True).oracle_truth``)."""

  def solve_told(examiner: Examiner) -> None:
    solve(examiner, lambda: truth_of(examiner.table))

  return solve_told
