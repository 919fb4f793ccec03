"""Physics-only evaluation on the bin-picking task: the expert (the bin-picking
specification's), or a trained policy (``--policy``).

Pours objects into ``--num-envs`` bins, runs the expert (CPU replica planning,
batched live execution) or the policy for at most ``--max-steps`` policy steps
(20 Hz), and scores every object with the task's delivery evaluator.

  python scripts/evaluate_binpick.py --num-envs 4 --objects 12 --max-steps 3600 \\
    --bin-width .14 --bin-height .06 --device cpu --output reports/binpick_expert/new_run
  python scripts/evaluate_binpick.py --policy logs/rsl_rl/bin_pick_ur5_rg2/RUN/model_200.pt

Writes into ``--output`` (refused if it exists): report.json (config, per
environment poured/delivered counts, outcome, failure reasons, summary),
transitions.json, planning_rejections.json, physics_metrics.json,
final_states.json, source_snapshot.json (a policy has no plans: no
transitions.json or planning_rejections.json, no expert fields); with ``--videos N`` also one mp4
per environment and camera (scene and wrist D415, Gaussian room
backgrounds) drawn from a read-only pose replica, and video_poses.npz (each
recorded frame's qpos at 4 fps; re-render with scripts/render_poses.py).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_folder,
  check_policy,
  check_videos,
  create_folder,
  fail,
  parse,
  prepare_offscreen_gl,
)
from tqdm import tqdm

from assets.objects import ObjectSet
from mjlab_tasks.bin_pick.evaluation import (
  EXPERT,
  TASK,
  VIDEO_FPS,
  env_rows,
  expert_files,
  final_states,
  is_expert,
  run,
  summarize,
)
from mjlab_tasks.common.verdict import task_verdict

if TYPE_CHECKING:
  pass

TABLE = (0.35, 0.15, 0.6, 0.55)  # Table top drawn in videos: centre, half sizes [m].
BIN_WIDTH_RANGE = (0.06, 0.4)  # Supported inner bin width and height [m].
BIN_HEIGHT_RANGE = (0.03, 0.3)


@dataclass
class Args:
  num_envs: int = 4
  """Number of parallel environments (bins)."""
  objects: int = 12
  """Objects requested per bin; the pourer stops earlier when the pile reaches
  its stopping height, so compare the actual poured counts."""
  max_steps: int = 3600
  """Policy steps (20 Hz) per environment; an unfinished bin is a timeout.
  The expert's run ends sooner once it has stopped in every environment and
  every poured object is still (at most 5 s after it stopped)."""
  bin_width: float = 0.128
  """Inner bin width [m] (default: the historical 128 mm)."""
  bin_height: float = 0.150
  """Inner wall height [m] (default: the historical 150 mm)."""
  seed: int = 0
  """Seed of the pour (drop positions and orientations)."""
  object_seed: int = 0
  """Seed of the object set (shapes, sizes, densities)."""
  object_set: ObjectSet = "default"
  """default (graspable by construction: every object has a grasp in each
  resting pose in the default bin) or hard (the former default, with wide
  flat boxes no two-finger grasp reaches lying flat; docs/bin_pick.md)."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu)."""
  engine: str | None = None
  """warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU, deterministic). Default:
  warp on CUDA, mujoco on CPU."""
  output: Path | None = None
  """Report folder; must not exist (default: reports/binpick_expert/<time>)."""
  videos: int = 0
  """Film the first N environments (scene and wrist cameras). 0: no camera
  sensor, no camera observation and no rendering at all."""
  policy: Path | None = None
  """A trained BinPick-UR5-RG2 policy to run in place of the expert: an rsl_rl
  checkpoint (model_N.pt from scripts/train.py) or its ONNX export (.onnx,
  from scripts/play.py --export-onnx; needs the onnx extra). It acts with the
  task's Cartesian actions on its observations; keep --objects, --bin-width
  and --bin-height as in training when its observations depend on them."""


