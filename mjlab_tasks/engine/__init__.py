"""The simulation engines behind mjlab's environment, behind one face.

Two engines run every task unchanged: MuJoCo Warp (``warp``, mjlab's own,
batched on a GPU) and the C MuJoCo engine (``mujoco``, a pool of
``MjData`` stepped in threads on the CPU, bitwise reproducible). This package
is the only place that touches mjlab's private members or patches anything;
tasks, experts, tools and tests use only the names below and never branch on
the engine's name (they ask ``traits(engine)`` what it can do).

- ``make_env(cfg, device, engine)``: mjlab's ``ManagerBasedRlEnv`` on either.
- ``resolve_engine``, ``default_device``, ``ENGINES``, ``traits``.
- ``states(env)``: each world's integration state, ``get()`` / ``set(ids,
  states)``; ``worlds(env)``: one ``MjData`` per world.
- ``mjlab_builds_on(engine)``: mjlab's own scripts (train, play) build their
  environments on ``engine`` inside the block.

Importing this package is light: the engines load on first use.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
  from collections.abc import Iterator

  import mujoco
  import numpy as np
  from mjlab.envs import ManagerBasedRlEnv

Engine = Literal["warp", "mujoco"]
ENGINES: tuple[Engine, ...] = ("warp", "mujoco")


@dataclass(frozen=True)
class EngineTraits:
  """What an engine can do, for code that must adapt to it."""

  cpu_only: bool
  """Runs on the CPU only (the C engine)."""
  exact_states: bool
  """States are the float64 ones physics steps from: replays are exact."""
  one_process: bool
  """Several processes must not share it (a GPU context): run tables in one."""
  reports_overflow: bool
  """Counts contact or constraint buffer overflows per world."""
  picture_gl: str
  """The headless OpenGL backend its workers draw pictures with."""
  c_worlds: bool
  """Its worlds are C MuJoCo ``MjData``: compiled C code (``native_control``)
  can step them, through ``env.sim.run_worlds``."""


_TRAITS = {
  "warp": EngineTraits(
    cpu_only=False,
    exact_states=False,
    one_process=True,
    reports_overflow=True,
    picture_gl="egl",
    c_worlds=False,
  ),
  "mujoco": EngineTraits(
    cpu_only=True,
    exact_states=True,
    one_process=False,
    reports_overflow=False,
    picture_gl="osmesa",
    c_worlds=True,
  ),
}


def _check(engine: str) -> None:
  if engine not in _TRAITS:
    raise ValueError(f"Unknown engine '{engine}' (use 'warp' or 'mujoco').")


def traits(engine: str) -> EngineTraits:
  _check(engine)
  return _TRAITS[engine]


def resolve_engine(engine: str | None, device: str) -> Engine:
  """Default: MuJoCo Warp on CUDA, the C engine on the CPU."""
  if engine is None:
    return "warp" if device.startswith("cuda") else "mujoco"
  _check(engine)
  if traits(engine).cpu_only and device != "cpu":
    raise ValueError(f"The C MuJoCo engine runs on the CPU; got --device {device}.")
  return engine  # type: ignore[return-value]


def default_device(engine: str | None) -> str:
  """The device ``engine`` (None: the default engine) runs on by default:
  CUDA when it can and one is present, else the CPU."""
  if engine is not None and traits(engine).cpu_only:
    return "cpu"
  import torch

  return "cuda:0" if torch.cuda.is_available() else "cpu"


def engine_of(env: ManagerBasedRlEnv) -> Engine:
  """The engine an environment runs on."""
  from mjlab_tasks.engine.c_engine import CMujocoSimulation

  return "mujoco" if isinstance(env.sim, CMujocoSimulation) else "warp"


def make_env(
  cfg,
  device: str = "cpu",
  engine: str | None = None,
  num_threads: int | None = None,
  compiled_control: bool | None = None,
  **kwargs,
) -> ManagerBasedRlEnv:
  """mjlab's ``ManagerBasedRlEnv`` on MuJoCo Warp or on the C MuJoCo engine
  (``c_engine.make_env`` documents the arguments)."""
  from mjlab_tasks.engine.c_engine import make_env as build

  return build(cfg, device, engine, num_threads, compiled_control, **kwargs)


def states(env: ManagerBasedRlEnv):
  """Each world's integration state: ``get()`` [num_envs, size] float64,
  ``set(ids, states)``, ``size``, ``exact`` (bit-exact on the C engine)."""
  from mjlab_tasks.engine.state import CStates, WarpStates

  return CStates(env) if engine_of(env) == "mujoco" else WarpStates(env)


def worlds(env: ManagerBasedRlEnv) -> list[mujoco.MjData]:
  """One ``MjData`` per world: on the C engine the worlds themselves (float64,
  live: they change as the environment steps), on MuJoCo Warp copies rebuilt
  from its state."""
  from mjlab_tasks.engine.state import world_copies

  if engine_of(env) == "mujoco":
    return list(env.sim.worlds)
  return world_copies(env)


def forward(env: ManagerBasedRlEnv, rows: np.ndarray | None = None) -> None:
  """Recompute derived quantities from the state, of worlds ``rows`` (bool
  [num_envs]) where the engine can do that alone (the C engine: the others'
  results then do not depend on it), else of all."""
  if rows is not None and engine_of(env) == "mujoco":
    env.sim.forward_worlds(rows)
  else:
    env.sim.forward()


def sensor_fields(env: ManagerBasedRlEnv, sensor: str) -> list[tuple[str, str]]:
  """(field, MuJoCo sensor name) of each reading of one of mjlab's
  multi-field sensors (``ContactSensor``), in its order."""
  return [
    (slot.field_name, slot.sensor_name) for slot in env.scene.sensors[sensor]._slots
  ]


def copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
  """An independent copy of a compiled model (its arrays are not shared)."""
  import copy

  return copy.copy(model)


@contextlib.contextmanager
def mjlab_builds_on(engine: Engine, viewer: bool = False) -> Iterator[None]:
  """mjlab's own scripts (train, play) build their environments on
  ``engine`` inside this block, with the compiled control loop where it is
  the default; ``viewer``: mjlab's viser viewer accepts the C engine too."""
  import torch

  from mjlab_tasks.engine.c_engine import CMujocoSimulation, simulation_class
  from mjlab_tasks.engine.compiled_control import on_every_env

  cpu = traits(engine).cpu_only
  if cpu or (
    not os.environ.get("CUDA_VISIBLE_DEVICES") and not torch.cuda.is_available()
  ):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # mjlab's CPU mode
  with contextlib.ExitStack() as stack:
    if engine == "mujoco":
      stack.enter_context(simulation_class(CMujocoSimulation))
      if viewer:
        stack.enter_context(_viewer_accepts(CMujocoSimulation))
    stack.enter_context(on_every_env())
    yield


@contextlib.contextmanager
def _viewer_accepts(cls) -> Iterator[None]:
  """mjlab's viser viewer asserts that the simulation is mjlab's own class;
  ``cls`` offers the same interface."""
  import mjlab.viewer.viser.viewer as viser_viewer

  original = viser_viewer.Simulation
  viser_viewer.Simulation = (original, cls)
  try:
    yield
  finally:
    viser_viewer.Simulation = original
