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

Camera sensors render with MuJoCo's OpenGL renderer (``c_cameras``), into
the buffers mjlab's camera sensor reads on MuJoCo Warp. Not supported (clear
errors): raycast sensors, segmentation images, and recomputing derived model
constants after domain randomization of inertial fields.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import types
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch

from mjlab_tasks.engine import copy_model, resolve_engine

if TYPE_CHECKING:
  from collections.abc import Iterator

  from mjlab.envs import ManagerBasedRlEnv, ManagerBasedRlEnvCfg

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


# Copied inside the worker threads after every step: sensors keep views into
# sensordata, and the state is what every consumer reads. Everything else is
# copied lazily, the first time it is read after a step.
_EAGER_FIELDS = (*_STATE_FIELDS, "time", "sensordata")  # (via mj_getState)
_LAZY_FIELDS = tuple(f for f in _DERIVED_FIELDS if f not in _EAGER_FIELDS)


class _LazyField:
  """A derived field refreshed from the worlds on first read after a step."""

  def __set_name__(self, owner, name: str) -> None:
    self.name = name

  def __get__(self, data: CData | None, owner=None):
    if data is None:
      return self
    if self.name in data._stale:
      data._stale.discard(self.name)
      data._pull_field(self.name)
    return data.__dict__[self.name]

  def __set__(self, data: CData, value) -> None:
    data.__dict__[self.name] = value


class CData:
  """Torch views of the pooled ``MjData`` state, shaped like MuJoCo Warp's.

  Derived fields other than ``sensordata`` are refreshed from the worlds on
  first access after a step (``_stale``), so unread fields cost nothing.
  """

  def __init__(self, model: mujoco.MjModel, num_envs: int):
    self._stale: set[str] = set()
    self._pull_field = None  # Set by the simulation: fn(field_name).
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


for _name in _LAZY_FIELDS:
  _field = _LazyField()
  _field.__set_name__(CData, _name)
  setattr(CData, _name, _field)


