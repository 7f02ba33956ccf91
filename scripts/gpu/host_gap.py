#!/usr/bin/env python3
# The host side of decode steps from a kernel_trace.cpp CSV recorded with KERNEL_TRACE_API=1: for
# the last few graph launches, every runtime call and copy between one launch and the next, and
# where the step's kernels begin and end on the GPU (times in us from the launch).
#   host_gap.py TRACE.csv [--steps 4]
import argparse
import csv

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--steps", type=int, default=4)
args = ap.parse_args()
ev = []
for r in csv.DictReader(open(args.trace)):
    ev.append((int(r["Start (ns)"]), int(r["Duration (ns)"]), r["Name"]))
ev.sort()
launches = [e for e in ev if e[2].startswith("api:cudaGraphLaunch")]
print(f"{len(launches)} graph launches")
sel = launches[-(args.steps + 2):-1]
for a, b in zip(sel, sel[1:]):
    t0 = a[0]
    win = [e for e in ev if t0 <= e[0] < b[0]]
    kern = [e for e in win if not e[2].startswith(("api:", "memcpy:"))]
    print(f"--- {(b[0] - t0) / 1e3:.1f} us from launch to launch; {len(kern)} kernels", end="")
    if kern:
        print(f", GPU busy {(kern[0][0] - t0) / 1e3:.1f} .. {(max(k[0] + k[1] for k in kern) - t0) / 1e3:.1f}")
    else:
        print()
    for st, du, name in win:
        if name.startswith(("api:", "memcpy:")):
            print(f"  +{(st - t0) / 1e3:9.1f}  {du / 1e3:8.1f} us  {name}")
    tail = [k for k in kern if k[0] + k[1] > (max(k[0] + k[1] for k in kern) if kern else 0) - 30000]
    for st, du, name in tail[-4:]:
        print(f"  +{(st - t0) / 1e3:9.1f}  {du / 1e3:8.1f} us  kernel {name[:60]}")
