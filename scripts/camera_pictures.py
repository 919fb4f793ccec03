"""The pictures of docs/cameras.md: each camera's view on the C engine.

For each task (CubeTray-UR5-RG2, BinPick-UR5-RG2 on its shallow bin) one
environment with both cameras after a seeded reset: the wrist D415's RGB and
depth (grey: near is light, 0 m black) side by side, and the scene camera.
Then four cube-tray environments with image randomization: their wrist RGB
side by side.

  python scripts/camera_pictures.py --output docs/images
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cli_args import check_at_least, fail, parse


@dataclass
class Args:
  output: Path = Path("docs/images")
  """Folder for the PNG files (created if missing; files are overwritten)."""
  seed: int = 0
  """Seed of the resets (placements, pour, randomization)."""


def depth_picture(depth):
  """Depth [H, W, 1] in metres to grey uint8 [H, W, 3]: the last 10 cm to the
  farthest point from light to dark (nearer: white), 0 (nothing hit) black."""
  import numpy as np

  d = depth[..., 0].numpy()
  hit = d > 0
  far = d[hit].max() if hit.any() else 1.0
  near = max(d[hit].min(), far - 0.1) if hit.any() else 0.0  # Table relief.
  shade = np.clip((d - near) / max(far - near, 1e-6), 0.0, 1.0)
  grey = np.where(hit, 255 - 200 * shade, 0)
  return np.repeat(grey.astype(np.uint8)[..., None], 3, axis=-1)


def save(path: Path, image) -> None:
  from PIL import Image

  Image.fromarray(image).save(path)
  print(f"wrote {path}")


def check_args(args: Args) -> None:
  """Every flag checked before anything is built."""
  check_at_least(0, seed=args.seed)
  if args.output.exists() and not args.output.is_dir():
    fail(f"--output {args.output} exists and is not a folder.")


def main(args: Args) -> int:
  check_args(args)
  import numpy as np
  import torch

  from mjlab_tasks.bin_pick.env_cfg import bin_pick_env_cfg
  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env

  args.output.mkdir(parents=True, exist_ok=True)
  both = ("wrist", "scene")
  configs = {
    "cube_tray": cube_tray_env_cfg(cameras=both),
    "bin_pick": bin_pick_env_cfg(
      objects=6, bin_width=0.14, bin_height=0.06, cameras=both
    ),
  }
  for name, cfg in configs.items():
    cfg.seed = args.seed
    env = make_env(cfg, device="cpu", engine="mujoco")
    try:
      obs, _ = env.reset()
      images = obs["camera"]
      wrist = np.concatenate(
        [images["wrist_rgb"][0].numpy(), depth_picture(images["wrist_depth"][0])], 1
      )
      save(args.output / f"camera_{name}_wrist.png", wrist)
      save(args.output / f"camera_{name}_scene.png", images["scene_rgb"][0].numpy())
    finally:
      env.close()
  cfg = cube_tray_env_cfg(num_envs=4, cameras=("wrist",), image_randomization=True)
  cfg.seed = args.seed
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    obs, _ = env.reset()
    rgb = obs["camera"]["wrist_rgb"]
    grid = torch.cat([torch.cat([rgb[0], rgb[1]], 1), torch.cat([rgb[2], rgb[3]], 1)])
    save(args.output / "camera_cube_tray_randomized.png", grid.numpy())
  finally:
    env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
