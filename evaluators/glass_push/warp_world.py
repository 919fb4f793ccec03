"""The examiner's world on MuJoCo Warp: many tables stepped as one batch.

``GlassWorldBatch`` holds N tables in one MuJoCo Warp model (``nworld = N``)
and runs the same push routine, ``follow()``, ``take()`` and readings as the
C MuJoCo ``GlassWorld`` (``world.py``), for every table at once: the hand's
commanded path, its IK, the force thresholds and the recording are batched
over tables; a table's sequence of moves (the seed's six steps) is a small
per-table program that only runs when one of its moves ends.

One compiled model serves tables with different glasses: every table has
``SLOTS`` glass bodies of ``PARTS`` convex mesh parts each; the mesh each
part uses (``geom_dataid``) and the sizes, frames, masses and inertias that
follow from it are per world (MuJoCo Warp's batched model fields), taken
from each table's own compiled C model. Unused slots hold a small parked
glass on the floor far beyond the table, which is never read. See
docs/glass_push.md ("MuJoCo Warp") for how this differs from the C world.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp
from mjlab.utils.lab_api.math import axis_angle_from_quat, quat_from_matrix

from assets.ur5_rg2 import ARM_JOINT_NAMES, TCP_SITE_NAME, build_ur5_rg2_spec
from assets.ur5_rg2.kinematics import dls_step_batched
from evaluators.glass_push import hidden
from evaluators.glass_push import requests as rq
from evaluators.glass_push import world as cw
from evaluators.glass_push.errors import BudgetSpent
from evaluators.glass_push.felt import felt_distances
from evaluators.glass_push.glasses import (
  PALETTE,
  PARKED,
  PARTS,
  glass_parts,
  parked_place,
)
from evaluators.glass_push.hand import LOWEST_TCP_Z, PAD_HALF_Z
from evaluators.glass_push.tables import MAX_GLASSES, Glass

SLOTS = MAX_GLASSES
# Contacts and constraint rows allocated per world (a table's pile with the
# hand in it uses well under half).
NCONMAX = 256
NJMAX = 1024


def _slot_glass(glasses, slot: int) -> Glass:
  return glasses[slot] if slot < len(glasses) else PARKED


def slotted_spec(tables_glasses, physics: cw.PhysicsConfig, geoms_of: int = 0):
  """The C world's scene with ``SLOTS`` glass slots, plus the mesh assets of
  every table in ``tables_glasses`` (named ``t{table}_s{slot}_p{part}``);
  the slots' geoms use table ``geoms_of``'s meshes and places."""
  spec = cw.build_world_spec((), physics)
  for t, glasses in enumerate(tables_glasses):
    for s in range(SLOTS):
      for k, (verts, _) in enumerate(glass_parts(_slot_glass(glasses, s))):
        spec.add_mesh(name=f"t{t}_s{s}_p{k}", uservert=verts.ravel())
  glasses = tables_glasses[geoms_of]
  for s in range(SLOTS):
    g = _slot_glass(glasses, s)
    pos = [g.x, g.y, 0.0] if s < len(glasses) else list(parked_place(s))
    body = spec.worldbody.add_body(name=f"slot_{s}", pos=pos)
    body.add_freejoint(name=f"slot_{s}")
    for k, (_, mass) in enumerate(glass_parts(g)):
      body.add_geom(
        name=f"slot_{s}_p{k}",
        type=mujoco.mjtGeom.mjGEOM_MESH,
        meshname=f"t{geoms_of}_s{s}_p{k}",
        mass=mass,
        rgba=list(PALETTE[g.kind]),
        group=1,
        condim=4,
        friction=[physics.friction.glass_glass, 0.002, 0.0001],
      )
  return spec


def _batched_field_names(mw) -> list[str]:
  return [
    name
    for name, value in vars(mw).items()
    if isinstance(value, wp.array) and getattr(value, "_is_batched", False)
  ]


def _set_per_world_fields(
  mw, union: mujoco.MjModel, models, dataid, device
) -> list[str]:
  """Give the Warp model each table's values wherever the tables differ.

  Returns the names of the fields made per world. Raises if a field that
  MuJoCo Warp cannot batch differs between tables, or if a batched field is
  not a plain reshape of MuJoCo's (so copying it would be wrong).
  """
  batched = set(_batched_field_names(mw))
  per_world = []
  for name in sorted(batched):
    if name == "geom_dataid" or not hasattr(union, name):
      continue
    values = [np.asarray(getattr(m, name)) for m in models]
    if all(np.array_equal(values[0], v) for v in values[1:]):
      continue
    current = getattr(mw, name)
    here = current.numpy()
    mine = np.asarray(getattr(union, name))
    if here.size != mine.size or not np.allclose(
      here.ravel(), mine.ravel().astype(here.dtype), atol=1e-6
    ):
      raise NotImplementedError(f"per-table model field {name} needs a conversion")
    stacked = np.stack(values).reshape((len(models), *here.shape[1:]))
    array = wp.array(stacked, dtype=current.dtype, device=device)
    array._is_batched = True
    setattr(mw, name, array)
    per_world.append(name)
  array = wp.array(dataid, dtype=int, device=device)
  array._is_batched = True
  mw.geom_dataid = array
  # Everything MuJoCo Warp holds but cannot batch must agree between the
  # tables (the meshes are the union's; only island sleeping, which is off,
  # reads dof_length).
  for name in dir(models[0]):
    if (
      name.startswith("mesh_")
      or name in batched
      or name == "dof_length"
      or not hasattr(mw, name)
    ):
      continue
    value = getattr(models[0], name)
    if not isinstance(value, np.ndarray):
      continue
    for m in models[1:]:
      if not np.array_equal(value, getattr(m, name)):
        raise NotImplementedError(f"model field {name} differs between tables")
  return per_world


def hand_rotations(heading: torch.Tensor) -> torch.Tensor:
  """``world.hand_rotation`` for a batch of headings [N] -> [N, 3, 3]."""
  c, s = torch.cos(heading), torch.sin(heading)
  z = torch.zeros_like(c)
  cols = [torch.stack([-s, c, z], -1), torch.stack([c, s, z], -1)]
  cols.append(torch.stack([z, z, -torch.ones_like(c)], -1))
  return torch.stack(cols, -1)


@dataclass
class _Move:
  """A straight line of the commanded tool point (``GlassWorld._move``)."""

  target: np.ndarray
  heading: float
  speed: float
  stop: float = math.inf


@dataclass
class _Way:
  """follow()'s waypoint loop over ``way`` [K, 4]."""

  way: np.ndarray


