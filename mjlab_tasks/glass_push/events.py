"""Reset: every environment's glasses back on their table's drawn places."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from evaluators.glass_push.tables import TABLE_HEIGHT
from mjlab_tasks.glass_push.mdp import table
from mjlab_tasks.glass_push.scene import GLASS_ENTITY, SLOTS

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


def place_glasses(
  env: ManagerBasedRlEnv, env_ids: torch.Tensor | None, pool: tuple[int, ...]
) -> None:
  """Stand each glass upright and still on its drawn place (an unused slot's
  on the floor beyond the table)."""
  if env_ids is None:
    env_ids = torch.arange(env.num_envs, device=env.device)
  t = table(env, pool)
  for s in range(SLOTS):
    state = torch.zeros(len(env_ids), 13, device=env.device)
    state[:, :2] = t.xy[env_ids, s]
    state[:, 2] = torch.where(t.present[env_ids, s], 0.0, -TABLE_HEIGHT)
    state[:, 3] = 1.0
    state[:, :3] += env.scene.env_origins[env_ids]
    env.scene[GLASS_ENTITY.format(slot=s)].write_root_state_to_sim(state, env_ids)
