"""Behaviour-clone a task's PPO actor on demonstrations: the start of RL
from demonstrations.

Fits the task's registered rsl_rl actor (its architecture, its observation
normalizer, every actor term in the environment's order, the previous
action included) to the expert actions of a demonstration file
(``collect_demos.py``), sets the exploration noise PPO starts from, and
writes ``model_0.pt`` (an rsl_rl checkpoint at iteration 0 with a fresh
critic), ``summary.json`` and ``loss.png`` into a new run folder. mjlab's
training resumes from it; ``CriticWarmupPpo`` trains the critic alone for
its first updates:

  python scripts/pretrain_actor.py demos/cube_tray.hdf5 \\
    --output logs/rsl_rl/cube_tray_ur5_rg2/bc_start
  python scripts/train.py CubeTray-UR5-RG2 --engine mujoco --env.scene.num-envs 64 \\
    --agent.resume True --agent.load-run bc_start --agent.load-checkpoint model_0.pt \\
    --agent.algorithm.class-name mjlab_tasks.policies.demo_start:CriticWarmupPpo

With ``--teacher policies/cube_tray_bc/policy.pt`` the start also names a
behaviour-cloning policy: CriticWarmupPpo then imitates its actions on the
PPO actor's own rollout states (kickstarting) instead of the
demonstrations' actions.

See docs/demonstrations.md (RL from demonstrations).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import tyro
from cli_args import check_at_least, check_file, check_new_folder, fail, parse


@dataclass
class Args:
  demos: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="DEMOS")]
  """Demonstrations in the robomimic layout (collect_demos.py's HDF5 file)."""
  output: Path
  """New run folder for model_0.pt, summary.json and loss.png; put it under
  logs/rsl_rl/<experiment>/ so that --agent.load-run finds it."""
  epochs: int = 60
  """Passes over the training demonstrations."""
  batch_size: int = 512
  """Samples (steps) per gradient step."""
  lr: float = 1e-3
  """Adam learning rate at the start; cosine decay to 0."""
  init_std: tuple[float, ...] = (0.2,)
  """The exploration noise (action standard deviation) PPO starts with: one
  value for every action dimension, or one per dimension (cube in tray: six
  arm values, then the gripper's). The registered configuration's 1.0 would
  bury the cloned actions."""
  seed: int = 0
  """Seed of the networks' initial weights and the batch order."""
  teacher: Path | None = None
  """A state behaviour-cloning policy of the task (train_bc.py's policy.pt,
  e.g. policies/cube_tray_bc/policy.pt). CriticWarmupPpo then labels every
  rollout's own states with its actions and imitates them after each PPO
  update (kickstarting), in place of the demonstrations' actions."""
  imitation_floor: float = 0.0
  """The least imitation learning rate after each PPO update, as a fraction
  of its start (3e-4): it decays by 0.995 per update down to this (0: no
  floor; 0.05: 1.5e-5, reached after about 600 updates)."""


def check_args(args: Args) -> Args:
  check_file(args.demos, "DEMOS")
  check_new_folder(args.output)
  check_at_least(1, epochs=args.epochs, batch_size=args.batch_size)
  check_at_least(0, seed=args.seed)
  if not 0.0 <= args.imitation_floor <= 1.0:
    fail(f"--imitation-floor takes a fraction in [0, 1], got {args.imitation_floor}.")
  if args.teacher is not None:
    check_file(args.teacher, "--teacher")
  for name, values in (("lr", (args.lr,)), ("init_std", args.init_std)):
    if not values or not all(0 < v < float("inf") for v in values):
      fail(f"--{name.replace('_', '-')} takes positive numbers, got {values}.")
  return args


def load(args: Args) -> tuple[str, dict]:
  """The file's task and its demonstrations (every actor term)."""
  from mjlab_tasks.demos import DemoFileError, validate_file
  from mjlab_tasks.policies.bc_training import actor_terms
  from mjlab_tasks.policies.demo_start import demo_data

  try:
    env_args = validate_file(args.demos)
  except DemoFileError as err:
    fail(str(err).splitlines()[0])
  try:
    terms = actor_terms(env_args)
    return env_args["env_name"], demo_data(args.demos, terms)
  except KeyError as err:
    fail(f"{args.demos}: lacks actor observation term {err} of its task.")


def write(args: Args, runner, history: dict, summary: dict, imitation: dict) -> None:
  from mjlab_tasks.policies.bc_training import plot
  from mjlab_tasks.policies.demo_start import save_start

  args.output.mkdir(parents=True)
  save_start(runner, args.output / "model_0.pt", args.demos, imitation)
  plot(history, args.output / "loss.png")
  (args.output / "summary.json").write_text(json.dumps(summary, indent=2))


def main(args: Args) -> int:
  args = check_args(args)
  import torch
  from tqdm import tqdm

  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.policies import demo_start

  torch.set_num_threads(1)
  task, data = load(args)
  torch.manual_seed(args.seed)  # the fresh actor's and critic's weights too
  runner = demo_start.build_runner(task)
  actor = runner.alg.get_policy()
  if actor.obs_dim != data["train_obs"].shape[1]:
    fail(
      f"{args.demos}: {data['train_obs'].shape[1]} observation values, the actor reads {actor.obs_dim}."
    )
  teacher = {}
  if args.teacher is not None:
    try:
      teacher = demo_start.teacher_infos(runner.env.unwrapped, task, args.teacher)
    except ValueError as err:
      fail(f"--teacher: {err}")
  try:  # the cloning trains the mean only
    demo_start.set_std(actor, args.init_std)
  except ValueError as err:
    fail(f"--init-std: {err}")
  start = time.perf_counter()
  history = demo_start.pretrain_actor(
    actor, data, args.epochs, args.batch_size, args.lr, args.seed,
    lambda it: tqdm(it, desc="cloning the PPO actor", unit="epoch"),
  )  # fmt: skip
  summary = {
    "task": task,
    "demos": str(args.demos),
    "train_demos": data["train_demos"],
    "train_samples": len(data["train_obs"]),
    "args": {k: str(v) for k, v in asdict(args).items()},
    "train_seconds": round(time.perf_counter() - start, 1),
    "final_train_mse": history["train"][-1],
    "final_valid_mse": history["valid"][-1] if history["valid"] else None,
    "history": history,
    "source": source_snapshot(),
  }
  summary["teacher"] = teacher.get("teacher")
  imitation = {**teacher, "imitation_floor": args.imitation_floor}
  write(args, runner, history, summary, imitation)
  print(
    f"{task}: actor cloned on {data['train_demos']} demos in "
    f"{summary['train_seconds']} s, action MSE valid {summary['final_valid_mse']}; "
    f"wrote {args.output / 'model_0.pt'}"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
