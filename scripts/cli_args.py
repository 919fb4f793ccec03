"""Argument parsing and up-front checks that every command-line tool shares.

A tool turns any bad flag value into one line on stderr (``error: ...``) and a
non-zero exit, before it builds anything heavy:

- ``parse(Args)`` runs tyro and condenses tyro's boxed parse errors (a value
  of the wrong type, an unknown choice or option, a missing required option)
  to one line;
- ``fail(message)`` reports a value the tool rejects itself;
- ``check_*`` validate the flags the tools share (counts, device, engine,
  output paths) without importing mjlab, MuJoCo Warp or the tasks.

Lives beside the tools (``scripts/``), which import it by name: Python puts a
script's own folder first on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import tyro

# Imported lazily: check_lerobot_dataset.py runs where the suite is not
# installed (lerobot's own environment).
if TYPE_CHECKING:
  from mjlab_tasks.engine import Engine

T = TypeVar("T")


def _importable_gl() -> None:
  """A ``MUJOCO_GL`` that mujoco, imported later, can load (and triton
  before OSMesa): ``mjlab_tasks.common.gl.importable_backend``."""
  try:
    from mjlab_tasks.common.gl import importable_backend
  except ImportError:  # lerobot's environment: no suite, no OpenGL use
    return
  importable_backend()


_importable_gl()
# A dependency's import-time deprecation notice, printed on every run: noise
# in front of the tools' own output and one-line errors.
warnings.filterwarnings(
  "ignore", message="`torch.jit.script` is deprecated", category=FutureWarning
)
_BOX_BORDER = re.compile(r"^[\s│╭╰╮╯]*|[\s│╭╰╮╯]*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RULE = re.compile(r"[─-]{3,}")


def fail(message: str) -> NoReturn:
  """One line ``error: message`` on stderr, exit status 2 (a usage error)."""
  print(f"error: {message}", file=sys.stderr, flush=True)
  raise SystemExit(2)


def condense_tyro_error(text: str) -> str:
  """tyro's boxed error message as one line: its first paragraph.

  tyro draws a titled box (UTF-8 lines, or plain dashes when stdout is not
  UTF-8) whose paragraphs are separated by rules.
  """
  title = None
  paragraphs: list[list[str]] = [[]]
  for raw in text.splitlines():
    line = _ANSI.sub("", raw).strip()
    if line.startswith("╭"):
      title = line.strip("╭╮─ ")
      continue
    content = _BOX_BORDER.sub("", line)
    if not content or line.startswith("╰"):
      continue
    if _RULE.fullmatch(content):
      paragraphs.append([])
    else:
      paragraphs[-1].append(content)
  paragraphs = [p for p in paragraphs if p]
  if title is None and len(paragraphs) > 1 and len(paragraphs[0]) == 1:
    title = paragraphs.pop(0)[0]  # Plain box: the title line, then a rule.
  body = paragraphs[0] if paragraphs else []
  if title == "Required options":
    flags = [line.split()[0] for line in body if line.startswith("-")]
    return "missing required option(s) " + ", ".join(flags) + " (see --help)"
  message = " ".join(body) or title or "invalid arguments (see --help)"
  return re.sub(r"\s+", " ", message)


def parse(args_type: type[T], argv: Sequence[str] | None = None) -> T:
  """``tyro.cli(args_type)``, with any parse error as one line on stderr."""
  captured = io.StringIO()
  try:
    with contextlib.redirect_stderr(captured):
      args = tyro.cli(args_type, args=argv)
  except SystemExit as exit_:
    if exit_.code in (0, None):  # --help (printed on stdout).
      sys.stderr.write(captured.getvalue())
      raise
    fail(condense_tyro_error(captured.getvalue()))
  sys.stderr.write(captured.getvalue())  # Warnings of a successful parse.
  return args


def check_at_least(minimum: float, **values: float | None) -> None:
  """Each named value (flag names with underscores) must be >= minimum."""
  for name, value in values.items():
    if value is not None and value < minimum:
      fail(f"--{name.replace('_', '-')} must be at least {minimum}, got {value}.")


def check_videos(videos: int, num_envs: int) -> None:
  """--videos: a count of environments to film, at most --num-envs."""
  check_at_least(0, videos=videos)
  if videos > num_envs:
    fail(f"--videos {videos} is more than --num-envs {num_envs}.")


def check_device(device: str | None) -> str:
  """The device to use: cpu or cuda[:N] (an existing CUDA device).

  ``None`` means cuda:0 when CUDA is available, else cpu. Imports torch only.
  """
  import torch

  if device is None:
    return "cuda:0" if torch.cuda.is_available() else "cpu"
  match = re.fullmatch(r"cuda(?::(\d+))?", device)
  if device != "cpu" and match is None:
    fail(f"--device must be cpu, cuda or cuda:N, got {device!r}.")
  if match is not None:
    if not torch.cuda.is_available():
      fail(f"--device {device}: CUDA is not available on this machine (use cpu).")
    index = int(match.group(1) or 0)
    count = torch.cuda.device_count()
    if index >= count:
      fail(f"--device {device}: this machine has {count} CUDA device(s).")
    device = f"cuda:{index}"
  return device


def engine_device(engine: str, device: str) -> str:
  """The device ``engine`` runs on when ``device`` is asked for: the CPU for
  an engine that runs only there (an unknown engine keeps ``device``; the
  engine check then names it)."""
  from mjlab_tasks.engine import ENGINES, traits

  return "cpu" if engine in ENGINES and traits(engine).cpu_only else device


def check_engine(engine: str | None, device: str) -> Engine:
  """The engine: warp or mujoco (C MuJoCo, CPU only); default warp on CUDA."""
  from mjlab_tasks.engine import ENGINES, resolve_engine, traits

  if engine is None:
    return resolve_engine(None, device)
  if engine not in ENGINES:
    fail(f"--engine must be warp or mujoco, got {engine!r}.")
  if traits(engine).cpu_only and device != "cpu":
    fail(f"--engine mujoco runs on the CPU; got --device {device} (use --device cpu).")
  return engine  # type: ignore[return-value]


def _check_creatable(path: Path, flag: str) -> None:
  """The nearest existing folder above ``path`` is a writable folder."""
  parent = path.absolute().parent
  while not parent.exists():
    parent = parent.parent
  if not parent.is_dir():
    fail(f"{flag} {path}: {parent} is not a folder.")
  if not os.access(parent, os.W_OK | os.X_OK):
    fail(f"{flag} {path}: cannot write in {parent}.")


def check_new_folder(path: Path, flag: str = "--output") -> Path:
  """An output folder that does not exist yet and can be created."""
  if path.exists() or path.is_symlink():
    fail(
      f"{flag} {path} already exists; choose a new folder (no run overwrites another)."
    )
  _check_creatable(path, flag)
  return path


def check_new_file(path: Path, flag: str) -> Path:
  """An output file that does not exist yet and can be created."""
  if path.exists() or path.is_symlink():
    fail(f"{flag} {path} already exists; choose a new path.")
  _check_creatable(path, flag)
  return path


def check_file(path: Path, flag: str) -> Path:
  """An input file that exists and is readable."""
  if not path.exists():
    fail(f"{flag} {path}: no such file.")
  if not path.is_file():
    fail(f"{flag} {path} is not a file.")
  if not os.access(path, os.R_OK):
    fail(f"{flag} {path}: not readable.")
  return path


def check_policy(path: Path, flag: str = "--policy") -> Path:
  """A trained policy file: an rsl_rl checkpoint (.pt) or an exported ONNX
  policy (.onnx, which needs the optional onnxruntime)."""
  import importlib.util

  check_file(path, flag)
  if path.suffix not in (".pt", ".onnx"):
    fail(
      f"{flag} takes an rsl_rl checkpoint (.pt) or an ONNX policy (.onnx), "
      f"got {path.name!r}."
    )
  if path.suffix == ".onnx" and importlib.util.find_spec("onnxruntime") is None:
    fail(
      f"{flag} {path.name}: ONNX policies need onnxruntime: "
      "pip install 'manipulation-suite[onnx]'"
    )
  return path


def prepare_offscreen_gl(flag: str) -> None:
  """Choose mujoco's OpenGL backend for videos before mujoco is imported.

  mujoco binds its backend on import, and mjlab (imported first) defaults it
  to EGL, which needs a GPU; without one the videos need OSMesa. Sets
  ``MUJOCO_GL`` unless the user did: egl with CUDA, else osmesa (checked to
  be installed, and triton loaded first, see ``load_triton_before_gl``).
  A no-op once mujoco is imported (too late to choose).
  """
  if "mujoco" in sys.modules:
    return
  if "MUJOCO_GL" not in os.environ:
    import torch

    os.environ["MUJOCO_GL"] = "egl" if torch.cuda.is_available() else "osmesa"
  from mjlab_tasks.common.gl import GL_OFF, load_triton_before_gl

  backend = os.environ["MUJOCO_GL"]
  if backend in GL_OFF or backend == "osmesa":
    import ctypes.util

    # Off: the user's choice, or importable_backend's on a machine without
    # libEGL and libOSMesa.
    if backend in GL_OFF or ctypes.util.find_library("OSMesa") is None:
      fail(
        f"{flag} needs offscreen OpenGL: install OSMesa (apt-get install "
        "libosmesa6), or set MUJOCO_GL=egl on a machine with a GPU."
      )
    load_triton_before_gl()


@contextlib.contextmanager
def opengl_errors_in_one_line():
  """Cameras that need offscreen OpenGL on a machine without its library:
  the library's one-line error (what to install), not a traceback."""
  try:
    yield
  except RuntimeError as err:
    from mjlab_tasks.common.gl import OffscreenGLError

    if isinstance(err, OffscreenGLError):
      fail(str(err))
    raise


def create_folder(path: Path, flag: str = "--output") -> Path:
  """Create a checked output folder; an OS refusal is one line too."""
  try:
    path.mkdir(parents=True)
  except OSError as err:
    fail(f"{flag} {path}: cannot create it ({err.strerror or err}).")
  return path


CAMERA_NAMES = ("wrist", "scene")
"""mjlab_tasks.common.cameras.CAMERA_NAMES, in its order, here so that the
flags are checked without importing mjlab (test_image_demos checks they
agree)."""


def check_cameras(text: str | None, flag: str) -> tuple[str, ...]:
  """The camera names of a comma-separated flag, in canonical order."""
  if text is None:
    return ()
  names = [n.strip() for n in text.split(",")]
  unknown = [n for n in names if n not in CAMERA_NAMES]
  if not all(names) or unknown:
    fail(
      f"{flag} takes camera names ({', '.join(CAMERA_NAMES)}), comma-separated; "
      f"got {text!r}."
    )
  return tuple(n for n in CAMERA_NAMES if n in names)
