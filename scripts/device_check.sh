#!/usr/bin/env bash
# One prepared run for a session that has a CUDA device (see docs/benchmarks.md):
# the GPU test tier, then the benchmark on both engines, results under $OUT.
set -euo pipefail
OUT="${OUT:-reports/device}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python -m pytest -m gpu -q -s 2>&1 | tee "$OUT/gpu_tests.txt"
# Compiled loop (one captured graph per policy step) against mjlab's loop.
python scripts/benchmark.py --task CubeTray-UR5-RG2 --engine warp --device cuda:0 \
  --loop compiled python --num-envs 64 512 4096 --steps 20 \
  --json "$OUT/bench_gpu.json" --plot "$OUT/bench_gpu.png" 2>&1 | tee "$OUT/bench_gpu.txt"
python scripts/benchmark.py --task CubeTray-UR5-RG2 --engine mujoco \
  --loop compiled python --num-envs 16 64 --steps 20 \
  --json "$OUT/bench_cpu.json" 2>&1 | tee "$OUT/bench_cpu.txt"
python scripts/benchmark.py --task GlassPush --engine warp --device cuda:0 \
  --num-envs 16 128 1024 --steps 200 --json "$OUT/bench_glass_gpu.json" 2>&1 | tee "$OUT/bench_glass_gpu.txt"
python scripts/benchmark.py --task GlassPush --engine mujoco \
  --num-envs 1 16 --steps 200 --json "$OUT/bench_glass_cpu.json" 2>&1 | tee "$OUT/bench_glass_cpu.txt"
python scripts/benchmark.py --task GlassPush-UR5-RG2 --engine warp --device cuda:0 \
  --num-envs 64 1024 4096 --steps 20 --json "$OUT/bench_glass_task_gpu.json" 2>&1 | tee "$OUT/bench_glass_task_gpu.txt"
# GPU training (issue 18): CubeTray on MuJoCo Warp for TRAIN_SECONDS, then the
# last checkpoint scored by the evaluator over 256 episodes, and its curves.
TRAIN_SECONDS="${TRAIN_SECONDS:-420}"
timeout "$TRAIN_SECONDS" python scripts/train.py CubeTray-UR5-RG2 --engine warp \
  --env.scene.num-envs 4096 --agent.max-iterations 3000 --agent.save-interval 25 \
  --log-root "$OUT/train" 2>&1 | tail -n 200 > "$OUT/train_gpu.txt" || true
RUN="$(ls -d "$OUT"/train/*/* | tail -n 1)"
LAST="$(ls "$RUN"/model_*.pt | sort -t_ -k2 -n | tail -n 1)"
python scripts/plot_training.py --run "$RUN" --output "$OUT/cube_tray_gpu_training.png"
python scripts/evaluate_cube_tray.py --policy "$LAST" --num-envs 256 --episodes 256 \
  --seed 100000 --output "$OUT/policy_eval" 2>&1 | tail -n 5 | tee "$OUT/policy_eval.txt"
