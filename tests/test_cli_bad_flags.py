"""Every command-line tool turns every bad flag value into one line and an error exit.

Each tool's own parsing and up-front checks (``parse`` then ``check_args``)
run in-process over a table of bad values, before anything heavy is built;
a few real runs per tool as separate processes prove the same end to end
(interpreter, imports and warnings included): exactly one stderr line,
non-zero exit, no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from script_runner import ROOT, load_tool, run_script

SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))  # The tools import cli_args from their folder.

import cli_args  # noqa: E402

HELPERS = {
  "cli_args.py",
  "mjlab_cli.py",
  # ManiSkill3's reference measurement: it runs in ManiSkill's own virtual
  # environment (its docstring), not the suite's.
  "maniskill_reference.py",
}  # Modules in scripts/ that are not the suite's tools.

# Placeholders filled per test: {dir} an existing folder, {file} an existing
# regular file, {new} a path that does not exist yet, {poses} a poses file
# with its model beside it, {run} a training run folder, {png} an existing PNG,
# {pt} and {onnx} existing (empty) policy files, {hdf5} an HDF5 signature,
# {demos} a valid (one-step) demonstration file.
BASE = {
  "evaluate_cube_tray.py": ["--output", "{new}"],
  "measure_cube_tray_expert.py": ["--output", "{new}"],
  "check_robot.py": ["--output", "{new}"],
  "evaluate_binpick.py": ["--output", "{new}"],
  "evaluate_glass_push.py": ["--policy", "{pt}", "--output", "{new}"],
  "glass_push_exam.py": ["--solution", "nudge", "--tables", "10000-10001"]
  + ["--output", "{new}"],
  "measure_glass_perception.py": ["--output", "{new}"],
  "train_glass_imitation.py": ["--output", "{new}"],
  "measure_bin_graspability.py": ["--seeds", "0-0", "--output", "{new}"],
  "benchmark.py": ["--json", "{new}.json"],
  "render_poses.py": ["--poses", "{poses}", "--output", "{new}"],
  "plot_training.py": ["--run", "{run}", "--output", "{new}.png"],
  "summarize_binpick.py": ["--run", "{bin_run}"],
  "grasp_outcomes.py": ["--run", "{bin_probe}"],
  "probe_binpick_object.py": ["--run", "{bin_probe}", "--object", "obj_00"],
  "trace_binpick_object.py": ["--run", "{bin_probe}", "--object", "obj_00"]
  + ["--end", "1"],
  "export_lerobot.py": ["{hdf5}", "--output", "{new}"],
  "check_lerobot_dataset.py": ["{dir}"],
  "collect_demos.py": ["--task", "CubeTray-UR5-RG2", "--output", "{new}.hdf5"],
  "collect_demos_ray.py": ["--task", "CubeTray-UR5-RG2", "--episodes", "4"]
  + ["--shards", "2", "--output", "{new}.hdf5"],
  "merge_demos.py": ["{file}", "{poses}", "--output", "{new}.hdf5"],
  "replay_demos.py": ["{demos}"],
  "train_bc.py": ["{demos}", "--output", "{new}"],
  "pretrain_actor.py": ["{demos}", "--output", "{new}"],
  "camera_benchmark.py": ["--json", "{new}.json"],
  "camera_pictures.py": ["--output", "{new}"],
  "mutation_check.py": ["--output", "{new}"],
}
COMMON = [  # Every environment tool (num-envs, device, engine, output).
  ["--engine", "bullet"],
  ["--device", "cuda:7"],
  ["--device", "tpu"],
  ["--engine", "mujoco", "--device", "cuda:0"],
  ["--num-envs", "0"],
  ["--num-envs", "-1"],
  ["--num-envs", "abc"],
  ["--output", "{dir}"],
  ["--output", "{file}/run"],
  ["--no-such-flag", "1"],
]
BAD = {
  "evaluate_cube_tray.py": COMMON
  + [
    ["--episodes", "0"],
    ["--episodes", "-3"],
    ["--max-steps", "0"],
    ["--videos", "-1"],
    ["--videos", "5"],  # More than --num-envs 4.
    ["--seed", "1.5"],
    ["--policy", "{file}/model.pt"],  # not there
    ["--policy", "{file}"],  # neither a .pt checkpoint nor an .onnx policy
    ["--policy", "{dir}"],
  ],
  "check_robot.py": COMMON + [["--cube-mass", "0"], ["--cube-mass", "-0.05"]],
  "evaluate_binpick.py": COMMON
  + [
    ["--objects", "-1"],
    ["--objects", "0"],
    ["--max-steps", "0"],
    ["--bin-width", "-0.1"],
    ["--bin-width", "0.01"],
    ["--bin-height", "1.0"],
    ["--bin-height", "nan"],
    ["--videos", "9"],
    ["--object-set", "soft"],
  ],
  "evaluate_glass_push.py": [
    ["--tables", "5-2"],
    ["--tables", "abc"],
    ["--tables", "20000-20001"],
    ["--max-steps", "0"],
    ["--policy", "{file}/model.pt"],  # not there
    ["--policy", "{file}"],  # neither a .pt checkpoint nor an .onnx policy
    ["--policy", "{dir}"],
    ["--compare", "{new}.json"],  # not there
    ["--compare", "{file}"],  # not a scores.json
    ["--compare", "{dir}"],
    ["--engine", "bullet"],
    ["--device", "cuda:7"],
    ["--engine", "mujoco", "--device", "cuda:0"],
    ["--num-envs", "4"],  # one environment per table: no such flag
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
  ],
  "measure_bin_graspability.py": [
    ["--seeds", "5-2"],
    ["--seeds", "abc"],
    ["--random-drops", "-1"],
    ["--workers", "0"],
    ["--object-set", "wide"],
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
    ["--no-such-flag", "1"],
  ],
  "measure_glass_perception.py": [
    ["--tables", "5-2"],
    ["--tables", "abc"],
    ["--tables", "9999-10000"],
    ["--match-radius", "0"],
    ["--match-radius", "nan"],
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
  ],
  "train_glass_imitation.py": [
    ["--tables", "5-2"],
    ["--tables", "abc"],
    ["--tables", "9999-10000"],
    ["--teacher", "nudge"],
    ["--valid-tables", "0"],
    ["--valid-tables", "64"],
    ["--pushes", "0"],
    ["--jobs", "0"],
    ["--epochs", "0"],
    ["--batch-size", "0"],
    ["--width", "0"],
    ["--lr", "0"],
    ["--lr", "nan"],
    ["--samples", "{new}.npz"],
    ["--samples", "{dir}"],
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
    ["--no-such-flag", "1"],
  ],
  "glass_push_exam.py": [
    ["--tables", "5-2"],
    ["--tables", "abc"],
    ["--tables", "1-"],
    ["--tables", "20000-20001"],
    ["--pushes", "0"],
    ["--jobs", "0"],
    ["--solution", "magic"],
    ["--solution", "limit", "--engine", "warp"],
    ["--solution", "limit", "--film"],
    ["--engine", "bullet"],
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
  ],
  "benchmark.py": [
    ["--task", "NoSuchTask"],
    ["--engine", "bullet"],
    ["--engine", "mujoco", "bullet"],
    ["--device", "cuda:7"],
    ["--num-envs", "0"],
    ["--num-envs", "4", "-1"],
    ["--steps", "0"],
    ["--json", "{dir}"],
    ["--json", "{file}/bench.json"],
  ],
  "mutation_check.py": [
    ["--only", "no_such_mutation"],
    ["--output", "{dir}"],  # Exists.
  ],
  "plot_training.py": [
    ["--run", "{new}"],
    ["--run", "{dir}"],  # No event file in it.
    ["--output", "{new}.txt"],
    ["--output", "{png}"],  # Exists.
    ["--label", "a", "b"],  # Two labels, one run.
    ["--smooth", "0"],
  ],
  "summarize_binpick.py": [
    ["--run", "{new}"],
    ["--run", "{bin_run}", "{dir}"],  # No report.json in the second.
    ["--json", "{file}"],  # Exists.
    ["--min-delivered", "1.5"],
    ["--min-cleared", "-0.1"],
  ],
  "grasp_outcomes.py": [
    ["--run", "{new}"],
    ["--run", "{bin_run}"],  # A report.json, no transitions.
    ["--run", "{bin_probe}", "{dir}"],  # Nothing in the second.
    ["--json", "{file}"],  # Exists.
  ],
  "probe_binpick_object.py": [
    ["--run", "{new}"],
    ["--run", "{bin_run}"],  # A report.json but no final_states.json.
    ["--run", "{bin_bare}"],  # Its report.json has no config.
    ["--env", "3"],
    ["--object", "obj_07"],
    ["--object", "obj_01"],  # Not poured.
    ["--search", "middle"],
    ["--show", "-1"],
    ["--json", "{file}"],  # Exists.
  ],
  "trace_binpick_object.py": [
    ["--run", "{new}"],
    ["--run", "{bin_bare}"],  # Its report.json has no config.
    ["--env", "3"],
    ["--object", "obj_01"],  # Not poured.
    ["--every", "0"],
    ["--start", "2"],  # After --end.
    ["--start", "-1"],
    ["--end", "1000"],  # Past the run's episode.
    ["--csv", "{file}"],  # Exists.
  ],
  "render_poses.py": [
    ["--poses", "{new}.npz"],
    ["--poses", "{dir}"],
    ["--poses", "{file}"],  # No model (.mjb) beside it.
    ["--start", "-1"],
    ["--start", "5", "--end", "2"],
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
  ],
  "export_lerobot.py": [
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
    ["--fps", "0"],
    ["--fps", "abc"],
    ["--repo-id", "no-owner"],
    ["--task", " "],
    ["--mask", "a/b"],
    ["--no-such-flag", "1"],
  ],
  "check_lerobot_dataset.py": [
    ["--demos", "{new}.hdf5"],
    ["--demos", "{dir}"],
    ["--mask", "train"],  # without --demos
    ["--items", "0"],
    ["--video-backend", "ffmpeg"],
    ["--no-such-flag", "1"],
  ],
  "collect_demos.py": COMMON
  + [
    ["--task", "NoSuchTask"],
    ["--episodes", "0"],
    ["--episodes", "1", "--shard", "0/2"],  # an empty shard
    ["--shard", "2/2"],
    ["--shard", "1-2"],
    ["--max-steps", "0"],
    ["--seed", "-1"],
    ["--cameras", "wrist,top"],
    ["--objects", "4"],  # BinPick only
    ["--object-set", "hard"],  # BinPick only
    ["--task", "BinPick-UR5-RG2", "--object-set", "soft"],
    ["--output", "{new}.txt"],
  ],
  "collect_demos_ray.py": [
    ["--shards", "1"],
    ["--shards", "5"],  # More than --episodes 4.
    ["--episodes", "0"],
    ["--gpus-per-shard", "-1"],
    ["--cpus-per-shard", "0"],
    ["--address", "head node"],
    ["--engine", "bullet"],
    ["--engine", "mujoco", "--gpus-per-shard", "1"],
    ["--num-envs", "0"],
    ["--task", "NoSuchTask"],
    ["--max-steps", "0"],
    ["--seed", "-1"],
    ["--objects", "4"],  # BinPick only
    ["--task", "BinPick-UR5-RG2", "--object-set", "soft"],
    ["--output", "{dir}"],
    ["--output", "{new}.txt"],
    ["--output", "{file}/run.hdf5"],
    ["--no-such-flag", "1"],
  ],
  "merge_demos.py": [
    ["--output", "{dir}"],
    ["--output", "{new}.txt"],
    ["--output", "{file}/run.hdf5"],
    ["--no-such-flag", "1"],
  ],
  "replay_demos.py": [
    ["--engine", "bullet"],
    ["--device", "cuda:7"],
    ["--engine", "mujoco", "--device", "cuda:0"],
    ["--json", "{file}"],  # exists
    ["--no-such-flag", "1"],
  ],
  "train_bc.py": [
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
    ["--epochs", "0"],
    ["--batch-size", "0"],
    ["--chunk", "0"],
    ["--lr", "0"],
    ["--lr", "nan"],
    ["--hidden", "0"],
    ["--seed", "-1"],
    ["--image-shift", "-1"],
    ["--threads", "0"],
    ["--device", "cuda:7"],
    ["--no-such-flag", "1"],
  ],
  "pretrain_actor.py": [
    ["--output", "{dir}"],
    ["--output", "{file}/run"],
    ["--epochs", "0"],
    ["--batch-size", "0"],
    ["--lr", "0"],
    ["--lr", "nan"],
    ["--init-std", "-0.1"],
    ["--init-std", "inf"],
    ["--seed", "-1"],
    ["--no-such-flag", "1"],
  ],
  "camera_benchmark.py": [
    ["--engine", "bullet"],
    ["--engine", "mujoco", "--device", "cuda:0"],
    ["--device", "tpu"],
    ["--num-envs", "4", "0"],
    ["--repeats", "0"],
    ["--steps", "0"],
    ["--cameras", "wrist,top"],
    ["--cameras", ""],
    ["--json", "{dir}"],
    ["--json", "{file}/bench.json"],
  ],
  "camera_pictures.py": [["--seed", "-1"], ["--output", "{file}"]],
  "measure_cube_tray_expert.py": COMMON
  + [["--mode", "policy"], ["--episodes", "0"], ["--seed", "1.5"]],
}
# Left out: a flag missing its required partner.
MISSING = {
  "evaluate_glass_push.py": ["--output", "{new}"],  # no --policy
  "glass_push_exam.py": ["--solution", "nudge", "--output", "{new}"],
  "render_poses.py": ["--output", "{new}"],
  "merge_demos.py": ["{file}", "--output", "{new}.hdf5"],  # one input
  "trace_binpick_object.py": ["--run", "{bin_probe}", "--object", "obj_00"],
}


@pytest.fixture
def paths(tmp_path) -> dict[str, str]:
  (tmp_path / "existing").mkdir()
  (tmp_path / "plain.txt").write_text("a file, not a folder")
  (tmp_path / "run.npz").write_bytes(b"")
  (tmp_path / "run.mjb").write_bytes(b"")
  (tmp_path / "train_run").mkdir()
  (tmp_path / "train_run" / "events.out.tfevents.0").write_bytes(b"")
  (tmp_path / "train_run" / "params").mkdir()
  for name in ("env.yaml", "agent.yaml"):
    (tmp_path / "train_run" / "params" / name).write_text("")
  (tmp_path / "old.png").write_bytes(b"")
  (tmp_path / "model_1.pt").write_bytes(b"")
  (tmp_path / "old.onnx").write_bytes(b"")
  (tmp_path / "demos.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n")
  (tmp_path / "bin_run").mkdir()
  (tmp_path / "bin_run" / "report.json").write_text("{}")
  write_bin_probe_run(tmp_path / "bin_probe", tmp_path / "bin_bare")
  return {
    "bin_run": str(tmp_path / "bin_run"),
    "bin_probe": str(tmp_path / "bin_probe"),
    "bin_bare": str(tmp_path / "bin_bare"),
    "pt": str(tmp_path / "model_1.pt"),
    "onnx": str(tmp_path / "old.onnx"),
    "run": str(tmp_path / "train_run"),
    "png": str(tmp_path / "old.png"),
    "dir": str(tmp_path / "existing"),
    "file": str(tmp_path / "plain.txt"),
    "new": str(tmp_path / "new"),
    "poses": str(tmp_path / "run.npz"),
    "hdf5": str(tmp_path / "demos.hdf5"),
    "demos": write_demo_file(tmp_path / "one_step.hdf5"),
  }


def write_bin_probe_run(folder: Path, bare: Path) -> None:
  """A bin-picking run folder as the probe and the grasp counter read it
  (config, final states, no transitions), and a copy whose report has no
  config."""
  import json

  config = dict(
    num_envs="1", objects="2", bin_width="0.14", bin_height="0.06", seed="0",
    object_seed="0",
  )  # fmt: skip
  states = {"0": [{"object": "obj_00", "poured": True}, {"object": "obj_01"}]}
  states["0"][1]["poured"] = False
  for path, report in ((folder, {"config": config}), (bare, {})):
    path.mkdir()
    (path / "report.json").write_text(json.dumps(report))
    (path / "final_states.json").write_text(json.dumps(states))
    (path / "transitions.json").write_text(json.dumps({"0": []}))


def write_demo_file(path: Path) -> str:
  """A valid demo file of one one-step episode (mjlab_tasks.demos)."""
  import numpy as np

  from mjlab_tasks.demos import DemoWriter, Episode

  episode = Episode(
    seed=0,
    env=0,
    obs={"x": np.zeros((1, 2))},
    actions=np.zeros((1, 7)),
    rewards=np.zeros(1),
    dones=np.ones(1),
    states=np.zeros((1, 3)),
    success=False,
    outcome="failure",
    reason="containment",
  )
  with DemoWriter(path, {"env_name": "CubeTray-UR5-RG2", "engine": "mujoco"}) as writer:
    writer.add(episode)
    writer.finish()
  return str(path)


def argv_for(script: str, bad: list[str], paths: dict[str, str]) -> list[str]:
  """The tool's valid base arguments, then the bad ones (the last value wins)."""
  return [a.format(**paths) for a in BASE[script] + bad]


