"""mjlab's decimation loop with the arm control compiled, on both engines.

Per physics step mjlab's ``ManagerBasedRlEnv.step`` calls
``action_manager.apply_action()``, ``scene.write_data_to_sim()``,
``sim.step()``, ``scene.update(dt)`` and ``metrics_manager.compute_substep()``
(50 times per policy step at 1 kHz / 20 Hz), each in Python. When every
piece of that has a compiled form, ``install`` reroutes the loop: the first
``apply_action`` of a policy step runs all its physics steps (the arm term's
IK or joint step, the joint targets, bias compensation, the physics step,
the readings) in compiled code: on the C engine per world in
``native_control`` in the engine's worker threads, on MuJoCo Warp as
``warp_control``'s kernels, one captured graph per policy step on CUDA. The
other calls
return at once; ``scene.update`` runs once, after the last step; and each
per-substep metric term takes the readings recorded after every step in one
block, accumulated as mjlab's per-substep calls would. The rest of ``step``
(rewards, terminations, resets, observations) is mjlab's.

Compiled forms: ``CartesianPoseAction`` and ``JointTargetAction`` (per
physics step, in C or Warp kernels), ``GripperAction`` (constant over a policy step, applied
once), per-substep metric terms with ``substep_sources`` / ``record_block``
(``CubeTrayVerdict``). Anything else (another action term, a custom or
delayed actuator, a sensor with per-step state) keeps mjlab's loop:
``why_not`` says which.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import mujoco
import torch

from mjlab_tasks.common.actions import (
  CartesianPoseAction,
  GripperAction,
  JointTargetAction,
)
from mjlab_tasks.engine import native_control

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

_ARM_TERMS = (CartesianPoseAction, JointTargetAction)
_ONCE_PER_STEP_TERMS = (GripperAction,)


def _arm_ctrl_ids(model: mujoco.MjModel, joint_ids: list[int]) -> list[int]:
  """The position actuator driving each joint (``ctrl`` = joint target)."""
  ids = []
  for j in joint_ids:
    found = [
      a
      for a in range(model.nu)
      if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
      and model.actuator_trnid[a, 0] == j
    ]
    if len(found) != 1:
      raise ValueError(f"joint {j} has {len(found)} actuators, expected one")
    ids.append(found[0])
  return ids


def why_not(env: ManagerBasedRlEnv) -> str | None:
  """Why this environment cannot use the compiled loop (None if it can)."""
  from mjlab.sensor.contact_sensor import ContactSensor
  from mjlab.sensor.sensor import Sensor
  from mjlab.sim.sim import Simulation

  from mjlab_tasks.engine.c_engine import CMujocoSimulation

  if not isinstance(env.sim, CMujocoSimulation | Simulation):
    return f"unknown simulation {type(env.sim).__name__}"
  terms = list(env.action_manager._terms.values())
  arm = [t for t in terms if type(t) in _ARM_TERMS]
  other = [t for t in terms if type(t) not in _ARM_TERMS + _ONCE_PER_STEP_TERMS]
  if other:
    return f"action term {type(other[0]).__name__} has no compiled form"
  if len(arm) > 1:
    return "more than one arm action term"
  if arm and len(arm[0]._joint_names) > native_control.MAX_ARM:
    return f"more than {native_control.MAX_ARM} arm joints"
  for name, entity in env.scene.entities.items():
    if entity._custom_actuators or entity._builtin_group._delayed_groups:
      return f"entity '{name}' has custom or delayed actuators"
    if entity._fused_actuator_group._groups:
      return f"entity '{name}' has fused actuators"
  for name, sensor in env.scene.sensors.items():
    stateful = isinstance(sensor, ContactSensor) and (
      sensor.cfg.track_air_time or sensor.cfg.history_length > 0
    )
    if stateful or (
      not isinstance(sensor, ContactSensor) and type(sensor).update is not Sensor.update
    ):
      return f"sensor '{name}' updates state every physics step"
  manager = env.metrics_manager
  for idx in getattr(manager, "_substep_term_indices", []):
    term = manager._term_cfgs[idx].func
    if not hasattr(term, "substep_sources"):
      return f"per-substep metric {manager._term_names[idx]!r} has no compiled reading"
  if isinstance(env.sim, CMujocoSimulation) and not native_control.available():
    return "the compiled control library could not be built"
  return None


def configure_arm(
  control: native_control.ArmControl, model: mujoco.MjModel, arm
) -> None:
  """Fill ``control`` from an arm action term (Cartesian or joint)."""
  c = control
  joints = arm._joint_global_ids.tolist()
  c.mode = (
    native_control.MODE_CARTESIAN
    if isinstance(arm, CartesianPoseAction)
    else native_control.MODE_JOINT
  )
  c.n = len(joints)
  c.bias_compensation = int(arm.cfg.bias_compensation)
  c.site = getattr(arm, "_site_id", -1)
  c.max_dq = arm.cfg.max_dq
  c.damping = getattr(arm.cfg, "damping", 0.0)
  for k, (j, qadr, dof, ctrl) in enumerate(
    zip(
      joints,
      arm._qpos_ids.tolist(),
      arm._dof_ids.tolist(),
      _arm_ctrl_ids(model, joints),
      strict=True,
    )
  ):
    if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
      raise ValueError("the compiled control supports hinge joints only")
    c.joint[k], c.qpos_adr[k], c.dof_adr[k], c.ctrl[k] = j, qadr, dof, ctrl


class CompiledLoop:
  """The rerouted decimation loop of one environment (see the module doc)."""

  def __init__(self, env: ManagerBasedRlEnv):
    self.env = env
    terms = list(env.action_manager._terms.values())
    arms = [t for t in terms if type(t) in _ARM_TERMS]
    self.arm = arms[0] if arms else None
    self.once_terms = [t for t in terms if type(t) in _ONCE_PER_STEP_TERMS]
    self.control = native_control.ArmControl()
    self._params = torch.zeros(
      env.num_envs, native_control.NUM_PARAMS, dtype=torch.float64, device=env.device
    )
    if self.arm is not None:
      self._configure_arm(self.arm)
    self._substep_terms = self._substep_metric_terms()
    sources, self._source_widths = [], []
    for term in self._substep_terms:
      term_sources = tuple(term.substep_sources(env))
      sources.extend(term_sources)
      self._source_widths.append(sum(b - a for _, a, b in term_sources))
    self.record = tuple(sources)
    self._substep = 0
    self._originals = {}

  def _configure_arm(self, arm) -> None:
    configure_arm(self.control, self.env.sim.mj_model, arm)
    self._arm_ctrl = torch.tensor(
      [self.control.ctrl[k] for k in range(self.control.n)],
      dtype=torch.long,
      device=self.env.device,
    )

  def _substep_metric_terms(self) -> list:
    manager = self.env.metrics_manager
    return [
      manager._term_cfgs[i].func for i in getattr(manager, "_substep_term_indices", [])
    ]

  # The rerouted calls.

  def install(self) -> None:
    env = self.env
    originals = {
      "apply_action": env.action_manager.apply_action,
      "write_data_to_sim": env.scene.write_data_to_sim,
      "step": env.sim.step,
      "update": env.scene.update,
      "compute_substep": env.metrics_manager.compute_substep,
    }
    self._originals = originals
    env.action_manager.apply_action = self._apply_action
    env.scene.write_data_to_sim = self._write_data_to_sim
    env.sim.step = self._sim_step
    env.scene.update = self._scene_update
    env.metrics_manager.compute_substep = self._compute_substep

  def _apply_action(self) -> None:
    self._substep += 1
    if self._substep == 1:
      try:
        self.run_policy_step(self.env.cfg.decimation)
      except BaseException:
        self._substep = 0
        raise

  def _write_data_to_sim(self) -> None:
    if self._substep == 0:
      self._originals["write_data_to_sim"]()

  def _sim_step(self) -> None:
    if self._substep == 0:
      self._originals["step"]()

  def _scene_update(self, dt: float) -> None:
    if self._substep == 0 or self._substep == self.env.cfg.decimation:
      self._originals["update"](dt)

  def _compute_substep(self) -> None:
    # The last call of mjlab's loop body: the loop is over after the last step.
    if self._substep == 0:
      self._originals["compute_substep"]()
    elif self._substep == self.env.cfg.decimation:
      self._substep = 0

  # The policy step.

  def params(self) -> torch.Tensor:
    """Per-world control parameters from the arm term, float64
    [num_envs, NUM_PARAMS] on the environment's device."""
    p, arm = self._params, self.arm
    if isinstance(arm, CartesianPoseAction):
      p[:, native_control.PARAM_POS] = arm.desired_pos_w
      p[:, native_control.PARAM_QUAT] = arm.desired_quat_w
    elif isinstance(arm, JointTargetAction):
      n = arm.action_dim
      start = native_control.PARAM_JOINT_TARGETS
      p[:, start : start + n] = arm.raw_action
    if arm is not None:
      p[:, native_control.PARAM_HAS_TARGET] = arm._has_target
    return p

  def run_policy_step(self, nsteps: int) -> None:
    from mjlab_tasks.engine.c_engine import CMujocoSimulation

    env = self.env
    for term in self.once_terms:
      term.apply_actions()
    self._originals["write_data_to_sim"]()
    if isinstance(env.sim, CMujocoSimulation):
      readings, last_dq = env.sim.step_controlled(
        self.control, self.params().numpy(), nsteps, self.record
      )
      readings, last_dq = torch.from_numpy(readings), torch.from_numpy(last_dq)
    else:
      from mjlab_tasks.engine import warp_control

      readings, last_dq = warp_control.step_controlled(
        env.sim, self.control, self.params(), nsteps, self.record
      )
    if self.arm is not None:
      self._write_back_arm(last_dq.float())
    self._record(readings)

  def _write_back_arm(self, last_dq: torch.Tensor) -> None:
    """The torch term's visible state, as its last physics step left it."""
    arm, n = self.arm, self.control.n
    arm.unlimited_dq[:] = last_dq[:, :n]
    arm.limited_dq[:] = last_dq[:, n:]
    targets = self.env.sim.data.ctrl[:, self._arm_ctrl]
    arm._entity.set_joint_position_target(targets, joint_ids=arm._joint_local_ids)

  def _record(self, readings: torch.Tensor) -> None:
    """Per-substep metric terms take their readings, and mjlab's metrics
    manager accumulates their values as ``nsteps`` substep calls would."""
    if not self._substep_terms:
      return
    manager, start = self.env.metrics_manager, 0
    for i, (term, width) in enumerate(
      zip(self._substep_terms, self._source_widths, strict=True)
    ):
      block = readings[:, :, start : start + width].float()
      values = term.record_block(block.transpose(0, 1))  # [steps, num_envs, K]
      manager._substep_accum[i] += values.sum(dim=0)
      start += width
    manager._substep_count += readings.shape[1]


