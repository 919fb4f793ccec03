"""Demonstrations as a library: record, replay, merge, the HDF5 file format,
LeRobot export. The tools in ``scripts/`` (``collect_demos.py``,
``replay_demos.py``, ``merge_demos.py``, ``export_lerobot.py``, ...) parse
their flags, call these and print.

- ``format``: the file (robomimic's HDF5 layout): ``Episode``,
  ``DemoWriter``, ``validate_file``, ``open_demos``, ``iter_episodes``, ...
- ``rollouts``: seeded resets (``build_env``), observation capture, the
  batched episode loop (``run_episodes``).
- ``recorder``: ``Recorder`` wraps a built environment and records any
  policy's rollouts (ManiSkill's ``RecordEpisode``).
- ``collect``: the experts' demonstrations over seeded episodes
  (``collect_demos``, ``Collection``).
- ``replay``: a file's episodes replayed and compared (``replay_file``,
  ``replay_episodes``), camera images rendered from its states (``render_file``).
- ``merge``: shards of one collection merged (``merge_files``).
- ``lerobot``: a file as a LeRobotDataset v3.0 (``export_lerobot``).

Importing this package is light (no mjlab, torch or h5py): a name is
loaded from its module when first used, mjlab when an environment is built
and h5py when a file is opened. See docs/demonstrations.md.

  from mjlab_tasks.demos import Recorder, iter_episodes, open_demos
"""

from __future__ import annotations

import importlib

_EXPORTS = {
  "format": (
    "DATA",
    "MASK",
    "SUFFIXES",
    "DemoFileError",
    "DemoWriter",
    "Episode",
    "demo_names",
    "env_args",
    "hdf5_signature_at",
    "is_image",
    "iter_episodes",
    "open_demos",
    "read_episode",
    "seeds_of",
    "validate_file",
    "write_obs",
  ),
  "rollouts": (
    "ACTOR",
    "CAMERA",
    "ActionError",
    "EpisodeSeeds",
    "Finished",
    "Job",
    "Recording",
    "actor_obs",
    "build_env",
    "camera_obs",
    "check_actions",
    "render_camera_obs",
    "run_episodes",
    "seed_reset_events",
  ),
  "recorder": ("Recorder",),
  "collect": (
    "Collection",
    "Collector",
    "collect_demos",
    "make_task",
    "shard_seeds",
  ),
  "replay": (
    "Result",
    "both_exact",
    "load_episodes",
    "render_file",
    "replay_episodes",
    "replay_file",
    "with_cameras",
  ),
  "merge": ("check_inputs", "merge_files", "merged_args"),
  "lerobot": ("ExportError", "export_lerobot"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
  module = _MODULE_OF.get(name)
  if module is None:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
  globals()[name] = value
  return value


def __dir__() -> list[str]:
  return sorted({*globals(), *__all__})
