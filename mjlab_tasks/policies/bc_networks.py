"""The behaviour-cloning networks ``scripts/train_bc.py`` trains: an MLP on
state terms (``BcMlp``) and one that also encodes camera images with a small
CNN (``BcImageNet``), with the input features both share."""

from __future__ import annotations

import torch


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


def elu_mlp(width: int, hidden: list[int], out: int) -> torch.nn.Sequential:
  """Linear layers of ``hidden`` widths with ELU between, then a linear
  output of ``out`` (the behaviour-cloning networks' heads)."""
  layers = []
  for size in hidden:
    layers += [torch.nn.Linear(width, size), torch.nn.ELU()]
    width = size
  layers.append(torch.nn.Linear(width, out))
  return torch.nn.Sequential(*layers)


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
    width = obs_dim + (0 if quarter_yaw_at is None else 2)
    self.net = elu_mlp(width, hidden, action_dim * chunk)

  def forward(self, obs: torch.Tensor) -> torch.Tensor:
    """Actions [B, chunk, action_dim] for raw observations [B, obs_dim]."""
    x = (obs - self.obs_mean) / self.obs_std
    if self.quarter_yaw_at is not None:
      yaw = quarter_yaw(obs, self.quarter_yaw_at, self.yaw_reference_at)
      x = torch.cat([x, yaw], dim=-1)
    out = self.net(x)
    return out.view(-1, self.chunk, self.action_dim)

  @classmethod
  def from_checkpoint(cls, ckpt: dict) -> torch.nn.Module:
    """The network of a ``train_bc.py`` checkpoint: this MLP, a
    ``BcImageNet``, or a ``PerceivingBc`` (``--perceive``)."""
    if ckpt.get("perceive"):
      from mjlab_tasks.policies.bc_perception import PerceivingBc

      return PerceivingBc.from_checkpoint(ckpt)
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


def random_shift(
  images: torch.Tensor, pad: int, generator: torch.Generator | None = None
) -> torch.Tensor:
  """Images [B, C, h, w] each moved by a random whole number of pixels, up to
  ``pad`` either way in both directions, edges repeated (the random-shift
  augmentation of DrQ and robomimic's crop randomizer): a policy that must
  find the cube anywhere within a few pixels cannot memorize where it was."""
  if pad <= 0:
    return images
  b, c, h, w = images.shape
  padded = torch.nn.functional.pad(images, (pad, pad, pad, pad), mode="replicate")
  dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(images.device)
  dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(images.device)
  rows = (dy[:, None] + torch.arange(h, device=images.device))[:, None, :, None]
  cols = (dx[:, None] + torch.arange(w, device=images.device))[:, None, None, :]
  batch = torch.arange(b, device=images.device)[:, None, None, None]
  channel = torch.arange(c, device=images.device)[None, :, None, None]
  return padded[batch, channel, rows, cols]


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
    strides: Of the three convolutions.
  """

  WIDTHS = (16, 32, 32)

  def __init__(
    self,
    channels: int,
    size: tuple[int, int],
    scale: float = 1.0,
    strides: tuple[int, int, int] = (2, 2, 2),
  ):
    super().__init__()
    self.register_buffer("mean", torch.zeros(()))
    self.register_buffer("std", torch.ones(()))
    self.scale = scale
    layers, width = [], channels
    for out, kernel, stride in zip(self.WIDTHS, (5, 3, 3), strides, strict=True):
      layers += [torch.nn.Conv2d(width, out, kernel, stride=stride), torch.nn.ELU()]
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
    self.net = elu_mlp(width, hidden, action_dim * chunk)

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
