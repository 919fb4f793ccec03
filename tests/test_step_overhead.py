"""What makes a policy step cheaper without changing it: observation terms
shared between groups, the site pose read from the body quaternion, torch's
intra-op threads beside the C engine's, and the benchmark's bare-physics
reference (the states the run visited)."""

from __future__ import annotations

import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from mjlab.utils.lab_api.math import quat_from_matrix

from mjlab_tasks.common import mdp as common_mdp
from mjlab_tasks.cube_tray.env_cfg import cube_tray_env_cfg
from mjlab_tasks.engine import c_engine, make_env, worlds
from mjlab_tasks.engine.shared_observations import SharedTerm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

NUM_ENVS = 3


def _env(play: bool = True, share: bool = True, **kwargs):
  cfg = cube_tray_env_cfg(num_envs=NUM_ENVS, play=play)
  cfg.seed = 0
  if share:
    env = make_env(cfg, device="cpu", engine="mujoco", **kwargs)
  else:  # make_env shares; build the same environment without it.
    from mjlab.envs import ManagerBasedRlEnv

    from mjlab_tasks.engine import compiled_control

    with c_engine.simulation_class(c_engine.CMujocoSimulation):
      env = ManagerBasedRlEnv(cfg, device="cpu")
    compiled_control.install(env)
  env.reset()
  return env


def _actions(rng, steps: int) -> list[torch.Tensor]:
  return [torch.tensor(rng.uniform(-1, 1, (NUM_ENVS, 7))).float() for _ in range(steps)]


def test_shared_terms_give_the_unshared_observations(rng):
  """The actor's terms repeated in the critic are computed once per pass,
  and every group's observations equal those of the same environment
  without sharing, step after step."""
  shared, plain = _env(), _env(share=False)
  assert shared.observation_manager._shared_pass is not None
  groups = shared.observation_manager._group_obs_term_cfgs
  actor = {type(c.func) for c in groups["actor"]}
  assert actor == {SharedTerm}, "every actor term is repeated in the critic"
  privileged = [c for c in groups["critic"] if not isinstance(c.func, SharedTerm)]
  assert len(privileged) == 3  # cube pose, tray pose, cube velocity
  calls = []
  term = groups["critic"][0].func
  inner = term.func
  term.func = lambda env, **p: calls.append(1) or inner(env, **p)
  for action in _actions(rng, 4):
    calls.clear()
    obs_a = shared.step(action)[0]
    assert len(calls) == 1, "computed once for both groups"
    obs_b = plain.step(action)[0]
    for group in ("actor", "critic"):
      torch.testing.assert_close(obs_a[group], obs_b[group], rtol=0, atol=0)
  # Outside a pass (a direct compute_group call) the term is computed anew.
  calls.clear()
  shared.observation_manager.compute_group("actor")
  shared.observation_manager.compute_group("critic")
  assert len(calls) == 2
  shared.close()
  plain.close()


def test_actor_noise_stays_out_of_the_critic(rng):
  """Training configuration: the actor's observations are corrupted, the
  critic's repeated terms are not (each group clones the shared value)."""
  env = _env(play=False)
  env.step(_actions(rng, 1)[0])
  manager = env.observation_manager
  obs = manager.compute(update_history=True)
  names = manager._group_obs_term_names["actor"]
  dims = [int(np.prod(d)) for d in manager._group_obs_term_dim["actor"]]
  start = sum(dims[: names.index("tcp_to_cube")])
  clean = manager.compute_group("critic")[:, start : start + 3]
  torch.testing.assert_close(obs["critic"][:, start : start + 3], clean)
  assert not torch.equal(obs["actor"][:, start : start + 3], clean)
  env.close()


