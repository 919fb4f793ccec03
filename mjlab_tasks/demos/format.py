"""Demonstration files: the robomimic HDF5 layout, written and checked here.

One implementation for recording (``collect``, ``Recorder``), merging,
replaying and exporting; it needs only h5py and NumPy (no mjlab), so merging
and checking files is quick, and h5py is imported only when a file is
opened. Layout (robomimic's, which robomimic and Diffusion Policy load as
is)::

  data                      attrs: total (samples), env_args (JSON)
  data/demo_<i>             i = 0 .. N-1, contiguous
    obs/<term>              [T, ...] float32, one per actor observation term
    obs/<camera term>       [T, H, W, C] only with cameras: uint8 RGB or float32
                            depth [m], chunked per frame, gzip-compressed
    next_obs/<term>         [T, ...] float32, the observation after each action
                            (state terms only)
    actions                 [T, A] float32, in [-1, 1], as executed
    expert_actions          [T, A] float32, only with action noise: the expert's own
    rewards                 [T] float32
    dones                   [T] int64 (1 on the episode's last step)
    states                  [T, S] float64, the simulator state before each action
    attrs: num_samples, seed, env, success, outcome, reason
  mask/train, mask/valid    demo names (byte strings), a 90/10 split
  mask/success              names of the successful demos
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
  import h5py

DATA, MASK = "data", "mask"
DEMO_DATASETS = ("actions", "rewards", "dones", "states")
DEMO_ATTRS = ("num_samples", "seed", "env", "success", "outcome", "reason")
DEMO_NAME = re.compile(r"demo_(\d+)")
VALID_FRACTION = 0.1
# env_args keys that may differ between files of one collection (merge_demos).
PER_SHARD_KEYS = ("seed", "shard", "seed_ranges")
SUFFIXES = (".hdf5", ".h5")
"""The names a demo file may end in."""
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
IMAGE_CHANNELS = (1, 3)
"""Channels of an image observation: depth, RGB."""
IMAGE_COMPRESSION = {"compression": "gzip", "compression_opts": 4, "shuffle": True}
"""Per-frame chunks compress alone: a learner reads one frame without
inflating its neighbours. Shuffle groups float depth's bytes (smaller)."""


class DemoFileError(ValueError):
  """A demonstration file that does not follow the layout (one-line message)."""


@dataclass
class Episode:
  """One recorded episode, as written under ``data/demo_<i>``."""

  seed: int
  env: int
  obs: dict[str, np.ndarray]
  actions: np.ndarray
  rewards: np.ndarray
  dones: np.ndarray
  states: np.ndarray
  success: bool
  outcome: str
  reason: str
  attrs: dict = field(default_factory=dict)
  """Task-specific extras (e.g. BinPick's pour seed)."""
  next_obs: dict[str, np.ndarray] | None = None
  """The observation after each action (robomimic loads it by default); the
  last one is the episode's terminal observation."""
  expert_actions: np.ndarray | None = None
  """Collected with action noise (``collect_demos.py --action-noise``): the
  expert's own action at each step, while ``actions`` holds the noisy one the
  environment executed."""

  @property
  def num_samples(self) -> int:
    return len(self.actions)


def demo_name(index: int) -> str:
  return f"demo_{index}"


def split_masks(names: list[str], valid_fraction: float = VALID_FRACTION) -> dict:
  """robomimic's train/valid split of demo names: every tenth demo (by index)
  is a validation demo, at least one when there are two or more demos."""
  count = len(names)
  valid_count = (
    min(count - 1, max(1, round(valid_fraction * count))) if count > 1 else 0
  )
  # Evenly spread, deterministic: the same file always splits the same way.
  valid_idx = set(np.linspace(0, count - 1, valid_count).round().astype(int).tolist())
  valid = [n for i, n in enumerate(names) if i in valid_idx]
  train = [n for i, n in enumerate(names) if i not in valid_idx]
  return {"train": train, "valid": valid}


def _names_array(names: list[str]) -> np.ndarray:
  return np.array([n.encode() for n in names], dtype="S")


def write_masks(f: h5py.File, names: list[str], successes: list[str]) -> None:
  if MASK in f:
    del f[MASK]
  group = f.create_group(MASK)
  for key, values in {**split_masks(names), "success": successes}.items():
    group.create_dataset(key, data=_names_array(values))


def is_image(values) -> bool:
  """An image observation: [T, H, W, C] with C channels of depth or RGB (the
  state terms are [T, D])."""
  return len(values.shape) == 4 and values.shape[-1] in IMAGE_CHANNELS


def write_obs(group: h5py.Group, key: str, values: np.ndarray) -> None:
  """A state term as float32; an image in its own dtype, one compressed
  chunk per frame."""
  if is_image(values):
    values = np.asarray(values)
    group.create_dataset(
      key, data=values, chunks=(1, *values.shape[1:]), **IMAGE_COMPRESSION
    )
  else:
    group.create_dataset(key, data=np.asarray(values, dtype=np.float32))


