#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: lb-bench SpMV on one corpus scale with the "before"
# binary (.gpu/bin/lb-bench-base, built from an earlier commit) and the current one, in the same
# session, and writes both JSON files and the per-matrix comparison under $OUT.
#   bash scripts/gpu-ab.sh SCALE REPS [lb-bench flags...]
set -euo pipefail
bash "$(dirname "$0")/gpu-unpack.sh"
scale=$1 reps=$2
shift 2
out="${OUT:-.gpu/out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu-$scale.txt"
.gpu/bin/lb-bench-base --scale "$scale" --ops spmv --reps "$reps" --quiet "$@" \
  --json "$out/base-$scale.jsonl" >"$out/base-$scale.txt" 2>&1
.gpu/bin/lb-bench --scale "$scale" --ops spmv --reps "$reps" --quiet "$@" \
  --json "$out/new-$scale.jsonl" >"$out/new-$scale.txt" 2>&1
python3 scripts/compare-runs.py before="$out/base-$scale.jsonl" after="$out/new-$scale.jsonl" \
  | tee "$out/compare-$scale.txt" | tail -n 40
