"""Pictures of the glass world: the top view and the film, drawn from a
replica of a table's model that is never stepped (the scored world is the
same filmed or not). OpenGL is loaded at the first picture, never before:
every other call works on a machine without any OpenGL library, and a
picture asked for there raises ``NoOffscreenGL`` naming what to install.
"""

from __future__ import annotations

import importlib
import os

import mujoco
import numpy as np

from mjlab_tasks.common.gl import (
  GL_LIBRARIES,
  GL_MODULES,
  GL_PACKAGES,
  load_triton_before_gl,
)
from mjlab_tasks.glass_push.rules.errors import NoOffscreenGL

FILM_FPS = 10
FILM_SIZE = (480, 360)


def write_video(path: str, frames: list[np.ndarray]) -> None:
  """Film frames to an mp4 at FILM_FPS (nothing for no frames)."""
  from mjlab_tasks.common.video import mediapy_with_ffmpeg

  if frames:
    mediapy_with_ffmpeg().write_video(path, frames, fps=FILM_FPS)


GL_OFF = ("disable", "disabled", "off", "false", "0")  # MuJoCo's "no GL" values
# The backend pictures use (chosen by the examiner for its worker, which runs
# with MUJOCO_GL=disable so that importing mujoco loads no OpenGL); None:
# decide from this process's environment at the first picture.
_picture_gl: str | None = None
_gl_failure: NoOffscreenGL | None = None  # a failed load is not retried


def use_picture_gl(backend: str | None) -> None:
  """Draw pictures with MuJoCo's OpenGL ``backend`` (a MUJOCO_GL value)."""
  global _picture_gl
  _picture_gl = backend


def picture_gl() -> str:
  """The backend for pictures: the chosen one, else ``MUJOCO_GL``, else
  GLFW with a display and OSMesa without."""
  if _picture_gl is not None:
    return _picture_gl
  chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
  if chosen:
    return chosen
  return "glfw" if os.environ.get("DISPLAY") else "osmesa"


def library_loads(name: str) -> bool:
  """Whether lib<name> loads, tried as PyOpenGL tries it. Checked before
  PyOpenGL is imported: PyOpenGL on Linux turns a missing library into
  ``None`` and fails later with "'NoneType' object has no attribute
  'glGetError'"; after that a second try can crash instead of raising."""
  import ctypes

  for suffix in ["", *(f".{i}" for i in range(9, -1, -1))]:
    try:
      ctypes.CDLL(f"lib{name}.so{suffix}")
    except OSError:
      continue
    return True
  return False


def _no_gl(backend: str, detail: str) -> NoOffscreenGL:
  """The error for pictures without OpenGL, naming what to install."""
  if backend in GL_PACKAGES:
    other = "egl" if backend == "osmesa" else "osmesa"
    need = (
      f"Install the Debian package {GL_PACKAGES[backend]} (apt-get install "
      f"{GL_PACKAGES[backend]}), or use MUJOCO_GL={other} "
      f"({GL_PACKAGES[other]}{', with a GPU' if other == 'egl' else ''})"
    )
  else:
    need = (
      "Use a display, or MUJOCO_GL=osmesa (Debian package libosmesa6) or "
      "MUJOCO_GL=egl (libegl1, with a GPU)"
    )
  return NoOffscreenGL(
    f"pictures need offscreen OpenGL (MUJOCO_GL={backend}): {detail}. {need}. "
    "Every call but the pictures works without OpenGL."
  )


def open_gl_context(width: int, height: int):
  """A current offscreen OpenGL context of the picture backend. Raises
  ``NoOffscreenGL`` (only) when none can be made; imports OpenGL only here,
  at the first picture."""
  global _gl_failure
  if _gl_failure is not None:
    raise _gl_failure
  backend = picture_gl()
  if backend in GL_OFF:
    raise _no_gl(backend, "OpenGL is disabled")
  library = GL_LIBRARIES.get(backend)
  if library and not library_loads(library):
    raise _no_gl(backend, f"lib{library} is missing")
  try:
    load_triton_before_gl()
    module = importlib.import_module(GL_MODULES.get(backend, "mujoco.glfw"))
    context = module.GLContext(width, height)
    if getattr(context, "_context", True) is None:  # GLFW made no window
      raise RuntimeError("no OpenGL context (no display?)")
    context.make_current()
  except Exception as err:  # noqa: BLE001 - any backend's failure to load
    _gl_failure = _no_gl(backend, f"{type(err).__name__}: {err}")
    raise _gl_failure from err
  return context


class PoseRenderer:
  """Pictures of a model's poses, drawn in a replica ``MjData`` that is
  never stepped (the scored world is the same filmed or not). OpenGL is
  loaded at the first picture, not before."""

  def __init__(self, model: mujoco.MjModel):
    self.model = model
    self._replica: mujoco.MjData | None = None
    self._gl = None  # (GL context, MjrContext) once the first picture is drawn
    self._scenes: dict[str, mujoco.MjvScene] = {}  # one per camera

  def _context(self):
    if self._gl is None:
      g = self.model.vis.global_
      context = open_gl_context(g.offwidth, g.offheight)
      mjr = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_150)
      mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, mjr)
      self._gl = (context, mjr)
    context, mjr = self._gl
    context.make_current()  # several renderers can share one process
    return mjr

  def _scene(self, qpos, camera: str, hide_robot: bool) -> mujoco.MjvScene:
    """The scene of pose ``qpos`` seen from ``camera`` (its own scene, so the
    floor is never placed by another camera's picture)."""
    if self._replica is None:
      self._replica = mujoco.MjData(self.model)
    rep = self._replica
    rep.qpos[:] = qpos
    mujoco.mj_forward(self.model, rep)
    opt = mujoco.MjvOption()
    if hide_robot:
      opt.geomgroup[2] = 0
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    cam.fixedcamid = self.model.camera(camera).id
    if camera not in self._scenes:
      self._scenes[camera] = mujoco.MjvScene(self.model, maxgeom=10000)
    scene = self._scenes[camera]
    mujoco.mjv_updateScene(
      self.model, rep, opt, None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
    )
    return scene

  def render(self, qpos: np.ndarray, camera: str, size, hide_robot: bool) -> np.ndarray:
    """RGB uint8 [H, W, 3] of pose ``qpos`` from ``camera`` at ``size`` (W, H);
    ``hide_robot`` hides geom group 2 (the arm)."""
    width, height = size
    g = self.model.vis.global_
    if width > g.offwidth or height > g.offheight:
      raise ValueError(
        f"{size} exceeds the offscreen buffer {g.offwidth}x{g.offheight}"
      )
    mjr = self._context()
    scene = self._scene(qpos, camera, hide_robot)
    rect = mujoco.MjrRect(0, 0, width, height)
    mujoco.mjr_render(rect, scene, mjr)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    mujoco.mjr_readPixels(rgb, None, rect, mjr)
    return np.flipud(rgb).copy()

  def close(self) -> None:
    if self._gl is not None:
      context, mjr = self._gl
      context.make_current()
      mjr.free()
      context.free()
    self._gl = None
    self._scenes.clear()
