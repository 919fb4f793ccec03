"""Bin-picking expert runs side by side: one table row per run, the runs pooled.

Reads the ``report.json`` that ``scripts/evaluate_binpick.py`` writes into
each run folder (an expert run: a policy's report has no delivery times)
and prints the Markdown table of docs/bin_pick.md's measured results, one
row per run, then the runs pooled and how many meet a target.

  python scripts/summarize_binpick.py --run reports/bp41/fx_24 reports/bp41/fx_25
  python scripts/summarize_binpick.py --run R_* --json summary.json

Per run: pour and object seeds, poured objects (per environment), delivered
ones at the end (per environment), the delivered fraction, bins cleared,
time per delivery (the report's own: simulated time up to each
environment's last verified delivery, over the verifications) and the
undelivered objects by reason. Pooled: the same, time per delivery with the
runs' times and verifications summed (not a mean of their means), the
slips, the verified deliveries lost later (``lost_after_delivery``), and
the runs meeting the target (``--min-delivered`` of the poured objects
delivered and ``--min-cleared`` of the bins cleared: by default issue 41's
95 % and 75 %). Runs with other settings (bin, objects, steps) are pooled
all the same; the summary names each setting that differs.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from cli_args import check_new_file, fail, parse

# The settings that make runs comparable; a pooled summary names those
# that differ between its runs.
SETTINGS = ("num_envs", "objects", "max_steps", "bin_width", "bin_height", "object_set")
HEADER = (
  "| seeds (pour, object) | poured | delivered | delivered fraction | "
  "`bin_cleared` | time per delivery | undelivered, by reason |\n"
  "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
)


@dataclass
class Args:
  run: tuple[Path, ...]
  """Run folders of scripts/evaluate_binpick.py (each with its report.json),
  in the order their rows are printed."""
  min_delivered: float = 0.95
  """A run meets the target with at least this fraction of its poured
  objects delivered ..."""
  min_cleared: float = 0.75
  """... and at least this fraction of its bins cleared."""
  json: Path | None = None
  """Also write the rows and the pooled summary here (a new file)."""


@dataclass
class Run:
  """One run's numbers, from its report."""

  folder: Path
  seeds: tuple[str, str]
  poured: list[int]
  delivered: list[int]
  cleared: int
  last_delivery_s: float
  """Sum over environments of the time of each one's last verified delivery."""
  verifications: int
  undelivered: Counter
  slips: int
  settings: dict

  @property
  def fraction(self) -> float | None:
    return sum(self.delivered) / sum(self.poured) if sum(self.poured) else None

  @property
  def time_per_delivery(self) -> float | None:
    return self.last_delivery_s / self.verifications if self.verifications else None

  def meets(self, min_delivered: float, min_cleared: float) -> bool:
    fraction = self.fraction
    return (
      fraction is not None
      and fraction >= min_delivered
      and self.cleared >= min_cleared * len(self.poured)
    )


def read_run(folder: Path) -> Run:
  """A run folder's report as a ``Run``; a clear error for anything else."""
  path = folder / "report.json"
  if not path.is_file():
    fail(f"--run {folder}: no report.json (not a scripts/evaluate_binpick.py run).")
  try:
    report = json.loads(path.read_text())
    envs = report["environments"]
    config = report["config"]
  except (json.JSONDecodeError, KeyError, TypeError) as error:
    fail(f"--run {folder}: unreadable report.json ({error!r}).")
  if report.get("task") != "BinPick-UR5-RG2" or not envs:
    fail(f"--run {folder}: not a bin-picking report.")
  if any("delivery_times_s" not in e for e in envs):
    fail(f"--run {folder}: a policy's report (no delivery times); expert runs only.")
  times = [e["delivery_times_s"] for e in envs]
  return Run(
    folder=folder,
    seeds=(str(config.get("seed")), str(config.get("object_seed"))),
    poured=[e["poured"] for e in envs],
    delivered=[e["delivered"] for e in envs],
    cleared=sum(e["outcome"] == "bin_cleared" for e in envs),
    last_delivery_s=sum(t[-1] for t in times if t),
    verifications=sum(len(t) for t in times),
    undelivered=Counter(r for e in envs for r in e["undelivered_reasons"].values()),
    slips=sum(e["failure_reasons"].get("slip", 0) for e in envs),
    settings={k: config.get(k) for k in SETTINGS},
  )


def _seconds(value: float | None) -> str:
  return "-" if value is None else f"{value:.1f} s"


