#!/usr/bin/env python3
"""Key figures per kernel launch of an Nsight Compute CSV written with `--csv --page details`
(sections such as SpeedOfLight, WarpStateStats, SchedulerStats, Occupancy, LaunchStats,
MemoryWorkloadAnalysis): what bounds a kernel, at a glance. Used by scripts/gpu-profile-spmm.sh
(DETAILS=1).

    python3 scripts/ncu-details.py FILE.csv
"""
import csv
import sys

# (metric name in the details page, short label)
FIGURES = [
    ("Duration", "ns"),
    ("Grid Size", "grid"),
    ("Registers Per Thread", "reg"),
    ("Theoretical Occupancy", "occ.max%"),
    ("Achieved Occupancy", "occ%"),
    ("Compute (SM) Throughput", "sm%"),
    ("L2 Cache Throughput", "l2%"),
    ("DRAM Throughput", "dram%"),
    ("L1/TEX Hit Rate", "l1hit%"),
    ("L2 Hit Rate", "l2hit%"),
    ("Issued Warp Per Scheduler", "issue/cyc"),
    ("Active Warps Per Scheduler", "warps/sched"),
    ("Eligible Warps Per Scheduler", "eligible"),
    ("Warp Cycles Per Issued Instruction", "cyc/inst"),
    ("Avg. Active Threads Per Warp", "active.thr"),
    ("Local Memory Spilling Requests", "spills"),
]


def main():
    rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
    if not rows:
        print("no rows")
        return
    idx = {n: i for i, n in enumerate(rows[0])}
    launches = {}
    for r in rows[1:]:
        if not r[idx["ID"]].isdigit():
            continue
        key = (int(r[idx["ID"]]), r[idx["Kernel Name"]][:40])
        launches.setdefault(key, {})[r[idx["Metric Name"]]] = r[idx["Metric Value"]]
    for (i, name), m in sorted(launches.items()):
        figures = " ".join(f"{label} {m[metric]}" for metric, label in FIGURES if metric in m)
        print(f"{i:>5} {name:40} {figures}")


if __name__ == "__main__":
    main()
