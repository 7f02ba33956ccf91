#!/usr/bin/env bash
# Source this ON the GPU machine (no network there): unpacks the .deb files that
# scripts/gpu/fetch_debs.sh downloaded into .debs/ into a prefix and exports the paths that
# make `cmake --preset cuda` find fmt, nlohmann_json, GTest (and httplib/xxhash headers).
#   source scripts/gpu/bootstrap.sh        (TESSERA_DEPS overrides the prefix, default /tmp/deps)
# Sets TESSERA_CMAKE_DEP_ARGS (-D flags naming the package config dirs) for the configure step.

_ts_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESSERA_DEPS=${TESSERA_DEPS:-/tmp/deps}
_ts_lib="$TESSERA_DEPS/usr/lib/x86_64-linux-gnu"

_ts_bootstrap() {
  local debs=("$_ts_root"/.debs/*.deb)
  if [ ! -e "${debs[0]}" ]; then
    echo "bootstrap: no .deb files in $_ts_root/.debs: run scripts/gpu/fetch_debs.sh here and carry .debs" >&2
    return 1
  fi
  mkdir -p "$TESSERA_DEPS"
  local d
  for d in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$d" "$TESSERA_DEPS" || { echo "bootstrap: cannot unpack $d" >&2; return 1; }
    else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
      local m z
      m=$(ar t "$d" | grep '^data.tar')
      case "$m" in *.xz) z=-J ;; *.zst) z=--zstd ;; *.gz) z=-z ;; *) z= ;; esac
      ar p "$d" "$m" | tar -x $z -C "$TESSERA_DEPS" -f - || { echo "bootstrap: cannot unpack $d" >&2; return 1; }
    fi
  done

  # .pc files say prefix=/usr: point them at the prefix.
  local pc
  for pc in "$_ts_lib"/pkgconfig/*.pc "$TESSERA_DEPS"/usr/share/pkgconfig/*.pc; do
    if [ -f "$pc" ]; then sed -i "s|^prefix=/usr\$|prefix=$TESSERA_DEPS/usr|" "$pc"; fi
  done

  # Debian's runtime libraries (libssl3, zlib, brotli) are unpacked too; where the machine has
  # its own copy of such a library, use that one instead (it matches the rest of the system).
  local so sys
  for so in "$_ts_lib"/lib{ssl,crypto,z,brotlicommon,brotlidec,brotlienc}.so.*; do
    [ -e "$so" ] || continue
    sys=$(ldconfig -p 2>/dev/null | awk -v n="$(basename "$so")" '$1 == n && $NF !~ /^\/tmp\// {print $NF; exit}')
    if [ -n "$sys" ]; then ln -sf "$sys" "$so"; fi
  done
  return 0
}

_ts_gtest_links() {  # do the prebuilt (Debian 12) GTest static libraries link here?
  local t
  t=$(mktemp -d)
  printf '#include <gtest/gtest.h>\nTEST(A, B) { EXPECT_EQ(1, 1); }\n' > "$t/t.cpp"
  g++ -std=c++20 -I"$TESSERA_DEPS/usr/include" "$t/t.cpp" -o "$t/t" "$_ts_lib/libgtest_main.a" \
      "$_ts_lib/libgtest.a" -pthread >"$t/log" 2>&1 && "$t/t" >/dev/null 2>&1
  local rc=$?
  rm -rf "$t"
  return $rc
}

_ts_gtest_from_source() {  # fallback: build GoogleTest from the googletest package's sources
  local src="$TESSERA_DEPS/usr/src/googletest" b="$TESSERA_DEPS/gtest-build"
  echo "bootstrap: prebuilt GTest does not link here; building it from $src"
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
        -DCMAKE_INSTALL_PREFIX="$TESSERA_DEPS/gtest" >/dev/null &&
  cmake --build "$b" -j"$(nproc)" >/dev/null && cmake --install "$b" >/dev/null
}

if _ts_bootstrap; then
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  export CMAKE_PREFIX_PATH="$TESSERA_DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$TESSERA_DEPS/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$_ts_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$_ts_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$_ts_lib/pkgconfig:$TESSERA_DEPS/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  _ts_gtest_dir="$_ts_lib/cmake/GTest"
  if ! _ts_gtest_links; then
    _ts_gtest_from_source && _ts_gtest_dir=$(dirname "$(find "$TESSERA_DEPS/gtest" -name GTestConfig.cmake | head -1)")
  fi
  TESSERA_CMAKE_DEP_ARGS="-Dfmt_DIR=$_ts_lib/cmake/fmt -Dnlohmann_json_DIR=$TESSERA_DEPS/usr/share/cmake/nlohmann_json -DGTest_DIR=$_ts_gtest_dir"
  export TESSERA_CMAKE_DEP_ARGS
  echo "bootstrap: dependencies in $TESSERA_DEPS (GTest from $_ts_gtest_dir)"
else
  echo "bootstrap: failed" >&2
  false
fi
