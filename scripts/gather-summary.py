#!/usr/bin/env python3
"""Per (op, matrix) of lb-bench JSON runs: the best lb schedule, cuSPARSE and the gather floor.

    python3 scripts/gather-summary.py RUN.jsonl [RUN.jsonl ...]

The gather floor (lb-bench's `gather` row, lb-bench/src/gather_floor.rs) is the time of the
memory traffic of a CSR SpMV or SpMM that walks the nonzeros in storage order, with perfect
balance and no row reduction. Columns: `lb/g` and `cu/g` are the floor's time over the best lb
schedule's and cuSPARSE's (1 = at the floor), `max×cu` is cuSPARSE's time over the floor's: the
speedup over cuSPARSE that a kernel at the floor would have. Geomeans leave out the `tiny`
members, whose times are mostly the launch.
"""
import collections
import json
import math
import sys

NOT_SCHEDULES = ("cusparse", "gather", "auto", "tuned")


def main(paths):
    rows = collections.defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for line in f:
                v = json.loads(line)
                if v.get("record") != "run" or v.get("status") != "ok" or "median_ms" not in v:
                    continue
                rows[(v["op"], v["matrix"])][v["schedule"]] = v["median_ms"] * 1e3
    print("%-8s %-36s %9s %-16s %9s %9s %6s %6s %6s"
          % ("op", "matrix", "best", "(schedule)", "cuSPARSE", "gather", "lb/g", "cu/g", "max×cu"))
    ratios = collections.defaultdict(list)
    for (op, m), d in sorted(rows.items()):
        lb = {s: t for s, t in d.items() if s not in NOT_SCHEDULES}
        if not lb or "gather" not in d or "cusparse" not in d:
            continue
        best = min(lb, key=lb.get)
        b, c, g = lb[best], d["cusparse"], d["gather"]
        print("%-8s %-36s %9.1f %-16s %9.1f %9.1f %6.2f %6.2f %6.2f"
              % (op, m[:36], b, best[:16], c, g, g / b, g / c, c / g))
        if not m.startswith("tiny"):
            ratios[op].append((g / b, g / c, c / g, c / b))
    for op, v in ratios.items():
        def gm(i):
            return math.exp(sum(math.log(x[i]) for x in v) / len(v))
        print("%s: %d matrices, geomean lb/gather %.3f, cuSPARSE/gather %.3f, "
              "a kernel at the floor %.3f× cuSPARSE, best lb %.3f× cuSPARSE"
              % (op, len(v), gm(0), gm(1), gm(2), gm(3)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
