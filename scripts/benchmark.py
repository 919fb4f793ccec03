"""Throughput of a task on each engine, with its controller and evaluator running.

For every engine and every ``--num-envs`` it builds the task, runs the
reference expert for ``--steps`` policy steps (evaluator, rewards and
auto-resets included) and reports:

- ``env_steps_per_s`` and ``physics_steps_per_s`` (environments x steps / s);
- the bare-physics reference on the same compiled model: for the C engine
  ``mujoco.rollout`` with the same thread count, one policy step's physics
  steps from every state a timed step started from, holding that state's
  inputs (``rollout_physics_steps_per_s``: the same states, contacts and
  number of steps as the run; the time to record them is not counted), and,
  as before 2026-12-02, all the steps from the last state only
  (``rollout_from_last_state_physics_steps_per_s``, which moved with the
  task's phase at that moment: 38,000 to 88,000 steps/s at one cube-tray
  environment); for MuJoCo Warp the same model and data stepped with
  ``mujoco_warp.step`` alone (``bare_physics_steps_per_s``); and the ratio
  of the environment's physics throughput to the reference;
- memory per environment (CUDA: peak device memory; CPU: resident-set growth).

``--task GlassPush-UR5-RG2`` runs the glass task with seeded random actions
(it has no expert), environment i on training table i mod 16; its bare
reference is the template model (the first table's meshes in every world).
``--task BinPick-UR5-RG2`` runs bin picking (12 objects poured into the
default bin) with seeded random actions.

``--loop compiled python`` measures both control loops side by side:
``compiled`` runs each policy step's physics steps with the compiled arm
control (``mjlab_tasks.engine.compiled_control``: C on the C engine, Warp
kernels captured as one CUDA graph per policy step on MuJoCo Warp),
``python`` keeps mjlab's Python loop. Every row also gives simulated seconds per
wall-clock second (``sim_s_per_s``), the unit of ManiSkill's CPU figures;
``--plot`` draws physics throughput against ``--num-envs`` per engine and
loop, with the bare-physics references.
``--task GlassPush`` measures the glass examiner instead: ``--num-envs``
tables (10000, 10001, ...) of one ``GlassWorld`` (the GlassPush environment,
``mjlab_tasks/glass_push/examiner/world.py``) holding their hands at the start
pose, one "step" being one 2 ms physics step with the examiner's hand control (the
task's IK and servo, wrist reading): on C MuJoCo each table's hold runs as one
compiled segment in the engine's worker threads, against bare ``mj_step`` of
the same worlds in the same threads (``rollout_physics_steps_per_s``); on
MuJoCo Warp every table steps together through mjlab's managers, against bare
``mujoco_warp.step`` of the same model and data.

Compare engines in one run (ratios are robust on noisy machines):

  python scripts/benchmark.py --task CubeTray-UR5-RG2 --engine mujoco warp \
    --num-envs 1 8 64 --steps 20 --json reports/bench.json
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cli_args import (
  check_at_least,
  check_device,
  check_engine,
  check_new_file,
  engine_device,
  fail,
  parse,
)

TASKS = ("CubeTray-UR5-RG2", "BinPick-UR5-RG2", "GlassPush-UR5-RG2", "GlassPush")
LOOPS = ("compiled", "python")


@dataclass
class Args:
  task: str = "CubeTray-UR5-RG2"
  """Task id to measure: CubeTray-UR5-RG2 (its expert), BinPick-UR5-RG2 or
  GlassPush-UR5-RG2 (random actions), or GlassPush (the glass examiner's
  control loop, the GlassWorld on each engine; see the module doc)."""
  engine: list[str] = field(default_factory=lambda: ["mujoco"])
  """One or more engines: mujoco (C MuJoCo, CPU) and/or warp (MuJoCo Warp)."""
  num_envs: list[int] = field(default_factory=lambda: [1, 8, 32])
  """One or more environment counts."""
  steps: int = 20
  """Policy steps timed per configuration (after one warm-up step)."""
  device: str | None = None
  """cpu or cuda:N (default: cuda:0 when available, else cpu; C engine: cpu)."""
  loop: list[str] = field(default_factory=lambda: ["compiled"])
  """Control loop(s): compiled (the arm control compiled, default) and/or
  python (mjlab's loop), measured side by side (not for GlassPush)."""
  json: Path | None = None
  """Write the results here (refuses an existing file)."""
  plot: Path | None = None
  """Draw physics steps/s against --num-envs per engine and loop here (.png;
  refuses an existing file)."""


def _rss_mb() -> float:
  import psutil

  return psutil.Process().memory_info().rss / 2**20


def measure_glass(engine: str, num_envs: int, steps: int, device: str) -> dict:
  """The glass examiner's control loop against bare physics (see above)."""
  import numpy as np
  import torch

  from mjlab_tasks.glass_push.examiner.world import GlassWorld

  tables = list(range(10_000, 10_000 + num_envs))
  cuda = device.startswith("cuda")
  if cuda:
    torch.cuda.reset_peak_memory_stats()
  rss0 = _rss_mb()
  row = {"task": "GlassPush", "engine": engine, "device": device}
  row |= {"num_envs": num_envs, "steps": steps, "decimation": 1}
  world = GlassWorld(tables, 1, engine=engine, device=device)
  from mjlab_tasks.engine.bare_physics import world_stepper

  hand = world.hand
  everyone = np.ones(num_envs, bool)
  key, bare = world_stepper(world.env)

  def run(n: int) -> None:
    hand.hold(everyone, n)

  rates = []
  for fn in (run, bare):
    fn(1)  # warm-up
    start = time.perf_counter()
    fn(steps)
    rates.append(num_envs * steps / (time.perf_counter() - start))
  row["env_steps_per_s"] = row["physics_steps_per_s"] = round(rates[0], 1)
  row[key] = round(rates[1], 1)
  row["ratio_to_bare_physics"] = round(rates[0] / rates[1], 3)
  if cuda:
    row["device_memory_per_env_mb"] = round(
      torch.cuda.max_memory_allocated() / 2**20 / num_envs, 3
    )
  else:
    row["rss_growth_per_env_mb"] = round((_rss_mb() - rss0) / num_envs, 3)
  world.close()
  return row


def measure(
  task: str, engine: str, num_envs: int, steps: int, device: str, loop: str = "compiled"
) -> dict:
  import torch

  if task == "GlassPush":
    return measure_glass(engine, num_envs, steps, device)

  from mjlab_tasks.engine import make_env
  from mjlab_tasks.engine.bare_physics import Reference

  cfg = _task_cfg(task, num_envs)
  cfg.seed = 0
  cuda = device.startswith("cuda")
  if cuda:
    torch.cuda.reset_peak_memory_stats()
  rss0 = _rss_mb()
  env = make_env(cfg, device=device, engine=engine, compiled_control=loop == "compiled")
  env.reset()
  expert = _actor(task, env)
  expert.reset()

  reference = Reference(env)

  def run(n: int, record: bool = False) -> float:
    """``n`` policy steps; returns the seconds they took (recording excluded)."""
    elapsed = 0.0
    for _ in range(n):
      if record:
        reference.record()
      start = time.perf_counter()
      _, _, terminated, truncated, _ = env.step(expert.act())
      ended = (terminated | truncated).nonzero().flatten()
      if len(ended):
        expert.reset(ended)
      if cuda:
        torch.cuda.synchronize()
      elapsed += time.perf_counter() - start
    return elapsed

  run(1)  # Warm-up (kernel loading, first allocations).
  elapsed = run(steps, record=True)
  env_rate = num_envs * steps / elapsed
  row = {
    "task": task,
    "engine": engine,
    "device": device,
    "num_envs": num_envs,
    "steps": steps,
    "decimation": env.cfg.decimation,
    "loop": "compiled" if getattr(env, "compiled_loop", None) else "python",
    "env_steps_per_s": round(env_rate, 2),
    "physics_steps_per_s": round(env_rate * env.cfg.decimation, 1),
    "sim_s_per_s": round(env_rate * env.step_dt, 2),
  }
  entries, bare = reference.rates(steps, env.cfg.decimation)
  row |= entries
  row["ratio_to_bare_physics"] = round(row["physics_steps_per_s"] / bare, 3)
  if cuda:
    row["device_memory_per_env_mb"] = round(
      torch.cuda.max_memory_allocated() / 2**20 / num_envs, 3
    )
  else:
    row["rss_growth_per_env_mb"] = round((_rss_mb() - rss0) / num_envs, 3)
  expert.close()
  env.close()
  return row


def _settings(task: str, num_envs: int) -> dict:
  """CubeTray with joint-target actions for its expert; BinPick with its
  default bin and 12 objects; GlassPush-UR5-RG2 on training tables 0 to 15
  (environment i plays table i mod 16)."""
  if task == "GlassPush-UR5-RG2":
    return {"tables": tuple(range(min(num_envs, 16))), "end_on_success": False}
  return {"arm_action": "joint"} if task == "CubeTray-UR5-RG2" else {}


def _task_cfg(task: str, num_envs: int):
  from mjlab_tasks.registry import TASKS

  return TASKS[task].env_cfg(num_envs=num_envs, **_settings(task, num_envs))


class _RandomActor:
  """Seeded uniform actions in [-1, 1] (tasks measured without an expert)."""

  def __init__(self, env):
    import torch

    self.env = env
    self.gen = torch.Generator(device=env.device).manual_seed(0)

  def reset(self, ids=None) -> None:
    pass

  def act(self):
    import torch

    shape = (self.env.num_envs, self.env.action_manager.total_action_dim)
    return torch.rand(shape, generator=self.gen, device=self.env.device) * 2 - 1

  def close(self) -> None:
    pass


EXPERT_MEASURED = ("CubeTray-UR5-RG2",)
"""Tasks measured with their expert acting; the others with random actions."""


def _actor(task: str, env):
  from mjlab_tasks.registry import TASKS

  return TASKS[task].expert(env) if task in EXPERT_MEASURED else _RandomActor(env)


def check_args(args: Args) -> str:
  """Every flag checked before anything is built: the device."""
  if args.task not in TASKS:
    fail(f"--task must be one of {', '.join(TASKS)}, got {args.task!r}.")
  if not args.engine or not args.num_envs:
    fail("--engine and --num-envs need at least one value each.")
  device = check_device(args.device)
  for engine in args.engine:
    # The C engine always runs on the CPU here, whatever --device says.
    check_engine(engine, engine_device(engine, device))
  check_at_least(1, steps=args.steps)
  for n in args.num_envs:
    check_at_least(1, num_envs=n)
  for loop in args.loop:
    if loop not in LOOPS:
      fail(f"--loop must be among {', '.join(LOOPS)}, got {loop!r}.")
  if not args.loop:
    fail("--loop needs at least one value.")
  if args.json is not None:
    check_new_file(args.json, "--json")
  if args.plot is not None:
    check_new_file(args.plot, "--plot")
    if args.plot.suffix != ".png":
      fail(f"--plot must name a .png file, got {args.plot}.")
  return device


def plot_throughput(rows: list[dict], task: str, path: Path) -> None:
  """Physics steps/s against environments, one line per engine and loop;
  dashed: the bare-physics reference measured in the same run."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(7, 4.5))
  series: dict[str, list[dict]] = {}
  for r in rows:
    loop = r.get("loop")
    name = r["engine"] + (f" ({loop} loop)" if loop else "")
    series.setdefault(f"{name}, {r['device']}", []).append(r)
  for name, group in series.items():
    group = sorted(group, key=lambda r: r["num_envs"])
    envs = [r["num_envs"] for r in group]
    (line,) = ax.plot(envs, [r["physics_steps_per_s"] for r in group], "o-", label=name)
    bare = [
      r.get("rollout_physics_steps_per_s", r.get("bare_physics_steps_per_s"))
      for r in group
    ]
    if "python loop" not in name:
      ax.plot(
        envs, bare, "--", color=line.get_color(), alpha=0.6, label=f"bare, {name}"
      )
  ax.set_xscale("log", base=2)
  ax.set_yscale("log")
  ax.set_xlabel("environments (--num-envs)")
  ax.set_ylabel("physics steps / s")
  ax.set_title(f"{task}: throughput with control and evaluator")
  ax.grid(True, which="both", alpha=0.3)
  ax.legend(fontsize=8)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def measure_all(args: Args, device: str) -> list[dict]:
  """Every engine, environment count and loop, side by side."""
  rows = []
  for engine in args.engine:
    on = engine_device(engine, device)
    loops = args.loop if args.task != "GlassPush" else ["-"]
    for n in args.num_envs:
      # Loops alternate per environment count: side by side, not an hour apart.
      for loop in loops:
        label = f", {loop} loop" if loop != "-" else ""
        print(
          f"measuring {args.task} on {engine} ({on}{label}), {n} envs ...",
          flush=True,
        )
        row = measure(args.task, engine, n, args.steps, on, loop)
        rows.append(row)
        print(json.dumps(row), flush=True)
  return rows


def print_table(rows: list[dict], num_envs: list[int]) -> None:
  # Side-by-side ratio of the engines' physics throughput per num_envs.
  by_key = {(r["engine"], r["num_envs"]): r for r in rows if r.get("loop") != "python"}
  for n in num_envs:
    c, w = by_key.get(("mujoco", n)), by_key.get(("warp", n))
    if c and w:
      ratio = c["physics_steps_per_s"] / w["physics_steps_per_s"]
      print(
        f"{n} envs: C engine / MuJoCo Warp ({w['device']}) physics throughput = {ratio:.1f}x"
      )
  header = (
    f"{'engine':>7} {'loop':>8} {'envs':>5} {'env steps/s':>12} {'physics/s':>11} "
    f"{'bare/s':>11} {'ratio':>6} {'sim s/s':>8}"
  )
  print(header)
  for r in rows:
    bare = r.get("rollout_physics_steps_per_s", r.get("bare_physics_steps_per_s"))
    print(
      f"{r['engine']:>7} {r.get('loop', '-'):>8} {r['num_envs']:>5} "
      f"{r.get('env_steps_per_s', '-'):>12} {r['physics_steps_per_s']:>11} "
      f"{bare:>11} {r['ratio_to_bare_physics']:>6} {r.get('sim_s_per_s', '-'):>8}"
    )


def write_json(path: Path, rows: list[dict]) -> None:
  """The rows with the machine and the source they ran on."""
  import torch

  from mjlab_tasks.common.runtime import source_snapshot

  path.parent.mkdir(parents=True, exist_ok=True)
  machine = {"platform": platform.platform(), "python": platform.python_version()}
  machine["cpu_count"] = os.cpu_count()
  if torch.cuda.is_available():
    machine["gpu"] = torch.cuda.get_device_name(0)
  path.write_text(
    json.dumps(
      {"machine": machine, "results": rows, "source": source_snapshot()}, indent=2
    )
  )
  print(f"wrote {path}")


def main(args: Args) -> int:
  device = check_args(args)

  from mjlab_tasks.common.runtime import quiet_warp

  quiet_warp()
  rows = measure_all(args, device)
  print_table(rows, args.num_envs)
  if args.plot is not None:
    plot_throughput(rows, args.task, args.plot)
    print(f"wrote {args.plot}")
  if args.json is not None:
    write_json(args.json, rows)
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