def check_args(args: Args) -> tuple[str, str, Path]:
  """Every flag checked before anything is built: (device, engine, output)."""
  check_at_least(1, num_envs=args.num_envs, objects=args.objects)
  check_at_least(1, max_steps=args.max_steps)
  check_videos(args.videos, args.num_envs)
  # The supported bin (bin_pick_env_cfg checks the same, after importing mjlab).
  if not BIN_WIDTH_RANGE[0] <= args.bin_width <= BIN_WIDTH_RANGE[1]:
    fail(
      f"--bin-width {args.bin_width} m is outside the supported "
      f"{BIN_WIDTH_RANGE[0]}-{BIN_WIDTH_RANGE[1]} m."
    )
  if not BIN_HEIGHT_RANGE[0] <= args.bin_height <= BIN_HEIGHT_RANGE[1]:
    fail(
      f"--bin-height {args.bin_height} m is outside the supported "
      f"{BIN_HEIGHT_RANGE[0]}-{BIN_HEIGHT_RANGE[1]} m."
    )
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  output = args.output or Path("reports/binpick_expert") / datetime.now().strftime(
    "run-%Y%m%d-%H%M%S"
  )
  check_new_folder(output)
  if args.policy is not None:
    check_policy(args.policy)
  if args.videos:
    prepare_offscreen_gl("--videos")
  return device, engine, output


def build_env(args: Args, device: str, engine: str):
  """The evaluation environment: the pour as flagged, no reset on clearing."""
  from mjlab_tasks.bin_pick import mdp
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.engine import make_env
  from mjlab_tasks.policies import bc_cameras

  try:
    cfg = bin_pick_env_cfg(
      play=True,
      objects=args.objects,
      bin_width=args.bin_width,
      bin_height=args.bin_height,
      num_envs=args.num_envs,
      object_seed=args.object_seed,
      object_set=args.object_set,
      pour_seed=args.seed,
      # An image policy's cameras (none otherwise: nothing rendered).
      cameras=() if args.policy is None else bc_cameras(args.policy),
    )
  except ValueError as e:
    raise SystemExit(f"error: {e}") from None
  cfg.seed = args.seed
  # The run ends by --max-steps; a cleared bin stays as it is to be reported.
  cfg.episode_length_s = (
    (args.max_steps + 10) * cfg.decimation * cfg.sim.mujoco.timestep
  )
  cfg.terminations[mdp.CLEARED_TERM].params["terminate"] = False
  return make_env(cfg, device=device, engine=engine)


def make_controller(env, policy: Path | None, device: str):
  """The expert after the first reset (the pour), or the trained policy,
  whose loading makes that first reset (as rsl_rl's environment wrapper)."""
  if policy is None:
    from experts.bin_pick.expert import BinPickExpert

    env.reset()
    return BinPickExpert(env)
  from mjlab_tasks.policies import load_policy

  try:
    return load_policy(env, TASK, policy, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])


def make_recorder(env, args: Args):
  """Pose recorder of the filmed environments (scene and wrist views)."""
  if not args.videos:
    return None
  from mjlab_tasks.bin_pick.env_cfg import SCENE_VIEW
  from mjlab_tasks.common.video import CameraView, PoseReplicaRecorder

  views = (
    # As the scene camera sensor: the arm, the bin and the drop zone.
    CameraView(
      name="scene",
      width=640,
      height=480,
      lookat=SCENE_VIEW.lookat,
      distance=SCENE_VIEW.distance,
      azimuth=SCENE_VIEW.azimuth,
      elevation=SCENE_VIEW.elevation,
      groups=(0, 1, 2, 3, 4),  # D415 housing and mount visible.
      background="gaussian_room",
      table=TABLE,
    ),
    CameraView(
      name="wrist_d415",
      width=320,
      height=180,
      camera="robot/wrist_d415",
      groups=(0, 1, 2),  # As the sensor: camera visuals excluded.
      background="gaussian_room",
      table=TABLE,
    ),
  )
  return PoseReplicaRecorder(
    env.sim.mj_model,
    list(range(args.videos)),
    fps=VIDEO_FPS,
    views=views,
    seed=args.seed,
  )


def run_config(args: Args, out_dir: Path, device, engine, env, controller) -> dict:
  from mjlab_tasks.bin_pick import mdp

  config = {
    **{k: str(v) for k, v in asdict(args).items()},
    "output": str(out_dir),
    "device": device,
    "engine": engine,
    "bin_inner_mm": [
      400,
      round(args.bin_width * 1000, 1),
      round(args.bin_height * 1000, 1),
    ],
    "delivery_thresholds": asdict(mdp.delivery_rule(env)[1]),
  }
  if is_expert(controller):
    config["expert"] = {k: str(v) for k, v in asdict(controller.cfg).items()}
  return config


