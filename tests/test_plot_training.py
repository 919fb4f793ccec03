"""scripts/plot_training.py: learning curves against environment steps and
wall-clock minutes, checked on fake run folders (tensorboard events with
chosen wall times, params/*.yaml in mjlab's dump_yaml format)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_runner import load_tool, run_script

# mjlab's dump_yaml output, cut down: Python tags that yaml.safe_load refuses
# (tuples, functions, partials, enums, anchors) around the two numbers read.
ENV_YAML = """\
decimation: 50
scene:
  num_envs: {num_envs}
  env_spacing: 2.0
  terrain:
    init_state:
      pos: !!python/tuple
      - 0.0
      - 0.0
    spec_fn: !!python/name:mjlab.entity.entity.%3Clambda%3E ''
  entities:
    robot:
      spec_fn: !!python/object/apply:functools.partial
        args:
        - &id001 !!python/name:assets.ur5_rg2.model.build_ur5_rg2_spec ''
        state: !!python/tuple
        - *id001
        - !!python/tuple []
        - with_camera: false
      transmission_type: !!python/object/apply:mjlab.actuator.actuator.TransmissionType
      - joint
      joint_ids: !!python/object/apply:builtins.slice
      - null
      - null
      - null
episode_length_s: 12.0
"""
AGENT_YAML = """\
seed: 42
num_steps_per_env: {steps}
obs_groups:
  actor: !!python/tuple
  - actor
experiment_name: cube_tray_ur5_rg2
algorithm:
  gamma: 0.99
  class_name: PPO
"""
NEW_STAGES = ("reached", "grasped", "lifted", "over_tray", "in_tray", "released")


def write_events(path: Path, opened: float, scalars) -> None:
  """A tensorboard event file opened at ``opened`` (its file_version event,
  as rsl_rl's writer logs it), then ``(tag, iteration, wall time, value)``."""
  from tensorboard.compat.proto import event_pb2, summary_pb2
  from tensorboard.summary.writer.record_writer import RecordWriter

  with path.open("wb") as f:
    writer = RecordWriter(f)
    start = event_pb2.Event(wall_time=opened, file_version="brain.Event:2")
    writer.write(start.SerializeToString())
    for tag, step, wall, value in scalars:
      summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
      )
      event = event_pb2.Event(wall_time=wall, step=step, summary=summary)
      writer.write(event.SerializeToString())


def make_run(
  folder: Path,
  curves: dict[str, list[float]],
  num_envs: int = 8,
  steps: int = 24,
  opened: float = 1000.0,
  seconds_per_iteration: float = 30.0,
) -> Path:
  """A run folder: each tag's values at iterations 0, 1, ..., iteration i
  logged ``(i + 1) * seconds_per_iteration`` after the file was opened."""
  (folder / "params").mkdir(parents=True)
  (folder / "params" / "env.yaml").write_text(ENV_YAML.format(num_envs=num_envs))
  (folder / "params" / "agent.yaml").write_text(AGENT_YAML.format(steps=steps))
  scalars = [
    (tag, it, opened + (it + 1) * seconds_per_iteration, value)
    for tag, values in curves.items()
    for it, value in enumerate(values)
  ]
  write_events(folder / f"events.out.tfevents.{int(opened)}.host.1.0", opened, scalars)
  return folder


@pytest.fixture(scope="module")
def tool():
  return load_tool("plot_training.py")


def test_environment_steps_and_minutes_by_hand(tool, tmp_path):
  run = make_run(
    tmp_path / "cube_tray_ur5_rg2" / "run_a",
    {"Episode_Metrics/success": [0.0, 0.0, 0.25, 0.5, 0.75]},
    num_envs=8,
    steps=24,
  )
  read = tool.read_run(run, "a", None)
  assert (read.num_envs, read.steps_per_env, read.processes) == (8, 24, 1)
  # Iteration i: (i + 1) x 8 envs x 24 steps; logged (i + 1) x 30 s after opening.
  assert read.curves["Episode_Metrics/success"] == [
    (0, 192, 0.5, 0.0),
    (1, 384, 1.0, 0.0),
    (2, 576, 1.5, 0.25),
    (3, 768, 2.0, 0.5),
    (4, 960, 2.5, 0.75),
  ]
  summary = tool.summarise(read, window=2)
  assert (summary["iterations"], summary["env_steps"], summary["minutes"]) == (
    5,
    960,
    2.5,
  )
  # Means of two iterations: 0, 0, 0.125, 0.375, 0.625.
  assert summary["tags"]["Episode_Metrics/success"] == {
    "first": 0.0,
    "last": 0.625,
    "best": 0.625,
    "best_iteration": 4,
  }


