#!/usr/bin/env bash
# Runs on the GPU machine from the repo root, after scripts/gpu-bundle.sh built .gpu/ here:
#   bash scripts/gpu-run.sh [GROUP...]      (default: every group)
# Groups: tests (the device test binaries), spmv (the SpMV example on the default, >50M-nonzero
# power-law and regular matrices), sanitize (compute-sanitizer memcheck, racecheck and synccheck
# on the examples), sanitize-tests (memcheck on every device test binary: every schedule on every
# test body; not in the default set), apps (SpMM k = 8/32/128, SSSP, BFS and PageRank on a >50M-edge power-law graph, CG on a 100³ Poisson grid), huge
# (SpMV with more than 2^32 nonzeros, about 37 GB of device memory), loop (host cost per call,
# `lb-bench --loop`, and the sanitizers on it; not in the default set), traversal (BFS and
# SSSP on the road networks, step by step, and the sanitizers on the levels-in-one-block test;
# not in the default set), fuzz (the macro's long fuzz run on every core; not in the default
# set). The logs are packed into
# $OUT/logs.tgz (or .gpu/out/logs.tgz) and a summary goes to stdout.
set -uo pipefail
bash "$(dirname "$0")/gpu-unpack.sh"
out="${OUT:-.gpu/out}"
logs=$(mktemp -d)
mkdir -p "$out"
bin=.gpu/bin
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(tests spmv sanitize apps huge)
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
sanitize() {
  local tool=$1 name=$2
  shift 2
  if [ "$tool" = memcheck ]; then
    step "$tool-$name" compute-sanitizer --tool "$tool" --error-exitcode 9 "$@"
  else
    # racecheck and synccheck refuse modules with device-side launches ("CUDA Dynamic
    # Parallelism is not supported by the selected tool"): point the runtime at no device
    # runtime library, so consolidate takes its host-launched child path and every kernel is
    # checked.
    step "$tool-$name" env LB_CUDADEVRT=/nonexistent/libcudadevrt.a \
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$@"
  fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
for group in "${groups[@]}"; do
  case "$group" in
    tests)
      # The consolidation test fails unless device-side launches really ran.
      export LB_REQUIRE_DEVICE_LAUNCH=1
      for t in "$bin"/test-*; do
        step "$(basename "$t")" "$t" --test-threads=1 --include-ignored
      done
      ;;
    spmv)
      step example-spmv "$bin/example-spmv"
      step example-spmv-powerlaw "$bin/example-spmv" --rows 6500000 --reps 20
      step example-spmv-regular "$bin/example-spmv" --rows 6500000 --regular 8 --reps 20
      ;;
    sanitize)
      for tool in ${LB_SANITIZERS:-memcheck racecheck synccheck}; do
        sanitize "$tool" spmv "$bin/example-spmv" --reps 1
        sanitize "$tool" spmv-regular "$bin/example-spmv" --rows 3000 --regular 40 --reps 1
        sanitize "$tool" spmm "$bin/example-spmm" --rows 3000 --k 33 --reps 1
        sanitize "$tool" gcn "$bin/example-gcn" --rows 3000 --k 33 --reps 1
        sanitize "$tool" sssp "$bin/example-sssp" --vertices 3000
        sanitize "$tool" bfs "$bin/example-bfs" --vertices 3000
        sanitize "$tool" dobfs "$bin/example-bfs" --vertices 3000 --undirected --direction-optimizing
        # A grid's small levels: `auto` runs them in one block (bfs_block_levels,
        # sssp_block_levels).
        sanitize "$tool" bfs-grid "$bin/example-bfs" --grid 60
        sanitize "$tool" sssp-grid "$bin/example-sssp" --grid 60
        sanitize "$tool" cc "$bin/example-cc" --vertices 3000
        sanitize "$tool" cg "$bin/example-cg" --n 16
        sanitize "$tool" pagerank "$bin/example-pagerank" --vertices 3000
        # One row of 3 M nonzeros among a million one-nonzero rows: the huge-tile split of
        # binning, lrb, the group family and consolidate (host path), SpMV and SpMM.
        sanitize "$tool" giant-row "$bin/lb-bench" --scale medium --families giant-row \
          --ops spmv,spmm8 --no-cusparse --quiet --reps 1 --warmup 0 --energy-ms 1 \
          --copy-bytes 1048576 --schedules binning,lrb,block_mapped,warp_mapped,consolidate,merge_path
        # The tuned variants (multi_phase's iteration factors, consolidate's levels, tuned
        # thresholds) on the small corpus.
        sanitize "$tool" variants "$bin/lb-bench" --ops spmv --variants --no-cusparse --quiet \
          --reps 3 --warmup 0 --energy-ms 1 --copy-bytes 1048576
      done
      ;;
    sanitize-tests)
      # Every schedule on every test body of the test binaries that use the GPU, under memcheck.
      # The tests call the driver with bad PTX and missing kernels on purpose, so API errors are
      # not reported; every kernel's memory accesses are. (misuse and offsets run on the
      # simulator only.)
      # LB_SANITIZE_TOOL picks racecheck or synccheck instead; they refuse modules with
      # device-side launches, so consolidate then takes its host path (see `sanitize`).
      unset LB_REQUIRE_DEVICE_LAUNCH
      tool=${LB_SANITIZE_TOOL:-memcheck}
      devrt=()
      [ "$tool" != memcheck ] && devrt=(env LB_CUDADEVRT=/nonexistent/libcudadevrt.a)
      for name in ${LB_SANITIZE_TESTS:-apps bounds device device_launch gpu kernels streams tile_sets tuning autotune spmm_lanes epilogue}; do
        step "$tool-test-$name" ${devrt[@]+"${devrt[@]}"} compute-sanitizer --tool "$tool" \
          --report-api-errors no --error-exitcode 9 "$bin/test-$name" --test-threads=1 \
          --include-ignored
      done
      ;;
    apps)
      for k in 8 32 128; do
        step "example-spmm-k$k" "$bin/example-spmm" --rows 6500000 --k "$k" --reps 10
      done
      step example-gcn "$bin/example-gcn" --rows 1000000 --k 64 --reps 10
      step example-sssp "$bin/example-sssp" --vertices 6500000
      step example-bfs "$bin/example-bfs" --vertices 6500000
      step example-cg "$bin/example-cg"
      step example-pagerank "$bin/example-pagerank" --vertices 6500000
      ;;
    huge)
      step example-spmv-huge "$bin/example-spmv_huge"
      ;;
    traversal)
      # BFS and SSSP on the road networks, where `auto` runs the small frontiers' levels in one
      # block (docs/graph-apps.md, "Levels in one block"), against the named schedules that
      # launch once a level, step by step (scripts/traversal-steps.py reads the JSON); then
      # the large road grid, and the sanitizers on the test that runs those kernels.
      step traversal-road "$bin/lb-bench" --scale medium --ops bfs,sssp --undirected \
        --families road,road-grid --schedules "thread_mapped,group_mapped(4),warp_mapped" \
        --sources 1 --reps 3 --budget-ms 100 --steps --json "$out/traversal-road.jsonl"
      step traversal-road-large "$bin/lb-bench" --scale large --ops bfs,sssp --undirected \
        --families road-grid --schedules "thread_mapped,group_mapped(4)" --sources 1 --reps 3 \
        --budget-ms 100 --steps --json "$out/traversal-road-large.jsonl"
      for tool in memcheck racecheck synccheck; do
        sanitize "$tool" block-levels "$bin/test-apps" --test-threads=1 --include-ignored \
          auto_runs_a_long_diameter_in_one_block
      done
      ;;
    loop)
      # Host cost per call: 1000 back-to-back SpMV launches per schedule and cuSPARSE's, and
      # the same replayed from CUDA graphs (docs/streams.md); then memcheck and racecheck on a
      # short loop and on CG.
      step loop-small "$bin/lb-bench" --loop 1000 --scale small --json "$out/loop-small.jsonl"
      for tool in memcheck racecheck; do
        sanitize "$tool" loop "$bin/lb-bench" --loop 20 --scale small --families tiny,regular,power-law \
          --no-cusparse --quiet
        sanitize "$tool" cg "$bin/example-cg" --n 16
      done
      ;;
    fuzz)
      # The macro's long fuzz run, one shard per core at a time (docs/fuzzing.md); FUZZ_FIRST,
      # FUZZ_LAST and FUZZ_DEADLINE split it over calls.
      step fuzz-long bash scripts/fuzz-long.sh "$bin/test-lb_macros" "${LB_FUZZ_SEED:-20261126}" \
        "${LB_FUZZ_EXPANSIONS:-100000}" "${LB_FUZZ_SHARDS:-320}" "$logs/fuzz"
      ;;
    *)
      echo "unknown group $group (tests spmv sanitize sanitize-tests apps huge loop traversal fuzz)"
      status=2
      ;;
  esac
done
tar -C "$logs" -czf "$out/logs.tgz" .
exit $status
