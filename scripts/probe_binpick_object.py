"""Why a bin-picking object was left: its grasp candidates checked on the CPU
replica, posed from a run's final state.

Reads a run folder of ``scripts/evaluate_binpick.py`` (``report.json`` and
``final_states.json``), rebuilds its scene (same bin, object set and seeds,
C MuJoCo on the CPU), poses every object where the run left it and the arm
at its start, and checks every grasp candidate of one object, both hand
yaws, with the checks of the chosen search (``first``, ``last`` or
``final``; docs/bin_pick.md, "CPU replica"). It prints the rejections by
reason, the feasible candidates best first, and what the planner itself
answers for that object alone with no check budget.

  python scripts/probe_binpick_object.py --run reports/bp41/fl_25 --env 0 --object obj_07
  python scripts/probe_binpick_object.py --run R --env 1 --object obj_02 \\
    --search first --json probe.json

Not the live decision: the arm stands at its start pose (not where it was),
other objects lie where the run ended, and the expert's history (failed
grasps it avoids, wedges it skips after a slip) is not replayed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from cli_args import check_new_file, fail, parse

# What rebuilds a run's scene, from its report's config.
RUN_SETTINGS = ("num_envs", "objects", "bin_width", "bin_height", "seed", "object_seed")
FLIP = np.diag([-1.0, -1.0, 1.0])  # The half-turned hand.


@dataclass
class Args:
  run: Path
  """Run folder of scripts/evaluate_binpick.py (report.json, final_states.json)."""
  object: str
  """The object to probe, by its slot name in the report (obj_00, obj_01, ...)."""
  env: int = 0
  """Environment index in the run."""
  search: Literal["first", "last", "final"] = "final"
  """Whose checks: the first search's, the last (relaxed) one's or the final
  one's (the walls pressed by up to 2 mm)."""
  show: int = 10
  """Feasible candidates listed (best first)."""
  json: Path | None = None
  """Also write the probe here (a new file)."""


@dataclass
class Run:
  config: dict
  state: list[dict]
  """The environment's final object states, in slot order."""
  index: int
  """The probed object's slot."""


def check_args(args: Args) -> Run:
  """Every flag checked, the run read, before anything is built."""
  if args.show < 0:
    fail(f"--show {args.show}: a count, 0 or more")
  if args.json is not None:
    check_new_file(args.json, "--json")
  return read_run(args.run, args.env, args.object)


def read_run(run: Path, env: int, name: str) -> Run:
  """A run folder's config and environment ``env``'s final states, with
  object ``name`` poured there; a clear error (naming the flag) otherwise."""
  report_path, states_path = run / "report.json", run / "final_states.json"
  for path in (report_path, states_path):
    if not path.is_file():
      fail(f"--run {run}: no {path.name} (not a run of evaluate_binpick.py?)")
  try:
    config = json.loads(report_path.read_text())["config"]
    states = json.loads(states_path.read_text())
    missing = [k for k in RUN_SETTINGS if k not in config]
  except (json.JSONDecodeError, KeyError, TypeError) as e:
    fail(f"--run {run}: unreadable report ({type(e).__name__}: {e})")
  if missing:
    fail(f"--run {run}: its report.json has no {', '.join(missing)}")
  if str(env) not in states:
    fail(f"--env {env}: the run has environments 0 to {len(states) - 1}")
  state = states[str(env)]
  names = [s["object"] for s in state]
  if name not in names:
    fail(f"--object {name}: the run's objects are {', '.join(names)}")
  if not next(s for s in state if s["object"] == name)["poured"]:
    fail(f"--object {name} was not poured in environment {env}")
  return Run(config=config, state=state, index=names.index(name))


def build_expert(config: dict):
  """The run's scene (C MuJoCo, CPU) after its reset, and an expert on it."""
  from evaluate_binpick import Args as RunArgs
  from evaluate_binpick import build_env

  from experts.bin_pick.expert import BinPickExpert

  run_args = RunArgs(
    num_envs=int(config["num_envs"]),
    objects=int(config["objects"]),
    bin_width=float(config["bin_width"]),
    bin_height=float(config["bin_height"]),
    seed=int(config["seed"]),
    object_seed=int(config["object_seed"]),
    object_set=config.get("object_set", "default"),
    # The episode's length, as the run had it (build_env sets it from this).
    max_steps=int(config.get("max_steps", 3600)),
  )
  env = build_env(run_args, "cpu", "mujoco")
  env.reset()
  return env, BinPickExpert(env)


def pose_replica(env, expert, run: Run, i: int):
  """The replica posed with environment i's objects where the run left them
  and the arm at its start: (replica, arm joints, transit height)."""
  from assets.ur5_rg2.model import RG2_PAD_HALF

  data = env.sim.data
  qpos = data.qpos[i].detach().cpu().double().numpy().copy()
  origin = env.scene.env_origins[i].cpu().double().numpy()
  for j, s in enumerate(run.state):
    adr = int(expert._objects[j].indexing.free_joint_q_adr[0])
    qpos[adr : adr + 3] = np.asarray(s["position"]) + origin
    qpos[adr + 3 : adr + 7] = s["quat_wxyz"]
  replica = expert._replica()
  replica.pose(
    qpos,
    data.mocap_pos[i].detach().cpu().double().numpy(),
    data.mocap_quat[i].detach().cpu().double().numpy(),
  )
  rim = expert.geometry.rim_z + expert.cfg.transit_clearance + RG2_PAD_HALF[2]
  return replica, qpos[replica.kin.qpos_adr].copy(), rim + float(origin[2])


