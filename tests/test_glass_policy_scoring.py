"""A trained GlassPush policy scored on tables: scripts/evaluate_glass_push.py
runs it one episode per table with the task's verdicts, beside an examiner
solution's scores.

The checkpoint is trained fresh (two PPO iterations on the C engine), so the
test follows whatever observations the task has.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from script_runner import load_tool, run_script, train_two_iterations

from mjlab_tasks.glass_push.rules.tables import draw_table, takeable_without_pushing
from mjlab_tasks.glass_push.scene import GLASS_ENTITY

TASK = "GlassPush-UR5-RG2"
TABLES = [10000, 10001]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
  """model_1.pt of two PPO iterations, 4 environments, 8 steps each."""
  root = tmp_path_factory.mktemp("train")
  result = train_two_iterations(TASK, root)
  assert result.returncode == 0, result.stderr[-3000:]
  (model,) = root.glob("*/*/model_1.pt")
  return model


def _scores_file(path: Path, tables: list[int]) -> Path:
  """A scores.json as scripts/glass_push_exam.py writes it (the rows' marks
  the tool reads), for ``tables``: takeable_without_pushing as drawn."""
  rows = []
  for table in tables:
    glasses = draw_table(table)
    start = takeable_without_pushing(
      [(g.x, g.y) for g in glasses], [g.widest for g in glasses]
    )
    rows.append(
      {
        "table": table,
        "glasses": len(glasses),
        "takeable_without_pushing": len(start),
        "taken_with_room": 3,
        "toppled": 0,
        "knocked_off": 1,
      }
    )
  path.write_text(json.dumps({"solution": "nudge", "label": "nudge", "rows": rows}))
  return path


def test_policy_is_scored_per_table_beside_a_solution(checkpoint, tmp_path):
  compare = _scores_file(tmp_path / "scores.json", TABLES[:1])
  out_dir = tmp_path / "eval"
  result = run_script(
    "evaluate_glass_push.py",
    "--policy",
    str(checkpoint),
    "--tables",
    f"{TABLES[0]}-{TABLES[-1]}",
    "--max-steps",
    "5",
    "--device",
    "cpu",
    "--compare",
    str(compare),
    "--output",
    str(out_dir),
  )
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out_dir / "report.json").read_text())
  assert report["task"] == TASK
  assert report["controller"] == f"policy checkpoint {checkpoint}"
  assert report["source"]["files"] and "commit" in report["source"]
  rows = report["rows"]
  assert [r["table"] for r in rows] == TABLES
  for r in rows:
    assert r["glasses"] == len(draw_table(r["table"]))
    assert 0 <= r["takeable_at_end"] <= r["glasses"]
    assert r["gained"] == r["takeable_at_end"] - r["takeable_at_start"]
    # Five steps are not enough to topple anything from the start pose.
    assert (r["toppled"], r["knocked_off"], r["ended_by"]) == (0, 0, "time_out")
    assert r["end_time_s"] == pytest.approx(5 * 0.05)
  # The comparison covers the one table the scores file has.
  assert rows[0]["compare"]["taken_with_room"] == 3 and rows[1]["compare"] is None
  comparison = report["total"]["comparison"]
  assert comparison["tables"] == 1 and comparison["missing_tables"] == [TABLES[1]]
  assert comparison["solution"]["taken_with_room"] == 3
  assert comparison["start_differs"] == []  # The same drawing of the table.
  assert comparison["none_lost"] is True
  total = report["total"]
  assert total["glasses"] == sum(r["glasses"] for r in rows)
  assert total["ended_by"] == {"time_out": 2}
  md = (out_dir / "scores.md").read_text()
  assert "nudge: taken with room" in md and "**all 2**" in md
  assert "More takeable than nudge took, none lost:" in result.stdout
  assert f"wrote {out_dir}" in result.stdout


class _Topple:
  """Zero actions; before step 1 it lays glass 0 of environment 0 on its
  side, before step 3 it drops glass 0 of environment 1 off the table."""

  def __init__(self, env):
    self.env, self.steps, self.resets = env, 0, []

  def _set(self, i, pos, quat=(1.0, 0.0, 0.0, 0.0)):
    state = torch.zeros(1, 13)
    state[0, :3] = torch.tensor(pos) + self.env.scene.env_origins[i]
    state[0, 3:7] = torch.tensor(quat)
    glass = self.env.scene[GLASS_ENTITY.format(slot=0)]
    glass.write_root_state_to_sim(state, torch.tensor([i]))

  def act(self) -> torch.Tensor:
    self.steps += 1
    if self.steps == 1:
      g = draw_table(TABLES[0])[0]
      self._set(0, (g.x, g.y, 0.04), (0.7071, 0.7071, 0.0, 0.0))
    if self.steps == 3:
      self._set(1, (0.3, -0.8, -0.7))
    return torch.zeros(self.env.num_envs, 6)

  def reset(self, env_ids) -> None:
    self.resets.append(env_ids.tolist())


def test_a_toppled_or_knocked_off_glass_ends_the_tables_episode():
  """The task's terminations end a table's episode; the table is scored on
  the state they saw, then reset and stepped on unscored."""
  tool = load_tool("evaluate_glass_push.py")
  env = tool.build_env(TABLES, 6, "cpu", "mujoco")
  try:
    env.reset()
    controller = _Topple(env)
    rows = tool.run(env, controller, tuple(TABLES), 6)
  finally:
    env.close()
  toppled, knocked = rows
  assert (toppled["table"], toppled["ended_by"], toppled["toppled"]) == (
    TABLES[0],
    "glass_toppled",
    1,
  )
  assert toppled["end_time_s"] == pytest.approx(0.05)
  assert (knocked["ended_by"], knocked["knocked_off"]) == ("glass_knocked_off", 1)
  assert knocked["end_time_s"] == pytest.approx(0.15) and knocked["toppled"] == 0
  # Both stopped the run early: nothing left to score after step 3.
  assert controller.steps == 3 and controller.resets == [[0], [1]]
  total = tool.totals(rows, None)
  assert total["ended_by"] == {"glass_toppled": 1, "glass_knocked_off": 1}
  assert (total["toppled"], total["knocked_off"]) == (1, 1)


def test_a_policy_of_another_task_is_a_one_line_error(tmp_path):
  from dataclasses import asdict

  from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
  from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

  import mjlab_tasks.tasks  # noqa: F401 - the registry
  from mjlab_tasks.engine import make_env

  cfg = load_env_cfg("CubeTray-UR5-RG2", play=True)
  cfg.scene.num_envs = 1
  env = make_env(cfg, device="cpu", engine="mujoco")
  try:
    runner = MjlabOnPolicyRunner(
      RslRlVecEnvWrapper(env), asdict(load_rl_cfg("CubeTray-UR5-RG2"))
    )
    runner.save(str(tmp_path / "model_0.pt"))
  finally:
    env.close()
  result = run_script(
    "evaluate_glass_push.py",
    "--policy",
    str(tmp_path / "model_0.pt"),
    "--tables",
    "10000",
    "--device",
    "cpu",
    "--output",
    str(tmp_path / "eval"),
  )
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert lines[-1].startswith("error: ")
  assert f"not a readable {TASK} policy" in lines[-1], lines[-1]


def test_help_explains_every_flag():
  out = run_script("evaluate_glass_push.py", "--help")
  assert out.returncode == 0, out.stderr
  for flag in ("--policy", "--tables", "--max-steps", "--compare", "--device"):
    assert flag in out.stdout
  assert "--engine" in out.stdout and "--output" in out.stdout