def _percent(value: float | None) -> str:
  return "-" if value is None else f"**{100 * value:.1f} %**"


def _reasons(counts: Counter) -> str:
  return ", ".join(f"{n} {reason}" for reason, n in counts.most_common()) or "none"


def _each(values: list[int]) -> str:
  return ", ".join(map(str, values))


def table_row(run: Run) -> str:
  """The run's row of docs/bin_pick.md's tables."""
  return (
    f"| {run.seeds[0]}, {run.seeds[1]} | {sum(run.poured)} ({_each(run.poured)}) | "
    f"{sum(run.delivered)} ({_each(run.delivered)}) | {_percent(run.fraction)} | "
    f"{run.cleared} / {len(run.poured)} | {_seconds(run.time_per_delivery)} | "
    f"{_reasons(run.undelivered)} |"
  )


def pooled(runs: list[Run], min_delivered: float, min_cleared: float) -> dict:
  """The runs together (times and verifications summed, not averaged)."""
  poured = sum(sum(r.poured) for r in runs)
  delivered = sum(sum(r.delivered) for r in runs)
  bins = sum(len(r.poured) for r in runs)
  verifications = sum(r.verifications for r in runs)
  undelivered = sum((r.undelivered for r in runs), Counter())
  lost = sum(n for reason, n in undelivered.items() if reason.startswith("lost_after"))
  differ = [k for k in SETTINGS if len({str(r.settings[k]) for r in runs}) > 1]
  return {
    "runs": len(runs),
    "poured": poured,
    "delivered": delivered,
    "delivered_fraction": delivered / poured if poured else None,
    "bins": bins,
    "bins_cleared": sum(r.cleared for r in runs),
    "time_per_delivery_s": sum(r.last_delivery_s for r in runs) / verifications
    if verifications
    else None,
    "slips": sum(r.slips for r in runs),
    # Objects delivered once and lost later, of all objects delivered once.
    "lost_after_delivery": lost,
    "verified_objects": delivered + lost,
    "undelivered_reasons": dict(undelivered.most_common()),
    "target": {"min_delivered": min_delivered, "min_cleared": min_cleared},
    "runs_meeting_target": [
      str(r.folder) for r in runs if r.meets(min_delivered, min_cleared)
    ],
    "settings_that_differ": differ,
  }


def print_summary(runs: list[Run], total: dict) -> None:
  print(HEADER)
  for run in runs:
    print(table_row(run))
  fraction = total["delivered_fraction"]
  print(
    f"\n{total['runs']} run{'s' * (total['runs'] != 1)}: {total['delivered']} of "
    f"{total['poured']} delivered "
    f"({'-' if fraction is None else f'{100 * fraction:.1f} %'}), "
    f"{total['bins_cleared']} of {total['bins']} bins cleared "
    f"({100 * total['bins_cleared'] / total['bins']:.1f} %), "
    f"{_seconds(total['time_per_delivery_s'])} per delivery, "
    f"{total['slips']} slips; {total['lost_after_delivery']} of "
    f"{total['verified_objects']} verified deliveries lost later."
  )
  target = total["target"]
  print(
    f"Target (at least {100 * target['min_delivered']:g} % delivered and "
    f"{100 * target['min_cleared']:g} % of the bins cleared): "
    f"{len(total['runs_meeting_target'])} of {total['runs']} runs."
  )
  if total["settings_that_differ"]:
    print(
      "Settings that differ between the runs: "
      + ", ".join(total["settings_that_differ"])
    )


def check_args(args: Args) -> None:
  if not args.run:
    fail("--run: give at least one run folder.")
  for folder in args.run:
    if not (folder / "report.json").is_file():
      fail(f"--run {folder}: no report.json (not a scripts/evaluate_binpick.py run).")
  for name in ("min_delivered", "min_cleared"):
    value = getattr(args, name)
    if not 0.0 <= value <= 1.0:
      fail(f"--{name.replace('_', '-')} must lie in [0, 1], got {value}.")
  if args.json is not None:
    check_new_file(args.json, "--json")


def main(args: Args) -> int:
  check_args(args)
  runs = [read_run(folder) for folder in args.run]
  total = pooled(runs, args.min_delivered, args.min_cleared)
  print_summary(runs, total)
  if args.json is not None:
    rows = [{"folder": str(r.folder), "row": table_row(r)} for r in runs]
    args.json.write_text(json.dumps({"rows": rows, "pooled": total}, indent=2) + "\n")
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
