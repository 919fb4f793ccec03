"""Glass pushing terms: readings, room, rewards, terminations, metrics.

Every term is a function of ``env`` returning ``[num_envs]`` (or
``[num_envs, k]``) tensors, batched over environments and glass slots. The
verdicts are the examiner's: a glass has room by ``room.has_room`` (batched
in ``room.finger_blocked`` / ``room.takeable``), it is toppled when tilted
more than 30 degrees, knocked off when it left the table top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mjlab_tasks.common.mdp import site_id
from mjlab_tasks.common.verdict import StateVerdictTerm, task_verdict
from mjlab_tasks.glass_push.hidden import (
  NOISE_HEIGHT,
  NOISE_POSITION,
  NOISE_WIDTH,
  OFF_TABLE_Z,
  TOPPLED_COS,
)
from mjlab_tasks.glass_push.rules import room
from mjlab_tasks.glass_push.rules.hand import JAM_FORCE, LOWEST_TCP_Z
from mjlab_tasks.glass_push.rules.tables import TABLE_X, TABLE_Y
from mjlab_tasks.glass_push.scene import GLASS_ENTITY, SLOTS, table_layout

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

VERDICT_TERM = "takeable_rate"
"""The verdict term's name, the metric it logs."""
READING = ("x", "y", "height", "widest", "foot", "standing", "present")


class _Table:
  """Each environment's table (from the simulation's variant assignment)."""

  def __init__(self, env: ManagerBasedRlEnv, pool: tuple[int, ...]):
    layout = table_layout(tuple(pool))
    variant = env.sim.world_to_variant.get(GLASS_ENTITY.format(slot=0))
    if variant is None:
      raise ValueError("the glass slots are not per-world variants of the pool")
    idx = variant.cpu()
    dev = env.device
    self.table = layout.tables[idx].to(dev)
    self.present = layout.present[idx].to(dev)
    self.xy = layout.xy[idx].to(dev)
    self.height = layout.height[idx].to(dev)
    self.widest = layout.widest[idx].to(dev)
    self.foot = layout.foot[idx].to(dev)
    self.count = self.present.sum(1).float()
    self.takeable_at_start = layout.takeable_at_start[idx].to(dev).float()


