"""Camera sensors on the C MuJoCo engine: MuJoCo's OpenGL renderer, offscreen.

``CSensorContext`` stands in for ``mjlab.sensor.SensorContext`` (MuJoCo
Warp's render context) when ``c_engine.make_env`` builds an environment: the
scene creates it for its camera sensors, ``CMujocoSimulation.sense()`` renders
every world into it, and mjlab's ``CameraSensor`` reads it through the same
``get_rgb`` / ``get_depth`` calls, so the sensor data (and every observation
term reading it) is shaped and typed as on MuJoCo Warp: RGB uint8
``[num_envs, H, W, 3]``, depth float32 ``[num_envs, H, W, 1]`` in metres along
the optical axis, 0 where no geometry is hit.

One OpenGL context renders every camera (a viewport per camera size), world
after world; RGB and depth come from one pass. What MuJoCo Warp's ray tracer
does not draw is turned off here as well (shadows, reflections, haze, sites,
tendons, geom groups the sensor excludes), so the two engines show the same
scene; the shading models still differ (docs/cameras.md gives the measured
difference).
"""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch

from mjlab_tasks.common.gl import open_gl_context
from mjlab_tasks.engine import copy_model

if TYPE_CHECKING:
  from collections.abc import Sequence

  from mjlab.sensor.camera_sensor import CameraSensor

# OpenGL clamps the summed lighting at 1 before it modulates a surface's
# colour; MuJoCo Warp's ray tracer sums the lights, multiplies and clamps the
# result. Lights drawn at 1/LIGHT_HEADROOM of their intensity and pixels
# scaled back up give Warp's sum for totals up to LIGHT_HEADROOM (the suite's
# scenes reach 1.6, 1.9 with randomized lights) at the cost of one bit of RGB.
# What lights do not scale would come out twice as bright: material emission
# and a skybox, which the suite's scenes do not have.
LIGHT_HEADROOM = 2.0
_LIGHT_FIELDS = ("light_ambient", "light_diffuse", "light_specular")


