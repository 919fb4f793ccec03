"""The examiner's world: tables of the GlassPush environment, the push routine.

``GlassWorld`` runs the examiner's calls on the GlassPush-UR5-RG2
environment (one environment per table) through either of the suite's
engines: C MuJoCo on the CPU, MuJoCo Warp batched. The hand is the task's
Cartesian action term (the suite's one IK), commanded every 2 ms physics
step along straight lines of the tool point; the wrist reading is the
task's wrist force sensor. The six-step push, ``follow()``, settling and
``take()`` are written once, as a small per-table program that only runs
when one of its moves ends; many tables' programs run together.

On the C engine only the tables that act are stepped (a table ends exactly
as when run alone); on MuJoCo Warp every table steps and the idle ones hold
their hands. See docs/glass_push.md for the contract.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from evaluators.glass_push import hidden
from evaluators.glass_push.felt import felt_distances
from evaluators.glass_push.hand import LOWEST_TCP_Z, PAD_HALF_Z
from evaluators.glass_push.tables import RACK_CENTER, RACK_SHELF_TOP, ZONE_CENTER
from evaluators.glass_push.world import (
  FILM_EVERY,
  FILM_SIZE,
  PoseRenderer,
  write_video,
)
from mjlab_tasks.glass_push import requests as rq
from mjlab_tasks.glass_push.scene import (
  GLASS_ENTITY,
  TIMESTEP,
  PhysicsConfig,
  hand_quat,
  table_glasses_of,
)

# The push routine (seed 003).
DESCEND_SPEED = 0.200  # m/s
FEEL_SPEED = 0.010
PUSH_SPEED = 0.020
BACK_OFF = 0.020  # m
BACK_OFF_SPEED = 0.050
LIFT_SPEED = 0.200
TRANSIT_SPEED = 0.200
TURN_SPEED = math.pi / 2  # rad/s, heading change in transit
TOUCH_FORCE = 0.1  # N, descent and feel
JAM_FORCE = 20.0  # N, push
LIFT_CLEARANCE = 0.03  # pad bottoms above the tallest glass [m]
RECORD_EVERY = int(round(rq.WAYPOINT_DT / TIMESTEP))  # physics steps per sample
# A glass has stopped once it moves slower than these for 0.1 s.
STILL_LIN, STILL_ANG = 0.002, 0.05
SETTLE_MAX_S = 3.0
START_SETTLE_STEPS = 250
TAKE_SETTLE_STEPS = 100
RACK_SLOTS = tuple(
  (RACK_CENTER[0] + dx, RACK_CENTER[1] + dy)
  for dy in (-0.045, 0.045)
  for dx in (-0.2, -0.1, 0.0, 0.1, 0.2)
)


@dataclass
class _Move:
  """A straight line of the commanded tool point."""

  target: np.ndarray
  heading: float
  speed: float
  stop: float = math.inf


@dataclass
class _Way:
  """follow()'s waypoint loop over ``way`` [K, 4]."""

  way: np.ndarray


class _Settle:
  """Hold the hand until every glass has stopped."""


IDLE, MOVE, WAY, SETTLE = 0, 1, 2, 3


def _wrap(angle):
  return (angle + math.pi) % (2 * math.pi) - math.pi


