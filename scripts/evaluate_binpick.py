"""Physics-only evaluation on the bin-picking task: the expert (seed 002), or
a trained policy (``--policy``).

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
from collections import Counter
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

if TYPE_CHECKING:
  import torch

VIDEO_FPS = 4.0
TABLE = (0.35, 0.15, 0.6, 0.55)  # Table top drawn in videos: centre, half sizes [m].
SPEED_OUTLIER = (2.0, 50.0)  # Object linear [m/s] / angular [rad/s] speeds.
BIN_WIDTH_RANGE = (0.06, 0.4)  # Supported inner bin width and height [m].
BIN_HEIGHT_RANGE = (0.03, 0.3)
# Once every expert has stopped, the run goes on (the arms idle) until every
# poured object is still by the delivery rule's speed limits, for at most
# this long [s]: stopping early must not judge an object that a placement or
# a neighbour set rocking at an instant a run to --max-steps would not.
SETTLE_S = 5.0


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
  if args.policy is not None:
    check_policy(args.policy)
  if args.videos:
    prepare_offscreen_gl("--videos")
  return device, engine, output


TASK = "BinPick-UR5-RG2"
EXPERT = "experts.bin_pick.BinPickExpert (privileged, CPU replica planning)"


def build_env(args: Args, device: str, engine: str):
  """The evaluation environment: the pour as flagged, no reset on clearing."""
  from mjlab_tasks.bin_pick import mdp
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.common.c_engine import make_env
  from mjlab_tasks.common.policy import bc_cameras

  try:
    cfg = bin_pick_env_cfg(
      play=True,
      objects=args.objects,
      bin_width=args.bin_width,
      bin_height=args.bin_height,
      num_envs=args.num_envs,
      object_seed=args.object_seed,
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
  from mjlab_tasks.common.policy import load_policy

  try:
    return load_policy(env, TASK, policy, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])


def is_expert(controller) -> bool:
  return not hasattr(controller, "description")  # A trained policy names its file.


def all_done(controller) -> bool:
  """The expert stops when every bin is cleared or nothing is left it can
  grasp; a policy acts until --max-steps."""
  return is_expert(controller) and bool(controller.done.all())


def all_still(env) -> bool:
  """Every poured object is slow by the delivery rule (delivered or not)."""
  from mjlab_tasks.bin_pick import mdp

  slow = mdp.bin_pick_verdict(env)["slow"]
  return bool((slow | ~mdp.bin_pick_objects(env).poured).all())


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


@dataclass
class Watch:
  """Physics health per environment over the run, the first step at which
  each bin was cleared (the step the task's ``bin_cleared`` termination
  fires when it terminates; -1: never), and the first step at which an
  object was delivered, with the most delivered at once (-1, 0: never)."""

  penetration: torch.Tensor
  deepest_pair: torch.Tensor
  overflow_steps: torch.Tensor
  nonfinite_steps: torch.Tensor
  outlier_steps: torch.Tensor
  resets: torch.Tensor
  first_cleared_step: torch.Tensor
  first_delivery_step: torch.Tensor
  most_delivered: torch.Tensor
  steps: int = 0
  settle_steps: int = 0
  """Steps run after every expert had stopped (see ``SETTLE_S``)."""

  @classmethod
  def empty(cls, n: int) -> Watch:
    import torch

    return cls(
      penetration=torch.zeros(n),
      deepest_pair=torch.full((n, 2), -1, dtype=torch.long),
      overflow_steps=torch.zeros(n, dtype=torch.long),
      nonfinite_steps=torch.zeros(n, dtype=torch.long),
      outlier_steps=torch.zeros(n, dtype=torch.long),
      resets=torch.zeros(n, dtype=torch.long),
      first_cleared_step=torch.full((n,), -1, dtype=torch.long),
      first_delivery_step=torch.full((n,), -1, dtype=torch.long),
      most_delivered=torch.zeros(n, dtype=torch.long),
    )

  def update(self, env, names, terminated, truncated) -> None:
    import torch

    from mjlab_tasks.bin_pick.mdp import bin_pick_verdict
    from mjlab_tasks.common.mdp import max_penetration, physics_health

    verdict = bin_pick_verdict(env)
    cleared = verdict["bin_cleared"].cpu()
    self.first_cleared_step[cleared & (self.first_cleared_step < 0)] = self.steps
    delivered = verdict["delivered_count"].cpu().long()
    self.first_delivery_step[(delivered > 0) & (self.first_delivery_step < 0)] = (
      self.steps
    )
    self.most_delivered = torch.maximum(self.most_delivered, delivered)
    health = physics_health(env)
    self.overflow_steps += health["contact_overflow"].cpu().long()
    self.nonfinite_steps += health["nonfinite"].cpu().long()
    depth, pair = (t.cpu() for t in max_penetration(env))
    deeper = depth > self.penetration
    self.penetration[deeper] = depth[deeper]
    self.deepest_pair[deeper] = pair[deeper]
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
    outlier = (speeds[..., 0] > SPEED_OUTLIER[0]) | (speeds[..., 1] > SPEED_OUTLIER[1])
    self.outlier_steps += outlier.any(-1).long()
    self.resets += (terminated | truncated).cpu().long()

  def metrics(self, env) -> dict:
    return {
      "max_penetration_m": self.penetration.tolist(),
      "deepest_contact_geoms": [
        [env.sim.mj_model.geom(int(g)).name for g in p] if p[0] >= 0 else None
        for p in self.deepest_pair
      ],
      "contact_overflow_steps": self.overflow_steps.tolist(),
      "nonfinite_steps": self.nonfinite_steps.tolist(),
      "speed_outlier_steps": self.outlier_steps.tolist(),
      "speed_outlier_limits": {
        "linear_m_s": SPEED_OUTLIER[0],
        "angular_rad_s": SPEED_OUTLIER[1],
      },
      "episode_resets": self.resets.tolist(),
    }


def run(env, controller, recorder, max_steps: int, names) -> Watch:
  """Step the controller until --max-steps, or until the expert is done and
  the objects still (``SETTLE_S``)."""
  from mjlab_tasks.bin_pick import mdp

  watch = Watch.empty(env.num_envs)
  video_every = max(1, round(1.0 / (VIDEO_FPS * env.step_dt)))
  settle_steps = round(SETTLE_S / env.step_dt)
  with tqdm(total=max_steps, desc="bin_pick steps", unit="step") as bar:
    while watch.steps < max_steps:
      if all_done(controller):
        if all_still(env) or watch.settle_steps >= settle_steps:
          break
        watch.settle_steps += 1
      if recorder is not None and watch.steps % video_every == 0:
        recorder.capture(env.sim.data, env.scene.env_origins)
      _, _, terminated, truncated, _ = env.step(controller.act())
      watch.steps += 1
      watch.update(env, names, terminated, truncated)
      bar.update(1)
      if watch.steps % 20 == 0:
        verdict = mdp.bin_pick_verdict(env)
        bar.set_postfix(
          delivered=f"{int(verdict['delivered_count'].sum())}/{int(verdict['poured_count'].sum())}"
        )
  if recorder is not None:
    recorder.capture(env.sim.data, env.scene.env_origins)
  return watch


def env_rows(env, controller, pour, verdict, watch: Watch, sim_time: float) -> list:
  """Per environment: poured, delivered, outcome (and the expert's record)."""
  names = pour.cfg.names
  rows = []
  for i in range(env.num_envs):
    poured = int(verdict["poured_count"][i])
    delivered = int(verdict["delivered_count"][i])
    log = controller.logs[i] if is_expert(controller) else None
    if bool(verdict["bin_cleared"][i]):
      outcome = "bin_cleared"
    elif watch.resets[i] > 0:
      outcome = "physics_reset"
    elif log is not None and log.outcome is not None:
      # The expert stopped before the step limit: it gave up, or it saw the
      # bin cleared and an object was undelivered again later.
      outcome = "finished"
    else:
      outcome = "timeout"
    undelivered = [
      names[k]
      for k in range(len(names))
      if bool(pour.in_bin[i, k]) and not bool(verdict["delivered"][i, k])
    ]
    row = {
      "env": i,
      "poured": poured,
      "delivered": delivered,
      "delivered_fraction": delivered / poured if poured else None,
      "outcome": outcome,
      # ManiSkill's success_once beside the outcome's success_at_end.
      "cleared_at_s": round(int(watch.first_cleared_step[i]) * env.step_dt, 3)
      if watch.first_cleared_step[i] >= 0
      else None,
      # The first step at which an object was delivered (null: never), and
      # the most delivered at once: a delivery that did not last counts here.
      "first_delivery_at_s": round(int(watch.first_delivery_step[i]) * env.step_dt, 3)
      if watch.first_delivery_step[i] >= 0
      else None,
      "most_delivered_at_once": int(watch.most_delivered[i]),
    }
    if log is None:
      row |= {"end_time_s": round(sim_time, 3), "undelivered_objects": undelivered}
    else:
      row |= expert_row(controller, i, log, sim_time) | {
        "undelivered_objects": undelivered,
        "undelivered_reasons": {
          name: controller.why_undelivered(i, names.index(name)) for name in undelivered
        },
      }
    rows.append(row)
  return rows


def expert_row(expert, i: int, log, sim_time: float) -> dict:
  """The expert's own record of environment i: stage, deliveries, planning."""
  from experts.bin_pick.expert import STAGE_NAMES, Stage

  end_time = log.outcome_time if log.outcome is not None else sim_time
  return {
    "expert_stage_at_end": STAGE_NAMES[Stage(int(expert.stage[i]))],
    "end_time_s": round(end_time, 3),
    "delivery_times_s": log.delivery_times,
    "time_per_delivery_s": round(log.delivery_times[-1] / len(log.delivery_times), 3)
    if log.delivery_times
    else None,
    "failure_reasons": dict(log.failures),
    "rearrangements": log.rearrangements,
    "plans": log.plans,
    "planned_candidates_checked": log.planned_candidates,
    "planning_wall_s": round(log.planning_wall_s, 3),
  }


def summarize(per_env: list, controller, n: int, sim_time, wall, steps) -> dict:
  total_poured = sum(e["poured"] for e in per_env)
  total_delivered = sum(e["delivered"] for e in per_env)
  outcomes = Counter(e["outcome"] for e in per_env)
  summary = {
    "environments": n,
    "poured": total_poured,
    "delivered": total_delivered,
    "delivered_fraction": total_delivered / total_poured if total_poured else None,
    "outcomes": dict(outcomes),
    "bin_cleared_rate": outcomes["bin_cleared"] / n,
    # Cleared at some step (the task's termination and its max-reduced
    # metric), though maybe not at the last one.
    "cleared_at_some_step": sum(e["cleared_at_s"] is not None for e in per_env),
    # Episodes (one per environment) in which at least one object was
    # delivered: at the last step, and at some step.
    "episodes_with_a_delivery": sum(e["delivered"] > 0 for e in per_env),
    "episodes_with_a_delivery_at_some_step": sum(
      e["first_delivery_at_s"] is not None for e in per_env
    ),
    "finished_rate": outcomes["finished"] / n,
    "timeout_rate": outcomes["timeout"] / n,
  }
  if is_expert(controller):
    delivery_times = [t for e in per_env for t in e["delivery_times_s"]]
    summary |= {
      # Simulated time up to each environment's last verified delivery, per delivery.
      "mean_time_per_delivery_s": round(
        sum(e["delivery_times_s"][-1] for e in per_env if e["delivery_times_s"])
        / len(delivery_times),
        3,
      )
      if delivery_times
      else None,
      "failure_reasons": _summary_counts([e["failure_reasons"] for e in per_env]),
      "undelivered_reasons": _summary_counts(
        [Counter(e["undelivered_reasons"].values()) for e in per_env]
      ),
      "planning_rejections": _summary_counts(
        [log.rejections for log in controller.logs]
      ),
      "rearrangements": _summary_counts(
        [
          Counter(f"{m['reason']} {m['kind']}" for m in e["rearrangements"])
          for e in per_env
        ]
      ),
      "rearrangement_rejections": _summary_counts(
        [log.push_rejections for log in controller.logs]
      ),
    }
  return summary | {
    "simulated_time_s": round(sim_time, 2),
    "wall_time_s": round(wall, 2),
    "env_steps_per_s": round(steps * n / wall, 2),
  }


def final_states(env, pour, verdict) -> dict:
  """Every object's final pose, bounds, speed and delivery conditions."""
  from evaluators.bin_pick import CONDITIONS
  from mjlab_tasks.bin_pick import mdp
  from mjlab_tasks.bin_pick.env_cfg import object_bounds

  names = pour.cfg.names
  state = mdp.read_object_state(env)
  bounds = [object_bounds(env, k) for k in names]
  final = {}
  for i in range(env.num_envs):
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
  return final


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
    "delivery_thresholds": asdict(
      env.termination_manager.get_term_cfg(mdp.CLEARED_TERM).func.thresholds
    ),
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


def main(args: Args) -> int:
  device, engine, output = check_args(args)
  out_dir = create_folder(output)

  from mjlab_tasks.common.runtime import quiet_warp, source_snapshot

  quiet_warp()

  from mjlab_tasks.bin_pick import mdp
  from mjlab_tasks.bin_pick.env_cfg import pourer

  start = time.perf_counter()
  env = build_env(args, device, engine)
  controller = make_controller(env, args.policy, device)
  pour = pourer(env)
  recorder = make_recorder(env, args)
  watch = run(env, controller, recorder, args.max_steps, pour.cfg.names)
  wall = time.perf_counter() - start

  verdict = mdp.bin_pick_verdict(env)
  sim_time = watch.steps * env.step_dt
  per_env = env_rows(env, controller, pour, verdict, watch, sim_time)
  n = args.num_envs
  summary = summarize(per_env, controller, n, sim_time, wall, watch.steps)
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
    files["transitions.json"] = {
      str(i): controller.logs[i].transitions for i in range(n)
    }
    files["planning_rejections.json"] = {
      "by_environment": {str(i): dict(controller.logs[i].rejections) for i in range(n)},
      "total": summary["planning_rejections"],
      "rearrangements_by_environment": {
        str(i): dict(controller.logs[i].push_rejections) for i in range(n)
      },
      "rearrangements_total": summary["rearrangement_rejections"],
    }
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
