#!/usr/bin/env bash
# Runs ON the GPU machine: build tessera with CUDA, write the full-size synthetic Qwen3.6-35B-A3B
# q4_0 model (tessera synth, ~20 GB, once per machine), and run the end-to-end `tessera bench`
# table on the GPU. Results (markdown + JSON) go to $OUT (or build/gpu-logs).
#   scripts/gpu/bench.sh [--quick]      --quick: 2K and 8K only
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
export TESSERA_GPU_TARGETS=tessera
scripts/gpu/run_tests.sh -R NO_TESTS >"$LOGS/build.txt" 2>&1 || true  # configure + build (no tests)
source scripts/gpu/bootstrap.sh >/dev/null || exit 1
BIN=build/cuda/tessera
[ -x "$BIN" ] || { tail -20 "$LOGS/build.txt"; echo "bench: build failed"; exit 1; }
MODEL=${TESSERA_BENCH_MODEL:-/tmp/qwen3.6-35b-a3b-q4_0.gguf}
[ -f "$MODEL" ] || "$BIN" synth --arch qwen35moe --preset qwen3.6-35b-a3b --type q4_0 --out "$MODEL" 2>&1 | tail -1
CTX=2048,8192,32768
[ "${1:-}" = --quick ] && CTX=2048,8192
"$BIN" bench "$MODEL" --device cuda --ctx "$CTX" --batch 1 --gen 32 --repeat 1 --prefill-chunk 2048 \
  --json "$LOGS/bench_batch1.json" 2>&1 | grep -v '^bench \[' | tee "$LOGS/bench_batch1.md"
"$BIN" bench "$MODEL" --device cuda --ctx 512 --batch 8,64 --gen 32 --repeat 1 --prefill-chunk 2048 \
  --json "$LOGS/bench_concurrent.json" 2>&1 | grep -v '^bench \[' | tee "$LOGS/bench_concurrent.md"