class GlassWorld:
  """Tables of the GlassPush environment, one per environment (examiner side).

  Args:
    tables: table numbers.
    pushes: the push budget of every table.
    physics: the private physics fixture (``scene.PhysicsConfig``).
    film: keep film poses (10 fps) for ``write_film``.
    engine: "mujoco" (C MuJoCo, CPU) or "warp" (MuJoCo Warp).
    device: "cpu" or "cuda:N" (MuJoCo Warp only; default: CUDA if present).
  """

  def __init__(
    self,
    tables,
    pushes: int,
    physics: PhysicsConfig | None = None,
    film: bool = False,
    engine: str = "mujoco",
    device: str | None = None,
  ):
    from mjlab_tasks.common.c_engine import make_env
    from mjlab_tasks.glass_push.env_cfg import examiner_env_cfg

    if isinstance(pushes, bool) or not isinstance(pushes, (int, np.integer)):
      raise ValueError(f"pushes must be an int, got {pushes!r}")
    if pushes < 1:
      raise ValueError(f"pushes must be at least 1, got {pushes}")
    self.tables = [int(t) for t in tables]
    if not self.tables:
      raise ValueError("a world needs at least one table")
    self.physics = physics if physics is not None else PhysicsConfig()
    self.glasses = [table_glasses_of(t, self.physics) for t in self.tables]
    n = self.n = len(self.tables)
    if engine not in ("mujoco", "warp"):
      raise ValueError(f"unknown engine {engine!r} (use 'mujoco' or 'warp')")
    self.engine = engine
    if device is None:
      device = "cuda:0" if engine == "warp" and torch.cuda.is_available() else "cpu"
    self.env = make_env(
      examiner_env_cfg(self.tables, self.physics), device=device, engine=engine
    )
    self.env.reset()
    self.sim, self.scene = self.env.sim, self.env.scene
    self.device = self.env.device
    self._arm = self.env.action_manager.get_term("arm")
    robot = self.scene["robot"]
    self._wrist_3 = robot.find_joints("wrist_3")[0][0]
    self._robot = robot
    self._tcp = int(robot.indexing.site_ids[robot.find_sites("tcp")[0][0]])
    self._bodies = [
      int(self.scene[GLASS_ENTITY.format(slot=s)].indexing.body_ids[0])
      for s in range(max(len(g) for g in self.glasses))
    ]
    self._qv = [
      self.scene[GLASS_ENTITY.format(slot=s)].indexing.free_joint_v_adr
      for s in range(len(self._bodies))
    ]
    self._ng = np.array([len(g) for g in self.glasses])
    self.film = bool(film)
    self.budget = int(pushes)
    self.pushes_left = np.full(n, int(pushes))
    tallest = np.array([max(g.height for g in gl) for gl in self.glasses])
    self.z_safe = tallest + LIFT_CLEARANCE + PAD_HALF_Z
    self.cmd = np.column_stack(
      [np.full(n, ZONE_CENTER[0]), np.full(n, ZONE_CENTER[1] + 0.25), self.z_safe]
    )
    self.heading = np.zeros(n)
    self.taken: list[dict[int, dict]] = [{} for _ in range(n)]
    self.refused: list[dict[int, str]] = [{} for _ in range(n)]
    self.actions: list[list[dict]] = [[] for _ in range(n)]
    self.looks = np.zeros(n, int)
    self.steps = np.zeros(n, int)
    self._peak = np.zeros(n)
    self._active = np.zeros(n, bool)
    self._rec: list[list[tuple]] = [[] for _ in range(n)]
    self._film_qpos: list[list[np.ndarray]] = [[] for _ in range(n)]
    self._renderers: dict[int, PoseRenderer] = {}
    self._phase = np.zeros(n, int)
    self._overflow_total = np.zeros(n, int)
    self.on_tick = None  # tests: called with the wrist forces [N, 3] of a step
    # Start: hand above the zone at the safe height, pointing +x.
    self._hold(np.ones(n, bool), START_SETTLE_STEPS)
    for i in range(n):
      self._rec[i].clear()
      self._film_qpos[i].clear()
    self.initial_qpos = self.sim.data.qpos.cpu().numpy().astype(float)

  # -- the hand: one physics step ------------------------------------------------

  def _tick(self, stepping: np.ndarray) -> np.ndarray:
    """Command the hand, then one 2 ms physics step of the ``stepping``
    tables (on MuJoCo Warp every table steps). Returns the hand force of
    every table [N] (host)."""
    env, arm = self.env, self._arm
    arm.desired_pos_w[:] = torch.as_tensor(self.cmd, device=self.device)
    arm.desired_quat_w[:] = hand_quat(torch.as_tensor(self.heading, device=self.device))
    arm._has_target[:] = True
    env.action_manager.apply_action()
    self.scene.write_data_to_sim()
    if self.engine == "mujoco":
      self.sim.step(worlds=np.flatnonzero(stepping))
    else:
      self.sim.step()
      stepping = np.ones(self.n, bool)
    self.scene.update(dt=TIMESTEP)
    self.steps[stepping] += 1
    vector = self.scene.sensors["wrist_force"].data.force.reshape(self.n, 3)
    vector = vector.double().cpu().numpy()
    if self.on_tick is not None:
      self.on_tick(vector)
    force = np.linalg.norm(vector, axis=1)
    act = self._active & stepping
    self._peak[act] = np.maximum(self._peak[act], force[act])
    record = act & (self.steps % RECORD_EVERY == 0)
    if record.any():
      data = self.sim.data
      p = data.site_xpos[:, self._tcp].double().cpu().numpy()
      r = data.site_xmat[:, self._tcp].double().reshape(-1, 9).cpu().numpy()
      t = data.time.double().cpu().numpy()
      for i in np.flatnonzero(record):
        self._rec[i].append((t[i], *p[i], math.atan2(r[i, 4], r[i, 1]), force[i]))
    if self.film:
      film = stepping & (self.steps % FILM_EVERY == 0)
      if film.any():
        qpos = self.sim.data.qpos.double().cpu().numpy()
        for i in np.flatnonzero(film):
          self._film_qpos[i].append(qpos[i].copy())
    return force

  def _hold(self, tables: np.ndarray, steps: int) -> None:
    for _ in range(steps):
      self._tick(tables)
    self._overflow_checked()

  def hand_positions(self) -> np.ndarray:
    """Tool points of every table [N, 3] (host, float64)."""
    return self.sim.data.site_xpos[:, self._tcp].double().cpu().numpy()

  def _wrist_3_angles(self) -> np.ndarray:
    return self._robot.data.joint_pos[:, self._wrist_3].double().cpu().numpy()

  # -- running the tables' programs ----------------------------------------------

  def _start(self, i: int, segment, hand: np.ndarray, q5: np.ndarray) -> None:
    """Begin table ``i``'s next segment (a move, the waypoint loop, settling)."""
    if isinstance(segment, _Move):
      p0, h0 = self.cmd[i].copy(), self.heading[i]
      p1 = np.asarray(segment.target, dtype=float)
      dh = _wrap(segment.heading - h0)
      # The tool points down, so wrist_3 turns by -dh: turn the long way
      # round rather than wind wrist_3 into its +-360 degree limit.
      if q5[i] - dh > 1.5 * math.pi:
        dh += 2 * math.pi
      elif q5[i] - dh < -1.5 * math.pi:
        dh -= 2 * math.pi
      duration = max(
        float(np.linalg.norm(p1 - p0)) / segment.speed, abs(dh) / TURN_SPEED
      )
      self._p0[i], self._p1[i], self._h0[i], self._dh[i] = p0, p1, h0, dh
      self._n[i], self._k[i] = max(1, math.ceil(duration / TIMESTEP)), 0
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
    self._n[idx], self._k[idx] = RECORD_EVERY, 0

  def _glass_velocities(self, rows: np.ndarray) -> np.ndarray:
    """Linear and angular speeds of every glass of tables ``rows`` [R, S, 2]."""
    qvel = self.sim.data.qvel[torch.as_tensor(rows, device=self.device)]
    v = torch.stack([qvel[:, adr] for adr in self._qv], 1).double()  # [R, S, 6]
    speeds = (
      torch.stack([v[..., :3].norm(dim=-1), v[..., 3:].norm(dim=-1)], -1).cpu().numpy()
    )
    # Only the table's own glasses count (not the parked ones).
    for r, i in enumerate(rows):
      speeds[r, self._ng[i] :] = 0.0
    return speeds

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
    q5 = self._wrist_3_angles()
    for i, program in programs.items():
      self._active[i] = True
      self._start(i, next(program), hand, q5)
    settle_max = int(SETTLE_MAX_S / TIMESTEP)
    while self._active.any():
      moving = (self._phase == MOVE) | (self._phase == WAY)
      self._k[moving] += 1
      a = (self._k / self._n)[:, None]
      self.cmd[moving] = (self._p0 + a * (self._p1 - self._p0))[moving]
      self.heading[moving] = (self._h0 + a[:, 0] * self._dh)[moving]
      force = self._tick(self._active)
      ended = np.zeros(n, bool)
      stopped = np.zeros(n, bool)
      # Moves: a force past the move's threshold, or the line's end.
      mv = self._phase == MOVE
      stopped[mv] = force[mv] > self._stop[mv]
      ended[mv] = stopped[mv] | (self._k[mv] >= self._n[mv])
      # Settling: every glass slower than the thresholds for 0.1 s.
      st = np.flatnonzero(self._phase == SETTLE)
      if st.size:
        speeds = self._glass_velocities(st)
        still = ~np.any(
          (speeds[..., 0] > STILL_LIN) | (speeds[..., 1] > STILL_ANG), axis=1
        )
        self._still[st] = np.where(still, self._still[st] + 1, 0)
        self._settled[st] += 1
        ended[st] = (self._still[st] >= 50) | (self._settled[st] >= settle_max)
      # The waypoint loop: bookkeeping at each waypoint's end.
      wy = self._phase == WAY
      threshold = np.where(self._touch < 0, TOUCH_FORCE, JAM_FORCE)
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
        q5 = self._wrist_3_angles()
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

  # -- the programs: the seed's six-step push and follow() -------------------------

  def _lift(self, i: int):
    if self.cmd[i, 2] < self.z_safe[i] - 1e-9:
      yield _Move(
        np.array([self.cmd[i, 0], self.cmd[i, 1], self.z_safe[i]]),
        self.heading[i],
        LIFT_SPEED,
      )

  def _push_program(self, i: int, start, heading: float, reach: float, travel: float):
    u = np.array([math.cos(heading), math.sin(heading), 0.0])
    yield from self._lift(i)
    yield _Move(np.array([start[0], start[1], self.z_safe[i]]), heading, TRANSIT_SPEED)
    blocked = yield _Move(
      np.array([start[0], start[1], LOWEST_TCP_Z]), heading, DESCEND_SPEED, TOUCH_FORCE
    )
    touched, jammed, pushed = None, False, 0.0
    if not blocked:
      p_feel = self.hand_positions()[i]
      if (yield _Move(self.cmd[i] + reach * u, heading, FEEL_SPEED, TOUCH_FORCE)):
        p_touch = self.hand_positions()[i]
        jammed = yield _Move(self.cmd[i] + travel * u, heading, PUSH_SPEED, JAM_FORCE)
        # The rule follow() uses too: from the start of the feel to the
        # touch, and from the touch to the end of step 4.
        touched, pushed = felt_distances(
          [p_feel, p_touch, self.hand_positions()[i]], 1, heading
        )
        yield _Move(self.cmd[i] - BACK_OFF * u, heading, BACK_OFF_SPEED)
    yield from self._lift(i)
    yield _Settle()
    return self._felt(i, blocked, touched, jammed, pushed)

  def _follow_program(self, i: int, way: np.ndarray):
    blocked = False
    first = way[0]
    if (
      np.linalg.norm(first[:3] - self.cmd[i]) > rq.MAX_WAYPOINT_STEP
      or abs(_wrap(first[3] - self.heading[i])) > rq.MAX_WAYPOINT_TURN
    ):
      # Approach like a push: up, across, down (a touch on the way is blocked).
      yield from self._lift(i)
      yield _Move(
        np.array([first[0], first[1], self.z_safe[i]]), first[3], TRANSIT_SPEED
      )
      blocked = yield _Move(first[:3], first[3], DESCEND_SPEED, TOUCH_FORCE)
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
          self.cmd[i] - BACK_OFF * move / length, self.heading[i], BACK_OFF_SPEED
        )
    yield _Settle()
    return self._felt(i, blocked, touched, jammed, pushed)

  def _felt(self, i, blocked, touched, jammed, pushed) -> dict:
    """The report of one push or follow (the seed's five fields)."""
    return {
      "blocked": bool(blocked),
      "touched": touched,
      "jammed": bool(jammed),
      "peak": float(self._peak[i]),
      "pushed": pushed,
    }

  # -- the calls, for many tables at once -------------------------------------------

  def _begin(self, i: int) -> None:
    if self.pushes_left[i] <= 0:
      raise rq.BudgetSpent(
        f"the push budget of {self.budget} is spent: the run has ended "
        "(look, take and refuse still answer)"
      )

  def act(self, requests: dict[int, tuple]) -> dict[int, tuple]:
    """Pushes and follows of many tables, run together.

    Args:
      requests: table index -> ("push", request) or ("follow", chunk, glass,
        aim).

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
      except (ValueError, rq.BudgetSpent) as err:
        replies[i] = ("error", type(err).__name__, str(err))
        continue
      self.pushes_left[i] -= 1
      self._peak[i] = 0.0
      self._rec[i] = []
    reports = self._run(programs)
    overflow = self._overflow_checked()
    for i, report in reports.items():
      entry = entries[i] | {"report": report}
      if self.engine == "warp":
        entry["physics_overflow"] = int(overflow[i])
      glass, aim = entry["glass"], entry["aim"]
      if glass is not None and aim is not None:
        k = [g.id for g in self.glasses[i]].index(glass)
        pos = self._glass_poses(i)[0][k]
        entry["aim_error"] = float(math.hypot(pos[0] - aim[0], pos[1] - aim[1]))
      entry["path"] = np.array(self._rec[i], dtype=float).reshape(-1, 6)
      self.actions[i].append(entry)
      replies[i] = ("ok", report)
    return replies

  def _overflow_checked(self) -> np.ndarray:
    """Contact or constraint buffer overflows since the last check, per
    table (MuJoCo Warp's bitmask; the C engine reports its own in the same
    bits); warns if any."""
    overflow = self.sim.data.overflow.cpu().numpy().astype(int)
    fresh = overflow & ~self._overflow_total
    self._overflow_total |= overflow
    bad = np.flatnonzero(fresh)
    if bad.size:
      warnings.warn(
        f"the physics overflowed its contact/constraint buffers on tables "
        f"{[self.tables[i] for i in bad]} (bits {fresh[bad].tolist()}): their "
        "physics dropped contacts or constraints",
        RuntimeWarning,
        stacklevel=3,
      )
    return overflow

  def take(self, glasses: dict[int, int]) -> dict[int, tuple]:
    """Take glasses (table index -> glass id) to their racks, together."""
    replies = {}
    moved = np.zeros(self.n, bool)
    for i, glass in glasses.items():
      try:
        k = rq.glass_index(self.glasses[i], self.taken[i], glass)
      except ValueError as err:
        replies[i] = ("error", "ValueError", str(err))
        continue
      states = self.glass_states(i)
      me = states[k]
      room = hidden.had_room(k, states, self.glasses[i])
      slot = RACK_SLOTS[len(self.taken[i])]
      self.taken[i][int(glass)] = dict(
        room=bool(room), state=me, step=int(self.steps[i])
      )
      entity = self.scene[GLASS_ENTITY.format(slot=k)]
      state = torch.zeros(1, 13, device=self.device)
      state[0, :3] = torch.tensor([slot[0], slot[1], RACK_SHELF_TOP + 0.0005])
      state[0, :3] += self.scene.env_origins[i]
      state[0, 3] = 1.0
      entity.write_root_state_to_sim(state, torch.tensor([i], device=self.device))
      self._peak[i] = 0.0
      moved[i] = True
      replies[i] = ("ok", None)
    if moved.any():
      self.sim.forward()
      self._hold(moved, TAKE_SETTLE_STEPS)
    return replies

  def refuse(self, i: int, glass, reason) -> None:
    rq.glass_index(self.glasses[i], self.taken[i], glass)
    if not isinstance(reason, str) or not reason.strip():
      raise ValueError("refuse() needs a non-empty reason string")
    self.refused[i][int(glass)] = reason

  def _glass_poses(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Body positions [G, 3] (table frame) and rotations [G, 9] of table
    ``i``'s glasses."""
    body = self._bodies[: self._ng[i]]
    data = self.sim.data
    xpos = (data.xpos[i, body] - self.scene.env_origins[i]).double().cpu().numpy()
    xmat = data.xmat[i, body].double().reshape(len(body), 9).cpu().numpy()
    return xpos, xmat

  def glass_states(self, i: int) -> list[dict]:
    """True state of every glass of table ``i``."""
    return hidden.glass_states(self.glasses[i], *self._glass_poses(i), self.taken[i])

  def look(self, i: int) -> list[dict]:
    self.looks[i] += 1
    xpos, xmat = self._glass_poses(i)
    states = hidden.glass_states(self.glasses[i], xpos, xmat, self.taken[i])
    return hidden.readings(
      self.tables[i], int(self.looks[i]), self.glasses[i], states, xpos, xmat
    )

  # -- pictures (a C model of table i, never stepped) ----------------------------------

  def _pictures(self, i: int) -> PoseRenderer:
    if i not in self._renderers:
      self._renderers[i] = PoseRenderer(self._table_model(i))
    return self._renderers[i]

  def _table_model(self, i: int):
    """The compiled model with table ``i``'s meshes, masses and frames."""
    from mjlab_tasks.common.c_engine import copy_model

    model = copy_model(self.sim.mj_model)
    for field in self.sim.expanded_fields:
      values = getattr(self.sim.model, field)[i].cpu().numpy()
      target = getattr(model, field)
      target[...] = values.reshape(target.shape).astype(target.dtype)
    return model

  def top_view(self, i: int) -> np.ndarray:
    qpos = self.sim.data.qpos[i].double().cpu().numpy()
    return self._pictures(i).render(qpos, "table/top_view", (384, 384), True)

  def write_film(self, i: int, path: str) -> int:
    pictures = self._pictures(i)
    frames = [
      pictures.render(q, "table/film", FILM_SIZE, False) for q in self._film_qpos[i]
    ]
    write_video(path, frames)
    return len(frames)

  # -- record -----------------------------------------------------------------------------

  def truth(self, i: int) -> dict:
    return dict(
      glasses=[g.as_dict() for g in self.glasses[i]], states=self.glass_states(i)
    )

  def record(self, i: int) -> dict:
    """Everything the scoring needs for table ``i`` (truth included)."""
    out = dict(
      table=self.tables[i],
      budget=self.budget,
      pushes_used=int(self.budget - self.pushes_left[i]),
      glasses=[g.as_dict() for g in self.glasses[i]],
      final=self.glass_states(i),
      taken={int(k): v for k, v in self.taken[i].items()},
      refused=dict(self.refused[i]),
      actions=self.actions[i],
      looks=int(self.looks[i]),
      sim_time=float(self.sim.data.time[i]),
      friction=vars(self.physics.friction) | {},
      engine=self.engine,
    )
    if self.engine == "warp":
      out["physics_overflow"] = int(self._overflow_total[i])
    return out

  def close(self) -> None:
    for pictures in self._renderers.values():
      pictures.close()
    self._renderers.clear()
    self.env.close()


