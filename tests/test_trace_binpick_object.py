"""scripts/trace_binpick_object.py replays a real run of the evaluation CLI
(both as separate processes): stepped to the run's end, the traced object
is where the run's final_states.json has it, for every poured object, and
the rows are the flagged times."""

from __future__ import annotations

import csv
import json

import pytest
from script_runner import run_script


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  out = tmp_path_factory.mktemp("trace") / "run"
  result = run_script(
    "evaluate_binpick.py", "--num-envs", "2", "--objects", "2", "--max-steps", "240",
    "--bin-width", ".14", "--bin-height", ".06", "--seed", "3", "--object-seed", "3",
    "--device", "cpu", "--engine", "mujoco", "--output", str(out),
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  return out


def test_the_replay_ends_where_the_run_did(run, tmp_path):
  report = json.loads((run / "report.json").read_text())
  end = report["summary"]["simulated_time_s"]
  states = json.loads((run / "final_states.json").read_text())
  env = 1
  poured = [s for s in states[str(env)] if s["poured"]]
  # The run moved something: an object was carried out of the bin.
  assert any(s["delivered"] for s in poured), states[str(env)]
  for n, state in enumerate(poured):
    out = tmp_path / f"trace_{n}.csv"
    result = run_script(
      "trace_binpick_object.py", "--run", str(run), "--env", str(env),
      "--object", state["object"], "--start", str(end - 0.5), "--end", str(end),
      "--every", "3", "--csv", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note:" not in result.stdout  # The same sources as the run's.
    with out.open() as f:
      rows = list(csv.DictReader(f))
    times = [float(r["t_s"]) for r in rows]
    # Every third step from the start, and the last step.
    assert times[-1] == pytest.approx(end)
    assert all(end - 0.5 - 1e-9 <= t <= end + 1e-9 for t in times)
    steps = [round(t / 0.05) for t in times[:-1]]
    assert all(s % 3 == 0 for s in steps)
    last = rows[-1]
    position_mm = [float(last[c]) for c in ("x_mm", "y_mm", "z_mm")]
    assert position_mm == pytest.approx(
      [1000 * p for p in state["position"]], abs=0.011
    ), state["object"]
