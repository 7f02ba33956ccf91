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
# 1. the plan's choice, the wide forms' bits, fast against reference on the flagship's 4-layer cut
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -1 /tmp/synth.txt | cut -c1-120
TESSERA_FLAGSHIP_CUT=$cut timeout 150 $B/test_cuda \
  --gtest_filter='FastKtileProbe.*:FastMoe.PlanTakes*:FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*:FastEquivalence.*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differing|deviation" $OUT/tests.txt | head -20
st tests
# 2. the k-tile probe at N = 48 and 32, two blocks an SM: the lean dequantization (code·s in one FMA a
# pair, the offsets by one more wgmma every 4 k-tiles) against the tiles' loop, and the rings
for bn in 48 32; do
  timeout 30 $B/bench_fast_ktile_probe --bn $bn --blocks-per-sm 2 > $OUT/probe$bn.txt 2>&1; echo "probe $bn rc $?"
  grep -E "^\|" $OUT/probe$bn.txt
done
st probe
# 3. four warpgroups (the default at tiles of 48 since session 60, H100 only) on this card, and at
# the token counts that pick tiles of 32 and 64 (llama.cpp's shape)
timeout 120 $B/bench_fast_moe --tokens 256,512,1024 --runs 5 --warmup 2 --filter "128x768x2048 top-8" \
  > $OUT/moe.txt 2>&1; echo "bench rc $?"
grep -E "\(pick\)|out16 (wg4 )?large/|persist (wg4 )?gate\+up\+SwiGLU/(32|48|64)|persist down/(32|48|64)" $OUT/moe.txt |
  grep -v "cold\|l2-" | cut -c1-130 | head -40
st bench
# 4. the chunked GDN at 1,024 tokens (F16RtU16, the default since session 53: no H200 figure yet)
timeout 60 $B/bench_fast_gdn --runs 20 --filter "T=1024" > $OUT/gdn.txt 2>&1; echo "gdn rc $?"
grep -E "f16 rt (sched|u16|lean) hot" $OUT/gdn.txt | cut -c1-120
st gdn
