"""The chunked GDN's prep / state-pass pairs in a kernel_trace.cpp CSV (scripts/gpu/gdn_trace.sh):
per call, the prep's time and the pass's start and end from the prep's start (µs). The calls come in
bench rows of PER_ROW calls (bench_fast_gdn's --warmup 2 + --runs 6 by default: one filter may take
several rows, e.g. "T=1024" the 4 × 1,024 batch too; an F16Rt row adds two calls of its accuracy
check); per row, medians past its two warm-up calls."""
import csv
import statistics
import sys


def pairs(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["Start (ns)"]), int(r["Duration (ns)"]), r["Name"]))
    rows.sort()
    out = []
    for i, (start, dur, name) in enumerate(rows):
        if "prep" in name and i + 1 < len(rows) and "state" in rows[i + 1][2]:
            start2, dur2, _ = rows[i + 1]
            out.append((dur / 1e3, (start2 - start) / 1e3, (start2 + dur2 - start) / 1e3))
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: gdn_pairs.py TRACE.csv LABEL [PER_ROW (default 8)]")
    per_row = int(sys.argv[3]) if len(sys.argv) == 4 else 8
    calls = pairs(sys.argv[1])
    if not calls:
        sys.exit(f"gdn_pairs: no prep / state-pass pair in {sys.argv[1]}")
    for row in range(0, len(calls), per_row):
        group = calls[row:row + per_row]
        timed = group[2:] or group
        med = [statistics.median(c[k] for c in timed) for k in range(3)]
        print(f"{sys.argv[2]}, row {row // per_row + 1}: {len(timed)} calls; prep {med[0]:.1f} us; "
              f"the pass from {med[1]:.1f} to {med[2]:.1f}")
        print("  each (prep / pass start / pass end): " + " ".join("%.1f/%.1f/%.1f" % c for c in timed))


if __name__ == "__main__":
    main()
