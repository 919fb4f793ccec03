#!/usr/bin/env bash
# One prepared run for a session that has a CUDA device (see docs/benchmarks.md):
# the GPU test tier, then the benchmark on both engines, results under $OUT.
set -euo pipefail
OUT="${OUT:-reports/device}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python -m pytest -m gpu -q -s 2>&1 | tee "$OUT/gpu_tests.txt"
python scripts/benchmark.py --task CubeTray-UR5-RG2 --engine warp --device cuda:0 \
  --num-envs 64 512 4096 --steps 20 --json "$OUT/bench_gpu.json" 2>&1 | tee "$OUT/bench_gpu.txt"
python scripts/benchmark.py --task CubeTray-UR5-RG2 --engine mujoco \
  --num-envs 16 64 --steps 20 --json "$OUT/bench_cpu.json" 2>&1 | tee "$OUT/bench_cpu.txt"
python scripts/benchmark.py --task GlassPush --engine warp --device cuda:0 \
  --num-envs 16 128 1024 --steps 200 --json "$OUT/bench_glass_gpu.json" 2>&1 | tee "$OUT/bench_glass_gpu.txt"
python scripts/benchmark.py --task GlassPush --engine mujoco \
  --num-envs 1 16 --steps 200 --json "$OUT/bench_glass_cpu.json" 2>&1 | tee "$OUT/bench_glass_cpu.txt"
