#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~150 s with the pack; each step has its own timeout, so a shorter call keeps what ran.
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
# 1. the new forms' bits (wgmma's N in steps of 8, with two and four warpgroups), the probe's forms
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -1 /tmp/synth.txt | cut -c1-120
timeout 150 $B/test_cuda \
  --gtest_filter='FastKtileProbe.*:FastMoe.PlanTakes*:FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differing" $OUT/tests.txt | head -20
st tests
# 2. N in steps of 8 with each branch's own commit (no no-op wgmma) and its descriptors made once:
# the whole MoE and its gate+up / down steps at 512 to 2,048 tokens, both shapes
timeout 250 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "\(pick\)|out16" | grep -v "cold\|l2-" | cut -c1-110 | head -40
grep -E "persist (wg4 )?(fit8 )?(gate\+up\+SwiGLU|down)/(48|64)" $OUT/moe.txt | grep "  512 |" | cut -c1-110
st bench
