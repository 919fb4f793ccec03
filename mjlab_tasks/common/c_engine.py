"""The C MuJoCo engine behind mjlab's environment: fast and deterministic on CPU.

``CMujocoSimulation`` offers the interface of ``mjlab.sim.Simulation`` that
mjlab's scene, entities, sensors, managers and this suite's terms use, but
steps a pool of ``mujoco.MjData`` (one per environment) in threads; MuJoCo
releases the GIL while it steps. mjlab's environment and every task then run
unchanged on either engine (``make_env(cfg, device, engine)``).

Layout honoured (as MuJoCo Warp presents it): data fields are float32 torch
tensors ``[num_envs, ...]``, rotation matrices ``[..., 3, 3]``; sensors keep
views into ``data.sensordata``, so buffers are refreshed in place, never
reallocated. Inputs (ctrl, applied forces, mocap poses) are pushed before
every step; ``qpos``/``qvel``/``act`` only for rows a caller changed, so
untouched worlds keep their float64 state and runs are bitwise reproducible.

Not supported (clear errors): camera and raycast sensors (MuJoCo Warp
rendering), and recomputing derived model constants after domain
randomization of inertial fields.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

import mujoco
import numpy as np
import torch

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg

Engine = Literal["warp", "mujoco"]

# Fields a step may change that the environment reads, by row size.
_STATE_FIELDS = ("qpos", "qvel", "act")
_INPUT_FIELDS = ("ctrl", "qfrc_applied", "xfrc_applied", "mocap_pos", "mocap_quat")
_DERIVED_FIELDS = (
  "time",
  "qacc",
  "qacc_warmstart",
  "xpos",
  "xquat",
  "xmat",
  "xipos",
  "ximat",
  "xanchor",
  "xaxis",
  "geom_xpos",
  "geom_xmat",
  "site_xpos",
  "site_xmat",
  "subtree_com",
  "cvel",
  "cacc",
  "cfrc_ext",
  "sensordata",
  "ten_length",
  "ten_velocity",
  "actuator_length",
  "actuator_velocity",
  "actuator_force",
  "qfrc_actuator",
  "qfrc_bias",
  "qfrc_passive",
  "qfrc_constraint",
)
_MATRIX_FIELDS = {"xmat", "ximat", "geom_xmat", "site_xmat"}

# C MuJoCo warnings mapped onto MuJoCo Warp's per-world overflow bitmask
# (mujoco_warp OverflowType): NEFC = 1, NARROWPHASE (contacts) = 8.
_OVERFLOW_BITS = (
  (int(mujoco.mjtWarning.mjWARN_CNSTRFULL), 1 << 0),
  (int(mujoco.mjtWarning.mjWARN_CONTACTFULL), 1 << 3),
)
# Warnings that mean a world's state is not to be trusted.
_INSTABILITY_WARNINGS = (
  int(mujoco.mjtWarning.mjWARN_BADQACC),
  int(mujoco.mjtWarning.mjWARN_BADQPOS),
  int(mujoco.mjtWarning.mjWARN_BADQVEL),
)
_WATCHED_WARNINGS = (*(w for w, _ in _OVERFLOW_BITS), *_INSTABILITY_WARNINGS)


class CData:
  """Torch views of the pooled ``MjData`` state, shaped like MuJoCo Warp's."""

  def __init__(self, model: mujoco.MjModel, num_envs: int):
    self.nworld = num_envs
    probe = mujoco.MjData(model)
    for name in (*_STATE_FIELDS, *_INPUT_FIELDS, *_DERIVED_FIELDS):
      value = np.asarray(getattr(probe, name))
      shape = (num_envs, *value.shape)
      if name in _MATRIX_FIELDS:
        shape = (num_envs, value.shape[0], 3, 3)
      if name == "time":
        shape = (num_envs,)
      setattr(self, name, torch.zeros(shape, dtype=torch.float32))
    # Per-world health, refreshed every step (never silent): the overflow
    # bitmask as MuJoCo Warp reports it, and C MuJoCo's bad-state warnings.
    self.overflow = torch.zeros(num_envs, dtype=torch.int32)
    self.unstable = torch.zeros(num_envs, dtype=torch.bool)
    self.ncon = torch.zeros(num_envs, dtype=torch.int32)


