#!/usr/bin/env bash
# Per-kernel times of lb-bench runs under Nsight Compute, on the GPU machine:
#   bash scripts/gpu-profile.sh OPS FAMILIES SCHEDULES [SCALE]
# e.g. bash scripts/gpu-profile.sh spmm32 rmat,power-law "group_mapped(8) lrb" medium
# (SCHEDULES separated by spaces: one profiled lb-bench run each)
# Needs .gpu/bin (or .gpu/bin.tgz) with lb-bench. Prints one line per kernel launch (name, grid,
# duration, DRAM bytes, achieved memory throughput) and packs the raw CSV into $OUT/profile-OPS.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
out="${OUT:-.gpu/out}"
mkdir -p "$out"
ops=$1 families=$2 schedules=$3 scale=${4:-medium}
work=$(mktemp -d)
n=0
for s in $schedules; do
  n=$((n + 1))
  tag="$ops-$n"
  ncu --clock-control none --csv \
    --metrics gpu__time_duration.sum,dram__bytes.sum,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size \
    .gpu/bin/lb-bench --scale "$scale" --ops "$ops" --families "$families" --schedules "$s" \
    --no-cusparse --reps 1 --warmup 0 --budget-ms 1 --energy-ms 1 --quiet \
    >"$work/$tag.csv" 2>"$work/$tag.err"
  echo "== $s"
  python3 scripts/ncu-summary.py "$work/$tag.csv" launch__grid_size=grid launch__block_size=blk \
    gpu__time_duration.sum=t dram__bytes.sum=dram lts__t_bytes.sum=l2 \
    sm__throughput.avg.pct_of_peak_sustained_elapsed=sm%
done
tar -C "$work" -czf "$out/profile-$ops.tgz" .
