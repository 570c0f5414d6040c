#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: the checks for plans whose kernels run on side
# tracks (the huge-tile split beside the schedule's kernel). The SpMM example on matrices with
# rows in all three tiers (scripts/gen-tiers-mtx.py; every schedule, first and later launches),
# the device test binaries packed as .gpu/bin/test-NAME, and compute-sanitizer memcheck on the
# SpMM and GCN examples.
#   bash scripts/gpu-check-tracks.sh [TEST...]
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-checks-lib.sh
. scripts/gpu-checks-lib.sh
for seed in 1 2 3; do
  python3 scripts/gen-tiers-mtx.py "/tmp/tiers-$seed.mtx" "$seed"
  for k in 32 8; do
    step "tiers-$seed-k$k" "$b/example-spmm" "/tmp/tiers-$seed.mtx" --k "$k" --reps 2
  done
done
for t in "$@"; do
  step "test-$t" "$b/test-$t" --test-threads=1 --include-ignored
done
python3 scripts/gen-tiers-mtx.py /tmp/tiers-small.mtx 4 20000
step memcheck-spmm compute-sanitizer --tool memcheck --error-exitcode 9 "$b/example-spmm" \
  /tmp/tiers-small.mtx --k 32 --reps 1
step memcheck-gcn compute-sanitizer --tool memcheck --error-exitcode 9 "$b/example-gcn" \
  --rows 20000 --k 64 --reps 1
grep -h "test result\|ERROR SUMMARY" "$o"/*.txt | sort | uniq -c
exit $status
