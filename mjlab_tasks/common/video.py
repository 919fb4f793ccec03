"""Videos from a read-only MuJoCo pose replica that never steps physics.

The live simulation (MuJoCo Warp or C) is only read: each recorded frame
copies the environment's ``qpos`` and mocap poses into a separate C MuJoCo
``MjData`` of the same compiled model, runs kinematics and renders it. The
scored world is therefore identical whether it is filmed or not.
"""

from __future__ import annotations

import os
from pathlib import Path

import mujoco
import numpy as np


def _default_gl() -> None:
  # Headless rendering: EGL with a GPU, OSMesa (Debian libosmesa6) without.
  if "MUJOCO_GL" not in os.environ:
    import torch

    os.environ["MUJOCO_GL"] = "egl" if torch.cuda.is_available() else "osmesa"


class PoseReplicaRecorder:
  """Records poses of some environments and renders them to mp4 afterwards."""

  def __init__(
    self,
    mj_model: mujoco.MjModel,
    env_ids: list[int],
    fps: float,
    width: int = 640,
    height: int = 480,
    lookat: tuple[float, float, float] = (0.45, 0.0, 0.05),
    distance: float = 1.2,
    azimuth: float = 150.0,
    elevation: float = -40.0,
  ):
    self.model = mj_model
    self.env_ids = list(env_ids)
    self.fps = fps
    self.size = (width, height)
    self.camera = (lookat, distance, azimuth, elevation)
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

  def save_poses(self, path: Path) -> None:
    """Every recorded frame's qpos and mocap poses, plus the compiled model
    (``<path stem>.mjb`` beside it), so ``render_pose_file`` can re-render."""
    np.savez_compressed(
      path,
      env_ids=np.array(self.env_ids),
      fps=self.fps,
      qpos=np.stack(self.qpos, axis=1),  # [n_envs, frames, nq]
      mocap_pos=np.stack(self.mocap_pos, axis=1) if self.mocap_pos else np.zeros(0),
      mocap_quat=np.stack(self.mocap_quat, axis=1) if self.mocap_quat else np.zeros(0),
      origins=self.origins,
    )
    mujoco.mj_saveModel(self.model, str(path.with_suffix(".mjb")), None)

  def render(self, out_dir: Path, prefix: str = "env") -> list[Path]:
    """Render one mp4 per recorded environment; returns the file paths."""
    return render_poses(
      self.model,
      self.env_ids,
      np.stack(self.qpos, axis=1),
      np.stack(self.mocap_pos, axis=1) if self.mocap_pos else None,
      np.stack(self.mocap_quat, axis=1) if self.mocap_quat else None,
      self.origins,
      self.fps,
      out_dir,
      size=self.size,
      camera=self.camera,
      prefix=prefix,
    )


def render_poses(
  model: mujoco.MjModel,
  env_ids: list[int],
  qpos: np.ndarray,
  mocap_pos: np.ndarray | None,
  mocap_quat: np.ndarray | None,
  origins: np.ndarray,
  fps: float,
  out_dir: Path,
  size: tuple[int, int] = (640, 480),
  camera: tuple = ((0.45, 0.0, 0.05), 1.2, 150.0, -40.0),
  prefix: str = "env",
) -> list[Path]:
  """Render recorded poses (qpos [n_envs, frames, nq]) to one mp4 per env.

  Kinematics only: nothing is simulated.
  """
  _default_gl()
  import mediapy

  data = mujoco.MjData(model)
  width, height = size
  renderer = mujoco.Renderer(model, height=height, width=width)
  lookat, distance, azimuth, elevation = camera
  cam = mujoco.MjvCamera()
  cam.distance, cam.azimuth, cam.elevation = distance, azimuth, elevation
  paths = []
  for k, env_id in enumerate(env_ids):
    cam.lookat[:] = np.asarray(lookat) + origins[k]
    frames = []
    for f in range(qpos.shape[1]):
      data.qpos[:] = qpos[k, f]
      if mocap_pos is not None and mocap_pos.size:
        data.mocap_pos[:] = mocap_pos[k, f]
        data.mocap_quat[:] = mocap_quat[k, f]
      mujoco.mj_kinematics(model, data)
      mujoco.mj_camlight(model, data)
      renderer.update_scene(data, camera=cam)
      frames.append(renderer.render())
    path = out_dir / f"{prefix}_{int(env_id):03d}.mp4"
    mediapy.write_video(path, frames, fps=fps)
    paths.append(path)
  renderer.close()
  return paths


def render_pose_file(
  poses: Path, out_dir: Path, size=(640, 480), prefix="rerender"
) -> list[Path]:
  """Re-render a ``video_poses.npz`` (and its ``.mjb`` model) to mp4 files."""
  model = mujoco.MjModel.from_binary_path(str(poses.with_suffix(".mjb")))
  rec = np.load(poses)
  return render_poses(
    model,
    rec["env_ids"].tolist(),
    rec["qpos"],
    rec["mocap_pos"],
    rec["mocap_quat"],
    rec["origins"],
    float(rec["fps"]),
    out_dir,
    size=size,
    prefix=prefix,
  )
