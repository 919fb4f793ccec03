"""The suite's one OpenGL policy for MuJoCo's renderer.

The backend: ``MUJOCO_GL`` if set; else the engine's headless backend
(``traits(engine).picture_gl``: EGL for MuJoCo Warp, which runs on a GPU,
OSMesa for the C engine); without an engine, EGL with CUDA and OSMesa
without. Contexts are made here only (``open_gl_context``), loading OpenGL at
the first picture; a missing library or a failed load is one clear error
(``OffscreenGLError``) naming the Debian package to install, and a failed
load is not retried (PyOpenGL can crash on a second try).
"""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys
import warnings

# The Debian package that provides each headless OpenGL backend.
GL_PACKAGES = {"osmesa": "libosmesa6", "egl": "libegl1"}
GL_LIBRARIES = {"osmesa": "OSMesa", "egl": "EGL"}
GL_MODULES = {"osmesa": "mujoco.osmesa", "egl": "mujoco.egl"}
GL_OFF = ("disable", "disabled", "off", "false", "0")  # MuJoCo's "no GL" values
_failures: dict[str, OffscreenGLError] = {}  # backend: its failed load
# (the user's MUJOCO_GL, "" if unset; importable_backend's replacement)
_replaced: tuple[str, str] | None = None


class OffscreenGLError(RuntimeError):
  """No offscreen OpenGL context can be made (the message says what to
  install)."""


def load_triton_before_gl() -> None:
  """Import triton, when installed, before Mesa's OpenGL loads: triton
  imported after libOSMesa kills the process (a segmentation fault while
  triton loads; seen with triton 3.8 and Debian's libOSMesa), and torch
  imports it lazily (an optimizer's first use), long after the first
  picture."""
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


def importable_backend() -> None:
  """Before mujoco is first imported: a backend ``import mujoco`` can load.

  mujoco binds ``MUJOCO_GL`` when imported and loads that backend's library
  then; mjlab sets it to EGL unless it is set. On a machine without libEGL
  (a CPU machine without libegl1) importing mjlab's tasks therefore failed
  with "'NoneType' object has no attribute 'eglQueryString'", though
  simulation needs no OpenGL; and with ``MUJOCO_GL=osmesa`` the process died
  when torch later imported triton (see ``load_triton_before_gl``). So:
  when ``MUJOCO_GL`` is unset or ``egl`` and libEGL does not load, OSMesa
  if it loads, else ``disable``; a user's ``egl`` replaced is said in a
  warning; and triton is imported before OSMesa loads. Other values, and a
  process that has imported mujoco, are left alone. The pictures' backend
  (``default_backend``) is OSMesa where it replaced a user's EGL, else the
  user's choice or the policy's as before: a picture then says what to
  install.
  """
  global _replaced
  if "mujoco" in sys.modules or not sys.platform.startswith("linux"):
    return
  chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
  if chosen == "osmesa":
    load_triton_before_gl()
  if chosen not in ("", "egl") or library_loads(GL_LIBRARIES["egl"]):
    return
  load_triton_before_gl()  # before library_loads loads libOSMesa
  backend = "osmesa" if library_loads(GL_LIBRARIES["osmesa"]) else "disable"
  os.environ["MUJOCO_GL"] = backend
  _replaced = (chosen, backend)
  if chosen:
    warnings.warn(
      f"MUJOCO_GL=egl but libEGL does not load; using MUJOCO_GL={backend}",
      stacklevel=2,
    )


def default_backend(engine: str | None = None) -> str:
  """The backend the policy above chooses (nothing is set or loaded)."""
  chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
  if _replaced is not None and chosen == _replaced[1]:
    if not _replaced[0] or chosen in GL_OFF:
      chosen = _replaced[0]  # for importing only: not a choice for pictures
  if chosen:
    return chosen
  if engine is not None:
    from mjlab_tasks.engine import traits

    return traits(engine).picture_gl
  import torch

  return "egl" if torch.cuda.is_available() else "osmesa"


def headless_gl() -> None:
  """Set ``MUJOCO_GL`` to the chosen backend, for ``mujoco.Renderer`` (mjlab's
  offscreen renderer).

  mujoco binds its OpenGL backend when first imported: with ``MUJOCO_GL``
  unset then, GLFW, which needs a display. A process that imported mujoco
  before choosing (or before mjlab, imported later, set ``MUJOCO_GL=egl``)
  gets the headless backend switched in here, before its first
  ``mujoco.Renderer`` (the tools choose before importing mujoco).
  """
  backend = os.environ["MUJOCO_GL"] = default_backend()
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


def library_loads(name: str) -> bool:
  """Whether lib<name> loads, tried as PyOpenGL tries it. Checked before
  PyOpenGL is imported: PyOpenGL on Linux turns a missing library into
  ``None`` and fails later with "'NoneType' object has no attribute
  'glGetError'"; after that a second try can crash instead of raising."""
  if ctypes.util.find_library(name) is None:
    return False
  for suffix in ["", *(f".{i}" for i in range(9, -1, -1))]:
    try:
      ctypes.CDLL(f"lib{name}.so{suffix}")
    except OSError:
      continue
    return True
  return False


def _error(who: str, backend: str, detail: str) -> OffscreenGLError:
  """One line: what failed and what to install."""
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
  detail = " ".join(detail.split())
  return OffscreenGLError(
    f"{who} need offscreen OpenGL (MUJOCO_GL={backend}): {detail}. {need}."
  )


def open_gl_context(
  width: int, height: int, backend: str | None = None, who: str = "C-engine cameras"
):
  """A current offscreen OpenGL context of ``backend`` (default: the
  policy's); ``who`` names the user in the error."""
  backend = backend or default_backend()
  if backend in _failures:
    raise _failures[backend]
  if backend in GL_OFF:
    raise _error(who, backend, "OpenGL is disabled")
  # Looked up first, as PyOpenGL looks it up: once PyOpenGL has failed to
  # load it, a later attempt can crash instead of raising.
  library = GL_LIBRARIES.get(backend)
  if library and not library_loads(library):
    raise _error(who, backend, f"lib{library} is missing")
  try:
    load_triton_before_gl()
    module = importlib.import_module(GL_MODULES.get(backend, "mujoco.glfw"))
    context = module.GLContext(width, height)
    if getattr(context, "_context", True) is None:  # GLFW made no window
      raise RuntimeError("no OpenGL context (no display?)")
    context.make_current()
  except Exception as err:  # noqa: BLE001 - any backend's failure to load
    _failures[backend] = _error(who, backend, f"{type(err).__name__}: {err}")
    raise _failures[backend] from err
  return context
