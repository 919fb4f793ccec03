"""Shipped solutions for pushing glasses apart (docs/glass_push.md).

Each is a function ``solve(examiner)`` that uses only the examiner's calls.
"""

from experts.glass_push import geometric, nudge

SOLUTIONS = {
  "nudge": nudge.solve,
  "geometric": geometric.solve,
}

__all__ = ["SOLUTIONS"]
