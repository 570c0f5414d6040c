#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: the checks for the work-oriented schedules'
# in-kernel fix-up (merge_path, nonzero_split, two_phase, multi_phase).
# Steps, in the order given: `ab` (SpMV on the medium corpus, every schedule, with the "before"
# binary .gpu/bin/lb-bench-base and the current one in the same session), `ab-small` and
# `ab-medium` (the same on that corpus, both binaries twice, alternating), `sanitize`
# (compute-sanitizer memcheck, racecheck and synccheck on lb-bench running those schedules,
# SpMV and SpMM k = 8, over the small corpus and over a giant row, a power law and R-MAT of the
# medium one), or the name of a device test binary (.gpu/bin/test-NAME).
#   bash scripts/gpu-check-fixup.sh STEP...
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-checks-lib.sh
. scripts/gpu-checks-lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
work="merge_path,nonzero_split,two_phase,multi_phase"
for t in "$@"; do
  case $t in
    ab) bash scripts/gpu-ab-spmm.sh spmv ;;
    ab-small | ab-medium)
      # Both binaries twice, alternating, SpMV over every schedule.
      scale=${t#ab-}
      for v in base new base2 new2; do
        bin=$b/lb-bench
        case $v in base*) bin=$b/lb-bench-base ;; esac
        $bin --scale "$scale" --reps 20 --budget-ms 100 --energy-ms 1 --quiet --ops spmv \
          --json "$o/$scale-$v.jsonl" >"$o/$scale-$v.txt" 2>&1
      done
      python3 scripts/compare-runs.py before="$o/$scale-base.jsonl" after="$o/$scale-new.jsonl" \
        --op spmv >"$o/compare-$scale.txt"
      tail -2 "$o/compare-$scale.txt"
      ;;
    sanitize)
      # The small corpus (grids of at most `block` blocks: the main kernel's own fix-up) and
      # three medium members (the fix-up kernels).
      for tool in memcheck racecheck synccheck; do
        # racecheck and synccheck refuse modules with device-side launches: with no device
        # runtime library, consolidate takes its host path (as in scripts/gpu-run.sh).
        env=()
        [ "$tool" != memcheck ] && env=(env LB_CUDADEVRT=/nonexistent/libcudadevrt.a)
        step "$tool-small" ${env[@]+"${env[@]}"} compute-sanitizer --tool "$tool" --error-exitcode 9 "$b/lb-bench" \
          --scale small --ops spmv,spmm8 --no-cusparse --quiet --reps 2 --warmup 0 \
          --energy-ms 1 --copy-bytes 1048576 --schedules "$work"
        step "$tool-medium" ${env[@]+"${env[@]}"} compute-sanitizer --tool "$tool" --error-exitcode 9 "$b/lb-bench" \
          --scale medium --families giant-row,power-law,rmat --ops spmv,spmm8 --no-cusparse \
          --quiet --reps 2 --warmup 0 --energy-ms 1 --copy-bytes 1048576 --schedules "$work"
      done
      ;;
    *) step "test-$t" "$b/test-$t" --test-threads=1 --include-ignored ;;
  esac
done
grep -h "ERROR SUMMARY\|test result" "$o"/*.txt 2>/dev/null | sort | uniq -c
exit $status
