"""mjlab_tasks.demos.Recorder: any policy's rollouts recorded into a demo file.

CubeTray-UR5-RG2 on the C engine, 2 environments built with ``make_env``
(mjlab's own resets, no seeded events), 12-step episodes: a seeded random
policy runs 30 steps through the recorder (episodes end and restart in the
middle, the last ones are cut at ``close``); the file validates with the
format's validator, has the layout collect_demos.py writes, and replays
bitwise on the C engine, with the library and with scripts/replay_demos.py
as a user runs it. An object policy (``act``/``reset``) through ``record``,
the refusals, and that importing the library stays light.
"""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from script_runner import ROOT, run_script

from mjlab_tasks.demos import ActionError, Recorder, replay_file, validate_file
from mjlab_tasks.registry import cube_tray_demo_task

NUM_ENVS, MAX_STEPS, STEPS = 2, 12, 30


@pytest.fixture(scope="module")
def task():
  return cube_tray_demo_task(max_steps=MAX_STEPS)


@pytest.fixture(scope="module")
def env(task):
  from mjlab_tasks.engine import make_env

  env = make_env(
    task.make_cfg(task.env_kwargs, NUM_ENVS), device="cpu", engine="mujoco"
  )
  yield env
  env.close()


def random_actions(generator: torch.Generator) -> torch.Tensor:
  return torch.rand(NUM_ENVS, 7, generator=generator) * 2 - 1


@pytest.fixture(scope="module")
def recorded(env, task, tmp_path_factory):
  """30 random steps recorded: the file, and the actions and returns seen."""
  path = tmp_path_factory.mktemp("recorder") / "random.hdf5"
  generator = torch.Generator().manual_seed(0)
  seen = {"actions": [], "rewards": [], "ended": []}
  with Recorder(env, path, task, policy="uniform random") as rec:
    obs, _ = rec.reset(seed=100)
    assert set(obs) >= {"actor"} and not path.exists()
    for _ in range(STEPS):
      actions = random_actions(generator)
      obs, rewards, terminated, truncated, _ = rec.step(actions)
      seen["actions"].append(actions.numpy())
      seen["rewards"].append(rewards.numpy().copy())
      seen["ended"].append((terminated | truncated).numpy())
  assert env.cfg.auto_reset  # Restored.
  return path, {k: np.stack(v) for k, v in seen.items()}


def test_the_file_validates_and_has_the_layout(recorded):
  path, seen = recorded
  args = validate_file(path)
  assert args["env_name"] == "CubeTray-UR5-RG2" and args["engine"] == "mujoco"
  assert args["env_kwargs"]["num_envs"] == NUM_ENVS
  assert args["env_kwargs"]["max_steps"] == MAX_STEPS
  assert args["policy"] == "uniform random" and args["state"]["exact"]
  # Episodes of 12 steps: two full ones per environment, then 6 steps cut.
  assert seen["ended"].sum(axis=0).tolist() == [2, 2]
  assert args["seed_ranges"] == [[100, 106]]
  with h5py.File(path, "r") as f:
    data = f["data"]
    assert list(data) == [f"demo_{i}" for i in range(6)]
    per_env = {0: [], 1: []}
    for name in data:
      demo = data[name]
      per_env[int(demo.attrs["env"])].append(demo)
      n = int(demo.attrs["num_samples"])
      assert set(demo["obs"]) == set(args["obs_keys"])
      dones = demo["dones"][()]
      assert dones[-1] == 1 and not dones[:-1].any()
      for key in demo["obs"]:
        assert np.array_equal(demo["next_obs"][key][:-1], demo["obs"][key][1:])
      assert demo["states"].shape == (n, args["state"]["size"])
      assert not demo["obs/actions"][0].any()  # Each starts at a reset.
    assert data.attrs["total"] == NUM_ENVS * STEPS
    for i, demos in per_env.items():
      assert [int(d.attrs["num_samples"]) for d in demos] == [12, 12, 6]
      # The environment's actions and rewards, step for step, in order.
      actions = np.concatenate([d["actions"][()] for d in demos])
      rewards = np.concatenate([d["rewards"][()] for d in demos])
      assert np.array_equal(actions, seen["actions"][:, i])
      assert np.array_equal(rewards, seen["rewards"][:, i])
    assert sorted(int(d.attrs["seed"]) for d in data.values()) == list(range(100, 106))


def test_the_library_replays_it_exactly(recorded):
  path, _ = recorded
  results = replay_file(path)
  assert len(results) == 6
  for result in results:
    assert result.exact and result.verdict_reproduced, result
    assert result.max_state_divergence == 0.0 and result.max_obs_divergence == 0.0


def test_replay_demos_replays_it_exactly(recorded, tmp_path):
  """scripts/replay_demos.py FILE, as a user runs it (exit 1 unless exact)."""
  path, _ = recorded
  report = tmp_path / "replay.json"
  out = run_script("replay_demos.py", str(path), "--json", str(report), timeout=600)
  assert out.returncode == 0, out.stderr
  assert "6/6 verdicts reproduced, 6/6 episodes bitwise exact" in out.stdout
  assert json.loads(report.read_text())["exact_required"]


class ZeroPolicy:
  """The experts' interface: ``act()`` reads nothing, ``reset(env_ids)``."""

  def __init__(self):
    self.resets: list[list[int]] = []

  def act(self) -> torch.Tensor:
    return torch.zeros(NUM_ENVS, 7)

  def reset(self, env_ids: torch.Tensor) -> None:
    self.resets.append(env_ids.tolist())


def test_record_runs_a_policy_object(env, task, tmp_path):
  """``record(policy, episodes=...)``: the policy acts until that many
  episodes ended, and is reset with the environments."""
  policy, path = ZeroPolicy(), tmp_path / "zero.hdf5"
  with Recorder(env, path, task, policy="zero", save_unfinished=False) as rec:
    written = rec.record(policy, episodes=2, seed=7)
  assert written == 2 and rec.episodes == 2
  assert policy.resets == [[0, 1], [0, 1]]  # The first reset, then both ended.
  validate_file(path)
  with h5py.File(path, "r") as f:
    demos = list(f["data"].values())
    assert [int(d.attrs["seed"]) for d in demos] == [7, 8]
    assert all(not d["actions"][()].any() for d in demos)
  assert [r.exact for r in replay_file(path)] == [True, True]


def test_refusals_leave_no_file(env, task, tmp_path):
  existing = tmp_path / "existing.hdf5"
  existing.write_bytes(b"")
  with pytest.raises(FileExistsError):
    Recorder(env, existing, task)
  with pytest.raises(ValueError, match="task must be one of"):
    Recorder(env, tmp_path / "x.hdf5", "NoSuchTask")
  path = tmp_path / "bad.hdf5"
  with pytest.raises(ActionError, match="outside"):
    with Recorder(env, path, task, policy="too far") as rec:
      rec.reset(seed=0)
      rec.step(torch.full((NUM_ENVS, 7), 1.5))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.hdf5"]
  assert env.cfg.auto_reset


def test_importing_the_library_is_light():
  """The tools check their flags before anything heavy is imported."""
  code = (
    "import sys\n"
    "import mjlab_tasks.demos as d\n"
    "from mjlab_tasks.demos import Recorder, validate_file, export_lerobot\n"
    "heavy = [m for m in ('torch', 'mjlab', 'h5py', 'mujoco') if m in sys.modules]\n"
    "assert not heavy, heavy\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT
  )
  assert out.returncode == 0, out.stderr
