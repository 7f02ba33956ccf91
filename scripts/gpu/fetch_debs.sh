#!/usr/bin/env bash
# Downloads (here, where apt works) the .deb files of the build dependencies that the GPU
# machine lacks into .debs/ (git-ignored). Carry them in a device call: carry: [".debs"].
# Only downloads: nothing is installed here. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

# What scripts/setup.sh installs as libraries, plus the runtime and -dev packages they need
# when unpacked into a prefix instead of installed (the -dev symlinks point into them):
#   libfmt9 (libfmt.so.9), libxxhash0, libcpp-httplib0.11 + what its pkg-config file and
#   httplib.h (built with OpenSSL/zlib/brotli support) require, and googletest (the sources,
#   to build GTest there if the prebuilt static libs of libgtest-dev do not link).
PACKAGES=(nlohmann-json3-dev libfmt-dev libfmt9 libgtest-dev googletest libxxhash-dev libxxhash0
          libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev libbrotli-dev libbrotli1)

mkdir -p .debs
# apt's sandbox user may not write here; download from a temp dir we own, then move.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 777 "$tmp"
(cd "$tmp" && apt-get download "${PACKAGES[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
n=$(ls "$tmp"/*.deb 2>/dev/null | wc -l)
if [ "$n" -ne "${#PACKAGES[@]}" ]; then
  echo "fetch_debs: expected ${#PACKAGES[@]} .deb files, got $n (try: apt-get update)" >&2
  exit 1
fi
rm -f .debs/*.deb
mv "$tmp"/*.deb .debs/
echo "fetch_debs: $(ls .debs/*.deb | wc -l) files, $(du -sh .debs | cut -f1) in .debs/"
