"""Importing the suite's tasks (and so mjlab and mujoco) works on a machine
without libEGL: mjlab chooses ``MUJOCO_GL=egl`` unless it is set, and
``import mujoco`` then failed there ("'NoneType' object has no attribute
'eglQueryString'"), so ``scripts/train.py`` could not start. Each case runs
in a fresh process with libraries hidden by the ``sitecustomize`` of
test_glass_gl (no display, no ``MUJOCO_GL``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from script_runner import ROOT
from test_glass_gl import HIDE_GL, _osmesa_loads, _without_gl_choice

# Imports the tasks, then triton's runtime (torch imports it lazily; imported
# after libOSMesa, it killed the process), then opens a picture context.
SCRIPT = """
import importlib.util, json, os
import mjlab_tasks.tasks
out = {"gl": os.environ.get("MUJOCO_GL")}
if importlib.util.find_spec("triton") is not None:
  import triton.runtime.autotuner
from mjlab_tasks.common.gl import OffscreenGLError, open_gl_context
try:
  open_gl_context(8, 8)
  out["picture"] = "ok"
except OffscreenGLError as err:
  out["picture"] = str(err)
print(json.dumps(out))
"""


def _run(tmp_path, hidden: tuple[str, ...], args: list[str], env=None):
  """``python ARGS`` in a fresh process where the ``hidden`` libraries
  cannot be found or loaded."""
  every = '("OSMesa", "EGL", "GL")'
  assert every in HIDE_GL  # else the replacement below would hide nothing
  (tmp_path / "sitecustomize.py").write_text(HIDE_GL.replace(every, repr(hidden)))
  environ = _without_gl_choice()
  environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
  environ.update(env or {})
  return subprocess.run(
    [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=environ
  )


def _script(tmp_path, hidden: tuple[str, ...], env=None) -> dict:
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent(SCRIPT))
  result = _run(tmp_path, hidden, [str(script)], env)
  assert result.returncode == 0, result.stderr[-2000:]
  return {**json.loads(result.stdout.strip().splitlines()[-1]), "err": result.stderr}


def test_the_hiding_is_in_force(tmp_path):
  """The cases below mean something only if the hidden library is gone
  (checked with ctypes, as PyOpenGL looks it up)."""
  code = "import ctypes.util; print(ctypes.util.find_library('EGL'))"
  result = _run(tmp_path, ("EGL",), ["-c", code])
  assert result.stdout.strip() == "None"


@pytest.mark.skipif(not _osmesa_loads(), reason="no OSMesa on this machine")
def test_without_egl_the_tasks_import_and_pictures_use_osmesa(tmp_path):
  out = _script(tmp_path, ("EGL",))
  assert out["gl"] == "osmesa"
  assert out["picture"] == "ok"


@pytest.mark.slow
def test_a_chosen_egl_that_cannot_load_is_replaced_with_a_warning(tmp_path):
  out = _script(tmp_path, ("EGL",), env={"MUJOCO_GL": "egl"})
  assert out["gl"] == "osmesa"
  assert out["picture"] == "ok"
  assert "MUJOCO_GL=egl but libEGL does not load; using MUJOCO_GL=osmesa" in out["err"]


@pytest.mark.slow
def test_a_chosen_osmesa_survives_triton(tmp_path):
  """MUJOCO_GL=osmesa, as mjlab advises on machines without EGL: before the
  fix the process died in triton's import (segmentation fault)."""
  out = _script(tmp_path, (), env={"MUJOCO_GL": "osmesa"})
  assert out["gl"] == "osmesa"
  assert out["picture"] == "ok"


def test_without_any_opengl_the_tasks_import_and_pictures_say_why(tmp_path):
  out = _script(tmp_path, ("OSMesa", "EGL", "GL"))
  assert out["gl"] == "disable"
  # The pictures' backend is still the policy's (OSMesa without CUDA).
  assert "(MUJOCO_GL=osmesa): libOSMesa is missing" in out["picture"]
  assert "apt-get install libosmesa6" in out["picture"]


@pytest.mark.slow
def test_without_any_opengl_training_starts(tmp_path):
  train = [str(ROOT / "scripts" / "train.py"), "CubeTray-UR5-RG2", "--help"]
  result = _run(tmp_path, ("OSMesa", "EGL", "GL"), train)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "--agent.max-iterations" in result.stdout
