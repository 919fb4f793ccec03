"""Train a behaviour-cloning policy on expert demonstrations (PyTorch, CPU).

Reads a demonstration file in the robomimic layout (``collect_demos.py``,
``merge_demos.py``): each step's actor observation terms ``obs/<term>``,
concatenated in the order the task's environment gives them to a policy,
and the expert's ``actions`` (``expert_actions`` when the file has them:
demonstrations collected with noise injection). Trains an MLP on the demos in ``mask/train``
(observations normalized with the training set's mean and std, stored in the
checkpoint), validates on ``mask/valid``, and writes to a new folder:

  policy.pt      the checkpoint; evaluate_cube_tray.py --policy scores it
  loss.png       training and validation loss per epoch
  summary.json   data, flags, losses, training time

  python scripts/train_bc.py demos/cube_tray.hdf5 --output runs/bc_cube_tray
  python scripts/evaluate_cube_tray.py --policy runs/bc_cube_tray/policy.pt \\
    --engine mujoco --num-envs 32 --episodes 256 --seed 1000

With ``--chunk K`` the network predicts this step's action and the next
K - 1 (action chunking); the policy executes chunks with temporal ensembling
(mjlab_tasks/policies/bc_policy.py, ``BcPolicy``). See docs/demonstrations.md.

Camera images of a file collected with ``--cameras`` (or rendered by
replay_demos.py --render-cameras) are inputs when ``--obs-keys`` names them
(e.g. ``--obs-keys wrist_rgb,joint_pos,joint_vel,tcp_pose,gripper_opening``):
each is downsampled to ``--image-size`` and encoded by a small CNN with a
spatial softmax (``BcImageNet``); the evaluation tools build the
environment with the cameras the checkpoint needs.

With ``--perceive TERMS`` the image policy has two parts instead: the state
policy, trained on the --obs-keys state terms and TERMS, and a perception
network trained to estimate TERMS from the (``--image-crop``-ped) pictures
and the tool pose (mjlab_tasks/policies/bc_perception.py); acting, it reads
the pictures and the --obs-keys terms only:

  python scripts/train_bc.py demos/cube_tray_scene.hdf5 --output runs/bc_scene \
    --obs-keys scene_rgb joint_pos joint_vel tcp_pose gripper_opening target_lead \
    --perceive tcp_to_cube cube_to_goal cube_yaw_to_tool \
    --image-crop 120 80 96 160 --perception-epochs 4 --threads 2
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro
from cli_args import check_at_least, check_file, check_new_folder, fail, parse

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass
class Args:
  demos: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="DEMOS")]
  """Demonstrations in the robomimic layout (collect_demos.py's HDF5 file)."""
  output: Path
  """Folder for policy.pt, loss.png and summary.json; must not exist."""
  epochs: int | None = None
  """Passes over the training demos. Default: the task's preset, which sizes
  them to its gradient steps (CubeTray-UR5-RG2: about 29,100, so 100 epochs
  for 1,000 demonstrations and about 500 for 200), else 100. Every recipe
  flag left unset takes the task's preset, the recipe measured best for it
  (docs/demonstrations.md; CubeTray-UR5-RG2: --batch-size 512 --hidden 512
  512 512 --chunk 8 --quarter-yaw cube_quat --yaw-reference tcp_pose),
  recorded in the checkpoint."""
  batch_size: int | None = None
  """Samples (steps) per gradient step. Default: the task's preset, else 256."""
  lr: float = 1e-3
  """Adam learning rate at the start; cosine decay to 0 over the epochs."""
  hidden: tuple[int, ...] | None = None
  """Width of each hidden layer of the MLP. Default: the task's preset, else
  256 256 256."""
  chunk: int | None = None
  """Actions predicted per observation (1: this step's only). Past an
  episode's end a chunk repeats its last action. Default: the task's preset,
  else 1."""
  obs_keys: tuple[str, ...] | None = None
  """Actor observation terms the network reads. Default: every actor term but
  ``actions`` (the previous action): a network that sees it learns to repeat
  it, because consecutive expert actions nearly agree, and then repeats its
  own early mistakes instead of correcting them (the copycat problem). May
  also name the file's camera image terms (wrist_rgb, wrist_depth,
  scene_rgb): each goes through a CNN encoder."""
  image_size: tuple[int, int] | None = None
  """Height and width camera images are downsampled to (area averaging)
  before the CNN. Default: the --image-crop's size (full resolution), else
  90 160 (the wrist D415's 180 x 320 halved)."""
  image_crop: tuple[int, int, int, int] | None = None
  """TOP LEFT HEIGHT WIDTH: cut every camera image to this box (pixels of
  the recorded image) before downsampling, e.g. 120 80 96 160 for the table
  in front of cube-in-tray's scene camera at full resolution (the cube is
  about 10 pixels there). Default: the whole image."""
  image_shift: int | None = None
  """Random-shift augmentation of camera images in training: each training
  image moves by up to this many pixels (after downsampling) either way,
  edges repeated; 0: none. Not applied when the policy acts. Default: 4,
  or 0 with --perceive (a fixed camera's perception estimates positions
  from where things are in the picture: a shifted picture teaches wrong
  ones)."""
  quarter_yaw: str | None = None
  """An observation term holding a quaternion (w, x, y, z), e.g. cube_quat,
  whose yaw modulo 90 degrees is also fed to the network as sin and cos of 4
  times the yaw: a square cube's grasp yaw repeats every 90 degrees, so the
  expert's turn direction jumps with the raw quaternion. ``none``: no such
  input. Default: the task's preset when its term is among the inputs,
  else none."""
  yaw_reference: str | None = None
  """With --quarter-yaw: a term ending in a quaternion (a 4-value term, or a
  7-value pose, e.g. tcp_pose) whose yaw the --quarter-yaw term's yaw is
  taken relative to: the tool's turn to the cube's nearest face pair, which
  decides the expert's turn direction. ``none``: absolute. Default: with
  the preset's --quarter-yaw, its reference."""
  seed: int = 0
  """Seed of the network's initialization and the batch order."""
  device: str = "cpu"
  """Where to train: cpu, or cuda[:N] when there is one."""
  perceive: tuple[str, ...] | None = None
  """State terms the policy estimates from its camera images instead of
  reading them (e.g. tcp_to_cube cube_to_goal cube_yaw_to_tool): a state
  policy is trained on these and the --obs-keys state terms, then a
  perception network (CNN with spatial softmax, on the --obs-keys images
  and state terms) on the recorded values of these; acting, the policy
  reads only the --obs-keys terms. Needs a camera image in --obs-keys."""
  perception_epochs: int = 5
  """With --perceive: passes of the perception network over the training
  images (the state policy takes the recipe's --epochs)."""
  perception_batch_size: int = 128
  """With --perceive: images per gradient step of the perception network."""
  threads: int = 1
  """Torch threads of an image policy's training (a state MLP always uses
  one): 2 on an otherwise idle 2-core machine trains the CNN faster; on a
  shared CPU a waiting worker thread stalls every step."""


def check_args(args: Args) -> Args:
  """Every flag checked before the file is read; the recipe with the
  file's task preset filled in (``args.preset``: the task and the fields it
  gave, None when it gave none)."""
  check_file(args.demos, "DEMOS")
  with args.demos.open("rb") as f:
    if f.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
      fail(f"DEMOS {args.demos} is not an HDF5 file.")
  check_new_folder(args.output)
  args = with_preset(with_image_defaults(args))
  check_at_least(1, epochs=args.epochs, batch_size=args.batch_size, chunk=args.chunk)
  check_at_least(0, seed=args.seed, image_shift=args.image_shift)
  check_at_least(1, threads=args.threads)
  check_at_least(
    1,
    perception_epochs=args.perception_epochs,
    perception_batch_size=args.perception_batch_size,
  )
  if args.image_crop is not None and (
    min(args.image_crop[:2]) < 0 or min(args.image_crop[2:]) < 16
  ):
    fail(
      "--image-crop takes TOP LEFT (at least 0) HEIGHT WIDTH (at least 16), "
      f"got {args.image_crop}."
    )
  if args.perceive is not None:
    both = sorted(set(args.perceive) & set(args.obs_keys or ()))
    if args.obs_keys is None or both:
      fail(
        "--perceive names terms the policy estimates, so --obs-keys must be "
        "given and must not name them"
        + (f" (both name {', '.join(both)})." if both else ".")
      )
  if not args.lr > 0 or args.lr != args.lr or args.lr == float("inf"):
    fail(f"--lr must be a positive number, got {args.lr}.")
  if not args.hidden or min(args.hidden) < 1:
    fail(f"--hidden takes one or more layer widths of at least 1, got {args.hidden}.")
  if args.yaw_reference is not None and args.quarter_yaw is None:
    fail("--yaw-reference needs --quarter-yaw.")
  if args.obs_keys is not None and len(set(args.obs_keys)) != len(args.obs_keys):
    fail(f"--obs-keys names a term twice: {list(args.obs_keys)}.")
  if min(args.image_size) < 16:
    fail(
      f"--image-size takes a height and width of at least 16, got {args.image_size}."
    )
  if args.device != "cpu":
    from cli_args import check_device

    check_device(args.device)
  return args


def with_image_defaults(args: Args) -> Args:
  """--image-size and --image-shift when unset (their help says which)."""
  import dataclasses

  size = args.image_size
  if size is None:
    size = (90, 160) if args.image_crop is None else tuple(args.image_crop[2:])
  shift = args.image_shift
  if shift is None:
    shift = 0 if args.perceive else 4
  return dataclasses.replace(args, image_size=size, image_shift=shift)


def with_epochs(args: Args, epochs: int) -> Args:
  import dataclasses

  resolved = dataclasses.replace(args, epochs=epochs)
  resolved.preset = args.preset
  return resolved


def with_preset(args: Args) -> Args:
  """Unset recipe flags from the task's preset (mjlab_tasks.policies.bc_training)."""
  import dataclasses

  from mjlab_tasks.policies.bc_training import file_task, resolve_recipe

  try:
    task = file_task(args.demos)
  except OSError:
    task = None  # an unreadable file: reading its data says why
  fields, from_preset = resolve_recipe(args, task)
  resolved = dataclasses.replace(args, **fields)
  resolved.preset = {"task": task, "fields": from_preset} if from_preset else None
  return resolved


def perception_epochs(args: Args) -> str:
  return f" (+ {args.perception_epochs} of perception)" if args.perceive else ""


def format_errors(errors: dict) -> str:
  """The perception's validation errors, in mm and degrees."""
  return ", ".join(
    f"{k[:-4]} {v * 1000:.1f} mm" if k.endswith("_rms") else f"{k[:-4]} {v:.1f} deg"
    for k, v in errors.items()
  )


def main(args: Args) -> int:
  args = check_args(args)
  from mjlab_tasks.policies.bc_training import (
    BcDataError,
    epochs_for,
    load_data,
    policy_checkpoint,
    quarter_yaw_at,
    run_summary,
    train,
    train_images,
    write_run,
  )

  try:
    data = load_data(args)
  except BcDataError as err:
    fail(str(err))
  if args.epochs is None:  # the task's preset: sized to the data
    epochs = epochs_for(args.preset["task"], len(data[5][0]), args.batch_size)
    args = with_epochs(args, epochs)
  _, terms, sizes, action_dim, _, train_set, valid_set, shapes = data
  start = time.perf_counter()
  yaw_at = quarter_yaw_at(args, terms, sizes)
  perceived = None
  if args.perceive:
    from mjlab_tasks.policies.bc_perception import train_perception

    model, history = train(args, train_set, valid_set, sizes, action_dim, yaw_at)
    perceived = train_perception(args, data)
  elif shapes:
    model, history = train_images(
      args, train_set, valid_set, sizes, action_dim, yaw_at, shapes
    )
  else:
    model, history = train(args, train_set, valid_set, sizes, action_dim, yaw_at)
  seconds = time.perf_counter() - start
  summary = run_summary(args, data, yaw_at, history, seconds)
  checkpoint = policy_checkpoint(args, data, yaw_at, model)
  if perceived is not None:
    _, perception_history, errors, fields = perceived
    checkpoint.update(fields)
    summary["perception"] = {"history": perception_history, "valid_errors": errors}
    print(f"perception, validation errors: {format_errors(errors)}")
  write_run(args.output, checkpoint, history, summary)
  valid = summary["final_valid_mse"]
  print(
    f"{train_set[2]} train demos ({len(train_set[0])} steps), {valid_set[2]} valid; "
    f"{args.epochs} epochs{perception_epochs(args)} in {seconds:.1f} s on "
    f"{args.device}: action MSE train "
    f"{history['train'][-1]:.5f}, valid {'-' if valid is None else f'{valid:.5f}'}"
  )
  print(f"wrote {args.output / 'policy.pt'}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
