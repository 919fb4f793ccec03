"""A trained bin-picking policy scored like the expert: scripts/evaluate_binpick.py
--policy runs it (checkpoint or ONNX export) with the same evaluator and report.

The checkpoint is trained fresh (two PPO iterations on the C engine), so the
test follows whatever observations the task has.
"""

from __future__ import annotations

import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

import pytest
from script_runner import run_script, train_two_iterations

TASK = "BinPick-UR5-RG2"
SMALL = ["--num-envs", "2", "--device", "cpu", "--bin-width", ".14"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
  """model_1.pt of two PPO iterations, 4 environments, 8 steps each."""
  root = tmp_path_factory.mktemp("train")
  result = train_two_iterations(TASK, root)
  assert result.returncode == 0, result.stderr[-3000:]
  (model,) = root.glob("*/*/model_1.pt")
  return model


def _evaluate(policy: Path, output: Path, steps: int = 10):
  return run_script(
    "evaluate_binpick.py",
    "--policy",
    str(policy),
    *SMALL,
    "--max-steps",
    str(steps),
    "--output",
    str(output),
  )


def _check_report(out_dir: Path, controller: str, steps: int) -> dict:
  report = json.loads((out_dir / "report.json").read_text())
  assert report["task"] == TASK and report["controller"] == controller
  summary = report["summary"]
  assert summary["environments"] == 2 and summary["poured"] > 0
  assert summary["simulated_time_s"] == pytest.approx(steps * 0.05)
  for env in report["environments"]:
    assert env["outcome"] in ("bin_cleared", "timeout", "physics_reset")
    assert 0 <= env["delivered"] <= env["poured"]
  # The evaluator's own files as for the expert; the expert's plans are absent.
  for name in ("physics_metrics.json", "final_states.json", "source_snapshot.json"):
    assert (out_dir / name).stat().st_size > 0, name
  assert not (out_dir / "transitions.json").exists()
  assert "expert" not in report["config"]
  return report


def test_checkpoint_runs_in_place_of_the_expert(checkpoint, tmp_path):
  out_dir = tmp_path / "eval"
  result = _evaluate(checkpoint, out_dir)
  assert result.returncode == 0, result.stderr[-3000:]
  _check_report(out_dir, f"policy checkpoint {checkpoint}", steps=10)
  assert "delivered " in result.stdout and f"wrote {out_dir}" in result.stdout


def test_onnx_export_runs_in_place_of_the_expert(checkpoint, tmp_path):
  pytest.importorskip("onnxruntime")
  onnx_file = tmp_path / "policy.onnx"
  exported = run_script(
    "play.py",
    TASK,
    "--engine",
    "mujoco",
    "--checkpoint-file",
    str(checkpoint),
    "--export-onnx",
    str(onnx_file),
  )
  assert exported.returncode == 0, exported.stderr[-3000:]
  out_dir = tmp_path / "eval"
  result = _evaluate(onnx_file, out_dir, steps=5)
  assert result.returncode == 0, result.stderr[-3000:]
  _check_report(out_dir, f"ONNX policy {onnx_file}", steps=5)


def _untrained_cube_tray_policy(folder: Path) -> tuple[Path, Path]:
  """A checkpoint of the other task written by its own runner (untrained),
  and its ONNX export."""
  from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
  from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

  import mjlab_tasks.tasks  # noqa: F401 - the registry
  from mjlab_tasks.engine import make_env

  cfg = load_env_cfg("CubeTray-UR5-RG2", play=True)
  cfg.scene.num_envs = 1
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    runner = MjlabOnPolicyRunner(
      RslRlVecEnvWrapper(env), asdict(load_rl_cfg("CubeTray-UR5-RG2"))
    )
    runner.save(str(folder / "model_0.pt"))
    runner.export_policy_to_onnx(str(folder), "cube_tray.onnx")
  finally:
    env.close()
  return folder / "model_0.pt", folder / "cube_tray.onnx"


def test_bad_policies_are_one_line_errors(checkpoint, tmp_path):
  wrong_pt, wrong_onnx = _untrained_cube_tray_policy(tmp_path)
  has_runtime = importlib.util.find_spec("onnxruntime") is not None
  cases = [
    ("evaluate_binpick.py", tmp_path / "none.pt", "no such file"),
    ("evaluate_binpick.py", wrong_pt, f"not a readable {TASK} policy"),
    (
      "evaluate_binpick.py",
      wrong_onnx,
      f"is not a {TASK} policy: it maps"
      if has_runtime
      else "pip install 'manipulation-suite[onnx]'",
    ),
    ("evaluate_cube_tray.py", checkpoint, "not a readable CubeTray-UR5-RG2 policy"),
  ]

  def run(case):
    script, policy, _ = case
    out_dir = tmp_path / f"eval_{policy.stem}_{script}"
    return run_script(
      script, "--policy", str(policy), "--num-envs", "1", "--output", str(out_dir)
    )

  # The four processes at once: each is mostly imports (the default tier's time).
  with ThreadPoolExecutor(max_workers=len(cases)) as pool:
    results = list(pool.map(run, cases))
  for (_, _, expected), result in zip(cases, results, strict=True):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, result.stdout[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert expected in lines[-1] and lines[-1].startswith("error: "), lines[-1]
