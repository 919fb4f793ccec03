"""Errors the examiner raises on a solution's side of the API."""

from __future__ import annotations


class BudgetSpent(RuntimeError):
  """push()/follow() after the table's push budget is used up."""


class ExaminerClosed(RuntimeError):
  """A call on an examiner whose run has been closed."""


class NoOffscreenGL(RuntimeError):
  """top_view()/films need offscreen OpenGL and the examiner's worker has none
  (no display, and the MUJOCO_GL backend's library cannot make a context)."""
