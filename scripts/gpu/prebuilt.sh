#!/usr/bin/env bash
# Binaries built HERE, run THERE: a device call spends ~125 s of its ~250 building test_cuda on a
# fresh machine (scripts/gpu/README.md, "Prebuilt binaries"). This builds the named targets in
# build/cuda here (CUDA 13.0, sm_90a, Release: the device's toolkit and card), strips them and packs
# them with a manifest — the hash of every file the build reads — into tmp/prebuilt/ (git-ignored:
# carry it). On the GPU machine `use` unpacks them into build/cuda only if the sources there hash
# the same, and keeps them only if every library each one loads is found; otherwise it says why and
# fails, and the caller builds there.
#   here:  scripts/gpu/prebuilt.sh pack test_cuda bench_fast_moe      (then carry tmp/prebuilt, .debs)
#   there: if pb=$(scripts/gpu/prebuilt.sh use); then eval "$pb"
#          else TESSERA_GPU_BUILD_ONLY=1 scripts/gpu/run_tests.sh; fi
# `use` unpacks the .debs (bootstrap.sh) for the libraries the binaries load (libfmt) and prints the
# LD_LIBRARY_PATH they need, for the caller to eval. The tests find their fixtures through the
# source path built in (TESSERA_SOURCE_DIR, this checkout's): `use` links it to the copy there.
# Run the binaries themselves (test_cuda --gtest_filter=...): there is no CMake tree for ctest.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
DIR=tmp/prebuilt
B=build/cuda

# The hash of what the build reads: CMake's files and every C++ / CUDA source and header.
sources_hash() {
  { ls CMakeLists.txt CMakePresets.json
    find src include tests bench tools -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \)
  } | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}

case "${1:-}" in
  pack)
    shift
    [ $# -gt 0 ] || { echo "prebuilt: name the targets to pack (test_cuda, bench_fast_moe, tessera, ...)" >&2; exit 2; }
    [ -f $B/CMakeCache.txt ] || { echo "prebuilt: configure $B first (cmake --preset cuda)" >&2; exit 1; }
    grep -q "^CMAKE_CUDA_ARCHITECTURES.*=90a$" $B/CMakeCache.txt ||
      { echo "prebuilt: $B is not built for sm_90a (CMAKE_CUDA_ARCHITECTURES=90a)" >&2; exit 1; }
    cmake --build $B -j"$(nproc)" --target "$@" >/tmp/prebuilt-build.log 2>&1 ||
      { grep -E "error" /tmp/prebuilt-build.log | head -20; echo "prebuilt: build failed" >&2; exit 1; }
    rm -rf "$DIR" && mkdir -p "$DIR/bin"
    for t in "$@"; do strip -o "$DIR/bin/$t" "$B/$t" || exit 1; done
    { echo "sources $(sources_hash)"; echo "targets $*"; echo "nvcc $(nvcc --version | tail -1)"
      echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo +changes)"
      echo "source_dir $PWD"; } >"$DIR/MANIFEST"
    # One stream with a dictionary larger than a binary: the binaries share most of their kernels, so
    # each after the first packs to little (tessera + test_cuda + two benches: 20 MB, against 42 at
    # xz -6; ~2 min, ~2.7 GB of memory here, 256 MB to unpack there). The carry limit is 64 MiB.
    tar -C "$DIR" -cf - bin | xz -T1 --lzma2=preset=9,dict=256MiB >"$DIR/bin.tar.xz" && rm -rf "${DIR:?}/bin"
    echo "prebuilt: $(du -h "$DIR/bin.tar.xz" | cut -f1) in $DIR for: $*"
    ;;
  use)
    if [ ! -f "$DIR/MANIFEST" ] || [ ! -f "$DIR/bin.tar.xz" ]; then echo "prebuilt: no $DIR (not carried?)" >&2; exit 1; fi
    want=$(awk '$1 == "sources" {print $2}' "$DIR/MANIFEST")
    got=$(sources_hash)
    [ "$want" = "$got" ] || { echo "prebuilt: packed for sources $want, these are $got: build here" >&2; exit 1; }
    src=$(awk '$1 == "source_dir" {print $2}' "$DIR/MANIFEST")  # the fixtures' path built into the tests
    if [ "$src" != "$PWD" ]; then
      if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src" ||
        { echo "prebuilt: cannot link $src to $PWD" >&2; exit 1; }
      elif [ "$(cd "$src" && pwd -P)" != "$(pwd -P)" ]; then
        echo "prebuilt: $src (the tests' source path) is another tree here" >&2; exit 1
      fi
    fi
    source scripts/gpu/bootstrap.sh >/dev/null 2>&1 || { echo "prebuilt: bootstrap failed" >&2; exit 1; }
    mkdir -p $B
    if command -v xz >/dev/null; then xz -dc "$DIR/bin.tar.xz" | tar -C $B --strip-components=1 -xf -
    else python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$DIR/bin.tar.xz" /tmp/pb &&
      cp /tmp/pb/bin/* $B/
    fi || { echo "prebuilt: cannot unpack" >&2; exit 1; }
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do  # (the toolkit's libcudart, libcublas)
      [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
    done
    for t in $(awk '$1 == "targets" {$1 = ""; print}' "$DIR/MANIFEST"); do
      missing=$(ldd "$B/$t" 2>&1 | grep "not found")
      [ -z "$missing" ] || { echo "prebuilt: $t lacks $missing" >&2; rm -f "$B/$t"; exit 1; }
    done
    echo "echo 'prebuilt: $(awk '$1 == "commit" || $1 == "targets"' "$DIR/MANIFEST" | tr '\n' ' ')' >&2"
    echo "export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    ;;
  *)
    echo "usage: scripts/gpu/prebuilt.sh pack TARGET... | use" >&2; exit 2 ;;
esac