def one_error_line(stderr: str) -> str:
  lines = [line for line in stderr.splitlines() if line.strip()]
  assert "Traceback" not in stderr, stderr
  assert len(lines) == 1, stderr
  return lines[0]


def test_every_tool_is_covered():
  tools = {p.name for p in SCRIPTS.glob("*.py")} - HELPERS
  covered = set(BAD) | {s for s in PASSTHROUGH if (SCRIPTS / s).exists()}
  assert tools == covered, "add the new tool's bad values to BAD and BASE"
  for script in sorted(set(BAD)):
    text = (SCRIPTS / script).read_text()
    assert "parse(Args)" in text and "def check_args(" in text, script


@pytest.mark.parametrize("script", sorted(BASE))
def test_valid_arguments_pass_the_checks(script, paths, capsys):
  """The base arguments are valid: a refusal below is the bad value's doing."""
  tool = load_tool(script)
  argv = argv_for(script, [], paths)
  if "device" in tool.Args.__dataclass_fields__:
    argv += ["--device", "cpu"]
  tool.check_args(cli_args.parse(tool.Args, argv))
  assert capsys.readouterr().err == ""
  assert not Path(paths["new"]).exists()  # Checks create nothing.


@pytest.mark.parametrize("script", sorted(BAD))
def test_bad_values_give_one_line(script, paths, capsys):
  tool = load_tool(script)
  cases = [(argv_for(script, bad, paths), bad) for bad in BAD[script]]
  if script in MISSING:
    cases.append(([a.format(**paths) for a in MISSING[script]], ["missing"]))
  for argv, bad in cases:
    with pytest.raises(SystemExit) as exit_:
      tool.check_args(cli_args.parse(tool.Args, argv))
    assert exit_.value.code not in (0, None), argv
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("error: "), (argv, line)
    # The line names what was wrong: one of the bad flags.
    assert any(a in line for a in bad if a.startswith("-") or a == "missing"), line
  assert not Path(paths["new"]).exists()


