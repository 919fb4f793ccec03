"""Behaviour cloning on demonstration files (the robomimic layout of
``mjlab_tasks.demos``): reading the training and validation splits (state
terms and camera images), the MLP and image-network training loops, and the
run's checkpoint, summary and loss plot. ``scripts/train_bc.py`` is its
command line; ``recipe`` below is any object with that tool's recipe fields
(its ``Args``: epochs, batch_size, lr, hidden, chunk, obs_keys, image_size,
quarter_yaw, yaw_reference, seed, device, demos, output).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

GENERIC_RECIPE = {
  "epochs": 100,
  "batch_size": 256,
  "hidden": (256, 256, 256),
  "chunk": 1,
  "quarter_yaw": None,
  "yaw_reference": None,
}
"""What an unset recipe field is for a task without a preset."""
PRESETS = {
  # docs/demonstrations.md: 97.3 % of 256 unseen episodes from 998
  # demonstrations (100 epochs), 94.5 % from 200 (180 for training, 500
  # epochs); 100 epochs on those 200 gave 34.0 %. What mattered was the
  # number of gradient steps, not of epochs: the preset sizes the epochs to
  # about 29,100 steps (100 epochs of the 998 demonstrations' 291 batches).
  "CubeTray-UR5-RG2": {
    "gradient_steps": 29_100,
    "batch_size": 512,
    "hidden": (512, 512, 512),
    "chunk": 8,
    "quarter_yaw": "cube_quat",
    "yaw_reference": "tcp_pose",
  },
}
"""Each task's best measured recipe: what unset recipe fields take."""
NONE = "none"
"""The value that turns a preset's optional input off (--quarter-yaw none)."""


def file_task(path: Path) -> str | None:
  """The task id a demonstration file records (None: not recorded)."""
  import h5py

  with h5py.File(path, "r") as f:
    data = f.get("data")
    raw = None if data is None else data.attrs.get("env_args")
  try:
    return json.loads(raw)["env_name"] if raw is not None else None
  except (ValueError, KeyError, TypeError):
    return None


def resolve_recipe(recipe, task_id: str | None) -> tuple[dict, list[str]]:
  """The recipe fields (``GENERIC_RECIPE``'s keys) of ``recipe`` with the
  unset ones (None) taken from the task's preset, else the generic recipe;
  ``none`` turns an optional input off. The preset's quarter yaw applies
  only when its term is among the chosen inputs (``obs_keys`` unset or
  naming it): an image policy that does not read the cube's pose gets none.
  Returns (fields, the names taken from the preset)."""
  preset = PRESETS.get(task_id, {})
  inputs = getattr(recipe, "obs_keys", None)
  if inputs is not None and preset.get("quarter_yaw") not in inputs:
    preset = {
      k: v for k, v in preset.items() if k not in ("quarter_yaw", "yaw_reference")
    }
  if getattr(recipe, "quarter_yaw", None) == NONE:
    preset = {k: v for k, v in preset.items() if k != "yaw_reference"}
  fields, from_preset = {}, []
  for name, generic in GENERIC_RECIPE.items():
    value = getattr(recipe, name)
    if name == "epochs" and value is None and "gradient_steps" in preset:
      from_preset.append(name)  # sized to the data: ``epochs_for``
      fields[name] = None
      continue
    if value is None and name in preset:
      value = preset[name]
      from_preset.append(name)
    elif value is None:
      value = generic
    fields[name] = None if value == NONE else value
  return fields, from_preset


