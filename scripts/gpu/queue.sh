#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~60 s with the pack (+ ~2 min for the ncu step); each step has its own timeout, so a shorter
# call keeps what ran.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-build/gpu-logs}; mkdir -p "$OUT"
t0=$(date +%s); st() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if pb=$(scripts/gpu/prebuilt.sh use); then eval "$pb"
else
  export TESSERA_GPU_TARGETS="test_cuda bench_fast_ktile_probe bench_fast_moe bench_fast_gdn tessera"
  TESSERA_GPU_BUILD_ONLY=1 scripts/gpu/run_tests.sh > /tmp/build.txt 2>&1; echo "build rc $?"; tail -3 /tmp/build.txt
fi
st build
B=build/cuda
# The queue is empty since session 64 (its three calls measured everything written): what follows is the
# defaults' baseline for the MoE, to run again beside whatever the next session writes.
# 1. the MoE tiles' tests (the drawn walk the default since session 64)
timeout 200 $B/test_cuda \
  --gtest_filter='FastMoe.Dynamic*:FastMoe.PlanTakes*:FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*:FastMoe.Out16*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differ|counters|deviation" $OUT/tests.txt | head -24
st tests
# 2. the whole MoE and its steps (512 to 2,048 tokens, both shapes), drawn against static
timeout 250 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "\(pick\)|fit8" | grep -v "cold\|l2-\|large/32" | cut -c1-110 | head -40
st bench
# 3. where the tiles' SMs sit idle (session 64: SM active 88.5 / 90.3 % of gate+up's cycles static / drawn,
# down's 90.6 / 88.9 %): Nsight Compute on gate+up (four warpgroups) and down at 512 tokens of llama.cpp's
# shape, both walks
export PATH="/usr/local/cuda/bin:$PATH"
if command -v ncu >/dev/null; then
  # (the mangled names' prefixes: gate+up's tiles of 48 in four warpgroups and down's, persistent, N
  # in steps of 8; the last parameter, DYN, 0 or 1)
  for c in "gateup@MoeTmaTileILi48ELb1ELi6ELi1ELi1ELb0ELb1ELi2ELi4ELb" \
           "down@MoeTmaTileILi48ELb0ELi4ELi1ELi1ELb0ELb1ELi2ELi2ELb"; do
    IFS='@' read -r name rx <<<"$c"
    for dyn in 0 1; do
      timeout 120 ncu --kernel-name-base mangled --kernel-name "regex:$rx${dyn}E" --launch-skip 2 --launch-count 1 \
        --cache-control none --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section LaunchStats \
        $B/bench_fast_moe --tokens 512 --runs 1 --warmup 2 --filter "128x768x2048 top-8" > "$OUT/ncu_$name$dyn.txt" 2>&1
      echo "ncu $name dyn $dyn rc $?"
      keys="Duration|DRAM Throughput|L2 Cache Throughput|SM Active Cycles|Elapsed Cycles|Grid Size"
      grep -E "$keys|No Eligible|L2 Hit Rate" "$OUT/ncu_$name$dyn.txt" | head -12
    done
  done
fi
st ncu
