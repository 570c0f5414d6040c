#!/usr/bin/env bash
# Where a memory-bound kernel's time goes, on the GPU machine: Nsight Compute's speed-of-light,
# memory-workload and warp-state sections for every kernel of an lb-bench run, cuSPARSE's
# kernels included, one run per schedule.
#   bash scripts/gpu-profile-memory.sh OPS FAMILIES "SCHEDULES" [SCALE]
# e.g. bash scripts/gpu-profile-memory.sh spmv rmat,power-law "merge_path lrb" large
# Needs .gpu/bin (or .gpu/bin.tgz) with lb-bench. Prints one block per kernel launch (time,
# throughputs, hit rates, sectors per request, the leading stall reasons) and packs the raw CSV
# into $OUT/profile-memory-OPS.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-checks-lib.sh
. scripts/gpu-checks-lib.sh
ops=$1 families=$2 schedules=$3 scale=${4:-medium}
work=$(mktemp -d)
stalls=long_scoreboard,lg_throttle,mio_throttle,wait,not_selected,short_scoreboard,barrier,math_pipe_throttle,no_instruction,branch_resolving
metrics=""
for s in ${stalls//,/ }; do
  metrics+="smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio,"
done
metrics+=l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum
metrics+=,lts__t_sector_op_read_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum
n=0
first=1
for s in $schedules; do
  n=$((n + 1))
  cusparse=--no-cusparse
  [ "$first" = 1 ] && cusparse="" && first=0
  timeout 500 ncu --clock-control none --csv --page details \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --metrics "$metrics" \
    .gpu/bin/lb-bench --scale "$scale" --ops "$ops" --families "$families" --schedules "$s" \
    $cusparse --reps 1 --warmup 0 --budget-ms 1 --energy-ms 1 --quiet \
    >"$work/$n.csv" 2>"$work/$n.err"
  echo "== $s (rc $?)"
  python3 - "$work/$n.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
if head is None:
    print("no profile:", " ".join(" ".join(r) for r in rows[-3:])[:400]); sys.exit()
cols = rows[head]
at = {c: cols.index(c) for c in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
kernels = {}
for r in rows[head + 1:]:
    if len(r) <= at["Metric Value"] or not r[at["Metric Name"]]:
        continue
    k = kernels.setdefault(r[at["ID"]], {"name": r[at["Kernel Name"]], "m": {}})
    k["m"][r[at["Metric Name"]]] = (r[at["Metric Value"]], r[at["Metric Unit"]])
want = [("Duration", "t"), ("Registers Per Thread", "reg"), ("Grid Size", "grid"),
        ("Achieved Occupancy", "occ%"), ("DRAM Throughput", "dram%"),
        ("L1/TEX Cache Throughput", "l1%"), ("L2 Cache Throughput", "l2%"),
        ("Compute (SM) Throughput", "sm%"), ("L1/TEX Hit Rate", "l1hit"),
        ("L2 Hit Rate", "l2hit"), ("dram__bytes_read.sum", "dramR"),
        ("dram__bytes_write.sum", "dramW"),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "ldreq"),
        ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "ldsec"),
        ("lts__t_sectors_srcunit_tex_op_read.sum", "l2rdsec")]
for kid, k in kernels.items():
    m = k["m"]
    parts = [f"{short}={m[name][0]}{m[name][1] if name == 'Duration' else ''}"
             for name, short in want if name in m]
    st = sorted(((float(v[0].replace(",", "") or 0), n.split("stalled_")[1].split("_per")[0])
                 for n, v in m.items() if "issue_stalled" in n), reverse=True)[:4]
    print(f"{k['name'][:70]}\n   " + " ".join(parts) + "\n   stalls " +
          " ".join(f"{s}={v:.1f}" for v, s in st))
EOF
done
tar -C "$work" -czf "$o/profile-memory-$ops.tgz" .
