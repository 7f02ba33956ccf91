#!/usr/bin/env bash
# Runs ON the GPU machine: the limiters of the decode kernels that dominate a flagship step (the
# GEMV at 4096x14336 and at the GDN in-projection's shape, the MoE decode, the GDN decode step,
# decode attention, the chunked GDN prep), from Nsight Compute — throughput, occupancy, registers,
# issue use, hit rates, the instructions a warp executes and stall reasons
# (scripts/gpu/kernel_limits.py reads them). Caches flushed between replays.
# Expects the benchmarks built (scripts/gpu/check.sh kernels builds them).
#   scripts/gpu/ncu_kernels.sh            → $OUT/limits.md (or build/gpu-logs), raw CSVs in /tmp
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
source scripts/gpu/bootstrap.sh >/dev/null || exit 1
command -v ncu >/dev/null || { echo "ncu_kernels: ncu not on PATH"; exit 1; }
B=build/cuda

metrics="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics+=",sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active"
metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct"
metrics+=",launch__registers_per_thread,launch__grid_size,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct"
metrics+=",smsp__inst_executed.sum,smsp__warps_launched.sum"
for s in long_scoreboard short_scoreboard wait barrier membar mio_throttle lg_throttle math_pipe_throttle \
         not_selected selected no_instruction drain dispatch_stall imc_miss branch_resolving sleeping tex_throttle; do
  metrics+=",smsp__average_warp_latency_issue_stalled_${s}.ratio"
done

# name @ kernel regex @ command
cases=(
  "gemv 4096x14336 T=1@gemv|read_@$B/bench_fast_gemv --tokens 1 --layouts q4_0 --variants all --modes hot --runs 1 --warmup 0 --filter 4096x14336"
  "gemv 8192x2048 T=1@gemv|read_@$B/bench_fast_gemv --tokens 1 --layouts q4_0 --variants all --modes hot --runs 1 --warmup 0 --filter 8192x2048"
  "moe decode T=1@dp4a_gate_up|dp4a_down|route|mma_@$B/bench_fast_moe --tokens 1 --runs 1 --warmup 0 --filter 256x512"
  "gdn decode step@gdn@$B/bench_fast_gdn --runs 1 --warmup 0 --filter \"decode step\""
  "gdn chunked prep T=1024@wy_prep16|wy_state16@$B/bench_fast_gdn --runs 1 --warmup 0 --filter \"f16 rt hot T=1024\""
)
: >"$LOGS/limits.md"
for c in "${cases[@]}"; do
  IFS='@' read -r name regex cmd <<<"$c"
  csv="/tmp/ncu_$(echo "$name" | tr -c 'a-zA-Z0-9' _).csv"
  # shellcheck disable=SC2086
  eval ncu --csv --print-units base --cache-control all --clock-control base --kernel-name \"regex:$regex\" \
    --launch-count 40 --metrics "$metrics" --log-file "$csv" $cmd >/dev/null 2>&1
  { echo "## $name"; echo; python3 scripts/gpu/kernel_limits.py "$csv"; echo; } | tee -a "$LOGS/limits.md"
done
