"""The layout's rules, checked on the source (docs/architecture.md): imports
run one way, and only the engine package knows which engine runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("assets", "evaluators", "mjlab_tasks", "experts")
# What each top-level folder may import of the suite at module level.
ALLOWED = {
  "assets": {"assets"},
  "evaluators": {"evaluators", "assets"},
  "mjlab_tasks": {"mjlab_tasks", "evaluators", "assets"},
  "experts": {"experts", "mjlab_tasks", "evaluators", "assets"},
  "scripts": {"mjlab_tasks", "evaluators", "assets", "experts"},
}


def _sources(*folders: str) -> list[Path]:
  return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _module_level_imports(tree: ast.Module) -> list[str]:
  """Modules imported outside functions (what importing the file loads)."""
  found = []

  def visit(node: ast.AST) -> None:
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
        continue
      if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
        continue
      if isinstance(child, ast.Import):
        found.extend(a.name for a in child.names)
      elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
        found.append(child.module)
      visit(child)

  visit(tree)
  return found


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_imports_run_one_way(folder):
  suite = set(ALLOWED)
  wrong = []
  for path in _sources(folder):
    for module in _module_level_imports(ast.parse(path.read_text())):
      top = module.split(".")[0]
      if top in suite and top not in ALLOWED[folder]:
        wrong.append(f"{path.relative_to(ROOT)} imports {module}")
  assert not wrong, "\n".join(wrong)


ENGINE = ROOT / "mjlab_tasks" / "engine"
# Reading an engine's internals or branching on its name, outside the engine
# package: the engine's face (mjlab_tasks.engine) offers what these did.
LEAKS = {
  "reads the C engine's worlds": re.compile(r"\._worlds\b"),
  "names the C engine's simulation": re.compile(r"\bCMujocoSimulation\b"),
  "imports the C engine module": re.compile(r"engine\.c_engine\b|import c_engine\b"),
  "branches on an engine's name": re.compile(
    r"""engine\s*[!=]=\s*["'](mujoco|warp)["']|["'](mujoco|warp)["']\s*[!=]=\s*\w*engine"""
  ),
}


def test_only_the_engine_package_knows_the_engine():
  leaks = []
  for path in _sources(*LIBRARY, "scripts"):
    if ENGINE in path.parents:
      continue
    text = path.read_text()
    for what, pattern in LEAKS.items():
      for match in pattern.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        leaks.append(f"{path.relative_to(ROOT)}:{line} {what}")
  assert not leaks, "\n".join(leaks)


def test_the_checks_see_a_leak_and_a_wrong_import(tmp_path):
  """The rules above catch what they are for (a check that cannot fail
  proves nothing)."""
  tree = ast.parse("import experts.cube_tray\ndef f():\n  import scripts\n")
  assert _module_level_imports(tree) == ["experts.cube_tray"]
  sample = 'if engine == "mujoco":\n  d = env.sim._worlds[0]\n'
  hits = [w for w, p in LEAKS.items() if p.search(sample)]
  assert hits == ["reads the C engine's worlds", "branches on an engine's name"]


@pytest.mark.parametrize("script", ["cli_args.py", "check_lerobot_dataset.py"])
def test_the_lerobot_check_needs_no_suite(script):
  """check_lerobot_dataset.py runs in lerobot's own environment, where the
  suite is not installed: it and the flag helpers it imports load nothing of
  the suite when imported."""
  tree = ast.parse((ROOT / "scripts" / script).read_text())
  suite = [m for m in _module_level_imports(tree) if m.split(".")[0] in ALLOWED]
  assert not suite, suite
