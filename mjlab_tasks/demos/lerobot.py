"""Demonstrations (robomimic-layout HDF5) as a LeRobotDataset v3.0.

Reads what the recorders write (``data/demo_K`` with ``obs/<key>``,
``actions``, ``rewards``, ``dones`` and the attributes ``success``,
``outcome``, ``reason``, ``seed``) and writes the layout that lerobot 0.4
loads with ``LeRobotDataset(repo_id, root=DIR)``, with pyarrow only:

  DIR/meta/info.json          codebase_version v3.0, fps, features, paths
  DIR/meta/stats.json         per-feature min/max/mean/std/count/q01..q99
  DIR/meta/tasks.parquet      the task text (pandas index) -> task_index
  DIR/meta/episodes/chunk-000/file-000.parquet   one row per episode
  DIR/data/chunk-000/file-000.parquet            one row per frame
  DIR/videos/observation.images.<cam>/chunk-000/file-000.mp4  (cameras only)
  DIR/README.md               dataset card with the source's env_args

Per frame: ``observation.state`` (every non-image observation term,
concatenated in the file's order; ``names`` tell the slices), ``action``,
``next.reward``, ``next.done``, ``next.success``. Camera observations
(``obs/<cam>_rgb``, uint8 [T, H, W, 3]) become AV1 videos as lerobot encodes
them (libsvtav1, yuv420p, g=2, crf=30), through imageio-ffmpeg's ffmpeg.

``export_lerobot(demos, output)`` is what ``scripts/export_lerobot.py``
runs. Needs the optional extra: pip install 'manipulation-suite[lerobot]'
(pyarrow, h5py, imageio-ffmpeg; imported when used). The layout follows
lerobot 0.4.4 (lerobot/datasets/utils.py, lerobot_dataset.py,
compute_stats.py, video_utils.py); docs/lerobot.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CODEBASE_VERSION = "v3.0"
# lerobot's defaults (DEFAULT_CHUNK_SIZE, DEFAULT_*_FILE_SIZE_IN_MB): a new file
# when one would pass the size, a new chunk folder every 1000 files.
CHUNKS_SIZE = 1000
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
# lerobot's video settings (LeRobotDataset: vcodec libsvtav1, pix_fmt yuv420p,
# g=2 so that any frame decodes from a key frame one step back, crf 30, preset 12).
VIDEO_ARGS = ["-c:v", "libsvtav1", "-pix_fmt", "yuv420p", "-g", "2", "-crf", "30"]
VIDEO_ARGS += ["-preset", "12"]
VIDEO_INFO = {"video.codec": "av1", "video.pix_fmt": "yuv420p"}
DEMO = re.compile(r"demo_(\d+)")
DEFAULT_FEATURES = {  # lerobot's DEFAULT_FEATURES, in its order.
  "timestamp": "float32",
  "frame_index": "int64",
  "episode_index": "int64",
  "index": "int64",
  "task_index": "int64",
}


class ExportError(ValueError):
  """A demo file the export refuses, or a failed encode (one-line message)."""


# ---------------------------------------------------------------- reading


def text(value) -> str:
  return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Layout:
  """What every exported demo holds, taken from the first and checked on all."""

  state_keys: list[str]
  state_names: list[str]
  cameras: dict[str, tuple[int, int]]  # obs key -> (height, width)
  action_dim: int


def demo_names(f, demos: Path, mask: str | None) -> list[str]:
  data = f.get("data")
  if data is None or not hasattr(data, "keys"):
    raise ExportError(f"DEMOS {demos}: no 'data' group (not the robomimic layout).")
  names = sorted(
    (n for n in data.keys() if DEMO.fullmatch(n)), key=lambda n: int(n[5:])
  )
  if mask is not None:
    if f"mask/{mask}" not in f:
      raise ExportError(f"--mask {mask}: DEMOS {demos} has no mask/{mask}.")
    chosen = {text(n) for n in f[f"mask/{mask}"][()]}
    unknown = chosen - set(names)
    if unknown:
      raise ExportError(
        f"--mask {mask} lists demos not in data/: {', '.join(sorted(unknown))}."
      )
    names = [n for n in names if n in chosen]
  if not names:
    raise ExportError(f"DEMOS {demos}: no demos to export (data/demo_K).")
  return names


def is_camera(ds) -> bool:
  return ds.dtype == np.uint8 and ds.ndim == 4 and ds.shape[-1] == 3


def read_layout(demo, where: str) -> Layout:
  if "obs" not in demo or "actions" not in demo:
    raise ExportError(f"{where}: needs obs/ and actions.")
  state_keys, names, cameras = [], [], {}
  for key, ds in demo["obs"].items():
    if is_camera(ds):
      cameras[key] = ds.shape[1:3]
    elif ds.ndim in (1, 2) and np.issubdtype(ds.dtype, np.number):
      dim = 1 if ds.ndim == 1 else ds.shape[1]
      state_keys.append(key)
      names += [key] if dim == 1 else [f"{key}_{i}" for i in range(dim)]
    else:
      raise ExportError(
        f"{where}/obs/{key}: shape {ds.shape} {ds.dtype} is neither [T, d] "
        "numbers nor uint8 camera frames [T, H, W, 3]."
      )
  for key, (h, w) in cameras.items():
    if h % 2 or w % 2:  # yuv420p halves the chroma planes.
      raise ExportError(f"{where}/obs/{key}: frames {h}x{w}; video needs even sizes.")
  actions = demo["actions"]
  if actions.ndim != 2:
    raise ExportError(
      f"{where}/actions: shape {actions.shape}, expected [T, action_dim]."
    )
  return Layout(state_keys, names, cameras, actions.shape[1])


def read_demo(demo, where: str, layout: Layout) -> dict:
  """A demo's per-frame arrays (no camera frames), checked against ``layout``."""
  for name in ("actions", "rewards", "dones", "obs"):
    if name not in demo:
      raise ExportError(f"{where}: no {name}.")
  obs_keys = set(demo["obs"].keys())
  expected = set(layout.state_keys) | set(layout.cameras)
  if obs_keys != expected:
    raise ExportError(
      f"{where}/obs: keys {sorted(obs_keys)} differ from the first demo's "
      f"{sorted(expected)}."
    )
  actions = np.asarray(demo["actions"][()], dtype=np.float64)
  length = len(actions)
  if length < 1 or actions.shape != (length, layout.action_dim):
    raise ExportError(
      f"{where}/actions: shape {actions.shape}, expected [T>=1, {layout.action_dim}]."
    )
  bad = ~np.isfinite(actions).all(axis=1) | (np.abs(actions) > 1 + 1e-6).any(axis=1)
  if bad.any():
    step = int(np.flatnonzero(bad)[0])
    raise ExportError(
      f"{where}/actions[{step}] = {actions[step].tolist()}: not finite or "
      "outside [-1, 1]."
    )
  per_step = {}
  for name in ("rewards", "dones"):
    values = np.asarray(demo[name][()])
    if values.reshape(len(values), -1).shape != (length, 1):
      raise ExportError(f"{where}/{name}: shape {values.shape}, expected [{length}].")
    per_step[name] = values.reshape(length)
  if not np.isfinite(per_step["rewards"].astype(np.float64)).all():
    raise ExportError(f"{where}/rewards: not finite.")
  state = []
  for key in layout.state_keys:
    values = np.asarray(demo["obs"][key][()], dtype=np.float64).reshape(length, -1)
    ds = demo["obs"][key]
    if ds.shape[0] != length:
      raise ExportError(
        f"{where}/obs/{key}: {ds.shape[0]} steps, actions have {length}."
      )
    if not np.isfinite(values).all():
      raise ExportError(f"{where}/obs/{key}: not finite.")
    state.append(values)
  for key, (h, w) in layout.cameras.items():
    ds = demo["obs"][key]
    if not is_camera(ds) or ds.shape != (length, h, w, 3):
      raise ExportError(
        f"{where}/obs/{key}: shape {ds.shape} {ds.dtype}, expected uint8 "
        f"[{length}, {h}, {w}, 3]."
      )
  if "success" not in demo.attrs:
    raise ExportError(f"{where}: no 'success' attribute.")
  success = bool(demo.attrs["success"])
  if "success" in demo:  # A per-step verdict, where the collector recorded one.
    step_success = np.asarray(demo["success"][()]).reshape(-1).astype(bool)
    if len(step_success) != length:
      raise ExportError(
        f"{where}/success: {len(step_success)} steps, actions have {length}."
      )
  else:  # The evaluator scores an episode when it ends: its last frame.
    step_success = np.zeros(length, bool)
    step_success[-1] = success
  state_dim = len(layout.state_names)
  return {
    "length": length,
    "observation.state": np.concatenate(state, axis=1).astype(np.float32)
    if state
    else np.zeros((length, state_dim), np.float32),
    "action": actions.astype(np.float32),
    "next.reward": per_step["rewards"].astype(np.float32),
    "next.done": per_step["dones"].astype(bool),
    "next.success": step_success,
    "source": {
      "source/demo": where.rsplit("/", 1)[-1],
      "source/seed": int(demo.attrs["seed"]) if "seed" in demo.attrs else -1,
      "source/success": success,
      "source/outcome": text(demo.attrs.get("outcome", "")),
      "source/reason": text(demo.attrs.get("reason", "")),
    },
  }


