"""The suite's task registry: each task id to its configuration factory,
its scripted expert, its episode verdict and, for the tasks that record
demonstrations, the settings a demonstration file records (``DemoTask``).
Every tool, the benchmark and the tests look tasks up here
(``TASKS[task_id]``), as ManiSkill's motion-planning solutions table does;
mjlab's own registry (``mjlab_tasks.tasks``) holds the training and play
configurations built from the same factories.

Importing this module is light: factories import mjlab when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg


@dataclass
class EpisodeVerdict:
  """The end of one episode as the task's evaluator sees it."""

  success: bool
  outcome: str
  reason: str


@dataclass
class DemoTask:
  """One task as demonstration collection and replay run it: the settings
  recorded in a file's env_args, its configuration, expert and episode
  verdict."""

  task_id: str
  env_kwargs: dict
  """The configuration that matters (recorded in env_args, rebuilt from it)."""
  make_cfg: Callable[[dict, int], ManagerBasedRlEnvCfg]
  make_expert: Callable[[ManagerBasedRlEnv], object]
  judge: Callable[[ManagerBasedRlEnv, int, bool, bool], EpisodeVerdict]
  """(env, env index, terminated, truncated) at an episode's last step."""
  one_episode_per_build: bool = False
  """BinPick: a reset restores the same pour, so every episode needs a new
  environment (its pour seed); episodes run in waves of num_envs."""
  expert_finished: Callable[[object], torch.Tensor] | None = None
  expert_name: str = ""


def _cube_tray_cfg(**kwargs):
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg

  return cube_tray_env_cfg(**kwargs)


def _bin_pick_cfg(**kwargs):
  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg

  return bin_pick_env_cfg(**kwargs)


def _glass_push_cfg(**kwargs):
  from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

  return glass_push_env_cfg(**kwargs)


def _bin_pick_expert(env):
  from experts.bin_pick.expert import BinPickExpert

  return BinPickExpert(env)


def _cube_tray_expert(env):
  from experts.cube_tray import CubeTrayExpert

  return CubeTrayExpert(env)


def _steps_to_seconds(cfg, steps: int) -> float:
  return steps * cfg.decimation * cfg.sim.mujoco.timestep


def _with_cameras(env_kwargs: dict, cameras: tuple[str, ...]) -> dict:
  """env_kwargs plus the cameras, only when there are any: a state-only
  collection records exactly the env_args it did before cameras existed."""
  return {**env_kwargs, "cameras": list(cameras)} if cameras else env_kwargs


def cube_tray_demo_task(
  max_steps: int | None, cameras: tuple[str, ...] = ()
) -> DemoTask:
  env_kwargs = {
    "play": True,
    "arm_action": "cartesian",
    "randomize": True,
    "max_steps": max_steps or 240,
  }

  def make_cfg(kwargs: dict, num_envs: int):
    cfg = _cube_tray_cfg(
      play=kwargs["play"],
      arm_action=kwargs["arm_action"],
      randomize=kwargs["randomize"],
      num_envs=num_envs,
      cameras=tuple(kwargs.get("cameras", ())),
    )
    cfg.episode_length_s = _steps_to_seconds(cfg, kwargs["max_steps"])
    return cfg

  def judge(env, i: int, terminated: bool, truncated: bool) -> EpisodeVerdict:
    from evaluators.cube_tray import OUTCOME_NAMES, REASON_NAMES, Outcome, Reason
    from mjlab_tasks.common.verdict import task_verdict

    verdict = task_verdict(env)
    success = bool(verdict["success"][i])
    outcome = Outcome(int(verdict["outcome"][i]))
    return EpisodeVerdict(
      success=success,
      # Ended (time-out) before success: a failure, as evaluate_cube_tray says.
      outcome="failure" if outcome == Outcome.IN_PROGRESS else OUTCOME_NAMES[outcome],
      reason="" if success else REASON_NAMES[Reason(int(verdict["reason"][i]))],
    )

  return DemoTask(
    task_id="CubeTray-UR5-RG2",
    env_kwargs=_with_cameras(env_kwargs, cameras),
    make_cfg=make_cfg,
    make_expert=make_cube_tray_expert,
    judge=judge,
    expert_name="experts.cube_tray.CubeTrayExpert (Cartesian actions)",
  )


def make_cube_tray_expert(env):
  """The cube-in-tray expert; it acts in the task's Cartesian action space
  because the environment's arm term is Cartesian (it picks its mode from it)."""
  expert = _cube_tray_expert(env)
  if expert.mode != "cartesian":
    raise ValueError("demonstrations need the task's Cartesian arm actions")
  expert.reset()
  return expert


