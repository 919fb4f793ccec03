"""Train a policy on a suite task with mjlab's own training, on either engine.

  python scripts/train.py TASK [--engine mujoco|warp] [mjlab train options]

This is mjlab's ``train`` (rsl_rl PPO, the task's registered configuration,
mjlab's log and checkpoint layout under ``logs/rsl_rl/<experiment>/<run>``,
``--agent.*`` and ``--env.*`` options, ``--gpu-ids`` for several GPUs through
torchrunx) with one addition: ``--engine mujoco`` runs the environments on the
C MuJoCo engine (CPU, one thread per core), ``--engine warp`` on MuJoCo Warp.
Default: warp when CUDA is available, else mujoco. Example, a short CPU run:

  python scripts/train.py CubeTray-UR5-RG2 --engine mujoco \\
    --env.scene.num-envs 64 --agent.max-iterations 200

``python scripts/train.py TASK --help`` lists every mjlab option.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

from cli_args import check_engine, fail

USAGE = __doc__


def split_engine(argv: list[str]) -> tuple[str | None, list[str]]:
  """``--engine X`` / ``--engine=X`` taken out of mjlab's arguments."""
  engine, rest, k = None, [], 0
  while k < len(argv):
    arg = argv[k]
    if arg == "--engine":
      if k + 1 >= len(argv):
        fail("--engine needs a value: mujoco or warp")
      engine, k = argv[k + 1], k + 2
      continue
    if arg.startswith("--engine="):
      engine = arg.split("=", 1)[1]
    else:
      rest.append(arg)
    k += 1
  return engine, rest


def choose_engine(engine: str | None) -> str:
  """The engine to train on; the C engine trains on the CPU."""
  import torch

  cuda = torch.cuda.is_available()
  chosen = check_engine(engine, "cuda:0" if cuda and engine != "mujoco" else "cpu")
  if chosen == "warp" and not cuda:
    print("note: MuJoCo Warp on the CPU is slow; --engine mujoco is faster here")
  return chosen


def check_task(task: str) -> None:
  with warnings.catch_warnings():
    # mjlab's import decorates with torch.jit.script, which torch deprecates.
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated")
    import mjlab.tasks  # noqa: F401 - fills the registry (the suite's tasks too)
  from mjlab.tasks.registry import list_tasks

  if task not in list_tasks():
    suite = sorted(t for t in list_tasks() if t.endswith("-UR5-RG2"))
    fail(f"unknown task {task!r}; this suite's tasks: {', '.join(suite)}")


def run_mjlab_train(task: str, mjlab_args: list[str], engine: str) -> None:
  """mjlab's ``train`` main, its environment built on the chosen engine."""
  from mjlab.scripts import train

  from mjlab_tasks.common.c_engine import CMujocoSimulation, simulation_class

  if engine == "mujoco":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # mjlab's CPU mode
  elif not os.environ.get("CUDA_VISIBLE_DEVICES") and not _has_cuda():
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # Warp on the CPU
  sys.argv = [f"{sys.argv[0]} (mjlab train)", task, *mjlab_args]
  patch = simulation_class(CMujocoSimulation) if engine == "mujoco" else None
  with patch or contextlib.nullcontext():
    train.main()


def _has_cuda() -> bool:
  import torch

  return torch.cuda.is_available()


def main() -> None:
  engine, rest = split_engine(sys.argv[1:])
  if not rest or rest[0] in ("-h", "--help"):
    print(USAGE)
    raise SystemExit(0 if rest else 2)
  task, mjlab_args = rest[0], rest[1:]
  if task.startswith("-"):
    fail(f"the task id comes first, got {task!r}")
  chosen = choose_engine(engine)
  check_task(task)
  run_mjlab_train(task, mjlab_args, chosen)


if __name__ == "__main__":
  main()