def test_site_pose_quaternion_matches_the_site_matrix(rng):
  """``site_pose_w``'s quaternion (body quaternion times the site's local
  one) against ``quat_from_matrix`` of MuJoCo's ``site_xmat``, with its
  sign, over random arm states."""
  env = _env()
  robot = env.scene["robot"]
  arm = env.action_manager.get_term("arm")
  cfg = env.observation_manager._group_obs_term_cfgs["actor"][2]
  assert env.observation_manager._group_obs_term_names["actor"][2] == "tcp_pose"
  for _ in range(5):
    q = torch.tensor(rng.uniform(-np.pi, np.pi, (NUM_ENVS, 6))).float()
    robot.write_joint_state_to_sim(
      q, torch.zeros_like(q), joint_ids=arm._joint_local_ids
    )
    env.sim.forward()
    pose = cfg.func(env, **cfg.params)
    sid = common_mdp.site_id(env, "tcp")
    ref = quat_from_matrix(env.sim.data.site_xmat[:, sid].reshape(-1, 3, 3))
    torch.testing.assert_close(pose[:, 3:], ref, rtol=0, atol=1e-6)
    pos = env.sim.data.site_xpos[:, sid] - env.scene.env_origins
    torch.testing.assert_close(pose[:, :3], pos, rtol=0, atol=0)
  env.close()


def test_torch_leaves_the_cores_to_the_worlds(monkeypatch):
  """Several worker threads: torch gets one intra-op thread, unless
  OMP_NUM_THREADS chose a count."""
  before = torch.get_num_threads()
  try:
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    c_engine.leave_cores_to_worlds()
    assert torch.get_num_threads() == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    c_engine.leave_cores_to_worlds()
    assert torch.get_num_threads() == 1
  finally:
    torch.set_num_threads(before)


def _glass_env():
  from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

  return glass_push_env_cfg(tables=(0, 1), num_envs=2, end_on_success=False)


@pytest.mark.parametrize("task", ["cube_tray_joint", "cube_tray_cartesian", "glass"])
def test_benchmark_reference_starts_from_the_visited_states(task, rng):
  """What the benchmark records before a step (state and inputs: controls,
  applied forces, mocap) and each world's own model (the glass tables'
  meshes differ per world) are all ``mujoco.rollout`` needs: a rollout of
  one policy step from them, with the inputs mjlab's loop applied at each
  physics step, reproduces that step (measured: bitwise on the cube tray,
  within 2e-16 m on the glass tables)."""
  from mujoco import rollout

  from mjlab_tasks.engine import bare_physics

  if task == "glass":
    cfg = _glass_env()
  else:
    cfg = cube_tray_env_cfg(arm_action=task.rsplit("_", 1)[1], num_envs=2)
  cfg.seed = 0
  env = make_env(cfg, device="cpu", engine="mujoco", compiled_control=False)
  env.reset()
  dim = env.action_manager.total_action_dim
  action = torch.tensor(rng.uniform(-1, 1, (2, dim))).float()
  env.step(action)
  initial, _ = bare_physics.c_world_states(env)
  _, control_spec = bare_physics.c_specs()
  model = env.sim.mj_model
  models = bare_physics.c_world_models(env, 2)
  assert (task == "glass") == isinstance(models, list)
  size = mujoco.mj_stateSize(model, control_spec)
  inputs = np.zeros((2, env.cfg.decimation, size))
  original = env.sim.step

  def step_recording():  # The inputs of every physics step.
    original()
    k = step_recording.k
    for i, world in enumerate(worlds(env)):
      mujoco.mj_getState(model, world, inputs[i, k], control_spec)
    step_recording.k += 1

  step_recording.k = 0
  env.sim.step = step_recording
  env.action_manager.process_action(torch.tensor(rng.uniform(-1, 1, (2, dim))).float())
  for _ in range(env.cfg.decimation):
    env.action_manager.apply_action()
    env.scene.write_data_to_sim()
    env.sim.step()
  full = mujoco.mjtState.mjSTATE_FULLPHYSICS
  expected = np.zeros((2, mujoco.mj_stateSize(model, full)))
  for i, world in enumerate(worlds(env)):
    mujoco.mj_getState(model, world, expected[i], full)
  states, _ = rollout.rollout(
    models,
    [mujoco.MjData(model)],
    initial,
    inputs,
    control_spec=control_spec,
    nstep=env.cfg.decimation,
  )
  np.testing.assert_allclose(states[:, -1], expected, rtol=0, atol=1e-12)
  env.close()
