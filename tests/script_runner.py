"""Run a command-line tool of this project as a separate process (tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(
  script: str, *args: str, timeout: float = 1800
) -> subprocess.CompletedProcess:
  """``python scripts/<script> <args>`` from the repository root, output captured."""
  return subprocess.run(
    [sys.executable, str(ROOT / "scripts" / script), *args],
    capture_output=True,
    text=True,
    cwd=ROOT,
    timeout=timeout,
  )


def train_two_iterations(task: str, root: Path) -> subprocess.CompletedProcess:
  """scripts/train.py: two PPO iterations of ``task`` on the C engine (4
  environments, 8 steps each), logged under ``root``."""
  return run_script(
    "train.py",
    task,
    "--engine",
    "mujoco",
    "--env.scene.num-envs",
    "4",
    "--agent.num-steps-per-env",
    "8",
    "--agent.max-iterations",
    "2",
    "--log-root",
    str(root),
  )
