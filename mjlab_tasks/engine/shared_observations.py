"""Observation terms that several groups read, computed once per pass.

Every task's critic group repeats the actor's terms (same function, same
parameters) and adds privileged ones, and mjlab's ``ObservationManager``
computes each group on its own: the actor's terms ran twice per policy step
(about 1 ms at one environment on the C engine, more than the physics of a
cube-tray policy step). ``share_observation_terms`` gives such a repeated
term one cached value per ``ObservationManager.compute`` call: the first
group computes it, the others read that value. The manager clones every term
value before noise, scaling and history, so each group still gets its own
tensor, and the actor's noise never reaches the critic. Outside ``compute``
(a direct ``compute_group`` call) every term is computed as before. Stateful
class terms are never shared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv


class _Pass:
  """The values of the shared terms during one ``compute`` call (None
  outside one)."""

  values: dict[int, torch.Tensor] | None = None


class SharedTerm:
  """A term function whose value is computed once per observation pass."""

  def __init__(self, func, key: int, current: _Pass):
    self.func, self.key, self._pass = func, key, current
    self.__name__ = getattr(func, "__name__", type(func).__name__)

  def __call__(self, env: ManagerBasedRlEnv, **params) -> torch.Tensor:
    values = self._pass.values
    if values is None:
      return self.func(env, **params)
    if self.key not in values:
      values[self.key] = self.func(env, **params)
    return values[self.key]


def _same(a: dict, b: dict) -> bool:
  if a is b:
    return True
  try:
    return bool(a == b)
  except (RuntimeError, TypeError, ValueError):  # e.g. tensors among them
    return False


def share_observation_terms(env: ManagerBasedRlEnv) -> int:
  """Share the terms that appear (same function, equal parameters) in more
  than one observation group of ``env``; returns how many term entries now
  read a shared value (0: nothing repeated, nothing changed)."""
  from mjlab.managers.manager_base import ManagerTermBase

  manager = env.observation_manager
  if isinstance(getattr(manager, "_shared_pass", None), _Pass):
    return 0  # Already shared.
  buckets: list[list] = []  # Term cfgs with the same function and parameters.
  for cfgs in manager._group_obs_term_cfgs.values():
    for cfg in cfgs:
      stateful = isinstance(cfg.func, ManagerTermBase) or hasattr(cfg.func, "reset")
      if stateful or not callable(cfg.func):
        continue
      for bucket in buckets:
        if bucket[0].func is cfg.func and _same(bucket[0].params, cfg.params):
          bucket.append(cfg)
          break
      else:
        buckets.append([cfg])
  current, count = _Pass(), 0
  for key, bucket in enumerate(b for b in buckets if len(b) > 1):
    term = SharedTerm(bucket[0].func, key, current)
    for cfg in bucket:
      cfg.func = term
    count += len(bucket)
  if not count:
    return 0
  compute = manager.compute

  def compute_once(*args, **kwargs):
    current.values = {}
    try:
      return compute(*args, **kwargs)
    finally:
      current.values = None

  manager.compute = compute_once
  manager._shared_pass = current
  return count
