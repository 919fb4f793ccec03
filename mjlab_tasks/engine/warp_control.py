"""The compiled arm control (``native/arm_control.cc``) as Warp kernels.

``step_controlled`` runs a policy step's physics steps on MuJoCo Warp with the
arm control computed on the device before each one: per world the arm term's
bounded damped-least-squares step (or joint step), the joint targets written
into ``ctrl`` and the bias compensation into ``qfrc_applied``, then
``mujoco_warp.step`` as mjlab's ``Simulation.step`` runs it, then a copy of
the recorded slices. On CUDA with mjlab's graphs enabled the whole loop is
captured once per (nsteps, record) and replayed as one graph launch per
policy step; elsewhere the same kernels are launched one by one.

The arithmetic is arm_control.cc's, in float64 from MuJoCo Warp's float32
state; the results are rounded to float32 where they are stored.
"""

from __future__ import annotations

import dataclasses
import weakref

import mujoco_warp as mjwarp
import torch
import warp as wp
from mjlab.sim.sim import Simulation, _suspend_gc

from mjlab_tasks.engine import native_control

_MAX = native_control.MAX_ARM
_vec6d = wp.types.vector(length=6, dtype=wp.float64)
_vec8d = wp.types.vector(length=_MAX, dtype=wp.float64)
_mat66d = wp.types.matrix(shape=(6, 6), dtype=wp.float64)
_mat68d = wp.types.matrix(shape=(6, _MAX), dtype=wp.float64)

# Per-world parameter layout (native_control / arm_control.cc).
_POS = wp.constant(native_control.PARAM_POS.start)
_QUAT = wp.constant(native_control.PARAM_QUAT.start)
_HAS_TARGET = wp.constant(native_control.PARAM_HAS_TARGET)
_JOINT_TARGETS = wp.constant(native_control.PARAM_JOINT_TARGETS)
_CARTESIAN = wp.constant(native_control.MODE_CARTESIAN)


@wp.func
def _mat2quat(m: wp.mat33d) -> wp.vec4d:
  """mju_mat2Quat: (w, x, y, z) from the largest component, normalized."""
  half = wp.float64(0.5)
  quarter = wp.float64(0.25)
  one = wp.float64(1.0)
  q = wp.vec4d()
  if m[0, 0] + m[1, 1] + m[2, 2] > wp.float64(0.0):
    q[0] = half * wp.sqrt(one + m[0, 0] + m[1, 1] + m[2, 2])
    q[1] = quarter * (m[2, 1] - m[1, 2]) / q[0]
    q[2] = quarter * (m[0, 2] - m[2, 0]) / q[0]
    q[3] = quarter * (m[1, 0] - m[0, 1]) / q[0]
  elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
    q[1] = half * wp.sqrt(one + m[0, 0] - m[1, 1] - m[2, 2])
    q[0] = quarter * (m[2, 1] - m[1, 2]) / q[1]
    q[2] = quarter * (m[0, 1] + m[1, 0]) / q[1]
    q[3] = quarter * (m[0, 2] + m[2, 0]) / q[1]
  elif m[1, 1] > m[2, 2]:
    q[2] = half * wp.sqrt(one - m[0, 0] + m[1, 1] - m[2, 2])
    q[0] = quarter * (m[0, 2] - m[2, 0]) / q[2]
    q[1] = quarter * (m[0, 1] + m[1, 0]) / q[2]
    q[3] = quarter * (m[1, 2] + m[2, 1]) / q[2]
  else:
    q[3] = half * wp.sqrt(one - m[0, 0] - m[1, 1] + m[2, 2])
    q[0] = quarter * (m[1, 0] - m[0, 1]) / q[3]
    q[1] = quarter * (m[0, 2] + m[2, 0]) / q[3]
    q[2] = quarter * (m[1, 2] + m[2, 1]) / q[3]
  return q / wp.length(q)


@wp.func
def _mul_quat(a: wp.vec4d, b: wp.vec4d) -> wp.vec4d:
  """mju_mulQuat (w, x, y, z)."""
  return wp.vec4d(
    a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
    a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
    a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
    a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
  )


