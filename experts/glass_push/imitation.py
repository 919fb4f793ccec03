"""The imitation solution: a network that reads the top view and gives action
chunks, trained on the hand paths the examiner recorded while a teacher
solution worked the training tables (docs/glass_push.md, "The imitation
solution").

Per decision, for every standing glass of the (averaged) readings, the
network reads a crop of the top view centred on the glass (``CROP_PX``
pixels, about 200 mm, pooled to ``INPUT_PX``) and the glass's readings, and
gives a logit (would the teacher push this glass now), a heading (one of
``HEADINGS``) and a chunk: ``K`` waypoints of the tool point relative to the
glass in the push frame (along the heading, across it, height). The solution follows the chunk of the glass with the
highest logit, densified to the teacher's pace (``follow()``), or stops when
no glass's logit says push. Takes are the teacher's own rule (room by
averaged readings, ``shove.take_ready``). It calls only ``look``,
``top_view``, ``follow``, ``take`` and ``refuse``; the truth is never read.

The shipped weights are ``policies/glass_imitation/policy.pt``
(``scripts/train_glass_imitation.py`` writes them).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from experts.glass_push.common import arrays, room_by_readings
from experts.glass_push.perception import SIZE, ZONE_CENTER, table_pixel
from experts.glass_push.shove import take_ready
from mjlab_tasks.glass_push import BudgetSpent

POLICY_FILE = Path(__file__).resolve().parents[2] / "policies/glass_imitation/policy.pt"
CROP_PX = 128  # About 200 mm of table: the glass and its neighbours.
POOL = 4
INPUT_PX = CROP_PX // POOL
K = 16  # Waypoints per chunk.
CHUNK_SCALE = 0.1  # The network's waypoint unit [m].
FEATURES = 10
HEADINGS = 16  # Push headings the network chooses from (the teacher's grid).
MIN_Z = 0.0195  # follow()'s lowest waypoint height [m]
MAX_TRIES = 2  # Chunks per glass that gained nothing before it is left.
STOP_BELOW = 0.0  # A best logit below this (probability 0.5) stops.


def crop(picture: np.ndarray, xy) -> np.ndarray:
  """The top view around table point ``xy``, mean-pooled: [3, INPUT_PX,
  INPUT_PX] float32 in [0, 1]; outside the picture is black. Image right is
  +x and image up +y, as in the picture."""
  col, row = np.round(table_pixel(xy)).astype(int)
  half = CROP_PX // 2
  out = np.zeros((CROP_PX, CROP_PX, 3), dtype=np.float32)
  r0, c0 = row - half, col - half
  rs, cs = max(r0, 0), max(c0, 0)
  re, ce = min(r0 + CROP_PX, SIZE), min(c0 + CROP_PX, SIZE)
  if rs < re and cs < ce:
    out[rs - r0 : re - r0, cs - c0 : ce - c0] = picture[rs:re, cs:ce] / 255.0
  pooled = out.reshape(INPUT_PX, POOL, INPUT_PX, POOL, 3).mean((1, 3))
  return np.ascontiguousarray(pooled.transpose(2, 0, 1))


def features(readings: list[dict], k: int) -> np.ndarray:
  """Glass ``k``'s readings (height, widest, foot), where it is from the
  zone's centre, how many glasses stand, whether it has room by the
  readings, and its three smallest rim gaps to the others: [FEATURES]
  float32, scaled to about unit size."""
  _, xy, widest, foot, height, standing = arrays(readings)
  off = (xy[k] - np.asarray(ZONE_CENTER)) / 0.2
  others = np.delete(np.arange(len(readings)), k)
  gaps = np.linalg.norm(xy[others] - xy[k], axis=1) - (widest[others] + widest[k]) / 2
  gaps = np.sort(np.concatenate([gaps, np.full(3, 0.1)]))[:3]
  return np.array(
    [
      height[k] / 0.15,
      widest[k] / 0.08,
      foot[k] / 0.08,
      *off,
      standing.sum() / 10.0,
      float(room_by_readings(readings, k)),
      *(gaps / 0.05),
    ],
    dtype=np.float32,
  )


def dihedral(image, points, heading, offset, turn: int, mirror: bool):
  """One of the 8 symmetries of the square, on a crop [3, H, W], chunk
  points [K, 2] (relative to the glass), a heading [rad] and the glass's
  offset feature [2]: ``turn`` quarter turns anticlockwise (seen from
  above), after a mirror x -> -x."""
  points, offset = np.array(points, dtype=float), np.array(offset, dtype=float)
  if mirror:
    image = image[:, :, ::-1]
    points[:, 0], offset[0] = -points[:, 0], -offset[0]
    heading = math.pi - heading
  for _ in range(turn % 4):
    image = np.rot90(image, 1, axes=(1, 2))
    points = np.stack([-points[:, 1], points[:, 0]], -1)
    offset = np.array([-offset[1], offset[0]])
    heading = heading + math.pi / 2
  return (
    np.ascontiguousarray(image),
    points,
    math.atan2(math.sin(heading), math.cos(heading)),
    offset,
  )


def heading_class(heading: float) -> int:
  """The nearest of the ``HEADINGS`` equally spaced headings."""
  return int(round(heading / (2 * math.pi / HEADINGS))) % HEADINGS


def heading_of(k: int) -> float:
  return k * 2 * math.pi / HEADINGS


def class_symmetry(k: int, turn: int, mirror: bool) -> int:
  """Heading class ``k`` under ``dihedral``'s symmetry (mirror, then turns)."""
  if mirror:
    k = (HEADINGS // 2 - k) % HEADINGS
  return (k + turn * HEADINGS // 4) % HEADINGS


def push_frame(points, heading: float) -> np.ndarray:
  """Points [K, 3] relative to the glass, world axes -> along the heading,
  across it (to its left), height."""
  c, s = math.cos(heading), math.sin(heading)
  p = np.asarray(points, dtype=float)
  return np.stack([c * p[:, 0] + s * p[:, 1], -s * p[:, 0] + c * p[:, 1], p[:, 2]], -1)


def world_frame(points, heading: float) -> np.ndarray:
  """``push_frame``'s inverse: the rotation back by the heading."""
  return push_frame(points, -heading)


class ChunkNet(nn.Module):
  """Crop and features -> push logit [B], heading logits [B, HEADINGS] and
  chunk [B, K, 3] in the push frame (along the heading, across it, height;
  relative to the glass)."""

  def __init__(self, width: int = 32):
    super().__init__()
    self.encoder = nn.Sequential(
      nn.Conv2d(3, width, 5, stride=2, padding=2),
      nn.ReLU(),
      nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
      nn.ReLU(),
      nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
      nn.ReLU(),
      nn.Flatten(),
    )
    side = INPUT_PX // 8
    self.head = nn.Sequential(
      nn.Linear(2 * width * side * side + FEATURES, 256),
      nn.ReLU(),
      nn.Linear(256, 256),
      nn.ReLU(),
      nn.Linear(256, 1 + HEADINGS + 3 * K),
    )

  def forward(self, image: torch.Tensor, feats: torch.Tensor):
    out = self.head(torch.cat([self.encoder(image), feats], -1))
    head = out[:, 1 : 1 + HEADINGS]
    return out[:, 0], head, out[:, 1 + HEADINGS :].reshape(-1, K, 3)


def to_chunk(points, heading: float, glass_xy, spacing: float) -> np.ndarray:
  """A ``follow()`` chunk [N, 4] from the network's waypoints [K, 3] (x, y
  relative to the glass, height; metres): straight between them, one step
  per ``spacing`` metres (the teacher's pace), heights at least MIN_Z."""
  pts = np.asarray(points, dtype=float).copy()
  pts[:, :2] += np.asarray(glass_xy, dtype=float)
  pts[:, 2] = np.maximum(pts[:, 2], MIN_Z)
  rows = [pts[:1]]
  for a, b in zip(pts[:-1], pts[1:], strict=True):
    n = max(1, math.ceil(float(np.linalg.norm(b - a)) / spacing))
    s = np.arange(1, n + 1)[:, None] / n
    rows.append(a + s * (b - a))
  way = np.concatenate(rows)
  return np.concatenate([way, np.full((len(way), 1), heading)], -1)


@lru_cache(maxsize=2)
def load(path: str = str(POLICY_FILE)) -> tuple[ChunkNet, dict]:
  """The network and its checkpoint's settings (``spacing``, ``teacher``)."""
  data = torch.load(path, map_location="cpu", weights_only=False)
  net = ChunkNet(data["width"])
  net.load_state_dict(data["state_dict"])
  net.eval()
  return net, data


def propose(net: ChunkNet, picture, readings, skip=()) -> list[tuple]:
  """Per standing glass not in ``skip``: (logit, glass index, waypoints
  [K, 3] in metres relative to it, world axes, heading), best first."""
  rows = [k for k, r in enumerate(readings) if r["standing"] and r["id"] not in skip]
  if not rows:
    return []
  _, xy, *_ = arrays(readings)
  images = torch.from_numpy(np.stack([crop(picture, xy[k]) for k in rows]))
  feats = torch.from_numpy(np.stack([features(readings, k) for k in rows]))
  with torch.no_grad():
    logit, head, chunk = net(images, feats)
  out = []
  for j, k in enumerate(rows):
    heading = heading_of(int(head[j].argmax()))
    points = world_frame(chunk[j].numpy() * CHUNK_SCALE, heading)
    out.append((float(logit[j]), k, points, heading))
  return sorted(out, key=lambda o: -o[0])


def solve(examiner, path: str = str(POLICY_FILE)) -> None:
  """Take what has room; else follow the network's best chunk, look again;
  stop when it proposes no push (refusing what stands) or the budget ends."""
  net, settings = load(path)
  tries: dict[int, int] = {}
  readings = take_ready(examiner)
  while any(r["standing"] for r in readings):
    left = {g for g, n in tries.items() if n >= MAX_TRIES}
    best = propose(net, examiner.top_view(), readings, skip=left)
    if not best or best[0][0] < STOP_BELOW:
      for r in readings:
        if r["standing"]:
          examiner.refuse(r["id"], "the imitation policy proposes no push")
      return
    _, k, points, heading = best[0]
    glass = readings[k]
    chunk = to_chunk(points, heading, (glass["x"], glass["y"]), settings["spacing"])
    try:
      examiner.follow(chunk, glass=glass["id"])
    except BudgetSpent:
      take_ready(examiner)
      return
    except ValueError:  # A chunk out of the arm's reach: no push used.
      tries[glass["id"]] = MAX_TRIES
      continue
    after = take_ready(examiner)
    if len(after) == len(readings):
      tries[glass["id"]] = tries.get(glass["id"], 0) + 1
    readings = after
