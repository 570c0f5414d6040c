#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, after scripts/gpu-bundle.sh built .gpu/ here:
#   bash scripts/gpu-run.sh [extra example args]
# Runs the device tests, the SpMV example (default matrix and a large one), and compute-sanitizer
# memcheck/racecheck on the example; logs go to $OUT (or .gpu/out) and a summary to stdout.
set -uo pipefail
out="${OUT:-.gpu/out}"
mkdir -p "$out"
bin=.gpu/bin
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
status=0
step() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then
    echo "   ok"
  else
    echo "   FAILED (exit $?)"
    status=1
  fi
  tail -n 25 "$out/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for t in "$bin"/test-*; do
  step "$(basename "$t")" "$t" --test-threads=1 --include-ignored
done
step example-spmv "$bin/example-spmv" "$@"
step example-spmv-large "$bin/example-spmv" --rows 2000000 --reps 50
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/example-spmv" --reps 1
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/example-spmv" --reps 1
  step synccheck compute-sanitizer --tool synccheck --error-exitcode 9 "$bin/example-spmv" --reps 1
fi
exit $status