def epochs_for(task_id: str | None, samples: int, batch_size: int) -> int:
  """Epochs that make the task preset's gradient steps over ``samples``."""
  per_epoch = -(-samples // batch_size)
  return max(1, round(PRESETS[task_id]["gradient_steps"] / per_epoch))


class BcDataError(ValueError):
  """The demonstration file cannot be trained on (the message says why)."""


# ---------------------------------------------------------------- data


def actor_terms(env_args: dict) -> list[str]:
  """The task's actor observation terms in the order its environment
  concatenates them (what a policy reads at evaluation)."""
  from mjlab_tasks.registry import demo_task_from_env_args

  task = demo_task_from_env_args(env_args)
  cfg = task.make_cfg(task.env_kwargs, 1)
  return list(cfg.observations["actor"].terms)


def labels_key(demo) -> str:
  """The dataset a learner imitates: the expert's own actions when the
  executed ones had noise added (collect_demos.py --action-noise)."""
  return "expert_actions" if "expert_actions" in demo else "actions"


def read_images(demo, out: dict, at: int, size: tuple[int, int], crop=None) -> None:
  """The image terms ``out`` names of one demo, cut to ``crop`` (top, left,
  height, width; None: whole) and downsampled to ``size``, written into
  ``out[term][at:]`` ([N, h, w, C] uint8 RGB, rounded, or float32 depth); a
  block of frames at a time, so the full-size episode is never in memory at
  once, and into arrays allocated once, so the split is never there twice."""
  import numpy as np
  import torch

  from mjlab_tasks.policies import downsample
  from mjlab_tasks.policies.bc_perception import crop_images

  for key, target in out.items():
    dataset = demo["obs"][key]
    for start in range(0, len(dataset), 64):
      block = crop_images(torch.from_numpy(dataset[start : start + 64]), crop)
      small = downsample(block, size).permute(0, 2, 3, 1)
      if dataset.dtype == np.uint8:
        small = small.round()
      target[at + start : at + start + len(small)] = small.numpy()


def image_arrays(f, names: list[str], keys: list[str], size) -> dict:
  """Empty arrays for the image terms of demos ``names``: [N, h, w, C]."""
  import numpy as np

  total = sum(int(f["data"][n].attrs["num_samples"]) for n in names)
  first = f["data"][names[0]]["obs"]
  return {
    k: np.empty(
      (total, *size, first[k].shape[-1]),
      np.uint8 if first[k].dtype == np.uint8 else np.float32,
    )
    for k in keys
  }


def read_split(
  path: Path,
  mask: str,
  terms: list[str],
  chunk: int,
  images: list[str] = (),
  size: tuple[int, int] = (90, 160),
  crop: tuple[int, int, int, int] | None = None,
):
  """(observations [N, D], action chunks [N, chunk, A], demos) of mask/<mask>;
  with image terms, a 4th item: {term: [N, h, w, C]}."""
  import h5py
  import numpy as np

  obs, actions, pictures, at = [], [], {}, 0
  with h5py.File(path, "r") as f:
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["mask"][mask]]
    if images and names:
      pictures = image_arrays(f, names, list(images), size)
    for name in names:
      demo = f["data"][name]
      steps = int(demo.attrs["num_samples"])
      obs.append(
        np.concatenate(
          [demo["obs"][t][()].reshape(steps, -1) for t in terms]
          or [np.zeros((steps, 0), np.float32)],  # Images only.
          axis=1,
        )
      )
      read_images(demo, pictures, at, size, crop)
      at += steps
      # Noise-injected demos: imitate the expert, not the noise it corrected.
      a = demo[labels_key(demo)][()]
      # Chunk k of step t is action t + k, the last one repeated past the end.
      index = np.minimum(np.arange(steps)[:, None] + np.arange(chunk), steps - 1)
      actions.append(a[index])
  if not names:
    return (None, None, 0, None) if images else (None, None, 0)
  out = (
    np.concatenate(obs).astype(np.float32),
    np.concatenate(actions).astype(np.float32),
    len(names),
  )
  if not images:
    return out
  return (*out, pictures)


