"""A trained policy acting in an environment the way an expert does.

``CheckpointPolicy`` loads an rsl_rl checkpoint written by mjlab's ``train``
(or ``scripts/train.py``), as mjlab's ``play`` does, and offers the experts'
interface (``act``, ``reset``, ``close``), so the evaluation tools score a
policy with the same evaluator, report and videos as an expert.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
  from mjlab.envs import ManagerBasedRlEnv


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
    from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_rl_cfg, load_runner_cls

    agent_cfg = load_rl_cfg(task_id)
    self.clip = agent_cfg.clip_actions
    self._wrapper = RslRlVecEnvWrapper(env, clip_actions=self.clip)
    runner_cls = load_runner_cls(task_id) or MjlabOnPolicyRunner
    runner = runner_cls(self._wrapper, asdict(agent_cfg), device=device)
    try:
      runner.load(
        str(checkpoint), load_cfg={"actor": True}, strict=True, map_location=device
      )
    except Exception as err:  # noqa: BLE001 - pickle, torch and shape errors alike
      first = str(err).strip().splitlines()[0] if str(err).strip() else ""
      raise ValueError(
        f"{checkpoint} is not a readable {task_id} policy checkpoint "
        f"({type(err).__name__}: {first})"
      ) from err
    self._policy = runner.get_inference_policy(device=device)
    self.checkpoint = Path(checkpoint)

  def act(self) -> torch.Tensor:
    """Actions [num_envs, action_dim] for the current observations."""
    with torch.inference_mode():
      actions = self._policy(self._wrapper.get_observations())
    if self.clip is not None:
      actions = actions.clamp(-self.clip, self.clip)
    return actions.clone()

  def reset(self, env_ids: torch.Tensor | None = None) -> None:
    """The policy is a feed-forward network: nothing to reset."""
    del env_ids

  def close(self) -> None:
    """Nothing to release (the environment is closed by its owner)."""
