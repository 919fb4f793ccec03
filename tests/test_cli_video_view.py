"""The cube-in-tray video camera shows the work: arm, cube and tray fill the frame.

No rendering: MuJoCo places the free camera (``mjv_updateScene``) and points
are projected with the model's vertical field of view. The arm at its start
pose and the cube and tray anywhere in their randomization ranges must lie
inside the picture, and together span most of it.
"""

from __future__ import annotations

import itertools

import mujoco
import numpy as np
import pytest

from assets.ur5_rg2.kinematics import ArmKinematics
from mjlab_tasks.common.video import CameraView
from mjlab_tasks.cube_tray.env_cfg import (
  CUBE_HALF,
  CUBE_RANGE,
  TRAY_INNER_HALF,
  TRAY_RANGE,
  TRAY_WALL,
  TRAY_WALL_HEIGHT,
)
from mjlab_tasks.cube_tray.evaluation import VIDEO_VIEW

HOME = np.array([0.0, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])


def load_view() -> CameraView:
  return CameraView(**VIDEO_VIEW)


def project(model, view: CameraView, points: np.ndarray) -> np.ndarray:
  """Pixel coordinates (u right, v down) of world points [N, 3]."""
  data = mujoco.MjData(model)
  mujoco.mj_kinematics(model, data)
  cam = mujoco.MjvCamera()
  cam.type = mujoco.mjtCamera.mjCAMERA_FREE
  cam.lookat[:] = view.lookat
  cam.distance, cam.azimuth, cam.elevation = (
    view.distance,
    view.azimuth,
    view.elevation,
  )
  scene = mujoco.MjvScene(model, maxgeom=100)
  mujoco.mjv_updateScene(
    model, data, mujoco.MjvOption(), None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
  )
  # The two eye cameras sit ipd/2 either side; without stereo the picture is
  # drawn from their midpoint.
  gl = scene.camera[0]
  forward, up = np.array(gl.forward), np.array(gl.up)
  right = np.cross(forward, up)
  eye = (np.array(scene.camera[0].pos) + np.array(scene.camera[1].pos)) / 2
  rel = points - eye
  depth = rel @ forward
  assert (depth > 0).all(), "a point is behind the camera"
  tan_half = np.tan(np.radians(model.vis.global_.fovy) / 2)
  aspect = view.width / view.height
  x = (rel @ right) / (depth * tan_half * aspect)
  y = (rel @ up) / (depth * tan_half)
  return np.stack([(x + 1) / 2 * view.width, (1 - y) / 2 * view.height], axis=1)


def box_corners(xs, ys, zs) -> np.ndarray:
  return np.array(list(itertools.product(xs, ys, zs)))


@pytest.fixture(scope="module")
def arm():
  kin = ArmKinematics()
  kin.data.qpos[kin.qpos_adr] = HOME
  mujoco.mj_kinematics(kin.model, kin.data)
  return kin


def test_arm_cube_and_tray_fill_the_video_frame(arm):
  view = load_view()
  model, data = arm.model, arm.data
  # The arm: the corners of every geom's bounding box, posed.
  signs = box_corners((-1, 1), (-1, 1), (-1, 1))
  robot = np.concatenate(
    [
      data.geom_xpos[g]
      + (
        data.geom_xmat[g].reshape(3, 3)
        @ (model.geom_aabb[g, :3] + signs * model.geom_aabb[g, 3:]).T
      ).T
      for g in range(model.ngeom)
    ]
  )
  # Objects anywhere in their ranges (the cube's yaw: its circumscribed square).
  c = CUBE_HALF * np.sqrt(2)
  cube = box_corners(
    (CUBE_RANGE["x"][0] - c, CUBE_RANGE["x"][1] + c),
    (CUBE_RANGE["y"][0] - c, CUBE_RANGE["y"][1] + c),
    (0.0, 2 * CUBE_HALF),
  )
  t = TRAY_INNER_HALF + TRAY_WALL
  tray = box_corners(
    (TRAY_RANGE["x"][0] - t, TRAY_RANGE["x"][1] + t),
    (TRAY_RANGE["y"][0] - t, TRAY_RANGE["y"][1] + t),
    (0.0, TRAY_WALL_HEIGHT),
  )
  margin = 5  # pixels
  for name, points in (("arm", robot), ("cube", cube), ("tray", tray)):
    uv = project(model, view, points)
    inside = (
      (uv[:, 0] >= margin)
      & (uv[:, 0] <= view.width - margin)
      & (uv[:, 1] >= margin)
      & (uv[:, 1] <= view.height - margin)
    )
    assert inside.all(), f"{name} leaves the picture: {uv[~inside].round()}"
  uv = project(model, view, np.concatenate([robot, cube, tray]))
  span = uv.max(axis=0) - uv.min(axis=0)
  # The work fills the picture: not a small scene in a corner.
  assert span[0] >= 0.4 * view.width and span[1] >= 0.75 * view.height, span
