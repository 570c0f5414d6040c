#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, after scripts/gpu-bundle.sh: Near-Far SSSP
# (`lb::algorithms::sssp_near_far`) on the GPU: lb-bench's `sssp` and `nearfar` ops side by side
# on undirected graphs, the latter at several factors of Δ, then its tests, memcheck on them and
# racecheck on the example (SKIP_CHECKS=1 leaves those out):
#   bash scripts/gpu-nearfar.sh SCALE FAMILIES SCHEDULES "FACTORS" [SOURCES]
# e.g. bash scripts/gpu-nearfar.sh medium power-law,rmat,road-grid merge_path,lrb "32 4 1" 2
# Files go to $OUT (or .gpu/out): nearfar-<scale>.jsonl, sssp-<scale>.jsonl, the logs.
set -uo pipefail
bash "$(dirname "$0")/gpu-unpack.sh"
scale=$1 families=$2 schedules=$3 factors=$4 sources=${5:-2}
out="${OUT:-.gpu/out}"
mkdir -p "$out"
bin=.gpu/bin
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
status=0
common=(--scale "$scale" --families "$families" --schedules "$schedules" --undirected
  --sources "$sources" --reps 3 --warmup 1 --quiet)
echo "== sssp"
"$bin/lb-bench" --ops sssp "${common[@]}" --json "$out/sssp-$scale.jsonl" || status=1
for c in $factors; do
  echo "== nearfar, Δ = $c · w̄ / d̄"
  "$bin/lb-bench" --ops nearfar --delta-factor "$c" "${common[@]}" \
    --json "$out/nearfar-$scale-c$c.jsonl" || status=1
done
if [ -z "${SKIP_CHECKS:-}" ]; then
  echo "== test-near_far"
  "$bin/test-near_far" >"$out/test-near_far.log" 2>&1 || status=1
  tail -n 3 "$out/test-near_far.log"
  echo "== memcheck test-near_far"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test-near_far" \
    >"$out/memcheck-near_far.log" 2>&1 || status=1
  tail -n 3 "$out/memcheck-near_far.log"
  echo "== racecheck example-sssp --near-far"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/example-sssp" --near-far \
    --vertices 3000 >"$out/racecheck-sssp.log" 2>&1 || status=1
  tail -n 3 "$out/racecheck-sssp.log"
fi
exit $status
