"""RL from demonstrations: mjlab's PPO started from a behaviour-cloned actor.

``pretrain_actor`` fits the task's own rsl_rl actor (the registered
architecture, its observation normalizer, every actor term in the
environment's order) to a demonstration file's actions, and ``save_start``
writes an rsl_rl checkpoint that ``scripts/train.py --agent.resume`` starts
from. ``CriticWarmupPpo`` (``--agent.algorithm.class-name
mjlab_tasks.policies.demo_start:CriticWarmupPpo``) keeps the actor fixed for
its first ``WARMUP_UPDATES`` updates while the fresh critic learns what the
cloned actor's states are worth: advantages from an untrained critic are
noise, and PPO would follow that noise away from the demonstrations first.
After the warm-up it keeps the actor near the expert with imitation steps
after every PPO update: on the demonstrations (DAPG's decaying imitation
term) or, when the start names a teacher (``pretrain_actor.py --teacher``),
on the rollout's own states labelled by that behaviour-cloning policy
(kickstarting; DAgger's labels on the learner's states).
``scripts/pretrain_actor.py`` is the command line; docs/demonstrations.md
the measurements.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from rsl_rl.algorithms import PPO

from mjlab_tasks.policies.bc_training import fit

WARMUP_UPDATES = 20
"""PPO updates (iterations) during which ``CriticWarmupPpo`` trains the critic only."""
BC_LR, BC_DECAY, BC_BATCH = 3e-4, 0.995, 512
"""After every PPO update, ``CriticWarmupPpo`` takes as many behaviour-cloning
steps on the start checkpoint's demonstrations as PPO took (epochs x
mini-batches), with Adam at ``BC_LR`` x ``BC_DECAY`` ** (updates since the
warm-up) on batches of ``BC_BATCH``: the actor is held near the expert on
the expert's states while PPO improves it on its own (as DAPG's decaying
imitation term). The decay stops at the start checkpoint's
``imitation_floor`` x ``BC_LR`` (``pretrain_actor.py --imitation-floor``;
0 without one)."""


class CriticWarmupPpo(PPO):
  """rsl_rl's PPO for an actor cloned by ``pretrain_actor``: the actor (mean
  and standard deviation) frozen for the first ``WARMUP_UPDATES`` updates of
  this process, and its observation normalizer kept at the demonstrations'
  statistics throughout (the cloned weights read the observations through
  them; rollouts of a failing actor would shift them and change what it
  does before PPO has updated anything)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.updates_done = 0
    self.demos = None  # (observations, actions) from the start checkpoint
    self.teacher = None  # (BcMlp, the actor observation's columns it reads)
    self.configured_lr = self.learning_rate
    self.imitation_floor = 0.0
    if self.actor.obs_normalization:
      self.actor.obs_normalizer.until = 0  # EmpiricalNormalization: no updates

  def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
    """As PPO's, but the learning rate stays the configured one
    (``--agent.algorithm.learning-rate``), not the start checkpoint's."""
    out = super().load(loaded_dict, load_cfg, strict)
    self.learning_rate = self.configured_lr
    for group in self.optimizer.param_groups:
      group["lr"] = self.configured_lr
    infos = loaded_dict.get("infos") or {}
    self.imitation_floor = float(infos.get("imitation_floor", 0.0))
    if infos.get("teacher") is not None:
      self.load_teacher(Path(infos["teacher"]), infos["teacher_columns"])
    elif infos.get("demos") is not None:
      self.load_demos(Path(infos["demos"]))
    return out

  def load_demos(self, path: Path) -> None:
    """The demonstrations the start checkpoint was cloned from (every actor
    term, the expert's actions) for the behaviour-cloning steps."""
    from mjlab_tasks.demos import validate_file
    from mjlab_tasks.policies.bc_training import actor_terms

    data = demo_data(path, actor_terms(validate_file(path)))
    self.demos = tuple(
      torch.from_numpy(data[k]).to(self.device) for k in ("train_obs", "train_actions")
    )
    self.bc_optimizer = torch.optim.Adam(self._raw_actor.mlp.parameters(), lr=BC_LR)

  def load_teacher(self, path: Path, columns: list[int]) -> None:
    """A state behaviour-cloning policy (``train_bc.py``'s ``policy.pt``)
    that labels every rollout state with the action it would take there,
    reading the actor observation's ``columns``."""
    from mjlab_tasks.policies.bc_networks import BcMlp
    from mjlab_tasks.policies.bc_policy import ChunkEnsemble

    model = BcMlp.from_checkpoint(state_policy(path)).to(self.device).eval()
    self.teacher = (model, torch.tensor(columns, device=self.device))
    n, dim = self.storage.num_envs, self.storage.actions.shape[-1]
    self.ensemble = ChunkEnsemble(n, model.chunk, dim, self.device)
    self.labels = []
    self.bc_optimizer = torch.optim.Adam(self._raw_actor.mlp.parameters(), lr=BC_LR)

  def act(self, obs):
    """PPO's action; with a teacher, also the teacher's for the same state
    (its chunks ensembled along the rollout as ``BcPolicy`` executes them:
    the first action of each chunk alone scored 6 of 64 where the ensemble
    scored 63)."""
    actions = super().act(obs)
    if self.teacher is not None:
      model, columns = self.teacher
      with torch.no_grad():
        chunk = model(self.actor_input(obs)[:, columns])
      self.labels.append(self.ensemble.step(chunk).clamp(-1.0, 1.0))
    return actions

  def process_env_step(self, obs, rewards, dones, extras) -> None:
    super().process_env_step(obs, rewards, dones, extras)
    if self.teacher is not None:
      self.ensemble.reset(dones.nonzero().flatten())

  def actor_input(self, obs) -> torch.Tensor:
    """The actor's observation groups, concatenated as its network reads them."""
    return torch.cat([obs[g] for g in self._raw_actor.obs_groups], dim=-1)

  def clone_steps(self, obs: torch.Tensor, actions: torch.Tensor) -> float:
    """Behaviour-cloning steps after a PPO update; the mean loss."""
    k = self.updates_done - WARMUP_UPDATES
    for group in self.bc_optimizer.param_groups:
      group["lr"] = BC_LR * max(BC_DECAY**k, self.imitation_floor)
    actor, total = self._raw_actor, 0.0
    steps = self.num_learning_epochs * self.num_mini_batches
    for _ in range(steps):
      idx = torch.randint(0, len(obs), (BC_BATCH,), device=self.device)
      loss = torch.nn.functional.mse_loss(
        actor.mlp(actor.obs_normalizer(obs[idx])), actions[idx]
      )
      self.bc_optimizer.zero_grad(set_to_none=True)
      loss.backward()
      self.bc_optimizer.step()
      total += float(loss.detach())
    return total / steps

  def update(self) -> dict[str, float]:
    warm = self.updates_done < WARMUP_UPDATES
    taught = None
    if self.teacher is not None:
      if not warm:
        obs = self.actor_input(self.storage.observations).flatten(0, 1)
        taught = (obs, torch.stack(self.labels).flatten(0, 1))
      self.labels = []
    if warm:
      self._raw_actor.requires_grad_(False)  # no gradient: Adam skips it
    try:
      losses = super().update()
    finally:
      if warm:
        self._raw_actor.requires_grad_(True)
    if taught is not None:
      losses["kickstart"] = self.clone_steps(*taught)
    elif self.demos is not None and not warm:
      losses["behaviour_cloning"] = self.clone_steps(*self.demos)
    self.updates_done += 1
    return losses


