"""Clean provenance: setup leaves the checkout clean, so reports say ``dirty: false``.

``source env.sh`` writes ``.venv/`` and ``manipulation_suite.egg-info/``
(pip's editable install); both must be ignored and untracked, or every
report's source snapshot would call an untouched checkout dirty.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from script_runner import ROOT

from mjlab_tasks.common.runtime import source_snapshot

SETUP_OUTPUTS = (".venv/bin/python", "manipulation_suite.egg-info/PKG-INFO")

pytestmark = pytest.mark.skipif(
  shutil.which("git") is None or not (ROOT / ".git").exists(),
  reason="needs git and a git checkout",
)


def git(*args: str, cwd=ROOT) -> str:
  return subprocess.run(
    ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
  ).stdout


def test_setup_outputs_are_ignored_and_untracked():
  for path in SETUP_OUTPUTS:
    assert git("ls-files", "--", path.split("/")[0]) == "", f"{path} is tracked"
    ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
    assert ignored.returncode == 0, f"{path} is not ignored by .gitignore"
  # No tracked file matches an ignore pattern (it would show as modified).
  assert git("ls-files", "--cached", "--ignored", "--exclude-standard") == ""


def test_fresh_clone_with_setup_outputs_snapshots_clean(tmp_path):
  clone = tmp_path / "clone"
  git("clone", "-q", "--no-hardlinks", str(ROOT), str(clone), cwd=tmp_path)
  # What `source env.sh` adds to a fresh clone (without the minutes of install).
  for path in SETUP_OUTPUTS:
    (clone / path).parent.mkdir(parents=True, exist_ok=True)
    (clone / path).write_text("written by setup\n")
  assert git("status", "--porcelain", cwd=clone) == ""
  snapshot = source_snapshot(clone)
  assert snapshot["dirty"] is False
  assert snapshot["commit"] == git("rev-parse", "HEAD").strip()

  (clone / "scripts" / "cli_args.py").write_text("# edited\n")
  assert source_snapshot(clone)["dirty"] is True
