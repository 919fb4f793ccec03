"""Run a command-line tool of this project as a separate process (tests)."""

from __future__ import annotations

import importlib.util
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


def load_tool(script: str):
  """A tool of ``scripts/`` as a module (its ``__main__`` block not run), once
  per test process; the tools import ``cli_args`` from their folder."""
  name = f"suite_tool_{Path(script).stem}"
  if name not in sys.modules:
    if str(ROOT / "scripts") not in sys.path:
      sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
  return sys.modules[name]


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
