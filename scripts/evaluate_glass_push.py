"""Score a trained GlassPush-UR5-RG2 policy on glass tables with the task's
own verdicts, comparable with the examiner solutions' scores.

One environment per table (``--tables``, default the evaluation tables
10000-10049), the task's play configuration (the hand above the zone, 60 s
episodes: ``--max-steps 1200`` at 20 Hz), one episode each. An episode ends
as the task ends it: a glass toppled or knocked off, every glass takeable
(the table cleared), or the step limit. At its end each table is scored
with the task's batched verdicts (``mjlab_tasks.glass_push.mdp``): glasses
takeable (they and then the others could be taken with room one after
another, without another push: the examiner's room rule), at the start and
at the end, toppled, knocked off. With ``--compare`` (a ``scores.json`` of
``scripts/glass_push_exam.py`` on the same tables, e.g. ``nudge``) every
table and the totals stand beside that solution's marks.

  python scripts/evaluate_glass_push.py \\
    --policy logs/rsl_rl/glass_push_ur5_rg2/RUN/model_500.pt \\
    --compare reports/glass_nudge/scores.json --output reports/glass_policy

Writes into ``--output`` (refused if it exists): ``report.json`` (config,
per-table rows, totals, the comparison, source snapshot) and ``scores.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_file,
  check_new_folder,
  check_policy,
  create_folder,
  fail,
  parse,
)
from glass_push_exam import parse_tables
from tqdm import tqdm

from mjlab_tasks.glass_push.evaluation import (
  COMPARED,
  attach_comparison,
  run,
  totals,
)

TASK = "GlassPush-UR5-RG2"
PLAY_STEPS = 1200  # The play configuration's 60 s at 20 Hz.
"""Each comparison row's marks (``score_record`` of
``mjlab_tasks.glass_push.rules.scoring``)."""


@dataclass
class Args:
  policy: Path
  """The trained GlassPush-UR5-RG2 policy: an rsl_rl checkpoint (model_N.pt
  from scripts/train.py) or its ONNX export (.onnx, from scripts/play.py
  --export-onnx; needs the onnx extra). It acts with the task's Cartesian
  actions on its observations (noisy glass readings, wrist force, tool pose),
  its mean action, no exploration noise."""
  tables: str = "10000-10049"
  """Table numbers, A-B inclusive (or one number), one environment each.
  Evaluation tables are 10000-19999, training tables 0-9999 (the registered
  training configuration trains on 0-63)."""
  max_steps: int = PLAY_STEPS
  """Policy steps (20 Hz) per episode; an episode still running then ends by
  time-out. Default: the play configuration's 60 s."""
  compare: Path | None = None
  """A scores.json of scripts/glass_push_exam.py (e.g. --solution nudge) to
  show beside the policy's marks, table by table and in total (over the
  tables both have)."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu)."""
  engine: str | None = None
  """warp (MuJoCo Warp) or mujoco (C MuJoCo, CPU, deterministic). Default:
  warp on CUDA, mujoco on CPU."""
  output: Path | None = None
  """Report folder; must not exist (default: reports/glass_policy/<time>)."""


def load_compare(path: Path, tables: list[int]) -> dict:
  """The marks of a glass_push_exam.py scores.json: its label and one row
  per table ({table: {mark: value}}), refused in one line unless it is one
  and shares a table with ``tables``."""
  check_file(path, "--compare")
  try:
    scores = json.loads(path.read_text())
    rows = {int(r["table"]): {k: int(r[k]) for k in COMPARED} for r in scores["rows"]}
    label = str(scores.get("label") or scores["solution"])
  except (ValueError, KeyError, TypeError) as err:
    fail(
      f"--compare {path}: not a scores.json of scripts/glass_push_exam.py "
      f"({type(err).__name__}: {err})."
    )
  shared = [t for t in tables if t in rows]
  if not shared:
    fail(f"--compare {path} scores none of the tables {tables[0]}-{tables[-1]}.")
  return {"file": str(path), "label": label, "rows": rows}


def check_args(args: Args) -> tuple[list[int], str, str, Path, dict | None]:
  """Every flag checked before anything is built: (tables, device, engine,
  output, comparison)."""
  tables = parse_tables(args.tables)
  check_at_least(1, max_steps=args.max_steps)
  check_policy(args.policy)
  device = check_device(args.device)
  engine = check_engine(args.engine, device)
  output = args.output or Path("reports/glass_policy") / datetime.now().strftime(
    "run-%Y%m%d-%H%M%S"
  )
  check_new_folder(output)
  compare = None if args.compare is None else load_compare(args.compare, tables)
  return tables, device, engine, output, compare


def build_env(tables: list[int], max_steps: int, device: str, engine: str):
  """The play configuration on ``tables``, one environment each, no
  automatic reset: an ended episode keeps its final state to be scored.
  The task's time-out lies past ``max_steps``; the run ends the episodes
  still going at ``max_steps``."""
  from mjlab_tasks.engine import make_env
  from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

  cfg = glass_push_env_cfg(play=True, tables=tables, num_envs=len(tables))
  cfg.episode_length_s = (max_steps + 10) * cfg.decimation * cfg.sim.mujoco.timestep
  cfg.auto_reset = False
  with contextlib.redirect_stdout(io.StringIO()):  # mjlab's manager tables
    return make_env(cfg, device=device, engine=engine)


