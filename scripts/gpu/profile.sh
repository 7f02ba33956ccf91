#!/usr/bin/env bash
# Runs ON the GPU machine: where the GPU time of an end-to-end run goes, per kernel, from Nsight
# Compute (one metric, gpu__time_duration, so one pass per launch; clocks left alone). Expects a
# built build/cuda/tessera (scripts/gpu/run_tests.sh with TESSERA_GPU_TARGETS containing tessera).
#   scripts/gpu/profile.sh [MODEL] [CTX]     default: the full-size synthetic flagship, 4096
# Writes to $OUT (or build/gpu-logs): profile_decode.md (per decode step: a run of gen 12 minus a
# run of gen 4, divided by the 8 extra steps) and profile_prefill.md (the gen-4 run: the warm-up,
# one CTX-token prefill in chunks of 2048, 4 decode steps). CUDA graphs are off so every kernel
# is seen on its own; the times are kernel times, without launch gaps; caches are not flushed
# between kernels (--cache-control none), as in a real step.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
BIN=build/cuda/tessera
[ -x "$BIN" ] || { echo "profile: $BIN not built"; exit 1; }
source scripts/gpu/bootstrap.sh >/dev/null || exit 1  # the shared libraries of the carried .debs
MODEL=${1:-/tmp/qwen3.6-35b-a3b-q4_0.gguf}
CTX=${2:-4096}
[ -f "$MODEL" ] || "$BIN" synth --arch qwen35moe --preset qwen3.6-35b-a3b --type q4_0 --out "$MODEL" 2>&1 | tail -1
command -v ncu >/dev/null || { echo "profile: ncu not on PATH"; exit 1; }
export TESSERA_CUDA_GRAPHS=0
for gen in 4 12; do
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
    --log-file "/tmp/profile_gen$gen.csv" "$BIN" bench "$MODEL" --device cuda --ctx "$CTX" --gen "$gen" \
    --repeat 1 --prefill-chunk 2048 >"/tmp/profile_gen$gen.txt" 2>&1 || { tail -5 "/tmp/profile_gen$gen.txt"; exit 1; }
done
python3 scripts/gpu/kernel_profile.py /tmp/profile_gen12.csv --minus /tmp/profile_gen4.csv --per 8 \
  | tee "$LOGS/profile_decode.md"
python3 scripts/gpu/kernel_profile.py /tmp/profile_gen4.csv | tee "$LOGS/profile_prefill.md"