class CModel:
  """Model fields as seen by mjlab: float fields batched ``[num_envs, ...]``.

  Unexpanded fields are read-only broadcast views of the compiled model;
  ``CMujocoSimulation.expand_model_fields`` gives a field per-world storage,
  which is written into each world's model before it steps.
  """

  def __init__(self, model: mujoco.MjModel, num_envs: int):
    object.__setattr__(self, "_model", model)
    object.__setattr__(self, "_num_envs", num_envs)
    object.__setattr__(self, "_cache", {})
    object.__setattr__(self, "expanded", {})

  def __getattr__(self, name: str):
    if name in self.expanded:
      return self.expanded[name]
    if name in self._cache:
      return self._cache[name]
    value = getattr(self._model, name)
    if not isinstance(value, np.ndarray):
      return value
    tensor = torch.from_numpy(np.array(value))
    if tensor.is_floating_point():
      tensor = tensor.float().unsqueeze(0).expand(self._num_envs, *tensor.shape)
    self._cache[name] = tensor
    return tensor

  def __setattr__(self, name: str, value) -> None:
    raise AttributeError(f"Write model fields in place: model.{name}[...] = value.")

  def expand(self, name: str) -> torch.Tensor:
    base = torch.from_numpy(np.array(getattr(self._model, name))).float()
    self.expanded[name] = base.unsqueeze(0).repeat(self._num_envs, *([1] * base.dim()))
    return self.expanded[name]


