#!/usr/bin/env bash
# Runs ON the GPU machine: the whole check of the CUDA side in stages, so one `device` call
# covers what a session changed. Results go to $OUT (or build/gpu-logs), a few files only.
#   scripts/gpu/check.sh tests kernels       # every CUDA test; every kernel benchmark   (~6 min)
#   scripts/gpu/check.sh e2e profile         # tessera bench on the flagship; ncu profile (~8 min)
#   scripts/gpu/check.sh ncu                  # why the decode kernels are slow: limits.md (~3 min)
#   scripts/gpu/check.sh source               # where inside the open issues' hot kernels: sass_*.md (~3 min)
#   TESSERA_AB="TESSERA_PDL=0;TESSERA_GEMV=staged" scripts/gpu/check.sh ab
#                                             # 2K batch-1 bench, default then each setting (~25 s each)
# Stages: tests | kernels | e2e | profile | ncu | source | ab (any order, any subset).
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
[ $# -gt 0 ] || set -- tests kernels
stages=" $* "
has() { [[ "$stages" == *" $1 "* ]]; }

targets="tessera"
has tests && targets="$targets test_cuda"
has kernels && targets="$targets bench_fast_gemv bench_fast_gemm bench_fast_moe bench_fast_gdn bench_fast_attention"
has kernels && targets="$targets bench_fast_topk bench_gemv bench_fast_ktile_probe"
has ncu && targets="$targets bench_fast_gemv bench_fast_moe bench_fast_gdn"
has source && targets="$targets bench_fast_gemv bench_fast_moe bench_fast_gdn"
export TESSERA_GPU_TARGETS="$targets"
if has tests; then
  scripts/gpu/run_tests.sh >"$LOGS/tests.txt" 2>&1
  echo "== tests: rc $?"; grep -E "tests passed|\(Failed\)|\(SEGFAULT\)|\(Timeout\)" "$LOGS/tests.txt" | head -40
else
  TESSERA_GPU_BUILD_ONLY=1 scripts/gpu/run_tests.sh >"$LOGS/build.txt" 2>&1 || { tail -30 "$LOGS/build.txt"; exit 1; }
fi
source scripts/gpu/bootstrap.sh >/dev/null || exit 1
B=build/cuda

if has kernels; then
  {
    $B/bench_fast_gemv --tokens 1,8 --layouts q4_0,int8g32 --modes cold --runs 30
    $B/bench_fast_gemm --runs 20
    $B/bench_fast_moe --tokens 1,8,512 --runs 30
    $B/bench_fast_ktile_probe --bn 32,48,64 --blocks-per-sm 2,3
    $B/bench_fast_gdn --runs 20
    $B/bench_fast_attention --runs 10
    $B/bench_fast_topk --runs 30
    $B/bench_gemv --device cuda --dtypes q4_0,bf16 --tokens 1,8
  } >"$LOGS/kernels.txt" 2>&1
  echo "== kernels: $(grep -c '|' "$LOGS/kernels.txt") table rows in kernels.txt"
fi

if has ncu; then
  scripts/gpu/ncu_kernels.sh >/dev/null 2>&1
  echo "== ncu: $(grep -c '^| ' "$LOGS/limits.md") rows in limits.md"
fi

if has source; then  # ncu_source.sh: the SASS-level digest of each (issues 8, 9, 7)
  scripts/gpu/ncu_source.sh moe_mid mid_kernel $B/bench_fast_moe --tokens 64 --runs 1 --warmup 0 \
    --filter "256x512x2048 top-8 T=64" >/dev/null
  scripts/gpu/ncu_source.sh gdn_prep wy_prep16 $B/bench_fast_gdn --runs 1 --warmup 0 \
    --filter "f16x3 rt hot T=1024" >/dev/null
  scripts/gpu/ncu_source.sh gdn_state wy_state16_rt_kernel $B/bench_fast_gdn --runs 1 --warmup 0 \
    --filter "f16x3 rt hot T=1024" >/dev/null
  scripts/gpu/ncu_source.sh gemv_t8 gemv $B/bench_fast_gemv --tokens 8 --layouts q4_0 --variants pick --modes cold \
    --runs 1 --warmup 0 --filter 4096x14336 >/dev/null
  # the MoE's prefill tiles as picked at 512 tokens of llama.cpp's shape: persistent gate+up of 48 rows
  NCU_NAME_BASE=mangled scripts/gpu/ncu_source.sh moe_gu48 "MoeTmaTileILi48ELb1ELi4ELi1ELi1ELb0ELb1ELb0E" \
    $B/bench_fast_moe --tokens 512 --runs 1 --warmup 0 --filter "128x768x2048 top-8 T=512" >/dev/null
  echo "== source: $(ls "$LOGS"/sass_*.md 2>/dev/null | wc -l) digests (sass_*.md)"
fi

MODEL=${TESSERA_BENCH_MODEL:-/tmp/qwen3.6-35b-a3b-q4_0.gguf}
if has e2e || has profile || has ab; then
  [ -f "$MODEL" ] || $B/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --type q4_0 --out "$MODEL" 2>&1 | tail -1
fi
if has e2e; then
  $B/tessera bench "$MODEL" --device cuda --ctx 2048,8192,32768 --batch 1 --gen 32 --repeat 1 --prefill-chunk 2048 \
    2>&1 | grep -v '^bench \[' | tee "$LOGS/e2e.md"
  $B/tessera bench "$MODEL" --device cuda --ctx 512 --batch 8,64 --gen 32 --repeat 1 --prefill-chunk 2048 \
    2>&1 | grep -v '^bench \[' | tee -a "$LOGS/e2e.md"
  echo "TESSERA_PREFILL_BF16_WEIGHTS=0 (no bf16 weight copies for the prefill):" | tee -a "$LOGS/e2e.md"
  TESSERA_PREFILL_BF16_WEIGHTS=0 $B/tessera bench "$MODEL" --device cuda --ctx 8192 --batch 1 --gen 32 --repeat 1 \
    --prefill-chunk 2048 2>&1 | grep -E '^\| 8192|device memory' | tee -a "$LOGS/e2e.md"
fi
if has ab; then  # one build, one model: the default against each ;-separated environment setting
  ab_run() {
    env "$@" $B/tessera bench "$MODEL" --device cuda --ctx 2048 --batch 1 --gen 32 --repeat 1 --prefill-chunk 2048 2>&1 |
      grep -E '^\| [0-9]|rror' | sed "s|^|${*:-default} |" | tee -a "$LOGS/ab.md"
  }
  : >"$LOGS/ab.md"
  ab_run
  IFS=';' read -ra settings <<<"${TESSERA_AB:-}"
  for s in "${settings[@]}"; do
    # shellcheck disable=SC2086
    [ -n "$s" ] && ab_run $s
  done
fi
if has profile; then
  scripts/gpu/profile.sh "$MODEL" 2048 >/dev/null 2>&1
  head -30 "$LOGS/profile_decode.md"; head -20 "$LOGS/profile_prefill.md"
fi
