#!/usr/bin/env python3
"""Where a prefill's GPU time goes: from the same GPU trace as timeline.py (Nsight Systems'
cuda_gpu_trace CSV, or CUPTI's through kernel_trace.cpp), the busiest window of the run — kernels
with no host gap longer than --gap-us between them, the window with the most kernel time: the
prefill of a `tessera bench --gen 1` run, its chunks included — and per kernel name its launches,
kernel time and share of the window's kernel time. Kernel times, not charges: prefill kernels are
long, their overlap small.

    scripts/gpu/prefill_profile.py trace_cuda_gpu_trace.csv [--gap-us 2000] [--top 25]
"""
import argparse
import pathlib
import sys
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timeline import read_trace  # noqa: E402  the trace's kernels, names shortened as ncu's summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--gap-us", type=float, default=2000.0, help="a longer host gap ends a window")
    ap.add_argument("--top", type=int, default=25, help="kernels listed; the rest in one row")
    a = ap.parse_args()
    rows = read_trace(a.trace)
    if not rows:
        print("prefill_profile: no kernels in the trace", file=sys.stderr)
        return 1
    windows, cur, end = [], [], 0.0
    for k in rows:
        if cur and k[0] - end > a.gap_us * 1000:
            windows.append(cur)
            cur = []
        end = k[1] if not cur else max(end, k[1])
        cur.append(k)
    windows.append(cur)
    busy = max(windows, key=lambda w: sum(e - s for s, e, _ in w))
    total = sum(e - s for s, e, _ in busy)
    span = max(e for _, e, _ in busy) - busy[0][0]
    time, count = defaultdict(float), defaultdict(int)
    for s, e, name in busy:
        time[name] += e - s
        count[name] += 1
    print(f"the busiest of {len(windows)} windows: {len(busy)} kernels, {total / 1e6:.2f} ms of kernel time "
          f"in a span of {span / 1e6:.2f} ms\n")
    print("| kernel | launches | time (ms) | mean (us) | share |")
    print("|---|---:|---:|---:|---:|")
    ranked = sorted(time, key=lambda n: -time[n])
    for name in ranked[: a.top]:
        print(f"| {name} | {count[name]} | {time[name] / 1e6:.2f} | {time[name] / count[name] / 1e3:.1f} | "
              f"{100 * time[name] / total:.1f}% |")
    rest = ranked[a.top:]
    if rest:
        t = sum(time[n] for n in rest)
        print(f"| {len(rest)} others | {sum(count[n] for n in rest)} | {t / 1e6:.2f} | | {100 * t / total:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
