#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~4-5 min with the pack (ncu most of it); each step has its own timeout, so a shorter call
# keeps what ran.
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
# 1. gate+up's and down's drawn tiles in one launch (session 65, TESSERA_MOE_FUSED_TILES=on; session 66: 2-10 %
# behind the two launches on the H100, its test stopped by a test bug since fixed; session 67: the form whose gate+up
# tiles a producer warp counts, =warp): both forms' bits against the two launches', on grids of 2 and 3 blocks and
# of one an SM; the plan; the tiles' other tests
timeout 240 $B/test_cuda --gtest_filter='FastMoe.FusedTiles*:FastMoe.Dynamic*:FastMoe.PlanTakes*:'\
'FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*:FastMoe.Out16*' > $OUT/tests.txt 2>&1; trc=$?; echo "tests rc $trc"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differ|counters|deviation|counted by" $OUT/tests.txt | head -24
st tests
# 2. the defaults on this card (an H200: the chunked GDN's F16RtU16 has no figure there yet; the MoE's last
# H200 figures are session 52's): the chunked GDN at 1,024 and 2,048 tokens × 32 heads, the whole MoE
timeout 40 $B/bench_fast_gdn --runs 20 --lens 1024,2048 --filter "rt u16 hot" > $OUT/gdn.txt 2>&1
echo "gdn rc $?"; grep -E "rt u16 hot" $OUT/gdn.txt | cut -c1-140
timeout 180 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "\(pick\)|dyn" | grep -v "cold" | cut -c1-120 | head -40
st bench
# 3. where each fused launch's time goes (what a gate+up tile pays there that the two launches' tiles do not —
# form 1: every consumer's proxy fence, the consumers' named barrier, thread 0's fence on its warpgroup's path;
# form 2: the proxy fences and each warp's mbarrier arrival only): Nsight Compute on each at 512 tokens of
# llama.cpp's shape (tiles of 48), where their tests pass
export PATH="/usr/local/cuda/bin:$PATH"
if [ $trc -eq 0 ] && command -v ncu >/dev/null; then
  for form in 1 2; do  # (the mangled name's prefix: the last template argument is the form)
    fused="MoeTmaTileILi48ELb1ELi6ELi1ELi1ELb0ELb1ELi2ELi4ELb1ELi${form}E"
    timeout 120 ncu --kernel-name-base mangled --kernel-name "regex:$fused" \
      --launch-skip 2 --launch-count 1 --cache-control none --clock-control none --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats \
      $B/bench_fast_moe --tokens 512 --runs 1 --warmup 2 --filter "128x768x2048 top-8" > "$OUT/ncu_fused$form.txt" 2>&1
    echo "ncu fused form $form rc $?"
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|SM Active Cycles|Elapsed Cycles|No Eligible" \
      "$OUT/ncu_fused$form.txt" | head -10
  done
fi
st ncu
