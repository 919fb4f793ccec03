"""Videos from a read-only MuJoCo pose replica that never steps physics.

The live simulation (MuJoCo Warp or C) is only read: each recorded frame
copies the environment's ``qpos`` and mocap poses into a separate C MuJoCo
``MjData`` of the same compiled model, runs kinematics and renders it. The
scored world is therefore identical whether it is filmed or not.

A run films one or more ``CameraView``s: a free camera (look-at point in the
environment frame) or a camera of the model (e.g. the wrist D415), each with
its geom groups and optionally a Gaussian room background: pixels where no
geometry is drawn show a smooth random room (Gaussian colour blobs over a
wall gradient), seeded per environment and view, the same in every frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import mujoco
import numpy as np

from mjlab_tasks.common.gl import open_gl_context
from mjlab_tasks.engine import copy_model


def mediapy_with_ffmpeg():
  """mediapy, writing videos with the system's ffmpeg or, without one, the
  binary the ``imageio-ffmpeg`` wheel ships (as mjlab sets it up when it is
  imported; these tools may not import mjlab)."""
  import shutil

  import mediapy

  if shutil.which("ffmpeg") is None:
    import imageio_ffmpeg

    mediapy.set_ffmpeg(imageio_ffmpeg.get_ffmpeg_exe())
  return mediapy


@dataclass(frozen=True)
class CameraView:
  """One filmed view; stored with the poses so re-rendering repeats it."""

  name: str = "scene"
  width: int = 640
  height: int = 480
  camera: str | None = None
  """A camera of the model by name; None for the free camera below."""
  lookat: tuple[float, float, float] = (0.45, 0.0, 0.05)
  """Free camera target in the environment frame [m]."""
  distance: float = 1.2
  azimuth: float = 150.0
  elevation: float = -40.0
  groups: tuple[int, ...] = (0, 1, 2)
  """Geom groups drawn."""
  background: str = "none"
  """``none`` (MuJoCo's sky) or ``gaussian_room``."""
  table: tuple[float, float, float, float] | None = None
  """Draw the (infinite) floor plane as a finite table top: centre x, y and
  half sizes in the environment frame [m]; the room shows beyond it."""


def gaussian_room(width: int, height: int, seed: int) -> np.ndarray:
  """A smooth random room image [H, W, 3] uint8: a wall colour gradient with
  a few large Gaussian colour blobs (furniture, windows, people far away)."""
  rng = np.random.default_rng(seed)
  y, x = np.mgrid[0:height, 0:width].astype(float)
  top, bottom = rng.uniform(0.55, 0.9, 3), rng.uniform(0.25, 0.55, 3)
  image = top + (bottom - top) * (y / max(height - 1, 1))[..., None]
  for _ in range(int(rng.integers(6, 12))):
    cx, cy = rng.uniform(0, width), rng.uniform(0, height)
    sx, sy = rng.uniform(0.05, 0.3) * width, rng.uniform(0.05, 0.3) * height
    weight = np.exp(-0.5 * (((x - cx) / sx) ** 2 + ((y - cy) / sy) ** 2))
    image += weight[..., None] * (rng.uniform(0.0, 1.0, 3) - image) * 0.8
  return (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)


class PoseReplicaRecorder:
  """Records poses of some environments and renders them to mp4 afterwards."""

  def __init__(
    self,
    mj_model: mujoco.MjModel,
    env_ids: list[int],
    fps: float,
    views: tuple[CameraView, ...] = (CameraView(),),
    seed: int = 0,
  ):
    # Rendering settings stay off the live model.
    self.model = copy_model(mj_model)
    self.env_ids = list(env_ids)
    self.fps = fps
    self.views = tuple(views)
    self.seed = seed
    self.qpos: list[np.ndarray] = []  # per frame [n_envs, nq]
    self.mocap_pos: list[np.ndarray] = []
    self.mocap_quat: list[np.ndarray] = []
    self.origins: np.ndarray | None = None

  def capture(self, sim_data, env_origins) -> None:
    """Copy the current poses of the recorded environments (read only)."""
    ids = self.env_ids
    self.qpos.append(sim_data.qpos[ids].detach().cpu().double().numpy().copy())
    if self.model.nmocap:
      self.mocap_pos.append(
        sim_data.mocap_pos[ids].detach().cpu().double().numpy().copy()
      )
      self.mocap_quat.append(
        sim_data.mocap_quat[ids].detach().cpu().double().numpy().copy()
      )
    self.origins = env_origins[ids].detach().cpu().double().numpy()

  def poses(self) -> dict[str, np.ndarray]:
    return {
      "qpos": np.stack(self.qpos, axis=1),  # [n_envs, frames, nq]
      "mocap_pos": np.stack(self.mocap_pos, axis=1) if self.mocap_pos else np.zeros(0),
      "mocap_quat": np.stack(self.mocap_quat, axis=1)
      if self.mocap_quat
      else np.zeros(0),
    }

  def save_poses(self, path: Path) -> None:
    """Every recorded frame's qpos and mocap poses, the views, and the compiled
    model (``<path stem>.mjb`` beside it), so ``render_pose_file`` re-renders."""
    np.savez_compressed(
      path,
      env_ids=np.array(self.env_ids),
      fps=self.fps,
      origins=self.origins,
      views=json.dumps([asdict(v) for v in self.views]),
      seed=self.seed,
      **self.poses(),
    )
    mujoco.mj_saveModel(self.model, str(path.with_suffix(".mjb")), None)

  def render(self, out_dir: Path, prefix: str = "env") -> list[Path]:
    """Render one mp4 per recorded environment and view; returns the paths."""
    p = self.poses()
    return render_poses(
      self.model,
      self.env_ids,
      p["qpos"],
      p["mocap_pos"],
      p["mocap_quat"],
      self.origins,
      self.fps,
      out_dir,
      views=self.views,
      seed=self.seed,
      prefix=prefix,
    )


class PoseRenderer:
  """Pictures of a model's poses, drawn in a replica ``MjData`` that is
  never stepped (kinematics only: a filmed world is the same filmed or not).
  The suite's one renderer of poses: the videos here and the glass
  examiner's pictures. OpenGL is loaded at the first picture
  (``open_gl_context``), not before."""

  def __init__(self, model: mujoco.MjModel, who: str = "videos"):
    self.model, self.who = model, who
    self._replica: mujoco.MjData | None = None
    self._gl = None  # (GL context, MjrContext) once the first picture is drawn
    self._scenes: dict = {}  # one per camera

  def backend(self) -> str | None:
    """The OpenGL backend (None: the suite's policy)."""
    return None

  def _context(self):
    if self._gl is None:
      g = self.model.vis.global_
      context = open_gl_context(g.offwidth, g.offheight, self.backend(), self.who)
      mjr = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_150)
      mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, mjr)
      self._gl = (context, mjr)
    context, mjr = self._gl
    context.make_current()  # several renderers can share one process
    return mjr

  def pose(self, qpos, mocap_pos=None, mocap_quat=None) -> mujoco.MjData:
    """The replica at ``qpos`` (and mocap poses): kinematics, cameras and
    lights only."""
    if self._replica is None:
      self._replica = mujoco.MjData(self.model)
    rep = self._replica
    rep.qpos[:] = qpos
    if mocap_pos is not None and np.size(mocap_pos):
      rep.mocap_pos[:] = mocap_pos
      rep.mocap_quat[:] = mocap_quat
    mujoco.mj_kinematics(self.model, rep)
    mujoco.mj_camlight(self.model, rep)
    return rep

  def _scene(self, camera, option: mujoco.MjvOption | None) -> mujoco.MjvScene:
    """The posed replica seen from ``camera`` (a camera's name, or a free
    ``MjvCamera``); each camera has its own scene."""
    if isinstance(camera, str):
      cam = mujoco.MjvCamera()
      cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
      cam.fixedcamid = self.model.camera(camera).id
    else:
      cam = camera
    key = camera if isinstance(camera, str) else None
    if key not in self._scenes:
      self._scenes[key] = mujoco.MjvScene(self.model, maxgeom=10000)
    scene = self._scenes[key]
    option = option if option is not None else mujoco.MjvOption()
    mujoco.mjv_updateScene(
      self.model, self._replica, option, None, cam, mujoco.mjtCatBit.mjCAT_ALL, scene
    )
    return scene

  def render(
    self,
    qpos,
    camera,
    size: tuple[int, int],
    option: mujoco.MjvOption | None = None,
    mocap: tuple | None = None,
    background: np.ndarray | None = None,
  ) -> np.ndarray:
    """RGB uint8 [H, W, 3] of pose ``qpos`` from ``camera`` at ``size`` (W,
    H), drawing the geom groups ``option`` enables (default: MuJoCo's);
    ``background`` [H, W, 3] where nothing is drawn."""
    width, height = size
    g = self.model.vis.global_
    if width > g.offwidth or height > g.offheight:
      raise ValueError(
        f"{size} exceeds the offscreen buffer {g.offwidth}x{g.offheight}"
      )
    mjr = self._context()
    self.pose(qpos, *(mocap or (None, None)))
    scene = self._scene(camera, option)
    rgb = self._draw(scene, mjr, width, height)
    if background is not None:
      flags = (mujoco.mjtRndFlag.mjRND_SEGMENT, mujoco.mjtRndFlag.mjRND_IDCOLOR)
      for flag in flags:
        scene.flags[flag] = True
      ids = self._draw(scene, mjr, width, height).astype(np.uint32)
      for flag in flags:
        scene.flags[flag] = False
      empty = (ids[..., 0] + (ids[..., 1] << 8) + (ids[..., 2] << 16)) == 0
      rgb = np.where(empty[..., None], background, rgb)
    return rgb

  @staticmethod
  def _draw(scene, mjr, width: int, height: int) -> np.ndarray:
    rect = mujoco.MjrRect(0, 0, width, height)
    mujoco.mjr_render(rect, scene, mjr)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    mujoco.mjr_readPixels(rgb, None, rect, mjr)
    return np.flipud(rgb).copy()

  def close(self) -> None:
    if self._gl is not None:
      context, mjr = self._gl
      context.make_current()
      mjr.free()
      context.free()
    self._gl = None
    self._scenes.clear()


