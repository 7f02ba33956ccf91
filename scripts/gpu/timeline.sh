#!/usr/bin/env bash
# Runs ON the GPU machine: a decode step's wall time per kernel with CUDA graphs and PDL on, from
# an Nsight Systems trace, or CUPTI's (kernel_trace.cpp) where nsys is missing (timeline.py: each
# kernel charged from its predecessor's end to its own).
# Expects a built build/cuda/tessera.
#   scripts/gpu/timeline.sh [MODEL] [CTX] [prefill]     default: the full-size synthetic flagship, 4096
#   scripts/gpu/timeline.sh MODEL CTX steps [BATCH]     a decode step of BATCH concurrent requests
# Writes $OUT/timeline_decode.md and timeline_sequence.md (or build/gpu-logs); with `prefill`, a
# run of one decode step instead and $OUT/timeline_prefill.md: the prefill's kernel time per kernel
# (prefill_profile.py). With `steps`: two runs of BATCH requests (default 64), 4 and 36 generated
# tokens, and each kernel's time per decode step from the difference of their totals
# (steps_profile.py) into $OUT/timeline_steps.md — steps whose kernels the gap heuristic of
# timeline.py cannot separate (many requests: host work inside a step). Since the pipelined decode
# leaves no host gaps between steps the gap heuristic can miss them at batch 1 too (session 26: it
# took prefill kernels for steps): `steps 1` is the reliable form there.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
BIN=build/cuda/tessera
[ -x "$BIN" ] || { echo "timeline: $BIN not built"; exit 1; }
source scripts/gpu/bootstrap.sh >/dev/null || exit 1
MODEL=${1:-/tmp/qwen3.6-35b-a3b-q4_0.gguf}
CTX=${2:-4096}
MODE=${3:-decode}
GEN=16
[ "$MODE" = prefill ] && GEN=1
[ -f "$MODEL" ] || "$BIN" synth --arch qwen35moe --preset qwen3.6-35b-a3b --type q4_0 --out "$MODEL" 2>&1 | tail -1
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
# trace OUT_CSV GEN BATCH: one bench run's kernels (nsys, or CUPTI's activity records through an
# injection library, kernel_trace.cpp) as a cuda_gpu_trace CSV.
trace() {
  local out=$1 gen=$2 batch=$3
  local run=("$BIN" bench "$MODEL" --device cuda --ctx "$CTX" --batch "$batch" --gen "$gen" --repeat 1
             --prefill-chunk 2048)
  rm -f /tmp/tl.nsys-rep "$out"
  if [ -n "$NSYS" ]; then
    "$NSYS" profile --cuda-graph-trace=node --trace=cuda -o /tmp/tl --force-overwrite true "${run[@]}" \
      >/tmp/tl_run.txt 2>&1 || { tail -5 /tmp/tl_run.txt; return 1; }
    "$NSYS" stats --report cuda_gpu_trace --format csv --output /tmp/tl /tmp/tl.nsys-rep >/dev/null 2>&1
    [ "$out" = /tmp/tl_cuda_gpu_trace.csv ] || mv /tmp/tl_cuda_gpu_trace.csv "$out"
  else
    local CUDA CUPTI
    CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
    CUPTI=$(dirname "$(ls "$CUDA"/lib64/libcupti.so "$CUDA"/lib/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
    [ -f /tmp/libkernel_trace.so ] || g++ -O2 -shared -fPIC -I"$CUDA/include" -I"$CUDA/extras/CUPTI/include" \
      scripts/gpu/kernel_trace.cpp -o /tmp/libkernel_trace.so -L"$CUPTI" -lcupti -Wl,-rpath,"$CUPTI" ||
      { echo "timeline: no nsys, no CUPTI"; return 1; }
    CUDA_INJECTION64_PATH=/tmp/libkernel_trace.so KERNEL_TRACE_OUT="$out" "${run[@]}" >/tmp/tl_run.txt 2>&1 ||
      { tail -5 /tmp/tl_run.txt; return 1; }
  fi
}
if [ "$MODE" = steps ]; then
  BATCH=${4:-64}
  trace /tmp/tl_short.csv 4 "$BATCH" || exit 1
  trace /tmp/tl_long.csv 36 "$BATCH" || exit 1
  python3 scripts/gpu/steps_profile.py /tmp/tl_short.csv /tmp/tl_long.csv --steps 32 | tee "$LOGS/timeline_steps.md"
  exit
fi
TRACE=/tmp/tl_cuda_gpu_trace.csv
trace "$TRACE" "$GEN" 1 || exit 1
if [ "$MODE" = prefill ]; then
  python3 scripts/gpu/prefill_profile.py "$TRACE" | tee "$LOGS/timeline_prefill.md"
else
  python3 scripts/gpu/timeline.py "$TRACE" --steps 8 --sequence "$LOGS/timeline_sequence.md" | tee "$LOGS/timeline_decode.md"
fi