class CMujocoSimulation:
  """Drop-in for ``mjlab.sim.Simulation`` on the C MuJoCo engine (CPU only)."""

  def __init__(
    self,
    num_envs: int,
    cfg,
    model: mujoco.MjModel | None = None,
    device: str = "cpu",
    *,
    spec: mujoco.MjSpec | None = None,
    variant_info=None,
    num_threads: int | None = None,
  ):
    from mjlab.utils.nan_guard import NanGuard
    from mjlab.viewer.model_sync import disable_model_sameframe_shortcuts

    if device != "cpu":
      raise ValueError(f"The C MuJoCo engine runs on the CPU; got device '{device}'.")
    if variant_info:
      raise NotImplementedError(
        "Per-world mesh variants need MuJoCo Warp (--engine warp)."
      )
    if spec is not None:
      model = spec.compile()
    if model is None:
      raise ValueError("Either model or spec must be provided.")
    cfg.mujoco.apply(model)
    # C MuJoCo would silently reset a world whose acceleration diverges; keep
    # the bad state instead, as MuJoCo Warp does, so it is detected and reported.
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
    # Otherwise C MuJoCo's compile-time same-frame shortcuts would silently
    # ignore domain randomization of body, geom and site frames.
    disable_model_sameframe_shortcuts(model)
    self.cfg = cfg
    self.device = "cpu"
    self.num_envs = num_envs
    self._mj_model = model
    self._mj_data = mujoco.MjData(model)
    mujoco.mj_forward(model, self._mj_data)
    self._worlds = [mujoco.MjData(model) for _ in range(num_envs)]
    for d in self._worlds:
      mujoco.mj_forward(model, d)
    self._data = CData(model, num_envs)
    self._model = CModel(model, num_envs)
    self._default_model_fields: dict[str, torch.Tensor] = {}
    self.use_cuda_graph = False
    self.nan_guard = NanGuard(cfg.nan_guard, num_envs, model)
    threads = num_threads or min(os.cpu_count() or 1, num_envs)
    self._chunks = [
      c.tolist() for c in np.array_split(np.arange(num_envs), threads) if len(c)
    ]
    self._pool = ThreadPoolExecutor(max_workers=len(self._chunks))
    # One model per thread, only needed once fields are expanded per world.
    self._thread_models: list[mujoco.MjModel] | None = None
    self._np = {
      name: getattr(self._data, name).numpy()
      for name in vars(self._data)
      if isinstance(getattr(self._data, name), torch.Tensor)
    }
    self._pull(range(num_envs))
    self._pulled_versions = self._state_versions()
    self._pulled_state = {f: getattr(self._data, f).clone() for f in _STATE_FIELDS}

  # mjlab's Simulation interface.

  @property
  def mj_model(self) -> mujoco.MjModel:
    return self._mj_model

  @property
  def mj_data(self) -> mujoco.MjData:
    return self._mj_data

  @property
  def data(self) -> CData:
    return self._data

  @property
  def model(self) -> CModel:
    return self._model

  @property
  def wp_model(self):
    raise NotImplementedError("No MuJoCo Warp model on the C engine (--engine warp).")

  @property
  def wp_data(self):
    raise NotImplementedError("No MuJoCo Warp data on the C engine (--engine warp).")

  @property
  def default_model_fields(self) -> dict[str, torch.Tensor]:
    return self._default_model_fields

  @property
  def expanded_fields(self) -> set[str]:
    return set(self._model.expanded)

  @property
  def per_world_default_fields(self) -> set[str]:
    return set()

  @property
  def world_to_variant(self) -> dict[str, torch.Tensor]:
    return {}

  def create_graph(self) -> None:
    """No CUDA graphs on the CPU."""

  def expand_model_fields(self, fields: tuple[str, ...]) -> None:
    invalid = [f for f in fields if not hasattr(self._mj_model, f)]
    if invalid:
      raise ValueError(f"Fields not found in model: {invalid}")
    for field in fields:
      if field not in self._model.expanded:
        self._model.expand(field)
    if fields and self._thread_models is None:
      self._thread_models = [
        _copy_model(self._mj_model) for _ in range(len(self._chunks))
      ]

  def get_default_field(self, field: str) -> torch.Tensor:
    if field not in self._default_model_fields:
      if not hasattr(self._mj_model, field):
        raise ValueError(f"Field '{field}' not found in model")
      self._default_model_fields[field] = torch.as_tensor(
        np.array(getattr(self._mj_model, field)), dtype=torch.float32
      ).clone()
    return self._default_model_fields[field]

  def recompute_constants(self, level) -> None:
    raise NotImplementedError(
      f"Recomputing model constants ({getattr(level, 'name', level)}) after domain "
      "randomization is not implemented on the C engine; use --engine warp."
    )

  def set_sensor_context(self, ctx) -> None:
    raise NotImplementedError(
      "Camera and raycast sensors render with MuJoCo Warp; use --engine warp."
    )

  def sense(self) -> None:
    """No camera or raycast sensors on this engine."""

  def forward(self) -> None:
    self._run(mujoco.mj_forward)

  def step(self) -> None:
    with self.nan_guard.watch(self._data):
      self._run(mujoco.mj_step)

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    ids = range(self.num_envs) if env_ids is None else env_ids.flatten().tolist()
    for i in ids:
      mujoco.mj_resetData(self._mj_model, self._worlds[i])
    self._pull(ids)
    self._pulled_state = {f: getattr(self._data, f).clone() for f in _STATE_FIELDS}
    self._pulled_versions = self._state_versions()

  def close(self) -> None:
    self._pool.shutdown(wait=True)

  # Internals.

  def _state_versions(self) -> tuple[int, ...]:
    return tuple(getattr(self._data, f)._version for f in _STATE_FIELDS)

  def _changed_rows(self) -> dict[str, np.ndarray]:
    """Rows of qpos/qvel/act a caller wrote since the last pull."""
    changed = {}
    versions = self._state_versions()
    for field, now, then in zip(
      _STATE_FIELDS, versions, self._pulled_versions, strict=True
    ):
      if now == then:
        continue
      current, pulled = getattr(self._data, field), self._pulled_state[field]
      # NaN != NaN, so a NaN written by a caller is pushed (and detected).
      rows = (current != pulled).flatten(1).any(dim=-1)
      changed[field] = rows.nonzero().flatten().numpy()
    return changed

  def _run(self, fn) -> None:
    changed = self._changed_rows()
    push_rows = {f: set(rows.tolist()) for f, rows in changed.items()}
    expanded = self._model.expanded

    def work(chunk_index: int) -> None:
      model = self._mj_model
      if self._thread_models is not None:
        model = self._thread_models[chunk_index]
      for i in self._chunks[chunk_index]:
        d = self._worlds[i]
        for field in _INPUT_FIELDS:
          np.copyto(getattr(d, field), self._np[field][i])
        for field, rows in push_rows.items():
          if i in rows:
            np.copyto(getattr(d, field), self._np[field][i])
        for field, values in expanded.items():
          np.copyto(getattr(model, field), values[i].numpy())
        for w in _WATCHED_WARNINGS:
          d.warning[w].number = 0
        try:
          fn(model, d)
        except mujoco.FatalError as error:  # e.g. the arena (contact buffer) is full
          raise RuntimeError(f"C MuJoCo failed in environment {i}: {error}") from error
        self._pull_one(i)

    list(self._pool.map(work, range(len(self._chunks))))
    self._pulled_state = {f: getattr(self._data, f).clone() for f in _STATE_FIELDS}
    self._pulled_versions = self._state_versions()

  def _pull_one(self, i: int) -> None:
    d = self._worlds[i]
    out = self._np
    for field in (*_STATE_FIELDS, *_DERIVED_FIELDS):
      value = getattr(d, field)
      if field in _MATRIX_FIELDS:
        out[field][i] = value.reshape(-1, 3, 3)
      else:
        out[field][i] = value
    out["overflow"][i] = sum(bit for w, bit in _OVERFLOW_BITS if d.warning[w].number)
    out["unstable"][i] = any(d.warning[w].number for w in _INSTABILITY_WARNINGS)
    out["ncon"][i] = d.ncon

  def _pull(self, ids) -> None:
    for i in ids:
      d = self._worlds[i]
      for field in _INPUT_FIELDS:
        self._np[field][i] = getattr(d, field)
      self._pull_one(i)