def write_episode(group: h5py.Group, name: str, episode: Episode) -> None:
  """``data/<name>`` with its datasets and attributes."""
  demo = group.create_group(name)
  groups = {"obs": episode.obs, "next_obs": episode.next_obs}
  for group_name, terms in groups.items():
    if terms is not None:
      group = demo.create_group(group_name)
      for key, values in terms.items():
        write_obs(group, key, values)
  demo.create_dataset("actions", data=np.asarray(episode.actions, dtype=np.float32))
  if episode.expert_actions is not None:
    demo.create_dataset(
      "expert_actions", data=np.asarray(episode.expert_actions, dtype=np.float32)
    )
  demo.create_dataset("rewards", data=np.asarray(episode.rewards, dtype=np.float32))
  demo.create_dataset("dones", data=np.asarray(episode.dones, dtype=np.int64))
  demo.create_dataset("states", data=np.asarray(episode.states, dtype=np.float64))
  demo.attrs.update(
    {
      "num_samples": episode.num_samples,
      "seed": episode.seed,
      "env": episode.env,
      "success": bool(episode.success),
      "outcome": episode.outcome,
      "reason": episode.reason,
      **episode.attrs,
    }
  )


def copy_demo(source: h5py.Group, target: h5py.Group, name: str) -> None:
  """Copy a demo group (datasets and attributes) under a new name."""
  source.file.copy(source, target, name=name)


class DemoWriter:
  """Writes a demo file under a temporary name in the same folder and moves it
  to ``path`` only when finished: a crash never leaves a half-written file
  under the requested name, and an existing file is never replaced.

  Use as a context manager; an exception removes the temporary file.
  """

  def __init__(self, path: Path, env_args: dict):
    self.path = Path(path)
    self.temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
    self.path.parent.mkdir(parents=True, exist_ok=True)
    import h5py

    self.file = h5py.File(self.temp, "w-")
    self.data = self.file.create_group(DATA)
    self.env_args = env_args
    self.names: list[str] = []
    self.successes: list[str] = []
    self.total = 0

  def add(self, episode: Episode) -> str:
    name = demo_name(len(self.names))
    write_episode(self.data, name, episode)
    self._count(name, episode.num_samples, episode.success)
    return name

  def add_copy(self, source: h5py.Group) -> str:
    """A demo of another file, renumbered."""
    name = demo_name(len(self.names))
    copy_demo(source, self.data, name)
    self._count(name, int(source.attrs["num_samples"]), bool(source.attrs["success"]))
    return name

  def _count(self, name: str, samples: int, success: bool) -> None:
    self.names.append(name)
    if success:
      self.successes.append(name)
    self.total += samples
    self.file.flush()

  def finish(self) -> Path:
    """Masks and totals, then the file appears under its name (never replacing one)."""
    self.data.attrs["total"] = self.total
    self.data.attrs["env_args"] = json.dumps(self.env_args, sort_keys=True)
    write_masks(self.file, self.names, self.successes)
    self.file.close()
    os.link(self.temp, self.path)  # Fails if the name exists: nothing replaced.
    self.temp.unlink()
    return self.path

  def abort(self) -> None:
    if self.file.id.valid:
      self.file.close()
    self.temp.unlink(missing_ok=True)

  def __enter__(self) -> DemoWriter:
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    if exc_type is not None:
      self.abort()


# Reading and checking.


def hdf5_signature_at(path: Path) -> bool:
  """HDF5's superblock signature at 0, 512, 1024, ... (where HDF5 puts it):
  whether ``path`` may be an HDF5 file, without h5py."""
  size = path.stat().st_size
  with path.open("rb") as f:
    offset = 0
    while offset + len(HDF5_SIGNATURE) <= size:
      f.seek(offset)
      if f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
        return True
      offset = 512 if offset == 0 else offset * 2
  return False


def open_demos(path: Path) -> h5py.File:
  """Open a demo file read-only; DemoFileError if it is not HDF5."""
  import h5py

  try:
    return h5py.File(path, "r")
  except OSError as err:
    raise DemoFileError(f"{path}: not an HDF5 file ({err})") from None


def env_args(f: h5py.File) -> dict:
  try:
    return json.loads(f[DATA].attrs["env_args"])
  except (KeyError, json.JSONDecodeError) as err:
    raise DemoFileError(f"{f.filename}: data has no valid env_args ({err})") from None


def demo_names(f: h5py.File) -> list[str]:
  """The demo names in index order; DemoFileError unless demo_0..N-1."""
  if DATA not in f:
    raise DemoFileError(f"{f.filename}: no 'data' group")
  names = list(f[DATA].keys())
  indices = []
  for name in names:
    match = DEMO_NAME.fullmatch(name)
    if match is None:
      raise DemoFileError(f"{f.filename}: unexpected entry data/{name}")
    indices.append(int(match.group(1)))
  if sorted(indices) != list(range(len(indices))):
    raise DemoFileError(f"{f.filename}: demo names are not contiguous demo_0..N-1")
  return [demo_name(i) for i in range(len(indices))]