def load_data(args):
  """The checked file's env_args, term order and sizes, and both splits
  (with image terms: their shapes, and the images as each split's 4th item)."""
  import h5py

  from mjlab_tasks.demos import DemoFileError, is_image, validate_file

  try:
    env_args = validate_file(args.demos)
  except DemoFileError as err:
    raise BcDataError(str(err).splitlines()[0]) from err
  name = env_args.get("env_name")
  if "env_kwargs" not in env_args:
    raise BcDataError(
      f"{args.demos}: env_args lack env_kwargs (the task configuration)."
    )
  try:
    terms = actor_terms(env_args)
  except (KeyError, ValueError) as err:
    raise BcDataError(
      f"{args.demos}: cannot rebuild task {name!r} from env_args ({err})."
    ) from err
  with h5py.File(args.demos, "r") as f:
    if len(f["mask"]["train"]) == 0:
      raise BcDataError(f"{args.demos}: mask/train lists no demos.")
    first = f["data"][f["mask"]["train"][0].decode()]
    keys = sorted(k for k, v in first["obs"].items() if not is_image(v))
    shapes = {k: list(v.shape[1:]) for k, v in first["obs"].items() if is_image(v)}
    if keys != sorted(terms):
      raise BcDataError(
        f"{args.demos}: obs keys {keys} are not {name}'s actor observation "
        f"terms {terms}."
      )
    sizes = [int(first["obs"][t][0].size) for t in terms]
    action_dim = int(first["actions"].shape[1])
    labels = labels_key(first)
  keys, images = chosen_terms(args, terms, sorted(shapes))
  sizes = [sizes[terms.index(k)] for k in keys]
  for flag, term, allowed in (
    ("--quarter-yaw", args.quarter_yaw, (4,)),
    ("--yaw-reference", args.yaw_reference, (4, 7)),
  ):
    if term is not None and (
      term not in keys or sizes[keys.index(term)] not in allowed
    ):
      raise BcDataError(
        f"{flag} {term}: not a {' or '.join(map(str, allowed))}-value term of {keys}."
      )
  terms = keys
  crop = getattr(args, "image_crop", None)
  for key in images if crop is not None else ():
    height, width = shapes[key][:2]
    if crop[0] + crop[2] > height or crop[1] + crop[3] > width:
      raise BcDataError(
        f"--image-crop {' '.join(map(str, crop))}: not inside {key}'s "
        f"{height} x {width} pixels."
      )
  image = (images, args.image_size, crop)
  train = read_split(args.demos, "train", terms, args.chunk, *image)
  valid = read_split(args.demos, "valid", terms, args.chunk, *image)
  shapes = {k: shapes[k] for k in images}
  return env_args, terms, sizes, action_dim, labels, train, valid, shapes


def chosen_terms(
  args, terms: list[str], images: list[str] = ()
) -> tuple[list[str], list[str]]:
  """--obs-keys (default: every term but the previous action) and
  --perceive split into state terms, in the environment's order, and the
  file's image terms."""
  perceive = list(getattr(args, "perceive", None) or [])
  unknown = [k for k in perceive if k not in terms]
  if unknown:
    raise BcDataError(
      f"--perceive {', '.join(unknown)}: not an actor observation term of {terms}."
    )
  if args.obs_keys is None:
    return [t for t in terms if t != "actions"], []
  unknown = [k for k in args.obs_keys if k not in terms and k not in images]
  if unknown:
    known = f"{terms} or the file's camera images {list(images)}" if images else terms
    raise BcDataError(
      f"--obs-keys {', '.join(unknown)}: not an actor observation term of {known}."
    )
  chosen = [k for k in images if k in args.obs_keys]
  if perceive and not chosen:
    raise BcDataError("--perceive needs a camera image term in --obs-keys.")
  wanted = set(args.obs_keys) | set(perceive)
  return [t for t in terms if t in wanted], chosen


# ---------------------------------------------------------------- training


def mse(model, obs, actions, batch: int) -> float:
  import torch

  with torch.no_grad():
    total = 0.0
    for start in range(0, len(obs), batch * 8):
      pred = model(obs[start : start + batch * 8])
      total += float(((pred - actions[start : start + batch * 8]) ** 2).sum())
  return total / actions.numel()


def quarter_yaw_at(args, terms: list[str], sizes: list[int]):
  """Where --quarter-yaw's quaternion and --yaw-reference's start in the
  concatenated observation (a pose's quaternion is its last 4 values)."""

  def end_of(term: str | None) -> int | None:
    if term is None:
      return None
    return sum(sizes[: terms.index(term) + 1]) - 4

  return end_of(args.quarter_yaw), end_of(args.yaw_reference)


def optimization(args, model, samples: int):
  """Adam with cosine decay over every step of the run, and the batch-order
  generator (both trainers)."""
  import torch

  optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
  per_epoch = -(-samples // args.batch_size)
  schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
    optimizer, T_max=args.epochs * per_epoch
  )
  return optimizer, schedule, torch.Generator(device="cpu").manual_seed(args.seed)


