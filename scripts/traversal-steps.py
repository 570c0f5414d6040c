#!/usr/bin/env python3
"""Step by step, the schedules of SSSP and BFS runs that lb-bench recorded with `--steps`: per
(op, graph) each row's kernel and wall time summed over the recorded steps, and for BFS (whose
frontier at step l is the vertices at depth l whatever the schedule, so steps compare across
rows) the per-step oracle: the fastest named schedule of each step, summed. With `-v`, every BFS
step: its frontier (vertices, atoms, longest tile), the three fastest schedules and `auto`'s pick.

    python3 scripts/traversal-steps.py [-v] FILE.jsonl[.gz] [FILE ...]

A step record is (source index, frontier length, atoms, longest tile, kernel ms, wall ms,
schedule, levels); atoms and the longest tile are known for BFS only, and a launch of several
BFS levels in one block (`block_levels`, levels > 1; records before it had seven fields, one
level each) stands for the levels it ran: it compares with no one step of the other rows, so
the per-step tables leave those levels out and each row's total over all its steps is printed
as well.
"""
import collections
import gzip
import json
import sys


def records(paths):
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                if r.get("record") == "run" and r.get("steps"):
                    yield r


def by_step(rows):
    """{(source, step): {row: (kernel ms, wall ms, schedule, (vertices, atoms, longest))}}"""
    table = collections.defaultdict(dict)
    for name, r in rows.items():
        seen = collections.Counter()
        for source, vertices, atoms, longest, kernel, wall, schedule, *more in r["steps"]:
            levels = more[0] if more else 1
            step = seen[source]
            seen[source] += levels
            if levels == 1:
                table[(source, step)][name] = (kernel, wall, schedule, (vertices, atoms, longest))
    return table


def whole(r):
    """A row's kernel and wall ms over all its recorded steps."""
    return [sum(step[4] for step in r["steps"]), sum(step[5] for step in r["steps"])]


def report(op, graph, rows, verbose):
    print(f"== {op} {graph}")
    table = by_step(rows)
    names = sorted(rows)
    named = [n for n in names if not n.startswith("auto")]
    # Steps every row recorded (a row that failed or stopped early leaves gaps).
    steps = sorted(k for k, row in table.items() if all(n in row for n in names))
    totals = {n: [0.0, 0.0] for n in names}
    for k in steps:
        for n in names:
            totals[n][0] += table[k][n][0]
            totals[n][1] += table[k][n][1]
    for n in sorted(names, key=lambda n: totals[n][1]):
        print(f"  {n:30s} kernel {totals[n][0]:10.3f} ms  wall {totals[n][1]:10.3f} ms")
    print(f"  {len(steps)} steps in every row")
    for n in names:
        if any(len(step) > 7 and step[7] > 1 for step in rows[n]["steps"]):
            kernel, wall = whole(rows[n])
            print(f"  {n:30s} kernel {kernel:10.3f} ms  wall {wall:10.3f} ms  (all its steps)")
    if op != "bfs" or not named:
        return
    oracle = [0.0, 0.0]
    for k in steps:
        oracle[0] += min(table[k][n][0] for n in named)
        oracle[1] += min(table[k][n][1] for n in named)
    print(f"  per-step oracle               kernel {oracle[0]:10.3f} ms  wall {oracle[1]:10.3f} ms")
    if not verbose:
        return
    for k in steps:
        row = table[k]
        best = sorted(named, key=lambda n: row[n][0])[:3]
        vertices, atoms, longest = row[best[0]][3]
        auto = next((row[n] for n in names if n.startswith("auto")), None)
        line = f"   {k} {vertices} vertices, {atoms} atoms, longest {longest}: "
        line += ", ".join(f"{n} {row[n][0] * 1e3:.0f} µs" for n in best)
        if auto:
            line += f" | auto {auto[2]} {auto[0] * 1e3:.0f} µs (wall {auto[1] * 1e3:.0f})"
        print(line)


def main(args):
    verbose = "-v" in args
    paths = [a for a in args if a != "-v"]
    if not paths:
        sys.exit(__doc__)
    groups = collections.defaultdict(dict)
    for r in records(paths):
        groups[(r["op"], r["matrix"])][r["schedule"]] = r
    for (op, graph), rows in groups.items():
        report(op, graph, rows, verbose)


if __name__ == "__main__":
    main(sys.argv[1:])
