"""RL from demonstrations: pretrain_actor.py clones the PPO actor, mjlab's
training resumes from it, CriticWarmupPpo trains the critic alone first.

CubeTray-UR5-RG2 on the C engine. The cloned actor is checked against
independent computations: its normalizer against NumPy statistics of the
file's terms concatenated in the order the environment's observation
manager gives them, its fit against a least-squares reference on a file
whose actions are a known function of the observations.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from script_runner import load_tool, run_script

from mjlab_tasks.policies import demo_start

collect_demos = load_tool("collect_demos.py")
pretrain_actor = load_tool("pretrain_actor.py")
cli_args = pretrain_actor  # parse() comes with the tool's imports
TASK = "CubeTray-UR5-RG2"
CPU = ["--engine", "mujoco", "--device", "cpu"]
WARMUP = "mjlab_tasks.policies.demo_start:CriticWarmupPpo"
TEACHER = Path(__file__).parents[1] / "policies" / "cube_tray_bc" / "policy.pt"


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
  """Two 20-step expert episodes."""
  path = tmp_path_factory.mktemp("demo_start") / "demos.hdf5"
  argv = ["--task", TASK, "--num-envs", "2", "--episodes", "2", "--max-steps", "20"]
  argv += ["--output", str(path), *CPU]
  assert collect_demos.main(pretrain_actor.parse(collect_demos.Args, argv)) == 0
  return path


@pytest.fixture(scope="module")
def runner():
  return demo_start.build_runner(TASK)


def actor_order(runner) -> list[str]:
  env = runner.env.unwrapped
  return list(env.observation_manager.active_terms["actor"])


def file_obs(path: Path, terms: list[str], mask: str = "train") -> np.ndarray:
  with h5py.File(path) as f:
    rows = []
    for name in f["mask"][mask]:
      demo = f["data"][name.decode()]
      steps = int(demo.attrs["num_samples"])
      rows.append(
        np.concatenate([demo["obs"][t][()].reshape(steps, -1) for t in terms], 1)
      )
  return np.concatenate(rows).astype(np.float64)


def test_the_cloned_actor_reads_the_environments_observation(demos, runner, tmp_path):
  """Normalizer statistics from NumPy on the file's terms in the observation
  manager's order; the checkpoint loads strictly into the registered
  configuration, at iteration 0, with the asked exploration noise."""
  output = tmp_path / "start"
  argv = [str(demos), "--output", str(output), "--epochs", "3", "--init-std"]
  argv += ["0.3", "0.3", "0.3", "0.3", "0.3", "0.3", "0.5"]  # arm, gripper
  assert pretrain_actor.main(pretrain_actor.parse(pretrain_actor.Args, argv)) == 0
  assert sorted(p.name for p in output.iterdir()) == [
    "loss.png",
    "model_0.pt",
    "summary.json",
  ]
  obs = file_obs(demos, actor_order(runner))
  ckpt = torch.load(output / "model_0.pt", weights_only=False)
  assert ckpt["iter"] == 0
  actor = ckpt["actor_state_dict"]
  np.testing.assert_allclose(actor["obs_normalizer._mean"][0], obs.mean(0), atol=1e-5)
  np.testing.assert_allclose(
    actor["obs_normalizer._var"][0], obs.var(0), rtol=1e-4, atol=1e-6
  )
  assert int(actor["obs_normalizer.count"]) == len(obs)
  std = torch.tensor([0.3] * 6 + [0.5])
  torch.testing.assert_close(actor["distribution.std_param"], std)
  fresh = demo_start.build_runner(TASK)
  fresh.load(str(output / "model_0.pt"))  # strict: the registered shapes
  summary = json.loads((output / "summary.json").read_text())
  assert summary["task"] == TASK and summary["train_samples"] == len(obs)


def test_cloning_fits_a_known_function(demos, runner, tmp_path, rng):
  """Actions replaced by a fixed linear map of the observations: the fitted
  actor comes near the least-squares fit (an independent reference)."""
  relabelled = tmp_path / "linear.hdf5"
  shutil.copy(demos, relabelled)
  terms = actor_order(runner)
  obs = file_obs(demos, terms)
  scale = obs.std(0) + 1e-2
  weights = rng.normal(0, 0.3, (obs.shape[1], 7)) / scale[:, None]
  with h5py.File(relabelled, "r+") as f:
    for name in f["mask"]["train"]:
      demo = f["data"][name.decode()]
      x = file_obs_one(demo, terms)
      demo["actions"][...] = np.tanh((x - obs.mean(0)) @ weights)
  data = demo_start.demo_data(relabelled, terms)
  actor = demo_start.build_runner(TASK).alg.get_policy()
  history = demo_start.pretrain_actor(actor, data, 150, 32, 3e-3, 0)
  target = data["train_actions"]
  spread = float(((target - target.mean(0)) ** 2).mean())
  assert history["train"][-1] < 0.1 * spread
  assert history["train"][-1] < history["train"][0]


def file_obs_one(demo, terms: list[str]) -> np.ndarray:
  steps = int(demo.attrs["num_samples"])
  return np.concatenate([demo["obs"][t][()].reshape(steps, -1) for t in terms], 1)


def test_warmup_trains_the_critic_alone_first(runner):
  """For WARMUP_UPDATES updates the actor's parameters stay as they were
  and the critic's move; the next update moves the actor."""
  import dataclasses

  from mjlab.rl import MjlabOnPolicyRunner
  from mjlab.tasks.registry import load_rl_cfg

  agent = dataclasses.asdict(load_rl_cfg(TASK))
  agent["algorithm"]["class_name"] = WARMUP
  agent["num_steps_per_env"] = 8
  warm = MjlabOnPolicyRunner(runner.env, agent, log_dir=None, device="cpu")
  assert isinstance(warm.alg, demo_start.CriticWarmupPpo)

  def params(model):
    return [p.detach().clone() for p in model.parameters()]

  actor, critic = params(warm.alg.actor), params(warm.alg.critic)
  norm = warm.alg.actor.obs_normalizer
  stats = {k: v.clone() for k, v in norm.state_dict().items()}
  warm.learn(num_learning_iterations=2)
  # The normalizer keeps the statistics it started with (here: fresh ones).
  for key, value in norm.state_dict().items():
    assert torch.equal(value, stats[key]), key
  assert all(
    torch.equal(a, b) for a, b in zip(actor, params(warm.alg.actor), strict=True)
  )
  assert not all(
    torch.equal(a, b) for a, b in zip(critic, params(warm.alg.critic), strict=True)
  )
  warm.alg.updates_done = demo_start.WARMUP_UPDATES
  warm.learn(num_learning_iterations=1)
  assert not all(
    torch.equal(a, b) for a, b in zip(actor, params(warm.alg.actor), strict=True)
  )


