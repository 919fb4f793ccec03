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

import sys

from mjlab_cli import (
  check_task,
  choose_engine,
  run_mjlab_main,
  split_engine,
  task_and_args,
)

USAGE = __doc__


def run_mjlab_train(task: str, mjlab_args: list[str], engine: str) -> None:
  """mjlab's ``train`` main, its environment built on the chosen engine."""
  from mjlab.scripts import train

  run_mjlab_main("train", train.main, task, mjlab_args, engine)


def main() -> None:
  engine, rest = split_engine(sys.argv[1:])
  task, mjlab_args = task_and_args(rest, USAGE)
  chosen = choose_engine(engine)
  check_task(task)
  run_mjlab_train(task, mjlab_args, chosen)


if __name__ == "__main__":
  main()
