"""An image policy in two parts (``scripts/train_bc.py --perceive``): a
perception network that estimates some state terms (e.g. the cube's and the
tray's positions relative to the tool) from camera images and the state terms
the policy is given, and a state ``BcMlp`` that acts on the given terms and
those estimates. Both are trained on the demonstrations, the perception on
the recorded values of the terms it estimates (labels at training time
only); acting, the policy reads the images and the given terms, never the
estimated ones."""

from __future__ import annotations

import torch

from mjlab_tasks.policies.bc_networks import (
  BcMlp,
  ImageEncoder,
  elu_mlp,
  quarter_yaw,
)

QUARTER_TURN_TERMS = ("cube_yaw_to_tool",)
"""Terms that are an angle modulo a quarter turn, in [-pi/4, pi/4): a square
face's turn. Estimated as sin and cos of 4 times the angle, so that an
estimate near the wrap picks one side instead of averaging both to 0."""
PERCEPTION_STATE = ("tcp_pose",)
"""The given terms the perception reads besides the images: the tool's pose,
which the estimated vectors are relative to. Not the joints, velocities or
the gripper: a perception that reads where the arm is heading learns to
follow the arm (causal confusion) rather than to look."""
PERCEPTION_STRIDES = (2, 2, 1)
"""The perception encoder keeps twice ``ImageEncoder``'s resolution in its
last feature map: its spatial softmax locates a 10-pixel cube, not a region."""


def crop_images(images: torch.Tensor, box: tuple[int, int, int, int] | None):
  """Images [B, H, W, C] cut to ``box`` (top, left, height, width); None:
  as they are."""
  if box is None:
    return images
  top, left, height, width = box
  return images[:, top : top + height, left : left + width]


class Perception(torch.nn.Module):
  """Camera images and given state terms to estimates of other state terms.

  Args:
    given_dim: Size of the given state terms (may be 0).
    out_sizes: Size of each estimated term.
    quarter_turn: For each estimated term, whether it is a quarter-turn
      angle (``QUARTER_TURN_TERMS``).
    hidden: Width of each hidden layer of the head.
    image_keys, image_channels, image_size: As ``BcImageNet``'s.
    yaw_reference_at: Where a quaternion starts in the given terms whose
      quarter yaw is also fed in (the tool's: a face's turn relative to it).
  """

  def __init__(
    self,
    given_dim: int,
    out_sizes: list[int],
    quarter_turn: list[bool],
    hidden: list[int],
    image_keys: list[str],
    image_channels: list[int],
    image_size: tuple[int, int],
    yaw_reference_at: int | None = None,
  ):
    super().__init__()
    self.out_sizes, self.quarter_turn = list(out_sizes), list(quarter_turn)
    self.image_keys, self.image_size = list(image_keys), tuple(image_size)
    self.yaw_reference_at = yaw_reference_at
    self.register_buffer("obs_mean", torch.zeros(given_dim))
    self.register_buffer("obs_std", torch.ones(given_dim))
    out_dim = sum(out_sizes)
    self.register_buffer("target_mean", torch.zeros(out_dim))
    self.register_buffer("target_std", torch.ones(out_dim))
    self.encoders = torch.nn.ModuleDict(
      {
        key: ImageEncoder(
          c, self.image_size, 255.0 if c == 3 else 1.0, PERCEPTION_STRIDES
        )
        for key, c in zip(image_keys, image_channels, strict=True)
      }
    )
    width = given_dim + (0 if yaw_reference_at is None else 2)
    width += sum(e.out_dim for e in self.encoders.values())
    head = sum(2 if q else s for s, q in zip(out_sizes, quarter_turn, strict=True))
    self.net = elu_mlp(width, hidden, head)

  def features(self, obs: torch.Tensor, images: dict) -> torch.Tensor:
    """The head's raw output [B, head]: normalized estimates, and sin, cos
    of 4 times each quarter-turn angle."""
    parts = [(obs - self.obs_mean) / self.obs_std]
    if self.yaw_reference_at is not None:
      parts.append(quarter_yaw(obs, self.yaw_reference_at))
    parts += [self.encoders[k](images[k]) for k in self.image_keys]
    return self.net(torch.cat(parts, dim=-1))

  def targets(self, values: torch.Tensor) -> torch.Tensor:
    """What ``features`` is trained toward for recorded term values [B, out]."""
    parts, at = [], 0
    for size, quarter in zip(self.out_sizes, self.quarter_turn, strict=True):
      v = values[:, at : at + size]
      if quarter:
        parts += [torch.sin(4 * v), torch.cos(4 * v)]
      else:
        mean, std = self.target_mean[at : at + size], self.target_std[at : at + size]
        parts.append((v - mean) / std)
      at += size
    return torch.cat(parts, dim=-1)

  def decode(self, features: torch.Tensor) -> torch.Tensor:
    """Term values [B, out] from the head's output."""
    parts, at, col = [], 0, 0
    for size, quarter in zip(self.out_sizes, self.quarter_turn, strict=True):
      if quarter:
        sin, cos = features[:, col : col + 1], features[:, col + 1 : col + 2]
        parts.append(torch.atan2(sin, cos) / 4)
        col += 2
      else:
        mean, std = self.target_mean[at : at + size], self.target_std[at : at + size]
        parts.append(features[:, col : col + size] * std + mean)
        col += size
      at += size
    return torch.cat(parts, dim=-1)

  def forward(self, obs: torch.Tensor, images: dict) -> torch.Tensor:
    """Estimated term values [B, out] for given terms [B, given_dim] and
    images {term: [B, C, h, w]} already cropped and downsampled."""
    return self.decode(self.features(obs, images))


