"""The compiled control loop of the C engine (mjlab_tasks.engine.compiled_control).

Its targets against the torch action terms on the same states (fresh random
states and targets), its trajectories against mjlab's Python loop, its
recorded readings against the Python path's reads, bitwise determinism, and
the fallbacks (a term without a compiled form, no C++ compiler).
"""

from __future__ import annotations

import copy
import warnings

import mujoco
import numpy as np
import pytest
import torch
from control_reference import (
  FLOAT32_TERM_PER_UNIT,
  solve_tolerance,
  targets64,
  world_state64,
)

from assets.ur5_rg2.model import HOME_ARM_Q
from mjlab_tasks.common.verdict import task_verdict, verdict_term
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.cube_tray.mdp import VERDICT_TERM, read_cube_tray_raw
from mjlab_tasks.engine import compiled_control, make_env, native_control, worlds

NUM_ENVS = 4


def _env(arm_action: str, compiled: bool, num_envs: int = NUM_ENVS, **kwargs):
  cfg = cube_tray_env_cfg(arm_action=arm_action, num_envs=num_envs)
  cfg.seed = 0
  env = make_env(cfg, compiled_control=compiled, **kwargs)
  env.reset()
  return env


def _random_arm_state(env, rng, span: float = 0.6) -> None:
  """Random arm joint positions (within ``span`` rad of home) and velocities."""
  arm = env.action_manager.get_term("arm")
  q = torch.tensor(HOME_ARM_Q) + torch.tensor(
    rng.uniform(-span, span, (env.num_envs, 6))
  )
  qd = torch.tensor(rng.normal(0.0, 0.3, (env.num_envs, 6)))
  env.scene["robot"].write_joint_state_to_sim(
    q.float(), qd.float(), joint_ids=arm._joint_local_ids
  )
  env.sim.forward()


def _random_targets(env, rng) -> None:
  """Random targets: a pose up to 2 cm and 0.3 rad from the tool (Cartesian)
  or joints up to 0.1 rad from the current ones; some worlds without one."""
  from mjlab.utils.lab_api.math import quat_from_angle_axis, quat_mul

  arm = env.action_manager.get_term("arm")
  n = env.num_envs
  if isinstance(arm, compiled_control.CartesianPoseAction):
    pos, quat = arm.tool_pose_w()
    arm.desired_pos_w[:] = pos + torch.tensor(rng.uniform(-0.02, 0.02, (n, 3))).float()
    axis = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(n, 3))), dim=-1)
    angle = torch.tensor(rng.uniform(0.0, 0.3, n))
    arm.desired_quat_w[:] = quat_mul(quat_from_angle_axis(angle, axis).float(), quat)
  else:
    q = env.sim.data.qpos[:, arm._qpos_ids]
    arm.process_actions(q + torch.tensor(rng.uniform(-0.1, 0.1, (n, 6))).float())
  has_target = torch.tensor(rng.random(n) < 0.7)
  has_target[0], has_target[1] = True, False  # Both cases, every draw.
  arm._has_target[:] = has_target


@pytest.mark.parametrize("arm_action", ["cartesian", "joint"])
def test_compiled_targets_match_torch_terms(arm_action, rng):
  """On the same states, the compiled targets equal the torch term's
  arithmetic done in float64 on the same float64 state to 1e-9; the torch
  term itself computes in float32 on a float32 copy of the state, which
  moves its targets more near low-manipulability poses (measured up to
  5.3e-5 rad), so against it the bound grows there as
  control_reference.solve_tolerance says (at least 1e-5)."""
  env = _env(arm_action, compiled=False)
  loop = compiled_control.CompiledLoop(env)  # Built, not installed.
  arm = env.action_manager.get_term("arm")
  n = loop.control.n
  dofs = arm._dof_ids
  for _ in range(3):
    _random_arm_state(env, rng)
    _random_targets(env, rng)
    params = loop.params().numpy()
    # The reference on the worlds' own float64 state (what the compiled
    # control reads), and on the float32 copies (what the torch term reads).
    ctrl64, _ = targets64(env, arm, world_state64(env))
    arm.apply_actions()
    env.scene.write_data_to_sim()
    torch_ctrl = env.sim.data.ctrl[:, loop._arm_ctrl].double()
    torch_bias = env.sim.data.qfrc_applied[:, dofs].double().numpy()
    tol32 = solve_tolerance(env, arm, FLOAT32_TERM_PER_UNIT, 1e-5)
    for i, world in enumerate(worlds(env)):
      d = copy.copy(world)  # The same state, float64; the world is untouched.
      last_dq = np.zeros(2 * n)
      native_control.control_targets(d, loop.control, params[i], last_dq)
      ctrl = torch.from_numpy(d.ctrl[loop._arm_ctrl.numpy()])
      # The same arithmetic on the same float64 state (Cholesky against LU).
      assert torch.allclose(ctrl, ctrl64[i], rtol=0, atol=1e-9)
      # The float32 torch term itself: off the float64 math by its own
      # rounding and that of its state copy, amplified near low-manipulability
      # poses (control_reference.solve_tolerance).
      assert ((ctrl - torch_ctrl[i]).abs() <= tol32[i]).all()
      limited = torch.from_numpy(last_dq[n:])
      assert ((limited - arm.limited_dq[i].double()).abs() <= tol32[i]).all()
      # Bias forces: the same float64 values, rounded to float32 on one side.
      np.testing.assert_allclose(d.qfrc_applied[dofs.numpy()], torch_bias[i], rtol=1e-6)
      if not bool(arm._has_target[i]):
        np.testing.assert_array_equal(last_dq, 0.0)
  env.close()


