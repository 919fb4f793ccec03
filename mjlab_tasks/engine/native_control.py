"""The compiled arm control (``native/arm_control.cc``): built, loaded, called.

The library is compiled on first use with the system's C++ compiler against
the headers and ``libmujoco`` shipped in the installed ``mujoco`` wheel, and
cached under ``~/.cache/mjlab_tasks`` (``$MJLAB_TASKS_CACHE``), keyed by the
source and the MuJoCo build, as Warp caches its kernels. Without a compiler
the environments keep mjlab's Python control loop and say so once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import mujoco
import numpy as np

SOURCE = Path(__file__).parent / "native" / "arm_control.cc"
MAX_ARM = 8

# Layout of one world's parameters (see arm_control.cc).
PARAM_POS = slice(0, 3)
PARAM_QUAT = slice(3, 7)
PARAM_HAS_TARGET = 7
PARAM_JOINT_TARGETS = 8
NUM_PARAMS = PARAM_JOINT_TARGETS + MAX_ARM

MODE_NONE, MODE_CARTESIAN, MODE_JOINT = 0, 1, 2


class ArmControl(ctypes.Structure):
  """Mirror of ``struct ArmControl`` in arm_control.cc."""

  _fields_ = [
    ("mode", ctypes.c_int32),
    ("n", ctypes.c_int32),
    ("bias_compensation", ctypes.c_int32),
    ("site", ctypes.c_int32),
    ("max_dq", ctypes.c_double),
    ("damping", ctypes.c_double),
    ("qpos_adr", ctypes.c_int32 * MAX_ARM),
    ("dof_adr", ctypes.c_int32 * MAX_ARM),
    ("joint", ctypes.c_int32 * MAX_ARM),
    ("ctrl", ctypes.c_int32 * MAX_ARM),
  ]


MAX_FREE = 16


class HandMove(ctypes.Structure):
  """Mirror of ``struct HandMove`` in arm_control.cc: one straight line (or
  hold) of the commanded tool point, stopped by the wrist force."""

  _fields_ = [
    ("p0", ctypes.c_double * 3),
    ("p1", ctypes.c_double * 3),
    ("h0", ctypes.c_double),
    ("dh", ctypes.c_double),
    ("stop", ctypes.c_double),
    ("still_lin", ctypes.c_double),
    ("still_ang", ctypes.c_double),
    ("peak", ctypes.c_double),
    ("force", ctypes.c_double),
    ("n", ctypes.c_int32),
    ("k", ctypes.c_int32),
    ("hold", ctypes.c_int32),
    ("still", ctypes.c_int32),
    ("still_need", ctypes.c_int32),
    ("steps", ctypes.c_int32),
    ("sample_every", ctypes.c_int32),
    ("film_every", ctypes.c_int32),
    ("force_adr", ctypes.c_int32),
    ("hit", ctypes.c_int32),
    ("nsamples", ctypes.c_int32),
    ("nfilm", ctypes.c_int32),
    ("nfree", ctypes.c_int32),
    ("free_dof", ctypes.c_int32 * MAX_FREE),
  ]


class NativeControlUnavailable(RuntimeError):
  """The compiled control could not be built (no C++ compiler, or it failed)."""


def _mujoco_dirs() -> tuple[Path, Path]:
  package = Path(mujoco.__file__).parent
  libs = sorted(package.glob("libmujoco.so*"))
  if not libs or not (package / "include" / "mujoco" / "mujoco.h").exists():
    raise NativeControlUnavailable(
      f"The mujoco wheel at {package} ships no headers or libmujoco."
    )
  return package / "include", libs[0]


def _cache_dir() -> Path:
  root = os.environ.get("MJLAB_TASKS_CACHE")
  if root:
    return Path(root)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
  return Path(base) / "mjlab_tasks"


def _build(include: Path, lib: Path, out: Path) -> None:
  compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
  if compiler is None:
    raise NativeControlUnavailable(
      "no C++ compiler found (install g++, e.g. `apt-get install g++`, or set CXX)"
    )
  out.parent.mkdir(parents=True, exist_ok=True)
  # Build into a temporary name, then rename: a concurrent or interrupted
  # build never leaves a half-written library under the final name.
  with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
    partial = Path(tmp) / out.name
    cmd = [
      compiler,
      "-O2",
      "-std=c++17",
      "-shared",
      "-fPIC",
      f"-I{include}",
      str(SOURCE),
      "-o",
      str(partial),
      f"-L{lib.parent}",
      f"-l:{lib.name}",
      f"-Wl,-rpath,{lib.parent}",
    ]
    try:
      result = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as error:
      raise NativeControlUnavailable(f"cannot run {compiler}: {error}") from error
    if result.returncode != 0:
      raise NativeControlUnavailable(
        f"compiling {SOURCE.name} failed:\n{' '.join(cmd)}\n{result.stderr}"
      )
    os.replace(partial, out)


@functools.cache
def library() -> ctypes.CDLL:
  """The compiled control library (built on first use); raises
  ``NativeControlUnavailable`` when it cannot be built."""
  include, lib = _mujoco_dirs()
  try:
    key = hashlib.sha256(
      SOURCE.read_bytes() + mujoco.__version__.encode() + str(lib).encode()
    ).hexdigest()[:16]
    path = _cache_dir() / f"arm_control-{key}.so"
    if not path.exists():
      _build(include, lib, path)
    dll = ctypes.CDLL(str(path))
  except OSError as error:  # No source, an unwritable cache, a bad library.
    raise NativeControlUnavailable(str(error)) from error
  ptr = ctypes.c_void_p
  dll.arm_control_run.argtypes = [ptr, ptr, ptr, ptr, ctypes.c_int, ptr, ctypes.c_int]
  dll.arm_control_run.argtypes += [ptr, ptr, ctypes.c_char_p, ctypes.c_int]
  dll.arm_control_run.restype = ctypes.c_int
  dll.arm_control_targets.argtypes = [ptr, ptr, ptr, ptr]
  dll.arm_control_targets.restype = None
  dll.hand_move_run.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, ctypes.c_int, ptr]
  dll.hand_move_run.argtypes += [ctypes.c_int, ptr, ctypes.c_int, ptr, ctypes.c_int]
  dll.hand_move_run.argtypes += [ctypes.c_char_p, ctypes.c_int]
  dll.hand_move_run.restype = ctypes.c_int
  return dll


@functools.cache
def available() -> bool:
  """Whether the compiled control can be used here (warns once if not)."""
  try:
    library()
  except NativeControlUnavailable as error:
    warnings.warn(
      f"Compiled arm control unavailable, using mjlab's Python control loop "
      f"(slower, same results): {error}",
      stacklevel=2,
    )
    return False
  return True


def run_world(
  model: mujoco.MjModel,
  data: mujoco.MjData,
  control: ArmControl,
  params: np.ndarray,
  nsteps: int,
  record_addr: np.ndarray,
  record: np.ndarray,
  last_dq: np.ndarray,
) -> None:
  """``nsteps`` controlled physics steps of one world (GIL released).

  ``params`` [NUM_PARAMS] float64; ``record_addr`` [K] uint64 addresses of
  doubles in ``data``; ``record`` [nsteps, K] float64 (written); ``last_dq``
  [2 * n] float64 (written). A MuJoCo error (e.g. its arena is full) raises
  ``mujoco.FatalError`` with MuJoCo's message; that world's state is then
  undefined."""
  error = ctypes.create_string_buffer(1024)
  status = library().arm_control_run(
    model._address,
    data._address,
    ctypes.addressof(control),
    params.ctypes.data,
    nsteps,
    record_addr.ctypes.data,
    len(record_addr),
    record.ctypes.data,
    last_dq.ctypes.data,
    error,
    len(error),
  )
  if status != 0:
    raise mujoco.FatalError(error.value.decode(errors="replace"))


def control_targets(
  data: mujoco.MjData, control: ArmControl, params: np.ndarray, last_dq: np.ndarray
) -> None:
  """One control computation on ``data`` (writes ctrl, qfrc_applied, last_dq)."""
  library().arm_control_targets(
    data._address, ctypes.addressof(control), params.ctypes.data, last_dq.ctypes.data
  )


def run_hand_move(
  model: mujoco.MjModel,
  data: mujoco.MjData,
  control: ArmControl,
  params: np.ndarray,
  move: HandMove,
  sample_addr: np.ndarray,
  samples: np.ndarray,
  film_addr: np.ndarray,
  film: np.ndarray,
) -> None:
  """One ``HandMove`` of one world (GIL released): physics steps until the
  line ends, the force passes ``move.stop``, or a hold is still.

  ``params`` [NUM_PARAMS] float64 (the arm target; written on a line);
  ``sample_addr`` / ``film_addr`` [K] uint64 addresses of doubles in
  ``data``, copied into ``samples`` [rows, 1 + K] (the world's time first)
  / ``film`` [rows, K] every
  ``move.sample_every`` / ``move.film_every`` world steps (as many rows as
  fit; ``move.nsamples`` / ``move.nfilm`` say how many). A MuJoCo error
  raises ``mujoco.FatalError``."""
  error = ctypes.create_string_buffer(1024)
  status = library().hand_move_run(
    model._address,
    data._address,
    ctypes.addressof(control),
    params.ctypes.data,
    ctypes.addressof(move),
    sample_addr.ctypes.data,
    len(sample_addr),
    samples.ctypes.data,
    len(samples),
    film_addr.ctypes.data,
    len(film_addr),
    film.ctypes.data,
    len(film),
    error,
    len(error),
  )
  if status != 0:
    raise mujoco.FatalError(error.value.decode(errors="replace"))