class _Settle:
  """Hold the hand until every glass has stopped (``GlassWorld._settle``)."""


IDLE, MOVE, WAY, SETTLE = 0, 1, 2, 3


class GlassWorldBatch:
  """Many tables in one MuJoCo Warp model: the examiner's batched world.

  Args:
    tables: table numbers (each drawn as in ``GlassWorld``).
    pushes: the push budget of every table.
    physics: the private physics fixture (``world.PhysicsConfig``).
    film: keep film poses (10 fps) for ``write_film``.
    device: Warp device ("cuda:0", "cpu"); default Warp's default device.
    nconmax, njmax: contacts and constraint rows allocated per table. A
      table whose step overflows them is flagged (``physics_overflow`` in its
      actions and record, MuJoCo Warp's bitmask) and a warning is given.
  """

  def __init__(
    self,
    tables,
    pushes: int,
    physics: cw.PhysicsConfig | None = None,
    film: bool = False,
    device: str | None = None,
    nconmax: int = NCONMAX,
    njmax: int = NJMAX,
  ):
    if isinstance(pushes, bool) or not isinstance(pushes, (int, np.integer)):
      raise ValueError(f"pushes must be an int, got {pushes!r}")
    if pushes < 1:
      raise ValueError(f"pushes must be at least 1, got {pushes}")
    self.tables = [int(t) for t in tables]
    if not self.tables:
      raise ValueError("a batch needs at least one table")
    self.physics = physics if physics is not None else cw.PhysicsConfig()
    self.glasses = [cw.table_glasses(t, self.physics) for t in self.tables]
    n = self.n = len(self.tables)
    self.film = bool(film)
    self.budget = int(pushes)
    self.pushes_left = np.full(n, int(pushes))
    self.device = wp.get_device(device)
    self.torch_device = wp.device_to_torch(self.device)
    # Each table's own C model (derived values, pictures) and the union.
    self.models = [slotted_spec([g], self.physics).compile() for g in self.glasses]
    union = self.model = slotted_spec(self.glasses, self.physics).compile()
    dataid = np.tile(union.geom_dataid, (n, 1))
    for t in range(n):
      for s in range(SLOTS):
        for k in range(PARTS):
          dataid[t, union.geom(f"slot_{s}_p{k}").id] = union.mesh(f"t{t}_s{s}_p{k}").id
    with wp.ScopedDevice(self.device):
      self.mw = mjw.put_model(union)
      self.per_world_fields = _set_per_world_fields(
        self.mw, union, self.models, dataid, self.device
      )
      self.dw = mjw.put_data(
        union, mujoco.MjData(union), nworld=n, nconmax=nconmax, njmax=njmax
      )
    m = union
    self._qadr = np.array([m.joint(j).qposadr[0] for j in ARM_JOINT_NAMES])
    self._dof = np.array([m.joint(j).dofadr[0] for j in ARM_JOINT_NAMES])
    self._act = np.array([m.actuator(j).id for j in ARM_JOINT_NAMES])
    self._grip = m.actuator("rg2_opening").id
    self._tcp = m.site(TCP_SITE_NAME).id
    self._force_adr = m.sensor(cw.HAND_FORCE_SENSOR).adr[0] + np.arange(3)
    self._sbody = np.array([m.body(f"slot_{s}").id for s in range(SLOTS)])
    self._sq = np.array([m.joint(f"slot_{s}").qposadr[0] for s in range(SLOTS)])
    self._sv = np.array([m.joint(f"slot_{s}").dofadr[0] for s in range(SLOTS)])
    self._ng = np.array([len(g) for g in self.glasses])
    t = wp.to_torch
    d = self.dw
    self._qpos, self._qvel, self._ctrl = t(d.qpos), t(d.qvel), t(d.ctrl)
    self._qfrc_applied, self._qfrc_bias = t(d.qfrc_applied), t(d.qfrc_bias)
    self._site_xpos, self._site_xmat = t(d.site_xpos), t(d.site_xmat)
    self._xpos, self._xmat = t(d.xpos), t(d.xmat)
    self._sensordata, self._time = t(d.sensordata), t(d.time)
    self._overflow = t(d.overflow)
    # Overflow bits of every step, accumulated on the device.
    self._overflow_seen = torch.zeros_like(self._overflow)
    self._gv6 = torch.as_tensor(
      (self._sv[:, None] + np.arange(6)).ravel(), device=self.torch_device
    )
    self._init_ik()
    # Host state of the run, per table.
    tallest = np.array([max(g.height for g in gl) for gl in self.glasses])
    self.z_safe = tallest + cw.LIFT_CLEARANCE + PAD_HALF_Z
    self.cmd = np.column_stack(
      [np.full(n, cw.ZONE_CENTER[0]), np.full(n, cw.ZONE_CENTER[1] + 0.25), self.z_safe]
    )
    self.heading = np.zeros(n)
    self.taken: list[dict[int, dict]] = [{} for _ in range(n)]
    self.refused: list[dict[int, str]] = [{} for _ in range(n)]
    self.actions: list[list[dict]] = [[] for _ in range(n)]
    self.looks = np.zeros(n, int)
    self.steps = 0
    self._peak = np.zeros(n)
    self._active = np.zeros(n, bool)
    self._rec: list[tuple[np.ndarray, np.ndarray]] = []
    self._film_qpos: list[np.ndarray] = []
    self._renderers: dict[int, cw.PoseRenderer] = {}
    self._phase = np.zeros(n, int)
    self._overflow_total = np.zeros(n, int)
    for _ in range(300):
      self._ik_step()
    qpos = np.stack([mod.qpos0 for mod in self.models])
    qpos[:, self._qadr] = self._qref.cpu().numpy()
    for side in ("left", "right"):
      qpos[:, m.joint(f"{side}_finger_joint").qposadr[0]] = -0.0275
    self._qpos.copy_(torch.as_tensor(qpos, dtype=self._qpos.dtype))
    self._ctrl[:, self._grip] = -1.0
    with wp.ScopedDevice(self.device):
      mjw.forward(self.mw, self.dw)
    for _ in range(250):
      self._tick()
    self._overflow_checked()
    self._film_qpos.clear()
    self.initial_qpos = self._qpos.cpu().numpy().astype(float)

  # -- the hand: batched IK and one physics step ---------------------------------

  def _init_ik(self) -> None:
    """Kinematic replica of the robot alone (one per table) for the IK."""
    kspec = build_ur5_rg2_spec()
    kspec.body("base").quat = list(cw.BASE_QUAT)
    km = kspec.compile()
    n = self.n
    with wp.ScopedDevice(self.device):
      self._km = mjw.put_model(km)
      self._kd = mjw.put_data(km, mujoco.MjData(km), nworld=n)
      ksite = km.site(TCP_SITE_NAME).id
      self._kbody = wp.array(np.full(n, km.site_bodyid[ksite]), dtype=int)
      self._kpoint = wp.zeros(n, dtype=wp.vec3)
      self._jacp = wp.zeros((n, 3, km.nv), dtype=float)
      self._jacr = wp.zeros((n, 3, km.nv), dtype=float)
    t = wp.to_torch
    self._kqpos, self._ksite_xpos = t(self._kd.qpos), t(self._kd.site_xpos)
    self._ksite_xmat = t(self._kd.site_xmat)
    self._kpoint_t, self._jacp_t, self._jacr_t = (
      t(self._kpoint),
      t(self._jacp),
      t(self._jacr),
    )
    self._ksite = ksite
    self._kq = torch.as_tensor(
      [km.joint(j).qposadr[0] for j in ARM_JOINT_NAMES], device=self.torch_device
    )
    self._kdof = torch.as_tensor(
      [km.joint(j).dofadr[0] for j in ARM_JOINT_NAMES], device=self.torch_device
    )
    self._qref = torch.tensor(
      cw.HOME_Q, dtype=torch.float64, device=self.torch_device
    ).repeat(n, 1)

  def _ik_step(self) -> None:
    """One damped least-squares step of every arm reference toward its
    commanded tool pose (``GlassWorld._ik_step``, batched)."""
    dev = self.torch_device
    self._kqpos[:, self._kq] = self._qref.to(self._kqpos.dtype)
    with wp.ScopedDevice(self.device):
      mjw.kinematics(self._km, self._kd)
      mjw.com_pos(self._km, self._kd)
      self._kpoint_t.copy_(self._ksite_xpos[:, self._ksite])
      mjw.jac(self._km, self._kd, self._jacp, self._jacr, self._kpoint, self._kbody)
    cmd = torch.as_tensor(self.cmd, device=dev)
    heading = torch.as_tensor(self.heading, device=dev)
    rot = self._ksite_xmat[:, self._ksite].double()
    e_p = cmd - self._ksite_xpos[:, self._ksite].double()
    e_r = axis_angle_from_quat(
      quat_from_matrix(hand_rotations(heading) @ rot.transpose(1, 2))
    )
    jac = torch.cat(
      [self._jacp_t[:, :, self._kdof], self._jacr_t[:, :, self._kdof]], 1
    ).double()
    err = torch.cat([e_p, e_r], 1)
    self._qref = self._qref + dls_step_batched(jac, err, cw.IK_DAMPING)

  def _tick(self) -> np.ndarray:
    """IK toward the commanded poses, then one 2 ms physics step of every
    table. Returns the hand force of every table [N] (host)."""
    self._ik_step()
    self._ctrl[:, self._act] = self._qref.to(self._ctrl.dtype)
    self._qfrc_applied[:, self._dof] = self._qfrc_bias[:, self._dof]
    with wp.ScopedDevice(self.device):
      mjw.step(self.mw, self.dw)
    self._overflow_seen |= self._overflow
    self.steps += 1
    force = self._sensordata[:, self._force_adr].double().norm(dim=1).cpu().numpy()
    act = self._active
    self._peak[act] = np.maximum(self._peak[act], force[act])
    if self.steps % cw.RECORD_EVERY == 0 and act.any():
      p = self._site_xpos[:, self._tcp].double().cpu().numpy()
      r = self._site_xmat[:, self._tcp].double().reshape(-1, 9).cpu().numpy()
      rows = np.column_stack(
        [
          self._time.double().cpu().numpy(),
          p,
          np.arctan2(r[:, 4], r[:, 1]),
          force,
        ]
      )
      self._rec.append((act.copy(), rows))
    if self.film and self.steps % cw.FILM_EVERY == 0:
      self._film_qpos.append(self._qpos.double().cpu().numpy())
    return force

  def hand_positions(self) -> np.ndarray:
    """Tool points of every table [N, 3] (host, float64)."""
    return self._site_xpos[:, self._tcp].double().cpu().numpy()

  # -- running the tables' programs ------------------------------------------------

  def _start(self, i: int, segment, hand: np.ndarray, q5: np.ndarray) -> None:
    """Begin table ``i``'s next segment (a move, the waypoint loop, settling)."""
    if isinstance(segment, _Move):
      p0, h0 = self.cmd[i].copy(), self.heading[i]
      p1 = np.asarray(segment.target, dtype=float)
      dh = rq._wrap(segment.heading - h0)
      # As GlassWorld._move: turn the long way round rather than wind wrist_3
      # into its +-360 degree limit.
      if q5[i] - dh > 1.5 * math.pi:
        dh += 2 * math.pi
      elif q5[i] - dh < -1.5 * math.pi:
        dh -= 2 * math.pi
      duration = max(
        float(np.linalg.norm(p1 - p0)) / segment.speed, abs(dh) / cw.TURN_SPEED
      )
      self._p0[i], self._p1[i], self._h0[i], self._dh[i] = p0, p1, h0, dh
      self._n[i], self._k[i] = max(1, math.ceil(duration / cw.TIMESTEP)), 0
      self._stop[i] = segment.stop
      self._phase[i] = MOVE
    elif isinstance(segment, _Way):
      way = segment.way
      if len(way) > self._way.shape[1]:
        grown = np.zeros((self.n, len(way), 4))
        grown[:, : self._way.shape[1]] = self._way
        self._way = grown
      self._way[i, : len(way)] = way
      if len(way) + 1 > self._seen.shape[1]:
        grown = np.zeros((self.n, len(way) + 1, 3))
        grown[:, : self._seen.shape[1]] = self._seen
        self._seen = grown
      self._wlen[i], self._wj[i] = len(way), 0
      self._seen[i, 0], self._nseen[i] = hand[i], 1
      self._touch[i] = -1
      self._jammed[i] = False
      self._begin_waypoint(np.array([i]))
      self._phase[i] = WAY
    else:
      self._still[i] = self._settled[i] = 0
      self._phase[i] = SETTLE

  def _begin_waypoint(self, idx: np.ndarray) -> None:
    rows = self._way[idx, self._wj[idx]]  # [len(idx), 4]
    self._p0[idx] = self.cmd[idx]
    self._h0[idx] = self.heading[idx]
    self._p1[idx] = rows[:, :3]
    self._dh[idx] = (rows[:, 3] - self.heading[idx] + math.pi) % (2 * math.pi) - math.pi
    self._n[idx], self._k[idx] = cw.RECORD_EVERY, 0

  def _run(self, programs: dict[int, object]) -> dict[int, object]:
    """Run every table's program to its end; the others hold their hands."""
    n = self.n
    self._p0, self._p1 = np.zeros((n, 3)), np.zeros((n, 3))
    self._h0, self._dh, self._stop = np.zeros(n), np.zeros(n), np.full(n, math.inf)
    self._n, self._k = np.ones(n, int), np.zeros(n, int)
    # follow() waypoints per table (padded), their counts, the current one.
    self._way = np.zeros((n, 1, 4))
    self._wlen, self._wj = np.zeros(n, int), np.zeros(n, int)
    # Tool points at each follow's start and every waypoint's end (or where
    # a force cut it short), their counts, which one is the touch (-1: none
    # yet) and the heading there: felt_distances measures the report on them.
    self._seen, self._nseen = np.zeros((n, 2, 3)), np.zeros(n, int)
    self._touch, self._touch_heading = np.full(n, -1), np.zeros(n)
    self._jammed = np.zeros(n, bool)
    self._still, self._settled = np.zeros(n, int), np.zeros(n, int)
    results: dict[int, object] = {}
    hand = self.hand_positions()
    q5 = self._qref[:, 5].cpu().numpy()
    for i, program in programs.items():
      self._active[i] = True
      self._start(i, next(program), hand, q5)
    settle_max = int(cw.SETTLE_MAX_S / cw.TIMESTEP)
    while self._active.any():
      moving = (self._phase == MOVE) | (self._phase == WAY)
      self._k[moving] += 1
      a = (self._k / self._n)[:, None]
      self.cmd[moving] = (self._p0 + a * (self._p1 - self._p0))[moving]
      self.heading[moving] = (self._h0 + a[:, 0] * self._dh)[moving]
      force = self._tick()
      ended = np.zeros(n, bool)
      stopped = np.zeros(n, bool)
      # Moves: a force past the move's threshold, or the line's end.
      mv = self._phase == MOVE
      stopped[mv] = force[mv] > self._stop[mv]
      ended[mv] = stopped[mv] | (self._k[mv] >= self._n[mv])
      # Settling: every glass slower than the thresholds for 0.1 s.
      st = np.flatnonzero(self._phase == SETTLE)
      if st.size:
        rows = torch.as_tensor(st, device=self.torch_device)
        v = self._qvel[rows][:, self._gv6].double().reshape(-1, SLOTS, 6).cpu().numpy()
        still = ~np.any(
          (np.linalg.norm(v[:, :, :3], axis=2) > cw.STILL_LIN)
          | (np.linalg.norm(v[:, :, 3:], axis=2) > cw.STILL_ANG),
          axis=1,
        )
        self._still[st] = np.where(still, self._still[st] + 1, 0)
        self._settled[st] += 1
        ended[st] = (self._still[st] >= 50) | (self._settled[st] >= settle_max)
      # The waypoint loop (GlassWorld.follow): bookkeeping at each waypoint's end.
      wy = self._phase == WAY
      threshold = np.where(self._touch < 0, cw.TOUCH_FORCE, cw.JAM_FORCE)
      hit = wy & (force > threshold)
      at_end = np.flatnonzero(wy & (hit | (self._k >= self._n)))
      if at_end.size:
        hand = self.hand_positions()
        before = self._touch[at_end] < 0
        self._seen[at_end, self._nseen[at_end]] = hand[at_end]
        self._nseen[at_end] += 1
        touch = at_end[before & hit[at_end]]
        self._touch[touch] = self._nseen[touch] - 1
        self._touch_heading[touch] = self.heading[touch]
        post = at_end[~before]
        self._jammed[post[hit[post]]] = True
        done = self._jammed[at_end] | (self._wj[at_end] + 1 >= self._wlen[at_end])
        ended[at_end[done]] = True
        more = at_end[~done]
        if more.size:
          self._wj[more] += 1
          self._begin_waypoint(more)
      finished = np.flatnonzero(ended)
      if finished.size:
        hand = self.hand_positions()
        q5 = self._qref[:, 5].cpu().numpy()
      for i in finished:
        if self._phase[i] == MOVE:
          sent = bool(stopped[i])
        elif self._phase[i] == WAY:
          touched, pushed = felt_distances(
            self._seen[i, : self._nseen[i]],
            None if self._touch[i] < 0 else int(self._touch[i]),
            float(self._touch_heading[i]),
          )
          sent = (touched, bool(self._jammed[i]), pushed)
        else:
          sent = None
        self._phase[i] = IDLE
        try:
          self._start(i, programs[i].send(sent), hand, q5)
        except StopIteration as end:
          results[i] = end.value
          self._active[i] = False
    return results

  # -- the tables' programs (GlassWorld's push and follow, step for step) ---------

  def _lift(self, i: int):
    if self.cmd[i, 2] < self.z_safe[i] - 1e-9:
      yield _Move(
        np.array([self.cmd[i, 0], self.cmd[i, 1], self.z_safe[i]]),
        self.heading[i],
        cw.LIFT_SPEED,
      )

  def _push_program(self, i: int, start, heading: float, reach: float, travel: float):
    u = np.array([math.cos(heading), math.sin(heading), 0.0])
    yield from self._lift(i)
    yield _Move(
      np.array([start[0], start[1], self.z_safe[i]]), heading, cw.TRANSIT_SPEED
    )
    blocked = yield _Move(
      np.array([start[0], start[1], LOWEST_TCP_Z]),
      heading,
      cw.DESCEND_SPEED,
      cw.TOUCH_FORCE,
    )
    touched, jammed, pushed = None, False, 0.0
    if not blocked:
      p_feel = self.hand_positions()[i]
      if (yield _Move(self.cmd[i] + reach * u, heading, cw.FEEL_SPEED, cw.TOUCH_FORCE)):
        p_touch = self.hand_positions()[i]
        jammed = yield _Move(
          self.cmd[i] + travel * u, heading, cw.PUSH_SPEED, cw.JAM_FORCE
        )
        # GlassWorld.push's rule, the same function.
        touched, pushed = felt_distances(
          [p_feel, p_touch, self.hand_positions()[i]], 1, heading
        )
        yield _Move(self.cmd[i] - cw.BACK_OFF * u, heading, cw.BACK_OFF_SPEED)
    yield from self._lift(i)
    yield _Settle()
    return self._felt(i, blocked, touched, jammed, pushed)

  def _follow_program(self, i: int, way: np.ndarray):
    blocked = False
    first = way[0]
    if (
      np.linalg.norm(first[:3] - self.cmd[i]) > rq.MAX_WAYPOINT_STEP
      or abs(rq._wrap(first[3] - self.heading[i])) > rq.MAX_WAYPOINT_TURN
    ):
      # Approach like a push: up, across, down (a touch on the way is blocked).
      yield from self._lift(i)
      yield _Move(
        np.array([first[0], first[1], self.z_safe[i]]), first[3], cw.TRANSIT_SPEED
      )
      blocked = yield _Move(first[:3], first[3], cw.DESCEND_SPEED, cw.TOUCH_FORCE)
    touched, jammed, pushed = None, False, 0.0
    if blocked:
      yield from self._lift(i)
    else:
      touched, jammed, pushed = yield _Way(way)
      if jammed:
        # Back 20 mm against the last waypoint step's horizontal direction.
        move = self._p1[i] - self._p0[i]
        move[2] = 0.0
        length = float(np.linalg.norm(move))
        if length < 1e-9:
          move = np.array([math.cos(self.heading[i]), math.sin(self.heading[i]), 0.0])
          length = 1.0
        yield _Move(
          self.cmd[i] - cw.BACK_OFF * move / length, self.heading[i], cw.BACK_OFF_SPEED
        )
    yield _Settle()
    return self._felt(i, blocked, touched, jammed, pushed)

  def _felt(self, i, blocked, touched, jammed, pushed) -> dict:
    return {
      "blocked": bool(blocked),
      "touched": touched,
      "jammed": bool(jammed),
      "peak": float(self._peak[i]),
      "pushed": pushed,
    }

  # -- the calls, for many tables at once ---------------------------------------------

  def _begin(self, i: int) -> None:
    if self.pushes_left[i] <= 0:
      raise BudgetSpent(
        f"the push budget of {self.budget} is spent: the run has ended "
        "(look, take and refuse still answer)"
      )

  def act(self, requests: dict[int, tuple]) -> dict[int, tuple]:
    """Pushes and follows of many tables, run together.

    Args:
      requests: table index -> ("push", request) or ("follow", chunk, glass,
        aim), as ``GlassWorld.push`` / ``GlassWorld.follow`` take them.

    Returns:
      table index -> ("ok", report) or ("error", exception type name, message).
    """
    replies: dict[int, tuple] = {}
    programs, entries = {}, {}
    for i, (kind, *args) in requests.items():
      try:
        if kind == "push":
          glass, start, heading, reach, travel, aim, clean = rq.parse_push(
            args[0], self.glasses[i], self.taken[i]
          )
          self._begin(i)
          programs[i] = self._push_program(i, start, heading, reach, travel)
          entries[i] = dict(kind="push", request=clean, glass=glass, aim=aim.tolist())
        elif kind == "follow":
          way, glass, aim = rq.parse_follow(*args, self.glasses[i], self.taken[i])
          self._begin(i)
          programs[i] = self._follow_program(i, way)
          entries[i] = dict(kind="follow", request=way.tolist(), glass=glass, aim=aim)
        else:
          raise ValueError(f"unknown action {kind!r}")
      except (ValueError, BudgetSpent) as err:
        replies[i] = ("error", type(err).__name__, str(err))
        continue
      self.pushes_left[i] -= 1
      self._peak[i] = 0.0
    self._rec = []
    self._overflow_seen.zero_()
    reports = self._run(programs)
    paths = self._paths(list(programs))
    overflow = self._overflow_checked()
    for i, report in reports.items():
      entry = entries[i] | {"report": report, "physics_overflow": int(overflow[i])}
      glass, aim = entry["glass"], entry["aim"]
      if glass is not None and aim is not None:
        k = [g.id for g in self.glasses[i]].index(glass)
        pos = self._xpos[i, self._sbody[k]].double().cpu().numpy()
        entry["aim_error"] = float(math.hypot(pos[0] - aim[0], pos[1] - aim[1]))
      entry["path"] = paths[i]
      self.actions[i].append(entry)
      replies[i] = ("ok", report)
    return replies

  def _overflow_checked(self) -> np.ndarray:
    """The overflow bits since the last check, per table; warns if any."""
    overflow = self._overflow_seen.cpu().numpy()
    self._overflow_total |= overflow
    bad = np.flatnonzero(overflow)
    if bad.size:
      warnings.warn(
        f"MuJoCo Warp overflowed its contact/constraint buffers on tables "
        f"{[self.tables[i] for i in bad]} (bits {overflow[bad].tolist()}): their "
        "physics dropped contacts or constraints; raise nconmax/njmax",
        RuntimeWarning,
        stacklevel=3,
      )
    return overflow

  def _paths(self, tables: list[int]) -> dict[int, np.ndarray]:
    if not self._rec:
      return {i: np.zeros((0, 6)) for i in tables}
    mask = np.stack([m for m, _ in self._rec])  # [T, N]
    rows = np.stack([r for _, r in self._rec])  # [T, N, 6]
    return {i: rows[mask[:, i], i] for i in tables}

  def take(self, glasses: dict[int, int]) -> dict[int, tuple]:
    """Take glasses (table index -> glass id) to their racks, together."""
    replies = {}
    states = {}
    for i, glass in glasses.items():
      try:
        k = rq.glass_index(self.glasses[i], self.taken[i], glass)
      except ValueError as err:
        replies[i] = ("error", "ValueError", str(err))
        continue
      states[i] = self.glass_states(i)
      me = states[i][k]
      room = hidden.had_room(k, states[i], self.glasses[i])
      slot = cw.RACK_SLOTS[len(self.taken[i])]
      self.taken[i][int(glass)] = dict(room=bool(room), state=me, step=self.steps)
      q, v = self._sq[k], self._sv[k]
      self._qpos[i, q : q + 7] = torch.tensor(
        [slot[0], slot[1], cw.RACK_SHELF_TOP + 0.0005, 1, 0, 0, 0],
        dtype=self._qpos.dtype,
      )
      self._qvel[i, v : v + 6] = 0.0
      self._peak[i] = 0.0
      replies[i] = ("ok", None)
    if states:
      self._overflow_seen.zero_()
      with wp.ScopedDevice(self.device):
        mjw.forward(self.mw, self.dw)
      for _ in range(100):
        self._tick()
      self._overflow_checked()
    return replies

  def refuse(self, i: int, glass, reason) -> None:
    rq.glass_index(self.glasses[i], self.taken[i], glass)
    if not isinstance(reason, str) or not reason.strip():
      raise ValueError("refuse() needs a non-empty reason string")
    self.refused[i][int(glass)] = reason

  def _poses(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    count = self._ng[i]
    body = self._sbody[:count]
    xpos = self._xpos[i, body].double().cpu().numpy()
    xmat = self._xmat[i, body].double().reshape(count, 9).cpu().numpy()
    return xpos, xmat

  def glass_states(self, i: int) -> list[dict]:
    """True state of every glass of table ``i``."""
    return hidden.glass_states(self.glasses[i], *self._poses(i), self.taken[i])

  def look(self, i: int) -> list[dict]:
    self.looks[i] += 1
    xpos, xmat = self._poses(i)
    states = hidden.glass_states(self.glasses[i], xpos, xmat, self.taken[i])
    return hidden.readings(
      self.tables[i], int(self.looks[i]), self.glasses[i], states, xpos, xmat
    )

  # -- pictures (each table's own C model, never stepped) -----------------------------

  def _pictures(self, i: int) -> cw.PoseRenderer:
    if i not in self._renderers:
      self._renderers[i] = cw.PoseRenderer(self.models[i])
    return self._renderers[i]

  def top_view(self, i: int) -> np.ndarray:
    qpos = self._qpos[i].double().cpu().numpy()
    return self._pictures(i).render(qpos, "top_view", (384, 384), True)

  def write_film(self, i: int, path: str) -> int:
    pictures = self._pictures(i)
    frames = [
      pictures.render(q[i], "film", cw.FILM_SIZE, False) for q in self._film_qpos
    ]
    cw.write_video(path, frames)
    return len(frames)

  # -- record ---------------------------------------------------------------------------

  def truth(self, i: int) -> dict:
    return dict(
      glasses=[g.as_dict() for g in self.glasses[i]], states=self.glass_states(i)
    )

  def record(self, i: int) -> dict:
    """Everything the scoring needs for table ``i`` (as ``GlassWorld.record``)."""
    return dict(
      table=self.tables[i],
      budget=self.budget,
      pushes_used=int(self.budget - self.pushes_left[i]),
      glasses=[g.as_dict() for g in self.glasses[i]],
      final=self.glass_states(i),
      taken={int(k): v for k, v in self.taken[i].items()},
      refused=dict(self.refused[i]),
      actions=self.actions[i],
      looks=int(self.looks[i]),
      sim_time=float(self._time[i]),
      friction=vars(self.physics.friction) | {},
      engine="warp",
      physics_overflow=int(self._overflow_total[i]),
    )

  def close(self) -> None:
    for pictures in self._renderers.values():
      pictures.close()
    self._renderers.clear()
