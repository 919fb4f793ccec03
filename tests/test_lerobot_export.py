"""scripts/export_lerobot.py: robomimic-layout HDF5 -> LeRobotDataset v3.0.

The fast tier checks the written files with pyarrow directly (layout, types,
every frame's values against the HDF5 file, stats, refusals); the slow tier
loads the export with lerobot's own LeRobotDataset in the separate
environment that scripts/lerobot_env.sh builds (lerobot 0.4.4 needs torch <
2.11, the suite runs 2.14).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from script_runner import ROOT, run_script

from mjlab_tasks.demos import lerobot

LENGTHS = (12, 7, 20)  # Three demos; demo_1 failed.
STATE_TERMS = {"joint_pos": 6, "cube_pos": 3, "gripper": 1}


def write_demos(
  path: Path, lengths=LENGTHS, camera: tuple[int, int] | None = None, seed: int = 0
) -> dict:
  """A small demonstrations file in collect_demos.py's robomimic layout; the
  values written, per demo, to compare the export with."""
  h5py = pytest.importorskip("h5py")
  rng = np.random.default_rng(seed)
  written = {}
  with h5py.File(path, "w") as f:
    data = f.create_group("data")
    data.attrs["total"] = sum(lengths)
    env_args = {"env_name": "CubeTray-UR5-RG2", "engine": "mujoco", "seed": seed}
    data.attrs["env_args"] = json.dumps(env_args)
    for k, n in enumerate(lengths):
      demo = data.create_group(f"demo_{k}")
      obs = {
        key: rng.normal(size=(n, d) if d > 1 else (n,)).astype(np.float32)
        for key, d in STATE_TERMS.items()
      }
      for key, values in obs.items():
        demo.create_dataset(f"obs/{key}", data=values)
      if camera is not None:
        h, w = camera
        # Smooth, moving gradients: a lossy codec keeps them close.
        y, x = np.mgrid[0:h, 0:w]
        frames = np.stack(
          [
            np.stack(
              [(x * 4 + t * 6) % 256, (y * 4) % 256, np.full_like(x, 40 * k)], -1
            )
            for t in range(n)
          ]
        ).astype(np.uint8)
        demo.create_dataset("obs/wrist_rgb", data=frames, chunks=(1, h, w, 3))
        obs["wrist_rgb"] = frames
      actions = rng.uniform(-1, 1, size=(n, 7)).astype(np.float32)
      rewards = rng.uniform(0, 1, size=n).astype(np.float32)
      dones = np.zeros(n, np.uint8)
      dones[-1] = 1
      success = k != 1
      demo.create_dataset("actions", data=actions)
      demo.create_dataset("rewards", data=rewards)
      demo.create_dataset("dones", data=dones)
      demo.create_dataset("states", data=rng.normal(size=(n, 30)))
      demo.attrs.update(
        num_samples=n,
        seed=100 + k,
        success=success,
        outcome="success" if success else "timeout",
        reason="" if success else "cube not in tray",
      )
      written[f"demo_{k}"] = {
        "obs": obs,
        "actions": actions,
        "rewards": rewards,
        "dones": dones.astype(bool),
        "success": success,
      }
    names = [f"demo_{k}".encode() for k in range(len(lengths))]
    f.create_dataset("mask/train", data=names[:-1])
    f.create_dataset("mask/valid", data=names[-1:])
    f.create_dataset("mask/success", data=[n for k, n in enumerate(names) if k != 1])
  return written


def export(tmp_path: Path, *extra: str, demos: Path | None = None):
  out = tmp_path / "lerobot"
  demos = demos or tmp_path / "demos.hdf5"
  return out, run_script("export_lerobot.py", str(demos), "--output", str(out), *extra)


def read_export(out: Path) -> dict:
  """The export's files, read with pyarrow and json only."""
  pq = pytest.importorskip("pyarrow.parquet")
  return {
    "info": json.loads((out / "meta/info.json").read_text()),
    "stats": json.loads((out / "meta/stats.json").read_text()),
    "data": pq.read_table(out / "data/chunk-000/file-000.parquet"),
    "episodes": pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet"),
    "tasks": pq.read_table(out / "meta/tasks.parquet"),
  }


def column(table, name: str) -> np.ndarray:
  col = table.column(name).combine_chunks()
  if col.type.num_fields:  # fixed_size_list
    return np.asarray(col.flatten()).reshape(len(col), -1)
  return np.asarray(col)


@pytest.fixture
def tool():
  from test_cli_bad_flags import load_tool

  return load_tool("export_lerobot.py")