# ---------------------------------------------------------------- statistics


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
  """lerobot's per-episode stats of [N, d] values: per-dimension min, max,
  mean, std, quantiles (exact here, histogram estimates there), count [N]."""
  values = values.astype(np.float64)
  stats = {
    "min": values.min(axis=0),
    "max": values.max(axis=0),
    "mean": values.mean(axis=0),
    "std": values.std(axis=0),
    "count": np.array([len(values)]),
  }
  for name, q in QUANTILES.items():
    stats[name] = np.quantile(values, q, axis=0)
  return stats


def sampled_frames(n: int) -> np.ndarray:
  """lerobot's frames for image stats: evenly spaced, 100 (all of a shorter
  episode) up to n**0.75 for long ones."""
  count = n if n < 100 else max(100, min(int(n**0.75), 10_000))
  return np.round(np.linspace(0, n - 1, count)).astype(int)


def image_stats(picked: np.ndarray) -> dict[str, np.ndarray]:
  """lerobot's image stats of the sampled uint8 frames: large frames
  subsampled to about 150 pixels, per channel in [0, 1], shape (3, 1, 1).
  From per-channel histograms (uint8 has 256 values): exact and fast."""
  h, w = picked.shape[1:3]
  if max(h, w) >= 300:
    step = int(w / 150) if w > h else int(h / 150)
    picked = picked[:, ::step, ::step]
  pixels = picked.reshape(-1, 3)
  values = np.arange(256, dtype=np.float64)
  stats = {k: np.zeros(3) for k in ("min", "max", "mean", "std", *QUANTILES)}
  for c in range(3):
    counts = np.bincount(pixels[:, c], minlength=256)
    present = np.flatnonzero(counts)
    n = counts.sum()
    mean = counts @ values / n
    stats["min"][c], stats["max"][c] = present[0], present[-1]
    stats["mean"][c] = mean
    stats["std"][c] = np.sqrt(max(counts @ (values - mean) ** 2 / n, 0.0))
    cum = np.cumsum(counts)
    for name, q in QUANTILES.items():  # np.quantile's linear interpolation.
      pos = q * (n - 1)
      lo, hi = np.searchsorted(cum, [np.floor(pos), np.ceil(pos)], side="right")
      stats[name][c] = lo + (hi - lo) * (pos - np.floor(pos))
  stats = {k: (v / 255.0).reshape(3, 1, 1) for k, v in stats.items()}
  return stats | {"count": np.array([len(picked)])}  # Frames, not pixels.


