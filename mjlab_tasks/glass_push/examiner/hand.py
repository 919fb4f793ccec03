"""The examiner's hand on the GlassPush environment: tables' programs run.

``HandRunner`` runs the routine's programs (``routine.py``) of many tables
together. The hand is the task's Cartesian action term (the suite's one IK,
bounded by ``max_dq``, with bias compensation), its target moved every 2 ms
physics step along the segment's line; the wrist reading is the task's
wrist force sensor (net contact force on the hand's subtree).

Two ways to step, the same arithmetic:
- compiled (C engine, the default there): each acting table runs its whole
  segment in C (``native_control.run_hand_move``, the compiled loop's arm
  control), in the engine's worker threads, stopping on the physics step
  where the force passes the segment's threshold; only the acting tables
  step, so a table ends exactly as when run alone.
- one physics step at a time through mjlab's managers (MuJoCo Warp, and the
  C engine without a compiler): every table steps, the idle ones hold their
  hands.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mjlab_tasks.engine import engine_of, sensor_fields, traits
from mjlab_tasks.engine import native_control as nc
from mjlab_tasks.engine.compiled_control import configure_arm
from mjlab_tasks.glass_push.examiner import routine as rt
from mjlab_tasks.glass_push.examiner.pictures import FILM_FPS
from mjlab_tasks.glass_push.rules.felt import felt_distances
from mjlab_tasks.glass_push.rules.requests import wrap_angle
from mjlab_tasks.glass_push.scene import GLASS_ENTITY

IDLE, LINE, WAY, HOLD = 0, 1, 2, 3
FILM_EVERY = int(round(1 / (FILM_FPS * rt.TIMESTEP)))  # physics steps per frame
SETTLE_MAX_STEPS = int(rt.SETTLE_MAX_S / rt.TIMESTEP)


def hand_rotation(heading: float) -> np.ndarray:
  """Level closed hand (tool axis straight down) pointing along the heading.

  Returns the tool frame's rotation [3, 3]: y (the pads' width, so their
  edges lead) along the heading, z down, x (closing axis) across.
  """
  c, s = math.cos(heading), math.sin(heading)
  return np.column_stack(([-s, c, 0.0], [c, s, 0.0], [0.0, 0.0, -1.0]))


def hand_quat(heading: torch.Tensor) -> torch.Tensor:
  """``hand_rotation`` as quaternions (w, x, y, z) [B, 4] for headings [B]."""
  from mjlab.utils.lab_api.math import quat_from_matrix

  c, s = torch.cos(heading), torch.sin(heading)
  zero, one = torch.zeros_like(c), torch.ones_like(c)
  rows = [[-s, c, zero], [c, s, zero], [zero, zero, -one]]
  return quat_from_matrix(torch.stack([torch.stack(r, -1) for r in rows], -2))


class HandRunner:
  """The hands of every table of a GlassPush environment (examiner side).

  Args:
    env: the environment (one table per environment, built without the
      compiled policy-step loop).
    tables_glasses: each table's glasses.
    z_safe: each table's safe tool height [N].
    film: keep the pose every FILM_EVERY steps of each table.
    compiled: step segments in C (C engine only); None: when available.
  """

  def __init__(self, env, tables_glasses, z_safe, film: bool, compiled=None):
    self.env, self.sim, self.scene = env, env.sim, env.scene
    self.device = env.device
    n = self.n = env.num_envs
    self.origins = env.scene.env_origins.double().cpu().numpy()
    self.arm = env.action_manager.get_term("arm")
    robot = self.scene["robot"]
    self._robot = robot
    self._wrist_3 = robot.find_joints("wrist_3")[0][0]
    self._tcp = self.arm.site_id
    self._ng = np.array([len(g) for g in tables_glasses])
    slots = range(int(self._ng.max()))
    glass = [self.scene[GLASS_ENTITY.format(slot=s)] for s in slots]
    self.glass_bodies = [int(e.indexing.body_ids[0]) for e in glass]
    self._glass_dofs = [int(e.indexing.free_joint_v_adr[0]) for e in glass]
    force = [
      name for field, name in sensor_fields(env, "wrist_force") if field == "force"
    ]
    self._force_adr = int(self.sim.mj_model.sensor(force[0]).adr[0])
    self.z_safe = np.asarray(z_safe, dtype=float)
    self.film = film
    on_c = traits(engine_of(env)).c_worlds
    if compiled is None:
      compiled = on_c and nc.available()
    if compiled and not on_c:
      raise ValueError("compiled hand segments run on the C engine only")
    self.compiled = bool(compiled)
    if self.compiled:
      self._control = nc.ArmControl()
      configure_arm(self._control, self.sim.mj_model, self.arm)
      self._params = np.zeros((n, nc.NUM_PARAMS))
    # The hand: commanded tool point (table frame) and heading.
    self.cmd = np.zeros((n, 3))
    self.heading = np.zeros(n)
    self.steps = np.zeros(n, int)
    self.peak = np.zeros(n)
    self.rec: list[list[tuple]] = [[] for _ in range(n)]
    self.film_qpos: list[list[np.ndarray]] = [[] for _ in range(n)]
    # Tests: every physics step's wrist force vector of each acting table.
    self.force_log: list[list[np.ndarray]] | None = None
    # The current segment of every table.
    self._phase = np.zeros(n, int)
    self._p0, self._p1 = np.zeros((n, 3)), np.zeros((n, 3))
    self._h0, self._dh, self._stop = np.zeros(n), np.zeros(n), np.full(n, math.inf)
    self._n, self._k = np.ones(n, int), np.zeros(n, int)
    self._still = np.zeros(n, int)
    self._active = np.zeros(n, bool)

  # -- reading the worlds ----------------------------------------------------------

  def hand_positions(self) -> np.ndarray:
    """Tool points of every table [N, 3] (table frame, float64)."""
    p = self.sim.data.site_xpos[:, self._tcp].double().cpu().numpy()
    return p - self.origins

  def _wrist_3_angles(self) -> np.ndarray:
    return self._robot.data.joint_pos[:, self._wrist_3].double().cpu().numpy()

  # -- segments ---------------------------------------------------------------------

  def _start(self, i: int, segment, hand: np.ndarray, q5: np.ndarray) -> None:
    """Begin table ``i``'s next segment."""
    if isinstance(segment, rt.Line):
      p0, h0 = self.cmd[i].copy(), self.heading[i]
      p1 = np.asarray(segment.target, dtype=float)
      dh = wrap_angle(segment.heading - h0)
      # The tool points down, so wrist_3 turns by -dh: turn the long way
      # round rather than wind wrist_3 into its +-360 degree limit.
      if q5[i] - dh > 1.5 * math.pi:
        dh += 2 * math.pi
      elif q5[i] - dh < -1.5 * math.pi:
        dh -= 2 * math.pi
      duration = max(
        float(np.linalg.norm(p1 - p0)) / segment.speed, abs(dh) / rt.TURN_SPEED
      )
      self._line(
        i, p0, p1, h0, dh, max(1, math.ceil(duration / rt.TIMESTEP)), segment.stop
      )
      self._phase[i] = LINE
    elif isinstance(segment, rt.Waypoints):
      self._way[i] = segment.way
      self._wj[i] = 0
      self._seen[i] = [hand[i]]
      self._touch[i], self._jammed[i] = None, False
      self._begin_waypoint(i)
      self._phase[i] = WAY
    else:
      self._k[i], self._n[i], self._still[i] = 0, SETTLE_MAX_STEPS, 0
      self._p0[i] = self._p1[i] = self.cmd[i]
      self._dh[i], self._stop[i] = 0.0, math.inf
      self._phase[i] = HOLD

  def _line(self, i, p0, p1, h0, dh, n, stop) -> None:
    self._p0[i], self._p1[i], self._h0[i], self._dh[i] = p0, p1, h0, dh
    self._n[i], self._k[i], self._stop[i] = n, 0, stop

  def _begin_waypoint(self, i: int) -> None:
    row = self._way[i][self._wj[i]]
    stop = rt.TOUCH_FORCE if self._touch[i] is None else rt.JAM_FORCE
    h0 = self.heading[i]
    self._line(
      i, self.cmd[i].copy(), row[:3], h0, wrap_angle(row[3] - h0), rt.RECORD_EVERY, stop
    )

  def _set_commands(self, rows: np.ndarray) -> None:
    """The commanded point and heading of ``rows`` at their step ``k``."""
    a = (self._k[rows] / self._n[rows])[:, None]
    self.cmd[rows] = self._p0[rows] + a * (self._p1[rows] - self._p0[rows])
    self.heading[rows] = self._h0[rows] + a[:, 0] * self._dh[rows]

  # -- running the programs -------------------------------------------------------------

  def run(self, programs: dict[int, object]) -> dict[int, object]:
    """Run every table's program to its end; returns what each returned."""
    self._way: dict[int, np.ndarray] = {}
    self._wj: dict[int, int] = {}
    self._seen: dict[int, list] = {}
    self._touch: dict[int, tuple | None] = {}
    self._jammed: dict[int, bool] = {}
    results: dict[int, object] = {}
    hand, q5 = self.hand_positions(), self._wrist_3_angles()
    for i, program in programs.items():
      self._active[i] = True
      self._start(i, next(program), hand, q5)
    while self._active.any():
      ended, hit = self._advance()
      hand = self.hand_positions() if ended.any() else hand
      for i in np.flatnonzero(ended & (self._phase == WAY)):
        ended[i] = self._waypoint_ended(i, bool(hit[i]), hand)
      finished = np.flatnonzero(ended)
      if finished.size:
        q5 = self._wrist_3_angles()
      for i in finished:
        sent = self._outcome(i, bool(hit[i]))
        self._phase[i] = IDLE
        try:
          self._start(i, programs[i].send(sent), hand, q5)
        except StopIteration as end:
          results[i] = end.value
          self._active[i] = False
    return results

  def _waypoint_ended(self, i: int, hit: bool, hand: np.ndarray) -> bool:
    """Bookkeeping at a waypoint's end (or where a force cut it short);
    True when the waypoints are done."""
    self._seen[i].append(hand[i])
    if hit and self._touch[i] is None:
      self._touch[i] = (len(self._seen[i]) - 1, self.heading[i])
    elif hit:
      self._jammed[i] = True
      return True
    if self._wj[i] + 1 >= len(self._way[i]):
      return True
    self._wj[i] += 1
    self._begin_waypoint(i)
    return False

  def _outcome(self, i: int, hit: bool):
    """What the program is sent at the end of its segment."""
    if self._phase[i] == LINE:
      return hit
    if self._phase[i] == WAY:
      touch, jammed = self._touch[i], self._jammed[i]
      touched, pushed = felt_distances(
        self._seen[i],
        None if touch is None else touch[0],
        0.0 if touch is None else touch[1],
      )
      return (touched, jammed, pushed), (self._p0[i].copy(), self._p1[i].copy())
    return None

  def hold(self, tables: np.ndarray, steps: int) -> None:
    """Hold the hands of ``tables`` (bool [N]) still for ``steps`` steps."""
    rows = np.flatnonzero(tables)
    for i in rows:
      self._line(
        i, self.cmd[i].copy(), self.cmd[i].copy(), self.heading[i], 0.0, steps, math.inf
      )
      self._phase[i] = LINE
    acting = self._active.copy()
    self._active[:] = tables
    while (self._phase[rows] == LINE).any():
      ended, _ = self._advance(record=False)
      self._phase[ended] = IDLE
    self._active[:] = acting

  def _advance(self, record: bool = True) -> tuple[np.ndarray, np.ndarray]:
    if self.compiled:
      return self._advance_compiled(record)
    return self._advance_one_step(record)

  # -- stepping: compiled, a whole segment per acting table -------------------------------

  def _advance_compiled(self, record: bool):
    acting = np.flatnonzero(self._active & (self._phase != IDLE))
    sample_spec = self._sample_spec()
    addresses = self.sim.record_addresses(sample_spec)
    film_addr = self.sim.record_addresses((("qpos", 0, self.sim.mj_model.nq),))
    moves, samples, films = {}, {}, {}
    for i in acting:
      m = moves[i] = nc.HandMove()
      hold = self._phase[i] == HOLD
      m.p0[:] = self._p0[i] + self.origins[i]
      m.p1[:] = self._p1[i] + self.origins[i]
      m.h0, m.dh, m.stop = self._h0[i], self._dh[i], self._stop[i]
      m.n, m.k, m.hold = int(self._n[i]), int(self._k[i]), int(hold)
      m.still, m.still_need = int(self._still[i]), rt.STILL_STEPS
      m.still_lin, m.still_ang = rt.STILL_LIN, rt.STILL_ANG
      m.peak, m.steps = self.peak[i], int(self.steps[i])
      m.sample_every = 1  # every step: the record takes every RECORD_EVERY-th
      m.film_every = FILM_EVERY if self.film else 0
      m.force_adr = self._force_adr
      dofs = self._glass_dofs[: self._ng[i]]
      m.nfree = len(dofs)
      m.free_dof[: len(dofs)] = dofs
      samples[i] = np.zeros((m.n - m.k, 1 + addresses.shape[1]))
      films[i] = np.zeros(
        ((m.n - m.k) // FILM_EVERY + 2 if self.film else 0, film_addr.shape[1])
      )

    def run(model, d, i):
      if i in moves:
        nc.run_hand_move(
          model,
          d,
          self._control,
          self._params[i],
          moves[i],
          addresses[i],
          samples[i],
          film_addr[i],
          films[i],
        )

    self.sim.run_worlds(run)
    ended, hit = np.zeros(self.n, bool), np.zeros(self.n, bool)
    for i, m in moves.items():
      first = self.steps[i] + 1
      self._k[i], self._still[i], self.steps[i] = m.k, m.still, m.steps
      self.peak[i] = m.peak
      ended[i], hit[i] = True, bool(m.hit)
      rows = samples[i][: m.nsamples]
      if self.force_log is not None:
        self.force_log[i].extend(rows[:, 13:16].copy())
      if record:
        for row in rows[(first + np.arange(len(rows))) % rt.RECORD_EVERY == 0]:
          self._sample(i, row)
      self.film_qpos[i].extend(films[i][: m.nfilm].copy())
    moving = np.array([i for i in moves if self._phase[i] != HOLD], int)
    if moving.size:
      self._set_commands(moving)
    return ended, hit

  def _sample_spec(self) -> tuple:
    t, f = self._tcp, self._force_adr
    return (
      ("site_xpos", 3 * t, 3 * t + 3),
      ("site_xmat", 9 * t, 9 * t + 9),
      ("sensordata", f, f + 3),
    )

  def _sample(self, i: int, row: np.ndarray) -> None:
    """A recorded sample: time, tool point, heading, force."""
    time, p, r, force = row[0], row[1:4] - self.origins[i], row[4:13], row[13:16]
    self.rec[i].append((time, *p, math.atan2(r[4], r[1]), float(np.linalg.norm(force))))

  # -- stepping: one physics step through mjlab's managers ----------------------------------

  def _advance_one_step(self, record: bool):
    rows = np.flatnonzero(self._active & (self._phase != IDLE))
    moving = rows[self._phase[rows] != HOLD]
    self._k[rows] += 1
    self._set_commands(moving)
    force = self._tick(record)
    ended, hit = np.zeros(self.n, bool), np.zeros(self.n, bool)
    hold = rows[self._phase[rows] == HOLD]
    hit[moving] = force[moving] > self._stop[moving]
    ended[moving] = hit[moving] | (self._k[moving] >= self._n[moving])
    if hold.size:
      still = self._glasses_still(hold)
      self._still[hold] = np.where(still, self._still[hold] + 1, 0)
      ended[hold] = (self._still[hold] >= rt.STILL_STEPS) | (
        self._k[hold] >= self._n[hold]
      )
    return ended, hit

  def _tick(self, record: bool) -> np.ndarray:
    """Command every hand, then one 2 ms physics step of every table.
    Returns the hand force of every table [N] (host)."""
    env, arm = self.env, self.arm
    origins = self.scene.env_origins
    arm.desired_pos_w[:] = torch.as_tensor(self.cmd, device=self.device) + origins
    arm.desired_quat_w[:] = hand_quat(torch.as_tensor(self.heading, device=self.device))
    arm.has_target[:] = True
    env.action_manager.apply_action()
    self.scene.write_data_to_sim()
    self.sim.step()
    self.scene.update(dt=rt.TIMESTEP)
    self.steps += 1
    data = self.sim.data
    vector = (
      data.sensordata[:, self._force_adr : self._force_adr + 3].double().cpu().numpy()
    )
    if self.force_log is not None:
      for i in np.flatnonzero(self._active):
        self.force_log[i].append(vector[i].copy())
    force = np.linalg.norm(vector, axis=1)
    act = self._active
    self.peak[act] = np.maximum(self.peak[act], force[act])
    sample = act & (self.steps % rt.RECORD_EVERY == 0)
    if record and sample.any():
      t = data.time.double().cpu().numpy()
      p = data.site_xpos[:, self._tcp].double().cpu().numpy()
      r = data.site_xmat[:, self._tcp].double().reshape(-1, 9).cpu().numpy()
      for i in np.flatnonzero(sample):
        row = np.concatenate([[t[i]], p[i], r[i], vector[i]])
        self._sample(i, row)
    if self.film and (self.steps % FILM_EVERY == 0).any():
      qpos = data.qpos.double().cpu().numpy()
      for i in np.flatnonzero(self.steps % FILM_EVERY == 0):
        self.film_qpos[i].append(qpos[i].copy())
    return force

  def _glasses_still(self, rows: np.ndarray) -> np.ndarray:
    """Whether every glass of tables ``rows`` is slower than the thresholds."""
    qvel = self.sim.data.qvel[torch.as_tensor(rows, device=self.device)].double()
    v = torch.stack([qvel[:, a : a + 6] for a in self._glass_dofs], 1)
    lin = (v[..., :3].norm(dim=-1) > rt.STILL_LIN).cpu().numpy()
    ang = (v[..., 3:].norm(dim=-1) > rt.STILL_ANG).cpu().numpy()
    moving = lin | ang
    for r, i in enumerate(rows):
      moving[r, self._ng[i] :] = False  # only the table's own glasses count
    return ~moving.any(axis=1)
