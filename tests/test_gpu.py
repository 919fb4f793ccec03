"""CUDA-only checks (``pytest -m gpu``): MuJoCo Warp at scale on the GPU."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
  pytest.mark.gpu,
  pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_cube_tray_expert_on_gpu_batch():
  from experts.cube_tray import CubeTrayExpert
  from mjlab_tasks.common.c_engine import make_env
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.cube_tray.mdp import cube_tray_verdict

  cfg = cube_tray_env_cfg(arm_action="joint", num_envs=512)
  cfg.seed = 0
  env = make_env(cfg, device="cuda:0")
  env.reset()
  expert = CubeTrayExpert(env)
  expert.reset()
  done = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
  success = torch.zeros_like(done)
  for _ in range(240):
    _, _, terminated, truncated, _ = env.step(expert.act())
    ended = (terminated | truncated) & ~done
    success |= ended & cube_tray_verdict(env)["success"]
    done |= ended
    if done.all():
      break
  rate = success.float().mean().item()
  print(f"GPU expert success rate over 512 envs: {rate:.3f}")
  assert rate >= 0.95
  expert.close()


def test_wrist_camera_renders_on_gpu():
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.common.c_engine import make_env

  env = make_env(
    bin_pick_env_cfg(num_envs=16, objects=4, cameras=True), device="cuda:0"
  )
  env.reset()
  env.step(torch.zeros(16, 7, device=env.device))
  rgb = env.scene.sensors["wrist_d415"].data.rgb
  assert tuple(rgb.shape) == (16, 180, 320, 3)
