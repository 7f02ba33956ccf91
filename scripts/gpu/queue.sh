#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~6-9 min with the pack (the A/B and ncu most of it); each step has its own timeout, so a shorter call
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
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -1 /tmp/synth.txt | cut -c1-120
# 1. gate+up's and down's drawn tiles in one launch (session 65, TESSERA_MOE_FUSED_TILES=on): their bits
# against the two launches', on grids of 1 to 3 blocks and of one an SM; the plan; the tiles' other tests
timeout 200 $B/test_cuda --gtest_filter='FastMoe.FusedTiles*:FastMoe.Dynamic*:FastMoe.PlanTakes*:'\
'FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*:FastMoe.Out16*' > $OUT/tests.txt 2>&1; trc=$?; echo "tests rc $trc"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differ|counters|deviation" $OUT/tests.txt | head -24
st tests
# 2. the chunked GDN (its own gate): each persistent prep item's flag raised by the block's next item
# (session 66, TESSERA_GDN_CHUNKED=f16rtdefer) — its bits against F16RtU16's, then both at 1,024 and 2,048
# tokens × 32 heads, alternated twice (F16RtU16 has no H200 figure yet: 79.30–79.49 µs at 1,024 on the
# H100; F16RtSched 76.5–76.9 on the H200, session 52)
timeout 100 $B/test_cuda --gtest_filter='FastGdnChunked.DeferredFlags*:FastGdnChunked.SchedPlan*' \
  > $OUT/gdn_tests.txt 2>&1; grc=$?; echo "gdn tests rc $grc"
grep -E "^\[  (PASSED|FAILED) |FAILED \]|Failure" $OUT/gdn_tests.txt | head -6
for f in "rt u16 hot" "rt defer hot" "rt u16 hot" "rt defer hot"; do
  [ $grc -eq 0 ] || [ "$f" = "rt u16 hot" ] || continue
  timeout 30 $B/bench_fast_gdn --runs 20 --lens 1024,2048 --filter "$f" >> $OUT/gdn.txt 2>&1
done
grep -E "rt (u16|defer) hot" $OUT/gdn.txt | cut -c1-140
st gdn
# (a failure: its log says which; the figures of a wrong kernel are not worth the device time)
if [ $trc -eq 0 ]; then
# 3. the whole MoE (512 to 2,048 tokens, both shapes): the drawn tiles in two launches against one
timeout 150 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "\(pick\)|dyn" | grep -v "cold" | cut -c1-120 | head -40
st bench
# 4. end to end on the cut, three rounds: prefill at 8K and 32K (2,048-token chunks: tiles of 64, gate+up
# in four warpgroups), the defaults against the tiles in one launch
timeout 220 scripts/gpu/ab.sh --rounds 3 --model $cut "" "TESSERA_MOE_FUSED_TILES=on" \
  -- --device cuda --ctx 8192,32768 --batch 1 --gen 1 --repeat 2 --prefill-chunk 2048 > $OUT/ab.txt 2>&1
echo "ab rc $?"; tail -14 $OUT/ab.txt | cut -c1-160
st ab
# 5. where the fused launch's SMs sit idle (session 64, two launches: SM active 90.3 % of gate+up's cycles,
# 88.9 % of down's): Nsight Compute on it at 512 tokens of llama.cpp's shape (tiles of 48) — where the
# call's 600 s leave room
export PATH="/usr/local/cuda/bin:$PATH"
if command -v ncu >/dev/null && [ $(( $(date +%s) - t0 )) -lt 470 ]; then
  fused="MoeTmaTileILi48ELb1ELi6ELi1ELi1ELb0ELb1ELi2ELi4ELb1ELb1E"  # (the mangled name's prefix: FUSED 1)
  timeout 100 ncu --kernel-name-base mangled --kernel-name "regex:$fused" \
    --launch-skip 2 --launch-count 1 --cache-control none --clock-control none --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats \
    $B/bench_fast_moe --tokens 512 --runs 1 --warmup 2 --filter "128x768x2048 top-8" > "$OUT/ncu_fused.txt" 2>&1
  echo "ncu fused rc $?"
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|SM Active Cycles|Elapsed Cycles|Grid Size|No Eligible" \
    "$OUT/ncu_fused.txt" | head -12
fi
st ncu
fi
