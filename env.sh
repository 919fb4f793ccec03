# Usage: source env.sh
# Creates .venv on first use, installs this project (editable) with its test
# extra, and activates it. Idempotent: a second run only activates, unless
# pyproject.toml changed since the last install.
_suite_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
_suite_py="${PYTHON:-python3}"
if [ ! -x "$_suite_root/.venv/bin/python" ]; then
  "$_suite_py" -m venv "$_suite_root/.venv" || return 1 2>/dev/null || exit 1
fi
# shellcheck disable=SC1091
. "$_suite_root/.venv/bin/activate"
_suite_stamp="$_suite_root/.venv/.suite-installed"
if [ ! -f "$_suite_stamp" ] || [ "$_suite_root/pyproject.toml" -nt "$_suite_stamp" ]; then
  # Pin torch and torchvision (rsl-rl-lib needs it) to a matching pair first,
  # so the resolver never mixes two torch builds. This pair runs on CPU and CUDA.
  python -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
  python -m pip install -q -e "$_suite_root[test]" && touch "$_suite_stamp"
fi
unset _suite_root _suite_py _suite_stamp
