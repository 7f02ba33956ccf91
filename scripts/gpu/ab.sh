#!/usr/bin/env bash
# Runs ON the GPU machine (or anywhere tessera is built): an end-to-end A/B of environment
# settings — `tessera bench` on one model in alternating rounds, each setting once a round, so a
# drift of the machine falls on every setting alike. Prints each run's table rows after its
# setting, then the rows of every setting side by side.
#   scripts/gpu/ab.sh [--rounds N] [--model FILE] SETTING... -- BENCH ARGS
# SETTING: "" for the defaults, or space-separated VAR=value pairs. BENCH ARGS go to `tessera
# bench` as they are. The model defaults to the full-size synthetic flagship (written by `tessera
# synth` if missing, ~20 GB, as bench.sh does).
#   scripts/gpu/ab.sh "" "TESSERA_GEMV=bulk" -- --device cuda --ctx 4096 --batch 1 --gen 128 \
#       --repeat 2 --prefill-chunk 2048
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${TESSERA_BIN:-build/cuda/tessera}
MODEL=/tmp/qwen3.6-35b-a3b-q4_0.gguf
ROUNDS=2
settings=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --) shift; break ;;
    *) settings+=("$1"); shift ;;
  esac
done
[ ${#settings[@]} -ge 1 ] || { sed -n 2,11p "$0"; exit 2; }
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "ab: --rounds takes a count >= 1, not '$ROUNDS'"; exit 2; }
[ -x "$BIN" ] || { echo "ab: $BIN is not built"; exit 1; }
[ -f scripts/gpu/bootstrap.sh ] && [ -d .debs ] && source scripts/gpu/bootstrap.sh >/dev/null
if [ ! -f "$MODEL" ]; then
  "$BIN" synth --arch qwen35moe --preset qwen3.6-35b-a3b --type q4_0 --out "$MODEL" 2>&1 | tail -1
  [ -f "$MODEL" ] || { echo "ab: no model at $MODEL"; exit 1; }
fi
for s in "${settings[@]}"; do
  for kv in $s; do
    [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "ab: '$kv' in setting '$s' is not VAR=value"; exit 2; }
  done
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= ROUNDS; ++r)); do
  for i in "${!settings[@]}"; do
    s=${settings[$i]}
    echo "== round $r: ${s:-defaults}"
    # shellcheck disable=SC2086  # the setting's pairs are separate words
    out=$(env $s "$BIN" bench --model "$MODEL" "$@" 2>&1)
    rc=$?
    rows=$(grep -E '^\| *[0-9]' <<<"$out")
    if [ $rc -ne 0 ] || [ -z "$rows" ]; then
      tail -5 <<<"$out"
      echo "ab: tessera bench failed with ${s:-the defaults} (rc $rc)"
      exit 1
    fi
    echo "$rows"
    while IFS= read -r row; do printf '%s\t%s\t%s\n' "$i" "$r" "$row" >>"$results"; done <<<"$rows"
  done
done
echo
echo "== side by side (the bench's header: $(grep -m1 -E '^\| *[a-z]' <<<"$out"))"
for i in "${!settings[@]}"; do
  echo "${settings[$i]:-defaults}:"
  awk -F'\t' -v i="$i" '$1 == i { print "  round " $2 ": " $3 }' "$results"
done
