"""OpenGL only for pictures: the glass examiner's numeric calls work on a
machine without any OpenGL library; a picture there raises NoOffscreenGL
naming the package to install. The libraries are hidden from fresh Python
processes (a ``sitecustomize`` that makes ``ctypes`` fail to load OSMesa,
EGL and GL), the way a machine without them behaves: with the examiner's
worker started under ``MUJOCO_GL=osmesa``, ``import mujoco`` itself fails
("'NoneType' object has no attribute 'glGetError'"). CPU, C MuJoCo (the
Warp variant is slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import pytest

from mjlab_tasks.glass_push import NoOffscreenGL

ROOT = Path(__file__).resolve().parents[1]

# Loaded by every Python process started with this folder on PYTHONPATH (the
# examiner's spawned workers too): OpenGL libraries cannot be found or loaded.
HIDE_GL = """
import ctypes
import ctypes.util

_HIDDEN = ("OSMesa", "EGL", "GL")
_find = ctypes.util.find_library
_init = ctypes.CDLL.__init__


def _hidden(name):
  return name is not None and any(h in str(name) for h in _HIDDEN)


def _find_library(name):
  return None if _hidden(name) else _find(name)


def _cdll_init(self, name, *args, **kwargs):
  if _hidden(name):
    raise OSError(f"{name}: cannot open shared object file (hidden by the test)")
  _init(self, name, *args, **kwargs)


ctypes.util.find_library = _find_library
ctypes.CDLL.__init__ = _cdll_init
"""

# What a new user's script does: numeric calls, then a picture. Prints one
# JSON line of what happened.
USER_SCRIPT = """
import json, os, sys
from mjlab_tasks.glass_push import Exam, Examiner, NoOffscreenGL

def main(engine):
  before = os.environ.get("MUJOCO_GL")
  out = {}
  with Examiner(table=10025, pushes=2, engine=engine) as ex:
    readings = ex.look()
    g = readings[0]
    report = ex.push({"glass": g["id"], "start": [g["x"] - 0.09, g["y"]],
      "heading": 0.0, "reach": 0.08, "travel": 0.03, "aim": [g["x"] + 0.03, g["y"]]})
    out["look"] = len(readings)
    out["push"] = sorted(report)
    for attempt in ("first", "second"):
      try:
        ex.top_view()
        out[attempt] = "picture"
      except NoOffscreenGL as err:
        out[attempt] = str(err)
    ex.take(g["id"])
    out["after"] = len(ex.look())
  with Exam([10025], pushes=1, film=True, engine=engine) as exam:
    exam.examiners[0].look()
    out["record"] = len(exam.records()[0]["glasses"])
  out["mujoco_here"] = "mujoco" in sys.modules
  out["gl_unchanged"] = os.environ.get("MUJOCO_GL") == before
  print(json.dumps(out))

if __name__ == "__main__":
  main(sys.argv[1])
"""


def _without_gl_choice() -> dict:
  """This environment less every OpenGL choice (pytest's process has
  imported mjlab, which sets MUJOCO_GL=egl, and PyOpenGL's platform)."""
  chosen = ("DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM")
  return {k: v for k, v in os.environ.items() if k not in chosen}


def _python(tmp_path: Path, code: str, *args: str, env=None, timeout=600):
  """``python <code> <args>`` in a fresh process with the GL libraries
  hidden (``sitecustomize`` in ``tmp_path``), no display."""
  (tmp_path / "sitecustomize.py").write_text(HIDE_GL)
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent(code))
  environ = _without_gl_choice()
  environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
  environ.update(env or {})
  return subprocess.run(
    [sys.executable, str(script), *args],
    capture_output=True,
    text=True,
    cwd=ROOT,
    env=environ,
    timeout=timeout,
  )


def test_the_hiding_reproduces_the_missing_library(tmp_path):
  """The hiding does what a machine without OSMesa does: the library does not
  load, and mujoco imported under MUJOCO_GL=osmesa fails the way the user's
  examiner did (before the fix, its worker started with MUJOCO_GL=osmesa)."""
  code = """
  import ctypes
  for name in ("libOSMesa.so.8", "libEGL.so.1", "libGL.so.1"):
    try:
      ctypes.CDLL(name)
      print("loaded", name)
    except OSError:
      print("hidden", name)
  import mujoco
  """
  result = _python(tmp_path, code, env={"MUJOCO_GL": "osmesa"})
  assert result.stdout.split() == ["hidden", "libOSMesa.so.8"] + [
    "hidden",
    "libEGL.so.1",
    "hidden",
    "libGL.so.1",
  ]
  assert result.returncode != 0
  assert "'NoneType' object has no attribute 'glGetError'" in result.stderr


def _user_run(tmp_path, engine: str, env=None) -> dict:
  result = _python(tmp_path, USER_SCRIPT, engine, env=env, timeout=1200)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _check_numeric_calls_and_no_picture(out: dict, package: str) -> None:
  assert out["look"] >= 7 and out["after"] == out["look"] - 1
  assert out["push"] == ["blocked", "jammed", "peak", "pushed", "touched"]
  assert out["record"] >= 7
  for attempt in ("first", "second"):  # a failed load is not retried
    assert out[attempt].startswith("table 10025: pictures need offscreen OpenGL")
    assert package in out[attempt]
  assert not out["mujoco_here"]  # the calling process never imported MuJoCo
  assert out["gl_unchanged"]  # nor had its MUJOCO_GL changed


def test_numeric_calls_work_without_opengl_and_pictures_say_what_to_install(
  tmp_path,
):
  """C engine, no OpenGL library, no display, no MUJOCO_GL: look, push,
  take, the record all answer; top_view raises NoOffscreenGL naming
  libosmesa6 (the worker's default backend), twice."""
  out = _user_run(tmp_path, "mujoco")
  _check_numeric_calls_and_no_picture(out, "apt-get install libosmesa6")