def search_checks(replica, search: str):
  cfg = replica.cfg
  return {"first": cfg, "last": cfg.relaxed(), "final": cfg.grazing()}[search]


def probe_candidates(
  replica, k: int, transit_z: float, arm_q: np.ndarray, origin: np.ndarray
) -> dict:
  """Every candidate of object k, both hand yaws, under ``replica.cfg``:
  rejections by reason (``too_wide``, and ``edge_strip`` where the search
  takes none, count once per candidate) and the feasible ones, best first
  (positions in the environment's frame, about ``origin``)."""
  from experts.bin_pick.grasps import grasp_candidates

  com, mass = replica.object_mass(k)
  gravity = float(np.linalg.norm(replica.model.opt.gravity))
  c = grasp_candidates(
    replica.object_triangles(k), replica.cfg.search, com_w=com, weight=mass * gravity
  )
  reasons, feasible = Counter(), []
  for rank in range(len(c.width)):
    if c.width[rank] > replica.cfg.max_width:
      reasons["too_wide"] += 1
      continue
    if abs(int(c.strip[rank])) == 2 and not replica.cfg.edge_strips:
      reasons["edge_strip"] += 1
      continue
    for yaw, rot in enumerate((c.rotation_w[rank], c.rotation_w[rank] @ FLIP)):
      reason, _, _ = replica.check(
        k, c.position_w[rank], rot, float(c.width[rank]), transit_z, arm_q
      )
      replica.data.qpos[replica.kin.qpos_adr] = arm_q
      reasons[reason or "feasible"] += 1
      if reason is None:
        feasible.append(_row(c, rank, yaw, origin))
  return {"candidates": len(c.width), "reasons": dict(reasons), "feasible": feasible}


def _row(c, rank: int, yaw: int, origin: np.ndarray) -> dict:
  return {
    "rank": rank,
    "half_turned": bool(yaw),
    "position": _local(c.position_w[rank], origin),
    "tilt_deg": round(float(np.degrees(c.tilt[rank]))),
    "level": int(c.level[rank]),
    "strip": int(c.strip[rank]),
    "direction": int(c.direction[rank]),
    "width_mm": round(float(c.width[rank]) * 1000, 1),
    "patch": round(float(c.patch[rank]), 2),
    "com_distance_mm": round(float(c.com_distance[rank]) * 1000, 1),
  }


def _local(position_w: np.ndarray, origin: np.ndarray) -> list[float]:
  return [round(float(x), 5) for x in np.asarray(position_w) - origin]


def planner_answer(
  replica, k: int, transit_z: float, arm_q: np.ndarray, origin: np.ndarray
) -> dict:
  """What ``GraspReplica.plan`` finds for object k alone, no check budget."""
  result = replica.plan([k], transit_z, arm_q, 0.0, max_checks=10**9)
  plan = result.plan
  return {
    "found": plan is not None,
    "checked": result.checked,
    "rank": None if plan is None else plan.candidate_rank,
    "position": None if plan is None else _local(plan.position_w, origin),
  }


def wall_gaps_mm(replica, k: int) -> dict:
  """The object's gaps to the bin's four inner walls [mm] (bounding box;
  negative past a wall)."""
  from experts.bin_pick.rearrange import bin_interior

  pts = replica.object_triangles(k).reshape(-1, 3)
  interior = bin_interior(replica)
  lo, hi = pts[:, :2].min(0) - interior.lo, interior.hi - pts[:, :2].max(0)
  return {
    side: round(float(v) * 1000, 1)
    for side, v in zip(("-x", "-y", "+x", "+y"), (*lo, *hi), strict=True)
  }


def print_probe(args: Args, out: dict) -> None:
  s = out["state"]
  # A negative gap: the object reaches past that wall (out of the bin).
  inside = min(out["wall_gaps_mm"].values()) > -1.0
  where = "in the bin" if inside else "outside the bin's walls"
  print(
    f"{args.object} ({s['kind']}) in environment {args.env} of {args.run}: "
    f"at {s['position']} m (env frame), {where}; gaps to the walls "
    f"{out['wall_gaps_mm']} mm"
  )
  print(
    f"{out['candidates']} candidates, {args.search} search's checks: "
    + ", ".join(f"{k} {v}" for k, v in sorted(out["reasons"].items()))
  )
  for row in out["feasible"][: args.show]:
    print("  feasible:", json.dumps(row))
  p = out["planner"]
  found = f"grasp at rank {p['rank']}" if p["found"] else "none"
  print(f"planner alone, no budget: {found} ({p['checked']} checks)")


def main(args: Args) -> int:
  run = check_args(args)
  env, expert = build_expert(run.config)
  try:
    replica, arm_q, transit_z = pose_replica(env, expert, run, args.env)
    origin = env.scene.env_origins[args.env].cpu().double().numpy()
    own = replica.cfg
    replica.cfg = search_checks(replica, args.search)
    try:
      out = probe_candidates(replica, run.index, transit_z, arm_q, origin)
      out["planner"] = planner_answer(replica, run.index, transit_z, arm_q, origin)
    finally:
      replica.cfg = own
    out.update(
      state=run.state[run.index],
      wall_gaps_mm=wall_gaps_mm(replica, run.index),
      search=args.search,
    )
  finally:
    expert.close()
    env.close()
  print_probe(args, out)
  if args.json is not None:
    args.json.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
