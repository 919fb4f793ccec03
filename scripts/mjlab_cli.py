"""mjlab's own command-line mains (``train``, ``play``) run on a suite engine.

``scripts/train.py`` and ``scripts/play.py`` pass every argument on to mjlab,
except the suite's own flags (``--engine`` and play's few), which they take
out first and check up front: one line on stderr for a bad value, as every
tool of the suite (``cli_args.fail``).

Lives beside the tools (``scripts/``), which import it by name.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator

from cli_args import Engine, check_engine, fail


def split_flag(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
  """``FLAG X`` / ``FLAG=X`` taken out of the arguments passed on (last wins)."""
  value, rest, k = None, [], 0
  while k < len(argv):
    arg = argv[k]
    if arg == flag:
      if k + 1 >= len(argv):
        fail(f"{flag} needs a value")
      value, k = argv[k + 1], k + 2
      continue
    if arg.startswith(f"{flag}="):
      value = arg.split("=", 1)[1]
    else:
      rest.append(arg)
    k += 1
  return value, rest


def split_engine(argv: list[str]) -> tuple[str | None, list[str]]:
  """``--engine X`` / ``--engine=X`` taken out of mjlab's arguments."""
  return split_flag(argv, "--engine")


def has_cuda() -> bool:
  import torch

  return torch.cuda.is_available()


def choose_engine(engine: str | None) -> Engine:
  """The engine to run on; the C engine runs on the CPU."""
  cuda = has_cuda()
  chosen = check_engine(engine, "cuda:0" if cuda and engine != "mujoco" else "cpu")
  if chosen == "warp" and not cuda:
    print("note: MuJoCo Warp on the CPU is slow; --engine mujoco is faster here")
  return chosen


def check_task(task: str) -> None:
  """A registered task id (mjlab's and this suite's)."""
  with warnings.catch_warnings():
    # mjlab's import decorates with torch.jit.script, which torch deprecates.
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated")
    import mjlab_tasks.tasks  # noqa: F401 - fills the registry (mjlab's and the suite's)
  from mjlab.tasks.registry import list_tasks

  if task not in list_tasks():
    suite = sorted(t for t in list_tasks() if t.endswith("-UR5-RG2"))
    fail(f"unknown task {task!r}; this suite's tasks: {', '.join(suite)}")


def task_and_args(rest: list[str], usage: str) -> tuple[str, list[str]]:
  """The task id (first) and mjlab's arguments; bare ``--help`` prints usage."""
  if not rest or rest[0] in ("-h", "--help"):
    print(usage)
    raise SystemExit(0 if rest else 2)
  if rest[0].startswith("-"):
    fail(f"the task id comes first, got {rest[0]!r}")
  return rest[0], rest[1:]


@contextlib.contextmanager
def on_engine(engine: Engine) -> Iterator[None]:
  """mjlab builds its environments on ``engine`` inside this block, with the
  compiled control loop where it is the default (``compiled_control``)."""
  from mjlab_tasks.common.c_engine import CMujocoSimulation, simulation_class
  from mjlab_tasks.common.compiled_control import on_every_env

  if engine == "mujoco":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # mjlab's CPU mode
  elif not os.environ.get("CUDA_VISIBLE_DEVICES") and not has_cuda():
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # Warp on the CPU
  patch = simulation_class(CMujocoSimulation) if engine == "mujoco" else None
  with patch or contextlib.nullcontext(), on_every_env():
    yield


def run_mjlab_main(
  name: str, main: Callable[[], None], task: str, mjlab_args: list[str], engine: Engine
) -> None:
  """mjlab's ``main`` of ``name`` (train, play) on the chosen engine."""
  sys.argv = [f"{sys.argv[0]} (mjlab {name})", task, *mjlab_args]
  with on_engine(engine):
    main()
