"""A trained policy acting in an environment the way an expert does.

``load_policy`` opens a policy file by its suffix:

- ``model_N.pt``: an rsl_rl checkpoint written by mjlab's ``train`` (or
  ``scripts/train.py``), loaded as mjlab's ``play`` loads it
  (``CheckpointPolicy``);
- ``policy.pt`` of ``scripts/train_bc.py``: a behaviour-cloning MLP
  (``BcPolicy``), recognised by its content (a ``format`` key), not its name;
- ``*.onnx``: the policy as mjlab's runner exports it
  (``MjlabOnPolicyRunner.export_policy_to_onnx``, here ``export_onnx_policy``
  or ``scripts/play.py --export-onnx``): one input ``obs`` [1, D], the actor's
  observation groups concatenated, the observation normalizer inside; one
  output ``actions``, the deterministic (mean) action (``OnnxPolicy``). Needs
  onnxruntime, the optional ``onnx`` extra.

All offer the experts' interface (``act``, ``reset``, ``close``), so the
evaluation tools score a policy with the same evaluator, report and videos
as an expert. Actions are clipped as the task's runner configuration says.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv
  from mjlab.rl import MjlabOnPolicyRunner

POLICY_SUFFIXES = (".pt", ".onnx")
ONNX_INSTALL = "pip install 'manipulation-suite[onnx]'"


def onnx_runtime_missing() -> str | None:
  """Why ONNX policies cannot run here (None: they can)."""
  if importlib.util.find_spec("onnxruntime") is None:
    return f"ONNX policies need onnxruntime: {ONNX_INSTALL}"
  return None


def policy_file_problem(path: Path) -> str | None:
  """What is wrong with ``path`` as a policy file (None: nothing seen yet)."""
  if not path.is_file():
    return f"{path}: no such file" if not path.exists() else f"{path} is not a file"
  if path.suffix not in POLICY_SUFFIXES:
    return (
      f"{path.name}: a policy is an rsl_rl checkpoint (.pt) or an exported "
      "ONNX policy (.onnx)"
    )
  if path.suffix == ".onnx":
    return onnx_runtime_missing()
  return None


def load_policy(env: ManagerBasedRlEnv, task_id: str, path: Path, device: str):
  """The policy in ``path`` (.pt rsl_rl or behaviour-cloning checkpoint, or
  .onnx export) acting in ``env``.

  Raises:
    ValueError: not a readable policy file, or not one of ``task_id``'s
      policies (its networks or its observation size do not fit).
  """
  path = Path(path)
  problem = policy_file_problem(path)
  if problem is not None:
    raise ValueError(problem)
  if path.suffix == ".onnx":
    return OnnxPolicy(env, task_id, path)
  bc = bc_checkpoint(path)
  if bc is not None:
    return BcPolicy(env, task_id, path, bc, device)
  return CheckpointPolicy(env, task_id, path, device)


def _load_runner(
  env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, device: str
) -> MjlabOnPolicyRunner:
  """The task's runner holding the checkpoint's actor, as mjlab's play builds it."""
  from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
  from mjlab.tasks.registry import load_rl_cfg, load_runner_cls

  import mjlab_tasks.tasks  # noqa: F401 - the registry

  agent_cfg = load_rl_cfg(task_id)
  wrapper = RslRlVecEnvWrapper(env, clip_actions=agent_cfg.clip_actions)
  runner_cls = load_runner_cls(task_id) or MjlabOnPolicyRunner
  runner = runner_cls(wrapper, asdict(agent_cfg), device=device)
  try:
    runner.load(
      str(checkpoint), load_cfg={"actor": True}, strict=True, map_location=device
    )
  except Exception as err:  # noqa: BLE001 - pickle, torch and shape errors alike
    raise ValueError(
      f"{checkpoint} is not a readable {task_id} policy checkpoint "
      f"({type(err).__name__}: {_first_line(err)})"
    ) from err
  return runner


def _first_line(err: Exception) -> str:
  """The error's first line; with torch's "Error(s) in loading state_dict
  for X:" header, its first detail (e.g. which size does not match)."""
  lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
  if len(lines) > 1 and lines[0].endswith(":"):
    return f"{lines[0]} {lines[1]}"
  return lines[0] if lines else ""


