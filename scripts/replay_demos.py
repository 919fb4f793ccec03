"""Replay a demonstration file: recorded actions from recorded initial states.

  python scripts/replay_demos.py demos/cube_tray.hdf5
  python scripts/replay_demos.py demos/cube_tray.hdf5 --engine warp --json replay.json
  python scripts/replay_demos.py demos/cube_tray.hdf5 --render-cameras wrist \
    --output demos/cube_tray_wrist.hdf5

Rebuilds the task from the file's env_args (same configuration and number of
environments), and for each episode resets its environment slot the way
collection did (the episode's seed), restores the recorded initial
simulator state (``states[0]``, the full MjData integration state), applies
the recorded actions one by one and compares, at every step, the simulator
state and the actor observations with the recorded ones, and at the end the
task evaluator's verdict (success, outcome, reason) and the episode length.

Prints one line per episode (largest state and observation divergence,
recorded and replayed outcome) and a summary. A file recorded on the C
engine and replayed on it must reproduce every episode exactly (bitwise
equal states, the same verdicts): the exit status is 1 otherwise. On MuJoCo
Warp the divergence is reported (exit 0). A file that breaks the layout
(missing datasets or attributes, actions not finite or outside [-1, 1], ...)
is refused with one line before anything is built.

With ``--render-cameras`` it replays nothing: it restores every recorded
state of every episode (in its recorded environment slot, the task rebuilt
with the cameras) and writes a copy of the file with the camera images of
those states added as ``obs/<term>``, as ``collect_demos.py --cameras``
records them; collection can stay state-only and cheap. On the C engine the
images equal those a collection with the cameras records when the batch's
other environments are in the same states as then (tested); otherwise they
differ slightly (the renderer's coupling between environments,
docs/demonstrations.md).

The replay and the rendering are ``mjlab_tasks.demos.replay``; this tool
checks the flags, shows the progress and prints the report.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import tyro
from cli_args import (
  check_device,
  check_engine,
  check_file,
  check_new_file,
  fail,
  opengl_errors_in_one_line,
  parse,
)
from tqdm import tqdm

from mjlab_tasks.demos.format import SUFFIXES, DemoFileError, validate_file


@dataclass
class Args:
  file: tyro.conf.Positional[Path]
  """The demo file (.hdf5) to replay."""
  engine: str | None = None
  """mujoco (C MuJoCo: exact) or warp (MuJoCo Warp: divergence reported).
  Default: the engine the file was recorded with."""
  device: str | None = None
  """cpu or cuda:N (default: cpu for the C engine, else cuda:0 when available)."""
  json: Path | None = None
  """Also write the per-episode results here (refused if it exists)."""
  render_cameras: str | None = None
  """Instead of replaying: render these cameras (comma-separated: wrist,
  scene) from the recorded states into a copy of the file (--output)."""
  output: Path | None = None
  """With --render-cameras: the new demo file (.hdf5); refused if it exists."""


def check_args(args: Args) -> tuple[str, str, dict]:
  """(device, engine, env_args); the whole file checked before anything is built."""
  from mjlab_tasks.engine import ENGINES, traits

  check_file(args.file, "file")
  try:
    env_args = validate_file(args.file)
  except DemoFileError as err:
    fail(str(err))
  engine = args.engine if args.engine is not None else env_args.get("engine")
  if engine not in ENGINES:
    fail(f"--engine must be warp or mujoco, got {engine!r}.")
  device = check_device(args.device or ("cpu" if traits(engine).cpu_only else None))
  engine = check_engine(engine, device)
  if args.json is not None:
    check_new_file(args.json, "--json")
  if (args.render_cameras is None) != (args.output is None):
    fail("--render-cameras and --output go together.")
  if args.output is not None:
    if args.output.suffix not in SUFFIXES:
      fail(f"--output {args.output}: the demo file must end in .hdf5 or .h5.")
    check_new_file(args.output, "--output")
    render_plan(args, env_args)
  return device, engine, env_args


def print_results(results: list, engine: str) -> None:
  print(
    f"\n{'demo':>9} {'seed':>6} {'env':>4} {'steps':>6} {'state div':>10} {'obs div':>9}  recorded -> replayed"
  )
  for r in results:
    steps = (
      f"{r.replayed_steps}"
      if r.replayed_steps == r.steps
      else f"{r.replayed_steps}/{r.steps}"
    )
    print(
      f"{r.demo:>9} {r.seed:>6} {r.env:>4} {steps:>6} {r.max_state_divergence:>10.3g} "
      f"{r.max_obs_divergence:>9.3g}  {r.recorded[1]}{'/' + r.recorded[2] if r.recorded[2] else ''}"
      f" -> {r.replayed[1]}{'/' + r.replayed[2] if r.replayed[2] else ''}"
      f"{'' if r.verdict_reproduced else '  DIFFERS'}"
    )


# Rendering camera images from recorded states.


def render_plan(args: Args, env_args: dict) -> tuple[tuple[str, ...], dict]:
  """(cameras, the new file's env_args); refused if the file has them."""
  from cli_args import check_cameras

  from mjlab_tasks.demos import with_cameras

  cameras = check_cameras(args.render_cameras, "--render-cameras")
  kwargs = env_args["env_kwargs"]
  if kwargs.get("cameras"):
    fail(
      f"{args.file} already has camera images ({', '.join(kwargs['cameras'])}): "
      "render from a state-only file."
    )
  return cameras, with_cameras(env_args, cameras)


def main(args: Args) -> int:
  device, engine, env_args = check_args(args)
  from mjlab_tasks.common.runtime import quiet_warp
  from mjlab_tasks.demos import both_exact, load_episodes, render_file, replay_episodes

  quiet_warp()
  if args.render_cameras is not None:
    start = time.perf_counter()
    _, new_args = render_plan(args, env_args)
    with opengl_errors_in_one_line():
      try:
        path = render_file(
          args.file,
          args.output,
          new_args,
          device,
          engine,
          lambda total: tqdm(total=total, desc="render episodes", unit="ep"),
        )
      except DemoFileError as err:
        fail(str(err))
    print(f"rendered in {time.perf_counter() - start:.1f} s; wrote {path}")
    return 0
  episodes = load_episodes(args.file)
  exact_expected = both_exact(engine, env_args.get("engine"))
  start = time.perf_counter()
  bar = tqdm(total=len(episodes), desc="replay episodes", unit="ep")
  with bar, opengl_errors_in_one_line():
    results = replay_episodes(
      env_args, episodes, device, engine, lambda _: bar.update(1)
    )
  wall = time.perf_counter() - start
  print_results(results, engine)
  reproduced = sum(r.verdict_reproduced for r in results)
  exact = sum(r.exact for r in results)
  worst = max((r.max_state_divergence for r in results), default=0.0)
  print(
    f"\n{reproduced}/{len(results)} verdicts reproduced, {exact}/{len(results)} "
    f"episodes bitwise exact (states, observations, rewards, dones); largest state "
    f"divergence {worst:.3g}; {engine} engine (recorded on {env_args.get('engine')}), "
    f"{wall:.1f} s."
  )
  if args.json is not None:
    report = {
      "file": str(args.file),
      "engine": engine,
      "recorded_engine": env_args.get("engine"),
      "exact_required": exact_expected,
      "episodes": [
        asdict(r) | {"verdict_reproduced": r.verdict_reproduced} for r in results
      ],
    }
    args.json.write_text(json.dumps(report, indent=2))
  if exact_expected and exact < len(results):
    print(
      f"error: {len(results) - exact} episode(s) did not reproduce exactly on the C engine.",
      file=sys.stderr,
    )
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
