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
# 1. the tiles' bits (N in steps of 8, two and four warpgroups), the probe's forms, the plans, and fast
# against reference through the whole model (the fixtures and the flagship's 4-layer cut)
cut=/tmp/tessera-flagship-cut4.gguf
$B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 --out $cut > /tmp/synth.txt 2>&1
echo "synth rc $?"; tail -1 /tmp/synth.txt | cut -c1-120
TESSERA_FLAGSHIP_CUT=$cut timeout 200 $B/test_cuda \
  --gtest_filter='FastKtileProbe.*:FastMoe.PlanTakes*:FastMoe.WgmmaTmaTiles*:FastMoe.BadArguments*:FastEquivalence.*' \
  > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED \]|OK \]|Failure|differing|deviation" $OUT/tests.txt | head -20
st tests
# 2. session 61's defaults (fit8; four warpgroups at 48, and at 64 from 2,048 tokens) on an H200 — every
# figure of session 61 is an H100's: the whole MoE and its steps at 512 to 2,048 tokens, both shapes
timeout 250 $B/bench_fast_moe --tokens 512,1024,2048 --runs 5 --warmup 2 --filter "top-8" > $OUT/moe.txt 2>&1
echo "bench rc $?"
grep -E "experts wgmma" $OUT/moe.txt | grep -E "\(pick\)|out16" | grep -v "cold\|l2-" | cut -c1-110 | head -40
grep -E "persist (wg4 )?(fit8 )?(gate\+up\+SwiGLU|down)/48" $OUT/moe.txt | grep "  512 |" | cut -c1-110
st bench
# 3. the chunked GDN at 1,024 tokens (F16RtU16, the default since session 53: no H200 figure yet)
timeout 60 $B/bench_fast_gdn --runs 20 --filter "T=1024" > $OUT/gdn.txt 2>&1; echo "gdn rc $?"
grep -E "f16 rt (sched|u16|lean) hot" $OUT/gdn.txt | cut -c1-120
st gdn
# 4. the k-tile probe at N = 48 (the lean and overlap forms on this card)
timeout 30 $B/bench_fast_ktile_probe --bn 48 --blocks-per-sm 2 > $OUT/probe.txt 2>&1; echo "probe rc $?"
grep -E "^\|" $OUT/probe.txt
st probe
# 5. end to end on the cut: prefill at 8K and 32K, the defaults against fit8 off
timeout 300 scripts/gpu/ab.sh --rounds 2 --model $cut "" "TESSERA_MOE_FIT8=off" -- --device cuda \
  --ctx 8192,32768 --batch 1 --gen 1 --repeat 2 --prefill-chunk 2048 > $OUT/ab.txt 2>&1
echo "ab rc $?"; tail -12 $OUT/ab.txt | cut -c1-160
st ab
# 6. the memory side of the MoE tiles (session 62: the lean dequantization cut their loop by 18 % and
# not their time): Nsight Compute on the defaults at 512 tokens of llama.cpp's shape, hot, clocks as run
export PATH="/usr/local/cuda/bin:$PATH"
if command -v ncu >/dev/null; then
  # (the mangled names of gate+up's tiles of 48 in four warpgroups and down's, persistent, N in steps of 8)
  for c in "gateup@MoeTmaTileILi48ELb1ELi6ELi1ELi1ELb0ELb1ELi2ELi4EE" \
           "down@MoeTmaTileILi48ELb0ELi4ELi1ELi1ELb0ELb1ELi2ELi2EE"; do
    IFS='@' read -r name rx <<<"$c"
    timeout 120 ncu --kernel-name-base mangled --kernel-name "regex:$rx" --launch-skip 2 --launch-count 1 \
      --cache-control none --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats \
      $B/bench_fast_moe --tokens 512 --runs 1 --warmup 2 --filter "128x768x2048 top-8" > "$OUT/ncu_$name.txt" 2>&1
    echo "ncu $name rc $?"
    keys="Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Issue Slots Busy"
    grep -E "$keys|No Eligible|Warp Cycles Per Issued|L2 Hit Rate|Mem Pipes Busy" "$OUT/ncu_$name.txt" | head -16
  done
fi
st ncu
