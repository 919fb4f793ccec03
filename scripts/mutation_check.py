"""Do the tests catch what matters? A rerunnable mutation check.

Each mutation is one small, plausible change to the source (a loosened
evaluator condition, a replay that judges exactness by the verdict alone, a
hidden coefficient in a reply, a compiled-control constant off by 1 %, ...).
For each, the tool applies it, runs the tests that guard that code and
records whether they failed (the mutation is "caught") or passed (it
"survived"), then restores the file, always, even when interrupted. The
unchanged tests run first and must pass, or nothing is measured.

  python scripts/mutation_check.py --output reports/mutations
  python scripts/mutation_check.py --only replay_exact_by_verdict --output DIR

Writes DIR/mutations.json and prints a table; docs/testing.md keeps the last
result. Takes about 10 minutes on 2 cores (each mutation runs its test files).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from cli_args import check_new_folder, fail, parse  # noqa: E402


@dataclass(frozen=True)
class Mutation:
  name: str
  path: str
  old: str
  new: str
  tests: tuple[str, ...]


MUTATIONS = (
  Mutation(
    "cube_contained_ignores_rotation",
    "evaluators/cube_tray.py",
    "state.cube_pos_w, rot, state.tray_pos_w, th.half_size, th.inner_half",
    "state.cube_pos_w, rot, state.tray_pos_w, th.half_size, th.inner_half + 0.01",
    ("tests/test_cube_tray.py",),
  ),
  Mutation(
    "cube_release_not_required",
    "evaluators/cube_tray.py",
    '"placed": released & contained & supported & slow,',
    '"placed": contained & supported & slow,',
    ("tests/test_cube_tray.py",),
  ),
  Mutation(
    "bin_delivery_without_speed",
    "evaluators/bin_pick.py",
    '"slow": slow & finite,',
    '"slow": finite,',
    ("tests/test_bin_pick_evaluator.py",),
  ),
  Mutation(
    "reward_pays_hovering_like_settling",
    "mjlab_tasks/cube_tray/mdp.py",
    'return torch.where(verdict["settled"], SETTLED, reward)',
    'return torch.where(verdict["settled"] | (reward > 0.5), SETTLED, reward)',
    ("tests/test_cube_tray_reward.py",),
  ),
  Mutation(
    "replay_exact_by_verdict",
    "mjlab_tasks/demos/replay.py",
    "    and result.max_state_divergence == 0.0\n"
    "    and result.max_obs_divergence == 0.0\n"
    "    and result.max_reward_divergence == 0.0\n",
    "",
    ("tests/test_demos.py",),
  ),
  Mutation(
    "replay_ignores_rewards",
    "mjlab_tasks/demos/replay.py",
    "    and result.max_reward_divergence == 0.0\n",
    "",
    ("tests/test_demos.py",),
  ),
  Mutation(
    "friction_in_a_push_report",
    "mjlab_tasks/glass_push/examiner/world.py",
    '"peak": float(hand.peak[i]),',
    '"peak": float(self.physics.friction.glass_table),',
    ("tests/test_glass_hiding.py",),
  ),
  Mutation(
    "mass_in_a_reading",
    "mjlab_tasks/glass_push/hidden.py",
    '"x": round(float(x), 4),',
    '"x": round(float(x), 4), "mass": g.mass,',
    ("tests/test_glass_hiding.py",),
  ),
  Mutation(
    "compiled_damping_off_by_1_percent",
    "mjlab_tasks/engine/compiled_control.py",
    'c.damping = getattr(arm.cfg, "damping", 0.0)',
    'c.damping = 1.01 * getattr(arm.cfg, "damping", 0.0)',
    ("tests/test_compiled_control.py",),
  ),
  Mutation(
    "compiled_max_dq_off_by_1_percent",
    "mjlab_tasks/engine/compiled_control.py",
    "c.max_dq = arm.cfg.max_dq",
    "c.max_dq = 1.01 * arm.cfg.max_dq",
    ("tests/test_compiled_control.py",),
  ),
  Mutation(
    "output_overwritten",
    "scripts/cli_args.py",
    'fail(f"{flag} {path} already exists; choose a new path.")',
    "pass",
    ("tests/test_demos.py",),
  ),
)


@dataclass
class Args:
  """Apply each mutation, run its tests, restore; report caught / survived."""

  output: Path
  """Folder for mutations.json (must not exist)."""
  only: tuple[str, ...] = ()
  """Names of the mutations to run (default: all; see MUTATIONS)."""


def run_tests(tests: tuple[str, ...]) -> tuple[int, float]:
  """pytest on ``tests`` (the default tier), stopping at the first failure."""
  start = time.perf_counter()
  cmd = [sys.executable, "-m", "pytest", "-x", "-q", "--no-header", *tests]
  done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  return done.returncode, time.perf_counter() - start


def check(mutation: Mutation) -> dict:
  """Apply one mutation, run its tests, restore the file."""
  path = ROOT / mutation.path
  source = path.read_text()
  if source.count(mutation.old) != 1:
    fail(f"{mutation.name}: its text is not found once in {mutation.path}")
  path.write_text(source.replace(mutation.old, mutation.new))
  try:
    rc, seconds = run_tests(mutation.tests)
  finally:
    path.write_text(source)
  # pytest: 1 = tests failed; 2-4 = errors (an import or a collection broke).
  verdict = "caught" if rc == 1 else "survived" if rc == 0 else f"error (pytest {rc})"
  return asdict(mutation) | {"verdict": verdict, "seconds": round(seconds, 1)}


def check_args(args: Args) -> list[Mutation]:
  """The chosen mutations; a one-line error for an unknown name or an
  existing output folder."""
  names = {m.name for m in MUTATIONS}
  unknown = sorted(set(args.only) - names)
  if unknown:
    fail(f"--only: unknown mutations {unknown}; known: {sorted(names)}")
  check_new_folder(args.output)
  return [m for m in MUTATIONS if not args.only or m.name in args.only]


def main(args: Args) -> int:
  chosen = check_args(args)
  out_dir = args.output
  tests = tuple(sorted({t for m in chosen for t in m.tests}))
  rc, seconds = run_tests(tests)
  if rc != 0:
    fail(f"the unchanged tests fail (pytest {rc}): fix them before checking mutations")
  print(f"unchanged tests pass ({seconds:.0f} s)")
  results = []
  for mutation in chosen:
    results.append(check(mutation))
    print(
      f"{mutation.name:40s} {results[-1]['verdict']:9s} {results[-1]['seconds']:6.1f} s"
    )
  caught = sum(r["verdict"] == "caught" for r in results)
  print(f"{caught} of {len(results)} mutations caught")
  report = {"caught": caught, "mutations": results}
  out_dir.mkdir(parents=True)
  (out_dir / "mutations.json").write_text(json.dumps(report, indent=2))
  return 0 if caught == len(results) else 1


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
