#!/usr/bin/env bash
# Runs the benchmark tool on the GPU machine, after scripts/gpu-bundle.sh built .gpu/ here:
#   bash scripts/gpu-bench.sh NAME [lb-bench options...]
# Writes NAME.jsonl, NAME.txt and the plots into $OUT/NAME.tgz (or .gpu/out/NAME.tgz), and prints
# the table's summary lines. Example: bash scripts/gpu-bench.sh large-spmv --scale large --ops spmv
set -uo pipefail
bash "$(dirname "$0")/gpu-unpack.sh"
name=${1:?usage: gpu-bench.sh NAME [lb-bench options...]}
shift
out="${OUT:-.gpu/out}"
work=$(mktemp -d)
mkdir -p "$out" "$work/plots"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$work/gpu.txt"
# LB_BENCH_TIMEOUT (seconds) stops a long run early; the JSON lines written so far are kept.
timeout "${LB_BENCH_TIMEOUT:-86400}" .gpu/bin/lb-bench --quiet --json "$work/$name.jsonl" --plots "$work/plots" "$@" \
  >"$work/$name.txt" 2>&1
status=$?
grep -E "^auto|failed|error" "$work/$name.txt" | head -40
echo "lb-bench exit $status; $(grep -c '"record":"run"' "$work/$name.jsonl" 2>/dev/null) runs"
tar -C "$work" -czf "$out/$name.tgz" .
exit $status
