"""Batch evaluation of a cube-in-tray controller (the expert or a trained
policy): episodes run in every environment at once, each scored by the
task's verdict when it ends; a fixed quota per environment, so fast
(successful) environments cannot crowd out slow ones and bias the rate.
``scripts/evaluate_cube_tray.py`` is its command line."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import torch

# The videos' free camera (environment frame): the whole arm, and the cube and
# the tray anywhere in their randomization ranges, fill the picture (checked
# by rendering the ranges' corners; a frame is docs/images/cube_tray_frame.png).
VIDEO_VIEW = dict(
  lookat=(0.36, -0.07, 0.26), distance=1.12, azimuth=160.0, elevation=-33.0
)


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


def episode_row(env, verdict: dict, i: int, steps: int, controller) -> dict:
  """Environment ``i``'s ended episode as a report row (no episode index)."""
  from evaluators.cube_tray import OUTCOME_NAMES, REASON_NAMES, Outcome, Reason

  success = bool(verdict["success"][i])
  outcome = Outcome(int(verdict["outcome"][i]))
  # Ended (time-out) before success: a failure.
  name = "failure" if outcome == Outcome.IN_PROGRESS else OUTCOME_NAMES[outcome]
  elapsed = round(steps * env.step_dt, 3)
  return {
    "env": i,
    "outcome": name,
    "reason": None if success else REASON_NAMES[Reason(int(verdict["reason"][i]))],
    "time_to_success_s": elapsed if success else None,
    **controller_fields(controller, i),
  }


def run_episodes(
  env,
  controller,
  episodes: int,
  recorder=None,
  on_episode: Callable | None = None,
  extra: Callable[[int, int], dict] | None = None,
) -> tuple[list[dict], int, float]:
  """Score ``episodes`` episodes; returns (rows, policy steps, wall seconds).
  ``recorder`` (a ``PoseReplicaRecorder``) films each recorded environment's
  first episode; ``on_episode()`` is called as each is scored; ``extra(env
  index, policy steps of its episode)`` adds fields to its row."""
  from mjlab_tasks.common.mdp import physics_health
  from mjlab_tasks.common.verdict import task_verdict

  n, device = env.num_envs, env.device
  quota = torch.full((n,), episodes // n, dtype=torch.long, device=device)
  quota[: episodes % n] += 1
  steps_in_episode = torch.zeros(n, dtype=torch.long, device=device)
  episode_index = torch.zeros(n, dtype=torch.long, device=device)
  overflow_seen = torch.zeros(n, dtype=torch.bool, device=device)
  nonfinite_seen = torch.zeros(n, dtype=torch.bool, device=device)
  results: list[dict] = []
  total_steps = 0
  start = time.perf_counter()
  while len(results) < episodes:
    _, _, terminated, truncated, _ = env.step(controller.act())
    total_steps += 1
    steps_in_episode += 1
    verdict = task_verdict(env)
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
      row = episode_row(env, verdict, i, int(steps_in_episode[i]), controller)
      row = {"env": i, "episode": int(episode_index[i]), **row}
      row["contact_overflow"] = bool(overflow_seen[i])
      row["nonfinite_state"] = bool(nonfinite_seen[i])
      if extra is not None:
        row |= extra(i, int(steps_in_episode[i]))
      results.append(row)
      if on_episode is not None:
        on_episode()
    if len(ended):
      steps_in_episode[ended] = 0
      overflow_seen[ended] = False
      nonfinite_seen[ended] = False
      episode_index[ended] += 1
      controller.reset(ended)
  return results, total_steps, time.perf_counter() - start


def summarize(results: list[dict], env_steps: int, wall: float) -> dict:
  """The run's summary: success rate, outcomes, failure reasons, speed."""
  outcomes = Counter(r["outcome"] for r in results)
  reasons = Counter(r["reason"] for r in results if r["reason"] is not None)
  times = [
    r["time_to_success_s"] for r in results if r["time_to_success_s"] is not None
  ]
  return {
    "episodes": len(results),
    "success_rate": outcomes["success"] / len(results),
    "outcomes": dict(outcomes),
    "failure_reasons": dict(reasons),
    "mean_time_to_success_s": round(sum(times) / len(times), 3) if times else None,
    "episodes_with_contact_overflow": sum(r["contact_overflow"] for r in results),
    "episodes_with_nonfinite_state": sum(r["nonfinite_state"] for r in results),
    "env_steps_per_s": round(env_steps / wall, 2),
    "wall_time_s": round(wall, 2),
  }