def aggregate(stats_list: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  """lerobot's aggregate_feature_stats: count-weighted means, variances and
  quantiles; overall min and max."""
  counts = np.stack([s["count"] for s in stats_list]).astype(np.float64)
  means = np.stack([s["mean"] for s in stats_list])
  while counts.ndim < means.ndim:
    counts = counts[..., None]
  total = counts.sum(axis=0)
  mean = (means * counts).sum(axis=0) / total
  variances = np.stack([s["std"] ** 2 for s in stats_list])
  variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
  out = {
    "min": np.min(np.stack([s["min"] for s in stats_list]), axis=0),
    "max": np.max(np.stack([s["max"] for s in stats_list]), axis=0),
    "mean": mean,
    "std": np.sqrt(variance),
    "count": np.sum([s["count"] for s in stats_list], axis=0),
  }
  for name in QUANTILES:
    out[name] = (np.stack([s[name] for s in stats_list]) * counts).sum(axis=0) / total
  return out


def as_json(stats: dict[str, np.ndarray]) -> dict[str, list]:
  return {k: np.asarray(v).tolist() for k, v in stats.items()}


# ---------------------------------------------------------------- writing


def next_file(chunk: int, file: int) -> tuple[int, int]:
  """lerobot's update_chunk_file_indices."""
  return (chunk + 1, 0) if file == CHUNKS_SIZE - 1 else (chunk, file + 1)


class VideoFiles:
  """One camera's mp4 files: episodes appended to one ffmpeg stream per file,
  so frame k of a file lies at k / fps; a new file past VIDEO_FILE_MB."""

  def __init__(self, root: Path, key: str, size: tuple[int, int], fps: int):
    import imageio_ffmpeg

    self.ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    self.root, self.key, self.size, self.fps = root, key, size, fps
    self.chunk, self.file, self.frames, self.proc = 0, 0, 0, None

  def path(self) -> Path:
    rel = VIDEO_PATH.format(
      video_key=self.key, chunk_index=self.chunk, file_index=self.file
    )
    return self.root / rel

  def video_bytes(self) -> int:
    """The current file's bytes so far (0 until ffmpeg has created it: it
    starts writing only once it has read some frames)."""
    path = self.path()
    return path.stat().st_size if path.exists() else 0

  def open(self) -> None:
    path = self.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = self.size
    self.proc = subprocess.Popen(
      [self.ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "rawvideo"]
      + ["-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-framerate", str(self.fps)]
      + ["-i", "-", "-an", *VIDEO_ARGS, str(path)],
      stdin=subprocess.PIPE,
      stderr=subprocess.PIPE,
    )

  def close(self) -> None:
    if self.proc is None:
      return
    self.proc.stdin.close()
    err = self.proc.stderr.read().decode(errors="replace").strip()
    if self.proc.wait() != 0:
      raise ExportError(
        f"ffmpeg could not encode {self.path()}: {err.splitlines()[-1:]}"
      )
    self.proc = None

  def append(self, frames, picks: np.ndarray) -> tuple[dict, np.ndarray]:
    """Write one episode's frames, read in slices; its video metadata and
    the frames at ``picks`` (for the statistics)."""
    if self.proc is not None and self.video_bytes() >= VIDEO_FILE_MB * 2**20:
      self.close()
      self.chunk, self.file = next_file(self.chunk, self.file)
      self.frames = 0
    if self.proc is None:
      self.open()
    start, picked = self.frames, []
    for i in range(0, len(frames), 64):
      block = np.ascontiguousarray(frames[i : i + 64])
      picked.append(block[picks[(picks >= i) & (picks < i + 64)] - i])
      try:
        self.proc.stdin.write(block.tobytes())
      except BrokenPipeError:
        self.close()
        raise ExportError(f"ffmpeg stopped while encoding {self.path()}.") from None
    self.frames += len(frames)
    prefix = f"videos/{self.key}/"
    meta = {
      prefix + "chunk_index": self.chunk,
      prefix + "file_index": self.file,
      prefix + "from_timestamp": start / self.fps,
      prefix + "to_timestamp": self.frames / self.fps,
    }
    return meta, np.concatenate(picked)


def fixed_list(pa, values: np.ndarray):
  """[N, d] float32 as Arrow fixed_size_list<float32>[d], as datasets writes a
  feature of shape (d,) (datasets.Sequence(length=d))."""
  flat = pa.array(np.ascontiguousarray(values, np.float32).reshape(-1))
  return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])


