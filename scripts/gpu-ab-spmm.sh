#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: lb-bench on the medium corpus with the "before"
# binary (.gpu/bin/lb-bench-base, built from an earlier commit) and the current one in the same
# session (SpMM at k = 32 and 128 on the lane schedules, SpMV on every schedule), and the
# per-matrix comparisons. Logs and JSON files go to $OUT (or .gpu/out).
#   bash scripts/gpu-ab-spmm.sh [OPS...]      (default: spmm spmv)
# Optional: SPMM_OPS (default spmm32,spmm128), LANES (the SpMM schedules), FAMILIES (lb-bench
# --families; default every family), ROUNDS (alternating rounds of both binaries, default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
b=.gpu/bin
o="${OUT:-.gpu/out}"
mkdir -p "$o"
lanes=${LANES:-"thread_mapped,group_mapped(4),group_mapped(8),warp_mapped,lrb,binning"}
spmm_ops=${SPMM_OPS:-spmm32,spmm128}
common=(--scale medium --reps 10 --budget-ms 150 --energy-ms 1 --quiet)
[ -n "${FAMILIES:-}" ] && common+=(--families "$FAMILIES")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(spmm spmv)
for g in "${groups[@]}"; do
  case $g in
    spmm) args=(--ops "$spmm_ops" --schedules "$lanes") ;;
    spmv) args=(--ops spmv) ;;
    *) echo "unknown group $g" >&2; exit 2 ;;
  esac
  runs=()
  for r in $(seq 1 "${ROUNDS:-1}"); do
    for v in base new; do
      bin=$b/lb-bench
      [ $v = base ] && bin=$b/lb-bench-base
      tag=$g-$v
      [ "${ROUNDS:-1}" -gt 1 ] && tag=$g-$v-$r
      $bin "${common[@]}" "${args[@]}" --json "$o/$tag.jsonl" >"$o/$tag.txt" 2>&1
      grep -h "FAILED" "$o/$tag.txt" | head -5
      runs+=("$tag=$o/$tag.jsonl")
    done
  done
  ops=(spmv)
  [ $g = spmm ] && IFS=, read -r -a ops <<<"$spmm_ops"
  for op in "${ops[@]}"; do
    python3 scripts/compare-runs.py "${runs[@]}" --op "$op" >"$o/compare-$op.txt"
    tail -$((2 * ${ROUNDS:-1} + 1)) "$o/compare-$op.txt"
  done
done