def test_state_only_export_layout_and_values(tmp_path):
  pytest.importorskip("pyarrow")
  written = write_demos(tmp_path / "demos.hdf5")
  out, run = export(tmp_path)
  assert run.returncode == 0, run.stderr
  assert (
    run.stdout.strip() == f"wrote {out}: 3 episodes, 39 frames at 20 fps, no cameras"
  )
  files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
  assert files == [
    "README.md",
    "data/chunk-000/file-000.parquet",
    "meta/episodes/chunk-000/file-000.parquet",
    "meta/info.json",
    "meta/stats.json",
    "meta/tasks.parquet",
  ]
  assert not list(tmp_path.glob(".lerobot.partial-*"))
  x = read_export(out)
  info = x["info"]
  assert info["codebase_version"] == "v3.0"
  assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (
    3,
    39,
    1,
  )
  assert (info["fps"], info["splits"], info["video_path"]) == (
    20,
    {"train": "0:3"},
    None,
  )
  assert (
    info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
  )
  assert (info["chunks_size"], info["data_files_size_in_mb"]) == (1000, 100)
  features = info["features"]
  assert list(features) == [
    "observation.state",
    "action",
    "next.reward",
    "next.done",
    "next.success",
    "timestamp",
    "frame_index",
    "episode_index",
    "index",
    "task_index",
  ]
  # h5py lists obs terms by name: the state is their concatenation in that order.
  order = sorted(STATE_TERMS)
  assert features["observation.state"]["shape"] == [sum(STATE_TERMS.values())]
  assert features["observation.state"]["names"][:4] == [
    "cube_pos_0",
    "cube_pos_1",
    "cube_pos_2",
    "gripper",
  ]
  assert features["action"] == {
    "dtype": "float32",
    "shape": [7],
    "names": [f"action_{i}" for i in range(7)],
  }
  assert features["next.done"] == {"dtype": "bool", "shape": [1], "names": None}
  assert features["next.reward"]["dtype"] == "float32"

  data = x["data"]
  types = {f.name: str(f.type) for f in data.schema}
  assert types["observation.state"].startswith("fixed_size_list<element: float>[10]")
  assert types["action"].startswith("fixed_size_list<element: float>[7]")
  assert types["next.reward"] == "float" and types["timestamp"] == "float"
  assert types["next.done"] == types["next.success"] == "bool"
  assert types["index"] == types["frame_index"] == types["episode_index"] == "int64"
  start = 0
  for k, (name, demo) in enumerate(written.items()):
    n = len(demo["actions"])
    rows = slice(start, start + n)
    state = np.concatenate([demo["obs"][t].reshape(n, -1) for t in order], axis=1)
    np.testing.assert_array_equal(column(data, "observation.state")[rows], state)
    np.testing.assert_array_equal(column(data, "action")[rows], demo["actions"])
    np.testing.assert_array_equal(column(data, "next.reward")[rows], demo["rewards"])
    np.testing.assert_array_equal(column(data, "next.done")[rows], demo["dones"])
    success = column(data, "next.success")[rows]
    assert success[-1] == demo["success"] and not success[:-1].any(), name
    np.testing.assert_array_equal(column(data, "frame_index")[rows], np.arange(n))
    np.testing.assert_allclose(
      column(data, "timestamp")[rows], np.arange(n) / 20, atol=1e-7
    )
    assert (column(data, "episode_index")[rows] == k).all()
    start += n
  np.testing.assert_array_equal(column(data, "index"), np.arange(39))
  assert (column(data, "task_index") == 0).all()

  episodes = x["episodes"].to_pylist()
  assert [e["episode_index"] for e in episodes] == [0, 1, 2]
  assert [e["length"] for e in episodes] == list(LENGTHS)
  assert [(e["dataset_from_index"], e["dataset_to_index"]) for e in episodes] == [
    (0, 12),
    (12, 19),
    (19, 39),
  ]
  assert all(e["tasks"] == ["CubeTray-UR5-RG2"] for e in episodes)
  assert all(e["data/chunk_index"] == e["data/file_index"] == 0 for e in episodes)
  assert [e["source/demo"] for e in episodes] == ["demo_0", "demo_1", "demo_2"]
  assert [e["source/success"] for e in episodes] == [True, False, True]
  assert episodes[1]["source/reason"] == "cube not in tray"
  assert episodes[2]["stats/action/count"] == [20]
  assert len(episodes[2]["stats/observation.state/mean"]) == 10

  # tasks.parquet as pandas writes it: the task text is the index.
  tasks = x["tasks"]
  pandas_meta = json.loads(tasks.schema.metadata[b"pandas"])
  assert pandas_meta["index_columns"] == ["__index_level_0__"]
  assert tasks.column("__index_level_0__").to_pylist() == ["CubeTray-UR5-RG2"]
  assert tasks.column("task_index").to_pylist() == [0]

  stats = x["stats"]
  actions = np.concatenate([d["actions"] for d in written.values()])
  np.testing.assert_allclose(stats["action"]["mean"], actions.mean(0), rtol=1e-5)
  np.testing.assert_allclose(stats["action"]["std"], actions.std(0), rtol=1e-4)
  np.testing.assert_allclose(stats["action"]["min"], actions.min(0))
  assert stats["action"]["count"] == [39]
  assert set(stats["action"]) == {"min", "max", "mean", "std", "count"} | {
    "q01",
    "q10",
    "q50",
    "q90",
    "q99",
  }
  assert set(stats) == set(features)
  assert stats["next.success"]["max"] == [1.0]
  assert "manipulation-suite/demos" in (out / "README.md").read_text()


