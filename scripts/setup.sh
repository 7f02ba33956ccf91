#!/usr/bin/env bash
# Installs what tessera needs on a Debian machine: build tools and libraries (apt) and the
# Python test tools (pip). Idempotent: run it as often as you like.
#   scripts/setup.sh          build dependencies only
#   scripts/setup.sh --test   also the Python packages the tests compare against
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Build: compiler + CMake; nlohmann-json (config.json, HTTP bodies), fmt (formatting; g++-12 has
# no <format>), cpp-httplib (the OpenAI server), GoogleTest (tests), xxhash (prefix-cache hashes).
APT_PACKAGES=(build-essential cmake git pkg-config python3 python3-pip
              nlohmann-json3-dev libfmt-dev libcpp-httplib-dev libgtest-dev libxxhash-dev)
# Tests only: clang and its libFuzzer runtime for the GGUF fuzzer (scripts/fuzz.sh).
if [ "${1:-}" = "--test" ]; then APT_PACKAGES+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--test" ]; then
  # Test-time Python tools: the reference implementations tessera is compared against.
  PY=${PYTHON:-python3}
  if ! $PY -c "import numpy, pytest, gguf, tokenizers, transformers, jinja2, safetensors" 2>/dev/null; then
    echo "setup: installing Python test packages"
    $PY -m pip install -q --disable-pip-version-check -r python/requirements-test.txt \
      || $PY -m pip install -q --disable-pip-version-check --break-system-packages -r python/requirements-test.txt
  fi
fi
echo "setup: ok"
