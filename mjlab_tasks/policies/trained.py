"""Policies trained with rsl_rl for a registered task: its checkpoints
(``model_N.pt``, ``CheckpointPolicy``) and their ONNX export
(``export_onnx_policy``, run by ``OnnxPolicy``)."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv
  from mjlab.rl import MjlabOnPolicyRunner

ONNX_INSTALL = "pip install 'manipulation-suite[onnx]'"


def onnx_runtime_missing() -> str | None:
  """Why ONNX policies cannot run here (None: they can)."""
  if importlib.util.find_spec("onnxruntime") is None:
    return f"ONNX policies need onnxruntime: {ONNX_INSTALL}"
  return None


def _load_runner(
  env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, device: str
) -> MjlabOnPolicyRunner:
  """The task's runner holding the checkpoint's actor, as mjlab's play builds it."""
  from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
  from mjlab.tasks.registry import load_rl_cfg, load_runner_cls

  import mjlab_tasks.tasks  # noqa: F401 - the registry

  agent_cfg = load_rl_cfg(task_id)
  wrapper = RslRlVecEnvWrapper(env, clip_actions=agent_cfg.clip_actions)
  runner_cls = load_runner_cls(task_id) or MjlabOnPolicyRunner
  runner = runner_cls(wrapper, asdict(agent_cfg), device=device)
  try:
    runner.load(
      str(checkpoint), load_cfg={"actor": True}, strict=True, map_location=device
    )
  except Exception as err:  # noqa: BLE001 - pickle, torch and shape errors alike
    raise ValueError(
      f"{checkpoint} is not a readable {task_id} policy checkpoint "
      f"({type(err).__name__}: {_first_line(err)})"
    ) from err
  return runner


def _first_line(err: Exception) -> str:
  """The error's first line; with torch's "Error(s) in loading state_dict
  for X:" header, its first detail (e.g. which size does not match)."""
  lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
  if len(lines) > 1 and lines[0].endswith(":"):
    return f"{lines[0]} {lines[1]}"
  return lines[0] if lines else ""


def export_onnx_policy(
  env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, output: Path, device: str
) -> Path:
  """Write the checkpoint's policy as ONNX with mjlab's runner export (the
  observation normalizer and the deterministic action inside)."""
  runner = _load_runner(env, task_id, checkpoint, device)
  output = Path(output)
  runner.export_policy_to_onnx(str(output.parent), output.name)
  return output


class CheckpointPolicy:
  """An rsl_rl policy checkpoint (``model_N.pt``) for a registered task.

  Args:
    env: The task's environment, built with the policy's action space
      (Cartesian actions) and observations.
    task_id: The registered task whose runner configuration wrote the
      checkpoint (network sizes, action clipping).
    checkpoint: Path of the checkpoint.
    device: Where the policy runs (the environment's device).

  Raises:
    ValueError: the checkpoint does not fit the task's networks.
  """

  def __init__(
    self, env: ManagerBasedRlEnv, task_id: str, checkpoint: Path, device: str
  ):
    runner = _load_runner(env, task_id, checkpoint, device)
    self._wrapper = runner.env
    self.clip = self._wrapper.clip_actions
    self._policy = runner.get_inference_policy(device=device)
    self.checkpoint = Path(checkpoint)
    self.description = f"policy checkpoint {checkpoint}"

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    with torch.inference_mode():
      actions = self._policy(self._wrapper.get_observations())
    return _clipped(actions, self.clip).clone()

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """The policy is a feed-forward network: nothing to reset."""
    del env_ids

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""


class OnnxPolicy:
  """An ONNX policy exported from one of a registered task's checkpoints.

  Args:
    env: The task's environment (as for ``CheckpointPolicy``).
    task_id: The registered task (its actor observation groups, clipping).
    path: The ``.onnx`` file.

  Raises:
    ValueError: unreadable, or its input or output size does not fit the
      task's observations and actions.
    ImportError: onnxruntime is not installed.
  """

  def __init__(self, env: ManagerBasedRlEnv, task_id: str, path: Path):
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_rl_cfg

    import mjlab_tasks.tasks  # noqa: F401 - the registry

    missing = onnx_runtime_missing()
    if missing is not None:
      raise ImportError(missing)
    import onnxruntime

    agent_cfg = load_rl_cfg(task_id)
    self.clip = agent_cfg.clip_actions
    self._groups = agent_cfg.obs_groups["actor"]
    self._wrapper = RslRlVecEnvWrapper(env, clip_actions=self.clip)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # Errors only.
    try:
      self._session = onnxruntime.InferenceSession(
        str(path), options, providers=["CPUExecutionProvider"]
      )
    except Exception as err:  # noqa: BLE001 - onnxruntime's own error types
      raise ValueError(
        f"{path} is not a readable ONNX policy ({type(err).__name__}: "
        f"{_first_line(err)})"
      ) from err
    self._input = self._session.get_inputs()[0]
    self._check_sizes(env, task_id, path)
    self.checkpoint = Path(path)
    self.description = f"ONNX policy {path}"

  def _check_sizes(self, env: ManagerBasedRlEnv, task_id: str, path: Path) -> None:
    obs_dim = self._observations().shape[1]
    in_dim = self._input.shape[-1]
    out_dim = self._session.get_outputs()[0].shape[-1]
    act_dim = env.action_manager.total_action_dim
    if (in_dim, out_dim) != (obs_dim, act_dim):
      raise ValueError(
        f"{path} is not a {task_id} policy: it maps {in_dim} observations to "
        f"{out_dim} actions, the task has {obs_dim} and {act_dim}"
      )

  def _observations(self) -> np.ndarray:
    obs = self._wrapper.get_observations()
    flat = torch.cat([obs[g] for g in self._groups], dim=-1)
    return flat.detach().cpu().numpy().astype(np.float32)

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    obs = self._observations()
    # mjlab exports a fixed batch of one (no dynamic axes): one row per run.
    rows = obs[:, None] if self._input.shape[0] == 1 else obs[None]
    actions = np.concatenate(
      [self._session.run(None, {self._input.name: r})[0] for r in rows]
    )
    tensor = torch.from_numpy(actions).to(self._wrapper.device)
    return _clipped(tensor, self.clip)

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """The policy is a feed-forward network: nothing to reset."""
    del env_ids

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""


def _clipped(actions: torch.Tensor, clip: float | None) -> torch.Tensor:
  return actions if clip is None else actions.clamp(-clip, clip)
