"""Watch a policy act in a suite task with mjlab's own play, on either engine.

  python scripts/play.py TASK [--engine mujoco|warp] [--steps N]
                         [--export-onnx PATH] [mjlab play options]

This is mjlab's ``play`` (its viewer: viser in the browser, or MuJoCo's native
window when a display is there; ``--agent zero|random|trained``,
``--checkpoint-file model_N.pt``, ``--num-envs``, ``--video True``...) with the
suite's additions:

  --engine mujoco|warp   mujoco: the environment on the C MuJoCo engine (CPU);
                         warp: MuJoCo Warp. Default: warp when CUDA is
                         available, else mujoco.
  --steps N              stop after N policy steps (mjlab's viewer otherwise
                         runs until Ctrl+C) and print the pace kept: the
                         real-time factor and the stepping speed alone.
  --export-onnx PATH     write the --checkpoint-file policy as ONNX (its
                         observation normalizer inside, as mjlab's runner
                         exports it) and exit without a viewer; score it with
                         evaluate_cube_tray.py / evaluate_binpick.py --policy.

Examples, on a CPU:

  python scripts/play.py CubeTray-UR5-RG2 --engine mujoco --num-envs 2 \\
    --checkpoint-file logs/rsl_rl/cube_tray_ur5_rg2/RUN/model_200.pt
  python scripts/play.py CubeTray-UR5-RG2 --agent random --num-envs 2 --steps 200
  python scripts/play.py CubeTray-UR5-RG2 --checkpoint-file RUN/model_200.pt \\
    --export-onnx RUN/policy.onnx

The viewer prints its address (viser: http://localhost:8080 by default).
``python scripts/play.py TASK --help`` lists every mjlab option.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from cli_args import (
  check_at_least,
  check_file,
  check_new_file,
  fail,
  prepare_offscreen_gl,
)
from mjlab_cli import (
  check_task,
  choose_engine,
  run_mjlab_main,
  split_engine,
  split_flag,
  task_and_args,
)

USAGE = __doc__


@dataclass
class SuiteFlags:
  """The suite's own flags, taken out of mjlab's arguments."""

  engine: str | None
  steps: int | None
  export_onnx: Path | None


def split_suite_flags(argv: list[str]) -> tuple[SuiteFlags, list[str]]:
  engine, rest = split_engine(argv)
  steps, rest = split_flag(rest, "--steps")
  export, rest = split_flag(rest, "--export-onnx")
  return SuiteFlags(engine, parse_steps(steps), export and Path(export)), rest


def parse_steps(value: str | None) -> int | None:
  if value is None:
    return None
  try:
    steps = int(value)
  except ValueError:
    fail(f"--steps must be a whole number, got {value!r}.")
  check_at_least(1, steps=steps)
  return steps


def mjlab_value(argv: list[str], flag: str) -> str | None:
  """The value mjlab will read for ``flag`` (the last one given), if any."""
  return split_flag(argv, flag)[0]


def check_mjlab_args(flags: SuiteFlags, mjlab_args: list[str]) -> Path | None:
  """mjlab's play flags whose mistakes would be tracebacks, checked up front.

  Returns the checkpoint (``--checkpoint-file``), if one is given.
  """
  checkpoint = mjlab_value(mjlab_args, "--checkpoint-file")
  agent = mjlab_value(mjlab_args, "--agent") or "trained"
  if checkpoint is not None:
    check_file(Path(checkpoint), "--checkpoint-file")
    if Path(checkpoint).suffix != ".pt":
      fail(f"--checkpoint-file takes an rsl_rl checkpoint (.pt), got {checkpoint!r}.")
  if flags.export_onnx is not None:
    if checkpoint is None:
      fail("--export-onnx needs --checkpoint-file (the policy to export).")
    if flags.export_onnx.suffix != ".onnx":
      fail(f"--export-onnx writes an .onnx file, got {str(flags.export_onnx)!r}.")
    check_new_file(flags.export_onnx, "--export-onnx")
  elif (
    agent == "trained"
    and checkpoint is None
    and mjlab_value(mjlab_args, "--wandb-run-path") is None
  ):
    fail(
      "--agent trained (the default) needs --checkpoint-file model_N.pt "
      "(or --wandb-run-path); --agent zero or random needs none."
    )
  if mjlab_value(mjlab_args, "--video") in ("True", "true"):
    prepare_offscreen_gl("--video")  # Before mujoco is imported.
  return Path(checkpoint) if checkpoint is not None else None


def run_mjlab_play(
  task: str, mjlab_args: list[str], engine: str, steps: int | None
) -> None:
  """mjlab's ``play`` main, its environment built on the chosen engine."""
  from mjlab.scripts import play

  from mjlab_tasks.engine.mjlab_viewer import paced_viewer

  with paced_viewer(steps):
    run_mjlab_main("play", play.main, task, mjlab_args, engine, viewer=True)


def export_onnx(task: str, checkpoint: Path, output: Path, engine: str) -> None:
  """The checkpoint's policy as ONNX, from a one-environment build of the task."""
  from mjlab.tasks.registry import load_env_cfg

  import mjlab_tasks.tasks  # noqa: F401 - the registry
  from mjlab_tasks.engine import default_device, make_env, mjlab_builds_on
  from mjlab_tasks.policies import export_onnx_policy

  cfg = load_env_cfg(task, play=True)
  cfg.scene.num_envs = 1
  device = default_device(engine)
  with mjlab_builds_on(engine), contextlib.redirect_stdout(sys.stderr):
    env = make_env(cfg, device=device, engine=engine)
  try:
    export_onnx_policy(env, task, checkpoint, output, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])
  finally:
    env.close()
  print(f"wrote {output}")


def main() -> None:
  flags, rest = split_suite_flags(sys.argv[1:])
  task, mjlab_args = task_and_args(rest, USAGE)
  wants_help = "-h" in mjlab_args or "--help" in mjlab_args  # mjlab's help
  checkpoint = None if wants_help else check_mjlab_args(flags, mjlab_args)
  engine = choose_engine(flags.engine)
  check_task(task)
  if flags.export_onnx is not None and not wants_help:
    export_onnx(task, checkpoint, flags.export_onnx, engine)
  else:
    run_mjlab_play(task, mjlab_args, engine, flags.steps)


if __name__ == "__main__":
  main()
