"""Rendering speed and memory of the camera sensors, per engine and --num-envs.

Builds CubeTray-UR5-RG2 with ``--cameras`` (the wrist D415 is 320 x 180 RGB
and depth, one pass; the scene camera 320 x 240 RGB), resets, then times
``--repeats`` calls of ``env.sim.sense()`` (every camera of every
environment rendered; physics not stepped) and reports:

- ``frames_per_s``: camera images per second (environments x cameras x
  calls / s; RGB and depth of one camera count as one frame);
- ``step_per_s`` with and without cameras: ``env.step`` rate of the same
  configuration (physics, managers and, with cameras, the rendering);
- ``image_bytes_per_env``: the sensors' buffers plus the ``camera``
  observation group's copies, per environment (exact, from the tensors);
- ``rss_growth_mb``: resident-set growth of building and running the
  environment with cameras, over the one without (noisy; the first row also
  loads the OpenGL libraries: per environment, compare two later rows).

  python scripts/camera_benchmark.py --engine mujoco --num-envs 1 4 16
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cli_args import (
  check_at_least,
  check_cameras,
  check_device,
  check_engine,
  check_new_file,
  parse,
)


@dataclass
class Args:
  engine: list[str] = field(default_factory=lambda: ["mujoco"])
  """Engines: mujoco (C MuJoCo, OpenGL) and/or warp (MuJoCo Warp)."""
  num_envs: list[int] = field(default_factory=lambda: [1, 4, 16])
  """Environment counts."""
  cameras: str = "wrist"
  """Cameras: wrist, scene or wrist,scene."""
  repeats: int = 20
  """Timed sense() calls per configuration (after one warm-up call)."""
  steps: int = 5
  """Timed env.step calls per configuration, with and without cameras."""
  device: str = "cpu"
  """cpu or cuda:N (MuJoCo Warp only)."""
  json: Path | None = None
  """Write the rows (and the machine) to this JSON file; must not exist."""


def rss_mb() -> float:
  """Current resident set of this process [MB] (Linux)."""
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def measure(engine: str, num_envs: int, cameras: tuple[str, ...], args: Args) -> dict:
  import torch

  from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
  from mjlab_tasks.engine import make_env

  def build(cams):
    start = rss_mb()
    env = make_env(
      cube_tray_env_cfg(num_envs=num_envs, cameras=cams), args.device, engine
    )
    env.reset()
    return env, start

  def step_rate(env) -> float:
    action = torch.zeros(num_envs, 7, device=env.device)
    env.step(action)
    t = time.perf_counter()
    for _ in range(args.steps):
      env.step(action)
    return args.steps / (time.perf_counter() - t)

  plain, rss0 = build(())
  plain_rate = step_rate(plain)
  plain_rss = rss_mb() - rss0
  plain.close()
  env, rss0 = build(cameras)
  try:
    env.sim.sense()
    t = time.perf_counter()
    for _ in range(args.repeats):
      env.sim.sense()
    if env.device.startswith("cuda"):
      torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    rate = step_rate(env)
    images = env.observation_manager.compute()["camera"]
    group = sum(t.numel() * t.element_size() for t in images.values())
    sensors = 0
    for name in {"wrist": "wrist_d415", "scene": "scene_camera"}.values():
      if name in env.scene.sensors:
        data = env.scene[name].data
        for t in (data.rgb, data.depth):
          sensors += 0 if t is None else t.numel() * t.element_size()
    rss = rss_mb() - rss0
  finally:
    env.close()
  return {
    "engine": engine,
    "num_envs": num_envs,
    "cameras": list(cameras),
    "frames_per_s": num_envs * len(cameras) * args.repeats / seconds,
    "sense_calls_per_s": args.repeats / seconds,
    "step_per_s_cameras": rate,
    "step_per_s_no_cameras": plain_rate,
    "image_bytes_per_env": (group + sensors) / num_envs,
    "rss_growth_mb": rss - plain_rss,
  }


def check_args(args: Args) -> tuple[str, ...]:
  """Every flag checked before anything is built; the cameras."""
  check_at_least(1, repeats=args.repeats, steps=args.steps)
  check_at_least(1, num_envs=min(args.num_envs))
  device = check_device(args.device)
  for engine in args.engine:
    check_engine(engine, device)
  if args.json is not None:
    check_new_file(args.json, "--json")
  return check_cameras(args.cameras, "--cameras")


def main(args: Args) -> int:
  cameras = check_args(args)
  rows = []
  for engine in args.engine:
    for n in args.num_envs:
      row = measure(engine, n, cameras, args)
      rows.append(row)
      print(
        f"{engine:6s} envs {n:3d}: {row['frames_per_s']:8.1f} frames/s, "
        f"step {row['step_per_s_cameras']:.2f}/s with cameras, "
        f"{row['step_per_s_no_cameras']:.2f}/s without; "
        f"images {row['image_bytes_per_env'] / 1e6:.2f} MB/env, "
        f"RSS growth {row['rss_growth_mb']:.1f} MB",
        flush=True,
      )
  if args.json is not None:
    commit = subprocess.run(
      ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    machine = {
      "platform": platform.platform(),
      "processor": platform.processor(),
      "cpus": os.cpu_count(),
      "commit": commit,
      "load_average": os.getloadavg(),
    }
    args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
