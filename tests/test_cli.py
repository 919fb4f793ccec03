"""Command-line tools end to end on the CPU (small runs)."""

from __future__ import annotations

import json

import pytest
from script_runner import run_script


def run(script: str, *args: str):
  return run_script(script, *args)


@pytest.mark.parametrize(
  "script", ["check_robot.py", "evaluate_cube_tray.py", "evaluate_binpick.py"]
)
def test_help_explains_every_flag(script):
  out = run(script, "--help")
  assert out.returncode == 0, out.stderr
  for flag in ("--num-envs", "--device", "--output"):
    assert flag in out.stdout


def test_evaluate_cube_tray_writes_report_and_video_and_refuses_reuse(tmp_path):
  # 30 steps (1.5 s): the episodes time out; the expert's success through the
  # tool is the slow test below.
  out_dir = tmp_path / "run"
  result = run(
    "evaluate_cube_tray.py",
    "--num-envs",
    "2",
    "--nominal",
    "--max-steps",
    "30",
    "--device",
    "cpu",
    "--output",
    str(out_dir),
    "--videos",
    "1",
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out_dir / "report.json").read_text())
  assert report["summary"]["episodes"] == 2
  assert {e["outcome"] for e in report["episodes"]} == {"failure"}
  assert report["source"]["sources_sha256"] and report["source"]["files"]
  assert (out_dir / "env_000.mp4").stat().st_size > 2_000
  assert (out_dir / "video_poses.npz").exists()
  assert "success 0/2" in result.stdout

  # A separate command re-renders the run from its recorded poses alone.
  again_dir = tmp_path / "rerender"
  rerender = run(
    "render_poses.py",
    "--poses",
    str(out_dir / "video_poses.npz"),
    "--output",
    str(again_dir),
  )
  assert rerender.returncode == 0, rerender.stderr[-3000:]
  assert (again_dir / "rerender_000.mp4").stat().st_size > 2_000

  again = run("evaluate_cube_tray.py", "--num-envs", "1", "--output", str(out_dir))
  assert again.returncode != 0
  assert "already exists" in again.stderr
  # The refused run left the first run's report untouched.
  assert json.loads((out_dir / "report.json").read_text()) == report


@pytest.mark.slow  # about 60 s: two whole expert episodes and their video
def test_evaluate_cube_tray_expert_succeeds_on_film(tmp_path):
  out_dir = tmp_path / "run"
  argv = ["--num-envs", "2", "--nominal", "--device", "cpu", "--videos", "1"]
  result = run("evaluate_cube_tray.py", *argv, "--output", str(out_dir))
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out_dir / "report.json").read_text())
  assert report["summary"]["success_rate"] == 1.0
  assert {e["outcome"] for e in report["episodes"]} == {"success"}
  assert (out_dir / "env_000.mp4").stat().st_size > 10_000
  assert "success 2/2" in result.stdout


def test_bad_arguments_fail_clearly():
  out = run("evaluate_cube_tray.py", "--num-envs", "0")
  assert out.returncode != 0 and "--num-envs must be at least 1" in out.stderr
  out = run("evaluate_cube_tray.py", "--videos", "1")
  assert out.returncode != 0 and "--videos needs --output" in out.stderr


@pytest.mark.slow
def test_expert_success_rate_on_64_randomized_envs(tmp_path):
  """Measured on the development machine: see docs/cube_tray.md."""
  result = run(
    "evaluate_cube_tray.py",
    "--num-envs",
    "64",
    "--seed",
    "0",
    "--device",
    "cpu",
    "--engine",
    "mujoco",
    "--output",
    str(tmp_path / "run64"),
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((tmp_path / "run64" / "report.json").read_text())
  assert report["summary"]["episodes"] == 64
  assert report["summary"]["success_rate"] >= 0.95


@pytest.mark.slow  # 35 s; the fast tier's exact demo replays (test_demos) cover it.
def test_c_engine_reports_are_reproducible(tmp_path):
  reports = []
  for run_dir in ("a", "b"):
    result = run(
      "evaluate_cube_tray.py",
      "--num-envs",
      "3",
      "--episodes",
      "3",
      "--seed",
      "5",
      "--engine",
      "mujoco",
      "--output",
      str(tmp_path / run_dir),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports.append(json.loads((tmp_path / run_dir / "report.json").read_text()))
  assert reports[0]["episodes"] == reports[1]["episodes"]
  for key in ("success_rate", "outcomes", "failure_reasons", "mean_time_to_success_s"):
    assert reports[0]["summary"][key] == reports[1]["summary"][key]
