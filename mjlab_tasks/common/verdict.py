"""One verdict mechanism for every task: the task's judge is one term of
mjlab's metrics manager (a ``VerdictTerm``), and ``task_verdict(env)`` reads
it.

Metrics terms are the one kind mjlab both resets with the environments and,
where asked, calls after every physics step: a verdict that accumulates over
physics steps (cube in tray: settled for half a second) is judged there; one
that depends on the current state only (bin picking, glass pushing) is judged
when first read after the state changed, by a step, a reset or a state
restore (``invalidate_verdict``). Terminations, rewards and metrics of a step
therefore see the same verdict, and nothing reads a verdict older than the
state.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
  import torch
  from mjlab.envs import ManagerBasedRlEnv
  from mjlab.managers.metrics_manager import MetricsTermCfg

_TERMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class VerdictTerm:
  """Base of a task's verdict term (a metrics term: ``MetricsTermCfg(func=
  Subclass, ...)``). Subclasses give ``verdict``, the current state's, and
  ``metric(verdict)``, the value logged each step."""

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    self.cfg, self.env = cfg, env
    _TERMS[env] = self  # the metrics manager's own replaces an early one

  @property
  def verdict(self) -> dict[str, torch.Tensor]:
    raise NotImplementedError

  def metric(self, verdict: dict[str, torch.Tensor]) -> torch.Tensor:
    raise NotImplementedError

  def __call__(self, env: ManagerBasedRlEnv, **params) -> torch.Tensor:
    del params  # Bound at construction.
    return self.metric(self.verdict)

  def state_changed(self, env_ids: torch.Tensor | slice | None = None) -> None:
    """The state of ``env_ids`` (None: all) was written outside a step."""

  def reset(self, env_ids: torch.Tensor | slice | None = None) -> None:
    self.state_changed(env_ids)


class StateVerdictTerm(VerdictTerm):
  """A verdict of the current state alone: judged (``judge(env)``) once per
  step, when first read, and again for environments reset or restored since
  (those rows only, so the rest keep the verdict the step's terminations and
  rewards saw)."""

  def __init__(self, cfg: MetricsTermCfg, env: ManagerBasedRlEnv):
    super().__init__(cfg, env)
    self._verdict: dict[str, torch.Tensor] | None = None
    self._step = -1
    self._stale: list = []  # rows changed since the verdict was judged

  def judge(self, env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
    raise NotImplementedError

  @property
  def verdict(self) -> dict[str, torch.Tensor]:
    step = self.env.common_step_counter
    if self._verdict is None or step != self._step or None in self._stale:
      self._verdict, self._step = self.judge(self.env), step
    elif self._stale:
      import torch

      rows = torch.cat([torch.as_tensor(r).reshape(-1) for r in self._stale])
      rows = rows.to(self.env.device)
      fresh, merged = self.judge(self.env), {}
      for key, value in fresh.items():
        merged[key] = self._verdict[key].clone()  # readers may hold the old
        merged[key][rows] = value[rows]
      self._verdict = merged
    self._stale.clear()
    return self._verdict

  def state_changed(self, env_ids: torch.Tensor | slice | None = None) -> None:
    if env_ids is None or isinstance(env_ids, slice):
      self._stale.append(None)
    else:
      self._stale.append(env_ids)


def verdict_term(env: ManagerBasedRlEnv) -> VerdictTerm:
  """The environment's verdict term (exactly one per task)."""
  term = _TERMS.get(env)
  if term is None:
    # Read before the metrics manager exists (mjlab sizes observation terms
    # by calling them while it builds the managers): the term, built early.
    cfgs = [
      c
      for c in env.cfg.metrics.values()
      if isinstance(c.func, type) and issubclass(c.func, VerdictTerm)
    ]
    if len(cfgs) != 1:
      raise LookupError("a task registers exactly one verdict term (a metric)")
    term = cfgs[0].func(cfgs[0], env)
  return term


def task_verdict(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
  """The task's verdict of the environment's current state."""
  return verdict_term(env).verdict


def invalidate_verdict(env: ManagerBasedRlEnv, env_ids=None) -> None:
  """Tell the verdict that the state of ``env_ids`` (None: all) was written
  outside a step or reset (a state restore): the next read judges it anew."""
  term = _TERMS.get(env)
  if term is not None:
    term.state_changed(env_ids)
