"""Bin-picking scene: bin geometry, the pourer (C engine), cameras (MuJoCo Warp)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from mjlab_tasks.bin_pick.env_cfg import (
  BIN_FLOOR,
  BinGeometry,
  bin_pick_env_cfg,
  object_bounds,
  pourer,
)
from mjlab_tasks.common.c_engine import make_env


def _env(engine="mujoco", **kwargs):
  return make_env(bin_pick_env_cfg(**kwargs), device="cpu", engine=engine)


def _inner_size(model: mujoco.MjModel) -> tuple[float, float, float]:
  """Inner x width, y length and wall height measured from the compiled walls."""

  def g(name):
    return model.geom(f"bin/{name}")

  px, nx = g("bin_wall_px"), g("bin_wall_nx")
  py, ny = g("bin_wall_py"), g("bin_wall_ny")
  width = (px.pos[0] - px.size[0]) - (nx.pos[0] + nx.size[0])
  length = (py.pos[1] - py.size[1]) - (ny.pos[1] + ny.size[1])
  height = 2 * px.size[2]
  assert px.pos[2] - px.size[2] == pytest.approx(
    BIN_FLOOR
  )  # Walls stand on the floor top.
  return width, length, height


@pytest.mark.parametrize(
  "kwargs, expected",
  [
    ({}, (0.400, 0.128, 0.150)),
    ({"bin_width": 0.14, "bin_height": 0.06}, (0.400, 0.14, 0.06)),
  ],
)
def test_bin_inner_size_matches_flags(kwargs, expected):
  env = _env(num_envs=1, objects=1, **kwargs)
  try:
    width, length, height = _inner_size(env.sim.mj_model)
    assert (length, width, height) == pytest.approx(expected, abs=1e-9)
  finally:
    env.close()


def test_bad_bin_size_is_refused():
  with pytest.raises(ValueError, match="outside the supported"):
    bin_pick_env_cfg(bin_width=0.01)


def test_pour_is_deterministic_on_the_c_engine():
  runs = []
  for _ in range(2):
    env = _env(num_envs=3, objects=8, bin_width=0.14, bin_height=0.1, pour_seed=4)
    p = pourer(env)
    runs.append((p.poured.clone(), p.snapshot.clone()))
    env.close()
  assert torch.equal(runs[0][0], runs[1][0])
  assert torch.equal(runs[0][1], runs[1][1])


@pytest.fixture(scope="module")
def poured_envs():
  """Deep (150 mm) and shallow (60 mm) bins, 12 requested objects, 4 envs each."""
  envs = {
    h: _env(num_envs=4, objects=12, bin_width=0.14, bin_height=h) for h in (0.15, 0.06)
  }
  yield envs
  for env in envs.values():
    env.close()


@pytest.mark.parametrize("height", [0.15, 0.06])
def test_poured_objects_settle_inside_the_bin(poured_envs, height):
  env = poured_envs[height]
  p = pourer(env)
  geom = BinGeometry(width=0.14, height=height)
  (x0, x1), (y0, y1) = geom.inner_bounds()
  assert (p.poured >= 1).all()
  for k, name in enumerate(p.cfg.names):
    lo, hi = object_bounds(env, name)
    poured = p.in_bin[:, k]
    inside = (lo[:, 0] >= x0 - 0.002) & (hi[:, 0] <= x1 + 0.002)
    inside &= (lo[:, 1] >= y0 - 0.002) & (hi[:, 1] <= y1 + 0.002)
    # Poured objects inside the walls and not below the floor (2 mm contact
    # softness allowed); the others parked outside the bin.
    assert torch.all(inside[poured]), (name, lo[poured], hi[poured])
    assert torch.all(lo[poured, 2] >= BIN_FLOOR - 0.002), name
    assert not torch.any(inside[~poured])
  # Settled: slow, and no contact deeper than 5 mm anywhere in the pile.
  for k, name in enumerate(p.cfg.names):
    speed = env.scene[name].data.root_link_lin_vel_w.norm(dim=-1)
    assert torch.all(speed[p.in_bin[:, k]] < 0.05), name
  for world in env.sim._worlds:
    depths = [-c.dist for c in world.contact[: world.ncon]]
    assert max(depths, default=0.0) < 0.005


def test_shallow_wall_pours_fewer(poured_envs):
  deep, shallow = (pourer(poured_envs[h]).poured.float() for h in (0.15, 0.06))
  print(
    f"poured (12 requested): 150 mm wall {deep.tolist()}, 60 mm wall {shallow.tolist()}"
  )
  assert shallow.mean() < deep.mean()
  assert torch.all(pourer(poured_envs[0.06]).pile_height < 0.06 + 0.03)


def test_reset_restores_each_envs_own_pour(poured_envs):
  env = poured_envs[0.15]
  p = pourer(env)
  name = p.cfg.names[0]
  moved = torch.cat([env.scene[name].data.root_link_pose_w, torch.zeros(4, 6)], dim=-1)
  moved[:, 2] += 0.3
  env.scene[name].write_root_state_to_sim(moved)
  env.reset(env_ids=torch.tensor([2]))
  env.sim.forward()
  pos = env.scene[name].data.root_link_pos_w - env.scene.env_origins
  np.testing.assert_allclose(pos[2].numpy(), p.snapshot[2, 0, :3].numpy(), atol=1e-6)
  assert torch.all(pos[[0, 1, 3], 2] > p.snapshot[[0, 1, 3], 0, 2] + 0.29)


def test_no_camera_sensor_without_cameras(poured_envs):
  env = poured_envs[0.06]
  assert not any("d415" in name or "camera" in name for name in env.scene.sensors)
  assert env.scene.sensor_context is None  # Nothing to render.


def test_camera_images_when_enabled():
  env = _env(engine="warp", num_envs=1, objects=2, cameras=True)
  try:
    env.reset()
    env.step(torch.zeros(1, 7))
    rgb = env.scene.sensors["wrist_d415"].data.rgb
    assert tuple(rgb.shape) == (1, 180, 320, 3)
    assert rgb.dtype == torch.uint8 and rgb.float().std() > 1.0  # Not a blank image.
    depth = env.scene.sensors["wrist_d415"].data.depth
    assert tuple(depth.shape[:3]) == (1, 180, 320)
  finally:
    env.close()
