"""scripts/play.py: mjlab's own play (its viewer) on the C engine, headless."""

from __future__ import annotations

import re

from script_runner import run_script

TASK = "CubeTray-UR5-RG2"


def test_viewer_plays_a_few_steps_on_the_c_engine_and_reports_its_pace():
  # viser serves in the browser: no display needed; --steps ends the run.
  result = run_script(
    "play.py",
    TASK,
    "--engine",
    "mujoco",
    "--agent",
    "random",
    "--num-envs",
    "2",
    "--viewer",
    "viser",
    "--steps",
    "8",
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  (line,) = [s for s in result.stdout.splitlines() if s.startswith("play: ")]
  assert line.startswith("play: 8 policy steps x 2 envs, 0.40 s simulated"), line
  factor = float(re.search(r"real-time factor ([\d.]+)", line).group(1))
  assert 0 < factor < 1.5, line  # The viewer paces itself at 1x.
  assert "(viser) Server stopped" in result.stdout


def test_help_explains_the_suite_flags_and_passes_on_mjlab_help():
  own = run_script("play.py", "--help", timeout=120)
  assert own.returncode == 0, own.stderr
  for flag in ("--engine", "--steps", "--export-onnx", "--checkpoint-file", "--agent"):
    assert flag in own.stdout, flag
  mjlab = run_script("play.py", TASK, "--engine", "mujoco", "--help", timeout=300)
  assert mjlab.returncode == 0, mjlab.stderr[-2000:]
  for flag in ("--checkpoint-file", "--num-envs", "--video", "--viewer"):
    assert flag in mjlab.stdout, flag
