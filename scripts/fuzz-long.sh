#!/usr/bin/env bash
# The long run of the macro's in-process fuzz target (lb-macros/src/fuzz_kernels.rs) spread over
# processes, one per core:
#   scripts/fuzz-long.sh BINARY SEED CASES [SHARDS] [LOGDIR]
# BINARY is lb-macros' unit-test binary (`cargo test --release -p lb-macros --no-run` prints its
# path); SHARDS (default: the number of cores) copies run `generated_kernels` with
# LB_FUZZ_SHARD=i/SHARDS, which together run exactly the CASES cases of seed SEED. Each shard's
# report goes to LOGDIR/shard-i.log (default: fuzz-logs); the sums per class are printed last,
# and the exit status is nonzero if any shard failed.
set -uo pipefail
bin=$1 seed=$2 cases=$3
shards=${4:-$(nproc)}
logs=${5:-fuzz-logs}
mkdir -p "$logs"
start=$(date +%s)
pids=()
for ((i = 0; i < shards; i++)); do
  LB_FUZZ_SEED=$seed LB_FUZZ_EXPANSIONS=$cases LB_FUZZ_SHARD=$i/$shards \
    "$bin" generated_kernels --nocapture >"$logs/shard-$i.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "shard $i/$shards FAILED (see $logs/shard-$i.log)"
    status=1
  fi
done
echo "seed $seed, $cases cases over $shards shards, $(($(date +%s) - start)) s"
# The per-class lines of every shard's report, summed: cases, accepted, refused, errors, several.
grep -h '^  [A-Za-z(]' "$logs"/shard-*.log | awk '
  { k = $1; c[k] += $2; a[k] += $4; r[k] += $6; e[k] += $8; s[k] += $10 }
  END {
    for (k in c) printf "  %-24s %7d cases %7d accepted %7d refused %8d errors %6d with several\n", k, c[k], a[k], r[k], e[k], s[k]
  }' | sort
grep -h "test result" "$logs"/shard-*.log | sort | uniq -c
exit $status
