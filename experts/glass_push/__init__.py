"""Shipped solutions for pushing glasses apart (docs/glass_push.md).

Each is a function ``solve(examiner)`` that uses only the examiner's calls.
``oracle.py`` is not one of them: it is told the truth by the runner (the
CLI's ``--solution oracle``) to measure the geometric planner's limit; nor
is the search-based limit of the tables (``--solution limit``), which runs
on the examiner's side. ``perception.py`` turns the top view into readings
(measured against the truth by ``scripts/measure_glass_perception.py``).
``imitation.py`` is a learned solution (a network on the top view giving
action chunks); it imports PyTorch when it runs, not with this package.
"""

from experts.glass_push import geometric, nudge, shove


def imitation_solve(examiner) -> None:
  """The imitation solution (``imitation.solve``), imported on first use."""
  from experts.glass_push import imitation

  imitation.solve(examiner)


SOLUTIONS = {
  "nudge": nudge.solve,
  "geometric": geometric.solve,
  "shove": shove.solve,
  "imitation": imitation_solve,
}

__all__ = ["SOLUTIONS"]
