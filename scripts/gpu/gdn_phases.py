#!/usr/bin/env python3
"""Digests one stamped chunked GDN call (gdn_phases.sh; the layout: src/kernels/cuda/fast_gdn_phases.h).

  gdn_phases.py PREFIX [TITLE]   reads PREFIX_prep.csv and PREFIX_pass.csv

Prints the prep's span, its items' median cycles per phase — all of them, then by when they started
(the first wave, the rest in thirds of the span) and for the SMs with the fewest items (those set
aside for the state pass) — the items an SM, the state pass's time a value head split into its chunks'
own time, its waits on the prep (a chunk begun after the one before it ended, its prep item ending
later than that) and the other gaps (the boxes' arrival), and its chunks of value head 0: when each
became ready (its producer saw the flag), began and ended, in µs from the prep's first start.
"""
import csv
import statistics
import sys

PHASES = ["K,Q rows+Γ", "maxima", "f16 rows", "K·Kᵀ,Q·Kᵀ", "P,T diag", "T rest", "T',T''", "W,U+publish"]


def rows(path):
    with open(path) as f:
        return [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]


def phase_medians(items):
    return [int(statistics.median(r["c%d" % (k + 1)] - r["c%d" % k] for r in items)) for k in range(8)]


def line(label, items, t0):
    dur = statistics.median((r["gt_end"] - r["gt_start"]) / 1000 for r in items)
    cyc = statistics.median(r["c8"] - r["c0"] for r in items)
    cells = " | ".join("%6d" % c for c in phase_medians(items))
    return "| %-22s | %5d | %7.2f | %6d | %s |" % (label, len(items), dur, cyc, cells)


def pass_split(prep, chunks):
    """Medians over the stamped value heads (sequence 0) of the state pass's chunks' own time, its
    waits on the prep and its other gaps, µs, from each block's start — or None where the items'
    chunk-major order (item = chunk · heads a chunk + head) cannot be read off the stamps."""
    heads = sorted({r["head"] for r in chunks})
    n_chunks = max(r["chunk"] for r in chunks) + 1
    end_of = {r["item"]: r["gt_end"] for r in prep}
    per_chunk = (max(end_of) + 1) // n_chunks
    if per_chunk * n_chunks != max(end_of) + 1 or per_chunk < len(heads):
        return None
    by = {(r["head"], r["chunk"]): r for r in chunks}
    work, wait, other = [], [], []
    for h in heads:
        w = pw = og = 0
        prev = by[(h, 0)]["block_start"] if (h, 0) in by else 0
        for c in range(n_chunks):
            r = by.get((h, c))
            if r is None or not prev:
                break
            gap = max(0, r["start"] - prev)
            on_prep = min(gap, max(0, end_of.get(c * per_chunk + h, 0) - prev))
            w, pw, og, prev = w + r["end"] - r["start"], pw + on_prep, og + gap - on_prep, r["end"]
        work.append(w / 1000)
        wait.append(pw / 1000)
        other.append(og / 1000)
    return len(heads), statistics.median(work), statistics.median(wait), statistics.median(other)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    prefix, title = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    prep, chunks = rows(prefix + "_prep.csv"), rows(prefix + "_pass.csv")
    if not prep:
        sys.exit("gdn_phases: no stamped prep items in " + prefix + "_prep.csv (not the lean prep?)")
    t0 = min(r["gt_start"] for r in prep)
    end = max(r["gt_end"] for r in prep)
    ghz = statistics.median(
        (r["c8"] - r["c0"]) / (r["gt_end"] - r["gt_start"]) for r in prep if r["gt_end"] > r["gt_start"])
    print("## %s\n" % title)
    print("prep: %d items from 0 to %.1f µs (SM clock ~%.2f GHz)" % (len(prep), (end - t0) / 1000, ghz))
    print("\n| items | n | µs | cycles | " + " | ".join(PHASES) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(PHASES))
    print(line("all", prep, t0))
    span = (end - t0) / 1000
    windows = [("first wave (< 1 µs)", 0, 1)] + [
        ("started %.0f–%.0f µs" % (max(1, span * k / 3), span * (k + 1) / 3), max(1, span * k / 3),
         span * (k + 1) / 3) for k in range(3)
    ]
    for label, lo, hi in windows:
        sel = [r for r in prep if lo <= (r["gt_start"] - t0) / 1000 < hi]
        if sel:
            print(line(label, sel, t0))
    per_sm = {}
    for r in prep:
        per_sm[r["sm"]] = per_sm.get(r["sm"], 0) + 1
    fewest = min(per_sm.values())
    aside = [r for r in prep if per_sm[r["sm"]] == fewest]
    if fewest < max(per_sm.values()):
        print(line("SMs of %d items" % fewest, aside, t0))
    counts = {}
    for n in per_sm.values():
        counts[n] = counts.get(n, 0) + 1
    print("\nitems an SM: " + ", ".join("%d on %d SMs" % (n, counts[n]) for n in sorted(counts)))
    if chunks:
        starts = [r["block_start"] for r in chunks if r["chunk"] == 0 and r["block_start"]]
        split = pass_split(prep, chunks)
        if split:
            print("\nstate pass a value head (medians over %d heads of sequence 0, from its block's start): its "
                  "chunks %.2f µs, waiting on the prep %.2f, other gaps %.2f (the boxes' arrival)" % split)
        else:
            print("\nstate pass a value head: the items' order is not chunk-major over the stamped heads (skipped)")
        print("\nstate pass: blocks start %.1f µs, last chunk ends %.1f µs; value head 0:" % (
            (min(starts) - t0) / 1000 if starts else float("nan"), (max(r["end"] for r in chunks) - t0) / 1000))
        print("\n| chunk | ready | begun | ended | µs |\n|---:|---:|---:|---:|---:|")
        for r in (r for r in chunks if r["head"] == 0):
            us = lambda x: (x - t0) / 1000 if x else float("nan")
            print("| %d | %.1f | %.1f | %.1f | %.2f |" % (r["chunk"], us(r["ready"]), us(r["start"]), us(r["end"]),
                                                    (r["end"] - r["start"]) / 1000))


if __name__ == "__main__":
    main()
