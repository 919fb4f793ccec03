"""ManiSkill3 CPU throughput reference: PickCube-v1 on PhysX CPU, N processes.

Measures how many simulated seconds ManiSkill3 advances per wall-clock second
on this machine, so that our suite's throughput can be compared with it in the
same unit on the same day. Prints one JSON line.

This script does NOT run with the repository's virtual environment. Run it with
the Python of a separate ManiSkill3 virtual environment, e.g.:

  python3.11 -m venv /tmp/ms3
  # CPU-only torch first (a local wheel, or the CPU index if it is reachable),
  # otherwise pip pulls the large CUDA build from PyPI.
  /tmp/ms3/bin/pip install torch
  /tmp/ms3/bin/pip install mani_skill
  /tmp/ms3/bin/python scripts/maniskill_reference.py --num-envs 2

SAPIEN needs a Vulkan device even with obs_mode="state" and render_mode=None
(ManiSkill builds render materials and a render system for every scene). On a
machine without a GPU, Mesa's software Vulkan driver (lavapipe) works if it
supports descriptorBindingPartiallyBound, i.e. Mesa >= 23; Debian 12's Mesa
22.3 is rejected ("failed to find a rendering device"). Without touching the
system Mesa, unpack the bookworm-backports build into a private folder and
point the Vulkan loader at it (needs libvulkan1 and libllvm15 installed):

  mkdir -p /tmp/mesa25debs && cd /tmp/mesa25debs
  # with bookworm-backports in the apt sources:
  apt-get download mesa-vulkan-drivers=25.0.7-2~bpo12+1 \
    libdrm2=2.4.123-1~bpo12+1
  for f in *.deb; do dpkg-deb -x "$f" /tmp/mesa25; done
  L=/tmp/mesa25/usr/lib/x86_64-linux-gnu
  echo '{"ICD": {"api_version": "1.4.305", "library_path":' \
    "\"$L/libvulkan_lvp.so\"}, \"file_format_version\": \"1.0.0\"}" \
    > /tmp/mesa25/lvp_icd.json
  VK_ICD_FILENAMES=/tmp/mesa25/lvp_icd.json LD_LIBRARY_PATH=$L \
    /tmp/ms3/bin/python scripts/maniskill_reference.py --num-envs 2

Nothing is rendered during the measurement; the driver is only needed for
the scenes to be built.

Parallelism follows ManiSkill's own CPU benchmark
(mani_skill/examples/benchmarking/gpu_sim.py with --cpu-sim): one env per
process, each wrapped in CPUGymWrapper, stepped by gymnasium's AsyncVectorEnv
(ManiSkill rejects num_envs > 1 on the CPU backend and points to
AsyncVectorEnv). Workers start with "forkserver" rather than Linux's default
"fork": gymnasium builds a probe env in this process first, and forking after
SAPIEN and lavapipe have started threads hangs the workers. Episodes end
through ManiSkill's time limit (50 control steps for PickCube-v1) and are
auto-reset in the same step, so every timed step advances one control
timestep of simulated time and reset costs are included.
"""

import argparse
import functools
import json
import os
import platform
import time

import gymnasium as gym
import numpy as np

ENV_ID = "PickCube-v1"
SIM_BACKEND = "physx_cpu"
OBS_MODE = "state"


def parse_args():
  parser = argparse.ArgumentParser(
    description=(
      "Measure ManiSkill3 PickCube-v1 throughput on the PhysX CPU backend "
      "with N parallel environment processes; prints one JSON line."
    )
  )
  parser.add_argument(
    "--num-envs",
    type=int,
    default=2,
    help="number of environments, one per worker process in async mode (default: 2)",
  )
  parser.add_argument(
    "--steps",
    type=int,
    default=1000,
    help="timed vector steps after warm-up; each advances every env by one "
    "control step (default: 1000)",
  )
  parser.add_argument(
    "--warmup",
    type=int,
    default=50,
    help="untimed vector steps before timing starts (default: 50)",
  )
  parser.add_argument(
    "--seed",
    type=int,
    default=0,
    help="seed for env resets (env i gets seed+i) and the random actions (default: 0)",
  )
  parser.add_argument(
    "--mode",
    choices=("async", "sync"),
    default="async",
    help="async: gymnasium AsyncVectorEnv, one process per env (ManiSkill's CPU "
    "parallelism); sync: SyncVectorEnv, all envs in this process, e.g. "
    "--mode sync --num-envs 1 for the bare single-process figure (default: async)",
  )
  parser.add_argument(
    "--start-method",
    choices=("forkserver", "spawn", "fork"),
    default="forkserver",
    help="multiprocessing start method of the async workers; fork can hang "
    "because gymnasium builds a probe env (torch, SAPIEN, Vulkan threads) in "
    "this process before starting them (default: forkserver)",
  )
  parser.add_argument(
    "--torch-threads",
    type=int,
    default=0,
    help="if > 0, call torch.set_num_threads(N) in every env process; "
    "0 leaves torch's default (default: 0)",
  )
  args = parser.parse_args()
  if args.num_envs < 1 or args.steps < 1 or args.warmup < 0:
    parser.error("--num-envs and --steps must be >= 1, --warmup >= 0")
  return args