def _copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
  import copy

  return copy.copy(model)


def resolve_engine(engine: str | None, device: str) -> Engine:
  """Default: MuJoCo Warp on CUDA, the C engine on the CPU."""
  if engine is None:
    return "warp" if device.startswith("cuda") else "mujoco"
  if engine not in ("warp", "mujoco"):
    raise ValueError(f"Unknown engine '{engine}' (use 'warp' or 'mujoco').")
  if engine == "mujoco" and device != "cpu":
    raise ValueError(f"The C MuJoCo engine runs on the CPU; got --device {device}.")
  return engine  # type: ignore[return-value]


@contextlib.contextmanager
def _simulation_class(cls):
  """Build mjlab's environment around another simulation class."""
  import mjlab.envs.manager_based_rl_env as env_module

  original = env_module.Simulation
  env_module.Simulation = cls
  try:
    yield
  finally:
    env_module.Simulation = original


def make_env(
  cfg: ManagerBasedRlEnvCfg, device: str = "cpu", engine: str | None = None, **kwargs
) -> ManagerBasedRlEnv:
  """mjlab's ``ManagerBasedRlEnv`` on MuJoCo Warp or on the C MuJoCo engine.

  Args:
    cfg: Environment configuration (the same for both engines).
    device: ``cpu`` or ``cuda:N``.
    engine: ``warp``, ``mujoco`` or ``None`` (warp on CUDA, mujoco on CPU).
  """
  from mjlab.envs import ManagerBasedRlEnv

  if resolve_engine(engine, device) == "warp":
    return ManagerBasedRlEnv(cfg, device=device, **kwargs)
  with _simulation_class(CMujocoSimulation):
    return ManagerBasedRlEnv(cfg, device=device, **kwargs)
