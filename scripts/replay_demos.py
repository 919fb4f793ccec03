"""Replay a demonstration file: recorded actions from recorded initial states.

  python scripts/replay_demos.py demos/cube_tray.hdf5
  python scripts/replay_demos.py demos/cube_tray.hdf5 --engine warp --json replay.json
  python scripts/replay_demos.py demos/cube_tray.hdf5 --render-cameras wrist \
    --output demos/cube_tray_wrist.hdf5

Rebuilds the task from the file's env_args (same configuration and number of
environments), and for each episode resets its environment slot the way
collection did (the episode's seed), restores the recorded initial
simulator state (``states[0]``, the full MjData integration state), applies
the recorded actions one by one and compares, at every step, the simulator
state and the actor observations with the recorded ones, and at the end the
task evaluator's verdict (success, outcome, reason) and the episode length.

Prints one line per episode (largest state and observation divergence,
recorded and replayed outcome) and a summary. A file recorded on the C
engine and replayed on it must reproduce every episode exactly (bitwise
equal states, the same verdicts): the exit status is 1 otherwise. On MuJoCo
Warp the divergence is reported (exit 0). A file that breaks the layout
(missing datasets or attributes, actions not finite or outside [-1, 1], ...)
is refused with one line before anything is built.

With ``--render-cameras`` it replays nothing: it restores every recorded
state of every episode (in its recorded environment slot, the task rebuilt
with the cameras) and writes a copy of the file with the camera images of
those states added as ``obs/<term>``, as ``collect_demos.py --cameras``
records them; collection can stay state-only and cheap. On the C engine the
images equal those a collection with the cameras records when the batch's
other environments are in the same states as then (tested); otherwise they
differ slightly (the renderer's coupling between environments,
docs/demonstrations.md).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tyro
from cli_args import check_device, check_engine, check_file, check_new_file, fail, parse
from demo_format import DemoFileError, Episode, validate_file
from tqdm import tqdm


@dataclass
class Args:
  file: tyro.conf.Positional[Path]
  """The demo file (.hdf5) to replay."""
  engine: str | None = None
  """mujoco (C MuJoCo: exact) or warp (MuJoCo Warp: divergence reported).
  Default: the engine the file was recorded with."""
  device: str | None = None
  """cpu or cuda:N (default: cpu for the C engine, else cuda:0 when available)."""
  json: Path | None = None
  """Also write the per-episode results here (refused if it exists)."""
  render_cameras: str | None = None
  """Instead of replaying: render these cameras (comma-separated: wrist,
  scene) from the recorded states into a copy of the file (--output)."""
  output: Path | None = None
  """With --render-cameras: the new demo file (.hdf5); refused if it exists."""


@dataclass
class Result:
  demo: str
  seed: int
  env: int
  steps: int
  replayed_steps: int
  max_state_divergence: float
  max_obs_divergence: float
  max_reward_divergence: float
  dones_match: bool
  recorded: list
  replayed: list
  exact: bool = False

  @property
  def verdict_reproduced(self) -> bool:
    return self.recorded == self.replayed and self.steps == self.replayed_steps


def check_args(args: Args) -> tuple[str, str, dict]:
  """(device, engine, env_args); the whole file checked before anything is built."""
  check_file(args.file, "file")
  try:
    env_args = validate_file(args.file)
  except DemoFileError as err:
    fail(str(err))
  engine = args.engine if args.engine is not None else env_args.get("engine")
  if engine not in ("mujoco", "warp"):
    fail(f"--engine must be warp or mujoco, got {engine!r}.")
  device = check_device(args.device or ("cpu" if engine == "mujoco" else None))
  engine = check_engine(engine, device)
  if args.json is not None:
    check_new_file(args.json, "--json")
  if (args.render_cameras is None) != (args.output is None):
    fail("--render-cameras and --output go together.")
  if args.output is not None:
    if args.output.suffix not in (".hdf5", ".h5"):
      fail(f"--output {args.output}: the demo file must end in .hdf5 or .h5.")
    check_new_file(args.output, "--output")
    render_plan(args, env_args)
  return device, engine, env_args


def load_episodes(path: Path) -> list[tuple[str, Episode]]:
  from demo_format import iter_episodes, open_demos

  with open_demos(path) as f:
    return list(iter_episodes(f))


def compare(name: str, episode: Episode, finished, exact_expected: bool) -> Result:
  """One replayed episode against its recording."""
  rec = finished.recording.arrays()
  steps = min(len(rec["actions"]), episode.num_samples)

  def gap(a, b) -> float:
    if a.dtype == np.uint8:  # RGB images: exact integers, no float64 copy.
      diff = a[:steps].astype(np.int16) - b[:steps].astype(np.int16)
      return float(np.abs(diff).max(initial=0))
    return float(np.abs(np.asarray(a[:steps], np.float64) - b[:steps]).max(initial=0.0))

  verdict = finished.verdict
  result = Result(
    demo=name,
    seed=episode.seed,
    env=episode.env,
    steps=episode.num_samples,
    replayed_steps=len(rec["actions"]),
    max_state_divergence=gap(rec["states"], episode.states),
    max_obs_divergence=max(
      [gap(rec["obs"][k], episode.obs[k]) for k in episode.obs]
      + [gap(rec["next_obs"][k], v) for k, v in (episode.next_obs or {}).items()]
    ),
    max_reward_divergence=gap(rec["rewards"], episode.rewards),
    dones_match=bool(np.array_equal(rec["dones"], episode.dones)),
    recorded=[episode.success, episode.outcome, episode.reason],
    replayed=[verdict.success, verdict.outcome, verdict.reason],
  )
  result.exact = (
    result.verdict_reproduced
    and result.dones_match
    and result.max_state_divergence == 0.0
    and result.max_obs_divergence == 0.0
    and result.max_reward_divergence == 0.0
  )
  return result


def replay(env_args: dict, episodes, device: str, engine: str, bar) -> list[Result]:
  """Every episode, in waves per environment build (BinPick: per pour seed)."""
  import demo_rollouts as dr

  task = dr.task_from_env_args(env_args)
  num_envs = int(env_args["env_kwargs"]["num_envs"])
  exact_expected = engine == "mujoco" and env_args.get("engine") == "mujoco"
  groups: dict[int | None, list] = {}
  for name, episode in episodes:
    key = int(episode.attrs["pour_seed"]) if task.one_episode_per_build else None
    groups.setdefault(key, []).append((name, episode))
  results: list[Result] = []
  for pour_seed, group in groups.items():
    cfg_kwargs = {} if pour_seed is None else {"pour_seed": pour_seed}
    env, seeds = dr.build_env(task, num_envs, device, engine, **cfg_kwargs)
    try:
      results += replay_group(env, seeds, task, group, engine, exact_expected, bar)
    finally:
      env.close()
  order = {name: i for i, (name, _) in enumerate(episodes)}
  return sorted(results, key=lambda r: order[r.demo])


def replay_group(env, seeds, task, group, engine, exact_expected, bar) -> list[Result]:
  import demo_rollouts as dr
  import torch

  states = dr.state_io(env, engine)
  jobs = [dr.Job(ep.seed, env=ep.env, episode=(name, ep)) for name, ep in group]
  running: dict[int, Episode] = {}
  action_dim = group[0][1].actions.shape[1]
  results: list[Result] = []

  def on_reset(ids, started):
    restore = [(i, job) for i, job in zip(ids, started, strict=True) if job is not None]
    for i, job in restore:
      running[i] = job.episode[1]
    if restore:
      rows = [i for i, _ in restore]
      states.set(rows, np.stack([job.episode[1].states[0] for _, job in restore]))
      if dr.CAMERA in env.obs_buf:  # The restored state's pictures.
        env.sim.sense()
      # The observations of the restored state (as collection read them).
      env.obs_buf = env.observation_manager.compute(
        update_history=True, env_ids=torch.tensor(rows, device=env.device)
      )

  def act(slots):
    actions = np.zeros((env.num_envs, action_dim), dtype=np.float32)
    for i, rec in enumerate(slots):
      if rec is not None:
        actions[i] = running[i].actions[len(rec.actions)]
    return actions

  def all_played(slots):
    return np.array(
      [
        rec is not None and len(rec.actions) >= running[i].num_samples
        for i, rec in enumerate(slots)
      ]
    )

  def on_end(finished):
    name, episode = finished.job.episode
    results.append(compare(name, episode, finished, exact_expected))
    bar.update(1)

  dr.run_episodes(env, seeds, task, jobs, act, on_reset, on_end, states, all_played)
  return results


def print_results(results: list[Result], engine: str) -> None:
  print(
    f"\n{'demo':>9} {'seed':>6} {'env':>4} {'steps':>6} {'state div':>10} {'obs div':>9}  recorded -> replayed"
  )
  for r in results:
    steps = (
      f"{r.replayed_steps}"
      if r.replayed_steps == r.steps
      else f"{r.replayed_steps}/{r.steps}"
    )
    print(
      f"{r.demo:>9} {r.seed:>6} {r.env:>4} {steps:>6} {r.max_state_divergence:>10.3g} "
      f"{r.max_obs_divergence:>9.3g}  {r.recorded[1]}{'/' + r.recorded[2] if r.recorded[2] else ''}"
      f" -> {r.replayed[1]}{'/' + r.replayed[2] if r.replayed[2] else ''}"
      f"{'' if r.verdict_reproduced else '  DIFFERS'}"
    )


# Rendering camera images from recorded states.


def render_plan(args: Args, env_args: dict) -> tuple[tuple[str, ...], dict]:
  """(cameras, the new file's env_args); refused if the file has them."""
  from cli_args import check_cameras

  cameras = check_cameras(args.render_cameras, "--render-cameras")
  kwargs = env_args["env_kwargs"]
  if kwargs.get("cameras"):
    fail(
      f"{args.file} already has camera images ({', '.join(kwargs['cameras'])}): "
      "render from a state-only file."
    )
  new_args = {**env_args, "env_kwargs": {**kwargs, "cameras": list(cameras)}}
  return cameras, new_args


def render_file(args: Args, env_args: dict, device: str, engine: str) -> Path:
  """A copy of the file with the cameras' images of every recorded state."""
  import demo_rollouts as dr
  from demo_format import DATA, DemoWriter, demo_names, open_demos, write_obs

  _, new_args = render_plan(args, env_args)
  task = dr.task_from_env_args(new_args)
  num_envs = int(env_args["env_kwargs"]["num_envs"])
  with open_demos(args.file) as f, DemoWriter(args.output, new_args) as writer:
    source = f[DATA]
    names = demo_names(f)
    for name in names:  # Same names, same order; images added below.
      writer.add_copy(source[name])
    groups: dict[int | None, list[str]] = {}
    for name in names:  # BinPick: one environment build per pour.
      pour = source[name].attrs.get("pour_seed") if task.one_episode_per_build else None
      groups.setdefault(None if pour is None else int(pour), []).append(name)
    bar = tqdm(total=len(names), desc="render episodes", unit="ep")
    for pour_seed, group in groups.items():
      cfg_kwargs = {} if pour_seed is None else {"pour_seed": pour_seed}
      env, _ = dr.build_env(task, num_envs, device, engine, **cfg_kwargs)
      try:
        env.reset()
        terms = env.observation_manager.active_terms[dr.CAMERA]
        new_args["camera_keys"] = sorted(terms)
        episodes = [
          (n, int(source[n].attrs["env"]), source[n]["states"][()]) for n in group
        ]
        for name, images in render_episodes(env, dr.state_io(env, engine), episodes):
          for key, frames in images.items():
            write_obs(writer.data[name]["obs"], key, frames)
          bar.update(1)
      finally:
        env.close()
    bar.close()
    return writer.finish()


def render_episodes(env, states, episodes):
  """(name, {term: [T, H, W, C]}) of each episode: the episodes of different
  slots rendered together (a render draws every environment), each in its
  recorded slot (states are in world coordinates, and each slot has its own
  origin)."""
  import demo_rollouts as dr

  queues: dict[int, list] = {}
  for episode in episodes:
    queues.setdefault(episode[1], []).append(episode)
  while any(queues.values()):
    batch = [queue.pop(0) for queue in queues.values() if queue]
    frames = {name: [] for name, _, _ in batch}
    for t in range(max(len(s) for _, _, s in batch)):
      live = [(name, slot, s[t]) for name, slot, s in batch if t < len(s)]
      states.set([slot for _, slot, _ in live], np.stack([row for *_, row in live]))
      images = dr.render_camera_obs(env)
      for name, slot, _ in live:
        frames[name].append({k: v[slot].copy() for k, v in images.items()})
    for name, per_step in frames.items():
      yield name, {k: np.stack([f[k] for f in per_step]) for k in per_step[0]}


def main(args: Args) -> int:
  device, engine, env_args = check_args(args)
  from mjlab_tasks.common.runtime import quiet_warp

  quiet_warp()
  if args.render_cameras is not None:
    start = time.perf_counter()
    path = render_file(args, env_args, device, engine)
    print(f"rendered in {time.perf_counter() - start:.1f} s; wrote {path}")
    return 0
  episodes = load_episodes(args.file)
  exact_expected = engine == "mujoco" and env_args.get("engine") == "mujoco"
  start = time.perf_counter()
  with tqdm(total=len(episodes), desc="replay episodes", unit="ep") as bar:
    results = replay(env_args, episodes, device, engine, bar)
  wall = time.perf_counter() - start
  print_results(results, engine)
  reproduced = sum(r.verdict_reproduced for r in results)
  exact = sum(r.exact for r in results)
  worst = max((r.max_state_divergence for r in results), default=0.0)
  print(
    f"\n{reproduced}/{len(results)} verdicts reproduced, {exact}/{len(results)} "
    f"episodes bitwise exact (states, observations, rewards, dones); largest state "
    f"divergence {worst:.3g}; {engine} engine (recorded on {env_args.get('engine')}), "
    f"{wall:.1f} s."
  )
  if args.json is not None:
    report = {
      "file": str(args.file),
      "engine": engine,
      "recorded_engine": env_args.get("engine"),
      "exact_required": exact_expected,
      "episodes": [
        asdict(r) | {"verdict_reproduced": r.verdict_reproduced} for r in results
      ],
    }
    args.json.write_text(json.dumps(report, indent=2))
  if exact_expected and exact < len(results):
    print(
      f"error: {len(results) - exact} episode(s) did not reproduce exactly on the C engine.",
      file=sys.stderr,
    )
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(parse(Args)))
