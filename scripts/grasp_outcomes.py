"""How the bin-picking expert's planned grasps ended, by hold tier and kind.

Reads the ``transitions.json`` and ``final_states.json`` that
``scripts/evaluate_binpick.py`` writes into each run folder. Every grasp
the expert planned (a ``plan -> move_above`` transition whose note starts
with ``grasp``) is followed to how its attempt ended:

  placed   set down in the drop zone (``placed``)
  slip     the object slipped (in the lift, the carry or the lowering)
  failed   any other failed attempt (empty grasp, a stalled descent, a
           motion timeout, the target moved before the close)
  open     the episode ended first

and counted by the hold tier the planner gave it (``replica.hold_tier``:
sure, then the middle tier split into its well-held grasps and its poor
narrow ones near the centre of mass, then the rest), by the search that
found it and by the object's kind. The tier is recomputed from
the note's width, patch and centre-of-mass distance, which the note rounds
(to 0.1 mm, 0.01 and 1 mm): a grasp within half a millimetre of a tier's
distance bound may be counted in the neighbouring tier.

  python scripts/grasp_outcomes.py --run reports/bp41/pr_48 reports/bp41/pr_49
  python scripts/grasp_outcomes.py --run R_* --json outcomes.json
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cli_args import check_new_file, fail, parse

OUTCOMES = ("placed", "slip", "failed", "open")
TIER_NAMES = ("sure", "well held", "narrow, near", "rest")
_FIELDS = re.compile(r"\b(width|patch|com) (-?[\d.]+)")


@dataclass
class Args:
  run: tuple[Path, ...]
  """Run folders of scripts/evaluate_binpick.py (each with transitions.json
  and final_states.json)."""
  json: Path | None = None
  """Also write the counts here (a new file)."""


@dataclass
class Attempt:
  """One planned grasp and how its attempt ended."""

  kind: str
  width: float
  """[m]"""
  patch: float
  com: float
  """Centre of mass from the closing line [m]."""
  search: str
  outcome: str = "open"


def parse_grasp_note(note: str) -> dict | None:
  """Width [m], patch, centre-of-mass distance [m] and search of a grasp
  note; None for any other note."""
  if not note.startswith("grasp "):
    return None
  found = dict(_FIELDS.findall(note))
  search = re.search(r"(\w+) search\)$", note)
  if set(found) != {"width", "patch", "com"} or search is None:
    raise ValueError(f"unreadable grasp note: {note!r}")
  return {
    "width": float(found["width"]) / 1000.0,
    "patch": float(found["patch"]),
    "com": float(found["com"]) / 1000.0,
    "search": search.group(1),
  }


def ending(transition: dict) -> str | None:
  """How a transition ends the attempt under way, if it does."""
  if transition["note"] == "placed":
    return "placed"
  if transition["to"] != "recover":
    return None
  return "slip" if transition["note"] == "slip" else "failed"


def read_attempts(folder: Path) -> list[Attempt]:
  """Every planned grasp of a run folder, in order, with its outcome."""
  transitions = json.loads((folder / "transitions.json").read_text())
  states = json.loads((folder / "final_states.json").read_text())
  attempts = []
  for env, rows in transitions.items():
    kinds = [s["kind"] for s in states[env]]
    current = None
    for row in rows:
      grasp = parse_grasp_note(row["note"])
      if grasp is not None:
        current = Attempt(kind=kinds[row["object"]], **grasp)
        attempts.append(current)
      elif current is not None and (end := ending(row)) is not None:
        current.outcome = end
        current = None
  return attempts


def tiers(attempts: list[Attempt]) -> np.ndarray:
  """Each attempt's grasp class [N], an index of ``TIER_NAMES``: the
  planner's hold tier (``replica.hold_tier``), its middle tier split into
  the well-held grasps (``replica.well_held``) and the poor narrow ones."""
  from experts.bin_pick.replica import ReplicaCfg, hold_tier, well_held

  width = np.array([a.width for a in attempts])
  patch = np.array([a.patch for a in attempts])
  com = np.array([a.com for a in attempts])
  cfg = ReplicaCfg()
  tier = hold_tier(width, patch, com, cfg)
  held = well_held(width, patch, com, cfg)
  return np.select([tier == 0, (tier == 1) & held, tier == 1], [0, 1, 2], 3)


def count(attempts: list[Attempt]) -> dict[str, dict[str, Counter]]:
  """Outcomes by tier, by search and by kind."""
  by = {key: defaultdict(Counter) for key in ("tier", "search", "kind")}
  for attempt, tier in zip(attempts, tiers(attempts), strict=True):
    by["tier"][TIER_NAMES[int(tier)]][attempt.outcome] += 1
    by["search"][attempt.search][attempt.outcome] += 1
    by["kind"][attempt.kind][attempt.outcome] += 1
  return by


def print_table(title: str, rows: dict[str, Counter], order=None) -> None:
  print(f"\n| {title} | grasps | " + " | ".join(OUTCOMES) + " | slipped |")
  print("| --- | ---: |" + " ---: |" * (len(OUTCOMES) + 1))
  for name in order or sorted(rows):
    if name not in rows:
      continue
    c = rows[name]
    total = sum(c.values())
    cells = " | ".join(str(c[o]) for o in OUTCOMES)
    print(f"| {name} | {total} | {cells} | {100 * c['slip'] / total:.0f} % |")


def check_args(args: Args) -> None:
  if not args.run:
    fail("--run: give at least one run folder.")
  for folder in args.run:
    for name in ("transitions.json", "final_states.json"):
      if not (folder / name).is_file():
        fail(f"--run {folder}: no {name} (not a scripts/evaluate_binpick.py run).")
  if args.json is not None:
    check_new_file(args.json, "--json")


def main(args: Args) -> int:
  check_args(args)
  attempts = [a for folder in args.run for a in read_attempts(folder)]
  if not attempts:
    fail("--run: the runs planned no grasp.")
  by = count(attempts)
  print(f"{len(attempts)} planned grasps in {len(args.run)} runs")
  print_table("hold tier", by["tier"], TIER_NAMES)
  print_table("search", by["search"], ("first", "last", "final"))
  print_table("kind", by["kind"])
  if args.json is not None:
    out = {k: {name: dict(c) for name, c in v.items()} for k, v in by.items()}
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
