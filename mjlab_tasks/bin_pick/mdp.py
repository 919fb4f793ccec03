"""Bin-picking MDP terms: the delivery evaluator wired into mjlab."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from mjlab.managers.termination_manager import TerminationTermCfg

from evaluators.bin_pick import (
  BinLayout,
  BinPickObjectState,
  DeliveryThresholds,
  evaluate_deliveries,
)

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

CLEARED_TERM = "bin_cleared"


def robot_contact_sensor_name(object_name: str) -> str:
  return f"{object_name}_robot_contact"


def read_object_state(env: ManagerBasedRlEnv) -> BinPickObjectState:
  """Every object slot's bounds, pose, speed and robot contact [B, K, ...]."""
  from mjlab_tasks.bin_pick.env_cfg import object_bounds, pourer

  p = pourer(env)
  names = p.cfg.names
  bounds = [object_bounds(env, n) for n in names]
  origins = env.scene.env_origins.unsqueeze(1)
  data = [env.scene[n].data for n in names]
  contact = torch.stack(
    [
      env.scene.sensors[robot_contact_sensor_name(n)]
      .data.found.reshape(env.num_envs, -1)
      .sum(-1)
      > 0
      for n in names
    ],
    dim=-1,
  )
  return BinPickObjectState(
    lo=torch.stack([b[0] for b in bounds], dim=1),
    hi=torch.stack([b[1] for b in bounds], dim=1),
    pos=torch.stack([d.root_link_pos_w for d in data], dim=1) - origins,
    lin_vel=torch.stack([d.root_link_lin_vel_w for d in data], dim=1),
    ang_vel=torch.stack([d.root_link_ang_vel_w for d in data], dim=1),
    robot_contact=contact,
    poured=p.in_bin,
  )


class BinCleared:
  """Termination term that owns the delivery verdict, updated every env step.

  Terminations run before rewards and metrics in mjlab's step, so those terms
  read this step's verdict through ``bin_pick_verdict(env)``.
  """

  def __init__(self, cfg: TerminationTermCfg, env: ManagerBasedRlEnv):
    self.layout: BinLayout = cfg.params["layout"]
    self.thresholds: DeliveryThresholds = cfg.params.get(
      "thresholds", DeliveryThresholds()
    )
    self.terminate: bool = cfg.params.get("terminate", True)
    self.verdict = evaluate_deliveries(
      read_object_state(env), self.layout, self.thresholds
    )

  def __call__(
    self,
    env: ManagerBasedRlEnv,
    layout: BinLayout | None = None,
    thresholds: DeliveryThresholds | None = None,
    terminate: bool = True,
  ) -> torch.Tensor:
    del layout, thresholds, terminate  # Bound at construction.
    self.verdict = evaluate_deliveries(
      read_object_state(env), self.layout, self.thresholds
    )
    if not self.terminate:  # Scoring tools keep a cleared scene to report it.
      return torch.zeros_like(self.verdict["bin_cleared"])
    return self.verdict["bin_cleared"]

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    """Stateless: the verdict depends on the current step only."""


def bin_pick_verdict(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """This step's verdict (see ``evaluators.bin_pick.evaluate_deliveries``)."""
  term = env.termination_manager.get_term_cfg(CLEARED_TERM).func
  assert isinstance(term, BinCleared)
  return term.verdict


def delivered_fraction(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Delivered / poured objects [num_envs] (reward and metric)."""
  verdict = bin_pick_verdict(env)
  return verdict["delivered_count"].float() / verdict["poured_count"].clamp_min(1)


def bin_cleared_flag(env: ManagerBasedRlEnv) -> torch.Tensor:
  return bin_pick_verdict(env)["bin_cleared"].float()