def frame_table(pa, ep: dict, episode_index: int, first_index: int, fps: int):
  n = ep["length"]
  frames = np.arange(n, dtype=np.int64)
  columns = {}
  if ep["observation.state"].shape[1]:
    columns["observation.state"] = fixed_list(pa, ep["observation.state"])
  columns["action"] = fixed_list(pa, ep["action"])
  columns["next.reward"] = pa.array(ep["next.reward"], pa.float32())
  columns["next.done"] = pa.array(ep["next.done"], pa.bool_())
  columns["next.success"] = pa.array(ep["next.success"], pa.bool_())
  columns["timestamp"] = pa.array((frames / fps).astype(np.float32))
  columns["frame_index"] = pa.array(frames)
  columns["episode_index"] = pa.array(np.full(n, episode_index, np.int64))
  columns["index"] = pa.array(first_index + frames)
  columns["task_index"] = pa.array(np.zeros(n, np.int64))
  return pa.table(columns)


def column_values(table, col: str) -> np.ndarray:
  """A data column as [N, d] numbers (d = 1 for a scalar feature)."""
  column = table.column(col).combine_chunks()
  if column.type.num_fields:  # fixed_size_list: its flat values.
    return np.asarray(column.flatten()).reshape(len(column), -1)
  return np.asarray(column).reshape(-1, 1)


