#!/usr/bin/env bash
# CPU end-to-end prefill / decode tok/s of dense random models (tiny and Qwen3-0.6B shapes) at
# bf16 and q4_0, next to the machine's read bandwidth. Usage: bench/cpu_e2e.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}
OUT=${BENCH_DIR:-build/bench}
mkdir -p "$OUT"
"$B/bench_membw" 2
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 500 + 3) for i in range(256)))")
for preset in tiny qwen3-0.6b; do
  for type in bf16 q4_0; do
    f="$OUT/$preset-$type.gguf"
    [ -f "$f" ] || "$B/tessera" synth --arch qwen3 --preset "$preset" --type "$type" --out "$f" 2>/dev/null
    size=$(stat -c %s "$f")
    for rep in 1 2 3; do
      "$B/tessera" run "$f" --tokens "$PROMPT" --max-tokens 32 --ignore-eos --ids --temperature 0 2>&1 >/dev/null |
        grep -o 'prompt.*' | sed "s|^|$preset $type ($((size / 1000000)) MB): |"
    done
  done
done