def leave_cores_to_worlds() -> None:
  """One torch intra-op thread while the engine steps its worlds in several
  threads, unless ``OMP_NUM_THREADS`` chooses a count: torch's idle pool
  threads spin on the very cores the worlds step on (measured on 2 cores at
  32 cube-tray environments: the per-policy-step ``sim.forward`` took 2.0 to
  2.5 ms with torch's two threads and 0.9 to 1.0 ms with one, and the whole
  environment ran 15 % faster; docs/benchmarks_history.md). The setting is
  process-wide, as torch's is."""
  if "OMP_NUM_THREADS" not in os.environ and torch.get_num_threads() > 1:
    torch.set_num_threads(1)


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

  def set_per_world(self, name: str, values: np.ndarray) -> None:
    """Per-world values [num_envs, *field shape], in the field's dtype."""
    shape = np.shape(getattr(self._model, name))
    values = np.asarray(values).reshape(self._num_envs, *shape)
    tensor = torch.from_numpy(np.ascontiguousarray(values))
    self.expanded[name] = tensor.float() if values.dtype.kind == "f" else tensor

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
    per_world, self._world_to_variant = {}, {}
    if spec is not None and variant_info:
      model, per_world, self._world_to_variant = _variant_model(
        spec, num_envs, variant_info, cfg.mujoco.apply
      )
    elif spec is not None:
      model = spec.compile()
    if model is None:
      raise ValueError("Either model or spec must be provided.")
    cfg.mujoco.apply(model)
    if per_world:
      # The compiled bounding-volume trees of the bodies are the template's
      # meshes; without the midphase, every geom pair of two bodies is
      # culled by its own (per-world) bounds instead (a world then steps
      # like its table compiled alone: tests/test_glass_task.py).
      model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
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
    self._sensor_context = None  # Camera sensors' renderer (c_cameras).
    self.nan_guard = NanGuard(cfg.nan_guard, num_envs, model)
    threads = num_threads or min(os.cpu_count() or 1, num_envs)
    self._chunks = [
      c.tolist() for c in np.array_split(np.arange(num_envs), threads) if len(c)
    ]
    self._pool = ThreadPoolExecutor(max_workers=max(1, len(self._chunks) - 1))
    if len(self._chunks) > 1:
      leave_cores_to_worlds()
    # One model per thread, only needed once fields are expanded per world.
    self._thread_models: list[mujoco.MjModel] | None = None
    self._np = {
      name: value.numpy()
      for name, value in vars(self._data).items()
      if isinstance(value, torch.Tensor)
    }
    self._lazy_views: dict[str, list[np.ndarray]] = {}
    # Addresses of recorded MjData values, per record spec (step_controlled).
    self._record_cache: dict[tuple, np.ndarray] = {}
    self._data._pull_field = self._pull_lazy_field
    self._init_state_buffers()
    # Fields whose defaults differ per world (mesh variants), as mjlab's
    # domain randomization expects them: [num_envs, ...].
    self._per_world_defaults: set[str] = set()
    for name, values in per_world.items():
      self._model.set_per_world(name, values)
      if values.dtype.kind == "f":
        self._default_model_fields[name] = self._model.expanded[name].clone()
        self._per_world_defaults.add(name)
    if per_world:
      self._thread_models = [copy_model(model) for _ in range(len(self._chunks))]
      self._pulled_versions = self._state_versions()
      self._run(
        lambda model, d, i: mujoco.mj_forward(model, d)
      )  # each world with its own meshes
    self._pull(range(num_envs))
    self._pulled_versions = self._state_versions()

  def _init_state_buffers(self) -> None:
    """float64 buffers laid out as mj_getState / mj_setState vectors."""
    model, n = self._mj_model, self.num_envs
    state = mujoco.mjtState

    def layout(parts):
      slices, offset = {}, 0
      for field, bit in parts:
        size = mujoco.mj_stateSize(model, bit)
        slices[field] = slice(offset, offset + size)
        offset += size
      return slices, offset

    # Components in mjtState bit order, the order of the state vector.
    out_parts = (
      ("time", state.mjSTATE_TIME),
      ("qpos", state.mjSTATE_QPOS),
      ("qvel", state.mjSTATE_QVEL),
      ("act", state.mjSTATE_ACT),
    )
    in_parts = (
      ("ctrl", state.mjSTATE_CTRL),
      ("qfrc_applied", state.mjSTATE_QFRC_APPLIED),
      ("xfrc_applied", state.mjSTATE_XFRC_APPLIED),
      ("mocap_pos", state.mjSTATE_MOCAP_POS),
      ("mocap_quat", state.mjSTATE_MOCAP_QUAT),
    )
    self._output_slices, n_out = layout(out_parts)
    self._input_slices, n_in = layout(in_parts)
    self._output_spec = int(sum(int(bit) for _, bit in out_parts))
    self._input_spec = int(sum(int(bit) for _, bit in in_parts))
    self._output_buf = np.zeros((n, n_out))
    self._input_buf = np.zeros((n, n_in))
    nwarn = len(self._worlds[0].warning.number)
    self._warning_now = np.zeros((n, nwarn), dtype=np.int64)
    self._warning_counts = np.zeros((n, nwarn), dtype=np.int64)
    self._pushed_input_versions: tuple[int, ...] = ()

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
    return set(self._per_world_defaults)

  @property
  def world_to_variant(self) -> dict[str, torch.Tensor]:
    return self._world_to_variant

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
        copy_model(self._mj_model) for _ in range(len(self._chunks))
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
    from mjlab_tasks.engine.c_cameras import CSensorContext

    if not isinstance(ctx, CSensorContext):
      raise NotImplementedError(
        "This sensor context renders with MuJoCo Warp; build the environment "
        "with c_engine.make_env, or use --engine warp."
      )
    self._sensor_context = ctx

  def sense(self) -> None:
    """Render the camera sensors of every world (nothing without cameras)."""
    if self._sensor_context is not None:
      self._sensor_context.render(self._worlds, self._model.expanded)

  def contact_penetration(self) -> tuple[torch.Tensor, torch.Tensor]:
    """Deepest contact penetration per world [num_envs] [m] (0 if none), and
    that contact's geom pair [num_envs, 2] (-1 if none)."""
    depth = torch.zeros(self.num_envs)
    pair = torch.full((self.num_envs, 2), -1, dtype=torch.long)
    for i, d in enumerate(self._worlds):
      if d.ncon:
        j = int(np.argmin(d.contact.dist[: d.ncon]))
        if d.contact.dist[j] < 0.0:
          depth[i] = -float(d.contact.dist[j])
          pair[i] = torch.from_numpy(d.contact.geom[j].astype(np.int64))
    return depth, pair

  def forward(self) -> None:
    self._run(lambda model, d, i: mujoco.mj_forward(model, d))

  def forward_worlds(self, rows: np.ndarray) -> None:
    """``mj_forward`` of worlds ``rows`` (bool [num_envs]) only: the others
    stay exactly as they are."""
    self.run_worlds(lambda m, d, i: mujoco.mj_forward(m, d) if rows[i] else None)

  @property
  def num_threads(self) -> int:
    """Threads the worlds step in."""
    return len(self._chunks)

  @property
  def worlds(self) -> tuple[mujoco.MjData, ...]:
    """Each world's own ``MjData`` (float64), live."""
    return tuple(self._worlds)

  def step(self) -> None:
    with self.nan_guard.watch(self._data):
      self._run(lambda model, d, i: mujoco.mj_step(model, d))

  def step_controlled(
    self,
    control,
    params: np.ndarray,
    nsteps: int,
    record: tuple[tuple[str, int, int], ...] = (),
  ) -> tuple[np.ndarray, np.ndarray]:
    """``nsteps`` physics steps per world with the compiled arm control
    (``native_control``) computing the arm's targets before each step.

    Args:
      control: The task's ``native_control.ArmControl``.
      params: Per-world control parameters, float64 [num_envs, NUM_PARAMS].
      nsteps: Physics steps (a policy step's decimation).
      record: Flat slices ``(field, start, stop)`` of MjData float fields
        read after every step.

    Returns the readings [num_envs, nsteps, K] and each world's last
    unlimited and limited joint steps [num_envs, 2 * n].
    """
    from mjlab_tasks.engine import native_control

    addresses = self.record_addresses(record)
    readings = np.zeros((self.num_envs, nsteps, addresses.shape[1]))
    last_dq = np.zeros((self.num_envs, 2 * control.n))
    params = np.ascontiguousarray(params, dtype=np.float64)

    def run(model, d, i):
      native_control.run_world(
        model, d, control, params[i], nsteps, addresses[i], readings[i], last_dq[i]
      )

    self.run_worlds(run)
    return readings, last_dq

  def run_worlds(self, fn) -> None:
    """``fn(model, data, i)`` on every world in the worker threads, like a
    physics step: ``fn`` may step the world and write its ``ctrl`` and
    ``qfrc_applied``, which are the inputs afterwards (compiled controls)."""
    inputs, in_spec = self._input_buf, self._input_spec

    def run(model, d, i):
      fn(model, d, i)
      mujoco.mj_getState(model, d, inputs[i], in_spec)

    with self.nan_guard.watch(self._data):
      self._run(run)
    for field, sl in self._input_slices.items():
      self._np[field][:] = inputs[:, sl].reshape(self._np[field].shape)
    self._pushed_input_versions = tuple(
      getattr(self._data, f)._version for f in _INPUT_FIELDS
    )

  def record_addresses(self, record: tuple[tuple[str, int, int], ...]) -> np.ndarray:
    """Addresses [num_envs, K] (uint64) of the recorded doubles of each world
    (MjData arrays never move while the world lives)."""
    cache = self._record_cache
    if record not in cache:
      rows = []
      for d in self._worlds:
        row = []
        for field, start, stop in record:
          array = getattr(d, field)
          if array.dtype != np.float64 or not array.flags.c_contiguous:
            raise ValueError(f"MjData.{field} is not a contiguous float64 array")
          if not 0 <= start <= stop <= array.size:
            raise IndexError(f"MjData.{field}[{start}:{stop}] is out of range")
          base = array.ctypes.data
          row.extend(base + 8 * k for k in range(start, stop))
        rows.append(row)
      cache[record] = np.array(rows, dtype=np.uint64).reshape(self.num_envs, -1)
    return cache[record]

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    ids = range(self.num_envs) if env_ids is None else env_ids.flatten().tolist()
    # State written for other worlds since the last step must not be lost.
    pushed: set[int] = set()
    for field, rows in self._changed_rows().items():
      for i in rows:
        np.copyto(getattr(self._worlds[i], field), self._np[field][i])
      pushed |= rows
    for i in ids:
      mujoco.mj_resetData(self._mj_model, self._worlds[i])
    self._pull(sorted(set(ids) | pushed))

  def close(self) -> None:
    self._pool.shutdown(wait=True)
    if self._sensor_context is not None:
      self._sensor_context.close()
      self._sensor_context = None

  # Internals.

  def _state_versions(self) -> tuple[int, ...]:
    return tuple(getattr(self._data, f)._version for f in _STATE_FIELDS)

  def _changed_rows(self) -> dict[str, set[int]]:
    """Rows of qpos/qvel/act a caller wrote since the last pull."""
    changed = {}
    versions = self._state_versions()
    for field, now, then in zip(
      _STATE_FIELDS, versions, self._pulled_versions, strict=True
    ):
      if now == then:
        continue
      current = self._np[field]
      rows = set()
      for i, d in enumerate(self._worlds):
        # NaN != NaN, so a NaN written by a caller is pushed (and detected).
        if not np.array_equal(current[i], getattr(d, field).astype(np.float32)):
          rows.add(i)
      changed[field] = rows
    return changed

  def _run(self, fn) -> None:
    """``fn(model, data, world index)`` on every world, in the worker threads,
    with the caller's inputs and changed state pushed first."""
    push_rows = self._changed_rows()
    expanded = self._model.expanded
    # Inputs go in through one mj_setState per world, from a float64 buffer
    # refreshed (vectorized) when a caller wrote an input tensor, and only in
    # the rows whose values the caller changed: the others keep their float64
    # values (the compiled loop's targets and bias forces, restored states).
    versions = tuple(getattr(self._data, f)._version for f in _INPUT_FIELDS)
    if versions != self._pushed_input_versions:
      for field, sl in self._input_slices.items():
        new = self._np[field].reshape(self.num_envs, -1)
        old = self._input_buf[:, sl]
        # NaN != NaN, so a NaN written by a caller is pushed (and detected).
        rows = (new != old.astype(np.float32)).any(axis=1)
        old[rows] = new[rows]
      self._pushed_input_versions = versions
    inputs, outputs = self._input_buf, self._output_buf
    in_spec, out_spec = self._input_spec, self._output_spec
    sensordata, warnings, ncon = (
      self._np["sensordata"],
      self._warning_now,
      self._np["ncon"],
    )

    def work(chunk_index: int) -> None:
      model = self._mj_model
      if self._thread_models is not None:
        model = self._thread_models[chunk_index]
      for i in self._chunks[chunk_index]:
        d = self._worlds[i]
        mujoco.mj_setState(model, d, inputs[i], in_spec)
        for field, rows in push_rows.items():
          if i in rows:
            np.copyto(getattr(d, field), self._np[field][i])
        for field, values in expanded.items():
          np.copyto(getattr(model, field), values[i].numpy())
        try:
          fn(model, d, i)
        except mujoco.FatalError as error:  # e.g. the arena (contact buffer) is full
          raise RuntimeError(f"C MuJoCo failed in environment {i}: {error}") from error
        mujoco.mj_getState(model, d, outputs[i], out_spec)
        sensordata[i] = d.sensordata
        warnings[i] = d.warning.number
        ncon[i] = d.ncon

    # The main thread takes the first chunk; the pool takes the rest.
    futures = [self._pool.submit(work, k) for k in range(1, len(self._chunks))]
    work(0)
    for future in futures:
      future.result()
    self._unpack_outputs()

  def _unpack_outputs(self) -> None:
    """Vectorized: state buffer to tensors, warning counters to health flags."""
    for field, sl in self._output_slices.items():
      self._np[field][:] = self._output_buf[:, sl].reshape(self._np[field].shape)
    new = self._warning_now > self._warning_counts
    self._warning_counts[:] = self._warning_now
    overflow = np.zeros(self.num_envs, dtype=np.int32)
    for warning, bit in _OVERFLOW_BITS:
      overflow |= np.where(new[:, warning], bit, 0).astype(np.int32)
    self._np["overflow"][:] = overflow
    self._np["unstable"][:] = new[:, list(_INSTABILITY_WARNINGS)].any(axis=1)
    self._data._stale.update(_LAZY_FIELDS)
    self._pulled_versions = self._state_versions()

  def _pull_lazy_field(self, field: str) -> None:
    # MjData's arrays are views of memory that lives as long as the world,
    # so each world's view is made once and every pull is one np.stack.
    views = self._lazy_views.get(field)
    if views is None:
      views = [getattr(d, field) for d in self._worlds]
      if field in _MATRIX_FIELDS:
        views = [v.reshape(-1, 3, 3) for v in views]
      self._lazy_views[field] = views
    np.stack(views, out=self._np[field], casting="same_kind")

  def get_state(self, spec: int = mujoco.mjtState.mjSTATE_INTEGRATION) -> np.ndarray:
    """Each world's exact state, float64 [num_envs, size] (``mj_getState`` of
    its MjData: the tensors mjlab reads hold float32 copies)."""
    out = np.zeros((self.num_envs, mujoco.mj_stateSize(self._mj_model, spec)))
    for i, d in enumerate(self._worlds):
      mujoco.mj_getState(self._mj_model, d, out[i], spec)
    return out

  def set_state(
    self,
    ids: list[int],
    states: np.ndarray,
    spec: int = mujoco.mjtState.mjSTATE_INTEGRATION,
  ) -> None:
    """Restore worlds ``ids`` from ``states`` (as ``get_state`` gives them),
    recompute their derived quantities and refresh the tensors mjlab reads."""
    for i, state in zip(ids, states, strict=True):
      d = self._worlds[i]
      mujoco.mj_setState(self._mj_model, d, np.asarray(state, dtype=np.float64), spec)
      mujoco.mj_forward(self._mj_model, d)
    self._pull(ids)

  def copy_world(self, source: int, ids: list[int]) -> None:
    """Worlds ``ids`` become exact copies of world ``source``: its whole
    ``MjData`` (state and the derived quantities of the last step, which
    the next control step reads), so they continue bitwise as it would.
    The worlds must share the model's per-world fields (the same variant)."""
    src = self._worlds[source]
    for i in ids:
      mujoco.mj_copyData(self._worlds[i], self._mj_model, src)
    self._pull(ids)

  def _pull(self, ids) -> None:
    """Copy whole worlds (state, inputs, sensors) into the tensors."""
    for i in ids:
      d = self._worlds[i]
      for field in _INPUT_FIELDS:
        self._np[field][i] = getattr(d, field)
      mujoco.mj_getState(self._mj_model, d, self._input_buf[i], self._input_spec)
      mujoco.mj_getState(self._mj_model, d, self._output_buf[i], self._output_spec)
      self._np["sensordata"][i] = d.sensordata
      self._warning_now[i] = d.warning.number
      self._np["ncon"][i] = d.ncon
    self._unpack_outputs()
    self._pushed_input_versions = ()


