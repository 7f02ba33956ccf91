#!/usr/bin/env python3
"""Why a kernel is as fast as it is: a digest of Nsight Compute metrics (scripts/gpu/ncu_kernels.sh
collects them) — per kernel and grid (a variant each), averaged over its profiled launches: time, DRAM and SM
throughput (% of peak), achieved occupancy against the theoretical one, registers, issue-slot
use, L1 / L2 hit rates, the instructions a warp executes, and where warps wait (the stall
reasons, cycles per issued instruction).

    scripts/gpu/kernel_limits.py metrics.csv            (ncu --csv --print-units base output)

Reading it: DRAM % high → bandwidth-bound (done); issue % high → instruction-bound (fewer
instructions a byte); both low with long_scoreboard on top → memory latency not hidden (more
bytes in flight: occupancy or ILP); with barrier / membar / short_scoreboard on top → the
kernel's own synchronisation or shared-memory traffic; low occupancy with many registers →
registers limit the warps; a latency-bound kernel's instructions a warp times its cycles an
instruction is its chain (the GDN decode step: ~2,000 × 5.4 cycles before session 37's pass).
"""
import csv
import re
import sys
from collections import defaultdict

from kernel_profile import short

# (metric, label, scale)
COLUMNS = [
    ("gpu__time_duration.sum", "us", 1e-3),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %", 1),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM %", 1),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue %", 1),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy %", 1),
    ("sm__maximum_warps_per_active_cycle_pct", "theoretical %", 1),
    ("launch__registers_per_thread", "regs", 1),
    ("launch__grid_size", "blocks", 1),
    ("l1tex__t_sector_hit_rate.pct", "L1 hit %", 1),
    ("lts__t_sector_hit_rate.pct", "L2 hit %", 1),
]
INSTR, WARPS = "smsp__inst_executed.sum", "smsp__warps_launched.sum"
STALL = re.compile(r"smsp__average_warp_latency_issue_stalled_(\w+)\.ratio")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    values = defaultdict(lambda: defaultdict(list))  # kernel -> metric -> [values]
    with open(sys.argv[1], newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines start with ==
    for row in csv.DictReader(lines):
        try:
            v = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        # Instances of one kernel (template arguments) apart by their grid: a variant each.
        values[f'{short(row["Kernel Name"])} {row.get("Grid Size", "")}'][row["Metric Name"]].append(v)
    if not values:
        print("kernel_limits: no metric rows in", sys.argv[1], file=sys.stderr)
        return 1
    mean = lambda xs: sum(xs) / len(xs)
    print("| kernel | " + " | ".join(label for _, label, _ in COLUMNS) + " | instr / warp | top stalls (cycles / instruction) |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1) + "---|")
    for kernel, m in values.items():
        cells = []
        for metric, _, scale in COLUMNS:
            cells.append(f"{mean(m[metric]) * scale:.1f}" if metric in m else "-")
        per_warp = f"{mean(m[INSTR]) / mean(m[WARPS]):.0f}" if m.get(INSTR) and m.get(WARPS) and mean(m[WARPS]) else "-"
        cells.append(per_warp)
        stalls = sorted(((mean(v), STALL.match(k).group(1)) for k, v in m.items() if STALL.match(k)), reverse=True)
        top = ", ".join(f"{name} {v:.1f}" for v, name in stalls[:4])
        print(f"| {kernel} | " + " | ".join(cells) + f" | {top} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