def build_runner(task_id: str, device: str = "cpu"):
  """mjlab's runner of the task's registered PPO configuration on a
  one-environment C engine world (the models' shapes come from its
  observations; nothing is logged)."""
  from mjlab.rl import MjlabOnPolicyRunner, RslRlVecEnvWrapper
  from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

  import mjlab_tasks.tasks  # noqa: F401 - registers the suite's tasks
  from mjlab_tasks.engine import make_env

  env_cfg = load_env_cfg(task_id)
  env_cfg.scene.num_envs = 1
  env = RslRlVecEnvWrapper(make_env(env_cfg, device=device))
  agent = asdict(load_rl_cfg(task_id))
  agent["logger"] = "tensorboard"
  return MjlabOnPolicyRunner(env, agent, log_dir=None, device=device)


def demo_data(path: Path, terms: list[str]) -> dict[str, np.ndarray | int]:
  """Every actor term of the file's training and validation demonstrations,
  concatenated in the environment's order (``terms``), and the actions to
  imitate: {train_obs, train_actions, valid_obs, valid_actions, train_demos}."""
  from mjlab_tasks.policies.bc_training import read_split

  out = {}
  for split in ("train", "valid"):
    obs, actions, demos = read_split(path, split, terms, 1)
    out[f"{split}_obs"] = obs
    out[f"{split}_actions"] = None if actions is None else actions[:, 0]
    out[f"{split}_demos"] = demos
  return out


