"""The README's first block runs the suite's main job with flags the tool accepts."""

from __future__ import annotations

import re
import shlex
import sys

from script_runner import ROOT, load_tool

sys.path.insert(0, str(ROOT / "scripts"))

import cli_args  # noqa: E402


def first_block_commands() -> list[list[str]]:
  text = (ROOT / "README.md").read_text()
  block = re.search(r"```bash\n(.*?)```", text, re.S)
  assert block, "README.md has no bash block"
  lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
  return [shlex.split(line) for line in lines if line]


def test_first_block_sets_up_then_runs_a_task_batch(tmp_path, capsys):
  commands = first_block_commands()
  assert commands[0] == ["source", "env.sh"]
  job = [c for c in commands if c[:2] == ["python", "scripts/evaluate_cube_tray.py"]]
  assert job, "the first block does not run the cube-in-tray evaluation"
  argv = job[0][2:]
  assert "--num-envs" in argv and "--output" in argv
  # Its flags pass the tool's own checks (the output folder moved to tmp_path).
  argv[argv.index("--output") + 1] = str(tmp_path / "first_run")
  tool = load_tool("evaluate_cube_tray.py")
  args = cli_args.parse(tool.Args, argv)
  tool.check_args(args)
  assert capsys.readouterr().err == ""
  assert args.num_envs <= 8, "the first run stays small enough for a laptop CPU"