class GlassTable:
  """One table of a ``GlassWorld``: the calls a solution's requests reach."""

  def __init__(self, world: GlassWorld, i: int = 0):
    self.world, self.i = world, i
    self.table = world.tables[i]
    self.glasses = world.glasses[i]
    self.physics = world.physics

  @classmethod
  def alone(cls, table: int, pushes: int, physics=None, film=False, engine="mujoco"):
    """A world of this one table."""
    return cls(GlassWorld([table], pushes, physics, film, engine))

  def _reply(self, reply: tuple):
    if reply[0] == "ok":
      return reply[1]
    _, kind, message = reply
    raise (rq.BudgetSpent if kind == "BudgetSpent" else ValueError)(message)

  def push(self, request: dict) -> dict:
    return self._reply(self.world.act({self.i: ("push", request)})[self.i])

  def follow(self, chunk, glass=None, aim=None) -> dict:
    return self._reply(self.world.act({self.i: ("follow", chunk, glass, aim)})[self.i])

  def take(self, glass) -> None:
    self._reply(self.world.take({self.i: glass})[self.i])

  def refuse(self, glass, reason) -> None:
    self.world.refuse(self.i, glass, reason)

  def look(self) -> list[dict]:
    return self.world.look(self.i)

  def glass_states(self) -> list[dict]:
    return self.world.glass_states(self.i)

  def top_view(self) -> np.ndarray:
    return self.world.top_view(self.i)

  def write_film(self, path: str) -> int:
    return self.world.write_film(self.i, path)

  def record(self) -> dict:
    return self.world.record(self.i)

  def hand_position(self) -> np.ndarray:
    return self.world.hand_positions()[self.i]

  @property
  def z_safe(self) -> float:
    return float(self.world.z_safe[self.i])

  @property
  def pushes_left(self) -> int:
    return int(self.world.pushes_left[self.i])

  @property
  def taken(self) -> dict:
    return self.world.taken[self.i]

  @property
  def actions(self) -> list:
    return self.world.actions[self.i]

  def close(self) -> None:
    self.world.close()
