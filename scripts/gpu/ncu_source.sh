#!/usr/bin/env bash
# Runs ON the GPU machine: one kernel's SASS-level profile (Nsight Compute's SourceCounters and
# WarpStateStats sections, caches flushed, base clocks) for the first launch matching a kernel-name
# regex in a command, digested by sass_digest.py into $OUT/sass_NAME.md (the raw source page
# gzipped beside it). The benchmarks must be built (e.g. TESSERA_GPU_BUILD_ONLY=1 run_tests.sh).
#   scripts/gpu/ncu_source.sh prep wy_prep16 build/cuda/bench_fast_gdn --runs 1 --warmup 0 --filter "T=1024"
#   scripts/gpu/ncu_source.sh moemid mid_kernel build/cuda/bench_fast_moe --tokens 64 --runs 1 --warmup 0 \
#       --filter "256x512x2048 top-8 T=64"
# NCU_NAME_BASE=mangled: the regex sees the mangled name, so one instance of a kernel template can be
# named by its arguments (ncu matches the bare function name otherwise), e.g. the persistent gate+up
# tiles of 48: NCU_NAME_BASE=mangled scripts/gpu/ncu_source.sh gu48 "MoeTmaTileILi48ELb1ELi4ELi1ELi1ELb0ELb1ELb0E" …
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n 2,8p "$0"; exit 2; }
name=$1 regex=$2
shift 2
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
command -v ncu >/dev/null || { echo "ncu_source: ncu not on PATH"; exit 1; }
rep=/tmp/ncu_source_$name
timeout 300 ncu --cache-control all --clock-control base ${NCU_NAME_BASE:+--kernel-name-base "$NCU_NAME_BASE"} \
  --kernel-name "regex:$regex" --launch-count 1 \
  --section SourceCounters --section WarpStateStats -o "$rep" -f "$@" >/dev/null 2>&1 ||
  { echo "ncu_source: the profile of $regex failed"; exit 1; }
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>/dev/null
python3 scripts/gpu/sass_digest.py "$rep.csv" >"$LOGS/sass_$name.md"
gzip -c "$rep.csv" >"$LOGS/sass_$name.csv.gz"
head -40 "$LOGS/sass_$name.md"
