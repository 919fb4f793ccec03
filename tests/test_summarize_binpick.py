"""scripts/summarize_binpick.py: the docs' table rows and the pooled numbers
of hand-written expert reports, checked against sums done here by hand;
clear errors for folders that are not expert runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_runner import run_script


def _env(poured, delivered, times, outcome, undelivered=(), slips=0) -> dict:
  return {
    "poured": poured,
    "delivered": delivered,
    "outcome": outcome,
    "delivery_times_s": list(times),
    "undelivered_reasons": {f"obj_{k:02d}": r for k, r in enumerate(undelivered)},
    "failure_reasons": {"slip": slips} if slips else {},
  }


def _write(folder: Path, seed: int, envs: list[dict], **config) -> Path:
  folder.mkdir(parents=True)
  report = {
    "task": "BinPick-UR5-RG2",
    "config": {"seed": str(seed), "object_seed": str(seed), "objects": "12"} | config,
    "environments": envs,
  }
  (folder / "report.json").write_text(json.dumps(report))
  return folder


@pytest.fixture
def two_runs(tmp_path):
  # Run A: 10 of 10 in both bins, last verifications at 60 s (5 of them)
  # and 50 s (5). Run B: 9 of 10 and 4 of 6: one object lost after its
  # verified delivery, two never grasped; its first bin verified 10 times
  # (an object delivered twice) by 120 s, the second 4 times by 90 s.
  a = _write(
    tmp_path / "a",
    7,
    [
      _env(5, 5, [10, 20, 30, 45, 60], "bin_cleared"),
      _env(5, 5, [5, 15, 25, 35, 50], "bin_cleared", slips=2),
    ],
  )
  b = _write(
    tmp_path / "b",
    8,
    [
      _env(
        10,
        9,
        [12.0 * k for k in range(1, 11)],
        "finished",
        ["lost_after_delivery (near_drop)"],
        3,
      ),
      _env(
        6, 4, [20, 40, 60, 90], "finished", ["no_feasible_grasp", "no_feasible_grasp"]
      ),
    ],
    objects="8",
  )
  return a, b


def test_rows_and_pooled_numbers_match_sums_by_hand(two_runs, tmp_path):
  a, b = two_runs
  out = tmp_path / "summary.json"
  result = run_script(
    "summarize_binpick.py", "--run", str(a), str(b), "--json", str(out)
  )
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert lines[2] == (
    "| 7, 7 | 10 (5, 5) | 10 (5, 5) | **100.0 %** | 2 / 2 | 11.0 s | none |"
  )  # (60 + 50) s over 10 verifications.
  assert lines[3] == (
    "| 8, 8 | 16 (10, 6) | 13 (9, 4) | **81.2 %** | 0 / 2 | 15.0 s | "
    "2 no_feasible_grasp, 1 lost_after_delivery (near_drop) |"
  )  # (120 + 90) s over 14 verifications.
  pooled = json.loads(out.read_text())["pooled"]
  assert (pooled["poured"], pooled["delivered"]) == (26, 23)
  assert (pooled["bins"], pooled["bins_cleared"]) == (4, 2)
  # Times and verifications summed over the runs: 320 s over 24, not the
  # mean of 11.0 and 15.0.
  assert pooled["time_per_delivery_s"] == pytest.approx(320 / 24)
  assert pooled["slips"] == 5
  assert (pooled["lost_after_delivery"], pooled["verified_objects"]) == (1, 24)
  assert pooled["runs_meeting_target"] == [str(a)]
  assert pooled["settings_that_differ"] == ["objects"]
  assert (
    "Target (at least 95 % delivered and 75 % of the bins cleared): 1 of 2 runs."
    in lines
  )
  # A looser target takes run B too (81 % delivered, no bin cleared).
  result = run_script(
    "summarize_binpick.py", "--run", str(a), str(b), "--min-delivered", "0.8",
    "--min-cleared", "0",
  )  # fmt: skip
  assert "): 2 of 2 runs." in result.stdout


def test_a_policy_report_a_missing_one_and_an_old_json_are_refused(two_runs, tmp_path):
  a, _ = two_runs
  policy = _write(
    tmp_path / "policy", 1, [{"poured": 3, "delivered": 0, "outcome": "timeout"}]
  )
  for folder, message in (
    (tmp_path / "nothing", "no report.json"),
    (policy, "a policy's report"),
  ):
    result = run_script("summarize_binpick.py", "--run", str(a), str(folder))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stdout == ""
  old = tmp_path / "old.json"
  old.write_text("{}")
  result = run_script("summarize_binpick.py", "--run", str(a), "--json", str(old))
  assert result.returncode == 2 and "already exists" in result.stderr
  assert old.read_text() == "{}"
  result = run_script("summarize_binpick.py", "--run", str(a), "--min-cleared", "75")
  assert result.returncode == 2 and "--min-cleared must lie in [0, 1]" in result.stderr
