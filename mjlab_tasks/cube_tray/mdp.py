"""Cube-in-tray MDP terms: the evaluator wired into mjlab, rewards, observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from mjlab.entity.data import compute_velocity_from_cvel
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.utils.lab_api.math import (
  matrix_from_quat,
  quat_apply_inverse,
  quat_inv,
  quat_mul,
)

from evaluators.cube_tray import CubeTrayEvaluator, CubeTrayState, CubeTrayThresholds
from mjlab_tasks.common.mdp import root_pos_w, root_quat_w, site_id
from mjlab_tasks.common.verdict import VerdictTerm, task_verdict, verdict_term
from mjlab_tasks.engine import sensor_fields

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
  cube_half: float = 0.02
  """Half the cube's edge [m]."""
  pad_sensors: tuple[str, str] = ("left_pad_cube", "right_pad_cube")
  """Contact sensors between each RG2 pad and the cube."""


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


@dataclass(frozen=True)
class ReadingSources:
  """Where the evaluator's inputs live: flat slices ``(field, start, stop)``
  of simulation data rows: cube pose, cvel and subtree centre of mass, tray
  position (19 columns), then the tray-floor force sensor block
  (``num_force`` columns) and the robot-contact sensor block. The Python
  path reads them from the data tensors, the compiled loop from each
  world's ``MjData`` after every physics step."""

  slices: tuple[tuple[str, int, int], ...]
  num_force: int


def reading_sources(env: ManagerBasedRlEnv, names: CubeTrayNames) -> ReadingSources:
  cube = env.scene[names.cube].indexing.root_body_id
  tray = env.scene[names.tray].indexing.root_body_id
  slices = [
    ("xpos", 3 * cube, 3 * cube + 3),
    ("xquat", 4 * cube, 4 * cube + 4),
    ("cvel", 6 * cube, 6 * cube + 6),
    ("subtree_com", 3 * cube, 3 * cube + 3),
    ("xpos", 3 * tray, 3 * tray + 3),
  ]
  num_force = 0
  for sensor, field in ((names.floor_sensor, "force"), (names.robot_sensor, "found")):
    for name, sensor_name in sensor_fields(env, sensor):
      if name == field:
        info = env.sim.mj_model.sensor(sensor_name)
        start, dim = int(info.adr[0]), int(info.dim[0])
        slices.append(("sensordata", start, start + dim))
        num_force += dim if field == "force" else 0
  return ReadingSources(tuple(slices), num_force)


def raw_from_sources(values: torch.Tensor, sources: ReadingSources) -> torch.Tensor:
  """Source values [N, K] to readings [N, 21]."""
  # The tray floor is level: the net contact force's vertical component is the
  # total normal force (contacts push, they never pull).
  end = 19 + sources.num_force
  normal_force = values[:, 19:end][:, 2::3].sum(dim=-1).abs()
  touching = values[:, end:].sum(dim=-1) > 0
  return torch.cat(
    [values[:, :19], normal_force[:, None], touching[:, None].to(values.dtype)], dim=-1
  )


def read_cube_tray_raw(
  env: ManagerBasedRlEnv, names: CubeTrayNames, sources: ReadingSources | None = None
) -> torch.Tensor:
  """The evaluator's inputs as read now, [num_envs, 21]: cube pose, cvel and
  subtree centre of mass, tray position, tray-floor normal force, robot
  contact. Few operations: this runs on every physics step."""
  sources = sources or reading_sources(env, names)
  data = env.sim.data
  values = torch.cat(
    [getattr(data, f).reshape(env.num_envs, -1)[:, a:b] for f, a, b in sources.slices],
    dim=-1,
  )
  return raw_from_sources(values, sources)


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


