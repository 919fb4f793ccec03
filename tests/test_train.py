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
