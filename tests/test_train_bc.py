"""Behaviour cloning: train_bc.py on demonstration files, BcPolicy scored.

CubeTray-UR5-RG2 on the C engine, in-process (one import of mjlab): two
short expert episodes are collected with collect_demos.py, a policy is
trained on them for a few epochs and scored by evaluate_cube_tray.py
--policy. A file whose actions are a fixed function of the observations is
fitted and the loaded policy, fed the environment's concatenated actor
observation, must give back those actions: an independent check of the term
order, the stored normalization and the chunk execution. Refusals (no
actions, other observation terms, terms in another order at evaluation, an
existing output) are one line.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import torch
from script_runner import ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # The tools and their helpers.

import cli_args  # noqa: E402
import collect_demos  # noqa: E402
import evaluate_cube_tray  # noqa: E402
import train_bc  # noqa: E402

from mjlab_tasks.demos import DemoWriter, Episode  # noqa: E402
from mjlab_tasks.policies import (  # noqa: E402
  BcMlp,
  BcPolicy,
  bc_checkpoint,
  quarter_yaw,
  random_shift,
)
from mjlab_tasks.policies.bc_training import actor_terms  # noqa: E402

TASK_ORDER = [  # The task's actor terms, in the environment's order.
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
]
TRAINED = [t for t in TASK_ORDER if t != "actions"]  # train_bc's default terms
CPU = ["--engine", "mujoco", "--device", "cpu"]


def train(demos: Path, output: Path, *argv: str) -> int:
  args = cli_args.parse(train_bc.Args, [str(demos), "--output", str(output), *argv])
  return train_bc.main(args)


def one_line_error(capsys) -> str:
  lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
  lines = [line for line in lines if "%|" not in line]  # progress bars
  assert len(lines) == 1, lines
  assert lines[0].startswith("error: ")
  return lines[0]


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
  """Two 8-step expert episodes of the cube-in-tray task."""
  path = tmp_path_factory.mktemp("bc") / "demos.hdf5"
  argv = ["--task", "CubeTray-UR5-RG2", "--num-envs", "2", "--episodes", "2"]
  argv += ["--max-steps", "8", "--output", str(path), *CPU]
  assert collect_demos.main(cli_args.parse(collect_demos.Args, argv)) == 0
  return path


def test_actor_terms_are_the_environments_order(demos):
  with h5py.File(demos) as f:
    args = json.loads(f["data"].attrs["env_args"])
  assert actor_terms(args) == TASK_ORDER


def test_trained_policy_is_scored(demos, tmp_path, capsys):
  run = tmp_path / "run"
  assert train(demos, run, "--epochs", "3", "--chunk", "3", "--hidden", "32", "32") == 0
  assert sorted(p.name for p in run.iterdir()) == [
    "loss.png",
    "policy.pt",
    "summary.json",
  ]
  summary = json.loads((run / "summary.json").read_text())
  assert summary["train_demos"] + summary["valid_demos"] == 2
  assert summary["obs_terms"] == TRAINED
  assert len(summary["history"]["train"]) == 3
  ckpt = bc_checkpoint(run / "policy.pt")
  assert ckpt["chunk"] == 3 and ckpt["obs_keys"] == TRAINED

  report_dir = tmp_path / "report"
  argv = ["--policy", str(run / "policy.pt"), "--num-envs", "2", "--episodes", "2"]
  argv += ["--max-steps", "4", "--output", str(report_dir), *CPU]
  assert evaluate_cube_tray.main(cli_args.parse(evaluate_cube_tray.Args, argv)) == 0
  report = json.loads((report_dir / "report.json").read_text())
  assert report["controller"] == f"behaviour-cloning policy {run / 'policy.pt'}"
  assert report["summary"]["episodes"] == 2

  # The same checkpoint on a term the environment lacks, or of another
  # size: refused, one line.
  renamed = dict(ckpt, obs_keys=[*TRAINED[:-1], "holding"])
  resized = dict(ckpt, obs_sizes=[*ckpt["obs_sizes"][:-1], 2])
  for name, bad, message in (
    ("renamed", renamed, "(no holding)"),
    ("resized", resized, "target_lead of size 2; the environment's has 3"),
  ):
    torch.save(bad, tmp_path / f"{name}.pt")
    argv = ["--policy", str(tmp_path / f"{name}.pt"), "--num-envs", "1", *CPU]
    capsys.readouterr()
    with pytest.raises(SystemExit):
      evaluate_cube_tray.main(cli_args.parse(evaluate_cube_tray.Args, argv))
    assert message in one_line_error(capsys), name


def test_unset_recipe_flags_take_the_tasks_preset(demos, tmp_path):
  """The plain command trains the task's best measured recipe (its preset,
  recorded in the checkpoint); a flag given, or ``none``, overrides it."""
  from mjlab_tasks.policies.bc_training import PRESETS

  preset = PRESETS["CubeTray-UR5-RG2"]
  assert train(demos, tmp_path / "plain", "--epochs", "1") == 0
  ckpt = bc_checkpoint(tmp_path / "plain" / "policy.pt")
  assert ckpt["chunk"] == preset["chunk"]
  assert tuple(ckpt["hidden"]) == preset["hidden"]
  assert ckpt["quarter_yaw_at"] is not None and ckpt["yaw_reference_at"] is not None
  fields = ["batch_size", "hidden", "chunk", "quarter_yaw", "yaw_reference"]
  assert ckpt["preset"] == {"task": "CubeTray-UR5-RG2", "fields": fields}
  flags = ["--epochs", "1", "--chunk", "2", "--hidden", "16", "--quarter-yaw", "none"]
  assert train(demos, tmp_path / "mine", *flags) == 0
  ckpt = bc_checkpoint(tmp_path / "mine" / "policy.pt")
  assert ckpt["chunk"] == 2 and ckpt["hidden"] == [16]
  assert ckpt["quarter_yaw_at"] is None and ckpt["yaw_reference_at"] is None
  assert ckpt["preset"] == {"task": "CubeTray-UR5-RG2", "fields": ["batch_size"]}
  summary = json.loads((tmp_path / "mine" / "summary.json").read_text())
  assert summary["preset"] == ckpt["preset"]


def test_refusals(demos, tmp_path, capsys):
  no_actions = tmp_path / "no_actions.hdf5"
  shutil.copy(demos, no_actions)
  with h5py.File(no_actions, "a") as f:
    del f["data/demo_0/actions"]
  other_terms = tmp_path / "other_terms.hdf5"
  shutil.copy(demos, other_terms)
  with h5py.File(other_terms, "a") as f:
    for name in f["data"]:
      for group in ("obs", "next_obs"):  # next_obs: recorded since 51c6fe7
        if group in f[f"data/{name}"]:
          f.move(f"data/{name}/{group}/grasped", f"data/{name}/{group}/holding")
  cases = [
    (no_actions, "has no 'actions' dataset"),
    (other_terms, "are not CubeTray-UR5-RG2's actor observation terms"),
  ]
  for path, message in cases:
    with pytest.raises(SystemExit):
      train(path, tmp_path / "run", "--epochs", "1")
    assert message in one_line_error(capsys), path
    assert not (tmp_path / "run").exists()
  for flags, message in (
    (["--quarter-yaw", "joint_pos"], "--quarter-yaw joint_pos: not a 4-value term"),
    (
      ["--quarter-yaw", "none", "--yaw-reference", "tcp_pose"],
      "--yaw-reference needs --quarter-yaw",
    ),
    (
      ["--quarter-yaw", "cube_quat", "--yaw-reference", "joint_pos"],
      "--yaw-reference joint_pos: not a 4 or 7-value term",
    ),
    (["--obs-keys", "grasped", "wrist"], "--obs-keys wrist: not an actor"),
    (["--obs-keys", "grasped", "grasped"], "--obs-keys names a term twice"),
  ):
    with pytest.raises(SystemExit):
      train(demos, tmp_path / "run", "--epochs", "1", *flags)
    assert message in one_line_error(capsys), flags
  (tmp_path / "taken").mkdir()
  with pytest.raises(SystemExit):
    train(demos, tmp_path / "taken", "--epochs", "1")
  assert "already exists" in one_line_error(capsys)


def learnable_file(demos: Path, path: Path, rng: np.random.Generator) -> dict:
  """Demos with random observations (the real terms and sizes, each at its
  own scale) and expert actions a smooth function of two of the terms (the
  executed actions: noise)."""
  with h5py.File(demos) as f:
    env_args = json.loads(f["data"].attrs["env_args"])
    sizes = {k: v.shape[1:] for k, v in f["data/demo_0/obs"].items()}
  weights = rng.normal(size=(6, 7))
  scales = {k: 10.0 ** rng.uniform(-2, 1) for k in sizes}
  with DemoWriter(path, env_args) as writer:
    for i in range(5):
      steps = 40
      obs = {
        k: (scales[k] * rng.normal(size=(steps, *s))).astype(np.float32)
        for k, s in sizes.items()
      }
      x = np.concatenate(
        [obs[k] / scales[k] for k in ("tcp_to_cube", "cube_to_goal")], axis=1
      )
      writer.add(
        Episode(
          seed=i,
          env=0,
          obs=obs,
          # Executed with noise; the expert's own actions are what to learn.
          actions=rng.uniform(-1, 1, (steps, 7)).astype(np.float32),
          expert_actions=(0.8 * np.tanh(x @ weights / 3)).astype(np.float32),
          rewards=np.zeros(steps),
          dones=np.eye(steps)[-1],
          states=np.zeros((steps, 2)),
          success=True,
          outcome="success",
          reason="",
        )
      )
    writer.finish()
  return sizes


def fake_env(sizes: dict, obs: np.ndarray) -> SimpleNamespace:
  """What BcPolicy reads of an environment: the actor terms, their sizes,
  the concatenated actor observation (in the task's order), the actions."""
  return SimpleNamespace(
    observation_manager=SimpleNamespace(
      active_terms={"actor": TASK_ORDER},
      group_obs_term_dim={"actor": [sizes[k] for k in TASK_ORDER]},
    ),
    obs_buf={"actor": torch.from_numpy(obs)},
    action_manager=SimpleNamespace(total_action_dim=7),
    num_envs=len(obs),
  )


def test_policy_gives_back_the_training_actions(demos, tmp_path, rng):
  path = tmp_path / "learnable.hdf5"
  sizes = learnable_file(demos, path, rng)
  run = tmp_path / "run"
  flags = ["--epochs", "200", "--chunk", "2", "--batch-size", "32", "--hidden", "64"]
  assert train(path, run, *flags, "64", "--lr", "3e-3") == 0
  with h5py.File(path) as f:
    demo = f[f"data/{f['mask/train'][0].decode()}"]
    obs = np.concatenate(
      [demo["obs"][k][()].reshape(len(demo["actions"]), -1) for k in TASK_ORDER], 1
    )
    actions = demo["expert_actions"][()]
  assert json.loads((run / "summary.json").read_text())["labels"] == "expert_actions"
  ckpt = bc_checkpoint(run / "policy.pt")
  env = fake_env(sizes, obs)
  policy = BcPolicy(env, "CubeTray-UR5-RG2", run / "policy.pt", ckpt, "cpu")
  got = policy.act().numpy()  # It skips the previous action's columns.
  # Fitted, not perfect: far closer than the actions' own spread (about 0.4),
  # which a wrong term order or normalization would give.
  error = np.abs(got - actions)
  assert error.mean() < 0.05 and error.max() < 0.25, (error.mean(), error.max())

  # Chunks: the next step's action is the ensemble of the chunk predicted
  # for it one step earlier (the older, weighted 1 as in ACT) and its own
  # (weighted exp(-0.01)); a reset forgets the former.
  model = BcMlp.from_checkpoint(ckpt)
  sizes_flat = [int(np.prod(sizes[k])) for k in TASK_ORDER]
  starts = np.cumsum([0, *sizes_flat])
  trained = np.concatenate(
    [
      obs[:, starts[i] : starts[i + 1]]
      for i, k in enumerate(TASK_ORDER)
      if k in TRAINED
    ],
    axis=1,
  )
  with torch.no_grad():
    chunks = model(torch.from_numpy(trained))
  env.obs_buf["actor"] = torch.from_numpy(obs[::-1].copy())
  second = policy.act()
  w_old, w_new = 1.0, np.exp(-0.01)
  expected = (w_old * chunks[:, 1] + w_new * chunks.flip(0)[:, 0]) / (w_old + w_new)
  torch.testing.assert_close(second, expected.clamp(-1, 1))
  policy.reset(torch.tensor([0]))
  third = policy.act()
  torch.testing.assert_close(third[0], chunks.flip(0)[0, 0].clamp(-1, 1))

  # The task must match too.
  with pytest.raises(ValueError, match="for CubeTray-UR5-RG2, not BinPick"):
    BcPolicy(env, "BinPick-UR5-RG2", run / "policy.pt", ckpt, "cpu")


def test_quarter_yaw_of_a_turn_about_z(rng):
  yaw = torch.linspace(-3.1, 3.1, 25)
  quats = torch.stack(
    [torch.cos(yaw / 2), torch.zeros(25), torch.zeros(25), torch.sin(yaw / 2)], -1
  )
  before = torch.tensor(rng.normal(size=(25, 3)), dtype=torch.float32)
  obs = torch.cat([before, quats], dim=-1)  # the term at offset 3
  expected = torch.stack([torch.sin(4 * yaw), torch.cos(4 * yaw)], -1)
  torch.testing.assert_close(quarter_yaw(obs, 3), expected, atol=1e-5, rtol=0)
  torch.testing.assert_close(quarter_yaw(-obs, 3), expected, atol=1e-5, rtol=0)


def test_quarter_yaw_relative_to_a_tool_pose(rng):
  """The cube's yaw from the heading of a downward tool's closing (x) axis."""
  from scipy.spatial.transform import Rotation

  cube_yaw, tool_yaw = rng.uniform(-np.pi, np.pi, (2, 16))
  cube = Rotation.from_euler("z", cube_yaw[:, None]).as_quat(scalar_first=True)
  tool = Rotation.from_euler("ZX", np.stack([tool_yaw, np.full(16, np.pi)], -1))
  pose = np.concatenate([rng.normal(size=(16, 3)), tool.as_quat(scalar_first=True)], 1)
  obs = torch.tensor(np.concatenate([pose, cube], 1), dtype=torch.float32)
  turn = cube_yaw - tool_yaw
  expected = torch.tensor(np.stack([np.sin(4 * turn), np.cos(4 * turn)], -1))
  got = quarter_yaw(obs, 7, reference_at=3).double()
  torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_the_preset_sizes_epochs_to_its_gradient_steps():
  """Unset --epochs: as many epochs as make the preset's gradient steps over
  the training samples (the measured runs: 100 epochs of 148,887 samples,
  and about 500 of 29,746, both at batch 512)."""
  from mjlab_tasks.policies.bc_training import PRESETS, epochs_for, resolve_recipe

  steps = PRESETS["CubeTray-UR5-RG2"]["gradient_steps"]
  assert epochs_for("CubeTray-UR5-RG2", 148_887, 512) == 100
  assert abs(epochs_for("CubeTray-UR5-RG2", 29_746, 512) - 500) <= 10
  for samples in (1, 511, 512, 513, 100_000):
    epochs = epochs_for("CubeTray-UR5-RG2", samples, 512)
    assert abs(epochs * -(-samples // 512) - steps) <= -(-samples // 512) / 2 + 1
  unset = SimpleNamespace(
    epochs=None, batch_size=None, hidden=None, chunk=None, quarter_yaw=None,
    yaw_reference=None, obs_keys=None,
  )  # fmt: skip
  fields, from_preset = resolve_recipe(unset, "CubeTray-UR5-RG2")
  assert fields["epochs"] is None and "epochs" in from_preset
  fields, from_preset = resolve_recipe(unset, "BinPick-UR5-RG2")  # no preset
  assert fields["epochs"] == 100 and from_preset == []


def test_random_shift_moves_each_image_by_whole_pixels(rng):
  """Against a NumPy reference: each image, padded by repeating its edges,
  cut back at some offset in [0, 2 pad]; which offset is found by matching,
  so the test does not repeat the generator's draws."""
  pad = 3
  images = torch.tensor(rng.uniform(0, 255, (6, 2, 9, 11)), dtype=torch.float32)
  shifted = random_shift(
    images, pad, torch.Generator().manual_seed(int(rng.integers(1e6)))
  )
  assert shifted.shape == images.shape
  offsets = set()
  for image, got in zip(images.numpy(), shifted.numpy(), strict=True):
    padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad)), mode="edge")
    matches = [
      (dy, dx)
      for dy in range(2 * pad + 1)
      for dx in range(2 * pad + 1)
      if np.array_equal(padded[:, dy : dy + 9, dx : dx + 11], got)
    ]
    assert len(matches) == 1  # random uniform pixels: one offset fits
    offsets.add(matches[0])
  assert len(offsets) > 1  # the images do not all move alike
  assert torch.equal(random_shift(images, 0), images)