def test_mjlab_training_resumes_from_the_cloned_actor(demos, tmp_path):
  """The documented commands in separate processes: clone (with the shipped
  teacher), then two PPO iterations resumed from model_0.pt with the
  warm-up algorithm."""
  start = tmp_path / "logs" / "cube_tray_ur5_rg2" / "bc_start"
  done = run_script(
    "pretrain_actor.py", str(demos), "--output", str(start), "--epochs", "2",
    "--teacher", str(TEACHER),
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-2000:]
  argv = ["--engine", "mujoco", "--env.scene.num-envs", "2"]
  argv += ["--agent.num-steps-per-env", "8", "--agent.max-iterations", "2"]
  argv += ["--agent.resume", "True", "--agent.load-run", "bc_start"]
  argv += [
    "--agent.load-checkpoint",
    "model_0.pt",
    "--agent.algorithm.class-name",
    WARMUP,
  ]
  argv += ["--log-root", str(tmp_path / "logs")]
  done = run_script("train.py", TASK, *argv)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Loading model checkpoint from" in done.stdout
  runs = [
    p
    for p in (tmp_path / "logs" / "cube_tray_ur5_rg2").iterdir()
    if p.name != "bc_start"
  ]
  assert len(runs) == 1 and (runs[0] / "model_1.pt").exists()


def test_refusals(demos, tmp_path, capsys):
  for argv, message in (
    (["--init-std", "0"], "--init-std takes positive numbers"),
    (
      ["--init-std", "0.1", "0.2"],
      "--init-std: one value or 7 (one per action), got 2",
    ),
    (["--epochs", "0"], "--epochs must be at least 1"),
    (["--teacher", str(demos)], "is not a state behaviour-cloning policy"),
    (["--imitation-floor", "2"], "--imitation-floor takes a fraction in [0, 1]"),
  ):
    capsys.readouterr()
    with pytest.raises(SystemExit):
      pretrain_actor.main(
        pretrain_actor.parse(
          pretrain_actor.Args, [str(demos), "--output", str(tmp_path / "x"), *argv]
        )
      )
    assert message in capsys.readouterr().err


def test_cloning_steps_pull_the_actor_toward_the_demonstrations(demos, runner):
  """After the warm-up, each update is followed by behaviour-cloning steps
  on the start checkpoint's demonstrations: their action error falls."""
  import dataclasses

  from mjlab.rl import MjlabOnPolicyRunner
  from mjlab.tasks.registry import load_rl_cfg

  agent = dataclasses.asdict(load_rl_cfg(TASK))
  agent["algorithm"]["class_name"] = WARMUP
  ppo = MjlabOnPolicyRunner(runner.env, agent, log_dir=None, device="cpu").alg
  ppo.load_demos(demos)
  obs, actions = ppo.demos
  assert obs.shape == (len(file_obs(demos, actor_order(runner))), ppo.actor.obs_dim)
  before = demo_start.action_mse(ppo.actor, obs, actions)
  ppo.updates_done = demo_start.WARMUP_UPDATES
  for _ in range(5):
    ppo.clone_steps(*ppo.demos)
  assert demo_start.action_mse(ppo.actor, obs, actions) < 0.5 * before


