"""Learning curves of one training run, or of several compared, as PNG + JSON.

Reads the tensorboard event files and ``params/`` that mjlab's train (and
scripts/train.py) writes into each run folder, and plots every metric against
environment steps and against wall-clock training time, one subplot per
metric, one coloured line per run: a moving mean drawn solid over the faint
per-iteration values (the episode metrics are noisy: few episodes end per
iteration).

  python scripts/plot_training.py --run logs/rsl_rl/cube_tray_ur5_rg2/RUN --output curves.png
  python scripts/plot_training.py --run RUN_A RUN_B --label base gamma95 --output cmp.png
  python scripts/plot_training.py --run RUN --from-json docs/images/cube_tray_ppo.json \
    --output cmp.png

writes ``cmp.png`` (against environment steps), ``cmp_time.png`` (against
wall-clock minutes) and ``cmp.json`` (every point and the summary), refusing
to overwrite any of them, and prints a summary per run.

Environment steps of iteration i: (i + 1) x num_envs x num_steps_per_env x
processes, with ``scene.num_envs`` from params/env.yaml and
``num_steps_per_env`` from params/agent.yaml. Under several GPUs (mjlab's
``--gpu-ids``) num_envs is per process and only the first process logs; the
process count is recovered from rsl_rl's ``Perf/*`` scalars (total_fps times
the iteration's time is the whole collection), 1 when they are absent.

Wall-clock minutes: time since the event file was opened (rsl_rl opens it
when learning starts, so iteration 0 sits at its own duration, not at 0).
A folder with several event files (training resumed in it by a new process)
gets each file's active time, from its opening to its last scalar, added
after the previous files': the pause between processes is not counted. A
later process that resumed from an earlier checkpoint replaces the earlier
values from its first iteration on.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from cli_args import check_at_least, check_new_file, fail, parse

# What a person reads first: the outcome and the return, then the task's
# stages in order (the cube-in-tray task's metrics) and the shaped reward.
DEFAULT_TAGS = (
  "Episode_Metrics/success",
  "Train/mean_reward",
  "Episode_Metrics/reached",
  "Episode_Metrics/grasped",
  "Episode_Metrics/lifted",
  "Episode_Metrics/over_tray",
  "Episode_Metrics/in_tray",
  "Episode_Metrics/released",
  "Episode_Reward/progress",
)
METRICS_PREFIX = "Episode_Metrics/"
# Subplot titles for tags whose name alone does not say what they are.
TITLES = {
  "Train/mean_reward": "episode return (Train/mean_reward)",
  "Episode_Metrics/success": "success (fraction of ended episodes)",
}
# Tags where a smaller value is better (for the summary's "best").
LOWER_IS_BETTER = ("distance", "error")
# rsl_rl's Train/*/time tags are stepped by seconds, not iterations; the
# _time.png shows their iteration tags against time instead.
SECONDS_SUFFIX = "/time"
PERF_TAGS = ("Perf/total_fps", "Perf/collection_time", "Perf/learning_time")


@dataclass
class Args:
  output: Path
  """PNG against environment steps; X_time.png (against wall-clock minutes)
  and X.json (the numbers) go beside it. Refused if any of the three exists."""
  run: tuple[Path, ...] = ()
  """Run folders to plot (mjlab/rsl_rl: events.out.tfevents.* and params/)."""
  from_json: tuple[Path, ...] = ()
  """JSON files this tool wrote (X.json): their runs, as recorded there, are
  drawn after the --run folders with their recorded labels. For a run whose
  folder is gone: docs/images/cube_tray_ppo.json holds the shipped
  cube-in-tray run."""
  label: tuple[str, ...] | None = None
  """One legend label per --run folder, in order (default: each folder's
  name)."""
  tags: tuple[str, ...] | None = None
  """Scalar tags to plot, in order (tags missing from a run are skipped).
  Default: Episode_Metrics/success, Train/mean_reward, the cube-in-tray
  stages (reached, grasped, lifted, over_tray, in_tray, released) and
  Episode_Reward/progress; a run without some of these stage metrics (an
  older cube-in-tray run, BinPick, GlassPush) adds its other
  Episode_Metrics/* tags after them."""
  smooth: int = 20
  """Moving-mean window in iterations: the solid curves, and the summary's
  last (mean of the last SMOOTH iterations) and best (best such mean).
  1 draws and summarises the raw values."""


@dataclass
class Run:
  """One run folder's curves on both axes."""

  path: Path
  label: str
  num_envs: int
  steps_per_env: int
  processes: int
  curves: dict[str, list[tuple[int, int, float, float]]] = field(default_factory=dict)
  """Per tag, (iteration, environment steps, wall-clock minutes, value)."""
  last_iteration: int = -1
  minutes: float = 0.0
  """Active wall-clock minutes up to the run's last scalar."""

  def env_steps(self, iteration: int) -> int:
    return (iteration + 1) * self.num_envs * self.steps_per_env * self.processes


def output_paths(output: Path) -> tuple[Path, Path, Path]:
  """The PNG against environment steps, the PNG against minutes, the JSON."""
  return (
    output,
    output.with_name(output.stem + "_time.png"),
    output.with_suffix(".json"),
  )


def check_args(args: Args) -> list[str]:
  """Refuse bad flags in one line; the runs' labels."""
  if not args.run and not args.from_json:
    fail("give at least one --run folder or --from-json file.")
  for path in args.from_json:
    if not path.is_file():
      fail(f"--from-json {path}: no such file.")
  for run in args.run:
    if not run.is_dir():
      fail(f"--run {run}: not a folder.")
    if not any(run.glob("events.out.tfevents.*")):
      fail(f"--run {run}: no tensorboard event file in it.")
    for name in ("env.yaml", "agent.yaml"):
      if not (run / "params" / name).is_file():
        fail(f"--run {run}: no params/{name} (mjlab's train writes it).")
  if len(set(map(Path.resolve, args.run))) != len(args.run):
    fail("--run names the same folder twice.")
  labels = list(args.label) if args.label is not None else [r.name for r in args.run]
  if len(labels) != len(args.run):
    fail(f"--label takes one label per run: {len(labels)} for {len(args.run)} runs.")
  for tag in args.tags or ():
    if tag.endswith(SECONDS_SUFFIX):
      fail(
        f"--tags {tag}: stepped by seconds, not iterations; "
        f"plot {tag.removesuffix(SECONDS_SUFFIX)} (its _time.png is against time)."
      )
  check_at_least(1, smooth=args.smooth)
  if args.output.suffix != ".png":
    fail(f"--output must end in .png, got {args.output.name!r}.")
  for path in output_paths(args.output):
    check_new_file(path, "--output")
  return labels


def read_params(run: Path) -> tuple[int, int]:
  """num_envs (scene.num_envs) and num_steps_per_env from params/*.yaml."""
  import yaml

  # mjlab's dump_yaml writes Python tags (tuples, functions, dataclasses)
  # that safe_load refuses; read them as plain lists, dicts and strings,
  # never constructing Python objects.
  class ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    pass

  def plain(loader, _suffix, node):
    if isinstance(node, yaml.MappingNode):
      return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
      return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)

  ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", plain)
  values = []
  for name, keys in (("env", ("scene", "num_envs")), ("agent", ("num_steps_per_env",))):
    path = run / "params" / f"{name}.yaml"
    try:
      value = yaml.load(path.read_text(), Loader=ConfigLoader)
      for key in keys:
        value = value[key]
      values.append(int(value))
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as err:
      fail(f"--run {run}: no {'.'.join(keys)} in params/{name}.yaml ({err}).")
  return values[0], values[1]


def count_processes(points: dict[str, dict[int, tuple]], collection: int) -> int:
  """Processes that collected each iteration (GPUs under --gpu-ids).

  rsl_rl logs total_fps = int(steps of all processes / iteration time); over
  one process's ``collection`` (num_envs x num_steps_per_env), times the
  iteration's time, that is the process count. 1 without the Perf/* tags.
  """
  if not all(t in points for t in PERF_TAGS):
    return 1
  fps, collect, learn = (points[t] for t in PERF_TAGS)
  ratios = sorted(
    fps[i][1] * (collect[i][1] + learn[i][1]) / collection
    for i in fps
    if i in collect and i in learn
  )
  return max(1, round(ratios[len(ratios) // 2])) if ratios else 1


def read_run(path: Path, label: str, tags: tuple[str, ...] | None) -> Run:
  """The run's scalars of ``tags`` (None: the default choice) on both axes."""
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  num_envs, steps_per_env = read_params(path)
  files = []
  for event_file in path.glob("events.out.tfevents.*"):
    acc = EventAccumulator(str(event_file), size_guidance={"scalars": 0})
    acc.Reload()
    try:
      opened = acc.FirstEventTimestamp()
    except ValueError:  # An empty file: a process that logged nothing yet.
      continue
    files.append((opened, acc))
  files.sort(key=lambda f: f[0])
  # Per tag and iteration: (active seconds, value); a later file wins.
  points: dict[str, dict[int, tuple[float, float]]] = {}
  offset = 0.0
  for opened, acc in files:
    events = {
      tag: acc.Scalars(tag)
      for tag in acc.Tags()["scalars"]
      if not tag.endswith(SECONDS_SUFFIX)
    }
    steps = [e.step for tag_events in events.values() for e in tag_events]
    if not steps:
      continue
    resumed_at = min(steps)
    # A process resumed from an earlier checkpoint: the iterations it
    # repeats replace the earlier ones, dropped from there on (as
    # tensorboard purges orphaned data).
    for tag_points in points.values():
      for step in [s for s in tag_points if s >= resumed_at]:
        del tag_points[step]
    end = opened
    for tag, tag_events in events.items():
      for event in tag_events:
        end = max(end, event.wall_time)
        seconds = offset + event.wall_time - opened
        points.setdefault(tag, {})[event.step] = (seconds, event.value)
    offset += end - opened
  points = {tag: p for tag, p in points.items() if p}
  if not points:
    fail(f"--run {path}: its event files hold no scalars yet.")
  processes = count_processes(points, num_envs * steps_per_env)
  run = Run(path, label, num_envs, steps_per_env, processes)
  run.last_iteration = max(max(p) for p in points.values())
  run.minutes = offset / 60.0
  for tag in choose_tags(tuple(points)) if tags is None else tags:
    if tag in points:
      run.curves[tag] = [
        (it, run.env_steps(it), seconds / 60.0, value)
        for it, (seconds, value) in sorted(points[tag].items())
      ]
  return run


def read_json_runs(path: Path, tags: tuple[str, ...] | None) -> list[Run]:
  """The runs a JSON of this tool records (``write_json``), as recorded."""
  try:
    recorded = json.loads(path.read_text())["runs"]
    runs = []
    for entry in recorded:
      summary = entry["summary"]
      run = Run(
        Path(entry["run"]),
        entry["label"],
        summary["num_envs"],
        summary["num_steps_per_env"],
        summary["processes"],
      )
      run.last_iteration = summary["iterations"] - 1
      run.minutes = summary["minutes"]
      for tag, points in entry["curves"].items():
        if tags is None or tag in tags:
          run.curves[tag] = [(int(i), int(n), m, v) for i, n, m, v in points]
      runs.append(run)
  except (ValueError, KeyError, TypeError) as err:
    fail(f"--from-json {path}: not a JSON this tool wrote ({err!r}).")
  return runs


def choose_tags(present: tuple[str, ...]) -> list[str]:
  """The default tags a run has; its other Episode_Metrics/* tags after them
  when it lacks some default stage metric (not the cube-in-tray task's
  current metrics), so that no task's own metrics are dropped."""
  chosen = [t for t in DEFAULT_TAGS if t in present]
  stages = [t for t in DEFAULT_TAGS if t.startswith(METRICS_PREFIX)]
  if not all(t in present for t in stages):
    chosen += sorted(
      t for t in present if t.startswith(METRICS_PREFIX) and t not in chosen
    )
  return chosen


def plot_order(runs: list[Run]) -> list[str]:
  """Every plotted tag once, in the first run's order, then the others'."""
  order: list[str] = []
  for run in runs:
    order += [t for t in run.curves if t not in order]
  return order


def moving_mean(values: list[float], window: int) -> list[float]:
  """Mean of each value and the up to ``window - 1`` before it."""
  out, total = [], 0.0
  for i, value in enumerate(values):
    total += value
    if i >= window:
      total -= values[i - window]
    out.append(total / min(i + 1, window))
  return out


def summarise(run: Run, window: int) -> dict:
  """Iterations, environment steps, minutes; per tag first, last, best."""
  tags = {}
  for tag, points in run.curves.items():
    values = [p[3] for p in points]
    smooth = moving_mean(values, window)
    pick = min if any(w in tag.lower() for w in LOWER_IS_BETTER) else max
    best = pick(range(len(smooth)), key=smooth.__getitem__)
    tags[tag] = {
      "first": values[0],
      "last": smooth[-1],
      "best": smooth[best],
      "best_iteration": points[best][0],
    }
  return {
    "iterations": run.last_iteration + 1,
    "env_steps": run.env_steps(run.last_iteration),
    "minutes": run.minutes,
    "num_envs": run.num_envs,
    "num_steps_per_env": run.steps_per_env,
    "processes": run.processes,
    "tags": tags,
  }


def plot(runs: list[Run], tags: list[str], axis: str, window: int, path: Path) -> None:
  """One subplot per tag, one colour per run, against ``axis``: "steps" or
  "minutes"."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from matplotlib.lines import Line2D
  from matplotlib.ticker import EngFormatter

  column = 1 if axis == "steps" else 2
  cols = min(3, len(tags))
  rows = math.ceil(len(tags) / cols)
  width = 5.0 * cols
  # Header: the wrapped title, the axis line, the legend's rows (inches).
  heading = textwrap.wrap(title(runs), width=int(width * 11))
  legend_cols = min(len(runs), 4)
  header = 0.2 + 0.22 * (len(heading) + 1) + 0.3 * math.ceil(len(runs) / legend_cols)
  height = 3.4 * rows + header
  fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
  colours = plt.get_cmap("tab10").colors
  for ax, tag in zip(axes.flat, tags, strict=False):
    missing = []
    for i, run in enumerate(runs):
      points = run.curves.get(tag)
      if not points:
        missing.append(run.label)
        continue
      xs = [p[column] for p in points]
      values = [p[3] for p in points]
      colour = colours[i % len(colours)]
      if window > 1:
        ax.plot(xs, values, color=colour, lw=0.7, alpha=0.25)
      ax.plot(xs, moving_mean(values, window), color=colour, lw=1.8, label=run.label)
    if missing:
      ax.text(
        0.99, 0.02, "not logged: " + ", ".join(missing), transform=ax.transAxes,
        ha="right", va="bottom", fontsize=7, color="grey",
      )  # fmt: skip
    ax.set_title(TITLES.get(tag, tag), fontsize=10)
    ax.set_xlabel("environment steps" if axis == "steps" else "wall-clock minutes")
    if axis == "steps":
      ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[len(tags) :]:
    ax.axis("off")
  # Before the title and legend: tight_layout would make room for them twice.
  fig.tight_layout(rect=(0, 0, 1, 1 - header / height))
  against = "environment steps" if axis == "steps" else "wall-clock minutes"
  smoothing = (
    f"solid: mean of the last {window} iterations, faint: each iteration"
    if window > 1
    else "each iteration"
  )
  heading.append(f"against {against}; {smoothing}")
  fig.suptitle("\n".join(heading), fontsize=11, x=0.01, y=1 - 0.1 / height, ha="left")
  handles = [
    Line2D([], [], color=colours[i % len(colours)], lw=1.8) for i in range(len(runs))
  ]
  fig.legend(
    handles,
    [r.label for r in runs],
    loc="upper left",
    bbox_to_anchor=(0.01, 1 - (0.15 + 0.22 * len(heading)) / height),
    fontsize=9,
    ncol=legend_cols,
    frameon=False,
  )
  fig.savefig(path, dpi=90)
  plt.close(fig)


def title(runs: list[Run]) -> str:
  """The runs' labels, after their experiment folder (the task) when shared."""
  experiments = {r.path.resolve().parent.name for r in runs}
  names = " vs ".join(r.label for r in runs)
  return f"{experiments.pop()}: {names}" if len(experiments) == 1 else names


def report(runs: list[Run], summaries: list[dict], window: int) -> None:
  """The summary per run on stdout."""
  for run, s in zip(runs, summaries, strict=True):
    print(
      f"{run.label} ({run.path}): {s['iterations']} iterations, "
      f"{s['env_steps']:,} environment steps ({run.num_envs} envs x "
      f"{run.steps_per_env} steps"
      + (f" x {run.processes} processes" if run.processes > 1 else "")
      + f" per iteration), {s['minutes']:.1f} wall-clock minutes"
    )
    print(
      f"  {'tag':38s} {'first':>10s} {f'last {window}':>10s} {'best':>10s}  at iteration"
    )
    for tag, t in s["tags"].items():
      print(
        f"  {tag:38s} {t['first']:10.4f} {t['last']:10.4f} {t['best']:10.4f}"
        f"  {t['best_iteration']}"
      )


def write_json(runs: list[Run], summaries: list[dict], args: Args, path: Path) -> None:
  runs_json = [
    {
      "run": str(run.path),
      "label": run.label,
      "curves": {
        tag: [
          [int(i), int(n), _significant(m), _significant(v)] for i, n, m, v in points
        ]
        for tag, points in run.curves.items()
      },
      "summary": summary,
    }
    for run, summary in zip(runs, summaries, strict=True)
  ]
  path.write_text(
    json.dumps(
      {
        "points": ["iteration", "env_steps", "minutes", "value"],
        "smooth": args.smooth,
        "runs": runs_json,
      },
      separators=(",", ":"),
    )
  )


def _significant(value: float) -> float:
  """Five significant digits: the curves' JSON stays small (3 MB, not 9)."""
  return float(f"{value:.5g}")


def main(args: Args) -> int:
  labels = check_args(args)
  runs = [read_run(p, lab, args.tags) for p, lab in zip(args.run, labels, strict=True)]
  runs += [run for path in args.from_json for run in read_json_runs(path, args.tags)]
  tags = plot_order(runs)
  if not tags:
    fail(f"none of the tags {list(args.tags or DEFAULT_TAGS)} is in the runs.")
  steps_png, time_png, json_path = output_paths(args.output)
  steps_png.parent.mkdir(parents=True, exist_ok=True)
  plot(runs, tags, "steps", args.smooth, steps_png)
  plot(runs, tags, "minutes", args.smooth, time_png)
  summaries = [summarise(run, args.smooth) for run in runs]
  write_json(runs, summaries, args, json_path)
  report(runs, summaries, args.smooth)
  if args.tags is not None:
    absent = [t for t in args.tags if t not in tags]
    if absent:
      print(f"not in any run (skipped): {', '.join(absent)}")
  print(f"wrote {steps_png}, {time_png}, {json_path}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