def fit(args, model, samples: int, batch_loss, valid_loss, progress) -> dict:
  """The one training loop of the behaviour-cloning trainers: Adam with
  cosine decay (``optimization``) over ``args.epochs`` passes of ``samples``
  in shuffled batches of ``args.batch_size``. ``batch_loss(idx, generator)``
  is a batch's loss (the generator also draws its augmentation);
  ``valid_loss()`` (or None) the validation loss after each epoch;
  ``progress(range)`` wraps the epochs (a bar). Returns the per-epoch
  losses {"train": [...], "valid": [...]}."""
  import torch

  optimizer, schedule, generator = optimization(args, model, samples)
  history = {"train": [], "valid": []}
  bar = progress(range(args.epochs))
  for _ in bar:
    model.train()
    order = torch.randperm(samples, generator=generator)
    total = 0.0
    for start in range(0, samples, args.batch_size):
      idx = order[start : start + args.batch_size]
      loss = batch_loss(idx, generator)
      optimizer.zero_grad(set_to_none=True)
      loss.backward()
      optimizer.step()
      schedule.step()
      total += float(loss.detach()) * len(idx)
    model.eval()
    history["train"].append(total / samples)
    if valid_loss is not None:
      history["valid"].append(valid_loss())
    if hasattr(bar, "set_postfix"):
      bar.set_postfix(
        train=f"{history['train'][-1]:.4f}",
        valid=f"{history['valid'][-1]:.4f}" if history["valid"] else "-",
      )
  return history


def epoch_bar(desc: str):
  """A progress bar over the epochs (``fit``'s ``progress``)."""
  from tqdm import tqdm

  return lambda epochs: tqdm(epochs, desc=desc, unit="epoch")


def train(args, train_set, valid_set, sizes, action_dim, yaw_at=(None, None)):
  """The fitted model and the per-epoch losses."""
  import torch

  from mjlab_tasks.policies import BcMlp

  torch.manual_seed(args.seed)
  # One thread: the batches of a small MLP gain nothing from a second one, and
  # on a shared CPU a waiting worker thread stalls every step.
  torch.set_num_threads(1)
  device = torch.device(args.device)
  obs = torch.from_numpy(train_set[0]).to(device)
  actions = torch.from_numpy(train_set[1]).to(device)
  model = BcMlp(sum(sizes), action_dim, list(args.hidden), args.chunk, *yaw_at)
  model = model.to(device)
  model.obs_mean.copy_(obs.mean(0))
  # A floor keeps near-constant terms (e.g. a resting joint) from blowing up.
  model.obs_std.copy_(obs.std(0).clamp_min(1e-2))
  valid = None
  if valid_set[0] is not None:
    valid = (
      torch.from_numpy(valid_set[0]).to(device),
      torch.from_numpy(valid_set[1]).to(device),
    )

  def batch_loss(idx, _):
    idx = idx.to(device)
    return torch.nn.functional.mse_loss(model(obs[idx]), actions[idx])

  def valid_loss():
    return mse(model, *valid, args.batch_size)

  history = fit(
    args, model, len(obs), batch_loss, valid_loss if valid is not None else None,
    epoch_bar("behaviour cloning"),
  )  # fmt: skip
  return model.cpu(), history


def image_batch(pictures: dict, idx, device) -> dict:
  """The images of samples ``idx`` as float [B, C, h, w] on ``device``."""
  import torch

  return {
    k: torch.from_numpy(v[idx.cpu().numpy()]).to(device).permute(0, 3, 1, 2).float()
    for k, v in pictures.items()
  }


def image_mse(model, data, batch: int, device) -> float:
  import torch

  obs, actions, _, pictures = data
  total = 0.0
  with torch.no_grad():
    for start in range(0, len(obs), batch):
      idx = torch.arange(start, min(start + batch, len(obs)))
      state = torch.from_numpy(obs[idx.numpy()]).to(device)
      pred = model(state, image_batch(pictures, idx, device))
      target = torch.from_numpy(actions[idx.numpy()]).to(device)
      total += float(((pred - target) ** 2).sum())
  return total / actions.size