class PerceivingBc(torch.nn.Module):
  """The two parts acting together: the given terms and the perception's
  estimates, put back in the order the actor was trained on, into the actor.

  Args:
    actor: The state policy, on every term (given and estimated).
    perception: Estimates the terms the policy is not given.
    given_at: The actor-input columns of the given terms, in their order.
    perceived_at: The actor-input columns of the estimated terms.
    seen_at: The columns of the given terms that the perception reads.
  """

  def __init__(
    self,
    actor: BcMlp,
    perception: Perception,
    given_at: torch.Tensor,
    perceived_at: torch.Tensor,
    seen_at: torch.Tensor,
  ):
    super().__init__()
    self.actor, self.perception = actor, perception
    self.chunk, self.action_dim = actor.chunk, actor.action_dim
    self.register_buffer("given_at", given_at.long())
    self.register_buffer("perceived_at", perceived_at.long())
    self.register_buffer("seen_at", seen_at.long())

  def forward(self, obs: torch.Tensor, images: dict) -> torch.Tensor:
    """Actions [B, chunk, action_dim] (``BcImageNet``'s interface)."""
    full = obs.new_zeros(len(obs), len(self.given_at) + len(self.perceived_at))
    full[:, self.given_at] = obs
    full[:, self.perceived_at] = self.perception(obs[:, self.seen_at], images)
    return self.actor(full)

  @classmethod
  def from_checkpoint(cls, ckpt: dict) -> PerceivingBc:
    actor = BcMlp(
      sum(ckpt["actor_sizes"]),
      ckpt["action_dim"],
      list(ckpt["hidden"]),
      ckpt["chunk"],
      ckpt.get("quarter_yaw_at"),
      ckpt.get("yaw_reference_at"),
    )
    actor.load_state_dict(ckpt["model"])
    shapes = ckpt["image_shapes"]
    seen_at = seen_columns(ckpt["obs_keys"], ckpt["obs_sizes"])
    perception = Perception(
      len(seen_at),
      [ckpt["actor_sizes"][ckpt["actor_keys"].index(k)] for k in ckpt["perceive"]],
      [k in QUARTER_TURN_TERMS for k in ckpt["perceive"]],
      list(ckpt["perception_hidden"]),
      list(ckpt["image_keys"]),
      [int(shapes[k][-1]) for k in ckpt["image_keys"]],
      tuple(ckpt["image_size"]),
      ckpt.get("perception_yaw_reference_at"),
    )
    perception.load_state_dict(ckpt["perception"])
    given_at, perceived_at = actor_columns(
      ckpt["actor_keys"], ckpt["actor_sizes"], ckpt["perceive"]
    )
    return cls(actor, perception, given_at, perceived_at, seen_at).eval()


def actor_columns(
  keys: list[str], sizes: list[int], perceive: list[str]
) -> tuple[torch.Tensor, torch.Tensor]:
  """The actor-input columns of the given terms (every one not in
  ``perceive``) and of the perceived ones, each in ``keys``' order."""
  starts = torch.cumsum(torch.tensor([0, *sizes[:-1]]), 0).tolist()
  given, perceived = [], []
  for key, start, size in zip(keys, starts, sizes, strict=True):
    (perceived if key in perceive else given).append(torch.arange(start, start + size))
  empty = torch.zeros(0, dtype=torch.long)
  return torch.cat(given or [empty]), torch.cat(perceived or [empty])


def seen_columns(given: list[str], sizes: list[int]) -> torch.Tensor:
  """The columns of the given terms that the perception reads
  (``PERCEPTION_STATE``), in their order."""
  seen = [t for t in given if t in PERCEPTION_STATE]
  return actor_columns(given, sizes, seen)[1]


# ---------------------------------------------------------------- training

PERCEPTION_HIDDEN = (256, 256)
QUARTER_TURN_REFERENCE = {"cube_yaw_to_tool": "tcp_pose"}
"""The pose whose yaw a quarter-turn term is taken relative to: its quarter
yaw is an input of the perception when the policy is given that pose."""