def _variant_model(spec, num_envs: int, variant_info, configure):
  """Per-world mesh variants (mjlab's ``VariantEntityCfg``) on the C engine.

  mjlab's own builder computes which mesh every world's slot geoms use and
  the fields that follow from the mesh (sizes, frames, masses, inertias);
  its arrays are only created on Warp's CPU device here, never stepped. Each
  world's values are written into its model before it steps, like domain
  randomized fields. Returns (template model, {field: [num_envs, ...]},
  {entity: world-to-variant [num_envs]}).
  """
  import warp as wp
  from mjlab.entity.variants import VARIANT_DEPENDENT_FIELDS, build_variant_model

  with wp.ScopedDevice("cpu"):
    result = build_variant_model(spec, num_envs, variant_info, configure)
  fields = ("geom_dataid", "geom_matid", *VARIANT_DEPENDENT_FIELDS)
  per_world = {name: getattr(result.wp_model, name).numpy() for name in fields}
  world_to_variant = {
    prefix.rstrip("/"): torch.as_tensor(w2v, dtype=torch.long)
    for prefix, w2v in result.world_to_variant.items()
  }
  return result.mj_model, per_world, world_to_variant


def seed_rng_without_warp(seed: int, torch_deterministic: bool = False) -> None:
  """mjlab's ``mjlab.utils.random.seed_rng`` without its ``wp.rand_init`` call.

  The same generators are seeded (``PYTHONHASHSEED``, Python, NumPy, torch).
  Warp's ``rand_init`` called from Python only returns a value, which mjlab
  discards, so nothing is left unseeded. But the call starts Warp's runtime,
  and on a machine without an NVIDIA driver that prints "Warp CUDA warning:
  Could not find or load the NVIDIA CUDA driver" on stderr. The C engine
  needs no Warp for that.
  """
  os.environ["PYTHONHASHSEED"] = str(seed)
  random.seed(seed)
  np.random.seed(seed)
  torch.manual_seed(seed)
  if torch_deterministic:
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextlib.contextmanager
def seeding_without_warp() -> Iterator[None]:
  """mjlab's ``ManagerBasedRlEnv.seed`` seeds with ``seed_rng_without_warp``
  inside this block (its own ``seed`` logic otherwise unchanged)."""
  import mjlab.envs.manager_based_rl_env as env_module

  original = env_module.random_utils
  env_module.random_utils = types.SimpleNamespace(seed_rng=seed_rng_without_warp)
  try:
    yield
  finally:
    env_module.random_utils = original