class ProcessCpuTime(gym.Wrapper):
  """Lets the parent read the CPU time of the process that holds the env."""

  def process_cpu_time(self):
    return time.process_time()


def make_env(torch_threads):
  """Build one CPU ManiSkill env (runs inside the worker process)."""
  import mani_skill.envs  # noqa: F401  (registers the ManiSkill env ids)
  from mani_skill.utils.wrappers.gymnasium import CPUGymWrapper

  if torch_threads > 0:
    import torch

    torch.set_num_threads(torch_threads)
  env = gym.make(
    ENV_ID,
    obs_mode=OBS_MODE,
    render_mode=None,
    sim_backend=SIM_BACKEND,
  )
  return ProcessCpuTime(CPUGymWrapper(env))


def build_vector_env(args):
  env_fns = [
    functools.partial(make_env, args.torch_threads) for _ in range(args.num_envs)
  ]
  autoreset = gym.vector.AutoresetMode.SAME_STEP
  if args.mode == "async":
    return gym.vector.AsyncVectorEnv(
      env_fns, autoreset_mode=autoreset, context=args.start_method
    )
  return gym.vector.SyncVectorEnv(env_fns, autoreset_mode=autoreset)


def env_timing(envs):
  """Control mode, frequencies and control timestep of the first env."""

  def first(name):
    return envs.get_attr(name)[0]

  return {
    "control_mode": first("control_mode"),
    "control_freq_hz": float(first("control_freq")),
    "sim_freq_hz": float(first("sim_freq")),
    "control_timestep_s": float(first("control_timestep")),
  }


def worker_cpu_time(envs, args):
  """Summed CPU seconds of the env worker processes (0 in sync mode)."""
  if args.mode != "async":
    return 0.0
  return float(sum(envs.call("process_cpu_time")))


def run(envs, args):
  """Warm up, then time args.steps vector steps with seeded random actions.

  Besides wall time, records the CPU seconds that this process and the env
  workers spent in the timed window, so that a run slowed by other load on
  the machine can still be judged (sim seconds per CPU second).
  """
  envs.reset(seed=args.seed)
  envs.action_space.seed(args.seed)
  for _ in range(args.warmup):
    envs.step(envs.action_space.sample())
  episodes = 0
  workers_before = worker_cpu_time(envs, args)
  main_before = time.process_time()
  start = time.perf_counter()
  for _ in range(args.steps):
    _, _, terminated, truncated, _ = envs.step(envs.action_space.sample())
    episodes += int(np.count_nonzero(np.logical_or(terminated, truncated)))
  wall = time.perf_counter() - start
  main_cpu = time.process_time() - main_before
  workers_cpu = worker_cpu_time(envs, args) - workers_before
  return {
    "wall_s": wall,
    "cpu_s_main": main_cpu,
    "cpu_s_workers": workers_cpu,
    "episodes_ended": episodes,
  }


def versions():
  import mani_skill
  import sapien
  import torch

  return {
    "mani_skill": getattr(mani_skill, "__version__", "unknown"),
    "sapien": getattr(sapien, "__version__", "unknown"),
    "torch": torch.__version__,
    "gymnasium": gym.__version__,
  }


def report(args, timing, result, load_before):
  env_steps = args.steps * args.num_envs
  steps_per_s = env_steps / result["wall_s"]
  sim_s = env_steps * timing["control_timestep_s"]
  cpu_s = result["cpu_s_main"] + result["cpu_s_workers"]
  record = {
    "env_id": ENV_ID,
    "sim_backend": SIM_BACKEND,
    "obs_mode": OBS_MODE,
    "vectorization": args.mode,
    "num_envs": args.num_envs,
    **timing,
    "timed_vector_steps": args.steps,
    "warmup_vector_steps": args.warmup,
    "episodes_ended": result["episodes_ended"],
    "wall_s": round(result["wall_s"], 3),
    "env_steps_per_s": round(steps_per_s, 2),
    "sim_s_per_wall_s": round(sim_s / result["wall_s"], 3),
    "cpu_s_main": round(result["cpu_s_main"], 3),
    "cpu_s_workers": round(result["cpu_s_workers"], 3),
    "sim_s_per_cpu_s": round(sim_s / cpu_s, 3),
    "seed": args.seed,
    "torch_threads": args.torch_threads or "default",
    "loadavg_before": [round(x, 2) for x in load_before],
    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    "machine": {
      "platform": platform.platform(),
      "processor": platform.processor() or platform.machine(),
      "cpu_count": os.cpu_count(),
      "python": platform.python_version(),
    },
    **versions(),
  }
  print(json.dumps(record), flush=True)


def main():
  args = parse_args()
  load_before = os.getloadavg()
  envs = build_vector_env(args)
  try:
    timing = env_timing(envs)
    result = run(envs, args)
  finally:
    envs.close()
  report(args, timing, result, load_before)


if __name__ == "__main__":
  main()
