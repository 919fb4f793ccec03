"""Pushing glasses apart, as specified, as an mjlab task: give every glass room.

Task description:
  A crowded table of 7 to 10 drinking glasses (the examiner's tables: shapes,
  masses, packed places and hidden friction, docs/glass_push.md). The UR5 +
  closed RG2 pushes them with its hand (Cartesian delta-pose actions; the
  gripper is held closed) until every glass could be taken to the rack with
  room for both fingers. Physics 2 ms (the examiner's), policy 20 Hz.

Tables: environment ``i`` plays table ``tables[i % len(tables)]``; training
uses training tables (default 0-63), play the first 50 evaluation tables
(10000-10049). Each reset puts the table's glasses back on their drawn
places and the hand above the zone.

Observations: the actor reads what the examiner lets a solution read: the
noisy readings of every glass slot (``Examiner.look()``'s noise model), the
wrist force, the tool pose and how far the Cartesian action's target leads
the tool; never the friction or the true poses (the critic has both).

Verdicts (``rules/room.py``, batched): a glass is takeable
when it and then the others could be taken one after another with room,
without another push; toppled when tilted more than 30 degrees; knocked off
when it left the table top. Success: every glass takeable.
"""

from __future__ import annotations

from collections.abc import Sequence

from mjlab.envs import ManagerBasedRlEnvCfg
from mjlab.envs.mdp import rewards as mjlab_rewards
from mjlab.envs.mdp import terminations as mjlab_terms
from mjlab.managers.event_manager import EventTermCfg
from mjlab.managers.metrics_manager import MetricsTermCfg
from mjlab.managers.observation_manager import ObservationGroupCfg, ObservationTermCfg
from mjlab.managers.reward_manager import RewardTermCfg
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.managers.termination_manager import TerminationTermCfg
from mjlab.sensor import CameraSensorCfg

from assets.ur5_rg2 import GRIPPER_ACTUATOR_NAME, TCP_SITE_NAME
from mjlab_tasks.common import mdp as common_mdp
from mjlab_tasks.common.actions import GripperActionCfg
from mjlab_tasks.common.cameras import CAMERA_GROUP, camera_rgb
from mjlab_tasks.common.scene import ROBOT, make_robot_env_cfg
from mjlab_tasks.glass_push import mdp
from mjlab_tasks.glass_push.events import place_glasses
from mjlab_tasks.glass_push.hidden import PhysicsConfig
from mjlab_tasks.glass_push.physics import TIMESTEP
from mjlab_tasks.glass_push.scene import (
  GLASS_ENTITY,
  SLOTS,
  TABLE_ENTITY,
  glass_entity_cfg,
  robot_entity_cfg,
  table_spec,
)

TRAINING_POOL = tuple(range(0, 64))
TOP_VIEW_SENSOR = "top_view"
TOP_VIEW_SIZE = 384
PLAY_POOL = tuple(range(10_000, 10_050))
POLICY_DT = 0.05
SUCCESS_TERM = "table_cleared"
# Reward weights besides the task's own terms (docs/glass_push.md, measured
# at the start of training).
ACTION_RATE_WEIGHT = -0.001
TARGET_LEAD_WEIGHT = -0.05
ACTION_BOUNDS_WEIGHT = -0.01


