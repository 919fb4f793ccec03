"""Every task this suite registers: found by mjlab, builds, resets and steps;
and importing the suite's packages stays light (no mjlab).

Modelled on mjlab's own tests/test_task_configs.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from mjlab.tasks.registry import list_tasks, load_env_cfg

import mjlab_tasks.tasks  # noqa: F401 - mjlab's registry
from mjlab_tasks.engine import make_env

SUITE_TASKS = ("CubeTray-UR5-RG2", "BinPick-UR5-RG2", "GlassPush-UR5-RG2")
GYM_IDS = tuple(t + s for t in SUITE_TASKS for s in ("", "-Play"))


def _python(code: str) -> subprocess.CompletedProcess:
  """``code`` in a fresh interpreter; it must succeed."""
  run = subprocess.run(
    [sys.executable, "-W", "ignore", "-c", code],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert run.returncode == 0, run.stderr[-3000:]
  return run


def test_suite_tasks_registered():
  assert mjlab_tasks.tasks.TASK_IDS == SUITE_TASKS
  for task in SUITE_TASKS:
    assert task in list_tasks()


def test_the_library_registry_holds_every_task():
  """``mjlab_tasks.registry.TASKS``, what the tools look tasks up in, names
  the tasks mjlab registers; each factory builds its task's configuration,
  the play one as mjlab's registry holds it; each demonstration task
  rebuilds from the settings a file records."""
  from mjlab_tasks.registry import DEMO_TASKS, TASKS, demo_task_from_env_args

  assert tuple(TASKS) == SUITE_TASKS
  for task_id, task in TASKS.items():
    assert task.task_id == task_id
    ours = task.env_cfg(num_envs=1, play=True)
    assert list(ours.observations["actor"].terms) == list(
      load_env_cfg(task_id, play=True).observations["actor"].terms
    )
    assert (task.expert is None) == (task_id == "GlassPush-UR5-RG2")
  assert DEMO_TASKS == ("CubeTray-UR5-RG2", "BinPick-UR5-RG2")
  settings = {"CubeTray-UR5-RG2": (240,), "BinPick-UR5-RG2": (600, 6, 0.14, 0.06, 3)}
  for task_id in DEMO_TASKS:
    demo = TASKS[task_id].demo_task(*settings[task_id])
    recorded = {"env_name": task_id, "env_kwargs": demo.env_kwargs}
    again = demo_task_from_env_args(recorded)
    assert again.task_id == task_id and again.env_kwargs == demo.env_kwargs


def test_bin_pick_demo_files_name_their_object_set():
  """A file records its object set; one recorded before sets existed (no
  ``object_set``) held the former default set, now the hard set."""
  from mjlab_tasks.registry import TASKS, demo_task_from_env_args

  def kinds(env_kwargs: dict) -> set[str]:
    recorded = {"env_name": "BinPick-UR5-RG2", "env_kwargs": env_kwargs}
    task = demo_task_from_env_args(recorded)
    pour = task.make_cfg(task.env_kwargs, 1).events["pour"].params["pour"]
    return {d.kind for d in pour.objects}

  demo = TASKS["BinPick-UR5-RG2"].demo_task(600, 5, 0.14, 0.06, 3)
  assert demo.env_kwargs["object_set"] == "default"
  assert "cylinder" in kinds(demo.env_kwargs)
  legacy = {k: v for k, v in demo.env_kwargs.items() if k != "object_set"}
  assert "wide" in kinds(legacy) and "cylinder" not in kinds(legacy)


def test_importing_the_packages_imports_no_mjlab():
  """The suite's packages (what a solution process imports, e.g. the glass
  examiner's client) import neither mjlab nor torch; they register the
  Gymnasium ids only (strings: mjlab comes when an environment is built)."""
  code = (
    "import sys\n"
    "import gymnasium as gym\n"
    "import mjlab_tasks, mjlab_tasks.glass_push, mjlab_tasks.cube_tray\n"
    "import mjlab_tasks.bin_pick, mjlab_tasks.common.gym_env\n"
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mjlab', 'torch'))\n"
    "assert not heavy, heavy[:10]\n"
    f"assert all(i in gym.registry for i in {GYM_IDS!r})\n"
    "assert mjlab_tasks.glass_push.TASK_ID == 'GlassPush-UR5-RG2'\n"
  )
  _python(code)


@pytest.mark.parametrize(
  "first",
  [
    "import mjlab",  # mjlab's own list-envs / train / play: the entry point
    # This suite's scripts and tests (slow: every test process that builds a
    # task does the same import).
    pytest.param("import mjlab_tasks.tasks", marks=pytest.mark.slow),
  ],
)
def test_entry_point_registers_every_id(first):
  """From either import, in a fresh interpreter: the three tasks (training
  and play configurations) in mjlab's registry, the six Gymnasium ids, and
  the entry point mjlab loads is this suite's."""
  code = (
    f"{first}\n"
    "from importlib.metadata import entry_points\n"
    "import gymnasium as gym\n"
    "from mjlab.tasks.registry import list_tasks, load_env_cfg\n"
    "(ep,) = [e for e in entry_points(group='mjlab.tasks')"
    " if e.value.startswith('mjlab_tasks')]\n"
    "assert ep.value == 'mjlab_tasks.entry_point', ep\n"
    f"for task in {SUITE_TASKS!r}:\n"
    "  assert task in list_tasks(), task\n"
    "  assert load_env_cfg(task).episode_length_s > 0\n"
    "  assert load_env_cfg(task, play=True).episode_length_s > 0\n"
    f"assert all(i in gym.registry for i in {GYM_IDS!r})\n"
  )
  run = _python(code)
  assert "Failed to load task package" not in run.stderr, run.stderr[-3000:]


def test_a_suite_module_imported_before_mjlab():
  """A suite module that imports mjlab first (half-imported when mjlab loads
  its entry points): no failed entry point, and ``mjlab_tasks.tasks``
  imported afterwards registers the tasks."""
  code = (
    "import mjlab_tasks.cube_tray.env_cfg\n"
    "import mjlab_tasks.tasks\n"
    "from mjlab.tasks.registry import list_tasks\n"
    f"assert set(list_tasks()) >= set({SUITE_TASKS!r})\n"
  )
  run = _python(code)
  assert "Failed to load task package" not in run.stderr, run.stderr[-3000:]


@pytest.mark.parametrize("task", SUITE_TASKS)
@pytest.mark.parametrize("play", [False, True])
def test_task_builds_resets_and_steps(task, play, rng_seed):
  cfg = load_env_cfg(task, play=play)
  cfg.scene.num_envs = 2
  # The CPU default (C engine); MuJoCo Warp runs these tasks in the other tests.
  env = make_env(cfg, device="cpu")
  try:
    gen = torch.Generator().manual_seed(rng_seed)
    obs, _ = env.reset()
    action_dim = env.action_manager.total_action_dim
    for _ in range(3):
      action = torch.rand(env.num_envs, action_dim, generator=gen) * 2 - 1
      obs, reward, terminated, truncated, _ = env.step(action)
      assert reward.shape == (env.num_envs,) and torch.isfinite(reward).all()
      assert terminated.shape == truncated.shape == (env.num_envs,)
      for group, value in obs.items():
        assert value.shape[0] == env.num_envs, group
        assert torch.isfinite(value).all(), group
  finally:
    env.close()