def test_moving_mean_and_lower_is_better(tool, tmp_path):
  assert tool.moving_mean([4.0, 2.0, 0.0, 6.0], 3) == [4.0, 3.0, 2.0, 8.0 / 3]
  assert tool.moving_mean([1.0, 3.0], 1) == [1.0, 3.0]
  run = make_run(
    tmp_path / "run",
    {"Episode_Metrics/tool_cube_distance": [0.5, 0.125, 0.25, 0.375]},
  )
  read = tool.read_run(run, "r", ("Episode_Metrics/tool_cube_distance",))
  best = tool.summarise(read, window=1)["tags"]["Episode_Metrics/tool_cube_distance"]
  assert best == {"first": 0.5, "last": 0.375, "best": 0.125, "best_iteration": 1}


def test_resumed_run_counts_active_time_only(tool, tmp_path):
  """Two processes in one folder: the pause between them is left out, and
  the second, resumed from iteration 1's checkpoint, replaces iterations 2
  and 3 of the first (3 even where it has not logged it yet)."""
  run = make_run(tmp_path / "run", {}, num_envs=4, steps=10)
  tag = "Train/mean_reward"
  first = [(tag, it, 1000.0 + 60 * (it + 1), it + 1.0) for it in range(4)]
  write_events(
    run / "events.out.tfevents.1000.host.1.0",
    1000.0,
    [*first, ("Loss/value", 3, 1240.0, 0.5)],
  )
  write_events(  # An hour later.
    run / "events.out.tfevents.4600.host.2.0", 4600.0, [(tag, 2, 4660.0, 30.0)]
  )
  read = tool.read_run(run, "r", ("Train/mean_reward", "Loss/value"))
  assert read.curves == {
    tag: [
      (0, 40, 1.0, 1.0),
      (1, 80, 2.0, 2.0),
      (2, 120, 5.0, 30.0),  # 4 active minutes before, 1 in the second file
    ]
  }
  assert (read.last_iteration, read.minutes) == (2, 5.0)


def test_processes_from_rsl_rl_perf_scalars(tool, tmp_path):
  """Two GPUs: rsl_rl's total_fps counts both processes' steps."""
  # 8 envs x 24 steps x 2 processes = 384 steps per iteration, in 1.5 + 0.5 s.
  run = make_run(
    tmp_path / "run",
    {
      "Train/mean_reward": [0.0, 1.0],
      "Perf/total_fps": [192.0, 192.0],
      "Perf/collection_time": [1.5, 1.5],
      "Perf/learning_time": [0.5, 0.5],
    },
  )
  read = tool.read_run(run, "r", None)
  assert read.processes == 2
  assert [p[1] for p in read.curves["Train/mean_reward"]] == [384, 768]


def test_default_tags_and_their_fallback(tool):
  current = tuple(f"Episode_Metrics/{s}" for s in ("success", *NEW_STAGES)) + (
    "Episode_Metrics/tool_cube_distance",
    "Train/mean_reward",
    "Episode_Reward/progress",
    "Loss/value",
  )
  assert tool.choose_tags(current) == list(tool.DEFAULT_TAGS)  # Nothing else.
  bin_pick = (
    "Episode_Metrics/grasped",
    "Episode_Metrics/lifted",
    "Episode_Metrics/delivered_fraction",
    "Episode_Metrics/bin_cleared",
    "Train/mean_reward",
    "Loss/value",
  )
  assert tool.choose_tags(bin_pick) == [
    "Train/mean_reward",
    "Episode_Metrics/grasped",
    "Episode_Metrics/lifted",
    "Episode_Metrics/bin_cleared",
    "Episode_Metrics/delivered_fraction",
  ]
  none_of_them = ("Episode_Metrics/takeable_rate", "Episode_Metrics/toppled")
  assert tool.choose_tags((*none_of_them, "Train/mean_reward", "Loss/value")) == [
    "Train/mean_reward",
    *none_of_them,
  ]