def export_onnx_policy(
  env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, output: Path, device: str
) -> Path:
  """Write the checkpoint's policy as ONNX with mjlab's runner export (the
  observation normalizer and the deterministic action inside)."""
  runner = _load_runner(env, task_id, checkpoint, device)
  output = Path(output)
  runner.export_policy_to_onnx(str(output.parent), output.name)
  return output


class CheckpointPolicy:
  """An rsl_rl policy checkpoint (``model_N.pt``) for a registered task.

  Args:
    env: The task's environment, built with the policy's action space
      (Cartesian actions) and observations.
    task_id: The registered task whose runner configuration wrote the
      checkpoint (network sizes, action clipping).
    checkpoint: Path of the checkpoint.
    device: Where the policy runs (the environment's device).

  Raises:
    ValueError: the checkpoint does not fit the task's networks.
  """

  def __init__(
    self, env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, device: str
  ):
    runner = _load_runner(env, task_id, checkpoint, device)
    self._wrapper = runner.env
    self.clip = self._wrapper.clip_actions
    self._policy = runner.get_inference_policy(device=device)
    self.checkpoint = Path(checkpoint)
    self.description = f"policy checkpoint {checkpoint}"

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    with torch.inference_mode():
      actions = self._policy(self._wrapper.get_observations())
    return _clipped(actions, self.clip).clone()

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """The policy is a feed-forward network: nothing to reset."""
    del env_ids

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""


class OnnxPolicy:
  """An ONNX policy exported from one of a registered task's checkpoints.

  Args:
    env: The task's environment (as for ``CheckpointPolicy``).
    task_id: The registered task (its actor observation groups, clipping).
    path: The ``.onnx`` file.

  Raises:
    ValueError: unreadable, or its input or output size does not fit the
      task's observations and actions.
    ImportError: onnxruntime is not installed.
  """

  def __init__(self, env: ManagerBasedRlEnv, task_id: str, path: Path):
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_rl_cfg

    import mjlab_tasks.tasks  # noqa: F401 - the registry

    missing = onnx_runtime_missing()
    if missing is not None:
      raise ImportError(missing)
    import onnxruntime

    agent_cfg = load_rl_cfg(task_id)
    self.clip = agent_cfg.clip_actions
    self._groups = agent_cfg.obs_groups["actor"]
    self._wrapper = RslRlVecEnvWrapper(env, clip_actions=self.clip)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # Errors only.
    try:
      self._session = onnxruntime.InferenceSession(
        str(path), options, providers=["CPUExecutionProvider"]
      )
    except Exception as err:  # noqa: BLE001 - onnxruntime's own error types
      raise ValueError(
        f"{path} is not a readable ONNX policy ({type(err).__name__}: "
        f"{_first_line(err)})"
      ) from err
    self._input = self._session.get_inputs()[0]
    self._check_sizes(env, task_id, path)
    self.checkpoint = Path(path)
    self.description = f"ONNX policy {path}"

  def _check_sizes(self, env: ManagerBasedRlEnv, task_id: str, path: Path) -> None:
    obs_dim = self._observations().shape[1]
    in_dim = self._input.shape[-1]
    out_dim = self._session.get_outputs()[0].shape[-1]
    act_dim = env.action_manager.total_action_dim
    if (in_dim, out_dim) != (obs_dim, act_dim):
      raise ValueError(
        f"{path} is not a {task_id} policy: it maps {in_dim} observations to "
        f"{out_dim} actions, the task has {obs_dim} and {act_dim}"
      )

  def _observations(self) -> np.ndarray:
    obs = self._wrapper.get_observations()
    flat = torch.cat([obs[g] for g in self._groups], dim=-1)
    return flat.detach().cpu().numpy().astype(np.float32)

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    obs = self._observations()
    # mjlab exports a fixed batch of one (no dynamic axes): one row per run.
    rows = obs[:, None] if self._input.shape[0] == 1 else obs[None]
    actions = np.concatenate(
      [self._session.run(None, {self._input.name: r})[0] for r in rows]
    )
    tensor = torch.from_numpy(actions).to(self._wrapper.device)
    return _clipped(tensor, self.clip)

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """The policy is a feed-forward network: nothing to reset."""
    del env_ids

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""