def bin_pick_demo_task(
  max_steps: int | None,
  objects: int,
  bin_width: float,
  bin_height: float,
  object_seed: int,
  cameras: tuple[str, ...] = (),
  object_set: str = "default",
) -> DemoTask:
  env_kwargs = {
    "play": True,
    "objects": objects,
    "bin_width": bin_width,
    "bin_height": bin_height,
    "object_seed": object_seed,
    "object_set": object_set,
    "max_steps": max_steps or 3600,
  }

  def make_cfg(kwargs: dict, num_envs: int, pour_seed: int = 0):
    cfg = _bin_pick_cfg(
      play=kwargs["play"],
      objects=kwargs["objects"],
      bin_width=kwargs["bin_width"],
      bin_height=kwargs["bin_height"],
      num_envs=num_envs,
      object_seed=kwargs["object_seed"],
      # Files recorded before object sets existed hold the former default,
      # which is the hard set object for object.
      object_set=kwargs.get("object_set", "hard"),
      pour_seed=pour_seed,
      cameras=tuple(kwargs.get("cameras", ())),
    )
    cfg.episode_length_s = _steps_to_seconds(cfg, kwargs["max_steps"])
    return cfg

  def judge(env, i: int, terminated: bool, truncated: bool) -> EpisodeVerdict:
    from evaluators.bin_pick import CONDITIONS, failed_condition
    from mjlab_tasks.bin_pick.env_cfg import pourer
    from mjlab_tasks.common.verdict import task_verdict

    verdict = task_verdict(env)
    names = pourer(env).cfg.names
    first = failed_condition(verdict)[i]
    poured = pourer(env).in_bin[i]
    undelivered = [
      f"{names[k]}:{CONDITIONS[int(first[k])]}"
      for k in range(len(names))
      if bool(poured[k]) and not bool(verdict["delivered"][i, k])
    ]
    success = bool(verdict["bin_cleared"][i])
    if success:
      outcome = "bin_cleared"
    elif truncated:
      outcome = "timeout"
    elif terminated:
      outcome = "physics_reset"  # mjlab ended it otherwise (a NaN state)
    else:
      outcome = "finished"  # The controller stopped: nothing left it can grasp.
    return EpisodeVerdict(success, outcome, " ".join(undelivered))

  return DemoTask(
    task_id="BinPick-UR5-RG2",
    env_kwargs=_with_cameras(env_kwargs, cameras),
    make_cfg=make_cfg,
    make_expert=_bin_pick_expert,
    judge=judge,
    one_episode_per_build=True,
    expert_finished=lambda expert: expert.done,
    expert_name="experts.bin_pick.BinPickExpert",
  )


def demo_task_from_env_args(args: dict) -> DemoTask:
  """The task as a demo file's env_args describe it (for replay)."""
  kwargs = dict(args["env_kwargs"])
  if args["env_name"] == "CubeTray-UR5-RG2":
    task = cube_tray_demo_task(kwargs["max_steps"])
  elif args["env_name"] == "BinPick-UR5-RG2":
    task = bin_pick_demo_task(
      kwargs["max_steps"],
      kwargs["objects"],
      kwargs["bin_width"],
      kwargs["bin_height"],
      kwargs["object_seed"],
    )
  else:
    raise ValueError(f"unknown task {args['env_name']!r}")
  task.env_kwargs = kwargs
  return task


@dataclass(frozen=True)
class Task:
  """One task of the suite."""

  task_id: str
  env_cfg: Callable[..., ManagerBasedRlEnvCfg]
  """The configuration factory (keyword arguments: num_envs, play, ...)."""
  expert: Callable[[ManagerBasedRlEnv], object] | None
  """The scripted privileged expert acting on all environments (None: the
  task's solutions run through its examiner instead)."""
  demo_task: Callable[..., DemoTask] | None = None
  """Demonstration settings to a ``DemoTask`` (None: no demonstrations)."""


TASKS: dict[str, Task] = {
  "CubeTray-UR5-RG2": Task(
    "CubeTray-UR5-RG2",
    _cube_tray_cfg,
    _cube_tray_expert,
    cube_tray_demo_task,
  ),
  "BinPick-UR5-RG2": Task(
    "BinPick-UR5-RG2",
    _bin_pick_cfg,
    _bin_pick_expert,
    bin_pick_demo_task,
  ),
  "GlassPush-UR5-RG2": Task("GlassPush-UR5-RG2", _glass_push_cfg, None, None),
}
DEMO_TASKS = tuple(t for t, task in TASKS.items() if task.demo_task is not None)
