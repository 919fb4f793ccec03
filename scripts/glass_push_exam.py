"""Run a glass-pushing solution on a range of tables and score it.

The tables are environments of the GlassPush-UR5-RG2 task, in examiner
worker processes: with ``--engine mujoco`` (default; C MuJoCo, 2 ms steps,
deterministic) the tables are shared among ``--jobs`` workers; with
``--engine warp`` every table is one world of one MuJoCo Warp batch (the GPU
when there is one). The solution runs per table in a thread and each round
of pushes is stepped together (on C MuJoCo only the acting tables step, so a
table's run does not depend on the others). Writes, into a new folder:

- ``scores.json`` and ``scores.md``: the marks per table and in total, with a
  source snapshot (commit, dirty flag, SHA-256 of every source file);
- ``tables/<table>.json``: every action's request and report, takes (with the
  true room), refusals, final true glass states;
- ``demos/<table>.npz``: every action's real hand path at 50 Hz (time, x, y,
  z, heading, force), so pushes become demonstrations for ``follow()``;
- ``films/<table>.mp4`` with ``--film`` (drawn from a world never simulated).

``--solution oracle`` is NOT a valid solution: the runner tells it the true
poses and friction (``Exam(..., oracle=True)``) to measure the geometric
planner's limit; its scores are labelled so.

  python scripts/glass_push_exam.py --solution geometric --tables 10000-10009 \\
    --output reports/glass_geometric
"""

from __future__ import annotations

import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from cli_args import check_at_least, check_new_folder, create_folder, fail, parse

from mjlab_tasks.engine import traits


@dataclass
class Args:
  solution: Literal["nudge", "geometric", "oracle"]
  """Solution to examine: nudge (blind baseline), geometric (friction from
  forces, tipping limit) or oracle (NOT a valid solution: geometric's planner
  told the true poses and friction by the runner, to measure its limit)."""
  tables: str
  """Table numbers, A-B inclusive (or one number). Evaluation tables are
  10000-19999, training tables 0-9999."""
  output: Path
  """Folder for the scores, records, demonstrations and films; must not exist."""
  pushes: int = 15
  """Push budget per table (each push() or follow() uses one)."""
  film: bool = False
  """Also render an mp4 per table from a second world that is never simulated
  (the scored world is the same either way). Needs offscreen OpenGL (OSMesa
  or EGL)."""
  jobs: int = 2
  """Examiner worker processes the tables are shared among (each steps its
  tables' pushes in parallel threads); --engine mujoco only."""
  engine: Literal["mujoco", "warp"] = "mujoco"
  """Physics: mujoco (C MuJoCo on the CPU, deterministic, the measured
  scores) or warp (every table in one MuJoCo Warp batch, on Warp's default
  device: the GPU when there is one, else the CPU, where it is slow)."""


def parse_tables(text: str) -> list[int]:
  """``"A-B"`` (inclusive) or ``"A"`` to a list of table numbers."""
  from mjlab_tasks.glass_push.rules.tables import EVALUATION_TABLES, TRAINING_TABLES

  match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
  if match is None:
    fail(f"--tables must be A-B or A (table numbers), got {text!r}.")
  a = int(match.group(1))
  b = a if match.group(2) is None else int(match.group(2))
  if b < a:
    fail(f"--tables {text}: the range is empty (B < A).")
  for t in (a, b):
    if t not in TRAINING_TABLES and t not in EVALUATION_TABLES:
      fail(
        f"--tables {text}: table {t} is outside the training (0-9999) and "
        "evaluation (10000-19999) ranges."
      )
  return list(range(a, b + 1))


