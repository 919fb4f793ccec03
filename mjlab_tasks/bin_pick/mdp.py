"""Bin-picking MDP terms: the delivery evaluator wired into mjlab, the
staged reward, the object observations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.utils.lab_api.math import quat_apply_inverse, quat_inv, quat_mul

from evaluators.bin_pick import (
  BinLayout,
  BinPickObjectState,
  DeliveryThresholds,
  evaluate_deliveries,
)
from mjlab_tasks.common.mdp import site_id
from mjlab_tasks.common.verdict import StateVerdictTerm, task_verdict, verdict_term

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

CLEARED_TERM = "bin_cleared"
VERDICT_TERM = "delivered_fraction"
"""The verdict term's name, the metric it logs."""


def robot_contact_sensor_name(object_name: str) -> str:
  return f"{object_name}_robot_contact"


def pad_contact_sensor_name(object_name: str) -> str:
  """Contact sensor between the two RG2 pads (one column each) and an object."""
  return f"{object_name}_pad_contact"


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


class BinPickVerdict(StateVerdictTerm):
  """The task's verdict term (``mjlab_tasks.common.verdict``): the delivery
  verdict of the current state, judged once per step when first read (the
  termination, before rewards and metrics) and again for environments reset
  since. As a metric: delivered / poured objects."""

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    super().__init__(cfg, env)
    self.layout: BinLayout = cfg.params["layout"]
    self.thresholds: DeliveryThresholds = cfg.params.get(
      "thresholds", DeliveryThresholds()
    )
    self.state: BinPickObjectState | None = None

  def judge(self, env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
    self.state = read_object_state(env)
    return evaluate_deliveries(self.state, self.layout, self.thresholds)

  def metric(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    return verdict["delivered_count"].float() / verdict["poured_count"].clamp_min(1)


def bin_cleared(env: ManagerBasedRlEnv, terminate: bool = True) -> torch.Tensor:
  """Termination: every poured object delivered, [num_envs] bool. Scoring
  tools pass ``terminate=False`` to keep a cleared scene and report it."""
  cleared = task_verdict(env)["bin_cleared"]
  return cleared if terminate else torch.zeros_like(cleared)


def bin_pick_objects(env: ManagerBasedRlEnv) -> BinPickObjectState:
  """The object state the current verdict was judged on."""
  term = verdict_term(env)
  term.verdict  # noqa: B018 - judged now if the state changed
  return term.state


def delivery_rule(env: ManagerBasedRlEnv) -> tuple[BinLayout, DeliveryThresholds]:
  """The layout and thresholds the task judges deliveries with (its config:
  available before the managers exist)."""
  params = env.cfg.metrics[VERDICT_TERM].params
  return params["layout"], params.get("thresholds", DeliveryThresholds())


def bin_cleared_flag(env: ManagerBasedRlEnv) -> torch.Tensor:
  return task_verdict(env)["bin_cleared"].float()


def delivered_any_flag(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Metric: 1 while at least one object is delivered, [num_envs]; its
  episode max says whether the episode delivered one at some step (what
  ``evaluate_binpick.py`` counts as an episode with a delivery)."""
  return (task_verdict(env)["delivered_count"] > 0).float()


# Per-object grasp and stage.


def objects_grasped(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Both RG2 pads touch the object (pad contact sensors), [num_envs, K] bool."""
  from mjlab_tasks.bin_pick.env_cfg import pourer

  found = [
    env.scene.sensors[pad_contact_sensor_name(n)].data.found.reshape(
      env.num_envs, 2, -1
    )
    for n in pourer(env).cfg.names
  ]
  return torch.stack([(f.sum(-1) > 0).all(-1) for f in found], dim=-1)


PINCH_MARGIN = 0.01
"""How far [m] the tool centre may lie outside a held object's bounding box
(body frame) for the object to count as pinched between the fingers."""


def objects_pinched(
  env: ManagerBasedRlEnv, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """Both pads touch the object and the tool centre lies within its bounding
  box padded by ``PINCH_MARGIN``, [num_envs, K] bool: the object sits between
  the fingers. Touches at the fingertips with the tool centre beside the
  object do not count (on cube-in-tray a reward paying any touch of both
  pads was kept that way and never lifted, docs/training.md)."""
  from mjlab_tasks.bin_pick.env_cfg import pourer

  p = pourer(env)
  state = bin_pick_objects(env)
  quats = torch.stack([env.scene[n].data.root_link_quat_w for n in p.cfg.names], 1)
  offset_w = _tool_position(env, tcp_site, robot)[:, None] - state.pos
  local = quat_apply_inverse(quats, offset_w)
  inside = (local.abs() <= p.extents + PINCH_MARGIN).all(-1)
  return objects_grasped(env) & inside


def _tool_position(env: ManagerBasedRlEnv, tcp_site: str, robot: str) -> torch.Tensor:
  """Tool centre point, env frame [num_envs, 3]."""
  return (
    env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)] - env.scene.env_origins
  )


# Stage levels of the object being worked on (ManiSkill-style normalized
# dense reward): each stage's best is below the next stage's worst, and a
# delivered object counts 1, more than any stage of an undelivered one, so
# delivering is worth more per step than holding an object anywhere.
REACH_MAX = 0.2
HELD_BASE, LIFT_GAIN, CARRY_GAIN, LOWER_GAIN = 0.3, 0.1, 0.2, 0.1  # 0.3 .. 0.7
PLACED_HELD = 0.75  # resting at the drop destination, still held
PLACED_RELEASED = 0.85  # resting there, released, not yet still


def object_stages(
  env: ManagerBasedRlEnv, tcp_site: str, rim_z: float, robot: str = "robot"
) -> torch.Tensor:
  """Progress in [0, 0.85] of every object towards delivery, [num_envs, K]:

  - not held: ``0.2 * reach`` (tool to object distance, a far and a near tanh);
  - held (pinched, ``objects_pinched``): 0.3, + 0.1 as its lowest point rises to the rim,
    + 0.2 as it comes over the drop destination, + 0.1 as it comes down to
    the table there (outside the bin);
  - resting on the table at the drop destination, held: 0.75; released: 0.85.
  """
  verdict, state = task_verdict(env), bin_pick_objects(env)
  drop = torch.tensor(delivery_rule(env)[0].drop_xy, device=env.device)
  dist = torch.linalg.vector_norm(
    state.pos - _tool_position(env, tcp_site, robot)[:, None], dim=-1
  )
  reach = 0.5 * (1 - torch.tanh(dist / 0.3)) + 0.5 * (1 - torch.tanh(dist / 0.03))
  lift = (state.lo[..., 2] / rim_z).clamp(0.0, 1.0)
  carry = 1 - torch.tanh(
    torch.linalg.vector_norm(state.pos[..., :2] - drop, dim=-1) / 0.15
  )
  at_drop = verdict["outside_bin"] & verdict["near_drop"]
  lower = at_drop.float() * (1 - torch.tanh(state.lo[..., 2].clamp_min(0.0) / 0.05))
  held = HELD_BASE + LIFT_GAIN * lift + CARRY_GAIN * carry + LOWER_GAIN * lower
  stage = torch.where(objects_pinched(env, tcp_site, robot), held, REACH_MAX * reach)
  placed = at_drop & verdict["supported"]
  stage = torch.where(placed & ~verdict["released"], PLACED_HELD, stage)
  return torch.where(placed & verdict["released"], PLACED_RELEASED, stage)


def bin_pick_progress(
  env: ManagerBasedRlEnv, tcp_site: str, rim_z: float, robot: str = "robot"
) -> torch.Tensor:
  """Staged dense reward in [0, 1], [num_envs]: (delivered objects + the best
  stage among the undelivered ones) / poured objects.

  Each delivered object adds 1 / poured; the object being worked on adds at
  most 0.85 / poured, so holding an object over the drop destination forever
  pays less per step than delivering it and reaching for the next. A cleared
  bin pays 1, the most, and is absorbing in the training configuration.
  """
  verdict = task_verdict(env)
  todo = ~verdict["delivered"] & objects_poured(env)
  stages = object_stages(env, tcp_site, rim_z, robot)
  best = torch.where(todo, stages, 0.0).amax(dim=-1)
  poured = verdict["poured_count"].clamp_min(1).float()
  return (verdict["delivered_count"].float() + best) / poured


def objects_poured(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Which object slots the current pour put in the bin, [num_envs, K] bool."""
  return bin_pick_objects(env).poured


# Observations and metrics.


def nearest_objects(
  env: ManagerBasedRlEnv, count: int, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """The ``count`` poured objects nearest the tool, undelivered first, as
  [num_envs, count * 12]: per slot the tool-to-object vector (3) and the
  object's orientation (4, w x y z) in the robot base frame, its bounding
  half extents (3), delivered (1) and present (1). Missing slots (fewer
  poured objects than ``count``) are zeros with present = 0.
  """
  from mjlab_tasks.bin_pick.env_cfg import pourer

  p = pourer(env)
  # Poses as the observation sees them (after the step's forward pass);
  # delivered as the step's verdict judged it.
  verdict, state = task_verdict(env), read_object_state(env)
  base = env.scene[robot].data.root_link_pose_w
  rel_w = state.pos - _tool_position(env, tcp_site, robot)[:, None]
  dist = torch.linalg.vector_norm(rel_w, dim=-1)
  delivered = verdict["delivered"] & state.poured
  key = dist + 10.0 * delivered + 100.0 * ~state.poured
  order = torch.argsort(key, dim=-1, stable=True)
  k = min(count, order.shape[1])
  pick = order[:, :k]
  base_q = base[:, None, 3:7].expand(-1, k, -1)
  rel_b = quat_apply_inverse(base_q, torch.gather(rel_w, 1, _idx(pick, 3)))
  quats = torch.stack([env.scene[n].data.root_link_quat_w for n in p.cfg.names], 1)
  quat_b = quat_mul(quat_inv(base_q), torch.gather(quats, 1, _idx(pick, 4)))
  extents = p.extents[pick]
  present = torch.gather(state.poured, 1, pick)
  slots = (
    torch.cat(
      [
        rel_b,
        quat_b,
        extents,
        torch.gather(delivered, 1, pick).float()[..., None],
        present.float()[..., None],
      ],
      dim=-1,
    )
    * present[..., None]
  )
  out = torch.zeros(env.num_envs, count, 12, device=env.device)
  out[:, :k] = slots
  return out.reshape(env.num_envs, count * 12)


def _idx(pick: torch.Tensor, width: int) -> torch.Tensor:
  return pick[..., None].expand(-1, -1, width)


def tool_to_drop_b(
  env: ManagerBasedRlEnv, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """From the tool to the drop destination on the table, robot base frame,
  [num_envs, 3]."""
  layout = delivery_rule(env)[0]
  drop = torch.tensor((*layout.drop_xy, layout.table_z), device=env.device)
  base = env.scene[robot].data.root_link_pose_w
  return quat_apply_inverse(base[:, 3:7], drop - _tool_position(env, tcp_site, robot))


def any_grasped(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Observation: 1 while both pads hold some object, [num_envs, 1]."""
  return objects_grasped(env).any(-1, keepdim=True).float()


def grasped_flag(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Metric: 1 while both pads hold some object, [num_envs]."""
  return objects_grasped(env).any(-1).float()


def pinched_flag(
  env: ManagerBasedRlEnv, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """Metric: 1 while some object is pinched between the fingers, [num_envs]."""
  return objects_pinched(env, tcp_site, robot).any(-1).float()


def lifted_flag(
  env: ManagerBasedRlEnv, rim_z: float, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """Metric: 1 while a pinched object's lowest point is above the rim,
  [num_envs]."""
  above = bin_pick_objects(env).lo[..., 2] > rim_z
  return (objects_pinched(env, tcp_site, robot) & above).any(-1).float()


def tool_object_distance(
  env: ManagerBasedRlEnv, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """Metric: distance from the tool to the nearest undelivered poured object
  [m], 0 when none is left, [num_envs]."""
  state, verdict = bin_pick_objects(env), task_verdict(env)
  todo = state.poured & ~verdict["delivered"]
  dist = torch.linalg.vector_norm(
    state.pos - _tool_position(env, tcp_site, robot)[:, None], dim=-1
  )
  nearest = torch.where(todo, dist, torch.inf).amin(dim=-1)
  return torch.where(todo.any(-1), nearest, 0.0)
