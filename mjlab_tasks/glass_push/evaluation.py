"""Batch scoring of a GlassPush policy: one episode per table in every
environment at once, each table scored at its episode's last step, the sums
over the tables and, beside them, a solution's marks on the same tables.
``scripts/evaluate_glass_push.py`` is its command line."""

from __future__ import annotations

COMPARED = ("taken_with_room", "toppled", "knocked_off", "takeable_without_pushing")


def table_rows(
  env, pool: tuple[int, ...], ids: list[int], steps: int
) -> dict[int, dict]:
  """Environments ``ids`` scored now, at their episodes' last step, with the
  termination terms that ended them (none: the run's step limit, a time-out)
  {env: row}."""
  from mjlab_tasks.common.verdict import task_verdict
  from mjlab_tasks.glass_push import mdp

  t = mdp.table(env, pool)
  verdict = task_verdict(env)  # This step's, as the terminations saw.
  manager = env.termination_manager
  rows = {}
  for i in ids:
    ended_by = [n for n in manager.active_terms if bool(manager.get_term(n)[i])]
    glasses = int(t.count[i])
    start, end = int(t.takeable_at_start[i]), int(verdict["takeable_count"][i])
    rows[i] = {
      "table": int(t.table[i]),
      "env": i,
      "glasses": glasses,
      "takeable_at_start": start,
      "takeable_at_end": end,
      "gained": end - start,
      "toppled": int(verdict["toppled_count"][i]),
      "knocked_off": int(verdict["off_count"][i]),
      "standing_on_table": int(verdict["standing_count"][i]),
      "cleared": end == glasses,
      "ended_by": "+".join(ended_by) or "time_out",
      "end_time_s": round(steps * env.step_dt, 2),
    }
  return rows


def run(
  env, controller, pool: tuple[int, ...], max_steps: int, progress=None
) -> list[dict]:
  """One episode per environment: step the controller until every episode
  has ended or ``max_steps``, scoring each at its last step (an ended
  environment is reset and stepped on, unscored, while the others go on).
  ``progress(tables scored)`` after each step. Returns one row per
  environment, in order."""
  scored: dict[int, dict] = {}
  steps = 0
  while len(scored) < env.num_envs and steps < max_steps:
    _, _, terminated, truncated, _ = env.step(controller.act())
    steps += 1
    ended = (terminated | truncated).nonzero().flatten()
    new = [i for i in ended.tolist() if i not in scored]
    scored |= table_rows(env, pool, new, steps)
    if len(ended):
      env.reset(env_ids=ended)
      controller.reset(ended)
    if progress is not None:
      progress(len(scored))
  left = [i for i in range(env.num_envs) if i not in scored]
  scored |= table_rows(env, pool, left, steps)
  return [scored[i] for i in range(env.num_envs)]


SUMMED = (
  "glasses",
  "takeable_at_start",
  "takeable_at_end",
  "gained",
  "toppled",
  "knocked_off",
  "standing_on_table",
  "cleared",
)


def totals(rows: list[dict], compare: dict | None) -> dict:
  """Sums over the tables, the episodes' endings and, with a comparison,
  both sides' sums over the tables both scored."""
  total = {k: int(sum(r[k] for r in rows)) for k in SUMMED}
  total["tables"] = len(rows)
  total["takeable_at_end_rate"] = total["takeable_at_end"] / total["glasses"]
  ended: dict[str, int] = {}
  for r in rows:
    ended[r["ended_by"]] = ended.get(r["ended_by"], 0) + 1
  total["ended_by"] = ended
  if compare is None:
    return total
  shared = [r for r in rows if r["table"] in compare["rows"]]
  theirs = [compare["rows"][r["table"]] for r in shared]
  policy = {k: int(sum(r[k] for r in shared)) for k in SUMMED}
  total["comparison"] = {
    "label": compare["label"],
    "file": compare["file"],
    "tables": len(shared),
    "missing_tables": [r["table"] for r in rows if r["table"] not in compare["rows"]],
    "policy": policy,
    "solution": {k: int(sum(t[k] for t in theirs)) for k in COMPARED},
    # The aim: more glasses takeable at the end than the solution took with
    # room, none toppled or knocked off.
    "more_than_solution": policy["takeable_at_end"]
    > sum(t["taken_with_room"] for t in theirs),
    "none_lost": policy["toppled"] + policy["knocked_off"] == 0,
    # The same drawing of each table: both count the glasses takeable before
    # any push (the task's takeable_at_start, the examiner's
    # takeable_without_pushing); tables where they differ are listed.
    "start_differs": [
      r["table"]
      for r, t in zip(shared, theirs, strict=True)
      if r["takeable_at_start"] != t["takeable_without_pushing"]
    ],
  }
  return total


def attach_comparison(rows: list[dict], compare: dict | None) -> None:
  """Each row's solution marks under ``compare`` (None: not scored there)."""
  if compare is None:
    return
  for r in rows:
    r["compare"] = compare["rows"].get(r["table"])
