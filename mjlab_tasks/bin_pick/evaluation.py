"""Batch evaluation of a bin-picking controller (the expert or a trained
policy) on poured bins: the run, its physics watch, per-environment rows,
the summary and the final states. ``scripts/evaluate_binpick.py`` is its
command line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mjlab_tasks.common.verdict import task_verdict

if TYPE_CHECKING:
  import torch

VIDEO_FPS = 4.0
SPEED_OUTLIER = (2.0, 50.0)  # Object linear [m/s] / angular [rad/s] speeds.
# Once every expert has stopped, the run goes on (the arms idle) until every
# poured object is still by the delivery rule's speed limits, for at most
# this long [s]: stopping early must not judge an object that a placement or
# a neighbour set rocking at an instant a run to --max-steps would not.
SETTLE_S = 5.0


TASK = "BinPick-UR5-RG2"
EXPERT = "experts.bin_pick.BinPickExpert (privileged, CPU replica planning)"


def _summary_counts(counter_list) -> dict:
  total: Counter = Counter()
  for c in counter_list:
    total.update(c)
  return dict(total.most_common())


def is_expert(controller) -> bool:
  return not hasattr(controller, "description")  # A trained policy names its file.


def all_done(controller) -> bool:
  """The expert stops when every bin is cleared or nothing is left it can
  grasp; a policy acts until --max-steps."""
  return is_expert(controller) and bool(controller.done.all())


def all_still(env) -> bool:
  """Every poured object is slow by the delivery rule (delivered or not)."""
  from mjlab_tasks.bin_pick import mdp

  slow = task_verdict(env)["slow"]
  return bool((slow | ~mdp.bin_pick_objects(env).poured).all())


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

    from mjlab_tasks.common.mdp import max_penetration, physics_health

    verdict = task_verdict(env)
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


def run(
  env, controller, recorder, max_steps: int, names, progress: Callable | None = None
) -> Watch:
  """Step the controller until ``max_steps``, or until the expert is done and
  the objects still (``SETTLE_S``). ``progress(steps, verdict)`` after each
  step."""
  watch = Watch.empty(env.num_envs)
  video_every = max(1, round(1.0 / (VIDEO_FPS * env.step_dt)))
  settle_steps = round(SETTLE_S / env.step_dt)
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
    if progress is not None:
      progress(watch.steps, task_verdict(env))
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
    last = sum(e["delivery_times_s"][-1] for e in per_env if e["delivery_times_s"])
    summary |= {
      # Simulated time up to each environment's last verified delivery, per
      # verification (an object delivered twice counts twice, a lost one once).
      "mean_time_per_delivery_s": round(last / len(delivery_times), 3)
      if delivery_times
      else None,
      # The same time per object delivered at the end.
      "mean_time_per_delivered_object_s": round(last / total_delivered, 3)
      if delivery_times and total_delivered
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


def expert_files(controller, summary: dict) -> dict:
  """The expert's own logs: its state transitions and planning rejections."""
  n = len(controller.logs)
  return {
    "transitions.json": {str(i): controller.logs[i].transitions for i in range(n)},
    "planning_rejections.json": {
      "by_environment": {str(i): dict(controller.logs[i].rejections) for i in range(n)},
      "total": summary["planning_rejections"],
      "rearrangements_by_environment": {
        str(i): dict(controller.logs[i].push_rejections) for i in range(n)
      },
      "rearrangements_total": summary["rearrangement_rejections"],
    },
  }
