"""The suite's one pose renderer (``mjlab_tasks.common.video.PoseRenderer``)
draws what MuJoCo's own ``mujoco.Renderer`` draws: a free camera with chosen
geom groups and a background where nothing is drawn (the videos), bitwise,
on a fresh random pose."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mjlab_tasks.common.gl import OffscreenGLError, headless_gl
from mjlab_tasks.common.video import PoseRenderer, gaussian_room


def _model() -> mujoco.MjModel:
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import copy_model, make_env

  env = make_env(cube_tray_env_cfg(num_envs=1), device="cpu", engine="mujoco")
  compiled = copy_model(env.sim.mj_model)
  env.close()
  return compiled


def test_pose_renderer_draws_what_mujocos_renderer_draws(rng):
  model = _model()
  size = (160, 120)
  model.vis.global_.offwidth = max(model.vis.global_.offwidth, size[0])
  model.vis.global_.offheight = max(model.vis.global_.offheight, size[1])
  qpos = model.qpos0.copy()
  qpos[:6] += rng.uniform(-0.3, 0.3, 6)  # the arm somewhere new
  option = mujoco.MjvOption()
  option.geomgroup[:] = 0
  for g in (0, 1, 2):
    option.geomgroup[g] = 1
  cam = mujoco.MjvCamera()
  cam.lookat[:] = (0.45, 0.0, 0.05)
  cam.distance, cam.azimuth, cam.elevation = 1.5, float(rng.uniform(0, 360)), -5.0
  background = gaussian_room(*size, seed=int(rng.integers(1000)))
  renderer = PoseRenderer(model)
  try:
    mine = renderer.render(qpos, cam, size, option, background=background)
  except OffscreenGLError as err:
    pytest.skip(f"no offscreen OpenGL: {err}")
  finally:
    renderer.close()

  headless_gl()
  data = mujoco.MjData(model)
  data.qpos[:] = qpos
  mujoco.mj_kinematics(model, data)
  mujoco.mj_camlight(model, data)
  theirs = mujoco.Renderer(model, height=size[1], width=size[0])
  theirs.update_scene(data, camera=cam, scene_option=option)
  image = theirs.render()
  theirs.enable_segmentation_rendering()
  segment = theirs.render()[..., 0]
  theirs.close()
  expected = np.where((segment < 0)[..., None], background, image)
  assert (segment < 0).any() and (segment >= 0).any()  # both kinds of pixel
  np.testing.assert_array_equal(mine, expected)