@wp.func
def _rotation_error(target: wp.vec4d, xmat: wp.mat33d) -> wp.vec3d:
  """axis_angle_from_quat(quat_mul(target, quat_inv(current))), as mjlab's
  math does it (w >= 0, Taylor expansion below 1e-6 rad)."""
  cur = _mat2quat(xmat)
  q = _mul_quat(target, wp.vec4d(cur[0], -cur[1], -cur[2], -cur[3]))
  if q[0] < wp.float64(0.0):
    q = -q
  mag = wp.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
  half = wp.atan2(mag, q[0])
  angle = wp.float64(2.0) * half
  s = wp.float64(0.5) - angle * angle / wp.float64(48.0)
  if wp.abs(angle) > wp.float64(1e-6):
    s = wp.sin(half) / angle
  return wp.vec3d(q[1] / s, q[2] / s, q[3] / s)


@wp.func
def _cartesian_step(
  w: int,
  n: int,
  site: int,
  damping: wp.float64,
  joint: wp.array(dtype=int),
  params: wp.array2d(dtype=wp.float64),
  site_xpos: wp.array2d(dtype=wp.vec3),
  site_xmat: wp.array2d(dtype=wp.mat33),
  xaxis: wp.array2d(dtype=wp.vec3),
  xanchor: wp.array2d(dtype=wp.vec3),
) -> _vec8d:
  p = wp.vec3d(site_xpos[w, site])
  err = _vec6d()
  if params[w, _HAS_TARGET] != wp.float64(0.0):
    target_pos = wp.vec3d(params[w, _POS], params[w, _POS + 1], params[w, _POS + 2])
    target_quat = wp.vec4d(
      params[w, _QUAT],
      params[w, _QUAT + 1],
      params[w, _QUAT + 2],
      params[w, _QUAT + 3],
    )
    rot = _rotation_error(target_quat, wp.mat33d(site_xmat[w, site]))
    for k in range(3):
      err[k] = target_pos[k] - p[k]
      err[3 + k] = rot[k]
  # Geometric Jacobian of a hinge chain: column j = [a_j x (p - o_j); a_j].
  jac = _mat68d()
  for j in range(n):
    axis = wp.vec3d(xaxis[w, joint[j]])
    lin = wp.cross(axis, p - wp.vec3d(xanchor[w, joint[j]]))
    for k in range(3):
      jac[k, j] = lin[k]
      jac[3 + k, j] = axis[k]
  # dq = J^T (J J^T + lambda^2 I)^-1 err, by Cholesky (mju_cholFactor, Solve).
  a = _mat66d()
  for r in range(6):
    for c in range(6):
      s = wp.float64(0.0)
      for j in range(n):
        s += jac[r, j] * jac[c, j]
      a[r, c] = s
    a[r, r] += damping * damping
  for j in range(6):
    d = a[j, j]
    for k in range(j):
      d -= a[j, k] * a[j, k]
    a[j, j] = wp.sqrt(d)
    for i in range(j + 1, 6):
      s = a[i, j]
      for k in range(j):
        s -= a[i, k] * a[j, k]
      a[i, j] = s / a[j, j]
  y = err  # solved in place: L z = err, then L^T y = z
  for i in range(6):
    for k in range(i):
      y[i] -= a[i, k] * y[k]
    y[i] = y[i] / a[i, i]
  for ii in range(6):
    i = 5 - ii
    for k in range(i + 1, 6):
      y[i] -= a[k, i] * y[k]
    y[i] = y[i] / a[i, i]
  dq = _vec8d()
  for j in range(n):
    s = wp.float64(0.0)
    for k in range(6):
      s += jac[k, j] * y[k]
    dq[j] = s
  return dq


@wp.kernel
def _arm_control_kernel(
  # The task's ArmControl.
  mode: int,
  n: int,
  bias_compensation: int,
  site: int,
  max_dq: wp.float64,
  damping: wp.float64,
  qpos_adr: wp.array(dtype=int),
  dof_adr: wp.array(dtype=int),
  joint: wp.array(dtype=int),
  ctrl_id: wp.array(dtype=int),
  params: wp.array2d(dtype=wp.float64),
  # MuJoCo Warp data in.
  qpos: wp.array2d(dtype=float),
  site_xpos: wp.array2d(dtype=wp.vec3),
  site_xmat: wp.array2d(dtype=wp.mat33),
  xaxis: wp.array2d(dtype=wp.vec3),
  xanchor: wp.array2d(dtype=wp.vec3),
  qfrc_bias: wp.array2d(dtype=float),
  # Out.
  ctrl: wp.array2d(dtype=float),
  qfrc_applied: wp.array2d(dtype=float),
  last_dq: wp.array2d(dtype=float),
):
  w = wp.tid()
  dq = _vec8d()
  if mode == _CARTESIAN:
    dq = _cartesian_step(
      w, n, site, damping, joint, params, site_xpos, site_xmat, xaxis, xanchor
    )
  elif params[w, _HAS_TARGET] != wp.float64(0.0):
    for j in range(n):
      dq[j] = params[w, _JOINT_TARGETS + j] - wp.float64(qpos[w, qpos_adr[j]])
  # Direction-preserving bound: the whole step is scaled, never clipped.
  largest = wp.float64(0.0)
  for j in range(n):
    largest = wp.max(largest, wp.abs(dq[j]))
  scale = wp.min(max_dq / wp.max(largest, wp.float64(1e-12)), wp.float64(1.0))
  for j in range(n):
    limited = dq[j] * scale
    last_dq[w, j] = float(dq[j])
    last_dq[w, n + j] = float(limited)
    ctrl[w, ctrl_id[j]] = float(wp.float64(qpos[w, qpos_adr[j]]) + limited)
    if bias_compensation != 0:
      qfrc_applied[w, dof_adr[j]] = qfrc_bias[w, dof_adr[j]]


