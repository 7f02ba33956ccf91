#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~100 s with the pack (+ ~2 min for the ncu step); each step has its own timeout, so a shorter
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
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -1 /tmp/synth.txt | cut -c1-120
# 1. down's tiles in four consumer warpgroups (session 64, TESSERA_MOE_DOWN_WARPGROUPS=4: 256 features a
# block sharing each stage's activation rows): their bits against the plain tiles', through the plan
timeout 200 $B/test_cuda \
  --gtest_filter='FastMoe.WgmmaTmaTiles*:FastMoe.PlanTakes*:FastMoe.BadArguments*:FastMoe.Dynamic*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differ|counters|deviation" $OUT/tests.txt | head -24
st tests
# 2. the whole MoE and its down step: the defaults' form (persistent, fit8, drawn in turn, gate+up in four
# warpgroups) against down in four too, and gate+up in two (512 to 2,048 tokens, both shapes)
timeout 250 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "dyn" | cut -c1-120 | head -40
grep -E "step: .*fit8 (dyn )?(down-wg4 )?down/(32|48|64)" $OUT/moe.txt | cut -c1-110 | head -40
st bench
# 3. end to end on the cut, three rounds: prefill at 8K and 32K (2,048-token chunks: tiles of 64), the
# defaults against down in four warpgroups, and gate+up in two (session 64's bench: 1.3 % ahead there)
timeout 330 scripts/gpu/ab.sh --rounds 3 --model $cut "" "TESSERA_MOE_DOWN_WARPGROUPS=4" "TESSERA_MOE_WARPGROUPS=2" \
  -- --device cuda --ctx 8192,32768 --batch 1 --gen 1 --repeat 2 --prefill-chunk 2048 > $OUT/ab.txt 2>&1
echo "ab rc $?"; tail -20 $OUT/ab.txt | cut -c1-160
st ab