def test_create_folder_refusal_is_one_line(paths, capsys):
  with pytest.raises(SystemExit) as exit_:
    cli_args.create_folder(Path(paths["file"]) / "run")
  assert exit_.value.code != 0
  assert "cannot create" in one_error_line(capsys.readouterr().err)


def test_condensed_tyro_errors():
  plain = (  # As tyro draws it when stdout is not UTF-8.
    " Required options \n ---------------- \n  Missing from x.py:  \n"
    "      --poses PATH  \n          The run's poses. (required)  \n"
    "      --output PATH  \n  ----------------\n  For full helptext, run x.py --help\n"
  )
  assert cli_args.condense_tyro_error(plain) == (
    "missing required option(s) --poses, --output (see --help)"
  )
  box = (
    "╭─ Invalid choice ──────────────────────────────╮\n"
    "│ invalid choice 'foo' for argument '--solution'. │\n"
    "│ Expected one of ('nudge',                      │\n"
    "│ 'geometric').                                  │\n"
    "│ ────────────────────────────────────────────── │\n"
    "│ For full helptext, run x.py --help             │\n"
    "╰────────────────────────────────────────────────╯\n"
  )
  assert cli_args.condense_tyro_error(box) == (
    "invalid choice 'foo' for argument '--solution'. Expected one of "
    "('nudge', 'geometric')."
  )