def posed_frames(
  model: mujoco.MjModel,
  qpos: np.ndarray,
  mocap_pos: np.ndarray | None,
  mocap_quat: np.ndarray | None,
) -> Iterator[mujoco.MjData]:
  """The replica posed at each recorded frame of one environment (kinematics
  only: nothing is simulated; ``PoseRenderer.pose``). ``qpos`` is [frames,
  nq]; the same ``MjData`` is yielded each time."""
  replica = PoseRenderer(model)  # posing needs no OpenGL
  has_mocap = mocap_pos is not None and mocap_pos.size
  for f in range(qpos.shape[0]):
    if has_mocap:
      yield replica.pose(qpos[f], mocap_pos[f], mocap_quat[f])
    else:
      yield replica.pose(qpos[f])


def render_poses(
  model: mujoco.MjModel,
  env_ids: list[int],
  qpos: np.ndarray,
  mocap_pos: np.ndarray | None,
  mocap_quat: np.ndarray | None,
  origins: np.ndarray,
  fps: float,
  out_dir: Path,
  views: tuple[CameraView, ...] = (CameraView(),),
  seed: int = 0,
  prefix: str = "env",
) -> list[Path]:
  """Render recorded poses (qpos [n_envs, frames, nq]) to mp4 files: one per
  environment and view (``<prefix>_<env>.mp4`` for a single view, else
  ``<prefix>_<env>_<view>.mp4``). Kinematics only: nothing is simulated."""
  mediapy = mediapy_with_ffmpeg()
  paths = []
  width = max(v.width for v in views)
  height = max(v.height for v in views)
  model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
  model.vis.global_.offheight = max(model.vis.global_.offheight, height)
  planes = np.nonzero(model.geom_type == int(mujoco.mjtGeom.mjGEOM_PLANE))[0]
  plane_pos = model.geom_pos[planes].copy()
  plane_size = model.geom_size[planes].copy()
  for v_index, view in enumerate(views):
    option = mujoco.MjvOption()
    option.geomgroup[:] = 0
    for g in view.groups:
      option.geomgroup[g] = 1
    for k, env_id in enumerate(env_ids):
      if view.camera is None:
        cam = mujoco.MjvCamera()
        cam.distance, cam.azimuth, cam.elevation = (
          view.distance,
          view.azimuth,
          view.elevation,
        )
        cam.lookat[:] = np.asarray(view.lookat) + origins[k]
      else:
        cam = view.camera
      background = None
      if view.background == "gaussian_room":
        background = gaussian_room(
          view.width, view.height, seed * 100_003 + int(env_id) * 101 + v_index
        )
      model.geom_pos[planes] = plane_pos
      model.geom_size[planes] = plane_size
      if view.table is not None:
        cx, cy, hx, hy = view.table
        model.geom_pos[planes] = [origins[k][0] + cx, origins[k][1] + cy, 0.0]
        model.geom_size[planes] = [hx, hy, 0.05]
      # After the plane is sized: the rendering context bakes plane geometry.
      renderer = PoseRenderer(model)
      mp = mocap_pos[k] if mocap_pos is not None and mocap_pos.size else None
      mq = mocap_quat[k] if mocap_quat is not None and mocap_quat.size else None
      frames = [
        renderer.render(
          qpos[k][f],
          cam,
          (view.width, view.height),
          option,
          None if mp is None else (mp[f], mq[f]),
          background,
        )
        for f in range(qpos[k].shape[0])
      ]
      suffix = f"_{view.name}" if len(views) > 1 else ""
      path = out_dir / f"{prefix}_{int(env_id):03d}{suffix}.mp4"
      renderer.close()
      mediapy.write_video(path, frames, fps=fps)
      paths.append(path)
  model.geom_pos[planes] = plane_pos
  model.geom_size[planes] = plane_size
  return paths


