"""Cube-in-tray MDP terms: the evaluator wired into mjlab, rewards, observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from mjlab.managers.termination_manager import TerminationTermCfg
from mjlab.utils.lab_api.math import matrix_from_quat

from evaluators.cube_tray import CubeTrayEvaluator, CubeTrayState, CubeTrayThresholds

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

SUCCESS_TERM = "success"


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


class CubeTraySuccess:
  """Termination term that owns the evaluator: updated once per env step.

  Terminations run before rewards and metrics in mjlab's step, so those terms
  read this step's verdict through ``cube_tray_verdict(env)``.
  """

  def __init__(self, cfg: TerminationTermCfg, env: ManagerBasedRlEnv):
    self._env = env
    self.names: CubeTrayNames = cfg.params.get("names", CubeTrayNames())
    thresholds = cfg.params.get("thresholds", CubeTrayThresholds())
    self.evaluator = CubeTrayEvaluator(env.num_envs, env.device, thresholds)
    self.evaluator.update(read_cube_tray_state(env, self.names), dt=0.0)

  def __call__(
    self,
    env: ManagerBasedRlEnv,
    names: CubeTrayNames | None = None,
    thresholds: CubeTrayThresholds | None = None,
  ) -> torch.Tensor:
    del names, thresholds  # Bound at construction.
    verdict = self.evaluator.update(read_cube_tray_state(env, self.names), env.step_dt)
    return verdict["success"]

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    self.evaluator.reset(env_ids)


def cube_tray_verdict(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """This step's verdict (see ``evaluators.cube_tray.CubeTrayEvaluator``)."""
  term = env.termination_manager.get_term_cfg(SUCCESS_TERM).func
  assert isinstance(term, CubeTraySuccess)
  return term.evaluator.verdict


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
