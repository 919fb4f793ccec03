"""The oracle (experts/glass_push/oracle.py): NOT a valid solution. The runner
(``Exam(..., oracle=True)``) tells it the true glasses, poses and friction;
an ordinary ``Exam`` and every solution pipe refuse that request. It plans
with the geometric planner. CPU, C MuJoCo, one or two tables."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from script_runner import run_script

from experts.glass_push import geometric, oracle
from mjlab_tasks.glass_push import Exam
from mjlab_tasks.glass_push.hidden import Friction

TABLE = 10036  # the oracle pushes once here and takes every glass


def test_the_oracle_is_told_the_true_friction_and_poses():
  """What the oracle is told equals the record's truth (the scoring side):
  the glasses, the poses now, the friction; its readings are the true
  positions and sizes and its mu the true glass-on-table friction."""
  with Exam([TABLE], pushes=2, oracle=True) as exam:
    told = exam.oracle_truth(TABLE)
    (record,) = exam.records()
  assert told["friction"] == record["friction"] == vars(Friction())
  assert told["glasses"] == record["glasses"]
  assert told["states"] == record["final"]
  sensed = oracle.Told(lambda: told)
  readings = sensed.look()
  assert sensed.known and sensed.mu == Friction().glass_table
  glasses = {g["id"]: g for g in record["glasses"]}
  for r, s in zip(readings, record["final"], strict=True):
    g = glasses[r["id"]]
    assert (r["x"], r["y"], r["standing"]) == (s["x"], s["y"], s["standing"])
    assert (r["height"], r["widest"], r["foot"]) == (
      g["height"],
      g["widest"],
      g["foot"],
    )


def test_the_oracle_plans_like_geometric_without_a_probe():
  """On the table it clears: no probe (it knows mu), no look (it is told the
  poses), and every take had room."""
  with Exam([TABLE], pushes=2, oracle=True) as exam:
    oracle.solver(exam.oracle_truth)(exam.examiners[0])
    (record,) = exam.records()
  assert record["looks"] == 0
  assert record["actions"], "the oracle pushed"
  assert all(a["request"]["travel"] != geometric.PROBE for a in record["actions"])
  assert record["taken"] and all(t["room"] for t in record["taken"].values())


def test_only_an_oracle_exam_serves_the_truth():
  """An ordinary Exam's worker refuses "oracle_truth" (so does one built with
  a truthy value that is not True); the solution's pipe of an oracle Exam
  refuses it too."""

  def plain():
    with Exam([TABLE], pushes=1) as exam:
      with pytest.raises(ValueError, match="unknown request 'oracle_truth'"):
        exam.oracle_truth(TABLE)

  def truthy():
    with Exam([TABLE], pushes=1, oracle=1) as exam:
      with pytest.raises(ValueError, match="unknown request"):
        exam.oracle_truth(TABLE)

  def told():
    with Exam([TABLE], pushes=1, oracle=True) as exam:
      with pytest.raises(ValueError, match="unknown request"):
        exam.examiners[0]._ask("oracle_truth")
      assert exam.oracle_truth(TABLE)["friction"]

  # The three exams at once, each in its own worker process.
  with ThreadPoolExecutor(3) as pool:
    for done in [pool.submit(check) for check in (plain, truthy, told)]:
      done.result()


@pytest.mark.slow  # the CLI's glass path also runs in test_glass_push's fast tier
def test_the_cli_labels_the_oracle_as_not_a_valid_solution(tmp_path):
  out = tmp_path / "oracle"
  result = run_script(
    "glass_push_exam.py",
    *("--solution", "oracle", "--tables", str(TABLE), "--pushes", "2"),
    *("--output", str(out)),
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.count(oracle.LABEL) >= 3  # before, in the table, after
  report = json.loads((out / "scores.json").read_text())
  assert report["valid_solution"] is False and report["label"] == oracle.LABEL
  assert [r["solution"] for r in report["rows"]] == [oracle.LABEL]
  assert f"## Solution `{oracle.LABEL}`" in (out / "scores.md").read_text()
  record = json.loads((out / "tables" / f"{TABLE}.json").read_text())
  assert "friction" not in record
  # Its refusal reasons (in the scores) do not write out the hidden friction.
  (row,) = report["rows"]
  reasons = list(row["refusal_reasons"].values())
  assert any("tips before it slides" in r for r in reasons)
  true_mu = f"{Friction().glass_table:.2f}"
  assert all("the true mu" in r and true_mu not in r for r in reasons if "tips" in r)