def _run(env, actions: list[torch.Tensor]) -> torch.Tensor:
  """Each world's exact (float64) joint positions after every step [T, B, nq]."""
  qpos = []
  for action in actions:
    env.step(action)
    qpos.append(torch.from_numpy(env.sim.get_state(mujoco.mjtState.mjSTATE_QPOS)))
  return torch.stack(qpos)


def _actions(env, rng, steps: int) -> list[torch.Tensor]:
  dim = env.action_manager.total_action_dim
  return [
    torch.tensor(rng.uniform(-1, 1, (env.num_envs, dim))).float() for _ in range(steps)
  ]


# The Python loop rounds every target to float32 (the tensors mjlab reads).
# Measured on the float64 world states, 4 worlds from random arm states,
# full-lead actions: at most 1.0e-7 rad after one policy step (0.6 rad from
# home, 20 draws) and 1.2e-7 after six (START_SPAN, 24 draws: the rounding
# does not compound). A 1 % change of the compiled loop's DLS damping moved
# the six-step trajectory by 4.3e-7 at least, of its max_dq by 2.5e-4 at
# least; test_a_one_percent_change_leaves_the_tolerance checks that they
# fail it.
SINGLE_STEP_ERROR = 1.0e-7
TRAJECTORY_TOLERANCE = 2.5 * SINGLE_STEP_ERROR
STEPS = 6
START_SPAN = 0.3  # rad from home: away from the low-manipulability poses


def _trajectory(arm_action: str, rng, compiled: bool, start_seed: int, change=None):
  """Six steps from a random arm state (the same for ``start_seed``) with
  full-lead Cartesian actions (their sign: the targets move the most, so the
  damped solve and the step limit act) or joint targets 0.2 rad around the
  start; ``change`` = (control field, factor) alters the compiled loop."""
  env = _env(arm_action, compiled=compiled)
  assert (env.compiled_loop is not None) == compiled
  _random_arm_state(env, np.random.default_rng(start_seed), START_SPAN)
  if change is not None:
    field, factor = change
    setattr(
      env.compiled_loop.control,
      field,
      getattr(env.compiled_loop.control, field) * factor,
    )
  actions = [a.sign() for a in _actions(env, rng, STEPS)]
  if arm_action == "joint":
    q0 = env.sim.data.qpos[:, env.action_manager.get_term("arm")._qpos_ids].clone()
    for a in actions:
      a[:, :6] = q0 + 0.2 * a[:, :6]
  return env, _run(env, actions)


@pytest.mark.parametrize("arm_action", ["cartesian", "joint"])
def test_compiled_loop_follows_mjlab_loop(arm_action, rng_seed):
  python_env, expected = _trajectory(
    arm_action, np.random.default_rng(rng_seed), False, rng_seed + 1
  )
  compiled_env, got = _trajectory(
    arm_action, np.random.default_rng(rng_seed), True, rng_seed + 1
  )
  torch.testing.assert_close(got, expected, rtol=0, atol=TRAJECTORY_TOLERANCE)
  for key, value in task_verdict(python_env).items():
    torch.testing.assert_close(task_verdict(compiled_env)[key], value)
  python_env.close()
  compiled_env.close()


@pytest.mark.parametrize(
  "arm_action, change",
  [
    ("cartesian", ("damping", 1.01)),
    ("cartesian", ("max_dq", 1.01)),
    ("joint", ("max_dq", 0.99)),
  ],
)
def test_a_one_percent_change_leaves_the_tolerance(arm_action, change, rng_seed):
  # The trajectory test's tolerance is tight enough to see a 1 % change of
  # the compiled loop's damping or step limit (the Python loop unchanged).
  python_env, expected = _trajectory(
    arm_action, np.random.default_rng(rng_seed), False, rng_seed + 1
  )
  changed_env, got = _trajectory(
    arm_action, np.random.default_rng(rng_seed), True, rng_seed + 1, change
  )
  assert (got - expected).abs().max() > TRAJECTORY_TOLERANCE
  python_env.close()
  changed_env.close()


