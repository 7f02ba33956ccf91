#!/usr/bin/env bash
# Runs HERE (no GPU needed): one kernel's SASS as the project builds it for sm_90a, its registers and
# spills (ptxas -v) and ptxas's warnings about it (C7518: wgmma serialized), and its static
# instruction counts between barriers (BAR / EXIT / RET close a
# stretch) by opcode — for trimming a kernel's instructions before device time is spent on it.
# Needs the CUDA build tree (cmake --preset cuda: its compile_commands.json gives the flags) and
# cuobjdump, which the CUDA toolkit here lacks: fetched once from PyPI (nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm) into
# build/tools/. The listing goes to build/tools/NAME.sass (one "stretch instruction" line each).
#   scripts/gpu/sass_local.sh src/kernels/cuda/fast_gdn_chunked16.cu wy_prep_rt_kernelILb1E
#   scripts/gpu/sass_local.sh src/kernels/cuda/fast_gdn_chunked16_rt.cu wy_state16_rt_kernelILi1E
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { sed -n 2,9p "$0"; exit 2; }
src=$1 name=$2
build=build/cuda tools=build/tools
[ -f $build/compile_commands.json ] || { echo "sass_local: configure the CUDA build first (cmake --preset cuda)"; exit 1; }
cuobjdump=$(command -v cuobjdump || true)
if [ -z "$cuobjdump" ]; then
  cuobjdump=$(find $tools/cuobjdump -name cuobjdump -type f 2>/dev/null | head -1 || true)
  if [ -z "$cuobjdump" ]; then
    mkdir -p $tools/cuobjdump
    pip download --quiet --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d $tools/cuobjdump >/dev/null
    (cd $tools/cuobjdump && for w in ./*.whl; do python3 -m zipfile -e "$w" x; done)
    cuobjdump=$(find $tools/cuobjdump -name cuobjdump -type f | head -1)
    chmod +x "$cuobjdump" "$(dirname "$cuobjdump")/nvdisasm"
  fi
fi
export PATH="$(cd "$(dirname "$cuobjdump")" && pwd):$PATH"  # (cuobjdump runs nvdisasm)
mkdir -p $tools
# The file's compile command from the build tree, turned into a cubin build for sm_90a with ptxas -v.
cmd=$(python3 scripts/gpu/cubin_command.py "$src" "$build/compile_commands.json")
[ -n "$cmd" ] || { echo "sass_local: $src is not in $build/compile_commands.json"; exit 1; }
cubin=$tools/$(basename "$src" .cu).cubin
log=$( (cd $build && $cmd -o "$OLDPWD/$cubin") 2>&1)
echo "$log" | grep -A3 "Compiling entry.*$name" | grep -E "spill|Used" || true
echo "$log" | grep -E "(Performance Loss|warning).*$name" || true  # e.g. C7518: wgmma serialized
"$cuobjdump" -sass "$cubin" >"$tools/$(basename "$src" .cu).sass"
python3 - "$tools/$(basename "$src" .cu).sass" "$name" "$tools/$name.sass" <<'PY'
import re, sys
from collections import Counter
lines = open(sys.argv[1]).read().split("\n")
name, listing = sys.argv[2], sys.argv[3]
ins, on = [], False
for l in lines:
    if "Function :" in l:
        on = name in l
        continue
    if on:
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
        if m:
            ins.append(m.group(2).strip())
if not ins:
    sys.exit(f"sass_local: no kernel matching {name}")
stretches, cur, n = [], Counter(), 0
with open(listing, "w") as f:
    for i in ins:
        f.write(f"{len(stretches)} {i}\n")
        op = re.sub(r"^@!?U?P\w+\s+", "", i).split()[0]
        cur[op.split(".")[0]] += 1
        n += 1
        if op.startswith(("BAR", "EXIT", "RET")):
            stretches.append((n, cur))
            cur, n = Counter(), 0
    stretches.append((n, cur))
print(f"{name}: {len(ins)} instructions (listing: {listing})")
for k, (n, c) in enumerate(stretches):
    if n > 5:
        print(f"  stretch {k}: {n}: " + ", ".join(f"{a} {b}" for a, b in c.most_common(9)))
PY
