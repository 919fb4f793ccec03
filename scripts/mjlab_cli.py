"""mjlab's own command-line mains (``train``, ``play``) run on a suite engine.

``scripts/train.py`` and ``scripts/play.py`` pass every argument on to mjlab,
except the suite's own flags (``--engine`` and play's few), which they take
out first and check up front: one line on stderr for a bad value, as every
tool of the suite (``cli_args.fail``).

Lives beside the tools (``scripts/``), which import it by name.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from cli_args import check_engine, fail

if TYPE_CHECKING:
  from mjlab_tasks.engine import Engine


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
  from mjlab_tasks.engine import ENGINES, default_device, traits

  known = engine is None or engine in ENGINES
  chosen = check_engine(engine, default_device(engine) if known else "cpu")
  if not has_cuda() and not traits(chosen).cpu_only:
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


def run_mjlab_main(
  name: str,
  main: Callable[[], None],
  task: str,
  mjlab_args: list[str],
  engine: Engine,
  viewer: bool = False,
) -> None:
  """mjlab's ``main`` of ``name`` (train, play) on the chosen engine."""
  from mjlab_tasks.engine import mjlab_builds_on

  sys.argv = [f"{sys.argv[0]} (mjlab {name})", task, *mjlab_args]
  with mjlab_builds_on(engine, viewer=viewer):
    main()