def set_normalizer(actor, obs: np.ndarray) -> None:
  """The actor's empirical normalizer holds the demonstrations' statistics,
  counted as that many samples (PPO's rollouts then move it slowly)."""
  norm = actor.obs_normalizer
  x = torch.from_numpy(obs).to(norm._mean.device)
  mean, var = x.mean(0, keepdim=True), x.var(0, unbiased=False, keepdim=True)
  norm._mean.copy_(mean)
  norm._var.copy_(var)
  norm._std.copy_(torch.sqrt(var + norm.eps))
  norm.count.fill_(len(obs))


def action_mse(actor, obs: torch.Tensor, actions: torch.Tensor) -> float:
  with torch.no_grad():
    return float(((actor.mlp(actor.obs_normalizer(obs)) - actions) ** 2).mean())


def pretrain_actor(
  actor,
  data: dict,
  epochs: int,
  batch_size: int,
  lr: float,
  seed: int,
  progress=None,
) -> dict[str, list[float]]:
  """Fit the actor's mean (its MLP after its normalizer) to the actions by
  mean squared error; returns the per-epoch train and valid losses."""
  torch.manual_seed(seed)
  set_normalizer(actor, data["train_obs"])
  actor.obs_normalizer.eval()  # fixed statistics while cloning
  obs = torch.from_numpy(data["train_obs"])
  actions = torch.from_numpy(data["train_actions"])
  valid = None
  if data["valid_obs"] is not None:
    valid = (
      torch.from_numpy(data["valid_obs"]),
      torch.from_numpy(data["valid_actions"]),
    )
  recipe = SimpleNamespace(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)

  def batch_loss(idx, _):
    return torch.nn.functional.mse_loss(
      actor.mlp(actor.obs_normalizer(obs[idx])), actions[idx]
    )

  history = fit(
    recipe, actor.mlp, len(obs), batch_loss,
    (lambda: action_mse(actor, *valid)) if valid is not None else None,
    progress or (lambda epochs: epochs),
  )  # fmt: skip
  return history


def set_std(actor, std: tuple[float, ...]) -> None:
  """The exploration noise PPO starts from (the registered 1.0 would bury
  the cloned actions): one value for every action dimension, or one each;
  ValueError for another count."""
  dist = actor.distribution
  param = dist.std_param if hasattr(dist, "std_param") else dist.log_std_param
  if len(std) not in (1, param.numel()):
    raise ValueError(f"one value or {param.numel()} (one per action), got {len(std)}")
  values = torch.tensor(std, dtype=param.dtype).expand(param.shape)
  param.data.copy_(values if hasattr(dist, "std_param") else values.log())


def save_start(runner, path: Path, demos: Path, imitation: dict | None = None) -> None:
  """An rsl_rl checkpoint at iteration 0: the cloned actor, the fresh
  critic, an unused optimizer (what ``--agent.resume`` loads), and in its
  infos the demonstrations (``CriticWarmupPpo`` keeps cloning them), the
  teacher's ``teacher_infos``, if any (``CriticWarmupPpo`` then imitates it
  on the rollouts instead), and ``imitation_floor``, if given."""
  infos = {"demos": str(Path(demos).resolve()), **(imitation or {})}
  runner.current_learning_iteration = 0
  runner.save(str(path), infos=infos)


def state_policy(path: Path) -> dict:
  """The state behaviour-cloning checkpoint in ``path`` (a teacher);
  ValueError for anything else (an image policy, another file)."""
  from mjlab_tasks.policies.bc_policy import bc_checkpoint

  ckpt = bc_checkpoint(path)
  if ckpt is None or ckpt.get("image_keys"):
    raise ValueError(f"{path} is not a state behaviour-cloning policy (policy.pt)")
  return ckpt


def teacher_infos(env, task: str, teacher: Path) -> dict:
  """What a start checkpoint records of its teacher (``save_start``): its
  path and the columns of the actor observation it reads.

  Raises:
    ValueError: not a state behaviour-cloning policy of ``task``, or it reads
      terms the environment's actor observation lacks.
  """
  from mjlab_tasks.policies.bc_policy import bc_columns

  ckpt = state_policy(teacher)
  if ckpt["task"] != task:
    raise ValueError(f"{teacher} is a policy for {ckpt['task']}, not {task}")
  columns = bc_columns(env, teacher, ckpt).tolist()
  return {"teacher": str(teacher.resolve()), "teacher_columns": columns}
