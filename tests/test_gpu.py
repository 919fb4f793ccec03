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
  from mjlab_tasks.common.verdict import task_verdict
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env

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
    success |= ended & task_verdict(env)["success"]
    done |= ended
    if done.all():
      break
  rate = success.float().mean().item()
  print(f"GPU expert success rate over 512 envs: {rate:.3f}")
  assert rate >= 0.95
  expert.close()


def test_wrist_camera_renders_on_gpu():
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.engine import make_env

  env = make_env(
    bin_pick_env_cfg(num_envs=16, objects=4, cameras=True), device="cuda:0"
  )
  env.reset()
  env.step(torch.zeros(16, 7, device=env.device))
  rgb = env.scene.sensors["wrist_d415"].data.rgb
  assert tuple(rgb.shape) == (16, 180, 320, 3)


def test_glass_examiner_batch_on_gpu():
  """64 drawn tables in one MuJoCo Warp batch on the GPU: every table
  pushes its first glass's way from outside the group; the C world of the
  first four tables gives the same verdicts."""
  import numpy as np

  from mjlab_tasks.glass_push.examiner.world import GlassTable, GlassWorld
  from mjlab_tasks.glass_push.rules.requests import parse_push

  tables = list(range(10_000, 10_064))
  batch = GlassWorld(tables, 2, engine="warp", device="cuda:0")
  requests = {}
  for i in range(len(tables)):
    for g in batch.look(i):  # the first glass with a start within reach
      request = dict(
        glass=g["id"],
        start=[g["x"] - 0.15, g["y"]],
        heading=0.0,
        reach=0.12,
        travel=0.02,
        aim=[g["x"] + 0.02, g["y"]],
      )
      try:
        parse_push(request, batch.glasses[i], {})  # raises if out of reach
      except ValueError:
        continue
      requests[i] = ("push", request)
      break
  assert len(requests) >= 32
  replies = batch.act(requests)
  assert all(replies[i][0] == "ok" for i in requests)
  assert np.isfinite(batch.sim.data.qpos.cpu().numpy()).all()
  for i in list(requests)[:4]:
    world = GlassTable.alone(tables[i], 2)
    world.look()
    c = world.push(requests[i][1])
    w = replies[i][1]
    print(tables[i], "warp", w, "C", c)
    assert (w["blocked"], w["jammed"], w["touched"] is None) == (
      c["blocked"],
      c["jammed"],
      c["touched"] is None,
    )
    world.close()
  batch.close()