@pytest.mark.slow  # the same path as the default backend's test, with EGL chosen
def test_a_chosen_backend_is_used_for_pictures_only(tmp_path):
  """The user chose MUJOCO_GL=egl on a machine without libEGL: the numeric
  calls still work (the worker loads no GL until a picture) and the
  picture's error names libegl1 (the process's MUJOCO_GL is ``disable``
  from the import on: ``importable_backend``)."""
  out = _user_run(tmp_path, "mujoco", env={"MUJOCO_GL": "egl"})
  _check_numeric_calls_and_no_picture(out, "apt-get install libegl1")


@pytest.mark.slow
def test_warp_numeric_calls_work_without_opengl(tmp_path):
  """The Warp worker (EGL for pictures by default): the same, naming libegl1.
  Slow: Warp compiles its kernels on the CPU for minutes."""
  out = _user_run(tmp_path, "warp")
  _check_numeric_calls_and_no_picture(out, "apt-get install libegl1")


def _osmesa_loads() -> bool:
  from mjlab_tasks.common.gl import library_loads

  return library_loads("OSMesa")


@pytest.mark.skipif(not _osmesa_loads(), reason="no OSMesa on this machine")
def test_pictures_equal_mujocos_renderer(tmp_path):
  """With OSMesa, the examiner's pictures (its own GL context, loaded at the
  first picture) are bitwise MuJoCo's Renderer's, for both cameras."""
  code = """
  import numpy as np, mujoco
  from mjlab_tasks.glass_push.examiner.pictures import FILM_SIZE
  from mjlab_tasks.glass_push.examiner.world import GlassWorld
  world = GlassWorld([10025], 2)
  model = world._table_model(0)
  q = world.sim.data.qpos[0].double().numpy()
  rep = mujoco.MjData(model)
  rep.qpos[:] = q
  mujoco.mj_forward(model, rep)
  shots = (("table/top_view", (384, 384), True), ("table/film", FILM_SIZE, False))
  for camera, size, hide in shots:
    mine = world._pictures(0).render(q, camera, size, hide)
    opt = mujoco.MjvOption()
    if hide:
      opt.geomgroup[2] = 0
    renderer = mujoco.Renderer(model, size[1], size[0])
    renderer.update_scene(rep, camera=camera, scene_option=opt)
    theirs = renderer.render()
    renderer.close()  # while current: it frees GL objects of the current context
    print(camera.split("/")[1], np.array_equal(mine, theirs), mine.std() > 5)
  """
  environ = _without_gl_choice()
  environ["MUJOCO_GL"] = "osmesa"
  (tmp_path / "same.py").write_text(textwrap.dedent(code))
  result = subprocess.run(
    [sys.executable, str(tmp_path / "same.py")],
    capture_output=True,
    text=True,
    cwd=ROOT,
    env=environ,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  shots = [
    line.split()
    for line in result.stdout.splitlines()
    if line.startswith(("top_view ", "film "))
  ]
  assert shots == [["top_view", "True", "True"], ["film", "True", "True"]]


class _Context:
  def __init__(self, *args):
    pass

  def make_current(self):
    pass

  def free(self):
    pass


def _fake_backend(context_class):
  return type("Backend", (), {"GLContext": context_class})


def test_only_a_missing_gl_context_is_no_offscreen_gl(monkeypatch):
  """NoOffscreenGL comes only from failing to make a GL context (the test
  that skips pictures relies on it); a failure after the context is made
  stays an ordinary error."""
  from mjlab_tasks.common import gl
  from mjlab_tasks.glass_push.examiner import pictures as cw

  def no_context(*args):
    raise ImportError("libOSMesa.so: cannot open shared object file")

  monkeypatch.setattr(cw, "_picture_gl", "osmesa")
  monkeypatch.setattr(gl, "_failures", {})
  monkeypatch.setattr(gl, "library_loads", lambda name: True)
  model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
  monkeypatch.setattr(
    gl.importlib, "import_module", lambda name: _fake_backend(no_context)
  )
  with pytest.raises(NoOffscreenGL, match="libOSMesa.*libosmesa6"):
    cw.PoseRenderer(model).render(model.qpos0, "top_view", (8, 8), True)

  def broken(*args):
    raise RuntimeError("a bug after the context")

  monkeypatch.setattr(gl, "_failures", {})
  monkeypatch.setattr(
    gl.importlib, "import_module", lambda name: _fake_backend(_Context)
  )
  monkeypatch.setattr(cw.mujoco, "MjrContext", broken)
  with pytest.raises(RuntimeError, match="a bug") as err:
    cw.PoseRenderer(model).render(model.qpos0, "top_view", (8, 8), True)
  assert not isinstance(err.value, NoOffscreenGL)


def test_disabled_or_missing_backends_say_what_to_install(monkeypatch):
  """Without loading anything: MUJOCO_GL=disable and a missing library are
  NoOffscreenGL naming both headless packages."""
  from mjlab_tasks.common import gl
  from mjlab_tasks.glass_push.examiner import pictures as cw

  model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
  monkeypatch.setattr(gl, "_failures", {})
  monkeypatch.setattr(gl, "library_loads", lambda name: False)
  for backend, first in (("disable", "libosmesa6"), ("egl", "libegl1")):
    monkeypatch.setattr(cw, "_picture_gl", backend)
    with pytest.raises(NoOffscreenGL) as err:
      cw.PoseRenderer(model).render(model.qpos0, "top_view", (8, 8), True)
    text = str(err.value)
    assert first in text and "libosmesa6" in text and "libegl1" in text
