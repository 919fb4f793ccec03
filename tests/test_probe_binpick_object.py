"""scripts/probe_binpick_object.py on a real (short) run of the evaluation
CLI, both as separate processes: its counts add up, its wall gaps match the
run's own object bounds against the bin's documented size, and the
planner's answer is one of the candidates it found feasible."""

from __future__ import annotations

import json

import pytest
from script_runner import run_script

from mjlab_tasks.bin_pick.env_cfg import BIN_CENTRE, BIN_LENGTH

WIDTH = 0.14  # The shallow bin: every object is poured within a few steps.


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  out = tmp_path_factory.mktemp("probe") / "run"
  result = run_script(
    "evaluate_binpick.py", "--num-envs", "1", "--objects", "3", "--max-steps", "1",
    "--bin-width", str(WIDTH), "--bin-height", ".06", "--seed", "4",
    "--object-seed", "4", "--device", "cpu", "--engine", "mujoco",
    "--output", str(out),
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  return out


def _poured(run) -> list[dict]:
  states = json.loads((run / "final_states.json").read_text())["0"]
  return [s for s in states if s["poured"]]


@pytest.mark.parametrize("search", ["first", "final"])
def test_probe_adds_up_and_agrees_with_the_planner(run, tmp_path, search):
  state = _poured(run)[0]
  out = tmp_path / "probe.json"
  result = run_script(
    "probe_binpick_object.py", "--run", str(run), "--object", state["object"],
    "--search", search, "--json", str(out),
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"{state['object']} ({state['kind']})" in result.stdout
  probe = json.loads(out.read_text())
  assert probe["state"] == state and probe["search"] == search
  reasons = dict(probe["reasons"])
  skipped = reasons.pop("too_wide", 0) + reasons.pop("edge_strip", 0)
  # Each candidate not skipped is checked with both hand yaws.
  assert sum(reasons.values()) == 2 * (probe["candidates"] - skipped)
  assert reasons.get("feasible", 0) == len(probe["feasible"])
  if search == "first":
    assert all(abs(row["strip"]) < 2 for row in probe["feasible"])
  planner = probe["planner"]
  if not probe["feasible"]:
    assert not planner["found"]
  if planner["found"]:
    same = [r for r in probe["feasible"] if r["rank"] == planner["rank"]]
    assert same and same[0]["position"] == pytest.approx(planner["position"])


def test_wall_gaps_are_the_objects_bounds_inside_the_bin(run):
  # The bin's inner bounds from its documented size and centre; the object's
  # from the run's own final state (its collision geometry's bounds).
  state = _poured(run)[-1]
  result = run_script(
    "probe_binpick_object.py", "--run", str(run), "--object", state["object"],
    "--show", "0",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  assert "feasible:" not in result.stdout
  line = next(li for li in result.stdout.splitlines() if "gaps to the walls" in li)
  assert ", in the bin;" in line
  gaps = json.loads(
    line.split("gaps to the walls ")[1].split(" mm")[0].replace("'", '"')
  )
  lo, hi = state["bounds_lo"], state["bounds_hi"]
  expected = {
    "-x": lo[0] - (BIN_CENTRE[0] - WIDTH / 2),
    "-y": lo[1] - (BIN_CENTRE[1] - BIN_LENGTH / 2),
    "+x": BIN_CENTRE[0] + WIDTH / 2 - hi[0],
    "+y": BIN_CENTRE[1] + BIN_LENGTH / 2 - hi[1],
  }
  for side, gap in expected.items():
    assert gaps[side] == pytest.approx(gap * 1000, abs=1.0), side
