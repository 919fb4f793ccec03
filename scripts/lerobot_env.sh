#!/usr/bin/env bash
# Usage: bash scripts/lerobot_env.sh [VENV_DIR]   (default .venv-lerobot)
#
# Builds a separate virtual environment with lerobot 0.4.4, the newest on PyPI,
# to load what scripts/export_lerobot.py writes with lerobot's own
# LeRobotDataset (scripts/check_lerobot_dataset.py runs in it). Separate
# because lerobot 0.4.4 needs torch < 2.11 and torchvision < 0.26, and the
# suite runs torch 2.14.1. Idempotent: once built, a run only checks imports.
# Needs Python 3.11 ($PYTHON to choose another >= 3.10), about 8 GiB of disk
# (PyPI's Linux torch wheels bring their CUDA libraries; they run on the CPU
# too) and, on a cold pip cache, several minutes of downloads.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/.venv-lerobot}"
py="${PYTHON:-python3.11}"
# tyro: the check script parses its flags as every suite tool does;
# h5py: it compares the export with the source demonstrations.
imports="import lerobot.datasets.lerobot_dataset, tyro, h5py"
version() { "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("lerobot"))'; }
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$imports" 2>/dev/null; then
  echo "$venv: lerobot $(version) ready"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
# torch and torchvision pinned to the newest pair lerobot 0.4.4 allows, so
# the resolver does not fall back to an older build for another package.
"$venv/bin/python" -m pip install -q "lerobot==0.4.4" "torch==2.10.*" \
  "torchvision==0.25.*" "tyro>=1.0.1" h5py 2>&1 | grep -v "is ignored: it is neither" || true
"$venv/bin/python" -c "$imports"
echo "$venv: lerobot $(version) ready"