class CSensorContext:
  """mjlab's ``SensorContext`` interface for camera sensors, rendered by
  MuJoCo's OpenGL renderer on the C engine (constructed by mjlab's scene)."""

  def __init__(
    self,
    mj_model: mujoco.MjModel,
    model,
    data,
    camera_sensors: Sequence[CameraSensor],
    raycast_sensors: Sequence,
    device: str,
  ):
    del model, device
    if raycast_sensors:
      raise NotImplementedError(
        "Raycast sensors need MuJoCo Warp's ray caster; use --engine warp."
      )
    self.camera_sensors = sorted(camera_sensors, key=lambda s: s.camera_idx)
    self.raycast_sensors: list = []
    self._check_sensors()
    num_envs = data.nworld
    self._rgb: dict[int, torch.Tensor] = {}
    self._depth: dict[int, torch.Tensor] = {}
    for s in self.camera_sensors:
      w, h = s.cfg.width, s.cfg.height
      if "rgb" in s.cfg.data_types:
        self._rgb[s.camera_idx] = torch.zeros((num_envs, h, w, 3), dtype=torch.uint8)
      if "depth" in s.cfg.data_types:
        self._depth[s.camera_idx] = torch.zeros((num_envs, h, w, 1))
    width = max(s.cfg.width for s in self.camera_sensors)
    height = max(s.cfg.height for s in self.camera_sensors)
    # A model of its own: per-world colours and lights are written into it
    # before each world is drawn.
    self._model = copy_model(mj_model)
    # The offscreen buffer as large as the largest camera (not the model's
    # 1920 x 1080 for videos), single-sampled as MuJoCo Warp's one ray per
    # pixel.
    self._model.vis.global_.offwidth = width
    self._model.vis.global_.offheight = height
    self._model.vis.quality.offsamples = 0
    use_shadows = bool(self.camera_sensors[0].cfg.use_shadows)
    if not use_shadows:
      self._model.vis.quality.shadowsize = 0  # Its map alone takes ~250 MB.
    self._lights = {f: getattr(mj_model, f).copy() for f in _LIGHT_FIELDS}
    headlight = self._model.vis.headlight
    for part in (headlight.ambient, headlight.diffuse, headlight.specular):
      part[:] = np.asarray(part) / LIGHT_HEADROOM
    self._gl = open_gl_context(width, height)
    # After the backend's own exit handler (EGL terminates its display),
    # so this one runs first: contexts freed later fail noisily.
    this = weakref.ref(self)
    atexit.register(lambda: this() is not None and this().close())
    self._mjr = mujoco.MjrContext(self._model, mujoco.mjtFontScale.mjFONTSCALE_100)
    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._mjr)
    self._mjr.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
    self._scene = mujoco.MjvScene(self._model, maxgeom=10_000)
    self._option = self._scene_option(self.camera_sensors[0].cfg.enabled_geom_groups)
    self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = use_shadows
    for flag in (mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_HAZE):
      self._scene.flags[flag] = False
    self._buffers = {
      (s.cfg.width, s.cfg.height): (
        np.empty((s.cfg.height, s.cfg.width, 3), dtype=np.uint8),
        np.empty((s.cfg.height, s.cfg.width), dtype=np.float32),
      )
      for s in self.camera_sensors
    }
    for sensor in self.camera_sensors:
      sensor.set_context(self)

  # mjlab's SensorContext interface.

  @property
  def has_cameras(self) -> bool:
    return bool(self.camera_sensors)

  @property
  def has_raycasts(self) -> bool:
    return False

  def recreate(self, mj_model, expanded_fields=None) -> None:
    """Nothing to rebuild: expanded fields are read at every render."""

  def prepare(self) -> None:
    """Nothing to prepare (no rays)."""

  def finalize(self) -> None:
    # Fresh frames: drop camera data cached by a read before sensing.
    for sensor in self.camera_sensors:
      sensor._invalidate_cache()

  def get_rgb(self, cam_idx: int) -> torch.Tensor:
    """RGB [num_envs, H, W, 3] uint8 of MuJoCo camera ``cam_idx``."""
    return self._image(self._rgb, cam_idx, "RGB")

  def get_depth(self, cam_idx: int) -> torch.Tensor:
    """Depth [num_envs, H, W, 1] float32 [m] of MuJoCo camera ``cam_idx``."""
    return self._image(self._depth, cam_idx, "depth")

  def get_segmentation(self, cam_idx: int) -> torch.Tensor:
    raise NotImplementedError("Segmentation images need MuJoCo Warp (--engine warp).")

  # Rendering.

  def render(
    self, worlds: Sequence[mujoco.MjData], expanded: dict[str, torch.Tensor]
  ) -> None:
    """Draw every camera of every world from its current kinematics."""
    self._gl.make_current()
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
    extent = self._model.stat.extent
    near = np.float64(np.float32(self._model.vis.map.znear * extent))
    far = np.float64(np.float32(self._model.vis.map.zfar * extent))
    for i, d in enumerate(worlds):
      for field, values in expanded.items():
        np.copyto(getattr(self._model, field), values[i].numpy())
      for field, values in self._lights.items():
        value = expanded[field][i].numpy() if field in expanded else values
        np.copyto(getattr(self._model, field), value / LIGHT_HEADROOM)
      for s in self.camera_sensors:
        w, h = s.cfg.width, s.cfg.height
        rgb, depth = self._buffers[(w, h)]
        want_rgb, want_depth = s.camera_idx in self._rgb, s.camera_idx in self._depth
        camera.fixedcamid = s.camera_idx
        # The scene's camera first: mjv_updateScene adds the geoms before it
        # updates the camera, and places infinite planes (the floor) by the
        # camera it holds, so they would be placed by the previous picture's
        # camera (whole texture periods away: the same picture up to rounding).
        mujoco.mjv_updateCamera(self._model, d, camera, self._scene)
        mujoco.mjv_updateScene(
          self._model,
          d,
          self._option,
          None,
          camera,
          mujoco.mjtCatBit.mjCAT_ALL,
          self._scene,
        )
        rect = mujoco.MjrRect(0, 0, w, h)
        mujoco.mjr_render(rect, self._scene, self._mjr)
        mujoco.mjr_readPixels(
          rgb if want_rgb else None, depth if want_depth else None, rect, self._mjr
        )
        # OpenGL rows run bottom to top.
        if want_rgb:
          lit = np.minimum(rgb[::-1] * LIGHT_HEADROOM, 255.0)
          self._rgb[s.camera_idx][i].numpy()[:] = lit.astype(np.uint8)
        if want_depth:
          self._depth[s.camera_idx][i, ..., 0].numpy()[:] = _metric_depth(
            depth[::-1], near, far
          )

  def close(self) -> None:
    """Free the OpenGL resources (again at exit: mjlab's environment does not
    close its simulation)."""
    if self._gl is None:
      return
    self._gl.make_current()
    self._mjr.free()
    self._gl.free()
    self._gl = self._mjr = None

  # Internals.

  def _check_sensors(self) -> None:
    ref = self.camera_sensors[0].cfg
    for s in self.camera_sensors:
      if "segmentation" in s.cfg.data_types:
        raise NotImplementedError(
          f"Camera '{s.cfg.name}': segmentation images need MuJoCo Warp "
          "(--engine warp)."
        )
      # MuJoCo Warp's constraint as well: one set of render settings.
      for key in ("use_shadows", "enabled_geom_groups"):
        if getattr(s.cfg, key) != getattr(ref, key):
          raise ValueError(
            f"All camera sensors must share {key}: '{s.cfg.name}' differs "
            f"from '{ref.name}'."
          )
      if s.cfg.orthographic:
        raise NotImplementedError(
          f"Camera '{s.cfg.name}': orthographic cameras are not supported on "
          "the C engine."
        )

  @staticmethod
  def _scene_option(groups: Sequence[int]) -> mujoco.MjvOption:
    option = mujoco.MjvOption()
    option.geomgroup[:] = [g in groups for g in range(len(option.geomgroup))]
    # Decorations MuJoCo Warp's renderer does not draw.
    option.sitegroup[:] = 0
    option.flags[mujoco.mjtVisFlag.mjVIS_TENDON] = False
    return option

  def _image(self, images: dict[int, torch.Tensor], cam_idx: int, kind: str):
    if cam_idx not in images:
      raise RuntimeError(f"Camera ID {cam_idx} does not have {kind} rendering enabled.")
    return images[cam_idx]


def _metric_depth(raw: np.ndarray, near: float, far: float) -> np.ndarray:
  """OpenGL reversed-Z depth buffer values to metres along the optical axis
  (as ``mujoco.Renderer`` converts them); 0 where nothing was drawn."""
  c = -0.5 * (-(far + near) / (far - near)) - 0.5
  d = -0.5 * (-(2.0 * far * near) / (far - near))
  raw64 = raw.astype(np.float64)
  metres = d / (raw64 + c)
  return np.where(raw64 > 0.0, metres, 0.0).astype(np.float32)
