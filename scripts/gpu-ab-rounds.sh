#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: an A/B of lb-bench binaries in one session,
# alternating (before, after, before, after, ...) so that the machine's drift falls on all, with
# cuSPARSE in every run. The binaries are named by VARIANTS (default "base new"): `new` is
# .gpu/bin/lb-bench, any other name V is .gpu/bin/lb-bench-V (`base`: built from an earlier
# commit).
#   SCALE=large FAMILIES=power-law,rmat SCHEDULES=merge_path,lrb ROUNDS=2 \
#     bash scripts/gpu-ab-rounds.sh TAG
# Environment (defaults): SCALE (medium), OPS (spmv), FAMILIES (all), SCHEDULES (all), ROUNDS
# (2), REPS (10), BUDGET_MS (150), VARIANTS, EXTRA (more lb-bench arguments, e.g. for the graph
# ops "--sources 1 --undirected"). Writes TAG-{base,new}N.jsonl/.txt and TAG-compare.txt under
# $OUT, packs them into $OUT/TAG.tgz, and prints the comparison of every run.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/gpu-unpack.sh
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
tag=$1
out="${OUT:-.gpu/out}"
work=$(mktemp -d)
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$work/$tag-gpu.txt"
args=(--scale "${SCALE:-medium}" --ops "${OPS:-spmv}" --reps "${REPS:-10}"
  --budget-ms "${BUDGET_MS:-150}" --energy-ms 1 --quiet)
[ -n "${FAMILIES:-}" ] && args+=(--families "$FAMILIES")
[ -n "${SCHEDULES:-}" ] && args+=(--schedules "$SCHEDULES")
# shellcheck disable=SC2206 # EXTRA is a list of arguments
[ -n "${EXTRA:-}" ] && args+=($EXTRA)
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-base new}; do
    bin=.gpu/bin/lb-bench
    [ "$v" != new ] && bin=.gpu/bin/lb-bench-$v
    timeout 500 "$bin" "${args[@]}" --json "$work/$tag-$v$r.jsonl" >"$work/$tag-$v$r.txt" 2>&1 ||
      echo "$tag $v$r: exit $?"
  done
  tar -C "$work" -czf "$out/$tag.tgz" .
done
runs=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-base new}; do runs+=("$v$r=$work/$tag-$v$r.jsonl"); done
done
python3 scripts/compare-runs.py "${runs[@]}" --op "$(echo "${OPS:-spmv}" | cut -d, -f1)" >"$work/$tag-compare.txt" 2>&1
tar -C "$work" -czf "$out/$tag.tgz" .
tail -n 30 "$work/$tag-compare.txt"