def render_pose_file(
  poses: Path,
  out_dir: Path,
  prefix="rerender",
  envs: tuple[int, ...] = (),
  window: tuple[float, float | None] = (0.0, None),
) -> list[Path]:
  """Re-render a ``video_poses.npz`` (and its ``.mjb`` model) to mp4 files,
  with the views it was recorded with: the recorded environments ``envs``
  (all when empty), the frames within ``window`` (simulated seconds from the
  first frame; frame f was recorded at f / fps)."""
  model = mujoco.MjModel.from_binary_path(str(poses.with_suffix(".mjb")))
  rec = dict(np.load(poses))
  recorded = rec["env_ids"].tolist()
  missing = [e for e in envs if e not in recorded]
  if missing:
    raise ValueError(f"environments {missing} were not recorded (recorded: {recorded})")
  rows = [recorded.index(e) for e in envs] if envs else list(range(len(recorded)))
  fps = float(rec["fps"])
  frames = rec["qpos"].shape[1]
  first = int(round(window[0] * fps))
  last = frames if window[1] is None else min(frames, int(round(window[1] * fps)) + 1)
  if first >= last:
    end = "the end" if window[1] is None else f"{window[1]} s"
    raise ValueError(
      f"no recorded frame between {window[0]} s and {end} "
      f"({frames} frames at {fps} fps)"
    )
  rec["env_ids"] = np.array([recorded[r] for r in rows])
  rec["origins"] = rec["origins"][rows]
  for key in ("qpos", "mocap_pos", "mocap_quat"):
    if rec[key].size:
      rec[key] = rec[key][rows, first:last]
  views = (CameraView(),)
  if "views" in rec:
    views = tuple(
      CameraView(
        **{
          **v,
          "lookat": tuple(v["lookat"]),
          "groups": tuple(v["groups"]),
          "table": None if v.get("table") is None else tuple(v["table"]),
        }
      )
      for v in json.loads(str(rec["views"]))
    )
  return render_poses(
    model,
    rec["env_ids"].tolist(),
    rec["qpos"],
    rec["mocap_pos"],
    rec["mocap_quat"],
    rec["origins"],
    float(rec["fps"]),
    out_dir,
    views=views,
    seed=int(rec["seed"]) if "seed" in rec else 0,
    prefix=prefix,
  )
