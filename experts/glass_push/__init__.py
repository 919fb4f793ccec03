"""Shipped solutions for pushing glasses apart (docs/glass_push.md).

Each is a function ``solve(examiner)`` that uses only the examiner's calls.
``oracle.py`` is not one of them: it is told the truth by the runner (the
CLI's ``--solution oracle``) to measure the geometric planner's limit.
"""

from experts.glass_push import geometric, nudge

SOLUTIONS = {
  "nudge": nudge.solve,
  "geometric": geometric.solve,
}

__all__ = ["SOLUTIONS"]
