"""Simulator state of every world, read and restored the same way on both
engines.

The state vector is MuJoCo's ``mjSTATE_INTEGRATION`` (time, qpos, qvel, act,
warm start, controls, applied forces, mocap poses, ...), everything
``mj_step`` reads. On the C engine it comes from each world's ``MjData``
(float64, exact: replays repeat bit for bit); on MuJoCo Warp the same vector
is assembled from Warp's float32 arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch

from mjlab_tasks.common.verdict import invalidate_verdict

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

# mjtState components of mjSTATE_INTEGRATION, in the state vector's order,
# with the name of the matching data field.
STATE_FIELDS = (
  ("mjSTATE_TIME", "time"),
  ("mjSTATE_QPOS", "qpos"),
  ("mjSTATE_QVEL", "qvel"),
  ("mjSTATE_ACT", "act"),
  ("mjSTATE_WARMSTART", "qacc_warmstart"),
  ("mjSTATE_CTRL", "ctrl"),
  ("mjSTATE_QFRC_APPLIED", "qfrc_applied"),
  ("mjSTATE_XFRC_APPLIED", "xfrc_applied"),
  ("mjSTATE_EQ_ACTIVE", "eq_active"),
  ("mjSTATE_MOCAP_POS", "mocap_pos"),
  ("mjSTATE_MOCAP_QUAT", "mocap_quat"),
  ("mjSTATE_USERDATA", "userdata"),
  ("mjSTATE_PLUGIN", "plugin_state"),
)
INTEGRATION = int(mujoco.mjtState.mjSTATE_INTEGRATION)


def state_layout(model: mujoco.MjModel) -> list[tuple[str, int]]:
  """(data field, size) of each non-empty component of the integration state."""
  layout = []
  for bit, name in STATE_FIELDS:
    size = mujoco.mj_stateSize(model, int(getattr(mujoco.mjtState, bit)))
    if size:
      layout.append((name, size))
  return layout


class CStates:
  """Each C-engine world's integration state (float64, exact: the float32
  tensors it shows mjlab round the state, which an exact replay cannot
  afford)."""

  exact = True

  def __init__(self, env: ManagerBasedRlEnv):
    self.env, self.sim = env, env.sim
    self.size = mujoco.mj_stateSize(env.sim.mj_model, INTEGRATION)
    if self.sim.expanded_fields:
      raise NotImplementedError("per-world model fields: states would need them too")

  def get(self) -> np.ndarray:
    """States [num_envs, size] (float64)."""
    return self.sim.get_state(INTEGRATION)

  def set(self, ids: list[int], states: np.ndarray) -> None:
    """Restore worlds ``ids`` and recompute their derived quantities."""
    self.sim.set_state(ids, states, INTEGRATION)
    invalidate_verdict(self.env, torch.as_tensor(ids, dtype=torch.long))


class WarpStates:
  """The same state vector from MuJoCo Warp's arrays (float32 values)."""

  exact = False

  def __init__(self, env: ManagerBasedRlEnv):
    self.env, self.sim = env, env.sim
    self.layout = state_layout(env.sim.mj_model)
    self.size = sum(size for _, size in self.layout)

  def get(self) -> np.ndarray:
    data, n = self.sim.data, self.sim.num_envs
    parts = [
      getattr(data, name).reshape(n, -1).to(torch.float64) for name, _ in self.layout
    ]
    return torch.cat(parts, dim=1).cpu().numpy()

  def set(self, ids: list[int], states: np.ndarray) -> None:
    data, offset = self.sim.data, 0
    rows = torch.tensor(ids, device=self.sim.device)
    for name, size in self.layout:
      field = getattr(data, name)
      values = torch.as_tensor(states[:, offset : offset + size], device=field.device)
      field[rows] = values.reshape(len(ids), *field.shape[1:]).to(field.dtype)
      offset += size
    self.sim.forward()
    invalidate_verdict(self.env, rows)


def world_copies(env: ManagerBasedRlEnv) -> list[mujoco.MjData]:
  """One ``MjData`` per world rebuilt from MuJoCo Warp's state (float32
  values, derived quantities recomputed by C MuJoCo's ``mj_forward``);
  writing into them changes nothing in the simulation."""
  model = env.sim.mj_model
  states = WarpStates(env).get()
  out = []
  for row in states:
    d = mujoco.MjData(model)
    mujoco.mj_setState(model, d, row, INTEGRATION)
    mujoco.mj_forward(model, d)
    out.append(d)
  return out
