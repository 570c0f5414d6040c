#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: compute-sanitizer memcheck, racecheck and synccheck
# on lb-bench over the small corpus (SpMV and SpMM k = 8 and 32) for the schedules named, so a
# changed or new schedule is swept without the whole device test set:
#   bash scripts/gpu-sweep.sh SCHEDULES [SECONDS_PER_TOOL]
# racecheck and synccheck refuse modules with device-side launches, so consolidate takes its
# host-launched child there (as in scripts/gpu-run.sh).
set -uo pipefail
bash "$(dirname "$0")/gpu-unpack.sh"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
schedules=$1
limit=${2:-150}
status=0
for tool in memcheck racecheck synccheck; do
  env=()
  [ "$tool" != memcheck ] && env=(LB_CUDADEVRT=/nonexistent/libcudadevrt.a)
  echo "== $tool"
  timeout "$limit" env ${env[@]+"${env[@]}"} compute-sanitizer --tool "$tool" --error-exitcode 9 \
    .gpu/bin/lb-bench --scale small --ops spmv,spmm8,spmm32 --schedules "$schedules" --no-cusparse \
    --quiet --reps 1 --warmup 0 --energy-ms 1 --copy-bytes 1048576 >"/tmp/sweep-$tool.log" 2>&1
  rc=$?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY|failed|wrong" "/tmp/sweep-$tool.log" | tail -3
  echo "   exit $rc"
  [ "$rc" -ne 0 ] && status=1
done
exit $status