def _jsonable(value):
  if isinstance(value, dict):
    return {str(k): _jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return value.tolist()
  if isinstance(value, np.generic):
    return value.item()
  return value


def is_oracle(args: Args) -> bool:
  return args.solution == "oracle"


def label(args: Args) -> str:
  """The solution's name in the scores; the oracle's says it is not valid."""
  from experts.glass_push import oracle

  return oracle.LABEL if is_oracle(args) else args.solution


def solution_for(exam, args: Args):
  """``solve(examiner)``; the oracle's is told the truth by this ``exam``."""
  from experts.glass_push import SOLUTIONS, oracle

  if is_oracle(args):
    return oracle.solver(exam.oracle_truth)
  return SOLUTIONS[args.solution]


def run_batch(tables: list[int], args: Args, out: Path, bar) -> list[dict]:
  """Examine ``tables`` in one examiner worker (one GlassPush environment):
  the solution runs per table in a thread, each round of their pushes,
  follows and takes goes as one request batch (on C MuJoCo only the acting
  tables step, in parallel; a table's run does not depend on its batch).
  Writes their outputs; ``bar`` counts rounds."""
  from mjlab_tasks.glass_push import Exam

  start = time.perf_counter()
  with Exam(
    tables,
    pushes=args.pushes,
    film=args.film,
    engine=args.engine,
    oracle=is_oracle(args),
  ) as exam:
    errors = exam.run_together(
      solution_for(exam, args), on_round=lambda n: bar.update(1)
    )
    records = exam.records()
    if args.film:
      exam.write_films([out / "films" / f"{t}.mp4" for t in tables])
  wall = (time.perf_counter() - start) / len(tables)
  return [write_table(r, e, out, wall) for r, e in zip(records, errors, strict=True)]


def write_table(record: dict, error: str | None, out: Path, wall_s: float) -> dict:
  """Write one table's record and demonstrations; returns its score row."""
  from mjlab_tasks.glass_push.rules.scoring import score_record

  table = record["table"]
  paths = {f"action_{k:03d}": a.pop("path") for k, a in enumerate(record["actions"])}
  np.savez_compressed(
    out / "demos" / f"{table}.npz",
    columns=np.array(["t", "x", "y", "z", "heading", "force"]),
    **paths,
  )
  record.pop("friction")  # the hidden coefficients are not written out
  record["solution_error"] = error
  (out / "tables" / f"{table}.json").write_text(json.dumps(_jsonable(record), indent=1))
  row = score_record(record)
  row["solution_error"] = error
  row["wall_s"] = wall_s
  return row


def check_args(args: Args) -> list[int]:
  """Every flag checked before anything is built: the table numbers."""
  tables = parse_tables(args.tables)
  check_at_least(1, pushes=args.pushes, jobs=args.jobs)
  check_new_folder(args.output)
  return tables


def main(args: Args) -> int:
  tables = check_args(args)
  out = create_folder(args.output)

  from tqdm import tqdm

  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.glass_push.rules.scoring import markdown, summarize

  for sub in ("tables", "demos") + (("films",) if args.film else ()):
    (out / sub).mkdir()
  if is_oracle(args):
    print(f"{label(args)}: the runner hands it the true poses and friction.")
  # MuJoCo Warp: one batch of every table; C MuJoCo: --jobs worker processes.
  n = 1 if traits(args.engine).one_process else min(args.jobs, len(tables))
  shares = [tables[k::n] for k in range(n)]
  rows = []
  with (
    tqdm(desc=f"{args.solution} rounds", unit="round") as bar,
    ThreadPoolExecutor(max_workers=n) as pool,
  ):
    for share_rows in pool.map(lambda share: run_batch(share, args, out, bar), shares):
      rows.extend(share_rows)
  rows.sort(key=lambda r: r["table"])
  for r in rows:
    r["solution"] = label(args)
  total = summarize(rows)
  report = {
    "solution": args.solution,
    "label": label(args),
    "valid_solution": not is_oracle(args),
    "tables": args.tables,
    "pushes": args.pushes,
    "film": args.film,
    "engine": args.engine,
    "rows": rows,
    "total": total,
    "source": source_snapshot(),
  }
  (out / "scores.json").write_text(json.dumps(_jsonable(report), indent=1))
  md = markdown(label(args), rows, total)
  (out / "scores.md").write_text(md)
  print(md)
  errors = [r for r in rows if r["solution_error"]]
  for r in errors:
    print(f"table {r['table']}: the solution raised {r['solution_error']}")
  print(
    f"{label(args)}: {total['room_at_start']}/{total['glasses']} glasses had room "
    f"at the start; {total['taken_with_room']}/{total['glasses']} taken "
    f"with room, {total['toppled']} toppled, {total['knocked_off']} knocked off, "
    f"{total['pushes_used']} pushes; report in {out}"
  )
  return 1 if errors else 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
