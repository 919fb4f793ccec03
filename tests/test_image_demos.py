"""Image demonstrations end to end: collect_demos.py --cameras, images
re-rendered from recorded states (replay_demos.py --render-cameras), image
behaviour cloning (train_bc.py) scored by evaluate_cube_tray.py --policy.

CubeTray-UR5-RG2 on the C engine, in-process (one import of mjlab): two
6-step expert episodes in two environments with the wrist camera, and the
same seeds without cameras. Refusals are one line.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from script_runner import ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # The tools and their helpers.

import cli_args  # noqa: E402
import collect_demos  # noqa: E402
import evaluate_cube_tray  # noqa: E402
import merge_demos  # noqa: E402
import replay_demos  # noqa: E402
import train_bc  # noqa: E402

from mjlab_tasks.common.cameras import CAMERA_NAMES  # noqa: E402
from mjlab_tasks.demos import validate_file  # noqa: E402
from mjlab_tasks.policies import bc_cameras, bc_checkpoint  # noqa: E402

CPU = ["--engine", "mujoco", "--device", "cpu"]
STEPS = 6
WRIST = {
  "wrist_rgb": ((180, 320, 3), np.uint8),
  "wrist_depth": ((180, 320, 1), np.float32),
}


def collect(path: Path, *argv: str) -> Path:
  args = ["--task", "CubeTray-UR5-RG2", "--num-envs", "2", "--episodes", "2"]
  args += ["--max-steps", str(STEPS), "--output", str(path), *CPU, *argv]
  assert collect_demos.main(cli_args.parse(collect_demos.Args, args)) == 0
  return path


def one_line_error(capsys) -> str:
  lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  lines = [line for line in lines if "%|" not in line]  # progress bars
  assert len(lines) == 1, lines
  assert lines[0].startswith("error: ")
  return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
  """The same two episodes with the wrist camera and without cameras."""
  root = tmp_path_factory.mktemp("image_demos")
  return {
    "camera": collect(root / "camera.hdf5", "--cameras", "wrist"),
    "states": collect(root / "states.hdf5"),
  }


def env_args(path: Path) -> dict:
  with h5py.File(path) as f:
    return json.loads(f["data"].attrs["env_args"])


def test_collection_records_compressed_images(files):
  validate_file(files["camera"])  # uint8 images accepted
  args = env_args(files["camera"])
  assert args["env_kwargs"]["cameras"] == ["wrist"]
  assert args["camera_keys"] == ["wrist_depth", "wrist_rgb"]
  with h5py.File(files["camera"]) as f:
    for name in ("demo_0", "demo_1"):
      demo = f["data"][name]
      for key, (shape, dtype) in WRIST.items():
        images = demo["obs"][key]
        assert images.shape == (STEPS, *shape) and images.dtype == dtype
        assert images.chunks == (1, *shape)  # one frame per chunk
        assert images.compression in ("gzip", "lzf")
        assert key not in demo["next_obs"]  # images live in obs only
      rgb = demo["obs"]["wrist_rgb"][()]
      assert rgb.std() > 10  # a picture, not a blank
      assert (demo["obs"]["wrist_depth"][()] > 0.05).mean() > 0.9  # metres


def test_state_only_file_has_no_images(files):
  args = env_args(files["states"])
  assert "cameras" not in args["env_kwargs"] and "camera_keys" not in args
  with h5py.File(files["states"]) as f:
    for demo in f["data"].values():
      for group in ("obs", "next_obs"):
        assert all(v.ndim == 2 for v in demo[group].values())
        assert sorted(demo[group]) == args["obs_keys"]


def strip_images(source: Path, target: Path) -> None:
  """A state-only copy of a camera file (its env_args without cameras)."""
  shutil.copy(source, target)
  with h5py.File(target, "r+") as f:
    args = json.loads(f["data"].attrs["env_args"])
    del args["env_kwargs"]["cameras"], args["camera_keys"]
    f["data"].attrs["env_args"] = json.dumps(args, sort_keys=True)
    for demo in f["data"].values():
      for key in WRIST:
        del demo["obs"][key]


def render(source: Path, target: Path, cameras: str = "wrist") -> int:
  argv = [str(source), "--render-cameras", cameras, "--output", str(target)]
  return replay_demos.main(cli_args.parse(replay_demos.Args, argv))


def test_rendering_from_states_equals_recording(files, tmp_path, capsys):
  states_only = tmp_path / "stripped.hdf5"
  strip_images(files["camera"], states_only)
  rendered = tmp_path / "rendered.hdf5"
  assert render(states_only, rendered) == 0
  assert env_args(rendered)["env_kwargs"] == env_args(files["camera"])["env_kwargs"]
  with h5py.File(files["camera"]) as a, h5py.File(rendered) as b:
    for name in ("demo_0", "demo_1"):
      for key in WRIST:
        assert b["data"][name]["obs"][key].chunks == a["data"][name]["obs"][key].chunks
        # Bitwise: the C engine restores the states exactly.
        assert np.array_equal(a["data"][name]["obs"][key], b["data"][name]["obs"][key])
      assert np.array_equal(a["data"][name]["states"], b["data"][name]["states"])
  # A file that already has the images: refused, one line.
  capsys.readouterr()
  with pytest.raises(SystemExit):
    render(files["camera"], tmp_path / "again.hdf5")
  assert "already has camera images" in one_line_error(capsys)


def test_camera_file_replays_exactly_and_merges(files, tmp_path):
  argv = [str(files["camera"]), *CPU[:2]]
  assert replay_demos.main(cli_args.parse(replay_demos.Args, argv)) == 0
  # A second shard (the same episodes under other seeds), merged.
  other = tmp_path / "other.hdf5"
  shutil.copy(files["camera"], other)
  with h5py.File(other, "r+") as f:
    args = json.loads(f["data"].attrs["env_args"])
    args["seed_ranges"] = [[100, 102]]
    f["data"].attrs["env_args"] = json.dumps(args, sort_keys=True)
    for demo in f["data"].values():
      demo.attrs["seed"] += 100
  merged = tmp_path / "merged.hdf5"
  argv = [str(files["camera"]), str(other), "--output", str(merged)]
  assert merge_demos.main(cli_args.parse(merge_demos.Args, argv)) == 0
  validate_file(merged)
  with h5py.File(merged) as f, h5py.File(files["camera"]) as a:
    images = f["data/demo_3/obs/wrist_rgb"]
    assert images.chunks == (1, 180, 320, 3) and images.compression == "gzip"
    assert np.array_equal(images, a["data/demo_1/obs/wrist_rgb"])


def test_image_behaviour_cloning_is_scored(files, tmp_path, capsys):
  run = tmp_path / "run"
  argv = [str(files["camera"]), "--output", str(run), "--epochs", "2"]
  argv += ["--obs-keys", "wrist_rgb", "wrist_depth", "joint_pos", "gripper_opening"]
  argv += ["--image-size", "45", "80", "--hidden", "32", "--chunk", "2"]
  assert train_bc.main(cli_args.parse(train_bc.Args, argv)) == 0
  ckpt = bc_checkpoint(run / "policy.pt")
  assert ckpt["obs_keys"] == ["joint_pos", "gripper_opening"]
  assert ckpt["obs_sizes"] == [6, 1]
  assert ckpt["image_keys"] == ["wrist_depth", "wrist_rgb"]
  assert ckpt["image_shapes"]["wrist_rgb"] == [180, 320, 3]
  assert bc_cameras(run / "policy.pt") == ("wrist",)
  summary = json.loads((run / "summary.json").read_text())
  assert summary["args"]["image_shift"] == "4"  # the default without --perceive

  report = tmp_path / "report"
  argv = ["--policy", str(run / "policy.pt"), "--num-envs", "1", "--episodes", "1"]
  argv += ["--max-steps", "3", "--output", str(report), *CPU]
  assert evaluate_cube_tray.main(cli_args.parse(evaluate_cube_tray.Args, argv)) == 0
  summary = json.loads((report / "report.json").read_text())["summary"]
  assert summary["episodes"] == 1

  # A checkpoint whose camera terms differ from what the cameras give: one line.
  bad = dict(ckpt, image_shapes={**ckpt["image_shapes"], "wrist_rgb": [90, 160, 3]})
  torch.save(bad, tmp_path / "bad.pt")
  argv = ["--policy", str(tmp_path / "bad.pt"), "--num-envs", "1", "--max-steps", "2"]
  capsys.readouterr()
  with pytest.raises(SystemExit):
    evaluate_cube_tray.main(cli_args.parse(evaluate_cube_tray.Args, [*argv, *CPU]))
  assert "trained on camera image wrist_rgb (90x160x3)" in one_line_error(capsys)


def test_perceiving_policy_is_scored(files, tmp_path, capsys):
  """--perceive: the checkpoint reads the given terms only, crops the
  picture, and the evaluation tool scores it with the camera."""
  run = tmp_path / "run"
  argv = [str(files["camera"]), "--output", str(run), "--epochs", "2"]
  argv += ["--obs-keys", "wrist_rgb", "joint_pos", "tcp_pose", "gripper_opening"]
  argv += ["--perceive", "tcp_to_cube", "cube_yaw_to_tool", "--hidden", "32"]
  argv += ["--image-crop", "40", "80", "64", "96"]  # full resolution, no shift
  argv += ["--perception-epochs", "2", "--perception-batch-size", "4"]
  assert train_bc.main(cli_args.parse(train_bc.Args, argv)) == 0
  assert "perception, validation errors: tcp_to_cube" in capsys.readouterr().out
  ckpt = bc_checkpoint(run / "policy.pt")
  assert ckpt["obs_keys"] == ["joint_pos", "tcp_pose", "gripper_opening"]
  assert ckpt["perceive"] == ["tcp_to_cube", "cube_yaw_to_tool"]
  assert ckpt["actor_keys"] == [
    "joint_pos", "tcp_pose", "gripper_opening", "tcp_to_cube", "cube_yaw_to_tool"
  ]  # fmt: skip
  assert ckpt["image_crop"] == [40, 80, 64, 96] and bc_cameras(run / "policy.pt")
  assert ckpt["image_size"] == [64, 96]  # the crop's, by default
  summary = json.loads((run / "summary.json").read_text())
  assert summary["args"]["image_shift"] == "0"  # none with --perceive, by default
  assert len(summary["perception"]["history"]["train"]) == 2

  report = tmp_path / "report"
  argv = ["--policy", str(run / "policy.pt"), "--num-envs", "1", "--episodes", "1"]
  argv += ["--max-steps", "3", "--output", str(report), *CPU]
  assert evaluate_cube_tray.main(cli_args.parse(evaluate_cube_tray.Args, argv)) == 0
  assert json.loads((report / "report.json").read_text())["summary"]["episodes"] == 1

  # Refused in one line: no image to perceive from; a term both given and
  # estimated; --perceive without --obs-keys.
  base = [str(files["camera"]), "--output", str(tmp_path / "x"), "--epochs", "1"]
  for extra, message in (
    (["--obs-keys", "joint_pos", "--perceive", "tcp_to_cube"], "needs a camera"),
    (["--obs-keys", "wrist_rgb", "tcp_to_cube", "--perceive", "tcp_to_cube"],
     "(both name tcp_to_cube)"),
    (["--perceive", "tcp_to_cube"], "--obs-keys must be given"),
    (["--obs-keys", "wrist_rgb", "--perceive", "cube_speed"], "--perceive cube_speed"),
    (["--obs-keys", "wrist_rgb", "--perceive", "tcp_to_cube", "--image-crop", "100",
      "0", "96", "160"], "not inside wrist_rgb's 180 x 320 pixels"),
  ):  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit):
      train_bc.main(cli_args.parse(train_bc.Args, [*base, *extra]))
    assert message in one_line_error(capsys)
  assert not (tmp_path / "x").exists()


def test_refusals(files, tmp_path, capsys):
  assert cli_args.CAMERA_NAMES == CAMERA_NAMES
  for cameras in ("wrist,top", ","):
    capsys.readouterr()
    with pytest.raises(SystemExit):
      collect(tmp_path / "x.hdf5", "--cameras", cameras)
    assert "--cameras takes camera names (wrist, scene)" in one_line_error(capsys)
  # Image terms a file lacks.
  argv = [str(files["states"]), "--output", str(tmp_path / "run"), "--obs-keys"]
  capsys.readouterr()
  with pytest.raises(SystemExit):
    train_bc.main(cli_args.parse(train_bc.Args, [*argv, "wrist_rgb", "joint_pos"]))
  assert "--obs-keys wrist_rgb: not an actor observation term" in one_line_error(capsys)
  capsys.readouterr()
  with pytest.raises(SystemExit):
    render(files["states"], tmp_path / "r.hdf5", "wrist,top")
  assert "--render-cameras" in one_line_error(capsys)
  # The wrist camera from a file collected without its D415: other states.
  capsys.readouterr()
  with pytest.raises(SystemExit):
    render(files["states"], tmp_path / "wrist.hdf5", "wrist")
  assert "the wrist camera needs the D415 on the hand" in one_line_error(capsys)
  assert not list(tmp_path.glob("*wrist.hdf5*"))  # nothing half-written
