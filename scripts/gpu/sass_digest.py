#!/usr/bin/env python3
"""Where inside a kernel the time goes: a digest of Nsight Compute's source page at the SASS level
(scripts/gpu/ncu_source.sh collects it) — warp-state samples and executed instructions per opcode,
per phase between barriers (BAR / WARPSYNC / EXIT close a phase: the stretches of a kernel its
__syncthreads() delimit) with the stall reasons its samples carry, the reasons over the whole
kernel, and the hottest instructions.

    scripts/gpu/sass_digest.py source.csv     (ncu -i REP --page source --csv --print-source sass)

Reading it: an opcode's share of the samples against its share of the instructions says where
warps wait (a LDG / LDS / HMMA whose samples far exceed its count is waited on); a phase's samples
say which stretch of the kernel to shorten, and its reasons what it waits on (barrier: at a
__syncthreads, whose samples land on the first instruction after it — the next phase's; long_sb:
global / local memory; short_sb: shared memory, shuffles, MUFU; mio: the shared-memory / MUFU queue
full; wait: fixed-latency dependencies); the hottest lines name the instruction a stall lands on
(usually the first use of a late operand).
"""
import csv
import re
import sys
from collections import Counter

OPCODE = re.compile(r"(@!?U?P\w+\s+)?([A-Z0-9_.]+)")


def number(row, i):
    if i is None or i >= len(row):
        return 0.0
    try:
        return float(row[i].replace(",", ""))
    except ValueError:
        return 0.0


def column(header, *names):
    for name in names:
        for i, c in enumerate(header):
            if name.lower() in c.lower():
                return i
    return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = list(csv.reader(open(sys.argv[1], errors="replace")))
    at = next((i for i, r in enumerate(rows) if "Source" in [c.strip() for c in r]), None)
    if at is None:
        print(f"sass_digest: no 'Source' column in {sys.argv[1]}", file=sys.stderr)
        return 1
    header = [c.strip() for c in rows[at]]
    src = header.index("Source")
    samples = column(header, "Warp Stall Sampling (All Samples)", "Warp Stall Sampling")
    executed = column(header, "Instructions Executed")
    # the per-reason sample columns (stall_barrier, …), not their "(Not Issued)" twins
    reasons = [(i, c[len("stall_"):]) for i, c in enumerate(header)
               if c.startswith("stall_") and "Not Issued" not in c]
    by_op, by_op_x, by_reason = Counter(), Counter(), Counter()
    phases, hot = [], []
    cur = [0.0, 0.0, 0, None, Counter()]  # samples, executed, instructions, first line, reasons
    total_s = total_x = 0.0
    line = 0
    for row in rows[at + 1:]:
        text = row[src].strip() if src < len(row) else ""
        if not text:
            continue
        m = OPCODE.match(text)
        op = (m.group(2) if m else text.split()[0]).split(".")[0]
        s, x = number(row, samples), number(row, executed)
        total_s, total_x = total_s + s, total_x + x
        by_op[op] += s
        by_op_x[op] += x
        for i, r in reasons:
            v = number(row, i)
            cur[4][r] += v
            by_reason[r] += v
        cur = [cur[0] + s, cur[1] + x, cur[2] + 1, line if cur[3] is None else cur[3], cur[4]]
        hot.append((s, line, text))
        if op in ("BAR", "EXIT", "WARPSYNC"):
            phases.append((cur[3], line, cur[0], cur[1], cur[2], text, cur[4]))
            cur = [0.0, 0.0, 0, None, Counter()]
        line += 1
    if cur[2]:
        phases.append((cur[3], line - 1, cur[0], cur[1], cur[2], "(end)", cur[4]))
    pct = lambda v, t: 100.0 * v / t if t else 0.0
    print(f"{line} instructions; {total_s:.0f} samples; {total_x:.0f} warp instructions executed\n")
    print("| opcode | samples % | executed % |\n|---|---:|---:|")
    for op, s in by_op.most_common(25):
        print(f"| {op} | {pct(s, total_s):.1f} | {pct(by_op_x[op], total_x):.1f} |")
    top = lambda c, t: ", ".join(f"{r} {pct(v, t):.0f}" for r, v in c.most_common(3) if v > 0)
    if reasons:
        print("\n| stall reason | samples % |\n|---|---:|")
        for r, v in by_reason.most_common(12):
            print(f"| {r} | {pct(v, total_s):.1f} |")
    print("\n| phase (lines) | samples % | executed % | instructions | top reasons (% of its samples) "
          "| closed by |")
    print("|---|---:|---:|---:|---|---|")
    for first, last, s, x, n, end, rs in phases:
        if pct(s, total_s) >= 0.5:
            why = top(rs, sum(rs.values()))
            print(f"| {first}–{last} | {pct(s, total_s):.1f} | {pct(x, total_x):.1f} | {n} | {why} | `{end[:50]}` |")
    print("\n| line | samples % | instruction |\n|---:|---:|---|")
    for s, n, text in sorted(hot, reverse=True)[:30]:
        print(f"| {n} | {pct(s, total_s):.1f} | `{text[:90]}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