def test_camera_frames_become_videos(tmp_path):
  pytest.importorskip("pyarrow")
  imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
  write_demos(tmp_path / "demos.hdf5", camera=(64, 96))
  out, run = export(tmp_path)
  assert run.returncode == 0, run.stderr
  assert run.stdout.strip().endswith("videos: observation.images.wrist")
  x = read_export(out)
  info = x["info"]
  key = "observation.images.wrist"
  assert info["video_path"] == (
    "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
  )
  assert info["features"][key]["dtype"] == "video"
  assert info["features"][key]["shape"] == [64, 96, 3]
  assert info["features"][key]["names"] == ["height", "width", "channels"]
  assert info["features"][key]["info"]["video.codec"] == "av1"
  assert key not in x["data"].column_names  # Frames live in the video only.
  video = out / f"videos/{key}/chunk-000/file-000.mp4"
  reader = imageio_ffmpeg.read_frames(str(video))
  meta = next(reader)
  assert (meta["codec"], meta["size"], meta["fps"]) == ("av1", (96, 64), 20.0)
  assert sum(1 for _ in reader) == 39
  episodes = x["episodes"].to_pylist()
  spans = [
    (e[f"videos/{key}/from_timestamp"], e[f"videos/{key}/to_timestamp"])
    for e in episodes
  ]
  np.testing.assert_allclose(spans, [(0, 0.6), (0.6, 0.95), (0.95, 1.95)])
  stats = x["stats"][key]
  assert np.asarray(stats["mean"]).shape == (3, 1, 1)
  assert 0 <= np.min(stats["min"]) and np.max(stats["max"]) <= 1


def test_mask_task_and_fps(tmp_path):
  pytest.importorskip("pyarrow")
  write_demos(tmp_path / "demos.hdf5")
  out, run = export(
    tmp_path,
    "--mask",
    "success",
    "--task",
    "put the cube in the tray",
    "--fps",
    "5",
    "--repo-id",
    "me/cube-tray",
  )
  assert run.returncode == 0, run.stderr
  x = read_export(out)
  assert x["info"]["total_episodes"] == 2 and x["info"]["fps"] == 5
  assert x["episodes"].column("source/demo").to_pylist() == ["demo_0", "demo_2"]
  assert x["tasks"].column("__index_level_0__").to_pylist() == [
    "put the cube in the tray"
  ]
  assert column(x["data"], "next.success").sum() == 2
  np.testing.assert_allclose(column(x["data"], "timestamp")[:12], np.arange(12) / 5)
  assert "# me/cube-tray" in (out / "README.md").read_text()


def export_split(tmp_path: Path, tool, monkeypatch) -> Path:
  """Export in process with file size limits of 0 MB: every episode starts a
  new data file and a new video file, as past lerobot's 100 / 200 MB."""
  import cli_args

  monkeypatch.setattr(lerobot, "DATA_FILE_MB", 0)
  monkeypatch.setattr(lerobot, "VIDEO_FILE_MB", 0)
  out = tmp_path / "lerobot"
  argv = [str(tmp_path / "demos.hdf5"), "--output", str(out)]
  assert tool.main(cli_args.parse(tool.Args, argv)) == 0
  return out


