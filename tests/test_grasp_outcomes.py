"""scripts/grasp_outcomes.py: the outcomes of hand-written grasp transitions,
counted by hold tier, search and kind against counts done here by hand;
clear errors for folders that are not runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_runner import run_script


def _grasp(obj: int, width_mm: float, patch: float, com_mm: float, search: str):
  note = (
    f"grasp obj_{obj:02d} width {width_mm:.1f} mm tilt 0 deg level 0 strip 0 "
    f"open 80 mm patch {patch:.2f} com {com_mm:.0f} mm lever 0.0 mm below 0.0 mm "
    f"taper 0.00/0.00 (candidate 3, 40 checked, {search} search)"
  )
  return {"t": 0.0, "from": "plan", "to": "move_above", "object": obj, "note": note}


def _row(frm: str, to: str, note: str = "", obj: int = 0) -> dict:
  return {"t": 1.0, "from": frm, "to": to, "object": obj, "note": note}


@pytest.fixture
def run(tmp_path) -> Path:
  # Environment 0: a sure grasp of the box placed; a grasp of the rest tier
  # (80 mm wide) of the capsule slipped in the lift, then a narrow, near
  # one (patch 0) of it placed. Environment 1: a well-held grasp (65 mm
  # wide) of the cylinder emptied, its last-search grasp of the rest tier
  # (30 mm from the centre of mass) still under way at the end.
  folder = tmp_path / "run"
  folder.mkdir()
  transitions = {
    "0": [
      _grasp(0, 40.0, 0.5, 5, "first"),
      _row("descend", "close"),
      _row("retreat", "plan", "placed"),
      _grasp(1, 80.0, 0.0, 3, "first"),
      _row("lift", "recover", "slip", 1),
      _row("recover", "plan", "", 1),
      _grasp(1, 50.0, 0.0, 10, "first"),
      _row("retreat", "plan", "placed", 1),
    ],
    "1": [
      _grasp(0, 65.0, 0.6, 20, "first"),
      _row("close", "recover", "empty_grasp"),
      _grasp(0, 45.0, 0.1, 30, "last"),
      _row("move_above", "descend"),
    ],
  }
  states = {
    "0": [{"object": "obj_00", "kind": "box"}, {"object": "obj_01", "kind": "capsule"}],
    "1": [{"object": "obj_00", "kind": "cylinder"}],
  }
  (folder / "transitions.json").write_text(json.dumps(transitions))
  (folder / "final_states.json").write_text(json.dumps(states))
  return folder


def test_outcomes_by_tier_search_and_kind_match_counts_by_hand(run, tmp_path):
  out = tmp_path / "outcomes.json"
  result = run_script("grasp_outcomes.py", "--run", str(run), "--json", str(out))
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith("5 planned grasps in 1 runs")
  counts = json.loads(out.read_text())
  assert counts["tier"] == {
    "sure": {"placed": 1},
    "well held": {"failed": 1},
    "narrow, near": {"placed": 1},
    "rest": {"slip": 1, "open": 1},
  }
  assert counts["search"] == {
    "first": {"placed": 2, "slip": 1, "failed": 1},
    "last": {"open": 1},
  }
  assert counts["kind"] == {
    "box": {"placed": 1},
    "capsule": {"slip": 1, "placed": 1},
    "cylinder": {"failed": 1, "open": 1},
  }
  assert "| rest | 2 | 0 | 1 | 0 | 1 | 50 % |" in result.stdout


def test_a_folder_without_transitions_is_refused(tmp_path):
  (tmp_path / "final_states.json").write_text("{}")
  result = run_script("grasp_outcomes.py", "--run", str(tmp_path))
  assert result.returncode != 0
  assert "no transitions.json" in result.stderr
