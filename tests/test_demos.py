"""Demonstration files: collection, layout, merging, exact replay, refusals.

CubeTray-UR5-RG2 on the C engine, 2 environments. The tools run in-process
(one import of mjlab for the module): two shards of a 4-episode collection
are collected, checked with h5py against the robomimic layout, merged and
replayed (every episode bitwise, every verdict reproduced, also from a file
whose episode seeds were changed: the replay starts from the recorded
state, not from the seed). ``--only-success`` is checked against the full
collection of the same seeds; corrupted files, an existing output and a run
that crashes while writing are refused or leave nothing behind.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from script_runner import ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # The tools and their helpers.

import cli_args  # noqa: E402
import collect_demos  # noqa: E402
import merge_demos  # noqa: E402
import replay_demos  # noqa: E402

from mjlab_tasks.demos import format as demo_format  # noqa: E402
from mjlab_tasks.demos.collect import NOISE_SALT  # noqa: E402

TASK = ["--task", "CubeTray-UR5-RG2", "--engine", "mujoco", "--device", "cpu"]
EPISODES = ["--num-envs", "2", "--episodes", "4"]
OBS_KEYS = {  # The task's actor observation terms.
  "joint_pos",
  "joint_vel",
  "tcp_pose",
  "gripper_opening",
  "actions",
  "tcp_to_cube",
  "cube_to_goal",
  "cube_quat",
  "cube_yaw_to_tool",
  "grasped",
  "target_lead",
}


def collect(*argv: str) -> int:
  return collect_demos.main(cli_args.parse(collect_demos.Args, list(argv)))


def replay(path: Path, *argv: str) -> tuple[int, dict]:
  report = path.with_suffix(".replay.json")
  rc = replay_demos.main(
    cli_args.parse(replay_demos.Args, [str(path), "--json", str(report), *argv])
  )
  return rc, json.loads(report.read_text())


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[Path, Path]:
  """Shards 0/2 and 1/2 of a 4-episode collection (seeds 0-1 and 2-3)."""
  folder = tmp_path_factory.mktemp("demos")
  paths = folder / "shard_0.hdf5", folder / "shard_1.hdf5"
  for k, path in enumerate(paths):
    assert collect(*TASK, *EPISODES, "--shard", f"{k}/2", "--output", str(path)) == 0
  return paths


def test_layout(shards):
  """Every required group, dataset and attribute, with dtypes and ranges."""
  with h5py.File(shards[0], "r") as f:
    data = f["data"]
    assert list(data) == ["demo_0", "demo_1"]
    args = json.loads(data.attrs["env_args"])
    assert args["env_name"] == "CubeTray-UR5-RG2" and args["engine"] == "mujoco"
    assert args["env_kwargs"]["arm_action"] == "cartesian"
    assert args["env_kwargs"]["num_envs"] == 2
    assert args["seed_ranges"] == [[0, 2]] and args["shard"] == "0/2"
    for package in ("mjlab", "mujoco", "mujoco-warp", "manipulation-suite"):
      assert args["versions"][package]
    assert len(args["git"]["commit"]) == 40
    total = 0
    for name in data:
      demo = data[name]
      n = int(demo.attrs["num_samples"])
      total += n
      assert set(demo["obs"]) == OBS_KEYS == set(args["obs_keys"])
      for key, dataset in demo["obs"].items():
        assert dataset.dtype == np.float32 and dataset.shape[0] == n, key
        # next_obs: the observation after each action (robomimic's layout).
        after = demo["next_obs"][key]
        assert after.dtype == np.float32 and after.shape == dataset.shape, key
        assert np.array_equal(after[:-1], dataset[1:]), key
      assert demo["actions"].dtype == np.float32
      assert demo["actions"].shape == (n, 7)
      actions = demo["actions"][()]
      assert np.isfinite(actions).all() and np.abs(actions).max() <= 1.0
      assert demo["rewards"].shape == (n,) and demo["dones"].shape == (n,)
      dones = demo["dones"][()]
      assert dones[-1] == 1 and not dones[:-1].any()
      assert demo["states"].dtype == np.float64
      assert demo["states"].shape == (n, args["state"]["size"])
      # The state vector's time (its first entry) advances 50 ms per step.
      assert np.allclose(np.diff(demo["states"][:, 0]), 0.05)
      # Observations follow the state: the recorded last action is the
      # previous step's action, zero at the start.
      assert np.array_equal(demo["obs/actions"][1:], actions[:-1])
      assert not demo["obs/actions"][0].any()
      assert demo.attrs["seed"] in (0, 1) and demo.attrs["env"] in (0, 1)
      assert demo.attrs["outcome"] in ("success", "failure", "indeterminate")
      assert bool(demo.attrs["success"]) == (demo.attrs["outcome"] == "success")
      assert (demo.attrs["reason"] == "") == bool(demo.attrs["success"])
    assert data.attrs["total"] == total
    train, valid = (set(f[f"mask/{k}"][()].tolist()) for k in ("train", "valid"))
    assert train | valid == {b"demo_0", b"demo_1"} and not train & valid
    assert len(valid) == 1
    success = [n for n in data if data[n].attrs["success"]]
    assert f["mask/success"][()].tolist() == [n.encode() for n in success]
    assert sorted(int(data[n].attrs["seed"]) for n in data) == [0, 1]


def test_merge_and_exact_replay(shards, tmp_path):
  merged = tmp_path / "all.hdf5"
  argv = [*map(str, shards), "--output", str(merged)]
  assert merge_demos.main(cli_args.parse(merge_demos.Args, argv)) == 0
  with h5py.File(merged, "r") as f, h5py.File(shards[1], "r") as second:
    data = f["data"]
    assert list(data) == [f"demo_{i}" for i in range(4)]
    assert sorted(int(data[n].attrs["seed"]) for n in data) == [0, 1, 2, 3]
    args = json.loads(data.attrs["env_args"])
    assert args["seed_ranges"] == [[0, 2], [2, 4]]
    assert data.attrs["total"] == sum(data[n].attrs["num_samples"] for n in data)
    masks = {k: set(f[f"mask/{k}"][()].tolist()) for k in ("train", "valid")}
    assert masks["train"] | masks["valid"] == {n.encode() for n in data}
    assert f["mask/success"][()].tolist() == [
      n.encode() for n in data if data[n].attrs["success"]
    ]
    # The second shard's demos follow the first's, renumbered and unchanged.
    for i, name in enumerate(second["data"]):
      copied = data[f"demo_{2 + i}"]
      assert np.array_equal(copied["states"][()], second["data"][name]["states"][()])
  # Overlapping seeds are refused.
  again = tmp_path / "again.hdf5"
  with pytest.raises(SystemExit):
    merge_demos.main(
      cli_args.parse(
        merge_demos.Args, [str(merged), str(shards[0]), "--output", str(again)]
      )
    )
  assert not again.exists()

  # The replay restores each episode's recorded initial state: with every
  # seed changed in a copy (the resets place cube and tray elsewhere first)
  # it is still exact.
  moved = tmp_path / "other_seeds.hdf5"
  shutil.copy(merged, moved)
  with h5py.File(moved, "r+") as f:
    for demo in f["data"].values():
      demo.attrs["seed"] = 1000 + int(demo.attrs["seed"])
  rc, report = replay(moved)
  assert rc == 0 and report["exact_required"]
  episodes = report["episodes"]
  assert len(episodes) == 4
  for episode in episodes:
    assert episode["exact"] and episode["verdict_reproduced"], episode
    assert episode["max_state_divergence"] == 0.0
    assert episode["recorded"] == episode["replayed"]


def truncate(path: Path, steps: int) -> None:
  """Keep the first ``steps`` samples of every demo (a valid, shorter file)."""
  with h5py.File(path, "r+") as f:
    data = f["data"]
    for demo in data.values():
      keys = ["actions", "rewards", "dones", "states"]
      keys += [f"{g}/{k}" for g in ("obs", "next_obs") for k in demo[g]]
      for key in keys:
        values = demo[key][:steps]
        del demo[key]
        demo.create_dataset(key, data=values)
      demo.attrs["num_samples"] = steps
    data.attrs["total"] = steps * len(data)


def test_replay_detects_a_changed_action(shards, tmp_path, capsys):
  """A valid but different action (still in [-1, 1]) makes the C-engine
  replay diverge: the tool says so and exits 1. (Both demos cut to 20 steps
  to keep it quick: the unchanged one then replays bitwise but its verdict,
  recorded at the episode's real end, differs.)"""
  changed = tmp_path / "changed.hdf5"
  shutil.copy(shards[1], changed)
  truncate(changed, 20)
  with h5py.File(changed, "r+") as f:
    actions = f["data/demo_0/actions"]
    actions[5, 0] = -actions[5, 0] if actions[5, 0] else 0.5
  rc, report = replay(changed)
  assert rc == 1
  first, second = report["episodes"]
  assert first["max_state_divergence"] > 0 and not first["exact"]
  assert second["max_state_divergence"] == 0.0 and second["max_obs_divergence"] == 0.0
  assert second["replayed_steps"] == 20 and not second["exact"]
  assert "did not reproduce exactly" in capsys.readouterr().err


def test_replay_is_not_exact_when_one_recorded_value_differs(shards, tmp_path, capsys):
  """Verdicts and lengths reproduce, but one recorded number differs (1e-6,
  one step): a state in the first demo, an observation in the second, a
  reward in the third. Those episodes are not exact and the tool exits 1;
  the untouched fourth is exact."""
  changed = tmp_path / "one_value.hdf5"
  argv = [*map(str, shards), "--output", str(changed)]
  assert merge_demos.main(cli_args.parse(merge_demos.Args, argv)) == 0
  with h5py.File(changed, "r+") as f:
    data = f["data"]
    for name, key, column in (
      ("demo_0", "states", 3),
      ("demo_1", "obs/tcp_pose", 0),
      ("demo_2", "rewards", None),
    ):
      values = data[name][key]
      step = values.shape[0] // 2
      index = step if column is None else (step, column)
      values[index] = values[index] + 1e-6
  rc, report = replay(changed)
  assert rc == 1
  episodes = report["episodes"]
  for episode in episodes:
    assert episode["verdict_reproduced"] and episode["dones_match"], episode
    assert episode["replayed_steps"] == episode["steps"]
  state, obs, reward, untouched = episodes
  assert not state["exact"] and state["max_state_divergence"] > 0
  assert not obs["exact"] and obs["max_obs_divergence"] > 0
  assert obs["max_state_divergence"] == 0.0
  assert not reward["exact"] and reward["max_reward_divergence"] > 0
  assert reward["max_state_divergence"] == 0.0
  assert untouched["exact"]
  assert "3 episode(s) did not reproduce exactly" in capsys.readouterr().err


def test_only_success_keeps_only_successes(shards, tmp_path):
  """The shard-0 seeds again, with an episode limit between their two
  episode lengths: the shorter succeeds, the longer times out, and only the
  success is written, equal to its demo in the full collection."""
  with h5py.File(shards[0], "r") as f:
    demos = {int(d.attrs["seed"]): d for d in f["data"].values()}
    lengths = {seed: int(d.attrs["num_samples"]) for seed, d in demos.items()}
    assert all(d.attrs["success"] for d in demos.values()), "the expert failed"
    assert len(set(lengths.values())) == 2, lengths
    short = min(lengths, key=lengths.get)
    limit = (min(lengths.values()) + max(lengths.values())) // 2
    expected = demos[short]["actions"][()], demos[short]["states"][()]
  out = tmp_path / "successes.hdf5"
  argv = [*TASK, *EPISODES, "--shard", "0/2", "--only-success", "--output", str(out)]
  assert collect(*argv, "--max-steps", str(limit)) == 0
  with h5py.File(out, "r") as f:
    assert list(f["data"]) == ["demo_0"]
    demo = f["data/demo_0"]
    assert demo.attrs["success"] and demo.attrs["seed"] == short
    assert np.array_equal(demo["actions"][()], expected[0])
    assert np.array_equal(demo["states"][()], expected[1])
    assert f["mask/success"][()].tolist() == [b"demo_0"]
    assert json.loads(f["data"].attrs["env_args"])["only_success"]


def corrupt(source: Path, target: Path, how: str) -> None:
  shutil.copy(source, target)
  with h5py.File(target, "r+") as f:
    demo = f["data/demo_1"]
    if how == "nan":
      demo["actions"][3, 2] = np.nan
    elif how == "range":
      demo["actions"][7, 6] = 1.5
    elif how == "missing":
      del demo["states"]
    elif how == "gap":
      f.move("data/demo_1", "data/demo_7")


@pytest.mark.parametrize(
  ("how", "message"),
  [
    ("nan", "data/demo_1/actions: non-finite value at step 3"),
    ("range", "data/demo_1/actions: value outside [-1, 1] at step 7"),
    ("missing", "data/demo_1 has no 'states' dataset"),
    ("gap", "demo names are not contiguous"),
  ],
)
def test_corrupted_file_is_refused(shards, tmp_path, capsys, how, message):
  bad = tmp_path / f"{how}.hdf5"
  corrupt(shards[0], bad, how)
  merged = tmp_path / "m.hdf5"
  refusals = (
    lambda: replay_demos.check_args(cli_args.parse(replay_demos.Args, [str(bad)])),
    lambda: merge_demos.check_inputs((shards[1], bad)),
  )
  for refuse in refusals:
    with pytest.raises(SystemExit) as exit_:
      refuse()
    assert exit_.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert message in lines[0], lines[0]
  assert not merged.exists()


def test_existing_output_is_refused(shards, capsys):
  with pytest.raises(SystemExit):
    collect_demos.check_args(
      cli_args.parse(collect_demos.Args, [*TASK, "--output", str(shards[0])])
    )
  assert "already exists" in capsys.readouterr().err


def test_crash_leaves_no_file(tmp_path, monkeypatch):
  """An exception after the first episode was written: nothing appears under
  the requested name, and the temporary file is removed."""
  written = []
  original = demo_format.write_episode

  def write_then_fail(group, name, episode):
    if written:
      raise RuntimeError("simulated crash")
    written.append(name)
    original(group, name, episode)

  monkeypatch.setattr(demo_format, "write_episode", write_then_fail)
  out = tmp_path / "crash.hdf5"
  argv = [*TASK, "--num-envs", "2", "--episodes", "2", "--max-steps", "5"]
  with pytest.raises(RuntimeError, match="simulated crash"):
    collect(*argv, "--output", str(out))
  assert written == ["demo_0"]
  assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_bin_pick_collection_replays_exactly(tmp_path):
  """BinPick: one wave of 2 environments (one build, the pour seeded by the
  first episode seed) on the shallow 140 x 60 mm bin, 200 steps; each demo
  records its pour seed, and the C-engine replay rebuilds the pour and
  reproduces every episode bitwise."""
  out = tmp_path / "bin_pick.hdf5"
  argv = ["--task", "BinPick-UR5-RG2", "--engine", "mujoco", "--device", "cpu"]
  argv += ["--num-envs", "2", "--episodes", "2", "--seed", "7", "--objects", "2"]
  argv += ["--bin-width", "0.14", "--bin-height", "0.06", "--max-steps", "200"]
  assert collect(*argv, "--output", str(out)) == 0
  with h5py.File(out, "r") as f:
    demos = list(f["data"].values())
    assert sorted((int(d.attrs["seed"]), int(d.attrs["env"])) for d in demos) == [
      (7, 0),
      (8, 1),
    ]
    assert all(int(d.attrs["pour_seed"]) == 7 for d in demos)
    for demo in demos:
      assert demo.attrs["outcome"] in ("bin_cleared", "finished", "timeout")
      assert np.abs(demo["actions"][()]).max() <= 1.0
  rc, report = replay(out)
  assert rc == 0
  assert all(e["exact"] for e in report["episodes"])


def test_action_noise_is_executed_and_the_expert_recorded(tmp_path):
  """--action-noise: the executed arm actions are the expert's plus the
  episode's seeded Gaussian noise (regenerated here), clipped; the gripper's
  are the expert's; the replay of the executed actions is exact."""
  path = tmp_path / "noisy.hdf5"
  argv = [*TASK, "--num-envs", "2", "--episodes", "2", "--max-steps", "20"]
  assert collect(*argv, "--action-noise", "0.4", "--output", str(path)) == 0
  with h5py.File(path, "r") as f:
    args = json.loads(f["data"].attrs["env_args"])
    assert args["action_noise"]["std"] == 0.4
    for demo in f["data"].values():
      executed, expert = demo["actions"][()], demo["expert_actions"][()]
      rng = np.random.default_rng([int(demo.attrs["seed"]), NOISE_SALT])
      noise = rng.normal(0.0, 0.4, (len(expert), 6))
      np.testing.assert_allclose(
        executed[:, :6], np.clip(expert[:, :6] + noise, -1, 1), atol=1e-6
      )
      assert np.array_equal(executed[:, 6], expert[:, 6])
      assert np.abs(executed - expert).max() > 0.1
  rc, report = replay(path)
  assert rc == 0
  assert all(e["exact"] for e in report["episodes"]), report["episodes"]