def test_new_files_past_the_size_limits(tmp_path, tool, monkeypatch):
  pytest.importorskip("pyarrow")
  imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
  write_demos(tmp_path / "demos.hdf5", camera=(64, 96))
  out = export_split(tmp_path, tool, monkeypatch)
  key = "observation.images.wrist"
  episodes = read_export(out)["episodes"].to_pylist()
  assert [e["data/file_index"] for e in episodes] == [0, 1, 2]
  assert [e[f"videos/{key}/file_index"] for e in episodes] == [0, 1, 2]
  spans = [
    (e[f"videos/{key}/from_timestamp"], e[f"videos/{key}/to_timestamp"])
    for e in episodes
  ]
  np.testing.assert_allclose(spans, [(0, 0.6), (0, 0.35), (0, 1.0)])
  pq = pytest.importorskip("pyarrow.parquet")
  for k, n in enumerate(LENGTHS):
    data = pq.read_table(out / f"data/chunk-000/file-00{k}.parquet")
    np.testing.assert_array_equal(column(data, "episode_index"), np.full(n, k))
    video = out / f"videos/{key}/chunk-000/file-00{k}.mp4"
    reader = imageio_ffmpeg.read_frames(str(video))
    next(reader)
    assert sum(1 for _ in reader) == n


def test_image_stats_equal_numpy_on_the_pixels():
  """Camera stats come from per-channel histograms; they equal numpy's min,
  max, mean, std and (linear) quantiles over the sampled pixels."""
  rng = np.random.default_rng(3)
  for shape in [(1, 2, 2, 3), (7, 6, 10, 3), (30, 64, 48, 3)]:
    frames = rng.integers(0, 256, size=shape, dtype=np.uint8) // rng.integers(1, 6)
    stats = lerobot.image_stats(frames)
    pixels = frames.reshape(-1, 3) / 255.0
    want = {"min": pixels.min(0), "max": pixels.max(0), "mean": pixels.mean(0)}
    want |= {"std": pixels.std(0)}
    want |= {k: np.quantile(pixels, q, axis=0) for k, q in lerobot.QUANTILES.items()}
    for key, values in want.items():
      assert stats[key].shape == (3, 1, 1)
      np.testing.assert_allclose(stats[key].reshape(3), values, atol=1e-12, err_msg=key)
    assert stats["count"].tolist() == [shape[0]]


def test_fps_from_the_recorded_control_rate(tmp_path):
  pytest.importorskip("pyarrow")
  h5py = pytest.importorskip("h5py")
  demos = tmp_path / "demos.hdf5"
  write_demos(demos)
  with h5py.File(demos, "r+") as f:
    env_args = json.loads(f["data"].attrs["env_args"])
    f["data"].attrs["env_args"] = json.dumps(env_args | {"control_hz": 10.0})
  out, run = export(tmp_path)
  assert run.returncode == 0, run.stderr
  x = read_export(out)
  assert x["info"]["fps"] == 10
  np.testing.assert_allclose(column(x["data"], "timestamp")[:12], np.arange(12) / 10)


def corrupt(path: Path, how: str) -> None:
  h5py = pytest.importorskip("h5py")
  with h5py.File(path, "r+") as f:
    if how == "nan action":
      f["data/demo_1/actions"][3, 2] = np.nan
    elif how == "action out of range":
      f["data/demo_2/actions"][0, 6] = 1.5
    elif how == "obs keys differ":
      del f["data/demo_2/obs/gripper"]
    elif how == "no success":
      del f["data/demo_0"].attrs["success"]
    elif how == "short rewards":
      del f["data/demo_0/rewards"]
      f["data/demo_0/rewards"] = np.zeros(5)
    elif how == "no data":
      del f["data"]


@pytest.mark.parametrize(
  ("how", "says"),
  [
    ("nan action", "data/demo_1/actions[3]"),
    ("action out of range", "data/demo_2/actions[0]"),
    ("obs keys differ", "data/demo_2/obs: keys"),
    ("no success", "data/demo_0: no 'success'"),
    ("short rewards", "data/demo_0/rewards: shape (5,)"),
    ("no data", "no 'data' group"),
  ],
)
def test_bad_demos_are_refused_in_one_line(tmp_path, tool, capsys, how, says):
  pytest.importorskip("pyarrow")
  import cli_args

  demos = tmp_path / "demos.hdf5"
  write_demos(demos)
  corrupt(demos, how)
  out = tmp_path / "lerobot"
  with pytest.raises(SystemExit) as exit_:
    tool.main(cli_args.parse(tool.Args, [str(demos), "--output", str(out)]))
  assert exit_.value.code == 2
  err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
  assert not out.exists() and not list(tmp_path.glob(".lerobot.partial-*"))


