"""Helpers the command-line tools share: provenance, quiet Warp."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("assets", "mjlab_tasks", "experts", "evaluators", "scripts")


def source_snapshot(root: Path = PROJECT_ROOT) -> dict:
  """Commit id (with a dirty flag) and a SHA-256 of every source file."""
  files = sorted(
    p
    for d in SOURCE_DIRS
    for p in (root / d).rglob("*")
    if p.is_file()
    and p.suffix in (".py", ".xml", ".toml")
    and "__pycache__" not in p.parts
  )
  hashes = {
    str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files
  }
  combined = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in hashes.items()).encode())

  def git(*args: str) -> str | None:
    try:
      out = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=10
      )
      return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
      return None

  status = git("status", "--porcelain")
  return {
    "commit": git("rev-parse", "HEAD"),
    "dirty": None if status is None else bool(status),
    "sources_sha256": combined.hexdigest(),
    "files": hashes,
  }


def quiet_warp() -> None:
  """Silence Warp's per-module load messages (they bury progress bars).

  Sets mjlab's ``MJLAB_WARP_QUIET`` (read when mjlab is first imported, which
  then sets ``warp.config.quiet``) and Warp's own settings directly.
  """
  import os

  import warp as wp

  os.environ.setdefault("MJLAB_WARP_QUIET", "1")
  wp.config.quiet = True
  if hasattr(wp, "LOG_WARNING"):
    wp.config.log_level = wp.LOG_WARNING
