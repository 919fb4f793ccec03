"""Shared pytest setup: quiet Warp kernel-cache logging, triton before
OpenGL; seeded random inputs.

Random tests take the ``rng`` (or ``rng_seed``) fixture: a fresh seed every
run, printed with the test's output and named in the failure report, so a
failure can be rerun exactly with ``SUITE_TEST_SEED=<seed> python -m pytest``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from mjlab_tasks.common.gl import load_triton_before_gl
from mjlab_tasks.common.runtime import quiet_warp

quiet_warp()
# Tests draw pictures with OSMesa in this process and train with torch later
# (which imports triton lazily): triton first, as the tools do.
load_triton_before_gl()

SEED_VARIABLE = "SUITE_TEST_SEED"


@pytest.fixture
def rng_seed(request) -> int:
  """This test's random seed: ``$SUITE_TEST_SEED`` if set, else a fresh one."""
  chosen = os.environ.get(SEED_VARIABLE)
  seed = int(chosen) if chosen else int(np.random.SeedSequence().entropy % (1 << 63))
  request.node.user_properties.append(("random_seed", seed))
  print(f"random seed {seed} (rerun: {SEED_VARIABLE}={seed})")
  return seed


@pytest.fixture
def rng(rng_seed: int) -> np.random.Generator:
  """A NumPy generator on this test's printed seed."""
  return np.random.default_rng(rng_seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  outcome = yield
  report = outcome.get_result()
  seeds = [v for k, v in item.user_properties if k == "random_seed"]
  if report.failed and seeds:
    report.sections.append(
      ("random seed", f"rerun with {SEED_VARIABLE}={seeds[0]} python -m pytest")
    )
