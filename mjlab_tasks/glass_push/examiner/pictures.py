"""Pictures of the glass world: the top view and the film, drawn from a
replica of a table's model that is never stepped (the scored world is the
same filmed or not). OpenGL is loaded at the first picture, never before:
every other call works on a machine without any OpenGL library, and a
picture asked for there raises ``NoOffscreenGL`` naming what to install.
"""

from __future__ import annotations

import mujoco
import numpy as np

from mjlab_tasks.common import video
from mjlab_tasks.common.gl import OffscreenGLError
from mjlab_tasks.glass_push.rules.errors import NoOffscreenGL

FILM_FPS = 10
FILM_SIZE = (480, 360)


def write_video(path: str, frames: list[np.ndarray]) -> None:
  """Film frames to an mp4 at FILM_FPS (nothing for no frames)."""
  from mjlab_tasks.common.video import mediapy_with_ffmpeg

  if frames:
    mediapy_with_ffmpeg().write_video(path, frames, fps=FILM_FPS)


# The backend pictures use (chosen by the examiner for its worker, which runs
# with MUJOCO_GL=disable so that importing mujoco loads no OpenGL); None:
# the suite's OpenGL policy (mjlab_tasks.common.gl) at the first picture.
_picture_gl: str | None = None


def use_picture_gl(backend: str | None) -> None:
  """Draw pictures with MuJoCo's OpenGL ``backend`` (a MUJOCO_GL value)."""
  global _picture_gl
  _picture_gl = backend


class PoseRenderer(video.PoseRenderer):
  """The suite's pose renderer (``mjlab_tasks.common.video``) drawing the
  glass world's pictures: the examiner's chosen backend, and
  ``NoOffscreenGL`` (only) when no context can be made."""

  def __init__(self, model: mujoco.MjModel):
    super().__init__(model, who="pictures")

  def backend(self) -> str | None:
    return _picture_gl

  def render(self, qpos: np.ndarray, camera: str, size, hide_robot: bool) -> np.ndarray:
    """RGB uint8 [H, W, 3] of pose ``qpos`` from ``camera`` at ``size`` (W, H);
    ``hide_robot`` hides geom group 2 (the arm)."""
    option = mujoco.MjvOption()
    if hide_robot:
      option.geomgroup[2] = 0
    try:
      return super().render(qpos, camera, size, option)
    except OffscreenGLError as err:
      raise NoOffscreenGL(
        f"{err} Every call but the pictures works without OpenGL."
      ) from err
