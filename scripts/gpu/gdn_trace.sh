#!/usr/bin/env bash
# Runs ON the GPU machine: where a chunked GDN call's time goes between its two kernels — the prep and
# the state pass — on the GPU's clock (CUPTI's activity records through kernel_trace.cpp, built on the
# spot), each bench_fast_gdn row run twice: as the backend runs it (the pass overlapping the prep
# where it may) and under --graph (captured: the passes in turn, so each kernel's time alone).
# gdn_pairs.py prints, per row, the prep's time and the pass's start and end from the prep's start.
# Expects a built build/cuda/bench_fast_gdn. Arguments: bench_fast_gdn --filter texts, each traced
# on its own; a filter may take several rows ("hot T=1024" takes the 4 × 1,024 batch's too), which
# gdn_pairs.py reports row by row (8 calls each: --warmup 2 --runs 6).
#   scripts/gpu/gdn_trace.sh "f16 rt sched hot T=1024" "f16 rt lean hot T=1024"
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n 2,9p "$0"; exit 2; }
BIN=build/cuda/bench_fast_gdn
[ -x "$BIN" ] || { echo "gdn_trace: $BIN not built"; exit 1; }
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
CUPTI=$(dirname "$(ls "$CUDA"/lib64/libcupti.so "$CUDA"/lib/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so \
  2>/dev/null | head -1)")
[ -f /tmp/libkernel_trace.so ] || g++ -O2 -shared -fPIC -I"$CUDA/include" -I"$CUDA/extras/CUPTI/include" \
  scripts/gpu/kernel_trace.cpp -o /tmp/libkernel_trace.so -L"$CUPTI" -lcupti -Wl,-rpath,"$CUPTI" ||
  { echo "gdn_trace: no CUPTI"; exit 1; }
i=0
for f in "$@"; do
  i=$((i + 1))
  for mode in "" --graph; do
    csv="$LOGS/gdn_trace_$i${mode:+_graph}.csv"
    CUDA_INJECTION64_PATH=/tmp/libkernel_trace.so KERNEL_TRACE_OUT="$csv" "$BIN" --filter "$f" --runs 6 --warmup 2 \
      $mode >/dev/null || { echo "gdn_trace: bench_fast_gdn --filter '$f' $mode failed"; exit 1; }
    python3 scripts/gpu/gdn_pairs.py "$csv" "$f${mode:+ (--graph: in turn)}"
  done
done