def tasks_table(pa, task: str):
  """meta/tasks.parquet as pandas writes DataFrame({"task_index": [0]},
  index=[task]): lerobot reads it with pandas and takes the index as the task."""
  table = pa.table(
    {"task_index": pa.array([0], pa.int64()), "__index_level_0__": [task]}
  )
  pandas_meta = {
    "index_columns": ["__index_level_0__"],
    "column_indexes": [
      {
        "name": None,
        "field_name": None,
        "pandas_type": "unicode",
        "numpy_type": "object",
        "metadata": {"encoding": "UTF-8"},
      }
    ],
    "columns": [
      {
        "name": "task_index",
        "field_name": "task_index",
        "pandas_type": "int64",
        "numpy_type": "int64",
        "metadata": None,
      },
      {
        "name": None,
        "field_name": "__index_level_0__",
        "pandas_type": "unicode",
        "numpy_type": "object",
        "metadata": None,
      },
    ],
    "creator": {"library": "pyarrow", "version": pa.__version__},
    "pandas_version": "2.2.3",
  }
  return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def features_for(layout: Layout, fps: int) -> dict:
  features = {}
  if layout.state_names:
    features["observation.state"] = {
      "dtype": "float32",
      "shape": [len(layout.state_names)],
      "names": layout.state_names,
    }
  for key, (h, w) in layout.cameras.items():
    features[camera_feature(key)] = {
      "dtype": "video",
      "shape": [h, w, 3],
      "names": ["height", "width", "channels"],
      "info": {
        "video.height": h,
        "video.width": w,
        **VIDEO_INFO,
        "video.is_depth_map": False,
        "video.fps": fps,
        "video.channels": 3,
        "has_audio": False,
      },
    }
  features["action"] = {
    "dtype": "float32",
    "shape": [layout.action_dim],
    "names": [f"action_{i}" for i in range(layout.action_dim)],
  }
  features["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
  features["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
  features["next.success"] = {"dtype": "bool", "shape": [1], "names": None}
  for key, dtype in DEFAULT_FEATURES.items():
    features[key] = {"dtype": dtype, "shape": [1], "names": None}
  return features


def camera_feature(obs_key: str) -> str:
  return "observation.images." + obs_key.removesuffix("_rgb")


def write_json(path: Path, data) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data, indent=4, ensure_ascii=False) + "\n")


def dataset_card(repo_id: str, info: dict, demos: Path, env_args: dict) -> str:
  return (
    "---\nlicense: apache-2.0\ntask_categories:\n- robotics\ntags:\n- LeRobot\n"
    "configs:\n- config_name: default\n  data_files: data/*/*.parquet\n---\n\n"
    f"# {repo_id}\n\nExpert demonstrations of the manipulation suite, exported "
    f"from `{demos.name}` by `scripts/export_lerobot.py` (LeRobotDataset "
    f"{CODEBASE_VERSION}).\n\n## Source env_args\n\n```json\n"
    f"{json.dumps(env_args, indent=2)}\n```\n\n## meta/info.json\n\n```json\n"
    f"{json.dumps(info, indent=4)}\n```\n"
  )


def recorded_fps(env_args: dict, demos: Path) -> int:
  """The control rate collect_demos.py records (env_args control_hz), else 20."""
  hz = env_args.get("control_hz", 20)
  if not isinstance(hz, (int, float)) or hz < 1 or hz != int(hz):
    raise ExportError(
      f"DEMOS {demos}: env_args control_hz {hz!r} is not a whole rate; give --fps."
    )
  return int(hz)