def train_images(args, train_set, valid_set, sizes, action_dim, yaw_at, shapes):
  """The fitted image model (``BcImageNet``) and the per-epoch losses.

  Images stay uint8 (RGB) in memory and become float per batch: a few
  thousand downsampled frames fit, their float copies would not."""
  import numpy as np
  import torch

  from mjlab_tasks.policies import BcImageNet, random_shift

  torch.manual_seed(args.seed)
  # As train(), one thread unless asked (the CNN gains from a second core on
  # an otherwise idle machine).
  torch.set_num_threads(getattr(args, "threads", 1))
  device = torch.device(args.device)
  keys = list(shapes)
  model = BcImageNet(
    sum(sizes),
    action_dim,
    list(args.hidden),
    args.chunk,
    keys,
    [shapes[k][-1] for k in keys],
    args.image_size,
    *yaw_at,
  ).to(device)
  obs, actions, _, pictures = train_set
  if obs.shape[1]:
    model.obs_mean.copy_(torch.from_numpy(obs.mean(0)))
    model.obs_std.copy_(torch.from_numpy(obs.std(0)).clamp_min(1e-2))
  for key, encoder in model.encoders.items():
    # One scale per image term (e.g. depth in metres, RGB / 255).
    sample = (
      pictures[key][:: max(1, len(obs) // 256)].astype(np.float32) / encoder.scale
    )
    encoder.mean.fill_(float(sample.mean()))
    encoder.std.fill_(max(float(sample.std()), 1e-3))
  target = torch.from_numpy(actions)
  state = torch.from_numpy(obs)

  def batch_loss(idx, generator):
    images = {
      k: random_shift(v, args.image_shift, generator)
      for k, v in image_batch(pictures, idx, device).items()
    }
    pred = model(state[idx].to(device), images)
    return torch.nn.functional.mse_loss(pred, target[idx].to(device))

  def valid_loss():
    return image_mse(model, valid_set, args.batch_size, device)

  history = fit(
    args, model, len(obs), batch_loss,
    valid_loss if valid_set[0] is not None else None,
    epoch_bar("behaviour cloning (images)"),
  )  # fmt: skip
  return model.cpu(), history


def plot(history: dict, path: Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(6, 4))
  epochs = range(1, len(history["train"]) + 1)
  ax.plot(epochs, history["train"], label="train")
  if history["valid"]:
    ax.plot(epochs, history["valid"], label="valid")
  ax.set_yscale("log")
  ax.set_xlabel("epoch")
  ax.set_ylabel("action MSE")
  ax.set_title("behaviour cloning")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def run_summary(args, data, yaw_at, history, seconds: float) -> dict:
  """summary.json: the data, the recipe, the losses, the source."""
  import torch

  from mjlab_tasks.common.runtime import source_snapshot

  env_args, terms, sizes, _, labels, train_set, valid_set, shapes = data
  return {
    "demos": str(args.demos),
    "task": env_args["env_name"],
    "train_demos": train_set[2],
    "train_samples": len(train_set[0]),
    "valid_demos": valid_set[2],
    "valid_samples": 0 if valid_set[0] is None else len(valid_set[0]),
    "obs_terms": terms,
    "obs_sizes": sizes,
    **(
      {"image_terms": list(shapes), "image_size": list(args.image_size)}
      if shapes
      else {}
    ),
    "labels": labels,
    "seed_ranges": env_args.get("seed_ranges"),
    "args": {k: str(v) for k, v in asdict(args).items()},
    "preset": getattr(args, "preset", None),
    "train_seconds": round(seconds, 1),
    "torch_threads": torch.get_num_threads(),
    "final_train_mse": history["train"][-1],
    "final_valid_mse": history["valid"][-1] if history["valid"] else None,
    "history": history,
    "source": source_snapshot(),
  }


def policy_checkpoint(args, data, yaw_at, model) -> dict:
  """policy.pt: what BcPolicy needs to rebuild and run the network."""
  from mjlab_tasks.policies import BC_FORMAT

  env_args, terms, sizes, action_dim, _, _, _, shapes = data
  checkpoint = {
    "format": BC_FORMAT,
    "preset": getattr(args, "preset", None),
    "task": env_args["env_name"],
    "obs_keys": terms,
    "obs_sizes": sizes,
    "action_dim": action_dim,
    "hidden": list(args.hidden),
    "chunk": args.chunk,
    "quarter_yaw_at": yaw_at[0],
    "yaw_reference_at": yaw_at[1],
    "model": model.state_dict(),
    "env_args": json.dumps(env_args, sort_keys=True),
  }
  if shapes:  # Image policies only: state checkpoints keep their keys.
    checkpoint["image_keys"] = list(shapes)
    checkpoint["image_shapes"] = shapes
    checkpoint["image_size"] = list(args.image_size)
    crop = getattr(args, "image_crop", None)
    checkpoint["image_crop"] = None if crop is None else list(crop)
  return checkpoint


def write_run(output: Path, checkpoint: dict, history: dict, summary: dict) -> None:
  """Written beside the output, then renamed: no half-written run folder."""
  import torch

  tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
  try:
    tmp.mkdir(parents=True)
    torch.save(checkpoint, tmp / "policy.pt")
    plot(history, tmp / "loss.png")
    (tmp / "summary.json").write_text(json.dumps(summary, indent=2))
    tmp.rename(output)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
