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


def _evaluate(model, tmp_path, envs: int, max_steps: int) -> dict:
  """`evaluate_cube_tray.py --policy model`, one episode per environment,
  as a user runs it; its report."""
  out_dir = tmp_path / "eval"
  argv = ["--policy", str(model), "--num-envs", str(envs), "--episodes", str(envs)]
  argv += ["--max-steps", str(max_steps), "--device", "cpu", "--output", str(out_dir)]
  result = run_script("evaluate_cube_tray.py", *argv)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads((out_dir / "report.json").read_text())


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
  report = _evaluate(model, tmp_path, envs=2, max_steps=20)
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
  report = _evaluate(model, tmp_path, envs=2, max_steps=20)
  assert report["summary"]["episodes"] == 2


SCENE_DIR = ROOT / "policies" / "cube_tray_scene_bc"


def test_the_shipped_scene_camera_policy_runs_in_the_evaluator(tmp_path):
  """policies/cube_tray_scene_bc/: small, an image policy that reads no
  object state, and the evaluator builds its camera and runs it (a short
  episode; its success is measured in its README, not here)."""
  model = SCENE_DIR / "policy.pt"
  assert model.stat().st_size < 5 * 2**20
  summary = json.loads((SCENE_DIR / "summary.json").read_text())
  assert summary["source"]["dirty"] is False and len(summary["source"]["commit"]) == 40
  report = _evaluate(model, tmp_path, envs=1, max_steps=5)
  assert report["summary"]["episodes"] == 1


def test_the_shipped_scene_camera_policy_sees_the_cube_and_the_tray():
  """Its perception's estimates from the first picture of 8 episodes whose
  placements were never in its training (seed 31337), against the
  environment's true terms. Measured on 128 such first pictures: vectors
  within 11 mm (95 % within 6 mm), the quarter turn 2.8 degrees off on
  average (at most 8.5); a guess would be 22.5 degrees off on average. The
  bounds leave room for another OpenGL rasterizer."""
  import torch

  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env
  from mjlab_tasks.policies import BcPolicy, bc_checkpoint
  from mjlab_tasks.policies.bc_perception import quarter_turn_error
  from mjlab_tasks.policies.bc_policy import bc_columns

  ckpt = bc_checkpoint(SCENE_DIR / "policy.pt")
  assert not set(ckpt["perceive"]) & set(ckpt["obs_keys"])
  cfg = cube_tray_env_cfg(play=True, num_envs=8, cameras=("scene",))
  cfg.seed = 31337
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    obs, _ = env.reset()
    policy = BcPolicy(env, "CubeTray-UR5-RG2", SCENE_DIR / "policy.pt", ckpt, "cpu")
    net = policy._model
    with torch.no_grad():
      estimate = net.perception(
        policy._observations()[:, net.seen_at], policy._images()
      )
    sizes = [ckpt["actor_sizes"][ckpt["actor_keys"].index(k)] for k in ckpt["perceive"]]
    truth_at = bc_columns(
      env, "truth", {"obs_keys": ckpt["perceive"], "obs_sizes": sizes}
    )
    truth = obs["actor"][:, truth_at]
  finally:
    env.close()
  assert ckpt["perceive"] == ["tcp_to_cube", "cube_to_goal", "cube_yaw_to_tool"]
  distance = torch.linalg.vector_norm(
    estimate[:, :6].view(8, 2, 3) - truth[:, :6].view(8, 2, 3), dim=-1
  )
  assert distance.max() < 0.02, distance
  turn = torch.rad2deg(quarter_turn_error(estimate[:, 6], truth[:, 6]))
  assert turn.mean() < 6.0 and turn.max() < 15.0, turn