class CubeTrayVerdict(VerdictTerm):
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
  the verdict through ``task_verdict(env)`` (``mjlab_tasks.common.verdict``).
  """

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    if not cfg.per_substep:
      raise ValueError(f"{VERDICT_TERM!r} must be a per-substep metrics term")
    super().__init__(cfg, env)
    self.names: CubeTrayNames = cfg.params.get("names", CubeTrayNames())
    thresholds = cfg.params.get("thresholds", CubeTrayThresholds())
    self.evaluator = CubeTrayEvaluator(
      env.num_envs, env.device, env.physics_dt, thresholds
    )
    self._pending: list[torch.Tensor] = []  # [steps, num_envs, 21] blocks
    self._pending_steps = 0
    self._sources = reading_sources(env, self.names)
    self.evaluator.advance(read_cube_tray_state(env, self.names), count=False)

  def __call__(
    self,
    env: ManagerBasedRlEnv,
    names: CubeTrayNames | None = None,
    thresholds: CubeTrayThresholds | None = None,
  ) -> torch.Tensor:
    del names, thresholds  # Bound at construction.
    raw = read_cube_tray_raw(env, self.names, self._sources)
    self._add_pending(raw.unsqueeze(0))
    return raw[:, _RAW["robot_contact"]][:, 0]

  def substep_sources(self, env: ManagerBasedRlEnv) -> tuple[tuple[str, int, int], ...]:
    """What the compiled loop records after each physics step (compiled_control)."""
    del env
    return self._sources.slices

  def record_block(self, values: torch.Tensor) -> torch.Tensor:
    """Readings the compiled loop recorded after each of its physics steps,
    [steps, num_envs, K] (``substep_sources``): recorded as that many calls
    would; returns the metric of each step [steps, num_envs]."""
    steps, num_envs, width = values.shape
    raw = raw_from_sources(values.reshape(-1, width), self._sources)
    raw = raw.reshape(steps, num_envs, _RAW_WIDTH)
    self._add_pending(raw)
    return raw[..., _RAW["robot_contact"]][..., 0]

  def _add_pending(self, block: torch.Tensor) -> None:
    self._pending.append(block)
    self._pending_steps += block.shape[0]
    if self._pending_steps >= 1000:  # Nobody reads the verdict: keep memory flat.
      self.judge_pending()

  def judge_pending(self) -> None:
    """Judge the states recorded since the last call, in order."""
    if not self._pending:
      return
    raw = torch.cat(self._pending).reshape(-1, _RAW_WIDTH)  # time-major
    steps = self._pending_steps
    self._pending.clear()
    self._pending_steps = 0
    self.evaluator.advance_steps(cube_tray_state_from_raw(raw, self.names), steps)

  @property
  def verdict(self) -> dict[str, torch.Tensor]:
    self.judge_pending()
    return self.evaluator.verdict

  def state_changed(self, env_ids: torch.Tensor | slice | None = None) -> None:
    """A reset or restore starts the judging of ``env_ids`` anew."""
    self.judge_pending()
    self.evaluator.reset(env_ids)


def cube_tray_success(env: ManagerBasedRlEnv) -> torch.Tensor:
  """Termination: the cube settled in the tray for 0.5 s, [num_envs] bool."""
  return task_verdict(env)["success"]


def verdict_flag(env: ManagerBasedRlEnv, key: str) -> torch.Tensor:
  """One boolean of the verdict as a float [num_envs] (reward / metric term)."""
  return task_verdict(env)[key].float()


def cube_velocity(env: ManagerBasedRlEnv, cube: str = "cube") -> torch.Tensor:
  """Cube linear and angular velocity (world frame), [num_envs, 6]."""
  return env.scene[cube].data.root_link_vel_w


def cube_grasped(env: ManagerBasedRlEnv, names: CubeTrayNames) -> torch.Tensor:
  """Both RG2 pads touch the cube (the pad contact sensors), [num_envs] bool."""
  touching = [
    env.scene.sensors[name].data.found.reshape(env.num_envs, -1).sum(dim=-1) > 0
    for name in names.pad_sensors
  ]
  return touching[0] & touching[1]


PINCH_RADIUS = 0.03
"""Largest distance [m] of the tool centre (between the pads) from the cube
centre for a pinch: both pads touching a cube held at their tips or edges
is not one (measured: a policy paid for such touches kept them, never
lifting)."""


def cube_pinched(
  env: ManagerBasedRlEnv, names: CubeTrayNames, tcp_site: str, robot: str = "robot"
) -> torch.Tensor:
  """Both pads touch the cube and the cube sits between them (the tool
  centre within ``PINCH_RADIUS`` of its centre), [num_envs] bool."""
  tcp = env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)]
  near = torch.linalg.vector_norm(root_pos_w(env, names.cube) - tcp, dim=-1)
  return cube_grasped(env, names) & (near <= PINCH_RADIUS)


def grasp_state(env: ManagerBasedRlEnv, names: CubeTrayNames) -> torch.Tensor:
  """Observation: 1 while both pads touch the cube, else 0, [num_envs, 1]."""
  return cube_grasped(env, names).float().unsqueeze(-1)


# Reward levels of the stages (ManiSkill-style normalized dense reward): each
# stage's best is below the next stage's worst, and only a settled cube earns
# the maximum, so finishing is worth more per step than any stage before it.
REACH_MAX = 0.15
# Held, not over the tray: 0.25 .. 0.5; held over it: 0.5 .. 0.65.
GRASP_BASE, LIFT_GAIN, CARRY_GAIN = 0.25, 0.1, 0.15
OVER_BASE, LOWER_GAIN = 0.5, 0.15
OVERSHOOT = 0.1
"""Height [m] above the carry height at which lifting stops paying."""
LOWER_SPAN = 0.15
"""Height [m] over which lowering the held cube into the tray pays, from its
resting place up: it starts above the carry height, so a cube held high over
the tray is drawn down too."""
PUT_DOWN_HELD = 0.72  # resting in the tray, still held
RELEASED_BASE, CALM_GAIN = 0.8, 0.15  # released in the tray: 0.8 .. 0.95
SETTLED = 1.0
OVER_TRAY = 0.03
"""Largest per-axis offset [m] of the cube centre from the tray centre that
counts as over the footprint (an aligned 40 mm cube fits within 30 mm)."""


def _near_and_far(dist: torch.Tensor, near: float, far: float) -> torch.Tensor:
  """1 at ``dist`` 0, falling to 0: half a tanh at each scale, so the term
  has slope far from the target as well as close to it."""
  return 0.5 * (1 - torch.tanh(dist / far)) + 0.5 * (1 - torch.tanh(dist / near))


def cube_tray_progress(
  env: ManagerBasedRlEnv,
  tcp_site: str,
  names: CubeTrayNames = CubeTrayNames(),
  robot: str = "robot",
  carry_height: float = 0.07,
) -> torch.Tensor:
  """Staged dense reward in [0, 1], [num_envs].

  - reach (cube not held): ``0.15 * reach``, ``reach`` in [0, 1] from the
    tool to cube distance (a far and a near tanh, so it has slope at the
    start distance of 0.3 to 0.45 m as well as near the cube);
  - held (pinched, ``cube_pinched``): 0.25, plus up to 0.1 as the cube rises
    from the table to ``carry_height`` above the tray floor (over the walls;
    less again above it, nothing from ``OVERSHOOT`` higher),
    plus up to 0.15 as it comes over the tray centre (a far and a near
    tanh, 0.3 m and 50 mm: the last centimetres before the footprint pay
    too; at 20 mm the cube was held 5 to 20 cm off, measured). Carrying
    pays for the horizontal distance only (a 3-D distance to a point over
    the tray left a cube carried higher with no pull to the centre:
    measured, carried past the tray at 15 cm), and it pays a cube not yet
    lifted as well (paid only times the lift, it slowed the first carries:
    no cube over the tray in 700 iterations against 40 % without);
  - held over the footprint (``OVER_TRAY``): 0.5, plus up to 0.15 as it
    comes down to the floor (from ``LOWER_SPAN`` above it), times how well
    it is centred (1 at the centre, 0 at ``OVER_TRAY`` from it);
  - resting in the tray, still held: 0.72;
  - resting in the tray, released: 0.8, rising to 0.95 as the settling clock
    runs;
  - settled (the evaluator's conditions held for 0.5 s, now): 1.0.

  Each stage's best is below the next stage's worst, and the later stages
  are spaced widest: they are the ones exploration finds last. A policy
  that holds the cube over the tray forever earns at most 0.65 per step;
  letting go leads to 1.0 per step. The settled state is absorbing in the
  training configuration (success does not end the episode), so its value
  is the largest of any state.
  """
  verdict = task_verdict(env)
  tcp = env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)]
  cube = root_pos_w(env, names.cube)
  tray = root_pos_w(env, names.tray)
  reach = _near_and_far(torch.linalg.vector_norm(cube - tcp, dim=-1), 0.03, 0.3)
  floor = tray[:, 2] + names.tray_floor_top + names.cube_half  # resting centre
  carry_z = floor + carry_height
  table = env.scene.env_origins[:, 2] + names.cube_half
  # Rising to the carry height pays; rising above it pays less again (a
  # policy paid for height alone lifted the cube to 0.5 m, out of reach of
  # the tray: measured).
  lift = ((cube[:, 2] - table) / (carry_z - table)).clamp(0.0, 1.0)
  lift = lift - ((cube[:, 2] - carry_z) / OVERSHOOT).clamp(0.0, 1.0)
  to_tray = torch.linalg.vector_norm(cube[:, :2] - tray[:, :2], dim=-1)
  carry = _near_and_far(to_tray, 0.05, 0.3)
  over = (cube[:, :2] - tray[:, :2]).abs().amax(dim=-1) <= OVER_TRAY
  lower = (1 - (cube[:, 2] - floor) / LOWER_SPAN).clamp(0.0, 1.0)
  # Lowering pays in full only with the cube centred: off centre, a finger
  # comes down on a wall (measured: cubes held over the footprint, never
  # lowered).
  centred = (1 - to_tray / OVER_TRAY).clamp(0.0, 1.0)
  held = torch.where(
    over,
    OVER_BASE + LOWER_GAIN * lower * centred,
    GRASP_BASE + LIFT_GAIN * lift + CARRY_GAIN * carry,
  )
  pinched = cube_pinched(env, names, tcp_site, robot)
  reward = torch.where(pinched, held, REACH_MAX * reach)
  in_tray = verdict["contained"] & verdict["supported"]
  reward = torch.where(in_tray & ~verdict["released"], PUT_DOWN_HELD, reward)
  evaluator_steps = verdict_term(env).evaluator.required_steps
  calm = (verdict["calm_steps"].float() / evaluator_steps).clamp(max=1.0)
  released = RELEASED_BASE + CALM_GAIN * calm
  reward = torch.where(in_tray & verdict["released"], released, reward)
  return torch.where(verdict["settled"], SETTLED, reward)


def relative_position_b(
  env: ManagerBasedRlEnv,
  source: str,
  target: str,
  robot: str = "robot",
  target_offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
  source_site: str | None = None,
) -> torch.Tensor:
  """Vector from ``source`` (an entity, or a site of the robot) to ``target``
  (an entity, plus an offset in the world frame), in the robot base frame,
  [num_envs, 3]."""
  if source_site is not None:
    start = env.sim.data.site_xpos[:, site_id(env, source_site, robot)]
  else:
    start = root_pos_w(env, source)
  end = root_pos_w(env, target)
  if any(target_offset):
    end = end + torch.tensor(target_offset, device=env.device)
  return quat_apply_inverse(root_quat_w(env, robot), end - start)


def cube_quat_b(
  env: ManagerBasedRlEnv, cube: str = "cube", robot: str = "robot"
) -> torch.Tensor:
  """The cube's orientation in the robot base frame (w, x, y, z), [num_envs, 4]."""
  return quat_mul(quat_inv(root_quat_w(env, robot)), root_quat_w(env, cube))


def cube_yaw_to_tool(
  env: ManagerBasedRlEnv, tcp_site: str, cube: str = "cube", robot: str = "robot"
) -> torch.Tensor:
  """The turn about world z [rad] that lines the tool's closing axis up with
  a pair of the cube's faces, the nearest of the quarter turns, in
  [-pi/4, pi/4), [num_envs, 1]. The cube is square under quarter turns: its
  quaternion alone leaves a policy to learn that symmetry."""
  sid = site_id(env, tcp_site, robot)
  tool_x = env.sim.data.site_xmat[:, sid].reshape(-1, 3, 3)[:, :, 0]
  cube_x = matrix_from_quat(root_quat_w(env, cube))[:, :, 0]
  turn = torch.atan2(cube_x[:, 1], cube_x[:, 0]) - torch.atan2(
    tool_x[:, 1], tool_x[:, 0]
  )
  quarter = torch.pi / 2
  return (torch.remainder(turn + quarter / 2, quarter) - quarter / 2).unsqueeze(-1)


def tool_cube_distance(
  env: ManagerBasedRlEnv, tcp_site: str, cube: str = "cube", robot: str = "robot"
) -> torch.Tensor:
  """Metric: distance from the tool centre point to the cube centre [m], [num_envs]."""
  tcp = env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)]
  return torch.linalg.vector_norm(root_pos_w(env, cube) - tcp, dim=-1)