def glass_push_env_cfg(
  play: bool = False,
  tables: Sequence[int] | None = None,
  num_envs: int = 1,
  physics: PhysicsConfig | None = None,
  end_on_success: bool = True,
  top_view: bool = False,
) -> ManagerBasedRlEnvCfg:
  """Glass-pushing environment.

  Args:
    play: Evaluation variant: evaluation tables, longer episodes.
    tables: The table pool (default: training tables 0-63, or 10000-10049
      with ``play``); environment ``i`` plays ``tables[i % len(tables)]``.
      Each table is drawn once per process (about 0.15 s each).
    num_envs: Number of parallel environments.
    physics: The hidden friction and, for tests, fixture glasses or an
      obstacle (``hidden.PhysicsConfig``; default: the examiner's).
    end_on_success: Success ends the episode.
    top_view: Add the examiner's top view as an image observation: group
      ``camera``, term ``top_view_rgb`` [N, 384, 384, 3] uint8 (750 mm above
      the zone, straight down, the arm not drawn). None by default: no
      camera sensor, nothing rendered.
  """
  from mjlab.entity import EntityCfg

  physics = physics or PhysicsConfig()
  friction = physics.friction
  if tables is None:
    tables = PLAY_POOL if play else TRAINING_POOL
  pool = tuple(int(t) for t in tables)
  if not pool:
    raise ValueError("the table pool is empty")
  entities = {
    TABLE_ENTITY: EntityCfg(spec_fn=lambda: table_spec(physics)),
    **{
      GLASS_ENTITY.format(slot=s): glass_entity_cfg(s, pool, physics)
      for s in range(SLOTS)
    },
  }
  cfg = make_robot_env_cfg(
    entities=entities, num_envs=num_envs, episode_length_s=60.0 if play else 30.0
  )
  cfg.scene.entities[ROBOT] = robot_entity_cfg(friction)
  cfg.scene.terrain = None  # the table entity is the ground (0.75 m above a floor)
  # The examiner's physics: 2 ms steps, 30 solver iterations, C MuJoCo's
  # line-search and convex-collision iteration counts.
  cfg.sim.mujoco.timestep = TIMESTEP
  cfg.sim.mujoco.iterations = 30
  cfg.sim.mujoco.ls_iterations = 50
  cfg.sim.mujoco.ccd_iterations = 35
  cfg.decimation = round(POLICY_DT / TIMESTEP)
  cfg.actions["gripper"] = GripperActionCfg(
    entity_name=ROBOT, tendon_name=GRIPPER_ACTUATOR_NAME, held_at=-1.0
  )
  p = {"pool": pool}
  tcp = {"asset_cfg": SceneEntityCfg(ROBOT, site_names=(TCP_SITE_NAME,))}
  actor = {
    "glasses": ObservationTermCfg(func=mdp.glass_readings, params=p),
    "wrist_force": ObservationTermCfg(func=common_mdp.wrist_force),
    "tcp_pose": ObservationTermCfg(func=common_mdp.site_pose_w, params=tcp),
    # The controller state the actions accumulate: a hand pressing on a glass
    # or the table holds its target ahead of it.
    "target_lead": ObservationTermCfg(func=common_mdp.target_lead_b),
  }
  critic = {
    "glasses": ObservationTermCfg(func=mdp.glass_readings, params=p | {"noisy": False}),
    "wrist_force": ObservationTermCfg(func=common_mdp.wrist_force),
    "tcp_pose": ObservationTermCfg(func=common_mdp.site_pose_w, params=tcp),
    "target_lead": ObservationTermCfg(func=common_mdp.target_lead_b),
    "glass_poses": ObservationTermCfg(func=mdp.glass_truth),
    "friction": ObservationTermCfg(
      func=mdp.friction,
      params={
        "coefficients": (friction.glass_table, friction.glass_glass, friction.pad_glass)
      },
    ),
  }
  cfg.observations = {
    "actor": ObservationGroupCfg(actor, enable_corruption=False),
    "critic": ObservationGroupCfg(critic, enable_corruption=False),
  }
  if top_view:
    cfg.scene.sensors = (*cfg.scene.sensors, top_view_sensor_cfg())
    cfg.observations[CAMERA_GROUP] = ObservationGroupCfg(
      {
        "top_view_rgb": ObservationTermCfg(
          func=camera_rgb, params={"sensor_name": TOP_VIEW_SENSOR}
        )
      },
      concatenate_terms=False,
      enable_corruption=False,
    )
  cfg.events["place_glasses"] = EventTermCfg(
    func=place_glasses, mode="reset", params=p | {"fixture": physics.glasses}
  )
  cfg.rewards = {
    "room_gained": RewardTermCfg(func=mdp.room_gained, weight=1.0, params=p),
    "glasses_lost": RewardTermCfg(func=mdp.glasses_lost, weight=-2.0, params=p),
    "hand_to_group": RewardTermCfg(
      func=mdp.hand_to_group,
      weight=0.1,
      params=p | {"tcp_site": TCP_SITE_NAME, "robot": ROBOT},
    ),
    "jam_force": RewardTermCfg(func=mdp.jam_force, weight=-0.5),
    "action_rate": RewardTermCfg(
      func=mjlab_rewards.action_rate_l2, weight=ACTION_RATE_WEIGHT
    ),
    # Shaping (as on cube-in-tray): a hand pressing on what it cannot move
    # (a glass that tips instead of sliding, a jammed group, the table) holds
    # the target 20 mm ahead of it, where no exploration noise backs it off;
    # actions beyond their useful range get no signal from the task.
    "target_lead": RewardTermCfg(
      func=common_mdp.target_lead, weight=TARGET_LEAD_WEIGHT
    ),
    "action_bounds": RewardTermCfg(
      func=common_mdp.action_beyond_bounds, weight=ACTION_BOUNDS_WEIGHT
    ),
  }
  cfg.terminations = {
    "time_out": TerminationTermCfg(func=mjlab_terms.time_out, time_out=True),
    "nan": TerminationTermCfg(func=mjlab_terms.nan_detection),
    "glass_toppled": TerminationTermCfg(func=mdp.glass_toppled, params=p),
    "glass_knocked_off": TerminationTermCfg(func=mdp.glass_knocked_off, params=p),
  }
  if end_on_success:
    cfg.terminations[SUCCESS_TERM] = TerminationTermCfg(
      func=mdp.table_cleared, params=p
    )
  cfg.metrics = {
    # The task's verdict (mjlab_tasks.common.verdict), logging the takeable rate.
    mdp.VERDICT_TERM: MetricsTermCfg(func=mdp.GlassVerdict, params=p, reduce="last"),
    "takeable_rate_at_start": MetricsTermCfg(
      func=mdp.takeable_rate_at_start, params=p, reduce="last"
    ),
    "success": MetricsTermCfg(func=mdp.cleared, params=p, reduce="max"),
    "toppled": MetricsTermCfg(
      func=mdp.verdict_any, params=p | {"key": "toppled"}, reduce="max"
    ),
    "knocked_off": MetricsTermCfg(
      func=mdp.verdict_any, params=p | {"key": "off"}, reduce="max"
    ),
  }
  return cfg


def top_view_sensor_cfg() -> CameraSensorCfg:
  """The examiner's ``top_view`` camera (on the table entity) as a sensor;
  geom groups 0 and 1 only: the arm (group 2) never hides a glass."""
  return CameraSensorCfg(
    name=TOP_VIEW_SENSOR,
    camera_name=f"{TABLE_ENTITY}/top_view",
    width=TOP_VIEW_SIZE,
    height=TOP_VIEW_SIZE,
    data_types=("rgb",),
    enabled_geom_groups=(0, 1),
  )