def print_table(per_env: list, summary: dict, device: str, engine: str) -> None:
  print(
    f"\n{'env':>4} {'poured':>6} {'delivered':>9} {'first [s]':>9} "
    f"{'outcome':>13}  failures"
  )
  for e in per_env:
    first = e["first_delivery_at_s"]
    print(
      f"{e['env']:>4} {e['poured']:>6} {e['delivered']:>9} "
      f"{'-' if first is None else f'{first:.2f}':>9} {e['outcome']:>13}  "
      f"{e.get('failure_reasons') or '-'}"
    )
  frac = summary["delivered_fraction"]
  n = summary["environments"]
  print(
    f"\ndelivered {summary['delivered']}/{summary['poured']} "
    f"({'-' if frac is None else f'{frac:.1%}'}); episodes with a delivery "
    f"{summary['episodes_with_a_delivery']}/{n} "
    f"({summary['episodes_with_a_delivery'] / n:.0%}; at some step "
    f"{summary['episodes_with_a_delivery_at_some_step']}); bin_cleared "
    f"{summary['outcomes'].get('bin_cleared', 0)}/{summary['environments']} "
    f"(at some step {summary['cleared_at_some_step']}); "
    f"{delivery_note(summary)}"
    f"{summary['env_steps_per_s']} env steps/s on {device} ({engine} engine)."
  )


def delivery_note(summary: dict) -> str:
  """The expert's time per delivery (it records each delivery; a policy not)."""
  if "mean_time_per_delivery_s" not in summary:
    return ""
  t = summary["mean_time_per_delivery_s"]
  return "no verified delivery; " if t is None else f"time per delivery {t} s; "


def bar_update(bar):
  """The progress bar's step, with the deliveries so far every 20 steps."""

  def progress(steps: int, verdict: dict) -> None:
    bar.update(1)
    if steps % 20 == 0:
      done, poured = verdict["delivered_count"].sum(), verdict["poured_count"].sum()
      bar.set_postfix(delivered=f"{int(done)}/{int(poured)}")

  return progress


def main(args: Args) -> int:
  device, engine, output = check_args(args)
  out_dir = create_folder(output)

  from mjlab_tasks.common.runtime import quiet_warp, source_snapshot

  quiet_warp()

  from mjlab_tasks.bin_pick.env_cfg import pourer

  start = time.perf_counter()
  env = build_env(args, device, engine)
  controller = make_controller(env, args.policy, device)
  pour, recorder = pourer(env), make_recorder(env, args)
  with tqdm(total=args.max_steps, desc="bin_pick steps", unit="step") as bar:
    watch = run(
      env, controller, recorder, args.max_steps, pour.cfg.names, bar_update(bar)
    )
  wall = time.perf_counter() - start

  verdict, sim_time = task_verdict(env), watch.steps * env.step_dt
  per_env = env_rows(env, controller, pour, verdict, watch, sim_time)
  summary = summarize(per_env, controller, args.num_envs, sim_time, wall, watch.steps)
  if is_expert(controller):
    summary["settle_after_stop_s"] = round(watch.settle_steps * env.step_dt, 3)
  report = {
    "task": TASK,
    "controller": EXPERT if is_expert(controller) else controller.description,
    "config": run_config(args, out_dir, device, engine, env, controller),
    "summary": summary,
    "environments": per_env,
  }
  files = {"report.json": report}
  if is_expert(controller):
    files |= expert_files(controller, summary)
  files["physics_metrics.json"] = watch.metrics(env)
  files["source_snapshot.json"] = source_snapshot()
  files["final_states.json"] = final_states(env, pour, verdict)
  if recorder is not None:
    recorder.save_poses(out_dir / "video_poses.npz")
    report["videos"] = [p.name for p in recorder.render(out_dir)]
  for name, content in files.items():
    (out_dir / name).write_text(json.dumps(content, indent=2))

  print_table(per_env, summary, device, engine)
  if int(watch.overflow_steps.sum()) or int(watch.nonfinite_steps.sum()):
    print("WARNING: physics problems flagged; see physics_metrics.json.")
  print(f"wrote {out_dir}")
  controller.close()
  env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
