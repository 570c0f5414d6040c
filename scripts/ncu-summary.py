#!/usr/bin/env python3
"""One line per kernel launch of an Nsight Compute CSV (`ncu --csv --metrics ...`): its ID, its
name and the listed metrics under short labels. Used by scripts/gpu-profile*.sh.

    python3 scripts/ncu-summary.py FILE.csv METRIC=LABEL [METRIC=LABEL ...]
"""
import collections
import csv
import sys


def main():
    path, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        print("no rows")
        return
    idx = {n: i for i, n in enumerate(rows[0])}
    per = collections.OrderedDict()
    for r in rows[1:]:
        if not r[0].isdigit():
            continue
        key = (r[idx["ID"]], r[idx["Kernel Name"]][:40])
        per.setdefault(key, {})[r[idx["Metric Name"]]] = r[idx["Metric Value"]]
    for (i, name), m in per.items():
        print(f"{i:>5} {name:40} " + " ".join(f"{label} {m.get(metric, '?')}" for metric, label in pairs))


if __name__ == "__main__":
    main()
