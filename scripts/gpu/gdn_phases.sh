#!/usr/bin/env bash
# Runs ON the GPU machine: where a chunked GDN call's cycles go inside its kernels — each lean prep
# item's phases on its SM's clock, the state pass's chunks (ready, begun, ended) on the global timer —
# from a profiling build (cmake -DTESSERA_GDN_PHASES=ON, its own tree build/cuda-phases: the stamps cost
# ~10 % of the call there, nothing in other builds). Each bench_fast_gdn --filter text is run with the
# 6th chunked call of the process stamped (TESSERA_GDN_PHASES_CALL: past the warm-up) into
# $OUT/gdn_phases_N_{prep,pass}.csv; gdn_phases.py digests them (per-phase cycles by when the items
# started, items an SM, head 0's chunks). Session 52.
#   scripts/gpu/gdn_phases.sh "f16 rt sched hot T=1024" "f16 rt sched hot T=2048"
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n 2,9p "$0"; exit 2; }
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
B=build/cuda-phases
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTESSERA_GDN_PHASES=ON \
  ${TESSERA_CMAKE_DEP_ARGS:-} >/tmp/gdn_phases_cfg.log 2>&1 || { tail -20 /tmp/gdn_phases_cfg.log; exit 1; }
cmake --build $B -j"$(nproc)" --target bench_fast_gdn >/tmp/gdn_phases_build.log 2>&1 ||
  { grep -E "error" /tmp/gdn_phases_build.log | head -20; exit 1; }
i=0
for f in "$@"; do
  i=$((i + 1))
  prefix="$LOGS/gdn_phases_$i"
  TESSERA_GDN_PHASES=$prefix TESSERA_GDN_PHASES_CALL=${TESSERA_GDN_PHASES_CALL:-6} $B/bench_fast_gdn --filter "$f" \
    --runs 4 --warmup 2 2>&1 | grep -E "gdn phases" || { echo "gdn_phases: no call stamped for '$f'"; continue; }
  python3 scripts/gpu/gdn_phases.py "$prefix" "$f"
done
