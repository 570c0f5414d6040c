#!/usr/bin/env python3
"""Compares lb-bench JSON-lines runs: per matrix and schedule, the median time of each run, and
per run the best schedule's speedup over the same run's cuSPARSE (geomean over matrices).

    python3 scripts/compare-runs.py NAME=FILE.jsonl [NAME=FILE.jsonl ...] [--op spmv] [--k K]
"""
import json
import math
import sys


def load(path, op, k):
    runs = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("record") != "run" or r.get("status") != "ok" or r.get("op") != op:
            continue
        if k is not None and r.get("k") != k:
            continue
        if "median_ms" in r:
            runs[(r["matrix"], r["schedule"].split("→")[0])] = r["median_ms"] * 1000
    return runs


def main():
    args = [a for a in sys.argv[1:] if "=" in a]
    op = sys.argv[sys.argv.index("--op") + 1] if "--op" in sys.argv else "spmv"
    k = int(sys.argv[sys.argv.index("--k") + 1]) if "--k" in sys.argv else None
    names = [a.split("=", 1)[0] for a in args]
    data = [load(a.split("=", 1)[1], op, k) for a in args]
    matrices = sorted({m for d in data for (m, _) in d})
    schedules = sorted({s for d in data for (_, s) in d} - {"cusparse", "auto", "gather"})
    print("%-40s %-22s" % ("matrix", "schedule") + "".join("%11s" % n for n in names))
    best = {n: [] for n in names}
    for m in matrices:
        for s in schedules + ["auto", "cusparse", "gather"]:
            row = [d.get((m, s)) for d in data]
            if any(v is not None for v in row):
                print("%-40s %-22s" % (m, s) + "".join("%11.1f" % v if v else "%11s" % "-" for v in row))
        for n, d in zip(names, data):
            cands = [v for (mm, s), v in d.items() if mm == m and s not in ("cusparse", "auto", "gather")]
            cus = d.get((m, "cusparse"))
            if cands and cus:
                best[n].append((m, cus / min(cands)))
    for n in names:
        ratios = [r for _, r in best[n]]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            worst = min(best[n], key=lambda x: x[1])
            print("%s: best schedule vs cuSPARSE geomean %.3f over %d matrices, worst %.3f (%s)"
                  % (n, geo, len(ratios), worst[1], worst[0]))


if __name__ == "__main__":
    main()