def test_bad_inputs_named_in_one_line(tmp_path, tool, capsys):
  """The positional DEMOS file and masks (test_cli_bad_flags covers the flags)."""
  import cli_args

  write_demos(tmp_path / "demos.hdf5")
  (tmp_path / "notes.txt").write_text("not HDF5")
  out = str(tmp_path / "lerobot")
  cases = [
    ([str(tmp_path / "none.hdf5"), "--output", out], "no such file"),
    ([str(tmp_path / "notes.txt"), "--output", out], "is not an HDF5 file"),
    ([str(tmp_path), "--output", out], "is not a file"),
    (["--output", out], "missing"),
  ]
  if importlib_find("pyarrow") and importlib_find("h5py"):
    cases.append(
      (
        [str(tmp_path / "demos.hdf5"), "--output", out, "--mask", "test"],
        "has no mask/test",
      )
    )
  for argv, says in cases:
    with pytest.raises(SystemExit) as exit_:
      tool.main(cli_args.parse(tool.Args, argv))
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
  assert not Path(out).exists()


def importlib_find(name: str) -> bool:
  import importlib.util

  return importlib.util.find_spec(name) is not None


def test_missing_extra_is_one_line(tmp_path, tool, capsys, monkeypatch):
  import importlib.util

  import cli_args

  (tmp_path / "demos.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n")
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == "pyarrow" else find_spec(name, *a),
  )
  argv = [str(tmp_path / "demos.hdf5"), "--output", str(tmp_path / "out")]
  with pytest.raises(SystemExit):
    tool.main(cli_args.parse(tool.Args, argv))
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: export_lerobot.py needs pyarrow")
  assert err.endswith(": pip install 'manipulation-suite[lerobot]'") and "\n" not in err


LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.parametrize(
  ("camera", "split"),
  [(None, False), ((64, 96), False), ((64, 96), True)],
  ids=["state", "camera", "camera-file-per-episode"],
)
def test_lerobot_loads_the_export(tmp_path, tool, monkeypatch, camera, split):
  """lerobot 0.4.4's LeRobotDataset loads the export (in its own environment,
  built here on first use: several minutes and about 8 GiB) and every frame
  matches the source file."""
  pytest.importorskip("pyarrow")
  build = subprocess.run(
    ["bash", str(ROOT / "scripts" / "lerobot_env.sh")],
    capture_output=True,
    text=True,
    timeout=3600,
  )
  assert build.returncode == 0, build.stdout + build.stderr
  demos = tmp_path / "demos.hdf5"
  write_demos(demos, camera=camera)
  if split:
    out = export_split(tmp_path, tool, monkeypatch)
  else:
    out, run = export(tmp_path)
    assert run.returncode == 0, run.stderr
  check = subprocess.run(
    [str(LEROBOT_PYTHON), str(ROOT / "scripts" / "check_lerobot_dataset.py")]
    + [str(out), "--demos", str(demos)],
    capture_output=True,
    text=True,
    cwd=ROOT,
    timeout=600,
  )
  assert check.returncode == 0, check.stdout + check.stderr
  assert "lerobot 0.4.4" in check.stdout
  assert "episodes: 3, lengths [12, 7, 20], frames 39, fps 20" in check.stdout
  assert "per frame: 3 done, 2 success" in check.stdout
  assert "every frame's observation.state, action" in check.stdout
  if camera is not None:
    assert "videos ['observation.images.wrist'] decoded with" in check.stdout
  assert check.stdout.rstrip().endswith("loads with lerobot's LeRobotDataset")

  # A corrupted export is caught: one reward changed in the parquet data.
  pq = pytest.importorskip("pyarrow.parquet")
  import pyarrow as pa

  path = out / f"data/chunk-000/file-00{1 if split else 0}.parquet"
  table = pq.read_table(path)
  rewards = column(table, "next.reward").copy()
  rewards[3 if split else 15] += 1  # Frame 3 of episode 1.
  i = table.column_names.index("next.reward")
  pq.write_table(table.set_column(i, "next.reward", pa.array(rewards)), path)
  check = subprocess.run(
    [str(LEROBOT_PYTHON), str(ROOT / "scripts" / "check_lerobot_dataset.py")]
    + [str(out), "--demos", str(demos)],
    capture_output=True,
    text=True,
    cwd=ROOT,
    timeout=600,
  )
  assert check.returncode != 0
  assert "error: episode 1 (demo_1): next.reward differs from the demo." in check.stderr
