"""Cube-in-tray MDP terms: the evaluator wired into mjlab, rewards, observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from mjlab.entity.data import compute_velocity_from_cvel
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.utils.lab_api.math import matrix_from_quat

from evaluators.cube_tray import CubeTrayEvaluator, CubeTrayState, CubeTrayThresholds

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

SUCCESS_TERM = "success"
VERDICT_TERM = "robot_contact_fraction"
"""The metrics term that owns the evaluator (it records every physics substep)."""


@dataclass(frozen=True)
class CubeTrayNames:
  """Scene names the cube-tray terms read (set by the env factory)."""

  cube: str = "cube"
  tray: str = "tray"
  floor_sensor: str = "cube_tray_floor"
  robot_sensor: str = "cube_robot_contact"
  tray_floor_top: float = 0.005
  """Height of the tray floor's top surface above the tray origin [m]."""


# Columns of one raw reading of the evaluator's inputs, as read from the
# simulation (poses, cvel, sensors); turned into a state in batches.
_RAW = {
  "cube_pos": slice(0, 3),
  "cube_quat": slice(3, 7),
  "cube_cvel": slice(7, 13),
  "cube_com": slice(13, 16),
  "tray_pos": slice(16, 19),
  "floor_force": slice(19, 20),
  "robot_contact": slice(20, 21),
}
_RAW_WIDTH = 21


def read_cube_tray_raw(env: ManagerBasedRlEnv, names: CubeTrayNames) -> torch.Tensor:
  """The evaluator's inputs as read now, [num_envs, 21]: cube pose, cvel and
  subtree centre of mass, tray position, tray-floor normal force, robot
  contact. Few operations: this runs on every physics step."""
  data = env.sim.data
  cube = env.scene[names.cube].indexing.root_body_id
  tray = env.scene[names.tray].indexing.root_body_id
  floor = env.scene.sensors[names.floor_sensor].data
  robot = env.scene.sensors[names.robot_sensor].data
  # The tray floor is level: the net contact force's vertical component is the
  # total normal force (contacts push, they never pull).
  normal_force = floor.force[..., 2].reshape(env.num_envs, -1).sum(dim=-1).abs()
  touching = robot.found.reshape(env.num_envs, -1).sum(dim=-1) > 0
  return torch.cat(
    [
      data.xpos[:, cube],
      data.xquat[:, cube],
      data.cvel[:, cube],
      data.subtree_com[:, cube],
      data.xpos[:, tray],
      normal_force[:, None],
      touching[:, None].to(normal_force.dtype),
    ],
    dim=-1,
  )


def cube_tray_state_from_raw(raw: torch.Tensor, names: CubeTrayNames) -> CubeTrayState:
  """Readings [N, 21] (any number of rows) to the evaluator's state."""
  col = {key: raw[:, sl] for key, sl in _RAW.items()}
  vel = compute_velocity_from_cvel(col["cube_pos"], col["cube_com"], col["cube_cvel"])
  return CubeTrayState(
    cube_pos_w=col["cube_pos"],
    cube_rot_w=matrix_from_quat(col["cube_quat"]),
    cube_lin_vel_w=vel[:, :3],
    cube_ang_vel_w=vel[:, 3:],
    tray_pos_w=col["tray_pos"],
    tray_floor_z=col["tray_pos"][:, 2] + names.tray_floor_top,
    floor_normal_force=col["floor_force"][:, 0],
    robot_contact=col["robot_contact"][:, 0] > 0.5,
  )


def read_cube_tray_state(env: ManagerBasedRlEnv, names: CubeTrayNames) -> CubeTrayState:
  """Everything the evaluator needs, read from simulated state and contacts."""
  return cube_tray_state_from_raw(read_cube_tray_raw(env, names), names)


class CubeTrayVerdict:
  """Owns the evaluator and judges every physics substep (a metrics term).

  mjlab's only per-substep hook is ``MetricsTermCfg(per_substep=True)``: the
  manager calls this after each ``mj_step`` inside the decimation loop, so
  the settling clock sees every simulated state and a break shorter than a
  policy step still restarts it. After ``mj_step`` the derived quantities
  (poses, ``cvel``, contacts) all describe the state that step started
  from, so each call reads one consistent state, every state once, in order.
  A call only records the raw reading; the recorded states are judged
  together (``CubeTrayEvaluator.advance_steps``, the same verdict as one by
  one) when the verdict is read, which keeps the per-substep cost to a few
  tensor copies. As a metric it reports the fraction of physics steps in
  which the robot touches the cube. Terminations, rewards and scripts read
  the verdict through ``cube_tray_verdict(env)``.
  """

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    if not cfg.per_substep:
      raise ValueError(f"{VERDICT_TERM!r} must be a per-substep metrics term")
    self.names: CubeTrayNames = cfg.params.get("names", CubeTrayNames())
    thresholds = cfg.params.get("thresholds", CubeTrayThresholds())
    self.evaluator = CubeTrayEvaluator(
      env.num_envs, env.device, env.physics_dt, thresholds
    )
    self._pending: list[torch.Tensor] = []
    self.evaluator.advance(read_cube_tray_state(env, self.names), count=False)

  def __call__(
    self,
    env: ManagerBasedRlEnv,
    names: CubeTrayNames | None = None,
    thresholds: CubeTrayThresholds | None = None,
  ) -> torch.Tensor:
    del names, thresholds  # Bound at construction.
    raw = read_cube_tray_raw(env, self.names)
    self._pending.append(raw)
    if len(self._pending) >= 1000:  # Nobody reads the verdict: keep memory flat.
      self.judge_pending()
    return raw[:, _RAW["robot_contact"]][:, 0]

  def judge_pending(self) -> None:
    """Judge the states recorded since the last call, in order."""
    if not self._pending:
      return
    raw = torch.stack(self._pending).reshape(-1, _RAW_WIDTH)  # time-major
    steps = len(self._pending)
    self._pending.clear()
    self.evaluator.advance_steps(cube_tray_state_from_raw(raw, self.names), steps)

  @property
  def verdict(self) -> dict[str, torch.Tensor]:
    self.judge_pending()
    return self.evaluator.verdict

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    self.judge_pending()
    self.evaluator.reset(env_ids)


def cube_tray_verdict(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """The latest physics step's verdict (``evaluators.cube_tray``)."""
  term = env.metrics_manager.cfg[VERDICT_TERM].func
  assert isinstance(term, CubeTrayVerdict)
  return term.verdict


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
