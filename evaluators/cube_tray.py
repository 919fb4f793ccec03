"""Cube-in-tray evaluator, as specified: batched, strict, with a reason per env.

Pure torch on simulated state and contact readings, all environments at
once. It never reads a controller's internal state, so it scores any expert
or policy the same way. Conditions, per environment and per step:

- validity: finite state and a proper rotation, else ``indeterminate``;
- containment: ``extent = |R| @ [h, h, h]``; every
  ``|p_xy - tray_xy| + extent_xy <= inner_half`` (tray aligned with world X/Y);
- support: tray-floor contact normal force > 0.01 N reported by the simulator
  AND cube bottom within 2 mm of the floor (height alone never counts);
- release: no contact between the cube and any robot body;
- speed: linear <= 0.01 m/s and angular <= 0.1 rad/s;
- settling: all of the above held for 0.5 s of continuous simulated time; any
  break restarts the clock. Judged on every physics step (1 kHz), so no break
  between two policy steps goes unseen.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch


class Outcome(IntEnum):
  IN_PROGRESS = 0
  SUCCESS = 1
  INDETERMINATE = 2


class Reason(IntEnum):
  """Why an environment is not (yet) a success. Checked in this order."""

  NONE = 0
  INDETERMINATE = 1
  ROBOT_CONTACT = 2
  CONTAINMENT = 3
  SUPPORT = 4
  MOVEMENT = 5
  SETTLING = 6


REASON_NAMES = {r: r.name.lower() for r in Reason}
OUTCOME_NAMES = {o: o.name.lower() for o in Outcome}


@dataclass(frozen=True)
class CubeTrayThresholds:
  half_size: float = 0.02
  """Cube half edge [m] (40 mm cube)."""
  inner_half: float = 0.05
  """Half of the tray's inner footprint [m] (100 x 100 mm)."""
  min_support_force: float = 0.01
  """Tray-floor contact normal force that counts as support [N]."""
  max_floor_gap: float = 0.002
  """Largest distance of the cube bottom from the floor top [m]."""
  max_lin_speed: float = 0.01
  max_ang_speed: float = 0.1
  settle_time: float = 0.5
  """Continuous simulated time all conditions must hold [s]."""
  rotation_tol: float = 1e-3
  """Tolerance of the orthonormality and determinant checks."""


@dataclass
class CubeTrayState:
  """Simulated state the verdict depends on; every field is batched [B, ...]."""

  cube_pos_w: torch.Tensor  # [B, 3]
  cube_rot_w: torch.Tensor  # [B, 3, 3]
  cube_lin_vel_w: torch.Tensor  # [B, 3]
  cube_ang_vel_w: torch.Tensor  # [B, 3]
  tray_pos_w: torch.Tensor  # [B, 3] tray centre (x, y used)
  tray_floor_z: torch.Tensor  # [B] height of the tray floor's top surface
  floor_normal_force: torch.Tensor  # [B] cube/tray-floor contact normal force
  robot_contact: torch.Tensor  # [B] bool: cube touches any robot body


def is_contained(
  cube_pos_w: torch.Tensor,
  cube_rot_w: torch.Tensor,
  tray_pos_w: torch.Tensor,
  half_size: float = 0.02,
  inner_half: float = 0.05,
) -> torch.Tensor:
  """Whether the whole cube lies within the tray's footprint (the
  cube-in-tray specification's rule).

  Args:
    cube_pos_w: Cube centres [B, 3].
    cube_rot_w: Cube rotations (world from cube) [B, 3, 3].
    tray_pos_w: Tray centres [B, 3]; the tray is aligned with world X/Y.
    half_size: Cube half edge [m].
    inner_half: Half of the tray's inner footprint [m].

  Returns:
    bool [B]
  """
  half = torch.full((3,), half_size, dtype=cube_rot_w.dtype, device=cube_rot_w.device)
  extent = cube_rot_w.abs() @ half  # [B, 3]
  offset = (cube_pos_w[..., :2] - tray_pos_w[..., :2]).abs()
  return torch.all(offset + extent[..., :2] <= inner_half, dim=-1)