# One real process per tool: the whole stderr, imports and warnings included.
REAL_RUNS = {
  "evaluate_cube_tray.py": ["--engine", "bullet"],
  "check_robot.py": ["--device", "cuda:7"],
  "evaluate_binpick.py": ["--bin-width", "-0.1"],
  "evaluate_glass_push.py": ["--compare", "{file}"],
  "glass_push_exam.py": ["--tables", "5-2"],
  "benchmark.py": ["--num-envs", "0"],
  "render_poses.py": ["--output", "{dir}"],
  "plot_training.py": ["--run", "{dir}"],
  "summarize_binpick.py": ["--run", "{dir}"],
  "grasp_outcomes.py": ["--run", "{dir}"],
  "probe_binpick_object.py": ["--run", "{dir}"],
  "trace_binpick_object.py": ["--every", "0"],
  "export_lerobot.py": ["--fps", "0"],
  "check_lerobot_dataset.py": ["--items", "0"],
  "collect_demos.py": ["--cameras", "wrist,top"],
  "collect_demos_ray.py": ["--shards", "1"],
  "merge_demos.py": ["--output", "{new}.txt"],
  "replay_demos.py": ["--engine", "bullet"],
  "train_bc.py": ["--epochs", "0"],
  "pretrain_actor.py": ["--init-std", "0"],
  "measure_cube_tray_expert.py": ["--mode", "policy"],
  "measure_bin_graspability.py": ["--seeds", "5-2"],
  "camera_benchmark.py": ["--cameras", "top"],
  "camera_pictures.py": ["--output", "{file}"],
  "mutation_check.py": ["--only", "no_such_mutation"],
}


