#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: Nsight Compute metrics of lb's SpMM kernels beside
# the hand-written probe's (bench/proto/spmm_proto.cu, built here with nvcc) on the R-MAT member
# (or on what LB_ARGS names): per kernel launch its time, registers, achieved occupancy,
# instructions, cache traffic and the SMs', L2's and DRAM's throughput as a share of their peak.
#   LB_BENCH=.gpu/var/lb-bench-X bash scripts/gpu-profile-spmm.sh OP "SCHEDULES" [PROBE_KERNEL]
# LB_ARGS (default "--scale medium --families rmat") picks the matrices, e.g. "--no-corpus --mtx
# FILE"; CUSPARSE=1 profiles cuSPARSE's kernels in the same runs too; DETAILS=1 takes Nsight
# Compute's sections instead (occupancy, warps per scheduler, cycles per issued instruction,
# active threads per warp, spills), summarized by scripts/ncu-details.py.
# e.g. bash scripts/gpu-profile-spmm.sh spmm32 "group_mapped(8) lrb" "seg_vec4<8, 4>"
# Prints one line per launch; the raw CSV goes to $OUT/profile-spmm.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
out="${OUT:-.gpu/out}"
mkdir -p "$out"
op=$1 schedules=$2 probe=${3:-}
bench=${LB_BENCH:-.gpu/bin/lb-bench}
work=$(mktemp -d)
metrics=gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum
metrics+=,lts__t_bytes.sum,dram__bytes.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct
metrics+=,smsp__inst_executed.avg.per_cycle_active,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
summary() {
  python3 scripts/ncu-summary.py "$1" gpu__time_duration.sum=t launch__grid_size=grid \
    launch__block_size=blk launch__registers_per_thread=reg \
    sm__warps_active.avg.pct_of_peak_sustained_active=occ% sm__inst_executed.sum=inst \
    smsp__inst_executed.avg.per_cycle_active=ipc lts__t_bytes.sum=l2B dram__bytes.sum=dramB \
    lts__t_sector_hit_rate.pct=l2hit l1tex__t_sector_hit_rate.pct=l1hit \
    sm__throughput.avg.pct_of_peak_sustained_elapsed=sm% \
    lts__throughput.avg.pct_of_peak_sustained_elapsed=l2% \
    dram__throughput.avg.pct_of_peak_sustained_elapsed=dram%
}
read -r -a matrices <<<"${LB_ARGS:---scale medium --families rmat}"
cusparse=--no-cusparse
[ -n "${CUSPARSE:-}" ] && cusparse=
what=(--metrics "$metrics")
if [ -n "${DETAILS:-}" ]; then
  what=(--page details)
  for section in SpeedOfLight WarpStateStats SchedulerStats Occupancy LaunchStats \
    MemoryWorkloadAnalysis; do
    what+=(--section "$section")
  done
  summary() { python3 scripts/ncu-details.py "$1"; }
fi
n=0
for s in $schedules; do
  n=$((n + 1))
  ncu --clock-control none --csv "${what[@]}" \
    "$bench" "${matrices[@]}" --ops "$op" --schedules "$s" \
    $cusparse --reps 1 --warmup 1 --budget-ms 1 --energy-ms 1 --quiet \
    >"$work/lb-$n.csv" 2>"$work/lb-$n.err"
  echo "== lb $s"
  summary "$work/lb-$n.csv"
done
if [ -n "$probe" ]; then
  nvcc -O3 -arch=sm_90 -o "$work/spmm_proto" bench/proto/spmm_proto.cu -lcusparse
  timeout 300 ncu --clock-control none --csv "${what[@]}" --kernel-name-base demangled \
    --kernel-name "regex:$probe" \
    --launch-count 1 "$work/spmm_proto" >"$work/probe.csv" 2>"$work/probe.err"
  echo "== probe $probe"
  summary "$work/probe.csv"
fi
tar -C "$work" -czf "$out/profile-spmm.tgz" .
