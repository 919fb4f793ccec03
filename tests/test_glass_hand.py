"""The examiner's hand on the GlassPush environment: a segment stops on the
physics step where the wrist force passes its threshold, and the compiled
segments (C engine) step exactly like mjlab's one-step-at-a-time path."""

from __future__ import annotations

import numpy as np
import pytest

from mjlab_tasks.glass_push.examiner.routine import TOUCH_FORCE, Line
from mjlab_tasks.glass_push.examiner.world import GlassTable
from mjlab_tasks.glass_push.hidden import PhysicsConfig
from mjlab_tasks.glass_push.rules.hand import LOWEST_TCP_Z
from mjlab_tasks.glass_push.rules.tables import Glass

GLASS = Glass(0, "tumbler", 0.45, -0.25, 0.07, 0.07, 0.06, 0.15)


def onto_the_glass(hand, i):
  """Above the glass at the safe height, then straight down onto its rim,
  stopped by the touch force; returns whether the force stopped it."""
  yield Line(np.array([0.45, -0.25 + 0.03, hand.z_safe[i]]), 0.0, 0.2)
  down = np.array([0.45, -0.25 + 0.03, LOWEST_TCP_Z])
  return (yield Line(down, 0.0, 0.2, TOUCH_FORCE))


def run_onto_the_glass(compiled: bool):
  table = GlassTable.alone(
    10_001, 2, PhysicsConfig(glasses=(GLASS,)), compiled=compiled
  )
  try:
    assert table.world.hand.compiled is compiled
    log = table.log_forces()
    steps = int(table.world.hand.steps[0])
    (hit,) = table.world.hand.run({0: onto_the_glass(table.world.hand, 0)}).values()
    steps = int(table.world.hand.steps[0]) - steps
    return hit, np.array(log), steps, table.hand_position(), table.glass_states()[0]
  finally:
    table.close()


@pytest.fixture(scope="module")
def both_ways():
  return {compiled: run_onto_the_glass(compiled) for compiled in (True, False)}


@pytest.mark.parametrize("compiled", [True, False])
def test_a_line_stops_on_the_step_the_force_passes_its_threshold(both_ways, compiled):
  hit, log, steps, hand, glass = both_ways[compiled]
  force = np.linalg.norm(log, axis=1)
  assert hit and len(force) == steps
  # The last step is the first above the threshold; nothing stepped after it.
  assert force[-1] > TOUCH_FORCE and np.all(force[:-1] <= TOUCH_FORCE)
  # The pads (37 mm tall) met the 70 mm glass's rim: well above the table.
  assert hand[2] > GLASS.height - 0.04 and glass["standing"]


def test_compiled_segments_step_like_mjlabs_managers(both_ways):
  """The same program on the C engine, compiled and one step at a time
  through mjlab's action term: the same number of steps, the same hand and
  force (float32 tensors on one side: 1e-5)."""
  a, b = both_ways[True], both_ways[False]
  assert a[0] == b[0] and a[2] == b[2]
  np.testing.assert_allclose(a[3], b[3], atol=1e-5)
  np.testing.assert_allclose(a[1], b[1], atol=1e-3)
  assert a[4]["x"] == pytest.approx(b[4]["x"], abs=1e-5)
