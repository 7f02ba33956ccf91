#!/usr/bin/env python3
"""Summarise an Nsight Compute CSV (one row per kernel launch, metric gpu__time_duration.sum)
into where the GPU time goes: total time per kernel name, its share, launches and mean.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        --log-file prof.csv  <command>
    scripts/gpu/kernel_profile.py prof.csv [--skip N] [--top 30]

--skip N drops the first N launches (warm-up, weight upload). Kernel names are shortened to the
function name without template arguments so instances of one kernel add up; --full keeps them.
--minus B.csv subtracts another run's totals per kernel (e.g. the same bench with fewer decode
steps, leaving only the extra steps); --per N divides every figure by N (e.g. per decode step).
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def short(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*$", "", name)          # drop the argument list
    depth, out = 0, []
    for ch in name:                             # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    return re.sub(r"^(void|tessera::\S*::)\s*", "", name).split("::")[-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--minus")
    ap.add_argument("--per", type=int, default=1)
    a = ap.parse_args()
    agg = aggregate(a.csv, a.skip, a.full)
    if a.minus:
        for k, (ns, n) in aggregate(a.minus, a.skip, a.full).items():
            agg[k][0] -= ns
            agg[k][1] -= n
        agg = {k: v for k, v in agg.items() if v[1] > 0 and v[0] > 0}
    if not agg:
        print("kernel_profile: no kernel rows left")
        return 1
    per = max(a.per, 1)
    total = sum(v[0] for v in agg.values()) / per
    launches = sum(v[1] for v in agg.values()) / per
    print(f"{launches:.0f} launches, {total / 1e3:.1f} us of kernel time" + (f" per unit (/{per})" if per > 1 else "") + "\n")
    print("| kernel | total us | share | launches | mean us |")
    print("|---|---:|---:|---:|---:|")
    for k, (ns, n) in sorted(agg.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(f"| {k} | {ns / per / 1e3:.1f} | {100 * ns / per / total:.1f}% | {n / per:g} | {ns / n / 1e3:.2f} |")
    return 0


def aggregate(path, skip, full):
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]   # ncu prints its own log lines too
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
        rows.append((r["Kernel Name"], v * scale))
    agg = defaultdict(lambda: [0.0, 0])
    for name, ns in rows[skip:]:
        k = name if full else short(name)
        agg[k][0] += ns
        agg[k][1] += 1
    return agg


if __name__ == "__main__":
    sys.exit(main())
