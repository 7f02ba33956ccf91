#!/usr/bin/env bash
# Runs HERE (no GPU needed): every kernel of one or more CUDA sources that ptxas spills or warns
# about (C75xx: wgmma serialized, warpgroup.arrive injected, …), as the project builds them for
# sm_90a — a file's whole audit where sass_local.sh looks at one kernel. One line a kernel: spill
# stores / loads in bytes, or the warning's code, and the kernel's demangled name (its template
# arguments tell the form). Needs the CUDA build tree (cmake --preset cuda).
#   scripts/gpu/ptxas_audit.sh src/kernels/cuda/fast_moe_wgmma_tma.cu src/kernels/cuda/fast_moe_decode_dp4a.cu
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n 2,7p "$0"; exit 2; }
build=build/cuda
[ -f $build/compile_commands.json ] || { echo "ptxas_audit: configure the CUDA build first (cmake --preset cuda)"; exit 1; }
for src in "$@"; do
  cmd=$(python3 scripts/gpu/cubin_command.py "$src" "$build/compile_commands.json")
  [ -n "$cmd" ] || { echo "ptxas_audit: $src is not in $build/compile_commands.json"; exit 1; }
  echo "== $src"
  (cd $build && $cmd -o /tmp/ptxas_audit_$$.cubin) 2>&1 | python3 -c '
import re, subprocess, sys
rows, cur = [], None
def name(m):
    try:
        return subprocess.run(["c++filt", m], capture_output=True, text=True).stdout.strip()
    except OSError:
        return m
for l in sys.stdin:
    m = re.search(r"Compiling entry function \x27([^\x27]+)\x27", l)
    if m:
        cur = m.group(1)
        continue
    m = re.search(r"\((C75\d\d)\).*function \x27([^\x27]+)\x27", l)
    if m:
        rows.append((m.group(1), m.group(2)))
        continue
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", l)
    if m and cur and m.group(1) + m.group(2) != "00":
        rows.append((f"spills {m.group(1)} / {m.group(2)}", cur))
for what, k in rows:
    short = name(k).replace("(anonymous namespace)::", "").replace("tessera::cuda::fast::", "")
    print(f"  {what:20s} {short[:200]}")
if not rows:
    print("  no spills, no C75xx warnings")
'
  rm -f /tmp/ptxas_audit_$$.cubin
done
