#!/usr/bin/env bash
# The README's first command: set up, build, make the embedded default model, serve it and
# answer a chat request through the OpenAI-compatible API. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target tessera
BIN=build/release/tessera
MODEL=build/default-model.gguf
[ -f "$MODEL" ] || "$BIN" synth --arch qwen3 --preset tiny --out "$MODEL"
echo "== tessera serve $MODEL, and one chat request through the OpenAI API =="
python3 scripts/demo_chat.py "$BIN" "$MODEL" "Hello! Who are you?"