def is_proper_rotation(rot: torch.Tensor, tol: float = 1e-3) -> torch.Tensor:
  """Finite, orthonormal and right-handed rotation matrices [B, 3, 3] -> [B]."""
  finite = torch.isfinite(rot).flatten(1).all(dim=-1)
  safe = torch.where(
    finite[:, None, None], rot, torch.eye(3, dtype=rot.dtype, device=rot.device)
  )
  eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
  ortho = (safe.transpose(-1, -2) @ safe - eye).abs().flatten(1).amax(dim=-1) <= tol
  # Triple product: torch.linalg.det costs milliseconds per call on the CPU,
  # and this runs every physics step.
  det_value = (safe[:, 0] * torch.linalg.cross(safe[:, 1], safe[:, 2])).sum(-1)
  det = (det_value - 1.0).abs() <= tol
  return finite & ortho & det


def placement_conditions(
  state: CubeTrayState, th: CubeTrayThresholds = CubeTrayThresholds()
) -> dict[str, torch.Tensor]:
  """The instantaneous conditions and their conjunction ``placed``, bool [B]
  each (the part the settling clock needs on every physics step)."""
  vectors = (
    state.cube_pos_w,
    state.cube_lin_vel_w,
    state.cube_ang_vel_w,
    state.tray_pos_w,
  )
  finite = torch.stack(
    [torch.isfinite(v).all(dim=-1) for v in vectors]
    + [torch.isfinite(state.tray_floor_z), torch.isfinite(state.floor_normal_force)]
  ).all(dim=0)
  valid = finite & is_proper_rotation(state.cube_rot_w, th.rotation_tol)
  rot = torch.where(
    valid[:, None, None], state.cube_rot_w, torch.zeros_like(state.cube_rot_w)
  )
  contained = valid & is_contained(
    state.cube_pos_w, rot, state.tray_pos_w, th.half_size, th.inner_half
  )
  half = torch.full((3,), th.half_size, dtype=rot.dtype, device=rot.device)
  bottom_z = state.cube_pos_w[:, 2] - (rot.abs() @ half)[:, 2]
  near_floor = (bottom_z - state.tray_floor_z).abs() <= th.max_floor_gap
  supported = valid & near_floor & (state.floor_normal_force > th.min_support_force)
  released = valid & ~state.robot_contact
  slow = (
    valid
    & (torch.linalg.vector_norm(state.cube_lin_vel_w, dim=-1) <= th.max_lin_speed)
    & (torch.linalg.vector_norm(state.cube_ang_vel_w, dim=-1) <= th.max_ang_speed)
  )
  return {
    "valid": valid,
    "contained": contained,
    "supported": supported,
    "released": released,
    "slow": slow,
    "placed": released & contained & supported & slow,
  }


def first_failure(conditions: dict[str, torch.Tensor]) -> torch.Tensor:
  """``Reason`` [B] (int): the first failing condition, in the contract's order."""
  reason = torch.full_like(conditions["valid"], int(Reason.NONE), dtype=torch.long)
  # Assign in reverse priority so the first failing condition wins.
  for key, why in (
    ("slow", Reason.MOVEMENT),
    ("supported", Reason.SUPPORT),
    ("contained", Reason.CONTAINMENT),
    ("released", Reason.ROBOT_CONTACT),
    ("valid", Reason.INDETERMINATE),
  ):
    reason[~conditions[key]] = int(why)
  return reason


def evaluate_conditions(
  state: CubeTrayState, th: CubeTrayThresholds = CubeTrayThresholds()
) -> dict[str, torch.Tensor]:
  """Instantaneous conditions, ManiSkill ``evaluate()`` style: bool [B] each.

  ``placed`` is the conjunction of every condition except settling, and
  ``reason`` [B] (int) names the first failing condition (``Reason``).
  """
  conditions = placement_conditions(state, th)
  return {**conditions, "reason": first_failure(conditions)}


def settle_steps(settle_time: float, physics_dt: float) -> int:
  """Physics steps that make ``settle_time`` exactly; refuses a time that is
  not a whole number of steps (the clock would otherwise round silently)."""
  steps = round(settle_time / physics_dt)
  if steps < 1 or abs(steps * physics_dt - settle_time) > 1e-9:
    raise ValueError(
      f"settle_time {settle_time} s is not a whole number of {physics_dt} s "
      "physics steps"
    )
  return steps


