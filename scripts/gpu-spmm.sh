#!/usr/bin/env bash
# SpMM on the GPU machine, in one batch: lb-bench on the medium corpus (SpMM k = 8, 32, 128;
# SpMV; f16 SpMM at k = 32), the SpMM device tests, and compute-sanitizer memcheck on the SpMM
# and GCN examples (k = 32 and 33: adjacent and strided lanes; LB_SPMM_SANITIZE_K picks) and on
# lb-bench's small corpus.
#   bash scripts/gpu-spmm.sh [SCHEDULES]
# Needs .gpu/bin (or .gpu/bin.tgz) with lb-bench, test-spmm_lanes, test-half, example-spmm and
# example-gcn. Results go to $OUT (or .gpu/out): spmm.tgz with every log and JSON file, and a
# summary on stdout. LB_SPMM_SKIP=tests,sanitize,bench,half skips groups.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
out="${OUT:-.gpu/out}"
work=$(mktemp -d)
mkdir -p "$out"
bin=.gpu/bin
skip="${LB_SPMM_SKIP:-}"
schedules="${1:-thread_mapped,group_mapped(4),group_mapped(8),warp_mapped,block_mapped,dynamic_virtual_warps,lrb,binning,consolidate}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$work/gpu.txt"
status=0
run() {
  local name=$1
  shift
  if timeout "${LB_STEP_TIMEOUT:-300}" "$@" >"$work/$name.txt" 2>&1; then
    echo "ok      $name"
  else
    echo "FAILED  $name (exit $?)"
    status=1
  fi
}
if [[ $skip != *bench* ]]; then
  run bench-medium-spmm "$bin/lb-bench" --scale medium --ops spmm8,spmm32,spmm128 \
    --schedules "$schedules" --reps 10 --budget-ms 150 --energy-ms 1 --quiet \
    --json "$work/bench-medium-spmm.jsonl"
  # An earlier build beside it (lb-bench-base, packed into .gpu/bin.tgz by hand) runs the same
  # SpMM in the same call, for a before/after on one GPU.
  if [ -x "$bin/lb-bench-base" ]; then
    run bench-medium-spmm-base "$bin/lb-bench-base" --scale medium --ops spmm32,spmm128 \
      --schedules "$schedules" --reps 10 --budget-ms 150 --energy-ms 1 --quiet \
      --json "$work/bench-medium-spmm-base.jsonl"
  fi
  run bench-medium-spmv "$bin/lb-bench" --scale medium --ops spmv --reps 10 --budget-ms 150 \
    --energy-ms 1 --quiet --json "$work/bench-medium-spmv.jsonl"
fi
if [[ $skip != *half* ]]; then
  run bench-medium-half "$bin/lb-bench" --scale medium --ops spmm32,spmm32h \
    --schedules "lrb,warp_mapped,group_mapped(4),thread_mapped" --reps 10 --budget-ms 150 \
    --energy-ms 1 --quiet --json "$work/bench-medium-half.jsonl"
fi
if [[ $skip != *tests* ]]; then
  run test-spmm_lanes "$bin/test-spmm_lanes" --test-threads=1 --include-ignored
  run test-half "$bin/test-half" --test-threads=1 --include-ignored
fi
if [[ $skip != *sanitize* ]]; then
  for k in ${LB_SPMM_SANITIZE_K:-32 33}; do
    run "memcheck-spmm-k$k" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$bin/example-spmm" --rows 3000 --k "$k" --reps 1
    run "memcheck-gcn-k$k" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$bin/example-gcn" --rows 3000 --k "$k" --reps 1
  done
  run memcheck-bench-small compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin/lb-bench" --scale small --ops spmm8,spmm32,spmm128 --no-cusparse --quiet --reps 1 \
    --warmup 0 --energy-ms 1 --copy-bytes 1048576 --schedules "$schedules"
fi
grep -h -E "^(auto|tuned)|ERROR|error:|test result" "$work"/*.txt | head -40
tar -C "$work" -czf "$out/spmm.tgz" .
exit $status
