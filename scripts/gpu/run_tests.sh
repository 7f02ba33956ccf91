#!/usr/bin/env bash
# Runs ON the GPU machine: unpack the carried .debs (bootstrap.sh), configure with the cuda
# preset (sm_90a), build, and run the CUDA tests. Logs go to $OUT (or build/gpu-logs).
#   scripts/gpu/run_tests.sh [extra ctest args]      e.g. -R CudaConvert
# TESSERA_GPU_TARGETS: what to build (default test_cuda; "all" for everything);
# TESSERA_GPU_BUILD_ONLY=1: configure and build only.
set -uo pipefail
cd "$(dirname "$0")/../.."
# The device returns at most 8 files from $OUT: the configure, build and synth logs stay in
# build/gpu-logs (their tails are printed on failure), only ctest.log (and test_cuda.txt) go there.
LOGS=${OUT:-build/gpu-logs}
BLOGS=build/gpu-logs
mkdir -p "$LOGS" "$BLOGS"
source scripts/gpu/bootstrap.sh || exit 1

echo "== configure (cuda preset)"
# shellcheck disable=SC2086
cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=90a $TESSERA_CMAKE_DEP_ARGS >"$BLOGS/configure.log" 2>&1 ||
  { tail -40 "$BLOGS/configure.log"; echo "run_tests: configure failed (log: $BLOGS/configure.log)"; exit 1; }
grep -E "CUDA backend|Found (fmt|nlohmann|GTest)" "$BLOGS/configure.log"

targets=${TESSERA_GPU_TARGETS:-test_cuda}
echo "== build ($targets)"
start=$(date +%s)
if [ "$targets" = all ]; then tflag=(); else tflag=(--target $targets); fi
cmake --build --preset cuda -j"$(nproc)" "${tflag[@]}" >"$BLOGS/build.log" 2>&1 ||
  { grep -E "error|Error" "$BLOGS/build.log" | head -40; echo "run_tests: build failed (log: $BLOGS/build.log)"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
[ "${TESSERA_GPU_BUILD_ONLY:-0}" = 1 ] && exit 0

# The fast-vs-reference test on a 4-layer cut of the flagship (FastEquivalence.FlagshipCut) when
# the tessera binary was built too (TESSERA_GPU_TARGETS="test_cuda tessera").
if [ -x build/cuda/tessera ] && [ -z "${TESSERA_FLAGSHIP_CUT:-}" ]; then
  cut=/tmp/tessera-flagship-cut4.gguf
  [ -f "$cut" ] || build/cuda/tessera synth --arch qwen35moe --preset qwen3.6-35b-a3b --layers 4 --type q4_0 \
    --out "$cut" >"$BLOGS/synth_cut.log" 2>&1 && export TESSERA_FLAGSHIP_CUT=$cut
  [ -f "$cut" ] && export TESSERA_FLAGSHIP_CUT=$cut
fi

echo "== ctest -L cuda $*"
ctest --preset cuda --output-on-failure --no-tests=error "$@" 2>&1 | tee "$LOGS/ctest.log"
rc=${PIPESTATUS[0]}
# The gtest output itself (device line, skips) for the record, on request: it runs the whole
# suite a second time (~150 s of device time since session 7), so TESSERA_GPU_TEST_LOG=1 only.
[ "${TESSERA_GPU_TEST_LOG:-0}" = 1 ] && [ -x build/cuda/test_cuda ] && build/cuda/test_cuda >"$LOGS/test_cuda.txt" 2>&1
exit "$rc"