def _clipped(actions: torch.Tensor, clip: float | None) -> torch.Tensor:
  return actions if clip is None else actions.clamp(-clip, clip)


# Behaviour cloning (scripts/train_bc.py).

BC_FORMAT = "manipulation-suite/bc-mlp"
BC_ENSEMBLE_DECAY = 0.01
"""Temporal ensembling weight exp(-m * i), i = 0 for the oldest prediction of
a step (ACT's m): close to an even average of every chunk covering it."""


def _yaw(quat: torch.Tensor) -> torch.Tensor:
  """Heading of a (w, x, y, z) quaternion's x axis about world z."""
  w, x, y, z = quat.unbind(-1)
  return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def quarter_yaw(
  obs: torch.Tensor, at: int, reference_at: int | None = None
) -> torch.Tensor:
  """sin and cos of 4 yaw of the quaternion (w, x, y, z) at ``obs[:, at:at+4]``:
  a square face's yaw modulo 90 degrees, continuous where the yaw wraps. With
  ``reference_at``, the yaw relative to the quaternion there (e.g. the cube's
  yaw from the tool's: the wrist's turn to a face pair)."""
  yaw = _yaw(obs[:, at : at + 4])
  if reference_at is not None:
    yaw = yaw - _yaw(obs[:, reference_at : reference_at + 4])
  return torch.stack([torch.sin(4 * yaw), torch.cos(4 * yaw)], dim=-1)


class BcMlp(torch.nn.Module):
  """Observation normalization, then an MLP to a chunk of ``chunk`` actions.

  Args:
    obs_dim: Size of the concatenated actor observation.
    action_dim: Size of one action.
    hidden: Width of each hidden layer.
    chunk: Actions predicted per observation (this step and the next ones).
    quarter_yaw_at: Where a quaternion term starts in the observation whose
      yaw modulo 90 degrees is also fed in (``quarter_yaw``); None: not.
    yaw_reference_at: Where the quaternion starts whose yaw that one is taken
      relative to; None: absolute.
  """

  def __init__(
    self,
    obs_dim: int,
    action_dim: int,
    hidden: list[int],
    chunk: int,
    quarter_yaw_at: int | None = None,
    yaw_reference_at: int | None = None,
  ):
    super().__init__()
    self.action_dim, self.chunk = action_dim, chunk
    self.quarter_yaw_at, self.yaw_reference_at = quarter_yaw_at, yaw_reference_at
    self.register_buffer("obs_mean", torch.zeros(obs_dim))
    self.register_buffer("obs_std", torch.ones(obs_dim))
    layers, width = [], obs_dim + (0 if quarter_yaw_at is None else 2)
    for size in hidden:
      layers += [torch.nn.Linear(width, size), torch.nn.ELU()]
      width = size
    layers.append(torch.nn.Linear(width, action_dim * chunk))
    self.net = torch.nn.Sequential(*layers)

  def forward(self, obs: torch.Tensor) -> torch.Tensor:
    """Actions [B, chunk, action_dim] for raw observations [B, obs_dim]."""
    x = (obs - self.obs_mean) / self.obs_std
    if self.quarter_yaw_at is not None:
      yaw = quarter_yaw(obs, self.quarter_yaw_at, self.yaw_reference_at)
      x = torch.cat([x, yaw], dim=-1)
    out = self.net(x)
    return out.view(-1, self.chunk, self.action_dim)

  @classmethod
  def from_checkpoint(cls, ckpt: dict) -> BcMlp:
    if ckpt.get("image_keys"):
      model = BcImageNet.from_config(ckpt)
    else:
      model = cls(
        sum(ckpt["obs_sizes"]),
        ckpt["action_dim"],
        list(ckpt["hidden"]),
        ckpt["chunk"],
        ckpt.get("quarter_yaw_at"),
        ckpt.get("yaw_reference_at"),
      )
    model.load_state_dict(ckpt["model"])
    return model.eval()


def image_camera(term: str) -> str:
  """The camera an image term comes from: wrist_rgb, wrist_depth -> wrist."""
  return term.split("_", 1)[0]


