"""Bare physics, the reference the benchmark holds each engine's environment
step against: the same physics steps without mjlab's managers or the
suite's terms (``scripts/benchmark.py``, docs/benchmarks.md).

C engine: ``mujoco.rollout`` from every state the timed steps started from,
each holding that step's inputs, with the engine's thread count. MuJoCo
Warp: ``mujoco_warp.step`` (its CUDA graph where captured) on the
environment's own model and data.
"""

from __future__ import annotations

import time

import mujoco
import numpy as np

from mjlab_tasks.engine import copy_model, engine_of

_C_CONTROL_SPEC = (
  "mjSTATE_CTRL",
  "mjSTATE_QFRC_APPLIED",
  "mjSTATE_MOCAP_POS",
  "mjSTATE_MOCAP_QUAT",
)


def c_specs():
  control = 0
  for name in _C_CONTROL_SPEC:
    control |= getattr(mujoco.mjtState, name)
  return mujoco.mjtState.mjSTATE_FULLPHYSICS, control


def c_world_states(env):
  """Each world's full physics state and its inputs (controls, applied
  forces, mocap poses) now, float64 [num_envs, size] each."""
  model, worlds = env.sim.mj_model, env.sim.worlds
  specs = c_specs()
  out = []
  for spec in specs:
    values = np.zeros((len(worlds), mujoco.mj_stateSize(model, spec)))
    for i, world in enumerate(worlds):
      mujoco.mj_getState(model, world, values[i], spec)
    out.append(values)
  return out


def c_world_models(env, rows: int):
  """The compiled model, or, when worlds differ (per-table meshes, domain
  randomization), each world's own model for each of ``rows`` states taken
  world after world (row r is world r mod num_envs): a state of one world
  stepped in another's model would start inside wrong geometry."""
  sim = env.sim
  expanded = sim._model.expanded
  if not expanded:
    return sim.mj_model
  models = []
  for i in range(sim.num_envs):
    model = copy_model(sim.mj_model)
    for name, values in expanded.items():
      np.copyto(getattr(model, name), values[i].numpy())
    models.append(model)
  return [models[r % sim.num_envs] for r in range(rows)]


def bare_c_rollout(env, initial, control, nstep: int) -> float:
  """``mujoco.rollout`` physics steps per second, with the engine's thread
  count: ``nstep`` steps from each row of ``initial`` holding that row's
  inputs ``control``."""
  from mujoco import rollout

  sim = env.sim
  model = c_world_models(env, len(initial))
  _, control_spec = c_specs()
  control = control[:, None].repeat(nstep, axis=1)
  datas = [mujoco.MjData(sim.mj_model) for _ in range(sim.num_threads)]
  warm = control[:, :2]
  rollout.rollout(model, datas, initial, warm, control_spec=control_spec, nstep=2)
  start = time.perf_counter()
  rollout.rollout(
    model, datas, initial, control, control_spec=control_spec, nstep=nstep
  )
  return len(initial) * nstep / (time.perf_counter() - start)


def _warp_steps(sim, n: int) -> None:
  """``n`` physics steps of every world with MuJoCo Warp alone (its CUDA
  graph where captured), finished."""
  import mujoco_warp as mjwarp
  import warp as wp

  with wp.ScopedDevice(sim.wp_device):
    for _ in range(n):
      if sim.use_cuda_graph and sim.step_graph is not None:
        wp.capture_launch(sim.step_graph)
      else:
        mjwarp.step(sim.wp_model, sim.wp_data)
    wp.synchronize()


def bare_warp_step(env, steps: int) -> float:
  """mujoco_warp.step alone on the env's own model and data."""
  import mujoco_warp as mjwarp
  import warp as wp

  sim = env.sim
  nstep = steps * env.cfg.decimation
  with wp.ScopedDevice(sim.wp_device):
    mjwarp.step(sim.wp_model, sim.wp_data)  # warm-up
    wp.synchronize()
  start = time.perf_counter()
  _warp_steps(sim, nstep)
  return sim.num_envs * nstep / (time.perf_counter() - start)


class Reference:
  """Bare physics beside a timed run: ``record()`` before each timed policy
  step (the C engine keeps the states it starts from), then ``rates(steps,
  decimation)``: the row entries and the bare physics steps per second the
  run is divided by."""

  def __init__(self, env):
    self.env, self.c = env, engine_of(env) == "mujoco"
    self.visited: list = []

  def record(self) -> None:
    if self.c:
      self.visited.append(c_world_states(self.env))

  def rates(self, steps: int, decimation: int) -> tuple[dict, float]:
    env = self.env
    if not self.c:
      bare = bare_warp_step(env, steps)
      return {"bare_physics_steps_per_s": round(bare, 1)}, bare
    # The reference: bare physics from every state the timed steps started
    # from, for one policy step each (the same states, contacts and number
    # of physics steps as the measured run, each holding its step's first
    # inputs); and, as before, from the last state only, for all the steps.
    initial = np.concatenate([states for states, _ in self.visited])
    control = np.concatenate([inputs for _, inputs in self.visited])
    bare = bare_c_rollout(env, initial, control, decimation)
    last, last_inputs = c_world_states(env)
    row = {
      "threads": env.sim.num_threads,
      "rollout_physics_steps_per_s": round(bare, 1),
      "rollout_from_last_state_physics_steps_per_s": round(
        bare_c_rollout(env, last, last_inputs, steps * decimation), 1
      ),
    }
    return row, bare


def world_stepper(env) -> tuple[str, callable]:
  """(row key, ``step(n)``): ``n`` bare physics steps of every world, for the
  glass examiner's loop, which has no policy step to replay."""
  sim = env.sim
  if engine_of(env) == "mujoco":

    def step(n: int) -> None:
      sim.run_worlds(lambda model, d, i: mujoco.mj_step(model, d, nstep=n))

    return "rollout_physics_steps_per_s", step
  return "bare_physics_steps_per_s", lambda n: _warp_steps(sim, n)