STAGES = ("reached", "grasped", "lifted", "over_tray", "in_tray", "released")
"""The task's stages in order, as training metrics (each an episode's max)."""


def stage_flag(
  env: ManagerBasedRlEnv,
  stage: str,
  tcp_site: str,
  names: CubeTrayNames = CubeTrayNames(),
  robot: str = "robot",
) -> torch.Tensor:
  """Metric: 1 while the task is at ``stage`` or past it, [num_envs]:

  - reached: the tool centre within 30 mm of the cube centre;
  - grasped: pinched (``cube_pinched``: both pads on it, the tool centre
    within 30 mm of its centre);
  - lifted: held, its centre 20 mm above its resting height on the table;
  - over_tray: held, its centre over the footprint (``OVER_TRAY``);
  - in_tray: contained and supported by the tray floor (the evaluator's);
  - released: in the tray and no robot body touching it.
  """
  if stage in ("in_tray", "released"):
    verdict = task_verdict(env)
    flag = verdict["contained"] & verdict["supported"]
    if stage == "released":
      flag = flag & verdict["released"]
    return flag.float()
  cube = root_pos_w(env, names.cube)
  if stage == "reached":
    tcp = env.sim.data.site_xpos[:, site_id(env, tcp_site, robot)]
    return (torch.linalg.vector_norm(cube - tcp, dim=-1) <= PINCH_RADIUS).float()
  held = cube_pinched(env, names, tcp_site, robot)
  if stage == "grasped":
    return held.float()
  if stage == "lifted":
    table = env.scene.env_origins[:, 2] + names.cube_half
    return (held & (cube[:, 2] > table + 0.02)).float()
  if stage == "over_tray":
    tray = root_pos_w(env, names.tray)
    over = (cube[:, :2] - tray[:, :2]).abs().amax(dim=-1) <= OVER_TRAY
    return (held & over).float()
  raise ValueError(f"unknown stage {stage!r}; stages: {STAGES}")
