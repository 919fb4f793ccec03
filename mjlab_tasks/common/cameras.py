"""Image observations: the wrist D415 and a fixed scene camera, on both engines.

A task opts in with ``cameras=("wrist",)`` or ``("wrist", "scene")``. Each
requested camera becomes an mjlab ``CameraSensorCfg`` and its images become
terms of a separate observation group, ``"camera"`` (terms not concatenated),
so the state groups (``actor``, ``critic``) are unchanged and a state-only run
creates no camera sensor and renders nothing.

=========  ===================  ==============================  =========
camera     sensor               terms (``obs["camera"][...]``)  size W x H
=========  ===================  ==============================  =========
wrist      ``wrist_d415``       ``wrist_rgb``, ``wrist_depth``  320 x 180
scene      ``scene_camera``     ``scene_rgb``                   320 x 240
=========  ===================  ==============================  =========

RGB is uint8 ``[num_envs, H, W, 3]``; depth float32 ``[num_envs, H, W, 1]`` in
metres along the optical axis, 0 where nothing is hit. MuJoCo Warp renders
them through mjlab's camera sensor; the C engine through
``mjlab_tasks.engine.c_cameras`` (OpenGL), with the same data interface.

The glass task's 384 x 384 top view is not one of these names: GlassPush adds
it itself (``glass_push_env_cfg(top_view=True)`` in
``mjlab_tasks/glass_push/env_cfg.py``).

``image_randomization_events`` gives the seeded randomization image policies
need (off unless a task asks for it): light, table and object colours, wrist
camera pose jitter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch
from mjlab.envs.mdp import dr
from mjlab.managers.event_manager import EventTermCfg, requires_model_fields
from mjlab.managers.observation_manager import ObservationGroupCfg, ObservationTermCfg
from mjlab.managers.scene_entity_config import SceneEntityCfg
from mjlab.sensor import CameraSensorCfg

from assets.ur5_rg2 import (
  D415_IMAGE_SIZE,
  D415_MOUNT_POS_TOLERANCE,
  D415_MOUNT_ROT_TOLERANCE_DEG,
)

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg

CAMERA_GROUP = "camera"
CAMERA_NAMES = ("wrist", "scene")
WRIST_SENSOR = "wrist_d415"
SCENE_SENSOR = "scene_camera"
SCENE_IMAGE_SIZE = (320, 240)  # W x H, 4:3.
# Geom groups the cameras see: scene, objects and robot; the camera's own
# housing and the collision proxies (groups 3, 4) stay out of its picture.
CAMERA_GEOM_GROUPS = (0, 1, 2)


@dataclass(frozen=True)
class SceneView:
  """The scene camera as a MuJoCo free camera (look-at point, distance,
  azimuth and elevation [deg]) in the environment frame (the robot base's);
  the ``scene_camera`` sensor sits at ``eye``."""

  lookat: tuple[float, float, float]  # Env frame [m].
  distance: float  # [m]
  azimuth: float
  elevation: float
  fovy: float = 45.0  # MuJoCo's default free-camera field of view [deg].

  @property
  def eye(self) -> tuple[float, float, float]:
    """Camera position, env frame [m] (MuJoCo's free-camera convention)."""
    az, el = np.radians(self.azimuth), np.radians(self.elevation)
    forward = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    return tuple(float(v) for v in np.asarray(self.lookat) - self.distance * forward)

  @property
  def quat(self) -> tuple[float, float, float, float]:
    """Camera orientation (w, x, y, z) looking from ``eye`` at ``lookat``."""
    return look_at_quat(self.eye, self.lookat)


def look_at_quat(eye, target) -> tuple[float, float, float, float]:
  """MuJoCo camera quaternion (w, x, y, z) looking from ``eye`` at ``target``."""
  forward = np.subtract(target, eye)
  forward /= np.linalg.norm(forward)
  z = -forward  # Cameras look along their -z.
  x = np.cross([0.0, 0.0, 1.0], z)
  x /= np.linalg.norm(x)
  y = np.cross(z, x)
  quat = np.zeros(4)
  mujoco.mju_mat2Quat(quat, np.stack([x, y, z], axis=1).ravel())
  return tuple(float(v) for v in quat)


def resolve_cameras(cameras: bool | str | Sequence[str] | None) -> tuple[str, ...]:
  """Camera names from a task option: a tuple of names, ``"wrist,scene"``,
  ``True`` (both, as the older boolean option meant) or ``False``/``None``."""
  if cameras is None or cameras is False:
    return ()
  if cameras is True:
    return CAMERA_NAMES
  names = cameras.split(",") if isinstance(cameras, str) else list(cameras)
  names = [n.strip() for n in names if n.strip()]
  unknown = [n for n in names if n not in CAMERA_NAMES]
  if unknown:
    raise ValueError(f"Unknown camera(s) {unknown}; available: {list(CAMERA_NAMES)}.")
  return tuple(n for n in CAMERA_NAMES if n in names)  # Canonical order.


def camera_sensor_cfgs(
  cameras: Sequence[str],
  scene_view: SceneView,
  robot: str = "robot",
  base_pose: tuple[Sequence[float], Sequence[float]] = ((0, 0, 0), (1, 0, 0, 0)),
) -> tuple[CameraSensorCfg, ...]:
  """The sensors of the requested cameras (none for an empty request).

  Args:
    cameras: Camera names (``resolve_cameras``).
    scene_view: Where the scene camera looks from, in the environment frame.
    robot: Robot entity name.
    base_pose: The robot base's position and quaternion (w, x, y, z) in the
      environment frame (its initial state): the scene camera rides on the
      base, so that every environment sees its own scene (a world-fixed
      camera would see the world origin, where environments are not).
  """
  sensors = []
  if "wrist" in cameras:
    width, height = D415_IMAGE_SIZE
    sensors.append(
      CameraSensorCfg(
        name=WRIST_SENSOR,
        camera_name=f"{robot}/wrist_d415",
        width=width,
        height=height,
        data_types=("rgb", "depth"),
        enabled_geom_groups=CAMERA_GEOM_GROUPS,
      )
    )
  if "scene" in cameras:
    width, height = SCENE_IMAGE_SIZE
    pos_b, quat_b = _in_frame(base_pose, scene_view.eye, scene_view.quat)
    sensors.append(
      CameraSensorCfg(
        name=SCENE_SENSOR,
        parent_body=f"{robot}/base",
        pos=pos_b,
        quat=quat_b,
        fovy=scene_view.fovy,
        width=width,
        height=height,
        data_types=("rgb",),
        enabled_geom_groups=CAMERA_GEOM_GROUPS,
      )
    )
  return tuple(sensors)


def _in_frame(frame, pos, quat) -> tuple[tuple[float, ...], tuple[float, ...]]:
  """A pose given in the environment frame, expressed in ``frame`` (a pose
  in the environment frame)."""
  frame_pos, frame_quat = np.asarray(frame[0], float), np.asarray(frame[1], float)
  inverse = np.zeros(4)
  mujoco.mju_negQuat(inverse, frame_quat)
  pos_f, quat_f = np.zeros(3), np.zeros(4)
  mujoco.mju_rotVecQuat(pos_f, np.asarray(pos, float) - frame_pos, inverse)
  mujoco.mju_mulQuat(quat_f, inverse, np.asarray(quat, float))
  return tuple(float(v) for v in pos_f), tuple(float(v) for v in quat_f)


def camera_rgb(env: ManagerBasedRlEnv, sensor_name: str) -> torch.Tensor:
  """RGB image [num_envs, H, W, 3] uint8 of a camera sensor."""
  rgb = env.scene[sensor_name].data.rgb
  assert rgb is not None, f"camera '{sensor_name}' renders no RGB"
  return rgb


def camera_depth(env: ManagerBasedRlEnv, sensor_name: str) -> torch.Tensor:
  """Depth image [num_envs, H, W, 1] float32 [m] along the optical axis
  (0 where no geometry is hit)."""
  depth = env.scene[sensor_name].data.depth
  assert depth is not None, f"camera '{sensor_name}' renders no depth"
  return depth


def camera_observations(cameras: Sequence[str]) -> ObservationGroupCfg:
  """The ``camera`` group: one term per image, kept apart (images of different
  sizes cannot be concatenated, and a policy reads them by name)."""
  terms: dict[str, ObservationTermCfg] = {}
  if "wrist" in cameras:
    wrist = {"sensor_name": WRIST_SENSOR}
    terms["wrist_rgb"] = ObservationTermCfg(func=camera_rgb, params=wrist)
    terms["wrist_depth"] = ObservationTermCfg(func=camera_depth, params=wrist)
  if "scene" in cameras:
    scene = {"sensor_name": SCENE_SENSOR}
    terms["scene_rgb"] = ObservationTermCfg(func=camera_rgb, params=scene)
  return ObservationGroupCfg(terms, concatenate_terms=False, enable_corruption=False)


def add_cameras(
  cfg: ManagerBasedRlEnvCfg,
  cameras: Sequence[str],
  scene_view: SceneView,
  robot: str = "robot",
) -> None:
  """Add the sensors and the ``camera`` observation group (nothing when no
  camera is requested). The wrist camera needs the robot built with its D415."""
  if not cameras:
    return
  base = cfg.scene.entities[robot].init_state
  cfg.scene.sensors = (
    *cfg.scene.sensors,
    *camera_sensor_cfgs(cameras, scene_view, robot, (base.pos, base.rot)),
  )
  cfg.observations[CAMERA_GROUP] = camera_observations(cameras)


@dataclass(frozen=True)
class ImageRandomizationCfg:
  """Ranges of the randomization image policies need (drawn at every reset
  from torch's generator, which mjlab seeds with the environment's seed)."""

  light_diffuse: tuple[float, float] = (0.3, 1.0)
  """Diffuse intensity of the scene light (grey; 0.7 by default)."""
  light_tilt: float = 0.3
  """Offset added to the x and y of the (directional) light's unit direction,
  which points down: tilts of up to about 23 degrees."""
  table_shade: tuple[float, float] = (0.4, 1.0)
  """Table colour: per-channel factor on the table's checker texture."""
  object_rgb: tuple[float, float] = (0.05, 0.95)
  """Object colour channels (opaque)."""
  camera_pos: float = D415_MOUNT_POS_TOLERANCE
  """Wrist camera position jitter per axis [m] (mount tolerance, assets)."""
  camera_rot_deg: float = D415_MOUNT_ROT_TOLERANCE_DEG
  """Wrist camera rotation jitter about each axis [deg] (mount tolerance)."""


@requires_model_fields("light_diffuse")
def light_intensity(
  env: ManagerBasedRlEnv,
  env_ids: torch.Tensor | None,
  asset_cfg: SceneEntityCfg,
  intensity: tuple[float, float],
) -> None:
  """Grey diffuse light of a drawn intensity per environment (mjlab's
  ``dr.light_diffuse`` draws each colour channel on its own: tinted light)."""
  if env_ids is None:
    env_ids = torch.arange(env.num_envs, device=env.device)
  lights = env.scene[asset_cfg.name].indexing.light_ids[asset_cfg.light_ids]
  env_ids = env_ids.to(lights)
  level = torch.empty(len(env_ids), 1, 1, device=env.device).uniform_(*intensity)
  diffuse = env.sim.model.light_diffuse
  grid = torch.meshgrid(env_ids, lights, indexing="ij")
  diffuse[grid] = level.expand(-1, len(lights), 3)


def image_randomization_events(
  objects: dict[str, str | tuple[str, ...]],
  cameras: Sequence[str],
  cfg: ImageRandomizationCfg | None = None,
  robot: str = "robot",
  terrain: str = "terrain",
) -> dict[str, EventTermCfg]:
  """mjlab domain-randomization events (reset mode) for image policies.

  Args:
    objects: Entity name -> geom name pattern(s) whose colour is drawn (one
      colour per entity and environment).
    cameras: The task's cameras; the wrist pose jitter only with ``"wrist"``.
    cfg: Ranges (defaults: ``ImageRandomizationCfg()``).
    robot: Robot entity (owns the wrist camera).
    terrain: Terrain entity (owns the light ``sun`` and the table material).
  """
  cfg = cfg or ImageRandomizationCfg()
  events = {
    "image_light": EventTermCfg(
      func=light_intensity,
      mode="reset",
      params={
        "asset_cfg": SceneEntityCfg(terrain, light_names=(".*",)),
        "intensity": cfg.light_diffuse,
      },
    ),
    "image_light_dir": EventTermCfg(
      func=dr.light_dir,
      mode="reset",
      params={
        "asset_cfg": SceneEntityCfg(terrain, light_names=(".*",)),
        "ranges": (-cfg.light_tilt, cfg.light_tilt),
        "operation": "add",
        "axes": [0, 1],
      },
    ),
    "image_table": EventTermCfg(
      func=dr.mat_rgba,
      mode="reset",
      params={
        "asset_cfg": SceneEntityCfg(terrain, material_names=(".*",)),
        "ranges": cfg.table_shade,
        "axes": [0, 1, 2],
      },
    ),
  }
  for name, geoms in objects.items():
    events[f"image_colour_{name}"] = EventTermCfg(
      func=dr.geom_rgba,
      mode="reset",
      params={
        "asset_cfg": SceneEntityCfg(name, geom_names=geoms),
        "ranges": cfg.object_rgb,
        "axes": [0, 1, 2],
        "shared_random": True,  # One colour per object, whatever its parts.
      },
    )
  if "wrist" in cameras:
    camera = SceneEntityCfg(robot, camera_names=("wrist_d415",))
    angle = math.radians(cfg.camera_rot_deg)
    events["image_camera_pos"] = EventTermCfg(
      func=dr.cam_pos,
      mode="reset",
      params={
        "asset_cfg": camera,
        "ranges": (-cfg.camera_pos, cfg.camera_pos),
        "operation": "add",
      },
    )
    events["image_camera_rot"] = EventTermCfg(
      func=dr.cam_quat,
      mode="reset",
      params={
        "asset_cfg": camera,
        "roll_range": (-angle, angle),
        "pitch_range": (-angle, angle),
        "yaw_range": (-angle, angle),
      },
    )
  return events
