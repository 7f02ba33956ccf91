#!/usr/bin/env bash
# The README's first command: set up, build, make the embedded default model and answer a
# chat request with it. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target tessera
BIN=build/release/tessera
MODEL=build/default-model.gguf
[ -f "$MODEL" ] || "$BIN" synth --arch qwen3 --preset tiny --out "$MODEL"
echo "== tessera run $MODEL --chat =="
"$BIN" run "$MODEL" --chat --prompt "Hello! Who are you?" --max-tokens 32 --temperature 0.8 --seed 1