def check_demo(f: h5py.File, name: str, obs_keys: list[str] | None) -> None:
  """One demo's datasets, shapes, dtypes, attributes and action range."""
  where = f"{f.filename}: data/{name}"
  demo = f[DATA][name]
  for key in DEMO_DATASETS:
    if key not in demo:
      raise DemoFileError(f"{where} has no '{key}' dataset")
  missing = [a for a in DEMO_ATTRS if a not in demo.attrs]
  if missing:
    raise DemoFileError(f"{where} lacks attribute(s) {', '.join(missing)}")
  samples = int(demo.attrs["num_samples"])
  if "obs" not in demo or (obs_keys is not None and sorted(demo["obs"]) != obs_keys):
    raise DemoFileError(f"{where}: obs keys differ from the file's ({obs_keys})")
  states_only = sorted(k for k, v in demo["obs"].items() if not is_image(v))
  if "next_obs" in demo and sorted(demo["next_obs"]) not in (
    sorted(demo["obs"]),
    states_only,  # Images live in obs only (see Recording.images).
  ):
    raise DemoFileError(f"{where}: next_obs keys differ from its obs keys")
  optional = [k for k in ("expert_actions",) if k in demo]
  datasets = {
    **{k: demo[k] for k in (*DEMO_DATASETS, *optional)},
    **{
      f"{g}/{k}": v
      for g in ("obs", "next_obs")
      if g in demo
      for k, v in demo[g].items()
    },
  }
  for key, dataset in datasets.items():
    if dataset.shape[:1] != (samples,):
      raise DemoFileError(
        f"{where}/{key} has {dataset.shape[0]} rows, num_samples {samples}"
      )
    image = key.startswith(("obs/", "next_obs/")) and is_image(dataset)
    if image and dataset.dtype == np.uint8:
      continue  # RGB images are bytes.
    if key != "dones" and not np.issubdtype(dataset.dtype, np.floating):
      raise DemoFileError(f"{where}/{key} is {dataset.dtype}, not floating point")
  for key in ("actions", *optional):
    actions = demo[key][()]
    if key != "actions" and actions.shape != demo["actions"].shape:
      raise DemoFileError(f"{where}/{key} has shape {actions.shape}, not actions'")
    if not np.isfinite(actions).all():
      step = int(np.argwhere(~np.isfinite(actions))[0, 0])
      raise DemoFileError(f"{where}/{key}: non-finite value at step {step}")
    if np.abs(actions).max(initial=0.0) > 1.0:
      step = int(np.argwhere(np.abs(actions) > 1.0)[0, 0])
      raise DemoFileError(f"{where}/{key}: value outside [-1, 1] at step {step}")
  if not np.isfinite(demo["states"][()]).all():
    raise DemoFileError(f"{where}/states: non-finite value")


def validate_file(path: Path) -> dict:
  """Check a whole demo file; returns its env_args. DemoFileError on any defect."""
  with open_demos(path) as f:
    args = env_args(f)
    names = demo_names(f)
    obs_keys = (
      sorted(f[DATA][names[0]]["obs"]) if names and "obs" in f[DATA][names[0]] else None
    )
    total = 0
    for name in names:
      check_demo(f, name, obs_keys)
      total += int(f[DATA][name].attrs["num_samples"])
    if int(f[DATA].attrs.get("total", -1)) != total:
      raise DemoFileError(
        f"{path}: data.attrs['total'] is not the sum of num_samples ({total})"
      )
    for key in ("train", "valid", "success"):
      if f"{MASK}/{key}" not in f:
        raise DemoFileError(f"{path}: no mask/{key}")
  return args


def read_episode(f: h5py.File, name: str) -> Episode:
  demo = f[DATA][name]
  known = set(DEMO_ATTRS)
  return Episode(
    seed=int(demo.attrs["seed"]),
    env=int(demo.attrs["env"]),
    obs={k: v[()] for k, v in demo["obs"].items()},
    next_obs={k: v[()] for k, v in demo["next_obs"].items()}
    if "next_obs" in demo
    else None,
    actions=demo["actions"][()],
    expert_actions=demo["expert_actions"][()] if "expert_actions" in demo else None,
    rewards=demo["rewards"][()],
    dones=demo["dones"][()],
    states=demo["states"][()],
    success=bool(demo.attrs["success"]),
    outcome=str(demo.attrs["outcome"]),
    reason=str(demo.attrs["reason"]),
    attrs={k: v for k, v in demo.attrs.items() if k not in known},
  )


def iter_episodes(f: h5py.File) -> Iterator[tuple[str, Episode]]:
  for name in demo_names(f):
    yield name, read_episode(f, name)


def seeds_of(f: h5py.File) -> list[int]:
  return [int(f[DATA][n].attrs["seed"]) for n in demo_names(f)]
