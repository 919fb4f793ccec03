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
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
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

# The videos' free camera (environment frame): the whole arm, and the cube and
# the tray anywhere in their randomization ranges, fill the picture (checked
# by rendering the ranges' corners; a frame is docs/images/cube_tray_frame.png).
VIDEO_VIEW = dict(
  lookat=(0.36, -0.07, 0.26), distance=1.12, azimuth=160.0, elevation=-33.0
)


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
  """Use the nominal placement (no randomization), as in the seed's case."""
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
  from mjlab_tasks.common.policy import load_policy

  try:
    return load_policy(env, "CubeTray-UR5-RG2", policy, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])


def controller_fields(controller, i: int) -> dict:
  """Per-episode report fields only the expert has (its plan and actions)."""
  if not hasattr(controller, "plan_ok"):
    return {}
  return {
    "expert_actions_issued": int(controller.index[i]) + 1,
    "expert_plan_ok": bool(controller.plan_ok[i]),
    "expert_action_timeouts": int(controller.timeouts[i]),
  }


def describe(controller) -> str:
  if hasattr(controller, "description"):  # A trained policy names its file.
    return controller.description
  return "experts.cube_tray.CubeTrayExpert (privileged reference)"


def main(args: Args) -> int:
  device, engine, episodes = check_args(args)
  out_dir = create_folder(args.output) if args.output is not None else None

  from evaluators.cube_tray import OUTCOME_NAMES, REASON_NAMES, Outcome, Reason
  from mjlab_tasks.common.c_engine import make_env
  from mjlab_tasks.common.mdp import physics_health
  from mjlab_tasks.common.policy import bc_cameras
  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.common.video import CameraView, PoseReplicaRecorder
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.cube_tray.mdp import cube_tray_verdict

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
  controller = make_controller(env, args.policy, device)
  recorder = None
  if args.videos:
    recorder = PoseReplicaRecorder(
      env.sim.mj_model,
      list(range(args.videos)),
      fps=1 / env.step_dt,
      views=(CameraView(**VIDEO_VIEW),),
    )
    recorder.capture(env.sim.data, env.scene.env_origins)

  n = args.num_envs
  # Fixed quota per env: counting episodes in order of completion would let
  # fast (successful) envs crowd out slow ones and bias the success rate.
  quota = torch.full((n,), episodes // n, dtype=torch.long, device=device)
  quota[: episodes % n] += 1
  steps_in_episode = torch.zeros(n, dtype=torch.long, device=device)
  episode_index = torch.zeros(n, dtype=torch.long, device=device)
  overflow_seen = torch.zeros(n, dtype=torch.bool, device=device)
  nonfinite_seen = torch.zeros(n, dtype=torch.bool, device=device)
  results: list[dict] = []
  total_steps = 0
  start = time.perf_counter()
  with tqdm(total=episodes, desc="cube_tray episodes", unit="ep") as bar:
    while len(results) < episodes:
      _, _, terminated, truncated, _ = env.step(controller.act())
      total_steps += 1
      steps_in_episode += 1
      verdict = cube_tray_verdict(env)  # The terminal state's verdict for ended envs.
      health = physics_health(env)
      overflow_seen |= health["contact_overflow"]
      nonfinite_seen |= health["nonfinite"]
      ended = (terminated | truncated).nonzero().flatten()
      # Film each recorded env's first episode; an env that just ended already
      # shows its reset state, so its terminal frame is not filmed.
      if recorder is not None and all(
        int(episode_index[i]) == 0 and i not in ended.tolist() for i in recorder.env_ids
      ):
        recorder.capture(env.sim.data, env.scene.env_origins)
      for i in ended.tolist():
        if episode_index[i] >= quota[i]:
          continue
        success = bool(verdict["success"][i])
        outcome = Outcome(int(verdict["outcome"][i]))
        if outcome == Outcome.IN_PROGRESS:
          outcome_name = "failure"  # Ended (time-out) before success.
        else:
          outcome_name = OUTCOME_NAMES[outcome]
        elapsed = round(int(steps_in_episode[i]) * env.step_dt, 3)
        results.append(
          {
            "env": i,
            "episode": int(episode_index[i]),
            "outcome": outcome_name,
            "reason": None
            if success
            else REASON_NAMES[Reason(int(verdict["reason"][i]))],
            "time_to_success_s": elapsed if success else None,
            **controller_fields(controller, i),
            "contact_overflow": bool(overflow_seen[i]),
            "nonfinite_state": bool(nonfinite_seen[i]),
          }
        )
        bar.update(1)
      if len(ended):
        steps_in_episode[ended] = 0
        overflow_seen[ended] = False
        nonfinite_seen[ended] = False
        episode_index[ended] += 1
        controller.reset(ended)
  wall = time.perf_counter() - start

  outcomes = Counter(r["outcome"] for r in results)
  reasons = Counter(r["reason"] for r in results if r["reason"] is not None)
  times = [
    r["time_to_success_s"] for r in results if r["time_to_success_s"] is not None
  ]
  summary = {
    "episodes": len(results),
    "success_rate": outcomes["success"] / len(results),
    "outcomes": dict(outcomes),
    "failure_reasons": dict(reasons),
    "mean_time_to_success_s": round(sum(times) / len(times), 3) if times else None,
    "episodes_with_contact_overflow": sum(r["contact_overflow"] for r in results),
    "episodes_with_nonfinite_state": sum(r["nonfinite_state"] for r in results),
    "env_steps_per_s": round(total_steps * n / wall, 2),
    "wall_time_s": round(wall, 2),
  }
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

  print(f"\n{'env':>4} {'ep':>3} {'outcome':>13} {'reason':>14} {'t_success':>10}")
  for r in results:
    t = "-" if r["time_to_success_s"] is None else f"{r['time_to_success_s']:.2f}"
    print(
      f"{r['env']:>4} {r['episode']:>3} {r['outcome']:>13} {r['reason'] or '-':>14} {t:>10}"
    )
  print(
    f"\nsuccess {outcomes['success']}/{len(results)} ({summary['success_rate']:.1%}); "
    f"failure reasons {dict(reasons) or '-'}; mean time to success "
    f"{summary['mean_time_to_success_s']} s; {summary['env_steps_per_s']} env steps/s "
    f"on {device} ({engine} engine)."
  )
  for key in ("episodes_with_contact_overflow", "episodes_with_nonfinite_state"):
    if summary[key]:
      print(
        f"WARNING: {summary[key]} episode(s) flagged {key.removeprefix('episodes_with_')}."
      )
  if out_dir is not None:
    if recorder is not None:
      recorder.save_poses(out_dir / "video_poses.npz")
      report["videos"] = [str(p.name) for p in recorder.render(out_dir)]
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out_dir / 'report.json'}")
  controller.close()
  env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