@pytest.mark.parametrize("script", sorted(REAL_RUNS))
def test_real_run_prints_one_line(script, paths):
  out = run_script(script, *argv_for(script, REAL_RUNS[script], paths), timeout=120)
  assert out.returncode != 0
  assert one_error_line(out.stderr).startswith("error: ")
  assert out.stdout == ""
  assert not Path(paths["new"]).exists()


def test_onnx_policy_without_onnxruntime_is_one_line(paths, capsys, monkeypatch):
  """The onnx extra is optional: without it an .onnx policy is refused up front."""
  import importlib.util

  onnx_file = Path(paths["dir"]) / "policy.onnx"
  onnx_file.write_bytes(b"")
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == "onnxruntime" else find_spec(name, *a),
  )
  for script in (
    "evaluate_cube_tray.py",
    "evaluate_binpick.py",
    "evaluate_glass_push.py",
  ):
    tool = load_tool(script)
    argv = argv_for(script, ["--policy", str(onnx_file)], paths)
    with pytest.raises(SystemExit):
      tool.check_args(cli_args.parse(tool.Args, argv))
    line = one_error_line(capsys.readouterr().err)
    assert "--policy" in line and "pip install 'manipulation-suite[onnx]'" in line


# Tools that pass their flags on to another parser (train.py: mjlab's train,
# play.py: mjlab's play) check their own flags first; real runs only.
PLAY_TASK = ["CubeTray-UR5-RG2", "--engine", "mujoco"]
PASSTHROUGH = {
  "train.py": [
    ["CubeTray-UR5-RG2", "--engine", "bullet"],
    ["NoSuchTask-UR5-RG2", "--engine", "mujoco"],
  ],
  "play.py": [
    ["CubeTray-UR5-RG2", "--engine", "bullet", "--agent", "zero"],
    ["NoSuchTask-UR5-RG2", "--engine", "mujoco", "--agent", "zero"],
    ["--engine", "mujoco", "CubeTray-UR5-RG2", "--steps"],  # no value
    PLAY_TASK + ["--agent", "zero", "--steps", "0"],
    PLAY_TASK + ["--agent", "zero", "--steps", "abc"],
    PLAY_TASK,  # --agent trained (the default) without a checkpoint
    PLAY_TASK + ["--checkpoint-file", "{new}.pt"],  # not there
    PLAY_TASK + ["--checkpoint-file", "{file}"],  # not a .pt checkpoint
    PLAY_TASK + ["--export-onnx", "{new}.onnx"],  # without a checkpoint
    PLAY_TASK + ["--checkpoint-file", "{pt}", "--export-onnx", "{new}.txt"],
    PLAY_TASK + ["--checkpoint-file", "{pt}", "--export-onnx", "{onnx}"],  # exists
  ],
}


@pytest.mark.parametrize(
  ("script", "argv"), [(s, a) for s, cases in PASSTHROUGH.items() for a in cases]
)
def test_passthrough_tool_prints_one_line(script, argv, paths):
  if not (SCRIPTS / script).exists():
    pytest.skip(f"no scripts/{script}")
  out = run_script(script, *[a.format(**paths) for a in argv], timeout=300)
  assert out.returncode != 0
  assert one_error_line(out.stderr).startswith("error: ")
  assert not Path(paths["new"] + ".onnx").exists()