@wp.kernel
def _record_kernel(
  src: wp.array2d(dtype=float),
  start: int,
  step: int,
  column: int,
  readings: wp.array3d(dtype=float),
):
  w, k = wp.tid()
  readings[w, step, column + k] = src[w, start + k]


def _flat(array: wp.array, nworld: int, start: int, stop: int) -> wp.array:
  """A per-world flat float32 view [nworld, size] of a MuJoCo Warp data array
  (its memory: the record kernel reads it after every step)."""
  tensor = wp.to_torch(array)
  if tensor.dtype != torch.float32 or tensor.shape[0] != nworld:
    raise ValueError(f"{array.dtype} array of shape {array.shape} is not recordable")
  flat = tensor.view(nworld, -1)  # a view, never a copy
  if not 0 <= start <= stop <= flat.shape[1]:
    raise IndexError(f"[{start}:{stop}] is out of range of {flat.shape[1]} per world")
  return wp.from_torch(flat)


def _array_pointers(obj, seen: set[int] | None = None) -> tuple:
  """Every array address in a MuJoCo Warp Model or Data (nested included):
  a captured graph is valid only while none of them changed."""
  seen = set() if seen is None else seen
  if id(obj) in seen:
    return ()
  seen.add(id(obj))
  out = []
  for field in dataclasses.fields(obj):
    value = getattr(obj, field.name, None)
    if isinstance(value, wp.array):
      out.append(value.ptr)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
      out.extend(_array_pointers(value, seen))
  return tuple(out)


class _Loop:
  """One simulation's device-side control buffers and captured graphs (it
  holds no reference to the simulation: ``_loops`` is keyed weakly by it)."""

  def __init__(self, sim: Simulation, control: native_control.ArmControl):
    self.control_bytes = bytes(control)
    n, device = control.n, sim.wp_device
    self.mode = control.mode
    self.scalars = (
      control.mode,
      n,
      control.bias_compensation,
      control.site,
      wp.float64(control.max_dq),
      wp.float64(control.damping),
    )
    self.indices = [
      wp.array(list(getattr(control, name))[:n] or [0], dtype=int, device=device)
      for name in ("qpos_adr", "dof_adr", "joint", "ctrl")
    ]
    self.params = wp.zeros(
      (sim.num_envs, native_control.NUM_PARAMS), dtype=wp.float64, device=device
    )
    self.last_dq = wp.zeros((sim.num_envs, max(2 * n, 1)), dtype=float, device=device)
    self.graphs: dict[tuple, tuple] = {}
    self.pointers = None

  def control(self, sim: Simulation) -> None:
    """Launches the arm control kernel (ctrl, qfrc_applied, last_dq)."""
    d = sim.wp_data
    wp.launch(
      _arm_control_kernel,
      dim=sim.num_envs,
      inputs=[
        *self.scalars,
        *self.indices,
        self.params,
        d.qpos,
        d.site_xpos,
        d.site_xmat,
        d.xaxis,
        d.xanchor,
        d.qfrc_bias,
      ],
      outputs=[d.ctrl, d.qfrc_applied, self.last_dq],
      device=sim.wp_device,
    )

  def launch(
    self, sim: Simulation, nsteps: int, sources: list, readings: wp.array
  ) -> None:
    """The kernels of one policy step (captured as they are on CUDA)."""
    m, d, nworld = sim.wp_model, sim.wp_data, sim.num_envs
    for step in range(nsteps):
      if self.mode != native_control.MODE_NONE:
        self.control(sim)
      mjwarp.step(m, d)
      column = 0
      for src, start, width in sources:
        if width:
          wp.launch(
            _record_kernel,
            dim=(nworld, width),
            inputs=[src, start, step, column],
            outputs=[readings],
            device=sim.wp_device,
          )
        column += width

  def run(self, sim: Simulation, nsteps: int, record: tuple) -> wp.array:
    nworld = sim.num_envs
    d, width = sim.wp_data, sum(b - a for _, a, b in record)
    sources = [(_flat(getattr(d, f), nworld, a, b), a, b - a) for f, a, b in record]
    if not sim.use_cuda_graph:
      readings = wp.zeros((nworld, nsteps, width), dtype=float, device=sim.wp_device)
      self.launch(sim, nsteps, sources, readings)
      return readings
    # A graph holds the addresses of the arrays it was captured with: when
    # mjlab replaces any (expand_model_fields, then create_graph), capture anew.
    pointers = _array_pointers(sim.wp_model) + _array_pointers(sim.wp_data)
    if pointers != self.pointers:
      self.graphs.clear()
      self.pointers = pointers
    key = (nsteps, record)
    if key not in self.graphs:
      readings = wp.zeros((nworld, nsteps, width), dtype=float, device=sim.wp_device)
      # GC must not finalize stale graphs inside the capture (see mjlab's sim).
      with _suspend_gc(), wp.ScopedCapture() as capture:
        self.launch(sim, nsteps, sources, readings)
      self.graphs[key] = (capture.graph, readings)
    graph, readings = self.graphs[key]
    wp.capture_launch(graph)
    return readings


