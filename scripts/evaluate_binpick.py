"""Physics-only evaluation of the bin-picking expert (seed 002).

Pours objects into ``--num-envs`` bins, runs the expert (CPU replica planning,
batched live execution) for at most ``--max-steps`` policy steps (20 Hz), and
scores every object with the task's delivery evaluator.

  python scripts/evaluate_binpick.py --num-envs 4 --objects 12 --max-steps 3600 \\
    --bin-width .14 --bin-height .06 --device cpu --output reports/binpick_expert/new_run

Writes into ``--output`` (refused if it exists): report.json (config, per
environment poured/delivered counts, outcome, failure reasons, summary),
transitions.json, planning_rejections.json, physics_metrics.json,
final_states.json, source_snapshot.json; with ``--videos N`` also one mp4
per environment and camera (scene and wrist D415, Gaussian room
backgrounds) drawn from a read-only pose replica, and video_poses.npz (each
recorded frame's qpos at 4 fps; re-render with scripts/render_poses.py).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_folder,
  check_videos,
  create_folder,
  fail,
  parse,
  prepare_offscreen_gl,
)
from tqdm import tqdm

VIDEO_FPS = 4.0
TABLE = (0.35, 0.15, 0.6, 0.55)  # Table top drawn in videos: centre, half sizes [m].
SPEED_OUTLIER = (2.0, 50.0)  # Object linear [m/s] / angular [rad/s] speeds.
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
  """Policy steps (20 Hz) per environment; an unfinished bin is a timeout."""
  bin_width: float = 0.128
  """Inner bin width [m] (default: the historical 128 mm)."""
  bin_height: float = 0.150
  """Inner wall height [m] (default: the historical 150 mm)."""
  seed: int = 0
  """Seed of the pour (drop positions and orientations)."""
  object_seed: int = 0
  """Seed of the object set (shapes, sizes, densities)."""
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


def _summary_counts(counter_list) -> dict:
  total: Counter = Counter()
  for c in counter_list:
    total.update(c)
  return dict(total.most_common())


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
  if args.videos:
    prepare_offscreen_gl("--videos")
  return device, engine, output


def main(args: Args) -> int:
  device, engine, output = check_args(args)
  out_dir = create_folder(output)

  from mjlab_tasks.common.runtime import quiet_warp, source_snapshot

  quiet_warp()

  import torch

  from evaluators.bin_pick import CONDITIONS
  from experts.bin_pick.expert import STAGE_NAMES, BinPickExpert, Stage
  from mjlab_tasks.bin_pick import mdp
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg, object_bounds, pourer
  from mjlab_tasks.common.c_engine import make_env
  from mjlab_tasks.common.mdp import max_penetration, physics_health

  try:
    cfg = bin_pick_env_cfg(
      play=True,
      objects=args.objects,
      bin_width=args.bin_width,
      bin_height=args.bin_height,
      num_envs=args.num_envs,
      object_seed=args.object_seed,
      pour_seed=args.seed,
    )
  except ValueError as e:
    raise SystemExit(f"error: {e}") from None
  cfg.seed = args.seed
  # The run ends by --max-steps; a cleared bin stays as it is to be reported.
  cfg.episode_length_s = (
    (args.max_steps + 10) * cfg.decimation * cfg.sim.mujoco.timestep
  )
  cfg.terminations[mdp.CLEARED_TERM].params["terminate"] = False
  start = time.perf_counter()
  env = make_env(cfg, device=device, engine=engine)
  env.reset()
  pour = pourer(env)
  expert = BinPickExpert(env)
  n, names = args.num_envs, pour.cfg.names

  recorder = None
  if args.videos:
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
    recorder = PoseReplicaRecorder(
      env.sim.mj_model,
      list(range(args.videos)),
      fps=VIDEO_FPS,
      views=views,
      seed=args.seed,
    )
  video_every = max(1, round(1.0 / (VIDEO_FPS * env.step_dt)))

  penetration = torch.zeros(n)
  deepest_pair = torch.full((n, 2), -1, dtype=torch.long)
  overflow_steps = torch.zeros(n, dtype=torch.long)
  nonfinite_steps = torch.zeros(n, dtype=torch.long)
  outlier_steps = torch.zeros(n, dtype=torch.long)
  resets = torch.zeros(n, dtype=torch.long)
  steps = 0
  with tqdm(total=args.max_steps, desc="bin_pick steps", unit="step") as bar:
    while steps < args.max_steps and not bool(expert.done.all()):
      if recorder is not None and steps % video_every == 0:
        recorder.capture(env.sim.data, env.scene.env_origins)
      _, _, terminated, truncated, _ = env.step(expert.act())
      steps += 1
      health = physics_health(env)
      overflow_steps += health["contact_overflow"].cpu().long()
      nonfinite_steps += health["nonfinite"].cpu().long()
      depth, pair = (t.cpu() for t in max_penetration(env))
      deeper = depth > penetration
      penetration[deeper] = depth[deeper]
      deepest_pair[deeper] = pair[deeper]
      speeds = torch.stack(
        [
          torch.stack(
            [
              env.scene[k].data.root_link_lin_vel_w.norm(dim=-1),
              env.scene[k].data.root_link_ang_vel_w.norm(dim=-1),
            ],
            -1,
          )
          for k in names
        ],
        1,
      ).cpu()  # [B, K, 2]
      outlier = (speeds[..., 0] > SPEED_OUTLIER[0]) | (
        speeds[..., 1] > SPEED_OUTLIER[1]
      )
      outlier_steps += outlier.any(-1).long()
      resets += (terminated | truncated).cpu().long()
      bar.update(1)
      if steps % 20 == 0:
        verdict = mdp.bin_pick_verdict(env)
        bar.set_postfix(
          delivered=f"{int(verdict['delivered_count'].sum())}/{int(verdict['poured_count'].sum())}"
        )
  wall = time.perf_counter() - start
  if recorder is not None:
    recorder.capture(env.sim.data, env.scene.env_origins)

  verdict = mdp.bin_pick_verdict(env)
  state = mdp.read_object_state(env)
  sim_time = steps * env.step_dt
  per_env = []
  for i in range(n):
    log = expert.logs[i]
    poured = int(verdict["poured_count"][i])
    delivered = int(verdict["delivered_count"][i])
    if bool(verdict["bin_cleared"][i]):
      outcome = "bin_cleared"
    elif resets[i] > 0:
      outcome = "physics_reset"
    elif log.outcome == "finished":
      outcome = "finished"
    else:
      outcome = "timeout"
    end_time = log.outcome_time if log.outcome is not None else sim_time
    per_env.append(
      {
        "env": i,
        "poured": poured,
        "delivered": delivered,
        "delivered_fraction": delivered / poured if poured else None,
        "outcome": outcome,
        "expert_stage_at_end": STAGE_NAMES[Stage(int(expert.stage[i]))],
        "end_time_s": round(end_time, 3),
        "delivery_times_s": log.delivery_times,
        "time_per_delivery_s": round(
          log.delivery_times[-1] / len(log.delivery_times), 3
        )
        if log.delivery_times
        else None,
        "failure_reasons": dict(log.failures),
        "plans": log.plans,
        "planned_candidates_checked": log.planned_candidates,
        "planning_wall_s": round(log.planning_wall_s, 3),
        "undelivered_objects": [
          names[k]
          for k in range(len(names))
          if bool(pour.in_bin[i, k]) and not bool(verdict["delivered"][i, k])
        ],
      }
    )
  total_poured = sum(e["poured"] for e in per_env)
  total_delivered = sum(e["delivered"] for e in per_env)
  delivery_times = [t for e in per_env for t in e["delivery_times_s"]]
  outcomes = Counter(e["outcome"] for e in per_env)
  summary = {
    "environments": n,
    "poured": total_poured,
    "delivered": total_delivered,
    "delivered_fraction": total_delivered / total_poured if total_poured else None,
    "outcomes": dict(outcomes),
    "bin_cleared_rate": outcomes["bin_cleared"] / n,
    "finished_rate": outcomes["finished"] / n,
    "timeout_rate": outcomes["timeout"] / n,
    # Simulated time up to each environment's last verified delivery, per delivery.
    "mean_time_per_delivery_s": round(
      sum(e["delivery_times_s"][-1] for e in per_env if e["delivery_times_s"])
      / len(delivery_times),
      3,
    )
    if delivery_times
    else None,
    "failure_reasons": _summary_counts([e["failure_reasons"] for e in per_env]),
    "planning_rejections": _summary_counts([log.rejections for log in expert.logs]),
    "simulated_time_s": round(sim_time, 2),
    "wall_time_s": round(wall, 2),
    "env_steps_per_s": round(steps * n / wall, 2),
  }
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
    "delivery_thresholds": asdict(
      env.termination_manager.get_term_cfg(mdp.CLEARED_TERM).func.thresholds
    ),
    "expert": {k: str(v) for k, v in asdict(expert.cfg).items()},
  }
  report = {
    "task": "BinPick-UR5-RG2",
    "controller": "experts.bin_pick.BinPickExpert (privileged, CPU replica planning)",
    "config": config,
    "summary": summary,
    "environments": per_env,
  }
  files = {
    "report.json": report,
    "transitions.json": {str(i): expert.logs[i].transitions for i in range(n)},
    "planning_rejections.json": {
      "by_environment": {str(i): dict(expert.logs[i].rejections) for i in range(n)},
      "total": summary["planning_rejections"],
    },
    "physics_metrics.json": {
      "max_penetration_m": penetration.tolist(),
      "deepest_contact_geoms": [
        [env.sim.mj_model.geom(int(g)).name for g in p] if p[0] >= 0 else None
        for p in deepest_pair
      ],
      "contact_overflow_steps": overflow_steps.tolist(),
      "nonfinite_steps": nonfinite_steps.tolist(),
      "speed_outlier_steps": outlier_steps.tolist(),
      "speed_outlier_limits": {
        "linear_m_s": SPEED_OUTLIER[0],
        "angular_rad_s": SPEED_OUTLIER[1],
      },
      "episode_resets": resets.tolist(),
    },
    "source_snapshot.json": source_snapshot(),
  }
  bounds = [object_bounds(env, k) for k in names]
  final = {}
  for i in range(n):
    rows = []
    for k, name in enumerate(names):
      data = env.scene[name].data
      desc = pour.cfg.objects[k]
      rows.append(
        {
          "object": name,
          "kind": desc.kind,
          "poured": bool(pour.in_bin[i, k]),
          "position": [round(float(v), 5) for v in state.pos[i, k]],
          "quat_wxyz": [round(float(v), 6) for v in data.root_link_quat_w[i]],
          "bounds_lo": [round(float(v), 5) for v in bounds[k][0][i]],
          "bounds_hi": [round(float(v), 5) for v in bounds[k][1][i]],
          "linear_speed": round(float(state.lin_vel[i, k].norm()), 5),
          "delivered": bool(verdict["delivered"][i, k]),
          **{c: bool(verdict[c][i, k]) for c in CONDITIONS},
        }
      )
    final[str(i)] = rows
  files["final_states.json"] = final
  if recorder is not None:
    recorder.save_poses(out_dir / "video_poses.npz")
    report["videos"] = [p.name for p in recorder.render(out_dir)]
  for name, content in files.items():
    (out_dir / name).write_text(json.dumps(content, indent=2))

  print(f"\n{'env':>4} {'poured':>6} {'delivered':>9} {'outcome':>13}  failures")
  for e in per_env:
    print(
      f"{e['env']:>4} {e['poured']:>6} {e['delivered']:>9} {e['outcome']:>13}  "
      f"{e['failure_reasons'] or '-'}"
    )
  frac = summary["delivered_fraction"]
  print(
    f"\ndelivered {total_delivered}/{total_poured} "
    f"({'-' if frac is None else f'{frac:.1%}'}); bin_cleared {outcomes['bin_cleared']}/{n}; "
    f"time per delivery {summary['mean_time_per_delivery_s']} s; "
    f"{summary['env_steps_per_s']} env steps/s on {device} ({engine} engine)."
  )
  if int(overflow_steps.sum()) or int(nonfinite_steps.sum()):
    print("WARNING: physics problems flagged; see physics_metrics.json.")
  print(f"wrote {out_dir}")
  expert.close()
  env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
