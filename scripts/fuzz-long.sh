#!/usr/bin/env bash
# The long run of the macro's in-process fuzz target (lb-macros/src/fuzz_kernels.rs) spread over
# processes:
#   scripts/fuzz-long.sh BINARY SEED CASES SHARDS [LOGDIR]
# BINARY is lb-macros' unit-test binary (`cargo test --release -p lb-macros --no-run` prints its
# path). Shard i runs `generated_kernels` with LB_FUZZ_SHARD=i/SHARDS; the shards together run
# exactly the CASES cases of seed SEED. FUZZ_JOBS shards run at once (default: one per core);
# FUZZ_FIRST and FUZZ_LAST (default: every shard) pick the shards of this call, and no shard
# starts after FUZZ_DEADLINE seconds, so a run can be split over several calls or machines:
# LOGDIR/done.txt lists each finished shard (`i ok` or `i FAILED`), each shard's report is in
# LOGDIR/shard-i.log, and the sums per class over the finished shards are printed last. The exit
# status is nonzero if any shard failed.
set -uo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
seed=$2 cases=$3 shards=$4
logs=${5:-fuzz-logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
# A proc-macro crate's test binary may link libstd dynamically; scripts/gpu-bundle.sh puts it
# beside the binary.
export LD_LIBRARY_PATH="$(dirname "$bin"):${LD_LIBRARY_PATH:-}"
export FUZZ_BIN=$bin FUZZ_SEED=$seed FUZZ_CASES=$cases FUZZ_SHARDS=$shards FUZZ_LOGS=$logs
export FUZZ_END=$(($(date +%s) + ${FUZZ_DEADLINE:-1000000000}))
start=$(date +%s)
seq "${FUZZ_FIRST:-0}" "${FUZZ_LAST:-$((shards - 1))}" | xargs -P "${FUZZ_JOBS:-$(nproc)}" -I{} bash -c '
  i={}
  [ "$(date +%s)" -ge "$FUZZ_END" ] && exit 0
  if LB_FUZZ_SEED=$FUZZ_SEED LB_FUZZ_EXPANSIONS=$FUZZ_CASES LB_FUZZ_SHARD=$i/$FUZZ_SHARDS \
    "$FUZZ_BIN" generated_kernels --nocapture >"$FUZZ_LOGS/shard-$i.log" 2>&1; then
    echo "$i ok" >>"$FUZZ_LOGS/done.txt"
  else
    echo "$i FAILED" >>"$FUZZ_LOGS/done.txt"
  fi'
finished=$(wc -l <"$logs/done.txt" 2>/dev/null || echo 0)
echo "seed $seed, $cases cases over $shards shards: $finished shards finished in $(($(date +%s) - start)) s"
# The per-class lines of every finished shard's report, summed: cases, accepted, refused,
# errors, cases with several errors.
grep -h '^  [A-Za-z(]' "$logs"/shard-*.log 2>/dev/null | awk '
  { k = $1; c[k] += $2; a[k] += $4; r[k] += $6; e[k] += $8; s[k] += $10; n += $2 }
  END {
    for (k in c) printf "  %-24s %7d cases %7d accepted %7d refused %8d errors %6d with several\n", k, c[k], a[k], r[k], e[k], s[k]
    printf "  %-24s %7d cases\n", "all", n
  }' | sort
if grep -q FAILED "$logs/done.txt" 2>/dev/null; then
  grep FAILED "$logs/done.txt"
  exit 1
fi
