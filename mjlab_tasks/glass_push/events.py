"""Reset: every environment's glasses back on their table's drawn places."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mjlab_tasks.glass_push.rules.tables import TABLE_HEIGHT
from mjlab_tasks.glass_push.scene import GLASS_ENTITY, SLOTS, table_layout

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


def place_glasses(
  env: ManagerBasedRlEnv,
  env_ids: torch.Tensor | None,
  pool: tuple[int, ...],
  fixture=None,
) -> None:
  """Stand each glass upright and still on its drawn place (an unused slot's
  on the floor beyond the table); ``fixture``: ``PhysicsConfig.glasses``."""
  if env_ids is None:
    env_ids = torch.arange(env.num_envs, device=env.device)
  layout = table_layout(tuple(pool), fixture)
  variant = env.sim.world_to_variant[GLASS_ENTITY.format(slot=0)]
  ids = variant.to(env_ids.device)[env_ids].cpu()
  for s in range(SLOTS):
    state = torch.zeros(len(env_ids), 13, device=env.device)
    state[:, :2] = layout.xy[ids, s].to(env.device)
    present = layout.present[ids, s].to(env.device)
    state[:, 2] = torch.where(present, 0.0, -TABLE_HEIGHT)
    state[:, 3] = 1.0
    state[:, :3] += env.scene.env_origins[env_ids]
    env.scene[GLASS_ENTITY.format(slot=s)].write_root_state_to_sim(state, env_ids)
