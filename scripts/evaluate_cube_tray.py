"""Batch evaluation on the cube-in-tray task: the reference expert, or a
trained policy (``--policy``).

Runs the controller in ``--num-envs`` parallel environments until
``--episodes`` episodes have ended (success or time-out), scoring each with
the task's evaluator, and writes a report.

  python scripts/evaluate_cube_tray.py --num-envs 4 --episodes 8 --output reports/ct_run
  python scripts/evaluate_cube_tray.py --policy logs/rsl_rl/cube_tray_ur5_rg2/RUN/model_200.pt
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_folder,
  check_policy,
  check_videos,
  create_folder,
  fail,
  opengl_errors_in_one_line,
  parse,
  prepare_offscreen_gl,
)
from tqdm import tqdm


@dataclass
class Args:
  num_envs: int = 4
  """Number of parallel environments."""
  episodes: int | None = None
  """Episodes to score in total, spread evenly over the environments (default:
  one per environment)."""
  max_steps: int = 240
  """Episode limit in policy steps (20 Hz); a time-out is a failure."""
  seed: int = 0
  """Seed for resets (cube and tray placements)."""
  nominal: bool = False
  """Use the nominal placement (no randomization), as in the specification's worked case."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu)."""
  engine: str | None = None
  """Physics engine: warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU, deterministic).
  Default: warp on CUDA, mujoco on CPU."""
  output: Path | None = None
  """Folder for report.json and videos; must not exist. Nothing written if unset."""
  videos: int = 0
  """Record mp4 videos of the first N environments (needs --output)."""
  verbose: bool = False
  """Also print mjlab's environment summary (its manager tables) while building."""
  policy: Path | None = None
  """A trained policy to score in place of the expert: an rsl_rl checkpoint
  (model_N.pt from scripts/train.py or mjlab's train) or its ONNX export
  (.onnx, from scripts/play.py --export-onnx; needs the onnx extra), or a
  behaviour-cloning policy.pt of scripts/train_bc.py, which may read camera
  images (the environment is then built with the cameras it needs). It acts
  with the task's Cartesian actions on its observations without noise."""


@contextlib.contextmanager
def quiet_stdout():
  """Hold back what building prints on stdout (mjlab's manager tables)."""
  with contextlib.redirect_stdout(io.StringIO()):
    yield


def check_args(args: Args) -> tuple[str, str, int]:
  """Every flag checked before anything is built: (device, engine, episodes)."""
  check_at_least(1, num_envs=args.num_envs, episodes=args.episodes)
  check_at_least(1, max_steps=args.max_steps)
  check_videos(args.videos, args.num_envs)
  if args.videos and args.output is None:
    fail("--videos needs --output.")
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  if args.output is not None:
    check_new_folder(args.output)
  if args.policy is not None:
    check_policy(args.policy)
  if args.videos:
    prepare_offscreen_gl("--videos")
  episodes = args.num_envs if args.episodes is None else args.episodes
  return device, engine, episodes


def make_controller(env, policy: Path | None, device: str):
  """The privileged expert, or the trained policy at ``policy``."""
  if policy is None:
    from experts.cube_tray import CubeTrayExpert

    expert = CubeTrayExpert(env)
    expert.reset()
    return expert
  from mjlab_tasks.policies import load_policy

  try:
    return load_policy(env, "CubeTray-UR5-RG2", policy, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])


def build_env(args: Args, device: str, engine: str):
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env
  from mjlab_tasks.policies import bc_cameras

  cfg = cube_tray_env_cfg(
    play=args.policy is not None,  # no observation noise for a policy
    arm_action="joint" if args.policy is None else "cartesian",
    randomize=not args.nominal,
    num_envs=args.num_envs,
    # An image policy's cameras (none otherwise: nothing rendered).
    cameras=() if args.policy is None else bc_cameras(args.policy),
  )
  cfg.seed = args.seed
  cfg.episode_length_s = args.max_steps * cfg.decimation * cfg.sim.mujoco.timestep
  with contextlib.nullcontext() if args.verbose else quiet_stdout():
    env = make_env(cfg, device=device, engine=engine)
  env.reset()
  return env


def make_recorder(env, videos: int):
  """Films of the first ``videos`` environments' first episodes, or None."""
  if not videos:
    return None
  from mjlab_tasks.common.video import CameraView, PoseReplicaRecorder
  from mjlab_tasks.cube_tray.evaluation import VIDEO_VIEW

  recorder = PoseReplicaRecorder(
    env.sim.mj_model,
    list(range(videos)),
    fps=1 / env.step_dt,
    views=(CameraView(**VIDEO_VIEW),),
  )
  recorder.capture(env.sim.data, env.scene.env_origins)
  return recorder


def print_results(results: list[dict], summary: dict, device: str, engine: str) -> None:
  print(f"\n{'env':>4} {'ep':>3} {'outcome':>13} {'reason':>14} {'t_success':>10}")
  for r in results:
    t = "-" if r["time_to_success_s"] is None else f"{r['time_to_success_s']:.2f}"
    print(
      f"{r['env']:>4} {r['episode']:>3} {r['outcome']:>13} {r['reason'] or '-':>14} {t:>10}"
    )
  outcomes, reasons = summary["outcomes"], summary["failure_reasons"]
  print(
    f"\nsuccess {outcomes.get('success', 0)}/{len(results)} "
    f"({summary['success_rate']:.1%}); "
    f"failure reasons {reasons or '-'}; mean time to success "
    f"{summary['mean_time_to_success_s']} s; {summary['env_steps_per_s']} env steps/s "
    f"on {device} ({engine} engine)."
  )
  for key in ("episodes_with_contact_overflow", "episodes_with_nonfinite_state"):
    if summary[key]:
      print(
        f"WARNING: {summary[key]} episode(s) flagged {key.removeprefix('episodes_with_')}."
      )


def write_report(out_dir: Path, report: dict, recorder) -> None:
  if recorder is not None:
    recorder.save_poses(out_dir / "video_poses.npz")
    report["videos"] = [str(p.name) for p in recorder.render(out_dir)]
  (out_dir / "report.json").write_text(json.dumps(report, indent=2))
  print(f"wrote {out_dir / 'report.json'}")


def main(args: Args) -> int:
  device, engine, episodes = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.cube_tray.evaluation import describe, run_episodes, summarize

  with opengl_errors_in_one_line():  # an image policy's cameras
    env = build_env(args, device, engine)
  controller = make_controller(env, args.policy, device)
  recorder = make_recorder(env, args.videos)
  with tqdm(total=episodes, desc="cube_tray episodes", unit="ep") as bar:
    results, steps, wall = run_episodes(
      env, controller, episodes, recorder, on_episode=lambda: bar.update(1)
    )
  summary = summarize(results, steps * args.num_envs, wall)
  report = {
    "task": "CubeTray-UR5-RG2",
    "controller": describe(controller),
    "config": {
      **{k: str(v) for k, v in asdict(args).items()},
      "device": device,
      "engine": engine,
    },
    "summary": summary,
    "episodes": results,
    "source": source_snapshot(),
  }
  print_results(results, summary, device, engine)
  if out_dir is not None:
    write_report(out_dir, report, recorder)
  controller.close()
  env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