def table(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> _Table:
  cached = env.__dict__.get("_glass_table")
  if cached is None or cached[0] != tuple(pool):
    cached = (tuple(pool), _Table(env, pool))
    env.__dict__["_glass_table"] = cached
  return cached[1]


def glass_poses(env: ManagerBasedRlEnv) -> tuple[torch.Tensor, torch.Tensor]:
  """Glass origins in the environment frame [N, S, 3] and quaternions [N, S, 4]."""
  pos, quat = [], []
  for s in range(SLOTS):
    data = env.scene[GLASS_ENTITY.format(slot=s)].data
    pos.append(data.root_link_pos_w - env.scene.env_origins)
    quat.append(data.root_link_quat_w)
  return torch.stack(pos, 1), torch.stack(quat, 1)


def _up(quat: torch.Tensor) -> torch.Tensor:
  """z of the glass's axis in the world (1 upright) from (w, x, y, z)."""
  x, y = quat[..., 1], quat[..., 2]
  return 1.0 - 2.0 * (x * x + y * y)


def _on_table(pos: torch.Tensor) -> torch.Tensor:
  return (
    (pos[..., 2] >= OFF_TABLE_Z)
    & (pos[..., 0] >= TABLE_X[0])
    & (pos[..., 0] <= TABLE_X[1])
    & (pos[..., 1] >= TABLE_Y[0])
    & (pos[..., 1] <= TABLE_Y[1])
  )


def judge_glasses(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> dict:
  """Where every glass is and which could be taken with room, on the truth.
  Keys: ``on_table``, ``standing``, ``toppled``, ``off`` and ``takeable``
  (bool [N, S], present glasses only), and their counts ``*_count`` [N]."""
  t = table(env, pool)
  pos, quat = glass_poses(env)
  on_table = _on_table(pos) & t.present
  standing = on_table & (_up(quat) > TOPPLED_COS)
  blocked = room.finger_blocked(pos[..., :2], t.widest, on_table)
  verdict = dict(
    on_table=on_table,
    standing=standing,
    toppled=on_table & ~standing,
    off=t.present & ~on_table,
    takeable=room.takeable(blocked, t.widest, on_table, standing),
  )
  verdict |= {f"{k}_count": v.sum(1).float() for k, v in list(verdict.items())}
  return verdict


class GlassVerdict(StateVerdictTerm):
  """The task's verdict term (``mjlab_tasks.common.verdict``): the glasses'
  verdict of the current state (``judge_glasses``), judged once per step and
  again for tables reset since. As a metric: the taken-with-room rate a
  taker would reach from here (takeable glasses over the table's)."""

  def judge(self, env: ManagerBasedRlEnv) -> dict:
    return judge_glasses(env, self.cfg.params["pool"])

  def metric(self, verdict: dict) -> torch.Tensor:
    return verdict["takeable_count"] / table(self.env, self.cfg.params["pool"]).count


# -- observations ----------------------------------------------------------------


def glass_readings(
  env: ManagerBasedRlEnv, pool: tuple[int, ...], noisy: bool = True
) -> torch.Tensor:
  """What ``Examiner.look()`` reads, per glass slot [N, S * 7].

  Per slot: x, y (the foot's centre; a toppled glass's axis middle), height,
  widest, foot, standing (0/1), present (0/1: the glass is on the table).
  With ``noisy`` each reading gets the examiner's Gaussian noise, drawn
  fresh every step. A slot whose glass is absent or off the table reads 0.
  """
  t = table(env, pool)
  pos, quat = glass_poses(env)
  up = _up(quat)
  on_table = _on_table(pos) & t.present
  # A lying glass is seen as the middle of its axis.
  w, x, y, z = quat.unbind(-1)
  axis = torch.stack([2 * (x * z + w * y), 2 * (y * z - w * x)], -1)
  xy = torch.where(
    (up > TOPPLED_COS)[..., None],
    pos[..., :2],
    pos[..., :2] + axis * t.height[..., None] / 2,
  )
  values = torch.stack(
    [xy[..., 0], xy[..., 1], t.height, t.widest, t.foot], -1
  )  # [N, S, 5]
  if noisy:
    sigma = torch.tensor(
      [NOISE_POSITION, NOISE_POSITION, NOISE_HEIGHT, NOISE_WIDTH, NOISE_WIDTH],
      device=values.device,
    )
    values = values + torch.randn_like(values) * sigma
  flags = torch.stack([(up > TOPPLED_COS) & on_table, on_table], -1).float()
  out = torch.cat([values, flags], -1) * on_table[..., None]
  return out.reshape(env.num_envs, -1)


def glass_truth(env: ManagerBasedRlEnv) -> torch.Tensor:
  """True glass poses (critic only) [N, S * 7]: position and quaternion."""
  pos, quat = glass_poses(env)
  return torch.cat([pos, quat], -1).reshape(env.num_envs, -1)


def friction(env: ManagerBasedRlEnv, coefficients: tuple[float, ...]) -> torch.Tensor:
  """The hidden friction coefficients (critic only) [N, 3]."""
  return torch.tensor(coefficients, device=env.device).expand(env.num_envs, -1)


# -- rewards ------------------------------------------------------------------------


def room_gained(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  """Glasses takeable now minus at the start, over the table's glasses."""
  t = table(env, pool)
  v = task_verdict(env)
  return (v["takeable_count"] - t.takeable_at_start) / t.count


def glasses_lost(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  """Toppled or knocked-off glasses, over the table's glasses."""
  t = table(env, pool)
  v = task_verdict(env)
  return (v["toppled_count"] + v["off_count"]) / t.count


def hand_to_group(
  env: ManagerBasedRlEnv, pool: tuple[int, ...], tcp_site: str, robot: str
) -> torch.Tensor:
  """1 - tanh(distance from the tool to the nearest glass's foot at push
  height / 0.1 m): come close to the glasses, down where a push moves them
  (a shaping term; the room is what pays). The tool starts 0.30 m above the
  table: a horizontal distance alone paid a hand hovering over the group."""
  t = table(env, pool)
  pos, _ = glass_poses(env)
  tcp = env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)] - env.scene.env_origins
  offset = pos - tcp[:, None, :]
  offset[..., 2] += LOWEST_TCP_Z  # the lowest tool height a push reaches
  dist = torch.linalg.vector_norm(offset, dim=-1)
  dist = torch.where(t.present, dist, torch.full_like(dist, 10.0)).min(1).values
  return 1.0 - torch.tanh(dist / 0.1)


def jam_force(env: ManagerBasedRlEnv, sensor_name: str = "wrist_force") -> torch.Tensor:
  """Hand force above the examiner's 20 N jam limit, in units of 20 N."""
  force = env.scene.sensors[sensor_name].data.force.reshape(env.num_envs, 3)
  return (torch.linalg.vector_norm(force, dim=-1) - JAM_FORCE).clamp(
    min=0.0
  ) / JAM_FORCE


# -- terminations -------------------------------------------------------------------


def glass_toppled(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  return task_verdict(env)["toppled"].any(1)


def glass_knocked_off(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  return task_verdict(env)["off"].any(1)


def table_cleared(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  """Success: every glass of the table could now be taken with room, one
  after another, without another push."""
  t = table(env, pool)
  return task_verdict(env)["takeable_count"] >= t.count


# -- metrics ------------------------------------------------------------------------


def takeable_rate_at_start(
  env: ManagerBasedRlEnv, pool: tuple[int, ...]
) -> torch.Tensor:
  t = table(env, pool)
  return t.takeable_at_start / t.count


def cleared(env: ManagerBasedRlEnv, pool: tuple[int, ...]) -> torch.Tensor:
  return table_cleared(env, pool).float()


def verdict_any(
  env: ManagerBasedRlEnv, pool: tuple[int, ...], key: str
) -> torch.Tensor:
  return task_verdict(env)[key].any(1).float()
