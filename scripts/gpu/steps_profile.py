#!/usr/bin/env python3
"""Where a decode step's GPU time goes when its kernels cannot be told apart by host gaps (many
concurrent requests: the scheduler's host work falls inside a step): two traces of the same
`tessera bench` run but for the tokens generated (timeline.sh's `steps` mode: 4 and 36), and per
kernel name the difference of their launches and kernel time divided by the steps between them.
Kernel times, not charges (timeline.py's): a step of 64 requests is milliseconds long, its
kernels' overlap small against them.

    scripts/gpu/steps_profile.py short.csv long.csv [--steps 32] [--top 30]
"""
import argparse
import pathlib
import sys
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timeline import read_trace  # noqa: E402  the trace's kernels, names shortened as ncu's summary


def totals(path):
    """Per kernel name: (launches, kernel time in ns) over the whole trace."""
    count, time = defaultdict(int), defaultdict(float)
    for start, end, name in read_trace(path):
        count[name] += 1
        time[name] += end - start
    return count, time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("short")
    ap.add_argument("long")
    ap.add_argument("--steps", type=int, default=32, help="decode steps the long run has over the short one")
    ap.add_argument("--top", type=int, default=30, help="kernels listed; the rest in one row")
    a = ap.parse_args()
    c0, t0 = totals(a.short)
    c1, t1 = totals(a.long)
    if not c1:
        print("steps_profile: no kernels in the long trace", file=sys.stderr)
        return 1
    names = set(c0) | set(c1)
    per_count = {n: (c1.get(n, 0) - c0.get(n, 0)) / a.steps for n in names}
    per_time = {n: (t1.get(n, 0.0) - t0.get(n, 0.0)) / a.steps for n in names}
    step = sum(max(v, 0.0) for v in per_time.values())
    print(f"{a.steps} decode steps between the traces: {step / 1e3:.1f} us of kernel time a step "
          f"({sum(max(v, 0.0) for v in per_count.values()):.0f} launches)\n")
    print("| kernel | launches a step | mean (us) | a step (us) | share |")
    print("|---|---:|---:|---:|---:|")
    ranked = sorted(names, key=lambda n: -per_time[n])
    for n in ranked[: a.top]:
        if per_time[n] <= 0:
            break
        mean = per_time[n] / per_count[n] if per_count[n] > 0 else 0.0
        print(f"| {n} | {per_count[n]:.1f} | {mean / 1e3:.1f} | {per_time[n] / 1e3:.1f} | "
              f"{100 * per_time[n] / step:.1f}% |")
    rest = [n for n in ranked[a.top:] if per_time[n] > 0]
    if rest:
        t = sum(per_time[n] for n in rest)
        print(f"| {len(rest)} others | {sum(per_count[n] for n in rest):.1f} | | {t / 1e3:.1f} | "
              f"{100 * t / step:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
