#!/usr/bin/env bash
# Runs ON the GPU machine: the queue of written, unmeasured work (docs/cuda.md, "Where the targets
# stand" and "Next") in one call, most important first, its logs in $OUT (at most 8 files come back)
# and their key lines on stdout. Rewritten by the session that adds to the queue or empties it.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe bench_fast_ktile_probe bench_fast_gdn tessera
#   call:  bash scripts/gpu/queue.sh 2>&1   carrying ["tmp/prebuilt", ".debs"] (~57 MB with the tree;
#          without the pack, or with sources changed since, it builds there first: ~125 s more)
# Takes ~500 s; each step has its own timeout, so a shorter call keeps what ran.
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
# 1. the three new forms' bits (four warpgroups, ping-pong, both) and the probe's forms
timeout 60 $B/test_cuda --gtest_filter='FastKtileProbe.*:FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED \]|OK \]|Failure|differing" $OUT/tests.txt | head -20
st tests
# 2. llama.cpp's shape at 512 tokens: wg4, pingpong, wg4 pingpong against the pick
timeout 60 $B/bench_fast_moe --tokens 512 --runs 5 --warmup 2 --filter "128x768x2048 top-8 T=512" > $OUT/moe512.txt 2>&1
echo "bench rc $?"
grep -E "wg4|pingpong|persist (out16 )?large/48|persist gate\+up\+SwiGLU/(32|48|64)|persist down/(32|48|64)" $OUT/moe512.txt | cut -c1-150 | head -40
st bench
# 3. the flagship's shape at 512 tokens (the same rows)
timeout 60 $B/bench_fast_moe --tokens 512 --runs 5 --warmup 2 --filter "256x512x2048 top-8 T=512" > $OUT/moe512f.txt 2>&1
echo "bench flagship rc $?"
grep -E "wg4|pingpong|persist (out16 )?large/48|persist gate\+up\+SwiGLU/(32|48|64)|persist down/(32|48|64)" $OUT/moe512f.txt | cut -c1-150 | head -40
st bench-flagship
# 4. the probe at N = 48 (ping-pong, coalesced epilogues)
timeout 20 $B/bench_fast_ktile_probe --bn 48 --blocks-per-sm 2 > $OUT/probe.txt 2>&1; grep -E "\|" $OUT/probe.txt
st probe
# 5. fast against reference on the flagship's 4-layer cut
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -2 /tmp/synth.txt
TESSERA_FLAGSHIP_CUT=$cut timeout 120 $B/test_cuda --gtest_filter='FastEquivalence.*' > $OUT/equiv.txt 2>&1
echo "equiv rc $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure" $OUT/equiv.txt | head -20
st equiv
# 6. the chunked GDN at 1,024 tokens on this card (F16RtU16, the default since session 53: no H200 figure yet)
timeout 60 $B/bench_fast_gdn --runs 20 --filter "T=1024" > $OUT/gdn.txt 2>&1; echo "gdn rc $?"
grep -E "\|" $OUT/gdn.txt | cut -c1-160 | head -24
st gdn
# 7. end to end on the cut: the cut's prefill at 8K under each new form (one round each)
timeout 120 scripts/gpu/ab.sh --rounds 1 --model $cut "" "TESSERA_MOE_WARPGROUPS=4" "TESSERA_MOE_PINGPONG=on" \
  "TESSERA_MOE_WARPGROUPS=4 TESSERA_MOE_PINGPONG=on" -- --device cuda --ctx 8192 --batch 1 --gen 1 --repeat 2 \
  --prefill-chunk 2048 > $OUT/ab.txt 2>&1; echo "ab rc $?"; tail -12 $OUT/ab.txt | cut -c1-160
st ab
# 8. the fused decode MoE tests (not finished since session 57)
timeout 100 $B/test_cuda --gtest_filter='FastMoe.FusedDecode*' > $OUT/fused.txt 2>&1; echo "fused rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED \]|OK \]|Failure" $OUT/fused.txt | head -10
st fused