_loops: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _loop(sim: Simulation, control: native_control.ArmControl, params) -> _Loop:
  loop = _loops.get(sim)
  if loop is None or loop.control_bytes != bytes(control):
    loop = _loops[sim] = _Loop(sim, control)
  params = torch.as_tensor(params, dtype=torch.float64, device=sim.device)
  with wp.ScopedDevice(sim.wp_device):
    if sim.wp_device.is_cuda:  # the copy runs on Warp's stream, after torch's
      wp.wait_stream(wp.stream_from_torch(sim.device))
    wp.copy(loop.params, wp.from_torch(params.contiguous()))
  return loop


def _torch_after_warp(sim: Simulation) -> None:
  """Orders torch's next work (reading the results) after Warp's launches."""
  if sim.wp_device.is_cuda:
    torch.cuda.current_stream(sim.device).wait_stream(
      wp.stream_to_torch(wp.get_stream(sim.wp_device))
    )


def control_targets(
  sim: Simulation, control: native_control.ArmControl, params: torch.Tensor
) -> torch.Tensor:
  """One control computation without stepping (parity tests): writes ctrl and
  qfrc_applied; returns last_dq [num_envs, 2 * n]."""
  loop = _loop(sim, control, params)
  with wp.ScopedDevice(sim.wp_device):
    loop.control(sim)
  _torch_after_warp(sim)
  return wp.to_torch(loop.last_dq)[:, : 2 * control.n].clone()


def step_controlled(
  sim: Simulation,
  control: native_control.ArmControl,
  params: torch.Tensor,
  nsteps: int,
  record: tuple[tuple[str, int, int], ...] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
  """``nsteps`` physics steps of every world with the arm control computed on
  the device before each (``CMujocoSimulation.step_controlled``'s contract).

  Args:
    sim: mjlab's MuJoCo Warp simulation.
    control: The task's ``native_control.ArmControl``.
    params: Per-world control parameters [num_envs, NUM_PARAMS] (any float
      dtype or device; numpy accepted).
    nsteps: Physics steps (a policy step's decimation).
    record: Flat per-world slices ``(field, start, stop)`` of float data
      fields (``("xpos", 3 * body, 3 * body + 3)``, ``("sensordata", a, b)``),
      read after every step.

  Returns the readings [num_envs, nsteps, K] and each world's last unlimited
  and limited joint steps [num_envs, 2 * n], float32 on the sim's device.
  """
  loop = _loop(sim, control, params)
  record = tuple((str(f), int(a), int(b)) for f, a, b in record)
  with wp.ScopedDevice(sim.wp_device), sim.nan_guard.watch(sim.data):
    readings = loop.run(sim, nsteps, record)
  _torch_after_warp(sim)
  last_dq = wp.to_torch(loop.last_dq)[:, : 2 * control.n].clone()
  if readings.size == 0:  # wp.to_torch fails on empty CPU arrays
    return torch.zeros(readings.shape, device=sim.device), last_dq
  return wp.to_torch(readings).clone(), last_dq
