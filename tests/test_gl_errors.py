"""A tool that builds cameras on a machine without offscreen OpenGL ends with
the library's one-line error (what to install), not a traceback; any other
error still propagates."""

from __future__ import annotations

import sys

import pytest
from script_runner import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

from cli_args import opengl_errors_in_one_line  # noqa: E402

from mjlab_tasks.common.gl import OffscreenGLError  # noqa: E402


def test_missing_opengl_is_one_line(capsys):
  message = "C-engine cameras need offscreen OpenGL (MUJOCO_GL=egl): libEGL is missing."
  with pytest.raises(SystemExit) as end, opengl_errors_in_one_line():
    raise OffscreenGLError(message)
  assert end.value.code != 0
  lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  assert lines == [f"error: {message}"]


def test_other_errors_pass_through():
  with pytest.raises(RuntimeError, match="a bug"), opengl_errors_in_one_line():
    raise RuntimeError("a bug")
