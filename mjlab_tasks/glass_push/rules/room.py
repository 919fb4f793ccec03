"""Whether a glass has room to be taken: a clear place for both RG2 fingers.

The rule (docs/glass_push.md): a standing glass has room when, for some
closing direction (every 10 degrees over half a turn), both closed-around
fingers fit beside its widest ring: each finger's footprint, a rectangle
``FINGER_DEPTH`` deep (along the closing direction) and ``FINGER_WIDTH`` wide,
placed ``CLEARANCE`` outside the widest ring, keeps ``CLEARANCE`` from the
widest ring of every other glass on the table; and the widest ring plus twice
the clearance fits the RG2's 110 mm opening. Every glass is taken as a
vertical cylinder of its widest diameter (conservative for tapered glasses).
"""

from __future__ import annotations

import numpy as np

from assets.ur5_rg2_dimensions import RG2_MAX_OPENING

FINGER_DEPTH = 0.016  # pad 6 mm + finger link 10 mm along the closing axis
FINGER_WIDTH = 0.025  # pad width across the closing axis
CLEARANCE = 0.005
MAX_OPENING = RG2_MAX_OPENING
DIRECTIONS = np.radians(np.arange(0.0, 180.0, 10.0))


def has_room(
  center: np.ndarray, widest: float, others: np.ndarray, others_widest: np.ndarray
) -> bool:
  """Room for both fingers around one glass.

  Args:
    center: the glass's centre [2].
    widest: its widest diameter.
    others: centres of the other glasses on the table [N, 2].
    others_widest: their widest diameters [N].
  """
  if widest + 2 * CLEARANCE > MAX_OPENING:
    return False
  others = np.asarray(others, dtype=float).reshape(-1, 2)
  radii = np.asarray(others_widest, dtype=float).reshape(-1) / 2 + CLEARANCE
  if others.shape[0] == 0:
    return True
  offset = widest / 2 + CLEARANCE + FINGER_DEPTH / 2
  half = np.array([FINGER_DEPTH / 2, FINGER_WIDTH / 2])
  for a in DIRECTIONS:
    d = np.array([np.cos(a), np.sin(a)])
    n = np.array([-d[1], d[0]])
    ok = True
    for side in (1.0, -1.0):
      c = center + side * offset * d
      rel = others - c  # [N, 2] in the finger rectangle's frame:
      local = np.abs(np.stack([rel @ d, rel @ n], 1))
      gap = np.linalg.norm(np.maximum(local - half, 0.0), axis=1)
      if np.any(gap < radii):
        ok = False
        break
    if ok:
      return True
  return False


def finger_blocked(center, widest, others_mask=None):
  """Which finger places of which glass each other glass blocks (batched torch).

  Args:
    center: glass centres [N, G, 2] (torch).
    widest: widest diameters [N, G].
    others_mask: [N, G] glasses that count as obstacles (on the table);
      default every glass.

  Returns:
    bool [N, G, D, 2, G]: finger ``side`` of glass ``i`` at closing direction
    ``d`` comes closer than ``CLEARANCE`` to glass ``j`` (never to itself).
  """
  import torch

  dtype, device = center.dtype, center.device
  angles = torch.as_tensor(DIRECTIONS, dtype=dtype, device=device)
  d = torch.stack([torch.cos(angles), torch.sin(angles)], -1)  # [D, 2]
  n = torch.stack([-d[:, 1], d[:, 0]], -1)
  side = torch.tensor([1.0, -1.0], dtype=dtype, device=device)
  offset = widest / 2 + CLEARANCE + FINGER_DEPTH / 2  # [N, G]
  # Finger centres [N, G, D, S, 2].
  c = center[:, :, None, None] + (
    side[None, None, None, :, None] * offset[:, :, None, None, None] * d[:, None]
  )
  rel = center[:, None, None, None] - c[:, :, :, :, None]  # [N, G, D, S, G, 2]
  local = torch.stack(
    [
      (rel * d[:, None, None]).sum(-1).abs(),
      (rel * n[:, None, None]).sum(-1).abs(),
    ],
    -1,
  )
  half = torch.tensor([FINGER_DEPTH / 2, FINGER_WIDTH / 2], dtype=dtype, device=device)
  gap = torch.linalg.vector_norm((local - half).clamp(min=0.0), dim=-1)
  radii = widest / 2 + CLEARANCE  # [N, G]
  blocked = gap < radii[:, None, None, None, :]
  count = center.shape[1]
  eye = torch.eye(count, dtype=torch.bool, device=device)
  blocked &= ~eye[None, :, None, None, :]
  if others_mask is not None:
    blocked &= others_mask[:, None, None, None, :]
  return blocked


def room_among(blocked, widest, alive):
  """``has_room`` for every glass against the ``alive`` others (torch).

  Args:
    blocked: ``finger_blocked``'s result [N, G, D, 2, G].
    widest: [N, G].
    alive: bool [N, G], the glasses still on the table (obstacles).

  Returns:
    bool [N, G]: some direction where neither finger meets an alive glass
    and the glass fits the opening (whether a glass itself is alive or
    standing is the caller's condition).
  """
  hit = (blocked & alive[:, None, None, None, :]).any(-1)  # [N, G, D, S]
  free = ~hit.any(-1)  # both fingers fit [N, G, D]
  return free.any(-1) & (widest + 2 * CLEARANCE <= MAX_OPENING)


def takeable(blocked, widest, on_table, standing):
  """Glasses that can be taken one after another with room, no push (torch).

  The batched ``tables.takeable_without_pushing``: taking a glass only
  frees room for the others, so removing every glass that has room, round
  after round, takes the same set as taking them one at a time.

  Args:
    blocked: ``finger_blocked``'s result [N, G, D, 2, G].
    widest: [N, G].
    on_table: bool [N, G], glasses on the table (standing or not).
    standing: bool [N, G], upright glasses (only these can be taken).

  Returns:
    bool [N, G].
  """
  alive = on_table.clone()
  taken = on_table & False
  for _ in range(on_table.shape[1]):
    now = room_among(blocked, widest, alive) & alive & standing
    if not now.any():
      break
    taken |= now
    alive &= ~now
  return taken
