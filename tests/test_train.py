"""scripts/train.py: mjlab's own PPO training on the C engine, end to end."""

from __future__ import annotations

import json

import pytest
from script_runner import run_script


@pytest.mark.parametrize("task", ["CubeTray-UR5-RG2"])
def test_two_ppo_iterations_on_the_c_engine_write_a_checkpoint(tmp_path, task):
  result = run_script(
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
    str(tmp_path),
  )
  assert result.returncode == 0, result.stderr[-3000:]
  (run,) = [p for p in tmp_path.glob("*/*") if p.is_dir()]
  assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
  assert list(run.glob("events.out.tfevents.*"))  # tensorboard by default
  assert (run / "params" / "env.yaml").is_file()
  assert "Learning iteration 1/2" in result.stdout
  # The checkpoint is scored like the expert, by the same tool and evaluator.
  report_dir = tmp_path / "policy_eval"
  scored = run_script(
    "evaluate_cube_tray.py",
    "--policy",
    str(run / "model_1.pt"),
    "--num-envs",
    "2",
    "--max-steps",
    "20",
    "--output",
    str(report_dir),
  )
  assert scored.returncode == 0, scored.stderr[-3000:]
  report = json.loads((report_dir / "report.json").read_text())
  assert report["controller"] == f"policy checkpoint {run / 'model_1.pt'}"
  assert report["summary"]["episodes"] == 2
  assert all(e["outcome"] in ("success", "failure") for e in report["episodes"])


def test_bad_engine_and_task_are_one_line_errors():
  for args, expected in (
    (("CubeTray-UR5-RG2", "--engine", "bullet"), "--engine must be warp or mujoco"),
    (("NoSuchTask",), "unknown task 'NoSuchTask'"),
  ):
    result = run_script("train.py", *args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert expected in lines[0] and "Traceback" not in result.stderr


def test_plot_training_reads_the_run_and_draws_the_curves(tmp_path):
  from torch.utils.tensorboard import SummaryWriter

  run = tmp_path / "run"
  writer = SummaryWriter(str(run))
  success = [0.0, 0.0, 0.25, 0.5, 0.75]
  for it, value in enumerate(success):
    writer.add_scalar("Episode_Metrics/success", value, it)
    writer.add_scalar("Episode_Metrics/grasped", 1.0 - value, it)
  writer.close()
  out = tmp_path / "curves.png"
  result = run_script("plot_training.py", "--run", str(run), "--output", str(out))
  assert result.returncode == 0, result.stderr[-2000:]
  assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5_000
  summary = json.loads(out.with_suffix(".json").read_text())["summary"]
  assert summary["Episode_Metrics/success"] == {
    "first": 0.0,
    "last": 0.75,
    "best": 0.75,
    "iterations": 5,
  }
  assert summary["Episode_Metrics/grasped"]["first"] == 1.0
  assert "Episode_Metrics/lifted" not in summary  # Absent tags are skipped.