def export(
  f,
  root: Path,
  demos: Path,
  repo_id: str | None = None,
  fps: int | None = None,
  task: str | None = None,
  mask: str | None = None,
  progress: Callable[[list[str]], Iterable[str]] | None = None,
) -> dict:
  """Write the dataset of the open demo file ``f`` (read from ``demos``)
  under ``root``; the info.json written. ``progress`` wraps the demo names
  as the episodes are written (a progress bar)."""
  import pyarrow as pa
  import pyarrow.parquet as pq

  names = demo_names(f, demos, mask)
  data = f["data"]
  try:
    env_args = json.loads(text(data.attrs.get("env_args", "{}")))
  except json.JSONDecodeError as err:
    raise ExportError(
      f"DEMOS {demos}: data.attrs['env_args'] is not JSON ({err.msg})."
    ) from None
  if not isinstance(env_args, dict):
    raise ExportError(f"DEMOS {demos}: data.attrs['env_args'] is not a JSON object.")
  task = task or env_args.get("env_name") or demos.stem
  fps = fps or recorded_fps(env_args, demos)
  repo_id = repo_id or f"manipulation-suite/{demos.stem}"
  layout = read_layout(data[names[0]], f"data/{names[0]}")
  # Every demo is read and checked before anything is written.
  episodes = [read_demo(data[n], f"data/{n}", layout) for n in names]

  videos = {
    key: VideoFiles(root, camera_feature(key), size, fps)
    for key, size in layout.cameras.items()
  }
  ep_rows, ep_stats = [], []
  writer, chunk, file, file_bytes, total = None, 0, 0, 0, 0
  try:
    for index, (name, ep) in enumerate(
      zip((progress or iter)(names), episodes, strict=True)
    ):
      table = frame_table(pa, ep, index, total, fps)
      if writer is not None and file_bytes + table.nbytes >= DATA_FILE_MB * 2**20:
        writer.close()
        writer, file_bytes = None, 0
        chunk, file = next_file(chunk, file)
      if writer is None:
        path = root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = pq.ParquetWriter(path, table.schema, compression="snappy")
      writer.write_table(table)
      file_bytes += table.nbytes
      row = {"episode_index": index, "tasks": [task], "length": ep["length"]}
      picks = sampled_frames(ep["length"])
      camera_stats = {}
      for key, video in videos.items():
        meta, picked = video.append(data[name]["obs"][key], picks)
        row |= meta
        camera_stats[camera_feature(key)] = image_stats(picked)
      row |= {
        "data/chunk_index": chunk,
        "data/file_index": file,
        "dataset_from_index": total,
        "dataset_to_index": total + ep["length"],
      }
      stats = {
        col: feature_stats(column_values(table, col)) for col in table.column_names
      }
      stats |= camera_stats
      ep_stats.append(stats)
      for feature, values in stats.items():
        row |= {f"stats/{feature}/{k}": v.tolist() for k, v in values.items()}
      row |= ep["source"]
      row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
      ep_rows.append(row)
      total += ep["length"]
  finally:
    if writer is not None:
      writer.close()
    for video in videos.values():
      video.close()

  columns = {key: [row[key] for row in ep_rows] for key in ep_rows[0]}
  path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
  path.parent.mkdir(parents=True, exist_ok=True)
  pq.write_table(pa.table(columns), path, compression="snappy")
  pq.write_table(tasks_table(pa, task), root / "meta/tasks.parquet")

  stats = {key: as_json(aggregate([s[key] for s in ep_stats])) for key in ep_stats[0]}
  write_json(root / "meta/stats.json", stats)
  info = {
    "codebase_version": CODEBASE_VERSION,
    "robot_type": "ur5_rg2",
    "total_episodes": len(names),
    "total_frames": total,
    "total_tasks": 1,
    "chunks_size": CHUNKS_SIZE,
    "data_files_size_in_mb": DATA_FILE_MB,
    "video_files_size_in_mb": VIDEO_FILE_MB,
    "fps": fps,
    "splits": {"train": f"0:{len(names)}"},
    "data_path": DATA_PATH,
    "video_path": VIDEO_PATH if layout.cameras else None,
    "features": features_for(layout, fps),
  }
  write_json(root / "meta/info.json", info)
  (root / "README.md").write_text(dataset_card(repo_id, info, demos, env_args))
  return info


def export_lerobot(
  demos: Path,
  output: Path,
  repo_id: str | None = None,
  fps: int | None = None,
  task: str | None = None,
  mask: str | None = None,
  progress: Callable[[list[str]], Iterable[str]] | None = None,
) -> dict:
  """Export the demo file ``demos`` as a LeRobotDataset in the new folder
  ``output``; the info.json written. Written beside ``output`` under a
  temporary name and renamed when complete, so a failure leaves nothing
  there. ``repo_id``: the dataset card's name (default
  manipulation-suite/<file stem>); ``fps``: default the file's control rate;
  ``task``: the task text (default the task id); ``mask``: only the demos of
  mask/<mask>. ExportError (one line) for a file it refuses."""
  import h5py

  demos, output = Path(demos), Path(output)
  try:
    f = h5py.File(demos, "r")
  except OSError as err:
    raise ExportError(f"DEMOS {demos}: cannot open it as HDF5 ({err}).") from None
  # Written under a temporary name beside --output, renamed when complete.
  partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
  try:
    with f:
      partial.mkdir(parents=True)
      info = export(f, partial, demos, repo_id, fps, task, mask, progress)
    if output.exists():
      raise ExportError(
        f"--output {output} appeared while exporting; the export is left out."
      )
    partial.rename(output)
  finally:
    if partial.exists():
      shutil.rmtree(partial)
  return info