@pytest.mark.parametrize("floor", [0.0, 0.05])
def test_the_imitation_rate_decays_to_the_start_checkpoints_floor(
  demos, runner, tmp_path, floor
):
  """A start saved with ``imitation_floor`` (pretrain_actor.py
  --imitation-floor) is loaded with it; the cloning steps' learning rate is
  BC_LR x max(BC_DECAY ** k, floor), k updates after the warm-up."""
  import dataclasses

  from mjlab.rl import MjlabOnPolicyRunner
  from mjlab.tasks.registry import load_rl_cfg

  def warmup_runner():
    agent = dataclasses.asdict(load_rl_cfg(TASK))  # the runner consumes it
    agent["algorithm"]["class_name"] = WARMUP
    return MjlabOnPolicyRunner(runner.env, agent, log_dir=None, device="cpu")

  start = warmup_runner()
  demo_start.save_start(
    start, tmp_path / "model_0.pt", demos, {"imitation_floor": floor}
  )
  resumed = warmup_runner()
  resumed.load(str(tmp_path / "model_0.pt"))
  ppo = resumed.alg
  assert ppo.imitation_floor == floor
  for k in (0, 100, 1000):
    ppo.updates_done = demo_start.WARMUP_UPDATES + k
    ppo.clone_steps(*ppo.demos)
    lr = ppo.bc_optimizer.param_groups[0]["lr"]
    expected = 3e-4 * max(0.995**k, floor)
    assert lr == pytest.approx(expected, rel=1e-9), (k, lr)


def ensembled_by_hand(chunks: np.ndarray, restart: int) -> np.ndarray:
  """ACT's temporal ensembling, one environment and step at a time: the
  action at step t is the mean of chunk[s][t - s] over the chunks s that
  cover t since the episode began (every environment's new episode begins
  at step ``restart``), weighted exp(-m * i), i = 0 for the oldest."""
  from mjlab_tasks.policies.bc_policy import BC_ENSEMBLE_DECAY

  steps, envs, k, dim = chunks.shape
  out = np.zeros((steps, envs, dim))
  for e in range(envs):
    for t in range(steps):
      start = restart if t >= restart else 0
      covering = range(max(t - k + 1, start), t + 1)  # oldest first
      w = np.exp(-BC_ENSEMBLE_DECAY * np.arange(len(covering)))
      pred = np.array([chunks[s, e, t - s] for s in covering])
      out[t, e] = (w[:, None] * pred).sum(0) / w.sum()
  return out


def test_the_teacher_labels_each_rollout_state_as_it_would_act(runner):
  """With a teacher (the shipped behaviour-cloning policy), every rollout
  step's label is its temporally ensembled action on the stored
  observations, computed here by hand, restarting where an episode ends;
  after the warm-up an update imitates the labels and consumes them."""
  import dataclasses

  from mjlab.rl import MjlabOnPolicyRunner
  from mjlab.tasks.registry import load_rl_cfg

  agent = dataclasses.asdict(load_rl_cfg(TASK))
  agent["algorithm"]["class_name"] = WARMUP
  agent["num_steps_per_env"] = 12
  run = MjlabOnPolicyRunner(runner.env, agent, log_dir=None, device="cpu")
  ppo = run.alg
  infos = demo_start.teacher_infos(runner.env.unwrapped, TASK, TEACHER)
  ppo.load_teacher(Path(infos["teacher"]), infos["teacher_columns"])
  env = run.env
  obs = env.get_observations().to("cpu")
  for t in range(12):
    actions = ppo.act(obs)
    obs, rewards, dones, extras = env.step(actions)
    if t == 4:  # an episode ends after step 4: the teacher starts afresh
      dones = torch.ones_like(dones)
    ppo.process_env_step(obs, rewards, dones, extras)
  stored = ppo.actor_input(ppo.storage.observations)  # [12, envs, D]
  model, columns = ppo.teacher
  with torch.no_grad():
    chunks = model(stored.flatten(0, 1)[:, columns]).unflatten(0, stored.shape[:2])
  expected = np.clip(ensembled_by_hand(chunks.double().numpy(), 5), -1, 1)
  labels = torch.stack(ppo.labels).double().numpy()
  np.testing.assert_allclose(labels, expected, atol=1e-5)
  # Not the first action of each chunk alone (what ensembling changes).
  assert not np.allclose(labels[5:], chunks[5:, :, 0].clamp(-1, 1).numpy(), atol=1e-3)
  ppo.updates_done = demo_start.WARMUP_UPDATES
  losses = ppo.update()
  assert "kickstart" in losses and ppo.labels == []
