"""The shipped cube-in-tray PPO policy (policies/cube_tray/) stays usable.

It is a committed artefact: a change of the task's observations or of the
registered network sizes would leave it unloadable, and the documented
commands would fail. Checked as a user runs it: `evaluate_cube_tray.py
--policy` on the C engine (a short episode; no success threshold: how well
it does is measured in docs/training.md, not here), plus what the folder
promises (size, its training record).
"""

from __future__ import annotations

import json

from script_runner import ROOT, run_script

POLICY_DIR = ROOT / "policies" / "cube_tray"


def test_the_folder_holds_a_small_checkpoint_and_its_record():
  record = json.loads((POLICY_DIR / "training.json").read_text())
  model = POLICY_DIR / record["checkpoint"]
  assert model.stat().st_size < 5 * 2**20
  assert (POLICY_DIR / "params" / "env.yaml").is_file()
  assert (POLICY_DIR / "params" / "agent.yaml").is_file()
  assert len(record["commit"]) == 40
  assert "scripts/train.py CubeTray-UR5-RG2" in record["train_command"]
  result = record["evaluation"]
  assert result["episodes"] == 256
  assert 0 <= result["successes"] <= 256


def test_the_evaluator_runs_it_in_place_of_the_expert(tmp_path):
  record = json.loads((POLICY_DIR / "training.json").read_text())
  model = POLICY_DIR / record["checkpoint"]
  out_dir = tmp_path / "eval"
  result = run_script(
    "evaluate_cube_tray.py",
    "--policy",
    str(model),
    "--num-envs",
    "2",
    "--episodes",
    "2",
    "--max-steps",
    "20",
    "--device",
    "cpu",
    "--output",
    str(out_dir),
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out_dir / "report.json").read_text())
  assert report["controller"] == f"policy checkpoint {model}"
  assert report["summary"]["episodes"] == 2


BC_DIR = ROOT / "policies" / "cube_tray_bc"


def test_the_shipped_behaviour_cloning_policy_runs_in_the_evaluator(tmp_path):
  """policies/cube_tray_bc/: small, its record names the task's preset, and
  the evaluator runs it (a short episode; its success is measured in its
  README and docs/demonstrations.md, not here)."""
  model = BC_DIR / "policy.pt"
  assert model.stat().st_size < 5 * 2**20
  summary = json.loads((BC_DIR / "summary.json").read_text())
  assert summary["preset"]["task"] == "CubeTray-UR5-RG2"
  assert len(summary["source"]["commit"]) == 40
  out_dir = tmp_path / "eval"
  argv = ["--policy", str(model), "--num-envs", "2", "--episodes", "2"]
  argv += ["--max-steps", "20", "--device", "cpu", "--output", str(out_dir)]
  result = run_script("evaluate_cube_tray.py", *argv)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out_dir / "report.json").read_text())
  assert report["summary"]["episodes"] == 2
