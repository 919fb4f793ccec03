"""Cube in tray, as specified: place a 40 mm cube wholly inside a 100 x 100 mm tray.

Task description:
  A UR5 + RG2 picks a 40 mm, 50 g cube from the table and puts it down inside
  a tray whose inner footprint is 100 x 100 mm, aligned with world X/Y, then
  lets go. Physics 1 kHz, policy 20 Hz.

Randomizations (each reset):
  - cube position x in [0.40, 0.55] m, y in [-0.25, -0.05] m, yaw in [-pi, pi);
  - tray position x in [0.40, 0.55] m, y in [0.08, 0.25] m (yaw fixed: the
    tray stays aligned with world X/Y, as the evaluator assumes).
  - with ``image_randomization`` (image policies): light, table, cube and
    tray colours, and the wrist camera's pose within its mount tolerance.

Success conditions (``evaluators/cube_tray.py``): the whole cube inside the
footprint, supported by the tray floor (contact force > 0.01 N and bottom
within 2 mm), released by the robot, slower than 0.01 m/s and 0.1 rad/s, all
of it held for 0.5 s of continuous simulated time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import mujoco
from mjlab.entity import EntityCfg
from mjlab.envs import ManagerBasedRlEnvCfg
from mjlab.envs.mdp import events as mjlab_events
from mjlab.envs.mdp import rewards as mjlab_rewards
from mjlab.envs.mdp import terminations as mjlab_terms
from mjlab.managers.event_manager import EventTermCfg
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.managers.observation_manager import ObservationGroupCfg, ObservationTermCfg
from mjlab.managers.reward_manager import RewardTermCfg
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.managers.termination_manager import TerminationTermCfg
from mjlab.sensor import ContactMatch, ContactSensorCfg
from mjlab.utils.noise import UniformNoiseCfg

from assets.ur5_rg2 import PAD_GEOM_NAMES, TCP_SITE_NAME
from mjlab_tasks.common import mdp as common_mdp
from mjlab_tasks.common.cameras import (
  SceneView,
  add_cameras,
  image_randomization_events,
  resolve_cameras,
)
from mjlab_tasks.common.props import open_box_spec
from mjlab_tasks.common.scene import (
  ROBOT,
  cube_entity_cfg,
  make_robot_env_cfg,
  robot_observations,
)
from mjlab_tasks.cube_tray import mdp
from mjlab_tasks.cube_tray.mdp import SUCCESS_TERM, VERDICT_TERM, CubeTrayNames

CUBE_HALF = 0.02
CUBE_MASS = 0.05
TRAY_INNER_HALF = 0.05
TRAY_WALL = 0.005
TRAY_WALL_HEIGHT = 0.03
TRAY_FLOOR = 0.005  # Floor thickness; its top is TRAY_FLOOR above the tray origin.
# Cube centre height above the tray floor that the reward's carry stage aims
# for: its bottom 20 mm above the wall tops.
CARRY_HEIGHT = TRAY_WALL_HEIGHT + 0.02 + CUBE_HALF

# Nominal (play / reference) placements and the randomization ranges.
CUBE_NOMINAL = (0.45, -0.15)
TRAY_NOMINAL = (0.45, 0.15)
CUBE_RANGE = {"x": (0.40, 0.55), "y": (-0.25, -0.05), "yaw": (-3.14159, 3.14159)}
TRAY_RANGE = {"x": (0.40, 0.55), "y": (0.08, 0.25)}
# The scene camera: from +x, facing the robot, over both placement ranges.
SCENE_VIEW = SceneView(
  lookat=(0.3, 0.0, 0.25), distance=1.3, azimuth=180.0, elevation=-35.0
)


def tray_spec() -> mujoco.MjSpec:
  """Tray: floor plus four walls, inner footprint 2 * TRAY_INNER_HALF square."""
  inner = 2 * TRAY_INNER_HALF
  return open_box_spec(
    "tray",
    inner,
    inner,
    TRAY_WALL_HEIGHT,
    TRAY_WALL,
    TRAY_FLOOR,
    (0.55, 0.45, 0.3, 1.0),
  )


def _offsets_from_nominal(
  ranges: dict[str, tuple[float, float]], nominal: tuple[float, float]
) -> dict[str, tuple[float, float]]:
  """Absolute x/y ranges as offsets from the nominal placement (yaw unchanged)."""
  offsets = dict(ranges)
  for axis, centre in zip(("x", "y"), nominal, strict=True):
    lo, hi = ranges[axis]
    offsets[axis] = (lo - centre, hi - centre)
  return offsets


def cube_tray_env_cfg(
  play: bool = False,
  arm_action: Literal["cartesian", "joint"] = "cartesian",
  randomize: bool = True,
  num_envs: int = 1,
  end_on_success: bool = True,
  cameras: str | Sequence[str] = (),
  image_randomization: bool = False,
) -> ManagerBasedRlEnvCfg:
  """Cube-in-tray environment.

  Args:
    play: Evaluation variant: no observation noise, longer episodes.
    arm_action: ``"cartesian"`` for policies, ``"joint"`` for joint-space experts.
    randomize: Randomize cube and tray poses at reset (else the nominal case).
    num_envs: Number of parallel environments.
    end_on_success: Success ends the episode (evaluation). The training
      configuration sets False: the settled state is then absorbing and pays
      the most per step until the time-out, so finishing is worth more than
      any other behaviour (see ``mdp.cube_tray_progress``).
    cameras: Image observations (``mjlab_tasks.common.cameras``): ``("wrist",)``,
      ``("wrist", "scene")`` or ``"wrist,scene"``, in the ``camera``
      observation group. The wrist camera mounts the D415 on the hand (as on
      BinPick; its 102 g change the arm's load). None by default: no camera
      sensor, nothing rendered.
    image_randomization: Draw light, table, cube and tray colours and the
      wrist camera's pose jitter at every reset (seeded; needs cameras).
  """
  cameras = resolve_cameras(cameras)
  if image_randomization and not cameras:
    raise ValueError("image_randomization needs cameras.")
  names = CubeTrayNames(tray_floor_top=TRAY_FLOOR, cube_half=CUBE_HALF)
  cfg = make_robot_env_cfg(
    entities={
      names.cube: cube_entity_cfg(
        half_size=CUBE_HALF, mass=CUBE_MASS, pos=(*CUBE_NOMINAL, CUBE_HALF)
      ),
      names.tray: EntityCfg(
        init_state=EntityCfg.InitialStateCfg(pos=(*TRAY_NOMINAL, 0.0)),
        spec_fn=tray_spec,
      ),
    },
    arm_action=arm_action,
    with_camera="wrist" in cameras,
    num_envs=num_envs,
    episode_length_s=20.0 if play else 12.0,
  )
  cfg.scene.sensors = (
    *cfg.scene.sensors,
    ContactSensorCfg(
      name=names.floor_sensor,
      primary=ContactMatch(mode="body", pattern="cube", entity=names.cube),
      secondary=ContactMatch(mode="geom", pattern="tray_floor", entity=names.tray),
      fields=("found", "force"),
      reduce="netforce",
    ),
    ContactSensorCfg(
      name=names.robot_sensor,
      primary=ContactMatch(mode="body", pattern="cube", entity=names.cube),
      secondary=ContactMatch(mode="subtree", pattern="base", entity=ROBOT),
      fields=("found",),
      reduce="none",
    ),
    *(
      ContactSensorCfg(
        name=sensor,
        primary=ContactMatch(mode="geom", pattern=pad, entity=ROBOT),
        secondary=ContactMatch(mode="body", pattern="cube", entity=names.cube),
        fields=("found",),
        reduce="none",
      )
      for sensor, pad in zip(names.pad_sensors, PAD_GEOM_NAMES, strict=True)
    ),
  )

  cube_cfg = SceneEntityCfg(names.cube)
  tray_cfg = SceneEntityCfg(names.tray)
  noise = None if play else UniformNoiseCfg(n_min=-0.002, n_max=0.002)
  actor = robot_observations()
  # Task vectors in the robot base frame (as mjlab's lift-cube task):
  # tool to cube, cube to its resting place at the tray centre, the cube's
  # orientation (the grasp needs its yaw), and whether both pads hold it.
  actor["tcp_to_cube"] = ObservationTermCfg(
    func=mdp.relative_position_b,
    params={"source": ROBOT, "source_site": TCP_SITE_NAME, "target": names.cube},
    noise=noise,
  )
  actor["cube_to_goal"] = ObservationTermCfg(
    func=mdp.relative_position_b,
    params={
      "source": names.cube,
      "target": names.tray,
      "target_offset": (0.0, 0.0, TRAY_FLOOR + CUBE_HALF),
    },
    noise=noise,
  )
  actor["cube_quat"] = ObservationTermCfg(
    func=mdp.cube_quat_b, params={"cube": names.cube}
  )
  actor["cube_yaw_to_tool"] = ObservationTermCfg(
    func=mdp.cube_yaw_to_tool, params={"tcp_site": TCP_SITE_NAME, "cube": names.cube}
  )
  actor["grasped"] = ObservationTermCfg(func=mdp.grasp_state, params={"names": names})
  if arm_action == "cartesian":
    actor["target_lead"] = ObservationTermCfg(func=common_mdp.target_lead_b)
  critic = {
    k: ObservationTermCfg(func=v.func, params=v.params) for k, v in actor.items()
  }
  critic["cube_pose"] = ObservationTermCfg(
    func=common_mdp.root_pose, params={"asset_cfg": cube_cfg}
  )
  critic["tray_pose"] = ObservationTermCfg(
    func=common_mdp.root_pose, params={"asset_cfg": tray_cfg}
  )
  critic["cube_velocity"] = ObservationTermCfg(
    func=mdp.cube_velocity, params={"cube": names.cube}
  )
  cfg.observations = {
    "actor": ObservationGroupCfg(actor, enable_corruption=not play),
    "critic": ObservationGroupCfg(critic, enable_corruption=False),
  }

  if randomize:
    for name, ranges, nominal in (
      (names.cube, CUBE_RANGE, CUBE_NOMINAL),
      (names.tray, TRAY_RANGE, TRAY_NOMINAL),
    ):
      cfg.events[f"randomize_{name}"] = EventTermCfg(
        func=mjlab_events.reset_root_state_uniform,
        mode="reset",
        params={
          "pose_range": _offsets_from_nominal(ranges, nominal),
          "velocity_range": {},
          "asset_cfg": SceneEntityCfg(name),
        },
      )

  add_cameras(cfg, cameras, SCENE_VIEW, robot=ROBOT)
  if image_randomization:
    cfg.events.update(
      image_randomization_events(
        {names.cube: ".*", names.tray: ".*"}, cameras, robot=ROBOT
      )
    )

  cfg.terminations = {
    "time_out": TerminationTermCfg(func=mjlab_terms.time_out, time_out=True),
    "nan": TerminationTermCfg(func=mjlab_terms.nan_detection),
  }
  if end_on_success:
    cfg.terminations[SUCCESS_TERM] = TerminationTermCfg(func=mdp.cube_tray_success)
  cfg.rewards = {
    "progress": RewardTermCfg(
      func=mdp.cube_tray_progress,
      weight=1.0,
      params={
        "tcp_site": TCP_SITE_NAME,
        "names": names,
        "robot": ROBOT,
        "carry_height": CARRY_HEIGHT,
      },
    ),
    "action_rate": RewardTermCfg(func=mjlab_rewards.action_rate_l2, weight=-0.001),
    # Shaping against two traps seen in training: a gripper command driven
    # far past -1 (no exploration noise opens it to release) and, below, a
    # tool pressing the grasped cube into the table (its target held 20 mm
    # below it, so no exploration lifts).
    "action_bounds": RewardTermCfg(func=common_mdp.action_beyond_bounds, weight=-0.05),
  }
  if arm_action == "cartesian":
    cfg.rewards["target_lead"] = RewardTermCfg(
      func=common_mdp.target_lead, weight=-0.05
    )
  cfg.metrics = {
    # Owns the evaluator: mjlab calls it after every physics substep.
    VERDICT_TERM: MetricsTermCfg(
      func=mdp.CubeTrayVerdict, params={"names": names}, per_substep=True
    ),
    "success": MetricsTermCfg(
      func=mdp.verdict_flag, params={"key": "success"}, reduce="max"
    ),
    **{
      stage: MetricsTermCfg(
        func=mdp.stage_flag,
        params={"stage": stage, "tcp_site": TCP_SITE_NAME, "names": names},
        reduce="max",
      )
      for stage in mdp.STAGES
    },
    "tool_cube_distance": MetricsTermCfg(
      func=mdp.tool_cube_distance,
      params={"tcp_site": TCP_SITE_NAME, "cube": names.cube, "robot": ROBOT},
      reduce="mean",
    ),
  }
  return cfg