def enabled_by_default(env: ManagerBasedRlEnv) -> bool:
  """The compiled loop is the default on the CPU (both engines, tested). On
  CUDA it is opt-in until a session with a GPU has run its captured graph
  against mjlab's loop (``pytest -m gpu``, ``scripts/device_check.sh``)."""
  return not str(env.device).startswith("cuda")


def install(env: ManagerBasedRlEnv, enable: bool | None = None) -> CompiledLoop | None:
  """Reroute ``env``'s decimation loop through the compiled control when it
  can (see ``why_not``) and ``enable`` (None: ``enabled_by_default``);
  returns the loop, or None. ``env.compiled_loop`` says which loop runs."""
  env.compiled_loop = None
  if enable is None:
    enable = enabled_by_default(env)
  if not enable or why_not(env) is not None:
    return None
  loop = CompiledLoop(env)
  loop.install()
  env.compiled_loop = loop
  return loop


@contextlib.contextmanager
def on_every_env(enable: bool | None = None) -> Iterator[None]:
  """Every mjlab environment built inside this block gets the compiled loop
  (``install``), and its groups share their repeated observation terms
  (``share_observation_terms``): for mjlab's own mains (``train``,
  ``play``), which build their environment themselves."""
  from mjlab.envs import ManagerBasedRlEnv

  from mjlab_tasks.engine.shared_observations import share_observation_terms

  original = ManagerBasedRlEnv.__init__

  def init(self, *args, **kwargs):
    original(self, *args, **kwargs)
    install(self, enable)
    share_observation_terms(self)

  ManagerBasedRlEnv.__init__ = init
  try:
    yield
  finally:
    ManagerBasedRlEnv.__init__ = original
