#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: lb-bench on the medium corpus with the "before"
# binary (.gpu/bin/lb-bench-base, built from an earlier commit) and the current one in the same
# session (SpMM at k = 32 and 128 on the lane schedules, SpMV on every schedule), and the
# per-matrix comparisons. Logs and JSON files go to $OUT (or .gpu/out).
#   bash scripts/gpu-ab-spmm.sh [OPS...]      (default: spmm spmv)
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
b=.gpu/bin
o="${OUT:-.gpu/out}"
mkdir -p "$o"
lanes="thread_mapped,group_mapped(4),group_mapped(8),warp_mapped,lrb,binning"
common=(--scale medium --reps 10 --budget-ms 150 --energy-ms 1 --quiet)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(spmm spmv)
for g in "${groups[@]}"; do
  case $g in
    spmm) args=(--ops spmm32,spmm128 --schedules "$lanes") ;;
    spmv) args=(--ops spmv) ;;
    *) echo "unknown group $g" >&2; exit 2 ;;
  esac
  for v in base new; do
    bin=$b/lb-bench
    [ $v = base ] && bin=$b/lb-bench-base
    $bin "${common[@]}" "${args[@]}" --json "$o/$g-$v.jsonl" >"$o/$g-$v.txt" 2>&1
  done
  grep -h "FAILED" "$o/$g-new.txt" | head -5
  ops=(spmv)
  [ $g = spmm ] && ops=(spmm32 spmm128)
  for op in "${ops[@]}"; do
    python3 scripts/compare-runs.py before="$o/$g-base.jsonl" after="$o/$g-new.jsonl" --op "$op" \
      >"$o/compare-$op.txt"
    tail -2 "$o/compare-$op.txt"
  done
done
