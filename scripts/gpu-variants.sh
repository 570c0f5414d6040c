#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: the same lb-bench command with every binary in
# .gpu/var/lb-bench-* (variants of one change, built here one after the other and packed into
# .gpu/var.tgz), in ROUNDS alternating rounds, then their per-matrix comparison per op.
#   ROUNDS=2 OPS=spmm32,spmm128 bash scripts/gpu-variants.sh LB_BENCH_ARGS...
# The ops must also be in the arguments (--ops). Logs and JSON files go to a work folder that is
# packed into $OUT/variants.tgz (or .gpu/out) after every run, so a call cut off by its time
# limit still brings back what finished (a device call returns only a few files).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -f .gpu/var.tgz ]; then
  rm -rf .gpu/var
  tar -C .gpu -xzf .gpu/var.tgz
fi
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
out="${OUT:-.gpu/out}"
mkdir -p "$out"
o=$(mktemp -d)
pack() { tar -C "$o" -czf "$out/variants.tgz" .; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in $(seq 1 "${ROUNDS:-2}"); do
  for bin in .gpu/var/lb-bench-*; do
    v=${bin##*/lb-bench-}
    "$bin" "$@" --quiet --json "$o/$v-$round.jsonl" >"$o/$v-$round.txt" 2>&1 || echo "$v round $round failed"
    grep -h "FAILED" "$o/$v-$round.txt" | head -3
    pack
  done
done
IFS=, read -r -a ops <<<"${OPS:-spmv}"
for op in "${ops[@]}"; do
  args=()
  for f in "$o"/*-[0-9]*.jsonl; do
    n=${f##*/}
    args+=("${n%.jsonl}=$f")
  done
  python3 scripts/compare-runs.py "${args[@]}" --op "$op" >"$o/compare-$op.txt"
  tail -3 "$o/compare-$op.txt"
done
pack
