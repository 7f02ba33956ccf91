#!/usr/bin/env python3
"""Where a decode step's wall time goes with CUDA graphs and PDL on: from an Nsight Systems GPU
trace (one row per kernel, graph nodes traced), each kernel is charged the time from the previous
kernel's end to its own end — what it adds to the step, overlap with its predecessor excluded —
so the charges of a step sum to the step's span. ncu's kernel times (kernel_profile.py) add up
to more than a replayed step: kernels there run alone, without launch overlap.

    nsys profile --cuda-graph-trace=node -o run <command>
    nsys stats --report cuda_gpu_trace --format csv --output trace run.nsys-rep
    scripts/gpu/timeline.py trace_cuda_gpu_trace.csv [--steps 8] [--gap-us 30]

Steps are runs of kernels with no gap longer than --gap-us between one's end and the next one's
start (the host's work between decode steps); the decode steps are the last --steps runs of the
most common length (of at least --min-kernels). Prints per kernel name: launches a step, mean kernel time, mean charge, and
the charge a step, and the mean start lag (its start minus its predecessor's end: negative when
PDL let it start early). --sequence FILE writes every position of the step in launch order.
"""
import argparse
import csv
import pathlib
import sys
from collections import Counter, defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kernel_profile import short  # noqa: E402  kernel names as the ncu summary shortens them


def read_trace(path):
    """The kernels of a cuda_gpu_trace CSV (memcpys left out) as (start, end, short name) in ns,
    by start."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            name = r.get("Name", "")
            if not name or name.startswith("[CUDA mem"):
                continue
            start = float(r["Start (ns)"])
            rows.append((start, start + float(r["Duration (ns)"]), short(name)))
    rows.sort()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--gap-us", type=float, default=30.0)
    ap.add_argument("--min-kernels", type=int, default=3, help="shorter runs are not steps")
    ap.add_argument("--sequence", help="write each position of the step (means over the steps) to this file")
    a = ap.parse_args()
    rows = read_trace(a.trace)
    runs, cur = [], []
    for k in rows:
        if cur and k[0] - max(e for _, e, _ in cur[-4:]) > a.gap_us * 1000:
            runs.append(cur)
            cur = []
        cur.append(k)
    if cur:
        runs.append(cur)
    length = Counter(len(r) for r in runs if len(r) >= a.min_kernels).most_common(1)
    if not length:
        print("timeline: no decode steps found", file=sys.stderr)
        return 1
    steps = [r for r in runs if len(r) == length[0][0]][-a.steps:]
    n = len(steps)
    dur, charge, lag, count = defaultdict(float), defaultdict(float), defaultdict(float), defaultdict(int)
    pos = [[0.0, 0.0, 0.0] for _ in range(length[0][0])]  # per position: time, charge, lag
    spans = []
    for st in steps:
        spans.append(max(e for _, e, _ in st) - st[0][0])
        prev_end = st[0][0]
        for i, (s, e, name) in enumerate(st):
            c = max(0.0, e - prev_end)
            dur[name] += e - s
            charge[name] += c
            lag[name] += s - prev_end
            count[name] += 1
            pos[i][0] += e - s
            pos[i][1] += c
            pos[i][2] += s - prev_end
            prev_end = max(prev_end, e)
    span = sum(spans) / n
    print(f"{n} decode steps of {length[0][0]} kernels: {span / 1000:.1f} us a step "
          f"(min {min(spans) / 1000:.1f}, max {max(spans) / 1000:.1f})\n")
    print("| kernel | a step | mean time (us) | mean charge (us) | charge a step (us) | share | mean start lag (us) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in sorted(charge, key=lambda k: -charge[k]):
        c = count[name] / n
        print(f"| {name} | {c:.0f} | {dur[name] / count[name] / 1000:.2f} | {charge[name] / count[name] / 1000:.2f} | "
              f"{charge[name] / n / 1000:.1f} | {100 * charge[name] / n / span:.1f} % | "
              f"{lag[name] / count[name] / 1000:.2f} |")
    if a.sequence:
        with open(a.sequence, "w") as f:
            f.write("| # | kernel | time (us) | charge (us) | start lag (us) |\n|---:|---|---:|---:|---:|\n")
            for i, (t, c, l) in enumerate(pos):
                f.write(f"| {i} | {steps[-1][i][2]} | {t / n / 1000:.2f} | {c / n / 1000:.2f} | {l / n / 1000:.2f} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
