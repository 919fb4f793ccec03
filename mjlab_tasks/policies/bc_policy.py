"""A behaviour-cloning checkpoint (``scripts/train_bc.py``'s ``policy.pt``)
acting in an environment (``BcPolicy``), and what such a checkpoint needs of
the environment (``bc_cameras``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from mjlab_tasks.policies.bc_networks import BcMlp, downsample, image_camera
from mjlab_tasks.policies.bc_perception import crop_images
from mjlab_tasks.policies.trained import _clipped

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

BC_FORMAT = "manipulation-suite/bc-mlp"
BC_ENSEMBLE_DECAY = 0.01
"""Temporal ensembling weight exp(-m * i), i = 0 for the oldest prediction of
a step (ACT's m): close to an even average of every chunk covering it."""


def bc_cameras(path: Path) -> tuple[str, ...]:
  """The cameras a behaviour-cloning checkpoint's image terms need (none for
  a state policy or another kind of file): build the environment with them."""
  ckpt = bc_checkpoint(Path(path)) if Path(path).suffix == ".pt" else None
  if ckpt is None:
    return ()
  from mjlab_tasks.common.cameras import CAMERA_NAMES

  needed = {image_camera(k) for k in ckpt.get("image_keys") or []}
  return tuple(n for n in CAMERA_NAMES if n in needed)


def _check_image_terms(env: ManagerBasedRlEnv, path: Path, ckpt: dict) -> None:
  """ValueError unless the camera group has every image term in its trained
  shape."""
  keys = list(ckpt.get("image_keys") or [])
  if not keys:
    return
  manager = env.observation_manager
  have = {}
  if "camera" in manager.active_terms:
    dims = manager.group_obs_term_dim["camera"]
    have = dict(zip(manager.active_terms["camera"], map(tuple, dims), strict=True))
  for key in keys:
    want = tuple(ckpt["image_shapes"][key])
    if have.get(key) != want:
      found = "none" if key not in have else "x".join(map(str, have[key]))
      raise ValueError(
        f"{path} was trained on camera image {key} "
        f"({'x'.join(map(str, want))}); the environment's is {found} "
        f"(camera terms: {sorted(have) or 'none'})"
      )


def bc_checkpoint(path: Path) -> dict | None:
  """The behaviour-cloning checkpoint in ``path``; None when it is not one
  (an rsl_rl checkpoint, or not a torch file: its own loader says why)."""
  try:
    # weights_only: a BC checkpoint is tensors, numbers and strings only.
    data = torch.load(path, map_location="cpu", weights_only=True)
  except Exception:  # noqa: BLE001 - any unreadable file is not a BC checkpoint
    return None
  if isinstance(data, dict) and data.get("format") == BC_FORMAT:
    return data
  return None


def bc_columns(env: ManagerBasedRlEnv, path: Path, ckpt: dict) -> torch.Tensor:
  """The columns of the environment's actor observation that a checkpoint
  reads, in its order (a subset: e.g. without the previous action).

  Raises:
    ValueError: a term the environment lacks or has in another size.
  """
  manager = env.observation_manager
  terms = list(manager.active_terms["actor"])
  sizes = [int(np.prod(d)) for d in manager.group_obs_term_dim["actor"]]
  missing = [k for k in ckpt["obs_keys"] if k not in terms]
  if missing:
    raise ValueError(
      f"{path} was trained on observation terms {list(ckpt['obs_keys'])}; the "
      f"environment's actor observation has {terms} (no {', '.join(missing)})"
    )
  starts = dict(zip(terms, np.cumsum([0, *sizes[:-1]]).tolist(), strict=True))
  size_of = dict(zip(terms, sizes, strict=True))
  for key, size in zip(ckpt["obs_keys"], ckpt["obs_sizes"], strict=True):
    if size_of[key] != size:
      raise ValueError(
        f"{path} was trained on {key} of size {size}; the environment's has "
        f"{size_of[key]}"
      )
  return torch.cat(
    [torch.arange(starts[k], starts[k] + size_of[k]) for k in ckpt["obs_keys"]]
    or [torch.zeros(0, dtype=torch.long)]  # An image-only policy.
  )


class ChunkEnsemble:
  """ACT's temporal ensembling: each step's action is the weighted mean of
  every chunk predicted for it, per environment, forgotten at its reset."""

  def __init__(self, num_envs: int, chunk: int, act_dim: int, device: str):
    # A prediction added to slot j (j steps ahead) is j steps old when used;
    # ACT weights exp(-m * i), i = k - 1 - j counting from the oldest.
    self._weights = torch.exp(
      -BC_ENSEMBLE_DECAY * torch.arange(chunk - 1, -1, -1, dtype=torch.float32)
    ).to(device)
    self._sum = torch.zeros(num_envs, chunk, act_dim, device=device)
    self._weight = torch.zeros(num_envs, chunk, device=device)

  def step(self, chunk: torch.Tensor) -> torch.Tensor:
    """This step's actions [num_envs, act_dim], given the chunks predicted
    now [num_envs, chunk, act_dim]."""
    self._sum += self._weights[None, :, None] * chunk
    self._weight += self._weights[None, :]
    actions = self._sum[:, 0] / self._weight[:, :1]
    # Shift the pending predictions one step on.
    self._sum = torch.roll(self._sum, -1, dims=1)
    self._weight = torch.roll(self._weight, -1, dims=1)
    self._sum[:, -1] = 0.0
    self._weight[:, -1] = 0.0
    return actions

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """Forget the pending chunks of environments ``env_ids`` (all if None)."""
    ids = slice(None) if env_ids is None else env_ids
    self._sum[ids] = 0.0
    self._weight[ids] = 0.0


class BcPolicy:
  """A behaviour-cloning policy (``scripts/train_bc.py``'s ``policy.pt``).

  It reads the terms it was trained on (by name, in the checkpoint's order)
  from the actor observation the environment gives a policy, and, with
  action chunks, executes them with temporal ensembling (``ChunkEnsemble``).

  Raises:
    ValueError: trained for another task, on an observation term the
      environment lacks or has in another size, or for another action size.
  """

  def __init__(
    self, env: ManagerBasedRlEnv, task_id: str, path: Path, ckpt: dict, device: str
  ):
    if ckpt["task"] != task_id:
      raise ValueError(
        f"{path} is a behaviour-cloning policy for {ckpt['task']}, not {task_id}"
      )
    self._image_keys = list(ckpt.get("image_keys") or [])
    self._image_size = tuple(ckpt.get("image_size") or ())
    crop = ckpt.get("image_crop")
    self._image_crop = None if crop is None else tuple(crop)
    _check_image_terms(env, path, ckpt)
    self._columns = bc_columns(env, path, ckpt).to(device)
    act_dim = int(env.action_manager.total_action_dim)
    if act_dim != ckpt["action_dim"]:
      raise ValueError(
        f"{path} issues {ckpt['action_dim']} actions; the task takes {act_dim}"
      )
    self._env = env
    self._terms = list(env.observation_manager.active_terms["actor"])
    self._model = BcMlp.from_checkpoint(ckpt).to(device)
    self._ensemble = ChunkEnsemble(env.num_envs, self._model.chunk, act_dim, device)
    self.clip = 1.0  # Demonstrations are in [-1, 1].
    self.checkpoint = Path(path)
    self.description = f"behaviour-cloning policy {path}"

  def _observations(self) -> torch.Tensor:
    """The trained terms of the actor observation as recorded in
    demonstrations (obs_buf)."""
    buf = self._env.obs_buf.get("actor")
    if buf is None:  # Before the first reset or step.
      buf = self._env.observation_manager.compute()["actor"]
    if isinstance(buf, dict):
      buf = torch.cat([buf[t].flatten(1) for t in self._terms], dim=-1)
    return buf.float()[:, self._columns]

  def _images(self) -> dict[str, torch.Tensor]:
    """The trained image terms of the camera group, cropped and downsampled."""
    group = self._env.obs_buf.get("camera")
    if group is None:  # Before the first reset or step.
      self._env.sim.sense()
      group = self._env.observation_manager.compute_group("camera")
    return {
      k: downsample(crop_images(group[k], self._image_crop), self._image_size)
      for k in self._image_keys
    }

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    with torch.inference_mode():
      if self._image_keys:
        chunk = self._model(self._observations(), self._images())
      else:
        chunk = self._model(self._observations())
    return _clipped(self._ensemble.step(chunk), self.clip)

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """Forget the pending chunks of environments ``env_ids`` (all if None)."""
    self._ensemble.reset(env_ids)

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""
