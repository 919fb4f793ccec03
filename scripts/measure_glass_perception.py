"""Measure the top-view perception (experts/glass_push/perception.py) against
the truth on training tables.

For each table a ``TrainingExaminer`` draws the top view (offscreen OpenGL:
OSMesa or EGL, chosen by the examiner) and hands out the true glasses; the
perception's readings are matched to the truth (each found glass to the
nearest true centre, one to one, within --match-radius), and the errors of
x, y, widest (and the kind) are summarized: bias, standard deviation, RMS,
95th percentile of |error|, max |error|, plus missed and spurious glasses.
Height and foot are not estimated by the perception, so not measured.
Writes ``perception.json`` and ``perception.md`` into a new folder.

  python scripts/measure_glass_perception.py --tables 0-63 \\
    --output reports/glass_perception
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cli_args import check_new_folder, create_folder, fail, parse
from glass_push_exam import parse_tables

# The examiner's assumed reading noise (mjlab_tasks/glass_push/hidden.py),
# restated for the report's comparison [m].
ASSUMED = {"x": 0.001, "y": 0.001, "widest": 0.003, "height": 0.002, "foot": 0.003}
QUANTITIES = ("x", "y", "widest")


@dataclass
class Args:
  output: Path
  """Folder for perception.json and perception.md; must not exist."""
  tables: str = "0-63"
  """Training table numbers, A-B inclusive (or one number), within 0-9999:
  the truth is served for training tables only."""
  match_radius: float = 0.03
  """A found glass is matched to the nearest true glass centre within this
  distance [m]; found glasses left unmatched are spurious, true glasses left
  unmatched are missed."""


def training_tables(text: str) -> list[int]:
  """The exam's ``--tables`` syntax, training tables only."""
  tables = parse_tables(text)
  if tables[-1] > 9999:
    fail(
      f"--tables {text}: training tables are 0-9999 (the truth is served there only)."
    )
  return tables


def check_args(args: Args) -> list[int]:
  """Every flag checked before anything is built."""
  tables = training_tables(args.tables)
  if not math.isfinite(args.match_radius) or args.match_radius <= 0:
    fail(
      f"--match-radius must be a positive number of metres, got {args.match_radius}."
    )
  check_new_folder(args.output)
  return tables


def match(found: list[dict], true: list[dict], radius: float):
  """Greedy one-to-one matching by distance: [(found index, true index)],
  unmatched found indices, unmatched true indices."""
  pairs = sorted(
    (math.hypot(f["x"] - g["x"], f["y"] - g["y"]), i, j)
    for i, f in enumerate(found)
    for j, g in enumerate(true)
  )
  used_f, used_t, matched = set(), set(), []
  for d, i, j in pairs:
    if d > radius:
      break
    if i in used_f or j in used_t:
      continue
    used_f.add(i)
    used_t.add(j)
    matched.append((i, j))
  spurious = [i for i in range(len(found)) if i not in used_f]
  missed = [j for j in range(len(true)) if j not in used_t]
  return matched, spurious, missed


def stats(errors: list[float]) -> dict:
  e = np.asarray(errors, dtype=float)
  if e.size == 0:
    return {"n": 0}
  return {
    "n": int(e.size),
    "bias": float(e.mean()),
    "std": float(e.std(ddof=1)) if e.size > 1 else 0.0,
    "rms": float(np.sqrt(np.mean(e**2))),
    "p95_abs": float(np.percentile(np.abs(e), 95)),
    "max_abs": float(np.abs(e).max()),
  }


def measure_table(table: int, radius: float) -> dict:
  from experts.glass_push.perception import readings_from_top_view
  from mjlab_tasks.glass_push import TrainingExaminer

  with TrainingExaminer(table) as examiner:
    picture = examiner.top_view()
    truth = examiner.truth()
  states = {s["id"]: s for s in truth["states"]}
  true = []
  for g in truth["glasses"]:
    s = states.get(g["id"], {})
    true.append({**g, "x": s.get("x", g["x"]), "y": s.get("y", g["y"])})
  t0 = time.perf_counter()
  found = readings_from_top_view(picture)
  seconds = time.perf_counter() - t0
  matched, spurious, missed = match(found, true, radius)
  rows = []
  for i, j in matched:
    f, g = found[i], true[j]
    rows.append(
      {
        "table": table,
        "glass": g["id"],
        "kind": g["kind"],
        "kind_found": f.get("kind"),
        "off_axis": math.hypot(g["x"] - 0.45, g["y"] + 0.27),
        "height": g["height"],
        **{f"{q}_error": f[q] - g[q] for q in QUANTITIES},
      }
    )
  return {
    "table": table,
    "glasses": len(true),
    "found": len(found),
    "missed": [true[j]["id"] for j in missed],
    "spurious": [{k: found[i][k] for k in ("x", "y", "widest")} for i in spurious],
    "perception_seconds": seconds,
    "matches": rows,
  }


