"""Cube-in-tray MDP terms: the evaluator wired into mjlab, rewards, observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.utils.lab_api.math import matrix_from_quat

from evaluators.cube_tray import CubeTrayEvaluator, CubeTrayState, CubeTrayThresholds

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

SUCCESS_TERM = "success"
VERDICT_TERM = "placed_time_fraction"
"""The metrics term that owns the evaluator (judged every physics substep)."""


@dataclass(frozen=True)
class CubeTrayNames:
  """Scene names the cube-tray terms read (set by the env factory)."""

  cube: str = "cube"
  tray: str = "tray"
  floor_sensor: str = "cube_tray_floor"
  robot_sensor: str = "cube_robot_contact"
  tray_floor_top: float = 0.005
  """Height of the tray floor's top surface above the tray origin [m]."""


def read_cube_tray_state(env: ManagerBasedRlEnv, names: CubeTrayNames) -> CubeTrayState:
  """Everything the evaluator needs, read from simulated state and contacts."""
  cube, tray = env.scene[names.cube], env.scene[names.tray]
  floor = env.scene.sensors[names.floor_sensor].data
  robot = env.scene.sensors[names.robot_sensor].data
  tray_pos = tray.data.root_link_pos_w
  # The tray floor is level: the net contact force's vertical component is the
  # total normal force (contacts push, they never pull).
  normal_force = floor.force[..., 2].reshape(env.num_envs, -1).sum(dim=-1).abs()
  return CubeTrayState(
    cube_pos_w=cube.data.root_link_pos_w,
    cube_rot_w=matrix_from_quat(cube.data.root_link_quat_w),
    cube_lin_vel_w=cube.data.root_link_lin_vel_w,
    cube_ang_vel_w=cube.data.root_link_ang_vel_w,
    tray_pos_w=tray_pos,
    tray_floor_z=tray_pos[:, 2] + names.tray_floor_top,
    floor_normal_force=normal_force,
    robot_contact=robot.found.reshape(env.num_envs, -1).sum(dim=-1) > 0,
  )


class CubeTrayVerdict:
  """Owns the evaluator and judges every physics substep (a metrics term).

  mjlab's only per-substep hook is ``MetricsTermCfg(per_substep=True)``: the
  manager calls this after each ``mj_step`` inside the decimation loop, so
  the settling clock sees every simulated state and a break shorter than a
  policy step still restarts it. After ``mj_step`` the derived quantities
  (poses, velocities, contacts) all describe the state that step started
  from, so each call judges one consistent state, every state once, in order.
  As a metric it reports the fraction of physics steps the cube was placed.
  Terminations, rewards and scripts read the verdict through
  ``cube_tray_verdict(env)``.
  """

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    if not cfg.per_substep:
      raise ValueError(f"{VERDICT_TERM!r} must be a per-substep metrics term")
    self.names: CubeTrayNames = cfg.params.get("names", CubeTrayNames())
    thresholds = cfg.params.get("thresholds", CubeTrayThresholds())
    self.evaluator = CubeTrayEvaluator(
      env.num_envs, env.device, env.physics_dt, thresholds
    )
    self.evaluator.update(read_cube_tray_state(env, self.names), advance=False)

  def __call__(
    self,
    env: ManagerBasedRlEnv,
    names: CubeTrayNames | None = None,
    thresholds: CubeTrayThresholds | None = None,
  ) -> torch.Tensor:
    del names, thresholds  # Bound at construction.
    return self.evaluator.update(read_cube_tray_state(env, self.names))[
      "placed"
    ].float()

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    self.evaluator.reset(env_ids)


def cube_tray_verdict(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """The latest physics step's verdict (``evaluators.cube_tray``)."""
  term = env.metrics_manager.cfg[VERDICT_TERM].func
  assert isinstance(term, CubeTrayVerdict)
  return term.evaluator.verdict


def cube_tray_success(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Termination: the cube settled in the tray for 0.5 s, [num_envs] bool."""
  return cube_tray_verdict(env)["success"]


def verdict_flag(env: ManagerBasedRlEnv, key: str) -> torch.Tensor:
  """One boolean of the verdict as a float [num_envs] (reward / metric term)."""
  return cube_tray_verdict(env)[key].float()


def reach_cube(
  env: ManagerBasedRlEnv,
  tcp_site: str,
  robot: str = "robot",
  cube: str = "cube",
  std: float = 0.1,
) -> torch.Tensor:
  """1 - tanh(distance(tool, cube) / std), [num_envs]."""
  entity = env.scene[robot]
  site_id = entity.indexing.site_ids[entity.find_sites(tcp_site)[0][0]]
  tcp = env.sim.data.site_xpos[:, site_id]
  dist = torch.linalg.vector_norm(env.scene[cube].data.root_link_pos_w - tcp, dim=-1)
  return 1.0 - torch.tanh(dist / std)


def cube_to_tray(
  env: ManagerBasedRlEnv, cube: str = "cube", tray: str = "tray", std: float = 0.1
) -> torch.Tensor:
  """1 - tanh(horizontal distance(cube, tray centre) / std), [num_envs]."""
  delta = env.scene[cube].data.root_link_pos_w - env.scene[tray].data.root_link_pos_w
  return 1.0 - torch.tanh(torch.linalg.vector_norm(delta[:, :2], dim=-1) / std)


def cube_lifted(
  env: ManagerBasedRlEnv, cube: str = "cube", min_height: float = 0.04
) -> torch.Tensor:
  """1 when the cube centre is ``min_height`` above its resting height."""
  z = env.scene[cube].data.root_link_pos_w[:, 2] - env.scene.env_origins[:, 2]
  return (z > 0.02 + min_height).float()


def cube_velocity(env: ManagerBasedRlEnv, cube: str = "cube") -> torch.Tensor:
  """Cube linear and angular velocity (world frame), [num_envs, 6]."""
  return env.scene[cube].data.root_link_vel_w
