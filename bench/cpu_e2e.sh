#!/usr/bin/env bash
# CPU end-to-end prefill / decode tok/s of random models through `tessera bench` (median of
# --repeat runs after a warm-up, markdown + JSON), next to the machine's limits (bench_membw).
# Models: dense Qwen3 (tiny, 0.6B) at bf16 and q4_0, and the hybrid MoE qwen35moe tiny preset.
# Usage: bench/cpu_e2e.sh [BUILD_DIR]   (env: BENCH_DIR for models and JSON, CTX, GEN, REPEAT)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/release}
OUT=${BENCH_DIR:-build/bench}
CTX=${CTX:-256}
GEN=${GEN:-32}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
"$B/bench_membw" 1
run() {  # arch preset type
  local f="$OUT/$1-$2-$3.gguf"
  [ -f "$f" ] || "$B/tessera" synth --arch "$1" --preset "$2" --type "$3" --out "$f" >/dev/null 2>"$OUT/synth.log" ||
    { cat "$OUT/synth.log" >&2; exit 1; }
  echo "## $1 $2 $3 ($(($(stat -c %s "$f") / 1000000)) MB)"
  "$B/tessera" bench --model "$f" --ctx "$CTX" --batch 1 --gen "$GEN" --repeat "$REPEAT" \
    --json "$OUT/e2e-$1-$2-$3.json"
}
for preset in tiny qwen3-0.6b; do
  for type in bf16 q4_0; do run qwen3 "$preset" "$type"; done
done
run qwen35moe tiny q4_0