def summarize(results: list[dict]) -> dict:
  rows = [r for t in results for r in t["matches"]]
  summary = {
    "tables": len(results),
    "glasses": sum(t["glasses"] for t in results),
    "found": sum(t["found"] for t in results),
    "matched": len(rows),
    "missed": sum(len(t["missed"]) for t in results),
    "spurious": sum(len(t["spurious"]) for t in results),
    "kind_wrong": sum(r["kind"] != r["kind_found"] for r in rows),
    "errors": {},
  }
  for q in QUANTITIES:
    summary["errors"][q] = {
      "all": stats([r[f"{q}_error"] for r in rows]),
      "tumbler": stats([r[f"{q}_error"] for r in rows if r["kind"] == "tumbler"]),
      "stemmed": stats([r[f"{q}_error"] for r in rows if r["kind"] == "stemmed"]),
    }
  radial = [(r["off_axis"], math.hypot(r["x_error"], r["y_error"])) for r in rows]
  bands = ((0.0, 0.05), (0.05, 0.10), (0.10, 0.15), (0.15, 0.30))
  summary["position_error_by_off_axis"] = [
    {"from": a, "to": b, **stats([e for d, e in radial if a <= d < b])}
    for a, b in bands
  ]
  return summary


def _mm(v: float | None) -> str:
  return "-" if v is None else f"{1000 * v:.2f}"


def markdown(summary: dict, args: Args, seconds: float) -> str:
  lines = [
    "# Top-view perception against the truth",
    "",
    f"Tables {args.tables} ({summary['tables']} training tables), "
    f"match radius {1000 * args.match_radius:.0f} mm, {seconds:.0f} s.",
    "",
    f"Glasses {summary['glasses']}, found {summary['found']}, matched "
    f"{summary['matched']}, missed {summary['missed']}, spurious "
    f"{summary['spurious']}, kind wrong {summary['kind_wrong']}.",
    "",
    "Errors in mm (found minus true); p95 and max of |error|. Height and "
    "foot are not estimated from the top view.",
    "",
    "| quantity | glasses | n | bias | std | RMS | p95 | max | assumed noise (std) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ]
  for q in QUANTITIES:
    for kind, s in summary["errors"][q].items():
      if s["n"] == 0:
        continue
      lines.append(
        f"| {q} | {kind} | {s['n']} | {_mm(s['bias'])} | {_mm(s['std'])} | "
        f"{_mm(s['rms'])} | {_mm(s['p95_abs'])} | {_mm(s['max_abs'])} | "
        f"{_mm(ASSUMED[q])} |"
      )
  lines += [
    "",
    "Position error (distance) by the glass's distance from the camera axis:",
    "",
    "| off axis [mm] | n | mean | RMS | p95 | max |",
    "| --- | --- | --- | --- | --- | --- |",
  ]
  for b in summary["position_error_by_off_axis"]:
    if b["n"] == 0:
      continue
    lines.append(
      f"| {1000 * b['from']:.0f}-{1000 * b['to']:.0f} | {b['n']} | "
      f"{_mm(b['bias'])} | {_mm(b['rms'])} | {_mm(b['p95_abs'])} | "
      f"{_mm(b['max_abs'])} |"
    )
  return "\n".join(lines) + "\n"


def main(args: Args) -> int:
  tables = check_args(args)
  out = create_folder(args.output)
  start = time.perf_counter()
  results = []
  for table in tables:
    result = measure_table(table, args.match_radius)
    results.append(result)
    print(
      f"table {table}: {result['glasses']} glasses, found {result['found']}, "
      f"missed {len(result['missed'])}, spurious {len(result['spurious'])}",
      flush=True,
    )
  seconds = time.perf_counter() - start
  summary = summarize(results)
  report = {
    "command": " ".join(sys.argv),
    "tables": args.tables,
    "match_radius": args.match_radius,
    "seconds": seconds,
    "assumed_noise": ASSUMED,
    "summary": summary,
    "per_table": results,
  }
  (out / "perception.json").write_text(json.dumps(report, indent=1) + "\n")
  text = markdown(summary, args, seconds)
  (out / "perception.md").write_text(text)
  print(text)
  return 0


if __name__ == "__main__":
  raise SystemExit(main(parse(Args)))
