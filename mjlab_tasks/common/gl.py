"""The suite's one OpenGL backend policy for MuJoCo's renderer: ``MUJOCO_GL``
if set, else EGL with a GPU and OSMesa without; a missing library is one
clear error naming the Debian package to install."""

from __future__ import annotations

import ctypes.util
import importlib
import os

# The Debian package that provides each headless OpenGL backend.
GL_PACKAGES = {"osmesa": "libosmesa6", "egl": "libegl1"}
GL_LIBRARIES = {"osmesa": "OSMesa", "egl": "EGL"}
GL_MODULES = {"osmesa": "mujoco.osmesa", "egl": "mujoco.egl"}
# mjlab sets MUJOCO_GL=egl unless it is set; without a GPU and EGL, OSMesa.
_OTHER_BACKEND = {
  "egl": ", or start with MUJOCO_GL=osmesa (package libosmesa6) without a GPU"
}


def load_triton_before_gl() -> None:
  """Import triton, when installed, before Mesa's OpenGL loads: triton
  imported after it kills the process (a segmentation fault while triton
  loads: seen with triton 3.8 and Debian's libOSMesa, and with Mesa's EGL
  without a GPU), and torch imports it lazily (an optimizer's first use),
  long after the first picture."""
  import contextlib
  import sys

  if "triton" in sys.modules or _osmesa_loaded():
    return  # loaded already, or too late: importing triton now is the crash
  with contextlib.suppress(ImportError):
    import triton  # noqa: F401


def _osmesa_loaded() -> bool:
  """Whether libOSMesa is loaded in this process (Linux: its memory map;
  elsewhere: unknown, no). Measured: triton imported after libOSMesa
  crashes; imported after Mesa's EGL, before its first context, it does not."""
  try:
    with open("/proc/self/maps") as maps:
      return "libOSMesa" in maps.read()
  except OSError:
    return False


def headless_gl() -> None:
  """Headless rendering: EGL with a GPU, OSMesa (Debian libosmesa6) without,
  or the headless backend ``MUJOCO_GL`` names.

  mujoco binds its OpenGL backend when first imported: with ``MUJOCO_GL``
  unset then, GLFW, which needs a display. A process that imported mujoco
  before choosing (or before mjlab, imported later, set ``MUJOCO_GL=egl``)
  gets the headless backend switched in here, before its first
  ``mujoco.Renderer`` (the tools choose before importing mujoco).
  """
  backend = os.environ.get("MUJOCO_GL", "").strip().lower()
  if not backend:
    import torch

    backend = "egl" if torch.cuda.is_available() else "osmesa"
    os.environ["MUJOCO_GL"] = backend
  if backend not in ("egl", "osmesa"):
    return
  from mujoco.rendering.classic import gl_context

  bound = getattr(gl_context, "GLContext", None)
  load_triton_before_gl()
  if bound is None or bound.__module__.startswith("mujoco.glfw"):
    if backend == "egl":
      from mujoco.egl import GLContext
    else:
      from mujoco.osmesa import GLContext
    gl_context.GLContext = GLContext


def choose_gl_backend() -> str:
  """``MUJOCO_GL`` if set, else EGL with a GPU and OSMesa without."""
  headless_gl()
  return os.environ["MUJOCO_GL"].lower()


def open_gl_context(width: int, height: int):
  """A current offscreen OpenGL context; a missing library is one clear error."""
  backend = choose_gl_backend()
  package = GL_PACKAGES.get(backend, "libosmesa6 (or libegl1 with a GPU)")
  # Looked up first, as PyOpenGL looks it up: once PyOpenGL has failed to
  # load it, a later attempt can crash instead of raising.
  library = GL_LIBRARIES.get(backend)
  if library and ctypes.util.find_library(library) is None:
    raise RuntimeError(
      f"C-engine cameras need OpenGL (MUJOCO_GL={backend}), but lib{library} "
      f"is missing: install the Debian package {package} "
      f"(apt-get install {package}){_OTHER_BACKEND.get(backend, '')}."
    )
  module = GL_MODULES.get(backend, "mujoco.glfw")
  try:
    context = importlib.import_module(module).GLContext(width, height)
    context.make_current()
  except (ImportError, OSError, RuntimeError, AttributeError) as error:
    detail = " ".join(str(error).split())
    raise RuntimeError(
      f"C-engine cameras need OpenGL (MUJOCO_GL={backend}), which failed: "
      f"{detail}. Install the Debian package {package} (apt-get install "
      f"{package}){_OTHER_BACKEND.get(backend, '')}."
    ) from error
  return context