def test_substep_metric_accumulates_like_mjlabs_loop(monkeypatch):
  """mjlab averages a per-substep metric over the policy step's physics steps;
  the compiled loop hands the metrics manager all 50 values at once. With
  the values 0, 1, ..., 49 the step's metric must be their mean, 24.5."""
  env = _env("cartesian", compiled=True, num_envs=2)
  term = verdict_term(env)
  original, blocks = term.record_block, []

  def counting(values: torch.Tensor) -> torch.Tensor:
    original(values)
    blocks.append(values.shape[0])
    return torch.arange(values.shape[0]).float()[:, None].expand(-1, values.shape[1])

  monkeypatch.setattr(term, "record_block", counting)
  env.step(torch.zeros(2, env.action_manager.total_action_dim))
  assert blocks == [env.cfg.decimation]
  column = env.metrics_manager._term_names.index(VERDICT_TERM)
  torch.testing.assert_close(
    env.metrics_manager._step_values[:, column], torch.full((2,), 24.5)
  )
  env.close()


def test_recorded_readings_equal_python_reads(rng):
  env = _env("cartesian", compiled=True, num_envs=2)
  loop = env.compiled_loop
  term = verdict_term(env)
  _random_targets(env, rng)
  params = loop.params().numpy()
  start = env.sim.get_state()
  one_by_one = []
  for _ in range(5):
    readings, _ = env.sim.step_controlled(loop.control, params, 1, loop.record)
    values = torch.from_numpy(readings[:, 0]).float()
    # What the Python path reads from the tensors after the same step.
    from mjlab_tasks.cube_tray.mdp import raw_from_sources

    torch.testing.assert_close(
      raw_from_sources(values, term._sources), read_cube_tray_raw(env, term.names)
    )
    one_by_one.append(readings)
  after_one_by_one = env.sim.get_state()
  env.sim.set_state(list(range(env.num_envs)), start)
  block, _ = env.sim.step_controlled(loop.control, params, 5, loop.record)
  # Five steps in one call are the five steps one at a time, bitwise.
  np.testing.assert_array_equal(block, np.concatenate(one_by_one, axis=1))
  np.testing.assert_array_equal(env.sim.get_state(), after_one_by_one)
  env.close()


def test_compiled_loop_is_bitwise_deterministic(rng):
  actions = None
  states = []
  for threads in (1, 2):
    env = _env("cartesian", compiled=True, num_envs=3, num_threads=threads)
    actions = actions or _actions(env, rng, 4)
    _run(env, actions)
    states.append(env.sim.get_state())
    env.close()
  np.testing.assert_array_equal(states[0], states[1])


def test_terms_without_compiled_form_keep_mjlab_loop():
  from mjlab.managers.metrics_manager import MetricsTermCfg

  cfg = cube_tray_env_cfg(num_envs=1)
  cfg.metrics["every_step"] = MetricsTermCfg(
    func=lambda env: env.sim.data.time, per_substep=True
  )
  env = make_env(cfg)
  assert env.compiled_loop is None
  reason = compiled_control.why_not(env)
  assert "every_step" in reason
  env.reset()
  env.step(torch.zeros(1, env.action_manager.total_action_dim))  # Still runs.
  env.close()


@pytest.mark.parametrize("what", ["no compiler", "unwritable cache"])
def test_without_compiler_mjlab_loop_runs(tmp_path, monkeypatch, what):
  if what == "no compiler":
    monkeypatch.setenv("MJLAB_TASKS_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    expected = "no-such-compiler"
  else:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("MJLAB_TASKS_CACHE", str(tmp_path / "a-file" / "cache"))
    expected = "a-file"
  native_control.library.cache_clear()
  native_control.available.cache_clear()
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      env = _env("cartesian", compiled=True, num_envs=1)
    assert env.compiled_loop is None
    messages = [str(w.message) for w in caught]
    assert any(expected in m and "Python control loop" in m for m in messages)
    env.step(torch.zeros(1, env.action_manager.total_action_dim))
    env.close()
  finally:
    native_control.library.cache_clear()
    native_control.available.cache_clear()


def test_mujoco_error_inside_the_loop_raises_instead_of_exiting():
  """C MuJoCo's default error handler exits the process; inside the compiled
  loop an error (here the arena overflowing with contacts) raises
  mujoco.FatalError with MuJoCo's message, and the handlers are restored."""
  import mujoco

  boxes = "".join(
    f'<body pos="{0.01 * i} 0 {0.05 + 0.03 * i}"><freejoint/>'
    '<geom type="box" size=".05 .05 .05"/></body>'
    for i in range(40)
  )
  xml = (
    '<mujoco><size memory="40K"/><worldbody><geom type="plane" size="1 1 .1"/>'
    f"{boxes}</worldbody></mujoco>"
  )
  model = mujoco.MjModel.from_xml_string(xml)
  control = native_control.ArmControl()  # mode 0: physics only
  with pytest.raises(mujoco.FatalError, match="mj_stackAlloc"):
    native_control.run_world(
      model,
      mujoco.MjData(model),
      control,
      np.zeros(native_control.NUM_PARAMS),
      200,
      np.zeros(0, dtype=np.uint64),
      np.zeros((200, 0)),
      np.zeros(0),
    )
  # The bindings' own error path still works afterwards, in this thread.
  with pytest.raises(mujoco.FatalError, match="mj_stackAlloc"):
    data = mujoco.MjData(model)
    for _ in range(200):
      mujoco.mj_step(model, data)
