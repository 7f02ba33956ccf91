#!/usr/bin/env python3
# Where a decode step's GPU time goes between its kernels, from a kernel_trace.cpp CSV recorded
# with KERNEL_TRACE_API=memcpy (kernels and copies, no API tracing): the steps are cut at each
# launch of the kernel named by --marker (one a step: the fast argmax's merge), and for the last --steps steps
# this prints the period, the time the GPU ran something, and the idle gaps longer than --min-gap
# with what came before and after each.
#   gpu_gap.py TRACE.csv [--marker argmax_merge] [--steps 20] [--min-gap 1.0]
import argparse
import csv
import statistics

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--marker", default="argmax_merge")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--min-gap", type=float, default=1.0, help="us")
args = ap.parse_args()

ev = []
for r in csv.DictReader(open(args.trace)):
    name = r["Name"]
    if name.startswith("api:"):
        continue
    plain = name.replace("(anonymous namespace)::", "").removeprefix("void ")
    short = plain.split("(")[0].split("<")[0].split("::")[-1][:48]
    ev.append((int(r["Start (ns)"]), int(r["Start (ns)"]) + int(r["Duration (ns)"]), short, name))
ev.sort()
marks = [i for i, e in enumerate(ev) if args.marker in e[3]]
if len(marks) < 3:
    raise SystemExit(f"{len(marks)} '{args.marker}' launches: not enough steps")
sel = marks[-(args.steps + 1):]
periods, busy, idle = [], [], []
gaps = {}
for a, b in zip(sel, sel[1:]):
    win = ev[a:b]
    t0, t1 = win[0][0], ev[b][0]
    periods.append((t1 - t0) / 1e3)
    covered, end = 0, t0
    for s, e, name, _ in win:  # union of busy intervals
        if e > end:
            covered += e - max(s, end)
            end = e
    busy.append(covered / 1e3)
    idle.append((t1 - t0 - covered) / 1e3)
    end, prev = win[0][1], win[0][2]
    for s, e, name, _ in win[1:] + [ev[b]]:
        g = (s - end) / 1e3
        if g >= args.min_gap:
            gaps.setdefault((prev, name), []).append(g)
        if e > end:
            end, prev = e, name
per_kernel = {}
for a, b in zip(sel, sel[1:]):
    for s_, e_, name, _ in ev[a:b]:
        per_kernel.setdefault(name, [0, 0])
        per_kernel[name][0] += e_ - s_
        per_kernel[name][1] += 1
print(f"{len(periods)} steps: period median {statistics.median(periods):.1f} us, GPU busy {statistics.median(busy):.1f}, "
      f"idle {statistics.median(idle):.1f}")
for (p, n), v in sorted(gaps.items(), key=lambda x: -sum(x[1]))[:12]:
    print(f"  {len(v):3d}x median {statistics.median(v):7.1f} us idle  {p}  ->  {n}")
n_steps = len(periods)
print("time a step, by kernel (mean over the steps):")
for name, (ns, count) in sorted(per_kernel.items(), key=lambda x: -x[1][0])[:16]:
    print(f"  {ns / n_steps / 1e3:8.1f} us  {count / n_steps:6.1f} launches  {name}")
