"""scripts/train.py: mjlab's own PPO training on the C engine, end to end; the
checkpoint it writes scored, exported as ONNX (same actions) and played."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from script_runner import run_script, train_two_iterations

TASK = "CubeTray-UR5-RG2"


@pytest.fixture(scope="module")
def cube_tray_run(tmp_path_factory):
  """Two PPO iterations of the cube-in-tray task on the C engine (4 envs)."""
  root = tmp_path_factory.mktemp("train")
  result = train_two_iterations(TASK, root)
  assert result.returncode == 0, result.stderr[-3000:]
  (run,) = [p for p in root.glob("*/*") if p.is_dir()]
  return run, result


def test_two_ppo_iterations_on_the_c_engine_write_a_checkpoint(cube_tray_run, tmp_path):
  run, result = cube_tray_run
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


def _policy_pair(checkpoint: Path, onnx_file: Path, num_envs: int):
  """The environment, and the checkpoint and its ONNX export acting in it."""
  from mjlab.tasks.registry import load_env_cfg

  import mjlab_tasks.tasks  # noqa: F401 - the registry
  from mjlab_tasks.engine import make_env
  from mjlab_tasks.policies import load_policy

  cfg = load_env_cfg(TASK, play=True)
  cfg.scene.num_envs = num_envs
  env = make_env(cfg, device="cpu", engine="mujoco")
  pt = load_policy(env, TASK, checkpoint, "cpu")
  onnx = load_policy(env, TASK, onnx_file, "cpu")
  return env, pt, onnx


def test_exported_onnx_policy_acts_as_its_checkpoint(cube_tray_run, tmp_path):
  pytest.importorskip("onnxruntime")
  run, _ = cube_tray_run
  onnx_file = tmp_path / "policy.onnx"
  exported = run_script(
    "play.py",
    TASK,
    "--engine",
    "mujoco",
    "--checkpoint-file",
    str(run / "model_1.pt"),
    "--export-onnx",
    str(onnx_file),
    timeout=600,
  )
  assert exported.returncode == 0, exported.stderr[-3000:]
  assert f"wrote {onnx_file}" in exported.stdout
  env, pt, onnx = _policy_pair(run / "model_1.pt", onnx_file, num_envs=4)
  generator = torch.Generator().manual_seed(0)
  try:
    for _ in range(6):  # Varied observations: random actions between checks.
      expected, actual = pt.act(), onnx.act()
      assert expected.abs().max() > 1e-3  # A live network, not zeros.
      torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
      env.step(2 * torch.rand(expected.shape, generator=generator) - 1)
  finally:
    env.close()
  # Scored like the checkpoint, by the same tool.
  report_dir = tmp_path / "onnx_eval"
  scored = run_script(
    "evaluate_cube_tray.py",
    "--policy",
    str(onnx_file),
    "--num-envs",
    "2",
    "--max-steps",
    "10",
    "--output",
    str(report_dir),
  )
  assert scored.returncode == 0, scored.stderr[-3000:]
  report = json.loads((report_dir / "report.json").read_text())
  assert report["controller"] == f"ONNX policy {onnx_file}"
  assert report["summary"]["episodes"] == 2


def test_play_films_the_checkpoint_on_the_c_engine(cube_tray_run):
  run, _ = cube_tray_run
  result = run_script(
    "play.py",
    TASK,
    "--engine",
    "mujoco",
    "--checkpoint-file",
    str(run / "model_1.pt"),
    "--num-envs",
    "1",
    "--viewer",
    "viser",
    "--video",
    "True",
    "--video-length",
    "5",
    "--steps",
    "8",
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "play: 8 policy steps x 1 envs" in result.stdout
  (video,) = (run / "videos" / "play").glob("*.mp4")  # mjlab's own place
  assert video.stat().st_size > 1_000


def test_bad_engine_and_task_are_one_line_errors():
  cases = (
    (("CubeTray-UR5-RG2", "--engine", "bullet"), "--engine must be warp or mujoco"),
    (("NoSuchTask",), "unknown task 'NoSuchTask'"),
  )
  with ThreadPoolExecutor(len(cases)) as pool:  # The processes at once.
    results = list(pool.map(lambda case: run_script("train.py", *case[0]), cases))
  for (_, expected), result in zip(cases, results, strict=True):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert expected in lines[0] and "Traceback" not in result.stderr


def test_plot_training_reads_the_run_and_draws_the_curves(tmp_path):
  """An event file as rsl_rl writes it (torch's SummaryWriter), plotted
  against environment steps and wall-clock minutes."""
  from torch.utils.tensorboard import SummaryWriter

  run = tmp_path / "run"
  (run / "params").mkdir(parents=True)
  (run / "params" / "env.yaml").write_text("scene:\n  num_envs: 4\n")
  (run / "params" / "agent.yaml").write_text("num_steps_per_env: 8\n")
  writer = SummaryWriter(str(run))
  success = [0.0, 0.0, 0.25, 0.5, 0.75]
  for it, value in enumerate(success):
    writer.add_scalar("Episode_Metrics/success", value, it)
    writer.add_scalar("Episode_Metrics/grasped", 1.0 - value, it)
  writer.close()
  out = tmp_path / "curves.png"
  result = run_script(
    "plot_training.py", "--run", str(run), "--output", str(out), "--smooth", "1"
  )
  assert result.returncode == 0, result.stderr[-2000:]
  for png in (out, tmp_path / "curves_time.png"):
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
  (data,) = json.loads(out.with_suffix(".json").read_text())["runs"]
  summary = data["summary"]
  assert (summary["iterations"], summary["env_steps"]) == (5, 5 * 4 * 8)
  assert summary["tags"]["Episode_Metrics/success"] == {
    "first": 0.0,
    "last": 0.75,
    "best": 0.75,
    "best_iteration": 4,
  }
  assert summary["tags"]["Episode_Metrics/grasped"]["first"] == 1.0
  assert "Episode_Metrics/lifted" not in summary["tags"]  # Absent tags are skipped.
