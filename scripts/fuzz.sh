#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp) with clang + ASan + UBSan in build/fuzz and
# runs each for SECONDS over its seed corpus (tests/fuzz/corpus_<name>/), with its dictionary where
# it has one (tests/fuzz/fuzz_<name>.dict); fails on any crash.
#   scripts/fuzz.sh [SECONDS]      (default 60; JOBS=N limits build parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
BUILD=${FUZZ_BUILD_DIR:-build/fuzz}
JOBS=${JOBS:-$(nproc)}

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/setup.sh --test installs it)" >&2; exit 1; }
done
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON \
  -DTESSERA_CUDA=OFF -DTESSERA_TESTS=OFF >/dev/null

targets=()
for src in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets in tests/fuzz/" >&2; exit 1; }
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"

for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus_${t#fuzz_}"
  work=$(mktemp -d)  # inputs found this run; the committed seeds are only read
  echo "== fuzz: $t for ${SECS}s (seeds: $seeds) =="
  corpora=("$work")
  [ -d "$seeds" ] && corpora+=("$seeds")
  dict=()  # the target's syntax, where it has a dictionary (tests/fuzz/<target>.dict)
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  if ! "$BUILD/$t" -max_total_time="$SECS" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$BUILD/$t-" "${dict[@]}" "${corpora[@]}"; then
    echo "fuzz: $t FAILED; the crashing input is $BUILD/$t-crash-* (reproduce: $BUILD/$t FILE)" >&2
    rm -rf "$work"
    exit 1
  fi
  rm -rf "$work"
done
echo "fuzz: ok"