def test_two_runs_compared_end_to_end(tmp_path):
  experiment = tmp_path / "bin_pick_ur5_rg2"
  make_run(
    experiment / "run_a",
    {
      "Episode_Metrics/delivered_fraction": [0.0, 0.1, 0.2],
      "Train/mean_reward": [1.0, 2.0, 3.0],
      "Loss/value": [5.0, 4.0, 3.0],
    },
    num_envs=8,
  )
  make_run(
    experiment / "run_b",
    {"Episode_Metrics/delivered_fraction": [0.0, 0.3], "Train/mean_reward": [1.0, 4.0]},
    num_envs=16,
    seconds_per_iteration=90.0,
  )
  out = tmp_path / "plots" / "cmp.png"
  result = run_script(
    "plot_training.py",
    "--run",
    str(experiment / "run_a"),
    str(experiment / "run_b"),
    "--label",
    "base",
    "more envs",
    "--output",
    str(out),
  )
  assert result.returncode == 0, result.stderr[-3000:]
  for png in (out, out.with_name("cmp_time.png")):
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
  data = json.loads(out.with_suffix(".json").read_text())
  assert data["points"] == ["iteration", "env_steps", "minutes", "value"]
  a, b = data["runs"]
  assert (a["label"], b["label"]) == ("base", "more envs")
  # Fallback (no cube-in-tray stages): the return, then the task's metrics.
  assert list(a["curves"]) == [
    "Train/mean_reward",
    "Episode_Metrics/delivered_fraction",
  ]
  assert b["curves"]["Train/mean_reward"] == [[0, 384, 1.5, 1.0], [1, 768, 3.0, 4.0]]
  assert b["summary"]["env_steps"] == 768 and b["summary"]["minutes"] == 3.0
  reward = a["summary"]["tags"]["Train/mean_reward"]
  assert reward == {"first": 1.0, "last": 2.0, "best": 2.0, "best_iteration": 2}
  assert "base (" in result.stdout and "more envs (" in result.stdout
  assert "3 iterations, 576 environment steps" in result.stdout


@pytest.mark.parametrize(
  ("existing", "extra", "expected"),
  [
    ("out_time.png", [], "--output"),
    ("out.json", [], "--output"),
    ("out.png", [], "--output"),
    (None, ["--label", "one", "two"], "--label takes one label per run: 2 for 1"),
    (None, ["--smooth", "0"], "--smooth must be at least 1"),
    (None, ["--tags", "Train/mean_reward/time"], "--tags Train/mean_reward/time"),
  ],
)
def test_refusals_are_one_line(tool, tmp_path, capsys, existing, extra, expected):
  import cli_args

  run = make_run(tmp_path / "run", {"Train/mean_reward": [0.0]})
  if existing:
    (tmp_path / existing).write_bytes(b"")
  argv = ["--run", str(run), "--output", str(tmp_path / "out.png"), *extra]
  with pytest.raises(SystemExit) as exit_:
    tool.check_args(cli_args.parse(tool.Args, argv))
  assert exit_.value.code == 2
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]


def test_run_without_params_is_refused(tool, tmp_path, capsys):
  import cli_args

  run = make_run(tmp_path / "run", {"Train/mean_reward": [0.0]})
  (run / "params" / "agent.yaml").unlink()
  argv = ["--run", str(run), "--output", str(tmp_path / "out.png")]
  with pytest.raises(SystemExit):
    tool.check_args(cli_args.parse(tool.Args, argv))
  assert "no params/agent.yaml" in capsys.readouterr().err


def test_a_recorded_json_is_drawn_as_recorded(tool, tmp_path, capsys):
  """--from-json: the runs of a JSON this tool wrote come back beside the
  run folders with their labels, points and summaries as recorded (a run
  whose folder is gone, as the shipped cube-in-tray run's)."""
  import cli_args

  def main(*argv):
    assert tool.main(cli_args.parse(tool.Args, list(argv))) == 0

  old = make_run(tmp_path / "exp" / "run_a", {"Train/mean_reward": [1.0, 3.0, 2.0]})
  first = tmp_path / "first.png"
  main("--run", str(old), "--label", "old", "--output", str(first))
  new = make_run(tmp_path / "exp" / "run_b", {"Train/mean_reward": [5.0]}, num_envs=4)
  out = tmp_path / "cmp.png"
  main(
    "--run",
    str(new),
    "--from-json",
    str(first.with_suffix(".json")),
    "--output",
    str(out),
  )
  recorded = json.loads(first.with_suffix(".json").read_text())["runs"]
  runs = json.loads(out.with_suffix(".json").read_text())["runs"]
  assert [r["label"] for r in runs] == ["run_b", "old"]
  assert runs[1] == recorded[0]
  assert runs[0]["curves"]["Train/mean_reward"] == [[0, 96, 0.5, 5.0]]
  bad = tmp_path / "bad.json"
  bad.write_text("{}")
  capsys.readouterr()
  with pytest.raises(SystemExit):
    main("--from-json", str(bad), "--output", str(tmp_path / "x.png"))
  assert "not a JSON this tool wrote" in capsys.readouterr().err