def seed_c_engine_env(seed: int = -1) -> int:
  """``ManagerBasedRlEnv.seed`` for environments on the C engine (set as the
  instance's ``seed`` by ``make_env``): no Warp runtime is started."""
  from mjlab.envs import ManagerBasedRlEnv

  with seeding_without_warp():
    return ManagerBasedRlEnv.seed(seed)


@contextlib.contextmanager
def simulation_class(cls):
  """Build mjlab's environment around another simulation class; its scene
  gives camera sensors the C engine's renderer (``c_cameras``) instead of
  MuJoCo Warp's render context, and seeding starts no Warp runtime
  (``seed_rng_without_warp``) while the block lasts."""
  import mjlab.envs.manager_based_rl_env as env_module
  import mjlab.scene.scene as scene_module

  from mjlab_tasks.engine.c_cameras import CSensorContext

  originals = env_module.Simulation, scene_module.SensorContext
  env_module.Simulation, scene_module.SensorContext = cls, CSensorContext
  try:
    with seeding_without_warp():
      yield
  finally:
    env_module.Simulation, scene_module.SensorContext = originals


def make_env(
  cfg: ManagerBasedRlEnvCfg,
  device: str = "cpu",
  engine: str | None = None,
  num_threads: int | None = None,
  compiled_control: bool | None = None,
  **kwargs,
) -> ManagerBasedRlEnv:
  """mjlab's ``ManagerBasedRlEnv`` on MuJoCo Warp or on the C MuJoCo engine.

  Args:
    cfg: Environment configuration (the same for both engines).
    device: ``cpu`` or ``cuda:N``.
    engine: ``warp``, ``mujoco`` or ``None`` (warp on CUDA, mujoco on CPU).
    num_threads: C engine only: worker threads (default: one per core, at
      most one per environment).
    compiled_control: Run each policy step's physics steps with the
      compiled arm control (``compiled_control``: C on the C engine, Warp
      kernels and one CUDA graph per policy step on MuJoCo Warp) when the
      task allows it; False keeps mjlab's Python loop (same results to
      float32 rounding of the targets, slower). Default: on the CPU (both
      engines); on CUDA only when asked for (its captured graph has not yet
      run on a GPU).
  """
  from mjlab.envs import ManagerBasedRlEnv

  from mjlab_tasks.engine import compiled_control as compiled
  from mjlab_tasks.engine.shared_observations import share_observation_terms

  if resolve_engine(engine, device) == "warp":
    if num_threads is not None:
      raise ValueError("num_threads applies to the C MuJoCo engine only")
    env = ManagerBasedRlEnv(cfg, device=device, **kwargs)
  else:
    simulation = functools.partial(CMujocoSimulation, num_threads=num_threads)
    with simulation_class(simulation):
      env = ManagerBasedRlEnv(cfg, device=device, **kwargs)
    # Later ``reset(seed=...)`` calls, outside the block above.
    env.seed = seed_c_engine_env
  compiled.install(env, compiled_control)  # Sets env.compiled_loop.
  share_observation_terms(env)
  return env