def make_policy(env, policy: Path, device: str):
  """The trained policy acting in ``env`` (its loading resets the env)."""
  from mjlab_tasks.policies import load_policy

  try:
    return load_policy(env, TASK, policy, device)
  except ValueError as err:
    fail(str(err).splitlines()[0])


HEAD = (
  "table",
  "glasses",
  "takeable at start",
  "takeable at end",
  "toppled",
  "knocked off",
  "ended by",
  "end [s]",
)


def markdown(rows: list[dict], total: dict, description: str) -> str:
  """A Markdown table: one row per table and the totals, the comparison's
  columns when there is one."""
  comparison = total.get("comparison")
  head = list(HEAD)
  if comparison is not None:
    label = comparison["label"]
    head += [f"{label}: taken with room", f"{label}: toppled", f"{label}: knocked off"]
  lines = [f"## {description}", "", "| " + " | ".join(head) + " |"]
  lines.append("|" + " --- |" * len(head))

  def theirs(marks: dict | None) -> list[str]:
    if comparison is None:
      return []
    if marks is None:
      return ["-", "-", "-"]
    return [str(marks[k]) for k in ("taken_with_room", "toppled", "knocked_off")]

  for r in rows:
    cells = [
      r["table"],
      r["glasses"],
      r["takeable_at_start"],
      r["takeable_at_end"],
      r["toppled"],
      r["knocked_off"],
      r["ended_by"],
      f"{r['end_time_s']:.2f}",
    ]
    cells = [str(c) for c in cells] + theirs(r.get("compare"))
    lines.append("| " + " | ".join(cells) + " |")
  t = total
  cells = [
    f"**all {t['tables']}**",
    str(t["glasses"]),
    str(t["takeable_at_start"]),
    f"{t['takeable_at_end']} ({t['takeable_at_end_rate']:.1%})",
    str(t["toppled"]),
    str(t["knocked_off"]),
    ", ".join(f"{k} {v}" for k, v in sorted(t["ended_by"].items())),
    "",
  ]
  if comparison is not None:
    s = comparison["solution"]
    cells += [str(s["taken_with_room"]), str(s["toppled"]), str(s["knocked_off"])]
  lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def verdict_line(total: dict) -> str:
  """The totals in one sentence, against the comparison when there is one."""
  line = (
    f"policy: {total['takeable_at_end']}/{total['glasses']} glasses takeable at "
    f"the end ({total['takeable_at_start']} at the start), {total['toppled']} "
    f"toppled, {total['knocked_off']} knocked off, {total['cleared']}/"
    f"{total['tables']} tables cleared."
  )
  comparison = total.get("comparison")
  if comparison is None:
    return line
  p, s = comparison["policy"], comparison["solution"]
  aim = comparison["more_than_solution"] and comparison["none_lost"]
  return (
    f"{line}\nOn the {comparison['tables']} tables both scored: policy "
    f"{p['takeable_at_end']} takeable at the end, {p['toppled']} toppled, "
    f"{p['knocked_off']} knocked off; {comparison['label']} took "
    f"{s['taken_with_room']} with room, {s['toppled']} toppled, "
    f"{s['knocked_off']} knocked off. More takeable than "
    f"{comparison['label']} took, none lost: {'yes' if aim else 'no'}."
  )


def main(args: Args) -> int:
  tables, device, engine, output, compare = check_args(args)
  out_dir = create_folder(output)

  from mjlab_tasks.common.runtime import quiet_warp, source_snapshot

  quiet_warp()
  start = time.perf_counter()
  env = build_env(tables, args.max_steps, device, engine)
  controller = make_policy(env, args.policy, device)
  with tqdm(total=args.max_steps, desc="glass_push steps", unit="step") as bar:

    def progress(scored: int) -> None:
      bar.update(1)
      bar.set_postfix(ended=f"{scored}/{env.num_envs}", refresh=False)

    rows = run(env, controller, tuple(tables), args.max_steps, progress)
  wall = time.perf_counter() - start
  attach_comparison(rows, compare)
  total = totals(rows, compare)
  report = {
    "task": TASK,
    "controller": controller.description,
    "config": {
      **{k: str(v) for k, v in asdict(args).items()},
      "tables": [tables[0], tables[-1]],
      "output": str(out_dir),
      "device": device,
      "engine": engine,
      "episode_s": round(args.max_steps * env.step_dt, 2),
    },
    "rows": rows,
    "total": total,
    "wall_time_s": round(wall, 2),
    "source": source_snapshot(),
  }
  (out_dir / "report.json").write_text(json.dumps(report, indent=1))
  md = markdown(rows, total, controller.description)
  (out_dir / "scores.md").write_text(md)
  print(md)
  print(verdict_line(total))
  print(f"wrote {out_dir} ({wall:.0f} s on {device}, {engine} engine)")
  controller.close()
  env.close()
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
