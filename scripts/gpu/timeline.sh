#!/usr/bin/env bash
# Runs ON the GPU machine: a decode step's wall time per kernel with CUDA graphs and PDL on, from
# an Nsight Systems trace, or CUPTI's (kernel_trace.cpp) where nsys is missing (timeline.py: each
# kernel charged from its predecessor's end to its own).
# Expects a built build/cuda/tessera.
#   scripts/gpu/timeline.sh [MODEL] [CTX] [prefill]     default: the full-size synthetic flagship, 4096
# Writes $OUT/timeline_decode.md and timeline_sequence.md (or build/gpu-logs); with `prefill`, a
# run of one decode step instead and $OUT/timeline_prefill.md: the prefill's kernel time per kernel
# (prefill_profile.py).
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
TRACE=/tmp/tl_cuda_gpu_trace.csv
rm -f /tmp/tl.nsys-rep "$TRACE"
run=("$BIN" bench "$MODEL" --device cuda --ctx "$CTX" --gen "$GEN" --repeat 1 --prefill-chunk 2048)
if [ -n "$NSYS" ]; then
  "$NSYS" profile --cuda-graph-trace=node --trace=cuda -o /tmp/tl --force-overwrite true "${run[@]}" >/tmp/tl_run.txt 2>&1 ||
    { tail -5 /tmp/tl_run.txt; exit 1; }
  "$NSYS" stats --report cuda_gpu_trace --format csv --output /tmp/tl /tmp/tl.nsys-rep >/dev/null 2>&1
else  # CUPTI's activity records through an injection library (kernel_trace.cpp)
  CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
  CUPTI=$(dirname "$(ls "$CUDA"/lib64/libcupti.so "$CUDA"/lib/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
  g++ -O2 -shared -fPIC -I"$CUDA/include" -I"$CUDA/extras/CUPTI/include" scripts/gpu/kernel_trace.cpp \
    -o /tmp/libkernel_trace.so -L"$CUPTI" -lcupti -Wl,-rpath,"$CUPTI" || { echo "timeline: no nsys, no CUPTI"; exit 1; }
  CUDA_INJECTION64_PATH=/tmp/libkernel_trace.so KERNEL_TRACE_OUT="$TRACE" "${run[@]}" >/tmp/tl_run.txt 2>&1 ||
    { tail -5 /tmp/tl_run.txt; exit 1; }
fi
if [ "$MODE" = prefill ]; then
  python3 scripts/gpu/prefill_profile.py "$TRACE" | tee "$LOGS/timeline_prefill.md"
else
  python3 scripts/gpu/timeline.py "$TRACE" --steps 8 --sequence "$LOGS/timeline_sequence.md" | tee "$LOGS/timeline_decode.md"
fi
