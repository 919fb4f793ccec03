"""mjlab's viewers (``play``) paced and stopped by the suite: after a number
of policy steps, reporting the real-time factor they kept
(``scripts/play.py --steps``). It patches mjlab's ``BaseViewer`` while the
block lasts, which is why it lives in the engine package."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Pace:
  """Wall time of a viewer's policy steps: its real-time factor."""

  def __init__(self) -> None:
    self.steps = 0
    self.stepping_s = 0.0  # Inside env steps (policy, control, physics).
    self.first: float | None = None
    self.last = 0.0

  def add(self, start: float, end: float) -> None:
    self.first = start if self.first is None else self.first
    self.last = end
    self.steps += 1
    self.stepping_s += end - start

  def report(self, step_dt: float, num_envs: int) -> str:
    if not self.steps:
      return "play: no policy step was taken"
    sim_s = self.steps * step_dt
    wall = self.last - (self.first or self.last)
    return (
      f"play: {self.steps} policy steps x {num_envs} envs, {sim_s:.2f} s simulated "
      f"in {wall:.2f} s: real-time factor {sim_s / wall:.2f} (viewer target 1x); "
      f"stepping alone {sim_s / self.stepping_s:.2f}x real time"
    )


@contextlib.contextmanager
def paced_viewer(steps: int | None) -> Iterator[None]:
  """mjlab's viewers stop after ``steps`` policy steps (None: when closed) and
  print the pace they kept."""
  from mjlab.viewer.base import BaseViewer

  run, execute = BaseViewer.run, BaseViewer._execute_step
  pace = Pace()

  def timed_step(self) -> bool:
    # mjlab's viewer checks its step count once per frame, and a frame can
    # run several steps (the sim-time budget of a slow frame): stop at N.
    if steps is not None and self._step_count >= steps:
      return False
    start = time.perf_counter()
    ok = execute(self)
    pace.add(start, time.perf_counter())
    return ok

  def limited_run(self, num_steps=None, catch_sigint=True) -> None:
    try:
      run(self, steps if num_steps is None else num_steps, catch_sigint)
    finally:
      print(pace.report(self.env.unwrapped.step_dt, self.env.num_envs), flush=True)

  BaseViewer.run, BaseViewer._execute_step = limited_run, timed_step
  try:
    yield
  finally:
    BaseViewer.run, BaseViewer._execute_step = run, execute