def downsample(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
  """Images [B, H, W, C] (uint8 or float) to float [B, C, h, w] by area
  averaging (an exact mean of whole pixels when h and w divide H and W)."""
  x = images.permute(0, 3, 1, 2).float()
  if tuple(x.shape[-2:]) == tuple(size):
    return x
  return torch.nn.functional.adaptive_avg_pool2d(x, size)


class SpatialSoftmax(torch.nn.Module):
  """Feature maps [B, C, h, w] to the expected image coordinates (x, y) in
  [-1, 1] of each channel's softmax [B, 2C]: where things are, the cue a
  manipulation policy needs (Levine et al. 2016; robomimic's encoder)."""

  def __init__(self, height: int, width: int):
    super().__init__()
    ys, xs = torch.meshgrid(
      torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij"
    )
    self.register_buffer("grid", torch.stack([xs.flatten(), ys.flatten()], dim=-1))

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    weights = torch.softmax(x.flatten(2), dim=-1)  # [B, C, h*w]
    return (weights @ self.grid).flatten(1)  # [B, 2C]


class ImageEncoder(torch.nn.Module):
  """A small CNN: three strided convolutions, then a spatial softmax.

  Args:
    channels: Input channels (3 RGB, 1 depth).
    size: Input (h, w) after downsampling.
    scale: Divides the raw pixels first (255 for RGB).
  """

  WIDTHS = (16, 32, 32)

  def __init__(self, channels: int, size: tuple[int, int], scale: float = 1.0):
    super().__init__()
    self.register_buffer("mean", torch.zeros(()))
    self.register_buffer("std", torch.ones(()))
    self.scale = scale
    layers, width = [], channels
    for out, kernel in zip(self.WIDTHS, (5, 3, 3), strict=True):
      layers += [torch.nn.Conv2d(width, out, kernel, stride=2), torch.nn.ELU()]
      width = out
    self.conv = torch.nn.Sequential(*layers)
    with torch.no_grad():
      h, w = self.conv(torch.zeros(1, channels, *size)).shape[-2:]
    self.pool = SpatialSoftmax(h, w)
    self.out_dim = 2 * width

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    """Features [B, out_dim] of downsampled images [B, C, h, w]."""
    return self.pool(self.conv((x / self.scale - self.mean) / self.std))


class BcImageNet(torch.nn.Module):
  """Behaviour cloning on images and state: one ``ImageEncoder`` per image
  term, their features and the normalized state terms (``BcMlp``'s
  normalization and optional quarter yaw) into an MLP to a chunk of actions.

  Args:
    obs_dim: Size of the concatenated state terms (may be 0).
    action_dim, hidden, chunk, quarter_yaw_at, yaw_reference_at: As
      ``BcMlp``'s.
    image_keys: The image terms, in the order they are encoded.
    image_channels: Channels of each.
    image_size: (h, w) every image is downsampled to.
  """

  def __init__(
    self,
    obs_dim: int,
    action_dim: int,
    hidden: list[int],
    chunk: int,
    image_keys: list[str],
    image_channels: list[int],
    image_size: tuple[int, int],
    quarter_yaw_at: int | None = None,
    yaw_reference_at: int | None = None,
  ):
    super().__init__()
    self.action_dim, self.chunk = action_dim, chunk
    self.quarter_yaw_at, self.yaw_reference_at = quarter_yaw_at, yaw_reference_at
    self.image_keys, self.image_size = list(image_keys), tuple(image_size)
    self.register_buffer("obs_mean", torch.zeros(obs_dim))
    self.register_buffer("obs_std", torch.ones(obs_dim))
    self.encoders = torch.nn.ModuleDict(
      {
        key: ImageEncoder(c, self.image_size, 255.0 if c == 3 else 1.0)
        for key, c in zip(image_keys, image_channels, strict=True)
      }
    )
    width = obs_dim + (0 if quarter_yaw_at is None else 2)
    width += sum(e.out_dim for e in self.encoders.values())
    layers = []
    for size in hidden:
      layers += [torch.nn.Linear(width, size), torch.nn.ELU()]
      width = size
    layers.append(torch.nn.Linear(width, action_dim * chunk))
    self.net = torch.nn.Sequential(*layers)

  @classmethod
  def from_config(cls, ckpt: dict) -> BcImageNet:
    shapes = ckpt["image_shapes"]
    return cls(
      sum(ckpt["obs_sizes"]),
      ckpt["action_dim"],
      list(ckpt["hidden"]),
      ckpt["chunk"],
      list(ckpt["image_keys"]),
      [int(shapes[k][-1]) for k in ckpt["image_keys"]],
      tuple(ckpt["image_size"]),
      ckpt.get("quarter_yaw_at"),
      ckpt.get("yaw_reference_at"),
    )

  def forward(self, obs: torch.Tensor, images: dict[str, torch.Tensor]) -> torch.Tensor:
    """Actions [B, chunk, action_dim] for raw state terms [B, obs_dim] and
    images {term: [B, C, h, w]} already downsampled (``downsample``)."""
    parts = [(obs - self.obs_mean) / self.obs_std]
    if self.quarter_yaw_at is not None:
      parts.append(quarter_yaw(obs, self.quarter_yaw_at, self.yaw_reference_at))
    parts += [self.encoders[k](images[k]) for k in self.image_keys]
    out = self.net(torch.cat(parts, dim=-1))
    return out.view(-1, self.chunk, self.action_dim)


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


class BcPolicy:
  """A behaviour-cloning policy (``scripts/train_bc.py``'s ``policy.pt``).

  It reads the terms it was trained on (by name, in the checkpoint's order)
  from the actor observation the environment gives a policy, and, with
  action chunks, executes them with temporal ensembling: each step's action
  is the weighted mean of every chunk predicted for it, per environment,
  forgotten at its reset.

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
    manager = env.observation_manager
    self._image_keys = list(ckpt.get("image_keys") or [])
    self._image_size = tuple(ckpt.get("image_size") or ())
    _check_image_terms(env, path, ckpt)
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
    # The trained terms' columns of the environment's actor observation, in
    # the checkpoint's order (a subset: e.g. without the previous action).
    self._columns = torch.cat(
      [torch.arange(starts[k], starts[k] + size_of[k]) for k in ckpt["obs_keys"]]
      or [torch.zeros(0, dtype=torch.long)]  # An image-only policy.
    ).to(device)
    act_dim = int(env.action_manager.total_action_dim)
    if act_dim != ckpt["action_dim"]:
      raise ValueError(
        f"{path} issues {ckpt['action_dim']} actions; the task takes {act_dim}"
      )
    self._env = env
    self._terms = terms
    self._model = BcMlp.from_checkpoint(ckpt).to(device)
    k = self._model.chunk
    # A prediction added to slot j (j steps ahead) is j steps old when used;
    # ACT weights exp(-m * i), i = k - 1 - j counting from the oldest.
    self._weights = torch.exp(
      -BC_ENSEMBLE_DECAY * torch.arange(k - 1, -1, -1, dtype=torch.float32)
    ).to(device)
    self._sum = torch.zeros(env.num_envs, k, act_dim, device=device)
    self._weight = torch.zeros(env.num_envs, k, device=device)
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
    """The trained image terms of the camera group, downsampled."""
    group = self._env.obs_buf.get("camera")
    if group is None:  # Before the first reset or step.
      self._env.sim.sense()
      group = self._env.observation_manager.compute_group("camera")
    return {k: downsample(group[k], self._image_size) for k in self._image_keys}

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    with torch.inference_mode():
      if self._image_keys:
        chunk = self._model(self._observations(), self._images())
      else:
        chunk = self._model(self._observations())
    self._sum += self._weights[None, :, None] * chunk
    self._weight += self._weights[None, :]
    actions = self._sum[:, 0] / self._weight[:, :1]
    # Shift the pending predictions one step on.
    self._sum = torch.roll(self._sum, -1, dims=1)
    self._weight = torch.roll(self._weight, -1, dims=1)
    self._sum[:, -1] = 0.0
    self._weight[:, -1] = 0.0
    return _clipped(actions, self.clip)

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """Forget the pending chunks of environments ``env_ids`` (all if None)."""
    ids = slice(None) if env_ids is None else env_ids
    self._sum[ids] = 0.0
    self._weight[ids] = 0.0

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""
