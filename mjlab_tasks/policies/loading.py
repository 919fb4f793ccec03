"""Which policy a file holds: ``load_policy`` dispatches on the file's suffix
and, for ``.pt``, its content (a behaviour-cloning checkpoint or an rsl_rl
one)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mjlab_tasks.policies.bc_policy import BcPolicy, bc_checkpoint
from mjlab_tasks.policies.trained import (
  CheckpointPolicy,
  OnnxPolicy,
  onnx_runtime_missing,
)

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv

POLICY_SUFFIXES = (".pt", ".onnx")


def policy_file_problem(path: Path) -> str | None:
  """What is wrong with ``path`` as a policy file (None: nothing seen yet)."""
  if not path.is_file():
    return f"{path}: no such file" if not path.exists() else f"{path} is not a file"
  if path.suffix not in POLICY_SUFFIXES:
    return (
      f"{path.name}: a policy is an rsl_rl checkpoint (.pt) or an exported "
      "ONNX policy (.onnx)"
    )
  if path.suffix == ".onnx":
    return onnx_runtime_missing()
  return None


def load_policy(env: ManagerBasedRlEnv, task_id: str, path: Path, device: str):
  """The policy in ``path`` (.pt rsl_rl or behaviour-cloning checkpoint, or
  .onnx export) acting in ``env``.

  Raises:
    ValueError: not a readable policy file, or not one of ``task_id``'s
      policies (its networks or its observation size do not fit).
  """
  path = Path(path)
  problem = policy_file_problem(path)
  if problem is not None:
    raise ValueError(problem)
  if path.suffix == ".onnx":
    return OnnxPolicy(env, task_id, path)
  bc = bc_checkpoint(path)
  if bc is not None:
    return BcPolicy(env, task_id, path, bc, device)
  return CheckpointPolicy(env, task_id, path, device)
