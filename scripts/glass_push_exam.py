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
planner's limit; its scores are labelled so. Nor is ``--solution limit``:
the limit of the tables, a search on the scoring side that tries candidate
pushes on copies of each table's true world and replays the best on the
scored world (``examiner/limit.py``; C engine, one table at a time, its
copies stepped in the engine's threads).

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
  solution: Literal["nudge", "geometric", "shove", "imitation", "oracle", "limit"]
  """Solution to examine: nudge (blind baseline), geometric (friction from
  forces, tipping limit), shove (short shoves that carry only
  glasses met low enough for their foot, re-planned after every look),
  imitation (a network that reads the top view and gives action chunks,
  trained on shove's recorded hand paths on training tables 0-63:
  policies/glass_imitation), oracle (NOT a valid solution: geometric's planner
  told the true poses and friction by the runner, to measure its limit) or
  limit (NOT a valid solution: a search that tries candidate pushes on
  copies of the true world, the reference every solution is measured
  against; C engine only, slow: about 30 s per table on 2 cores)."""
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
  tables' pushes in parallel threads); --engine mujoco only, not the limit
  (its copies already step in parallel threads)."""
  judge_refusals: bool = True
  """After the run, judge every refusal against the truth: the run replayed
  on a C world to the refusal, the refused glass tried with candidate
  pushes (16 headings, 15/30/50 mm) on copies; a refusal is wrong when the
  glass had room or a push gave it room with nothing lost. Costs about
  5 to 10 s per refused glass on 2 cores. C engine runs only (skipped, with a
  note, for --engine warp)."""
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


def is_valid(args: Args) -> bool:
  """The oracle and the limit are told the truth: not valid solutions."""
  return args.solution not in ("oracle", "limit")


def label(args: Args) -> str:
  """The solution's name in the scores; the oracle's and the limit's say
  they are not valid."""
  from experts.glass_push import oracle
  from mjlab_tasks.glass_push.examiner import limit

  if is_oracle(args):
    return oracle.LABEL
  if args.solution == "limit":
    return limit.LABEL
  return args.solution


def solution_for(exam, args: Args):
  """``solve(examiner)``; the oracle's is told the truth by this ``exam``."""
  from experts.glass_push import SOLUTIONS, oracle

  if is_oracle(args):
    return oracle.solver(exam.oracle_truth)
  return SOLUTIONS[args.solution]


def run_batch(tables: list[int], args: Args, out: Path, bar) -> list[tuple]:
  """Examine ``tables`` in one examiner worker (one GlassPush environment):
  the solution runs per table in a thread, each round of their pushes,
  follows and takes goes as one request batch (on C MuJoCo only the acting
  tables step, in parallel; a table's run does not depend on its batch).
  Writes their films; returns (record, error, wall time per table) per
  table; ``bar`` counts rounds."""
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
  return [(r, e, wall) for r, e in zip(records, errors, strict=True)]


def judge_refusals(results: list[tuple]) -> None:
  """Every refusal judged against the truth (``examiner/judge.py``): each
  table with refusals replayed on a C world, its refused glasses tried with
  candidate pushes on copies; the verdicts go into the records."""
  from tqdm import tqdm

  from mjlab_tasks.glass_push.examiner import judge

  for record, _, _ in results:  # judged: no refusal is 0 right, 0 wrong
    record["refusal_verdicts"] = {}
  todo = [record for record, _, _ in results if record["refused"]]
  if not todo:
    return
  refusals = sum(len(r["refused"]) for r in todo)
  print(f"judging {refusals} refusals on {len(todo)} tables (trial pushes on copies)")
  with tqdm(desc="judging refusals: trial pushes", unit="push") as bar:
    for record in todo:
      judged = judge.judge_record(record, on_trial=bar.update)
      record["refusal_verdicts"] = judged["verdicts"]
      record["refusal_replay_difference_m"] = judged["replay_difference_m"]


def run_limit(tables: list[int], args: Args, out: Path, bar) -> list[dict]:
  """The limit on ``tables``, one at a time (``examiner/limit.py``): each a
  scored world and its copies in this process; ``bar`` counts trial pushes."""
  from mjlab_tasks.glass_push.examiner import limit

  rows = []
  for table in tables:
    start = time.perf_counter()
    record = limit.search_table(table, args.pushes, on_trial=bar.update)
    rows.append(write_table(record, None, time.perf_counter() - start, out))
  return rows


def write_table(record: dict, error: str | None, wall_s: float, out: Path) -> dict:
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


def run_tables(tables: list[int], args: Args, out: Path) -> list[dict]:
  """Every table's score row, in table order. MuJoCo Warp: one batch of
  every table; C MuJoCo: --jobs worker processes; the limit: in turn."""
  from tqdm import tqdm

  if args.solution == "limit":
    with tqdm(desc="limit: trial pushes", unit="push") as bar:
      return run_limit(tables, args, out, bar)
  n = 1 if traits(args.engine).one_process else min(args.jobs, len(tables))
  shares = [tables[k::n] for k in range(n)]
  results = []
  with (
    tqdm(desc=f"{args.solution} rounds", unit="round") as bar,
    ThreadPoolExecutor(max_workers=n) as pool,
  ):
    for share in pool.map(lambda share: run_batch(share, args, out, bar), shares):
      results.extend(share)
  # The judge replays a run exactly: only on an engine with exact states.
  if args.judge_refusals and traits(args.engine).exact_states:
    judge_refusals(results)
  elif args.judge_refusals and any(r["refused"] for r, _, _ in results):
    print("refusals not judged: the judge replays runs on --engine mujoco only")
  rows = [write_table(*result, out) for result in results]
  return sorted(rows, key=lambda r: r["table"])


def check_args(args: Args) -> list[int]:
  """Every flag checked before anything is built: the table numbers."""
  tables = parse_tables(args.tables)
  check_at_least(1, pushes=args.pushes, jobs=args.jobs)
  if args.solution == "limit" and (not traits(args.engine).exact_states or args.film):
    fail("--solution limit runs on --engine mujoco without --film.")
  check_new_folder(args.output)
  return tables


def main(args: Args) -> int:
  tables = check_args(args)
  out = create_folder(args.output)

  from mjlab_tasks.common.runtime import source_snapshot
  from mjlab_tasks.glass_push.rules.scoring import markdown, summarize

  for sub in ("tables", "demos") + (("films",) if args.film else ()):
    (out / sub).mkdir()
  if is_oracle(args):
    print(f"{label(args)}: the runner hands it the true poses and friction.")
  if args.solution == "limit":
    print(f"{label(args)}: it tries pushes on copies of the true world.")
  rows = run_tables(tables, args, out)
  for r in rows:
    r["solution"] = label(args)
  total = summarize(rows)
  report = {
    "solution": args.solution,
    "label": label(args),
    "valid_solution": is_valid(args),
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