class CubeTrayEvaluator:
  """Stateful verdict: instantaneous conditions plus the settling clock.

  Call ``advance`` (or ``update``) once per PHYSICS step, on the state that
  step starts from (in mjlab, the per-substep hook; see
  ``mjlab_tasks/cube_tray/mdp.py``), so every simulated state is judged: a
  break of any length restarts the clock, and success needs
  ``settle_time / physics_dt`` consecutive placed states (500 at 1 kHz),
  counted as an integer. Success is kept until ``reset``.
  """

  def __init__(
    self,
    num_envs: int,
    device: str | torch.device,
    physics_dt: float,
    thresholds: CubeTrayThresholds = CubeTrayThresholds(),
  ):
    self.th = thresholds
    self.physics_dt = float(physics_dt)
    self.required_steps = settle_steps(thresholds.settle_time, self.physics_dt)
    self.calm_steps = torch.zeros(num_envs, dtype=torch.long, device=device)
    self.succeeded = torch.zeros(num_envs, dtype=torch.bool, device=device)
    self._conditions: dict[str, torch.Tensor] | None = None
    self._verdict: dict[str, torch.Tensor] = {}

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    """Restart the clock; the verdict of the state judged last stays readable
    (a terminated environment's final verdict)."""
    self.verdict  # noqa: B018 - materialize it before the clock changes
    ids = slice(None) if env_ids is None else env_ids
    self.calm_steps[ids] = 0
    self.succeeded[ids] = False

  def advance(self, state: CubeTrayState, count: bool = True) -> torch.Tensor:
    """Judge one physics step's state; returns ``placed`` [B] (bool).

    Args:
      state: The simulated state a physics step starts from.
      count: Count this state on the clock (False: only judge it, e.g. the
        state an environment starts in before its first step).
    """
    return self.advance_steps(state, 1, count)[-1]

  def advance_steps(
    self, states: CubeTrayState, steps: int, count: bool = True
  ) -> torch.Tensor:
    """Judge ``steps`` consecutive physics steps' states at once, exactly as
    that many ``advance`` calls would; returns ``placed`` [steps, B].

    Args:
      states: Every field holds ``steps * B`` rows, time-major (all
        environments of the first step, then of the second, ...).
      steps: How many physics steps the rows span.
      count: Count the states on the clock.
    """
    conditions = placement_conditions(states, self.th)
    placed = conditions["placed"].reshape(steps, -1)  # [T, B]
    if count:
      # Calm run ending at each step: steps since the last unplaced state, or
      # the carried-in run plus the steps so far when there was none.
      t = torch.arange(steps, device=placed.device)[:, None]
      last_break = torch.where(placed, -1, t).cummax(dim=0).values
      run = t - last_break + torch.where(last_break < 0, self.calm_steps, 0)
      self.succeeded |= (run >= self.required_steps).any(dim=0)
      self.calm_steps = run[-1]
    last = {k: v.reshape(steps, -1)[-1] for k, v in conditions.items()}
    last["calm_steps"] = self.calm_steps.clone()
    last["succeeded"] = self.succeeded.clone()
    self._conditions, self._verdict = last, {}
    return placed

  @property
  def verdict(self) -> dict[str, torch.Tensor]:
    """The full verdict of the state judged last (built on first read).

    ``placement_conditions`` plus ``reason`` [B] (``Reason``; ``SETTLING`` for
    placed cubes whose clock has not yet reached the limit, ``NONE`` once
    succeeded), ``calm_steps`` [B] (consecutive placed physics steps),
    ``settled_time`` [B] (s), ``settled`` [B] (bool: placed and calm for the
    whole settling time now), ``success`` [B] (bool, kept from the step the
    clock first reached the limit until ``reset``) and ``outcome`` [B]
    (``Outcome``).
    A state that is not valid is ``INDETERMINATE`` and not a success,
    whatever came before.
    """
    if self._verdict or self._conditions is None:
      return self._verdict
    c = dict(self._conditions)
    calm, succeeded = c.pop("calm_steps"), c.pop("succeeded")
    placed, valid = c["placed"], c["valid"]
    success = succeeded & valid
    reason = first_failure(c)
    reason[placed & ~success] = int(Reason.SETTLING)
    reason[success] = int(Reason.NONE)
    outcome = torch.full_like(reason, int(Outcome.IN_PROGRESS))
    outcome[success] = int(Outcome.SUCCESS)
    outcome[~valid] = int(Outcome.INDETERMINATE)
    self._verdict = c | dict(
      settled=placed & (calm >= self.required_steps),
      calm_steps=calm,
      settled_time=calm * self.physics_dt,
      success=success,
      outcome=outcome,
      reason=reason,
    )
    return self._verdict

  def update(self, state: CubeTrayState, count: bool = True) -> dict[str, torch.Tensor]:
    """``advance`` then the full ``verdict``."""
    self.advance(state, count)
    return self.verdict
