"""The examiner's world: the tables of a GlassPush environment.

``GlassWorld`` answers the examiner's calls (``look``, ``top_view``,
``push``, ``follow``, ``take``, ``refuse``) on the GlassPush-UR5-RG2
environment, one environment per table, on either engine: C MuJoCo on the
CPU (only the acting tables step; a table ends exactly as when run alone)
or MuJoCo Warp (every table steps; idle hands hold). The push routine and
follow() are ``routine.py``'s programs, run by ``hand.HandRunner``. The
truth (poses, shapes, friction) stays here; solutions reach it only through
the examiner's worker (``server.py``). See docs/glass_push.md.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import numpy as np
import torch

from assets.ur5_rg2.kinematics import ArmKinematics
from assets.ur5_rg2.model import HOME_ARM_Q
from mjlab_tasks.engine import ENGINES, default_device, traits
from mjlab_tasks.engine import forward as forward_worlds
from mjlab_tasks.glass_push import hidden
from mjlab_tasks.glass_push.examiner import routine as rt
from mjlab_tasks.glass_push.examiner.hand import HandRunner, hand_rotation
from mjlab_tasks.glass_push.rules import requests as rq
from mjlab_tasks.glass_push.rules.errors import BudgetSpent
from mjlab_tasks.glass_push.rules.hand import PAD_HALF_Z
from mjlab_tasks.glass_push.rules.tables import RACK_CENTER, RACK_SHELF_TOP, ZONE_CENTER

START_SETTLE_STEPS = 250
RENDERERS_KEPT = 4  # Picture renderers a worker keeps (see GlassWorld._pictures).
TAKE_SETTLE_STEPS = 100
IK_DAMPING = 0.01  # the start pose's IK (the suite's DLS step, repeated)
RACK_SLOTS = tuple(
  (RACK_CENTER[0] + dx, RACK_CENTER[1] + dy)
  for dy in (-0.045, 0.045)
  for dx in (-0.2, -0.1, 0.0, 0.1, 0.2)
)


def start_joint_positions(z_safe: float) -> np.ndarray:
  """Arm joints [6] of the start: tool point above the zone, 0.25 m to its
  left, at ``z_safe``, level and pointing along +x."""
  kin = ArmKinematics()
  q = np.array(HOME_ARM_Q, dtype=float)
  target = np.array([ZONE_CENTER[0], ZONE_CENTER[1] + 0.25, z_safe])
  for _ in range(300):
    dq, _ = kin.dls_step(q, target, hand_rotation(0.0), IK_DAMPING)
    q = q + dq
  return q


class GlassWorld:
  """Tables of the GlassPush environment, one per environment (examiner side).

  Args:
    tables: table numbers.
    pushes: the push budget of every table.
    physics: the private physics fixture (``hidden.PhysicsConfig``).
    film: keep film poses (10 fps) for ``write_film``.
    engine: "mujoco" (C MuJoCo, CPU) or "warp" (MuJoCo Warp).
    device: "cpu" or "cuda:N" (MuJoCo Warp only; default: CUDA if present).
    compiled: C engine: run the hand's segments in C (default: when a C++
      compiler is available; otherwise one step at a time, slower).
    njmax: MuJoCo Warp's constraint rows per world (default: mjlab's).
  """

  def __init__(
    self,
    tables,
    pushes: int,
    physics=None,
    film: bool = False,
    engine: str = "mujoco",
    device: str | None = None,
    compiled: bool | None = None,
    njmax: int | None = None,
  ):
    from mjlab_tasks.engine import make_env
    from mjlab_tasks.glass_push.env_cfg import glass_push_env_cfg

    if isinstance(pushes, bool) or not isinstance(pushes, (int, np.integer)):
      raise ValueError(f"pushes must be an int, got {pushes!r}")
    if pushes < 1:
      raise ValueError(f"pushes must be at least 1, got {pushes}")
    self.tables = [int(t) for t in tables]
    if not self.tables:
      raise ValueError("a world needs at least one table")
    if engine not in ENGINES:
      raise ValueError(f"unknown engine {engine!r} (use 'mujoco' or 'warp')")
    self.engine = engine
    self.physics = physics if physics is not None else hidden.PhysicsConfig()
    self.glasses = [hidden.table_glasses(t, self.physics) for t in self.tables]
    n = self.n = len(self.tables)
    if device is None:
      device = default_device(engine)
    cfg = glass_push_env_cfg(
      tables=self.tables, num_envs=n, physics=self.physics, end_on_success=False
    )
    # The examiner's hand follows its commanded path without the policy's
    # per-step joint bound: the bound scales the whole step, so a lagging
    # wrist turn would slow the hand's travel (measured: 150 mm behind at
    # the end of a turning transit and descent).
    cfg.actions["arm"].max_dq = math.inf
    if njmax is not None:
      cfg.sim.njmax = njmax
    self.env = make_env(cfg, device=device, engine=engine, compiled_control=False)
    self.env.reset()
    self.sim, self.scene, self.device = self.env.sim, self.env.scene, self.env.device
    tallest = np.array([max(g.height for g in gl) for gl in self.glasses])
    z_safe = tallest + rt.LIFT_CLEARANCE + PAD_HALF_Z
    self.hand = HandRunner(self.env, self.glasses, z_safe, bool(film), compiled)
    self.z_safe = self.hand.z_safe
    self.film = bool(film)
    self.budget = int(pushes)
    self.pushes_left = np.full(n, int(pushes))
    self.taken: list[dict[int, dict]] = [{} for _ in range(n)]
    self.refused: list[dict[int, str]] = [{} for _ in range(n)]
    # When each refusal was made (actions and takes before it), for judging.
    self.refused_at: list[dict[int, dict]] = [{} for _ in range(n)]
    self.actions: list[list[dict]] = [[] for _ in range(n)]
    self.looks = np.zeros(n, int)
    self._overflow_total = np.zeros(n, int)
    self._renderers: OrderedDict = OrderedDict()  # table -> renderer, oldest first
    self._place_hands()
    self.hand.hold(np.ones(n, bool), START_SETTLE_STEPS)
    self._overflow_checked()
    self.initial_qpos = self.sim.data.qpos.cpu().numpy().astype(float)

  def _place_hands(self) -> None:
    """Every hand at its table's start pose, targets there, gripper closed."""
    hand, robot = self.hand, self.scene["robot"]
    arm = hand.arm
    q = np.stack([start_joint_positions(z) for z in hand.z_safe])
    q = torch.as_tensor(q, dtype=torch.float32, device=self.device)
    ids = arm.joint_local_ids
    robot.write_joint_state_to_sim(q, torch.zeros_like(q), joint_ids=ids)
    hand.cmd[:] = [ZONE_CENTER[0], ZONE_CENTER[1] + 0.25, 0.0]
    hand.cmd[:, 2] = hand.z_safe
    hand.heading[:] = 0.0
    self.env.action_manager.get_term("gripper").apply_actions()
    self.scene.write_data_to_sim()
    self.sim.forward()

  # -- pushes and follows, many tables together -------------------------------------

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
        aim).

    Returns:
      table index -> ("ok", report) or ("error", exception type name, message).
    """
    replies: dict[int, tuple] = {}
    programs, entries = {}, {}
    hand = self.hand
    for i, (kind, *args) in requests.items():
      try:
        if kind == "push":
          glass, start, heading, reach, travel, aim, clean = rq.parse_push(
            args[0], self.glasses[i], self.taken[i]
          )
          self._begin(i)
          programs[i] = rt.push(hand, i, start, heading, reach, travel)
          entries[i] = dict(kind="push", request=clean, glass=glass, aim=aim.tolist())
        elif kind == "follow":
          way, glass, aim = rq.parse_follow(*args, self.glasses[i], self.taken[i])
          self._begin(i)
          programs[i] = rt.follow(hand, i, way)
          entries[i] = dict(kind="follow", request=way.tolist(), glass=glass, aim=aim)
        else:
          raise ValueError(f"unknown action {kind!r}")
      except (ValueError, BudgetSpent) as err:
        replies[i] = ("error", type(err).__name__, str(err))
        continue
      self.pushes_left[i] -= 1
      hand.peak[i] = 0.0
      hand.rec[i] = []
    results = hand.run(programs)
    overflow = self._overflow_checked()
    for i, (blocked, touched, jammed, pushed) in results.items():
      report = {
        "blocked": bool(blocked),
        "touched": touched,
        "jammed": bool(jammed),
        "peak": float(hand.peak[i]),
        "pushed": pushed,
      }
      entry = entries[i] | {"report": report}
      if traits(self.engine).reports_overflow:
        entry["physics_overflow"] = int(overflow[i])
      glass, aim = entry["glass"], entry["aim"]
      if glass is not None and aim is not None:
        k = [g.id for g in self.glasses[i]].index(glass)
        pos = self._glass_poses(i)[0][k]
        entry["aim_error"] = float(math.hypot(pos[0] - aim[0], pos[1] - aim[1]))
      entry["path"] = np.array(hand.rec[i], dtype=float).reshape(-1, 6)
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

  # -- take, refuse, look -------------------------------------------------------------

  def take(self, glasses: dict[int, int]) -> dict[int, tuple]:
    """Take glasses (table index -> glass id) to the rack, together; records
    whether each truly had room."""
    from mjlab_tasks.glass_push.scene import GLASS_ENTITY

    replies = {}
    moved = np.zeros(self.n, bool)
    for i, glass in glasses.items():
      try:
        k = rq.glass_index(self.glasses[i], self.taken[i], glass)
      except ValueError as err:
        replies[i] = ("error", "ValueError", str(err))
        continue
      states = self.glass_states(i)
      room = hidden.had_room(k, states, self.glasses[i])
      slot = RACK_SLOTS[len(self.taken[i])]
      self.taken[i][int(glass)] = dict(
        room=bool(room),
        state=states[k],
        step=int(self.hand.steps[i]),
        after_action=len(self.actions[i]),
      )
      state = torch.zeros(1, 13, device=self.device)
      state[0, :3] = torch.tensor([slot[0], slot[1], RACK_SHELF_TOP + 0.0005])
      state[0, :3] += self.scene.env_origins[i]
      state[0, 3] = 1.0
      entity = self.scene[GLASS_ENTITY.format(slot=k)]
      entity.write_root_state_to_sim(state, torch.tensor([i], device=self.device))
      self.hand.peak[i] = 0.0
      moved[i] = True
      replies[i] = ("ok", None)
    if moved.any():
      self._forward(moved)
      self.hand.hold(moved, TAKE_SETTLE_STEPS)
      self._overflow_checked()
    return replies

  def _forward(self, tables: np.ndarray) -> None:
    """Derived quantities of ``tables`` (bool [N]) from their state. On the C
    engine only theirs: a forward pass refreshes the kinematics the next
    control step reads, so running it on a table that did not change would
    make its run depend on the others' takes."""
    forward_worlds(self.env, tables)

  def refuse(self, i: int, glass, reason) -> None:
    """Record a refusal with its reason (the glass stays)."""
    rq.glass_index(self.glasses[i], self.taken[i], glass)
    if not isinstance(reason, str) or not reason.strip():
      raise ValueError("refuse() needs a non-empty reason string")
    self.refused[i][int(glass)] = reason
    self.refused_at[i][int(glass)] = dict(
      actions=len(self.actions[i]), takes=len(self.taken[i])
    )

  def _glass_poses(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Body positions [G, 3] (table frame) and rotations [G, 9] of table
    ``i``'s glasses."""
    body = self.hand.glass_bodies[: len(self.glasses[i])]
    data = self.sim.data
    xpos = (data.xpos[i, body] - self.scene.env_origins[i]).double().cpu().numpy()
    xmat = data.xmat[i, body].double().reshape(len(body), 9).cpu().numpy()
    return xpos, xmat

  def glass_states(self, i: int) -> list[dict]:
    """True state of every glass of table ``i``."""
    return hidden.glass_states(self.glasses[i], *self._glass_poses(i), self.taken[i])

  def look(self, i: int) -> list[dict]:
    """Noisy readings of table ``i``'s glasses (noise from table, look)."""
    self.looks[i] += 1
    xpos, xmat = self._glass_poses(i)
    states = hidden.glass_states(self.glasses[i], xpos, xmat, self.taken[i])
    return hidden.readings(
      self.tables[i], int(self.looks[i]), self.glasses[i], states, xpos, xmat
    )

  def hand_positions(self) -> np.ndarray:
    """Tool points of every table [N, 3] (table frame)."""
    return self.hand.hand_positions()

  # -- pictures (a C model of table i, never stepped) ----------------------------------

  def _pictures(self, i: int):
    """Table ``i``'s renderer. At most RENDERERS_KEPT are kept, the least
    recently used closed first: each holds a model copy and an offscreen GL
    context (a worker drawing 32 tables grew past 12 GB); a closed one is
    built again, drawing the same pictures."""
    from mjlab_tasks.glass_push.examiner.pictures import PoseRenderer

    if i in self._renderers:
      self._renderers.move_to_end(i)
      return self._renderers[i]
    while len(self._renderers) >= RENDERERS_KEPT:
      self._renderers.popitem(last=False)[1].close()
    self._renderers[i] = PoseRenderer(self._table_model(i))
    return self._renderers[i]

  def _table_model(self, i: int):
    """The compiled model with table ``i``'s meshes, masses and frames."""
    from mjlab_tasks.engine import copy_model

    model = copy_model(self.sim.mj_model)
    for field in self.sim.expanded_fields:
      values = getattr(self.sim.model, field)[i].cpu().numpy()
      target = getattr(model, field)
      target[...] = values.reshape(target.shape).astype(target.dtype)
    paint_glasses(model, self.glasses[i])
    return model

  def top_view(self, i: int) -> np.ndarray:
    """384x384x3 uint8 picture from 750 mm above the zone (arm not drawn)."""
    qpos = self.sim.data.qpos[i].double().cpu().numpy()
    return self._pictures(i).render(qpos, "table/top_view", (384, 384), True)

  def write_film(self, i: int, path: str) -> int:
    """Render table ``i``'s film poses to an mp4; returns the frame count."""
    from mjlab_tasks.glass_push.examiner.pictures import FILM_SIZE, write_video

    pictures = self._pictures(i)
    frames = [
      pictures.render(q, "table/film", FILM_SIZE, False) for q in self.hand.film_qpos[i]
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
      refused_at={int(k): dict(v) for k, v in self.refused_at[i].items()},
      actions=self.actions[i],
      looks=int(self.looks[i]),
      sim_time=float(self.sim.data.time[i]),
      friction=vars(self.physics.friction) | {},
      engine=self.engine,
    )
    if traits(self.engine).reports_overflow:
      out["physics_overflow"] = int(self._overflow_total[i])
    return out

  def close(self) -> None:
    for pictures in self._renderers.values():
      pictures.close()
    self._renderers.clear()
    self.env.close()


def paint_glasses(model, glasses) -> None:
  """Each glass slot's colour by its kind on this table (``PALETTE``).

  A slot's glass is one variant per table, but the variants' colours are
  not per-world fields: the compiled model holds one table's, so without
  this a table's picture showed the kinds of the first table of its worker
  and changed with the tables it ran beside."""
  import mujoco

  from mjlab_tasks.glass_push.rules.glasses import PALETTE
  from mjlab_tasks.glass_push.scene import GLASS_ENTITY, SLOTS, slot_glass

  prefixes = [GLASS_ENTITY.format(slot=s) + "/" for s in range(SLOTS)]
  for g in range(model.ngeom):
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
    for slot, prefix in enumerate(prefixes):
      if name.startswith(prefix):
        model.geom_rgba[g] = PALETTE[slot_glass(glasses, slot).kind]


class GlassTable:
  """One table of a ``GlassWorld``, called like the examiner's single-table
  worlds before it (tests, tools): ``push(request)`` instead of
  ``act({i: ("push", request)})``."""

  def __init__(self, world: GlassWorld, i: int = 0):
    self.world, self.i = world, i
    self.table = world.tables[i]
    self.glasses = world.glasses[i]
    self.physics = world.physics
    self.budget = world.budget

  @classmethod
  def alone(cls, table: int, pushes: int, physics=None, film=False, **kwargs):
    """A world of this one table (``GlassWorld``'s keyword arguments)."""
    return cls(GlassWorld([table], pushes, physics, film, **kwargs))

  def _reply(self, reply: tuple):
    if reply[0] == "ok":
      return reply[1]
    _, kind, message = reply
    raise (BudgetSpent if kind == "BudgetSpent" else ValueError)(message)

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

  def log_forces(self) -> list[np.ndarray]:
    """From now on, every physics step's wrist force vector of this table
    while it acts (world frame)."""
    hand = self.world.hand
    if hand.force_log is None:
      hand.force_log = [[] for _ in range(hand.n)]
    return hand.force_log[self.i]

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
