#!/usr/bin/env bash
# The README's second command: set up, build and run every test (the CPU Release build with
# all tests, then the AddressSanitizer + UBSan build over the C++ CPU tests, then the parser fuzzers
# for a bounded time). .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
JOBS=$(nproc)

echo "== release build (CUDA compiled if nvcc is found) =="
cmake --preset release >/dev/null
cmake --build --preset release -j"$JOBS"
ctest --preset release -j"$JOBS"

echo "== sanitizer build (CPU tests) =="
cmake --preset asan >/dev/null
# Only the C++ test binaries: the CLI and benchmarks are exercised by the release run.
ASAN_TARGETS=$(cmake --build --preset asan --target help | sed -n 's/^\.\.\. \(test_[a-z_]*\).*/\1/p' | tr '\n' ' ')
cmake --build --preset asan -j"$JOBS" --target $ASAN_TARGETS
ctest --preset asan -j"$JOBS" -LE python

if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz =="
  scripts/fuzz.sh 60
fi
echo "all tests passed"