def quarter_turn_error(estimate: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
  """|estimate - truth| of quarter-turn angles, wrapped to [0, pi/4]."""
  quarter = torch.pi / 2
  return (torch.remainder(estimate - truth + quarter / 2, quarter) - quarter / 2).abs()


def perception_errors(model: Perception, perceive: list[str], given, values, images):
  """Each estimated term's error on a set: the root-mean-square distance for
  a vector, the mean absolute angle [deg] for a quarter turn."""
  out, at = {}, 0
  estimate = model(given, images)
  shape = zip(perceive, model.out_sizes, model.quarter_turn, strict=True)
  for key, size, quarter in shape:
    e, v = estimate[:, at : at + size], values[:, at : at + size]
    if quarter:
      out[f"{key}_deg"] = float(torch.rad2deg(quarter_turn_error(e, v)).mean())
    else:
      out[f"{key}_rms"] = float(((e - v) ** 2).sum(-1).mean().sqrt())
    at += size
  return out


def train_perception(args, data):
  """The fitted ``Perception``, its per-epoch losses, its validation errors,
  and the checkpoint fields that make the state policy an image policy.

  ``data`` is ``bc_training.load_data``'s: its state terms are the given
  and the perceived ones together; ``args.perceive`` names the perceived.
  Trained for ``args.perception_epochs`` in batches of
  ``args.perception_batch_size``, with ``fit``'s schedule."""
  import dataclasses

  import numpy as np

  from mjlab_tasks.policies.bc_training import epoch_bar, fit, image_batch

  _, terms, sizes, _, _, train_set, valid_set, shapes = data
  torch.manual_seed(args.seed)
  torch.set_num_threads(args.threads)
  perceive = [t for t in terms if t in args.perceive]
  given_at, perceived_at = actor_columns(terms, sizes, perceive)
  given_terms = [t for t in terms if t not in perceive]
  given_sizes = [s for t, s in zip(terms, sizes, strict=True) if t not in perceive]
  seen_at = seen_columns(given_terms, given_sizes)
  seen = [t for t in given_terms if t in PERCEPTION_STATE]
  seen_sizes = [given_sizes[given_terms.index(t)] for t in seen]
  yaw_at = None
  for key in perceive:
    ref = QUARTER_TURN_REFERENCE.get(key)
    if ref in seen:  # a pose's quaternion is its last 4 values
      yaw_at = sum(seen_sizes[: seen.index(ref) + 1]) - 4
  keys = list(shapes)
  model = Perception(
    len(seen_at),
    [sizes[terms.index(k)] for k in perceive],
    [k in QUARTER_TURN_TERMS for k in perceive],
    list(PERCEPTION_HIDDEN),
    keys,
    [shapes[k][-1] for k in keys],
    args.image_size,
    yaw_at,
  )

  def split(data_set):
    obs = torch.from_numpy(data_set[0])
    return obs[:, given_at][:, seen_at], obs[:, perceived_at], data_set[3]

  given, values, pictures = split(train_set)
  if given.shape[1]:
    model.obs_mean.copy_(given.mean(0))
    model.obs_std.copy_(given.std(0).clamp_min(1e-2))
  model.target_mean.copy_(values.mean(0))
  model.target_std.copy_(values.std(0).clamp_min(1e-3))
  for key, encoder in model.encoders.items():
    sample = pictures[key][:: max(1, len(given) // 256)].astype(np.float32)
    encoder.mean.fill_(float((sample / encoder.scale).mean()))
    encoder.std.fill_(max(float((sample / encoder.scale).std()), 1e-3))
  from mjlab_tasks.policies import random_shift

  def batch_loss(idx, generator):
    images = {
      k: random_shift(v, args.image_shift, generator)
      for k, v in image_batch(pictures, idx, "cpu").items()
    }
    pred = model.features(given[idx], images)
    return torch.nn.functional.mse_loss(pred, model.targets(values[idx]))

  def in_batches(data_set, measure):
    g, v, p = split(data_set)
    parts = []
    with torch.no_grad():
      for start in range(0, len(g), 512):
        idx = torch.arange(start, min(start + 512, len(g)))
        parts.append((len(idx), measure(g[idx], v[idx], image_batch(p, idx, "cpu"))))
    return parts

  def valid_loss():
    parts = in_batches(
      valid_set,
      lambda g, v, im: float(
        torch.nn.functional.mse_loss(model.features(g, im), model.targets(v))
      ),
    )
    return sum(n * x for n, x in parts) / sum(n for n, _ in parts)

  recipe = dataclasses.replace(
    args, epochs=args.perception_epochs, batch_size=args.perception_batch_size
  )
  has_valid = valid_set[0] is not None
  history = fit(
    recipe, model, len(given), batch_loss, valid_loss if has_valid else None,
    epoch_bar("perception"),
  )  # fmt: skip
  errors = {}
  if has_valid:
    parts = in_batches(
      valid_set, lambda g, v, im: perception_errors(model, perceive, g, v, im)
    )
    total = sum(n for n, _ in parts)
    for name in parts[0][1]:
      if name.endswith("_rms"):  # mean of squares, then the root
        errors[name] = (sum(n * x[name] ** 2 for n, x in parts) / total) ** 0.5
      else:
        errors[name] = sum(n * x[name] for n, x in parts) / total
  fields = {
    "obs_keys": given_terms,
    "obs_sizes": given_sizes,
    "actor_keys": terms,
    "actor_sizes": sizes,
    "perceive": perceive,
    "perception": model.state_dict(),
    "perception_hidden": list(PERCEPTION_HIDDEN),
    "perception_yaw_reference_at": yaw_at,
  }
  return model, history, errors, fields
