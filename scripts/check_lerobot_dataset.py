"""Load an exported LeRobotDataset with lerobot's own LeRobotDataset and check it.

Runs in the separate lerobot environment (scripts/lerobot_env.sh builds it:
lerobot 0.4.4 needs torch < 2.11, the suite runs torch 2.14):

  bash scripts/lerobot_env.sh
  .venv-lerobot/bin/python scripts/check_lerobot_dataset.py DIR --demos demos.hdf5

Loads DIR with ``LeRobotDataset(repo_id, root=DIR)`` and checks: the
codebase version, episode and frame counts against meta/info.json and the
episodes' index ranges; per frame the indices and timestamps; with --demos,
the episode count and every frame's observation.state, action, next.reward,
next.done and next.success against the source HDF5 file; items read through
``dataset[i]`` (task text, decoded camera frames against the source frames);
action chunks with delta_timestamps (padding past an episode's end); one
DataLoader batch. Prints what it checked; any mismatch is one ``error:`` line
and a non-zero exit.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import tyro
from cli_args import check_at_least, check_file, fail, parse

# Mean absolute difference (pixel values in [0, 1]) allowed between a decoded
# video frame and its source frame: lerobot's AV1 at crf 30 is lossy.
MAX_FRAME_ERROR = 0.06


@dataclass
class Args:
  dataset: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="DATASET")]
  """The LeRobotDataset folder (export_lerobot.py's --output)."""
  demos: Path | None = None
  """The HDF5 file it was exported from: every frame is compared with it."""
  mask: str | None = None
  """The --mask the export used (the demos in mask/<MASK> only)."""
  repo_id: str = "manipulation-suite/check"
  """Name passed to LeRobotDataset; with root set, files are read from DATASET."""
  items: int = 24
  """Frames read through dataset[i] (with video decoding), spread over episodes."""
  video_backend: Literal["auto", "torchcodec", "pyav"] = "auto"
  """lerobot's video decoder; auto: torchcodec when its FFmpeg libraries load,
  else pyav."""


def check_args(args: Args) -> None:
  """Every flag checked before lerobot is imported."""
  if not args.dataset.exists():
    fail(f"DATASET {args.dataset}: no such folder.")
  if not args.dataset.is_dir():
    fail(f"DATASET {args.dataset} is not a folder.")
  if args.demos is not None:
    check_file(args.demos, "--demos")
  if args.mask is not None and args.demos is None:
    fail("--mask needs --demos.")
  check_at_least(1, items=args.items)


def video_backend(choice: str) -> str:
  if choice != "auto":
    return choice
  try:  # torchcodec needs FFmpeg's shared libraries, which pip does not bring.
    import torchcodec.decoders  # noqa: F401
  except Exception:
    return "pyav"
  return "torchcodec"


def source_demos(path: Path, mask: str | None) -> tuple[list[str], object]:
  import h5py

  f = h5py.File(path, "r")
  names = sorted(
    (n for n in f["data"] if re.fullmatch(r"demo_\d+", n)), key=lambda n: int(n[5:])
  )
  if mask is not None:
    if f"mask/{mask}" not in f:
      fail(f"--mask {mask}: {path} has no mask/{mask}.")
    chosen = {n.decode() if isinstance(n, bytes) else n for n in f[f"mask/{mask}"][()]}
    names = [n for n in names if n in chosen]
  return names, f


def expected_frames(demo) -> dict[str, np.ndarray]:
  """What the export must hold for one source demo."""
  n = len(demo["actions"])
  state = [
    np.asarray(ds[()], np.float32).reshape(n, -1)
    for ds in demo["obs"].values()
    if not (ds.dtype == np.uint8 and ds.ndim == 4)
  ]
  success = np.zeros(n, bool)
  success[-1] = bool(demo.attrs["success"])
  if "success" in demo:
    success = np.asarray(demo["success"][()]).reshape(n).astype(bool)
  return {
    "observation.state": np.concatenate(state, axis=1) if state else None,
    "action": np.asarray(demo["actions"][()], np.float32),
    "next.reward": np.asarray(demo["rewards"][()], np.float32).reshape(n),
    "next.done": np.asarray(demo["dones"][()]).reshape(n).astype(bool),
    "next.success": success,
  }


def open_dataset(args: Args):
  """(torch, LeRobotDataset class, the dataset, its video backend)."""
  try:
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
  except ImportError as err:
    fail(
      f"lerobot is not importable here ({err}); run this with "
      ".venv-lerobot/bin/python (bash scripts/lerobot_env.sh builds it)."
    )
  import lerobot

  backend = video_backend(args.video_backend)
  ds = LeRobotDataset(args.repo_id, root=args.dataset, video_backend=backend)
  print(f"lerobot {lerobot.__version__}, torch {torch.__version__}: loaded {ds!r}")
  return torch, LeRobotDataset, ds, backend


def check_info(ds) -> None:
  """The loaded counts agree with info.json."""
  meta, info = ds.meta, ds.meta.info
  if info["codebase_version"] != "v3.0":
    fail(f"codebase_version {info['codebase_version']}, expected v3.0.")
  if len(ds) != info["total_frames"] or ds.num_episodes != info["total_episodes"]:
    fail(f"{len(ds)} frames / {ds.num_episodes} episodes loaded; info.json says "
         f"{info['total_frames']} / {info['total_episodes']}.")  # fmt: skip
  if len(meta.episodes) != info["total_episodes"]:
    fail(f"{len(meta.episodes)} episode rows; info.json says {info['total_episodes']}.")


def check_indices(ds, columns: dict) -> list[int]:
  """Indices, frame indices and timestamps run in order; the episode lengths."""
  meta, fps = ds.meta, ds.fps
  if not np.array_equal(columns["index"], np.arange(len(ds))):
    fail("index is not 0..N-1 in order.")
  lengths = []
  for ep in range(ds.num_episodes):
    row = meta.episodes[ep]
    lo, hi = row["dataset_from_index"], row["dataset_to_index"]
    if lo != sum(lengths) or hi - lo != row["length"]:
      fail(f"episode {ep}: frames [{lo}, {hi}) for length {row['length']}.")
    lengths.append(row["length"])
    frame = columns["frame_index"][lo:hi]
    if not np.array_equal(frame, np.arange(hi - lo)):
      fail(f"episode {ep}: frame_index is not 0..{hi - lo - 1}.")
    if not (columns["episode_index"][lo:hi] == ep).all():
      fail(f"episode {ep}: episode_index differs.")
    if np.abs(columns["timestamp"][lo:hi] - frame / fps).max() > 1e-5:
      fail(f"episode {ep}: timestamps are not frame_index / {fps}.")
  shown = lengths if len(lengths) <= 10 else f"{min(lengths)} to {max(lengths)}"
  print(f"episodes: {ds.num_episodes}, lengths {shown}, frames {len(ds)}, fps {fps}")
  return lengths


def check_against_demos(args: Args, ds, columns: dict, names, f) -> None:
  """Every frame's numbers equal the source demonstrations'."""
  meta = ds.meta
  if len(names) != ds.num_episodes:
    fail(f"{ds.num_episodes} episodes; --demos has {len(names)} to export.")
  for ep, name in enumerate(names):
    want = expected_frames(f["data"][name])
    row = meta.episodes[ep]
    if row.get("source/demo", name) != name:
      fail(f"episode {ep} came from {row['source/demo']}, expected {name}.")
    lo, hi = row["dataset_from_index"], row["dataset_to_index"]
    if hi - lo != len(want["action"]):
      fail(
        f"episode {ep} ({name}): {hi - lo} frames, the demo has {len(want['action'])}."
      )
    for key, values in want.items():
      if values is None:
        continue
      got = columns[key][lo:hi]
      if got.dtype == object:
        got = np.stack(got)
      if not np.array_equal(got.reshape(values.shape), values):
        fail(f"episode {ep} ({name}): {key} differs from the demo.")
  print(
    f"every frame's observation.state, action, next.reward, next.done, "
    f"next.success equals {args.demos.name} ({len(names)} demos)"
  )


def check_items(args, torch, ds, columns, lengths, names, f, backend) -> None:
  """Items through dataset[i]: the first and last frame of each episode,
  then evenly spread ones, up to --items; videos against the source."""
  meta = ds.meta
  starts = np.cumsum([0, *lengths])
  picks = [
    int(i) for s, e in zip(starts[:-1], starts[1:], strict=True) for i in (s, e - 1)
  ]
  picks += np.linspace(0, len(ds) - 1, args.items).astype(int).tolist()
  picks = list(dict.fromkeys(picks))[: args.items]
  task = meta.tasks.index[0]
  worst = 0.0
  for i in picks:
    item = ds[i]
    if item["task"] != task or not isinstance(task, str) or not task:
      fail(f"dataset[{i}]['task'] = {item['task']!r}, tasks.parquet has {task!r}.")
    if not torch.equal(item["action"], torch.as_tensor(columns["action"][i])):
      fail(f"dataset[{i}]['action'] differs from the data column.")
    for key in meta.video_keys:
      worst = max(worst, check_video_item(torch, ds, i, item, key, names, f))
  print(
    f"dataset[i] for {len(picks)} frames: task {task!r}"
    + (
      f", videos {meta.video_keys} decoded with {backend}"
      + (f" (largest mean error {worst:.4f})" if f is not None else "")
      if meta.video_keys
      else ", no cameras"
    )
  )


def check_video_item(torch, ds, i, item, key, names, f) -> float:
  """One decoded frame's shape, and its mean error against the source."""
  h, w, _ = ds.meta.features[key]["shape"]
  frame = item[key]
  if tuple(frame.shape) != (3, h, w) or frame.dtype != torch.float32:
    fail(
      f"dataset[{i}]['{key}']: {tuple(frame.shape)} {frame.dtype}, expected (3, {h}, {w})."
    )
  if f is None:
    return 0.0
  ep, k = int(item["episode_index"]), int(item["frame_index"])
  source = f["data"][names[ep]]["obs"][
    key.removeprefix("observation.images.") + "_rgb"
  ][k]
  error = float(np.abs(frame.permute(1, 2, 0).numpy() - source / 255.0).mean())
  if error > MAX_FRAME_ERROR:
    fail(
      f"dataset[{i}]['{key}'] differs from the source frame by {error:.3f} on average."
    )
  return error


def check_chunks(args, torch, dataset_class, ds, lengths, backend) -> None:
  """Action chunks as a chunking policy trains on them: past an episode's
  end the last action repeats and is marked as padding."""
  meta, fps = ds.meta, ds.fps
  chunk = [k / fps for k in range(4)]
  chunked = dataset_class(
    args.repo_id,
    root=args.dataset,
    video_backend=backend,
    delta_timestamps={"action": chunk},
  )
  item = chunked[lengths[0] - 1]
  pad = item["action_is_pad"].tolist()
  shape = tuple(item["action"].shape)
  if shape != (4, meta.features["action"]["shape"][0]) or pad != [
    False,
    True,
    True,
    True,
  ]:
    fail(f"action chunk at the end of episode 0: shape {shape}, pad {pad}.")
  batch = next(iter(torch.utils.data.DataLoader(chunked, batch_size=8, shuffle=False)))
  print(
    "action chunks (delta_timestamps) pad past an episode's end; a DataLoader "
    "batch: "
    + json.dumps({k: list(v.shape) for k, v in batch.items() if hasattr(v, "shape")})
  )


def main(args: Args) -> int:
  check_args(args)
  torch, dataset_class, ds, backend = open_dataset(args)
  check_info(ds)
  hf = ds.hf_dataset.with_format(None)  # Plain columns, not per-item tensors.
  columns = {k: np.asarray(hf[k]) for k in hf.column_names}
  lengths = check_indices(ds, columns)
  names, f = (None, None) if args.demos is None else source_demos(args.demos, args.mask)
  if f is not None:
    check_against_demos(args, ds, columns, names, f)
  print(
    f"per frame: {int(columns['next.done'].sum())} done, "
    f"{int(columns['next.success'].sum())} success, reward sum "
    f"{float(columns['next.reward'].sum()):.4f}"
  )
  check_items(args, torch, ds, columns, lengths, names, f, backend)
  check_chunks(args, torch, dataset_class, ds, lengths, backend)
  print(f"ok: {args.dataset} loads with lerobot's LeRobotDataset")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
