#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, after scripts/gpu-bundle.sh built .gpu/ here:
#   bash scripts/gpu-run.sh [extra example args]
# Runs the device tests, the SpMV example (default matrix, >50M-nonzero power-law and regular
# matrices, >2^32 nonzeros unless LB_SKIP_HUGE=1), and compute-sanitizer memcheck, racecheck and
# synccheck on the example; the logs are packed into $OUT/logs.tgz (or .gpu/out/logs.tgz) and a
# summary goes to stdout.
set -uo pipefail
out="${OUT:-.gpu/out}"
logs=$(mktemp -d)
mkdir -p "$out"
bin=.gpu/bin
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
status=0
step() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "   ok"
  else
    echo "   FAILED (exit $?)"
    status=1
  fi
  tail -n 14 "$logs/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
for t in "$bin"/test-*; do
  step "$(basename "$t")" "$t" --test-threads=1 --include-ignored
done
step example-spmv "$bin/example-spmv" "$@"
# Over 50 million nonzeros: a power-law and a regular (8 per row) matrix, every schedule.
step example-spmv-powerlaw "$bin/example-spmv" --rows 6500000 --reps 20
step example-spmv-regular "$bin/example-spmv" --rows 6500000 --regular 8 --reps 20
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck synccheck; do
    step "$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/example-spmv" --reps 1
    step "$tool-regular" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/example-spmv" --rows 3000 --regular 40 --reps 1
  done
fi
# More than 2^32 nonzeros: the 64-bit index path (about 37 GB on the device).
if [ "${LB_SKIP_HUGE:-0}" != 1 ]; then
  step example-spmv-huge "$bin/example-spmv_huge"
fi
tar -C "$logs" -czf "$out/logs.tgz" .
exit $status
