#!/usr/bin/env python3
"""Per matrix of lb-bench JSON-lines runs: the oracle (the fastest schedule of the run), and
`auto` (the heuristic) and `tuned` (measured at the first launch) as ratios to it, with their
picks, the tuning time and the launches that pay it back; then the geomeans and how many
members `tuned` has within 3% of the oracle (issue 15's bar).

    python3 scripts/tuned-vs-oracle.py FILE.jsonl [FILE.jsonl ...]
"""
import json
import math
import sys

# Not schedules `auto` or the tuner choose among: the picks themselves, cuSPARSE, the gather
# floor (lb-bench's `gather` row), and the
# schedules written outside lb that `lb-bench --custom` adds (examples/custom-schedules).
NOT_CANDIDATES = (
    "auto",
    "tuned",
    "cusparse",
    "gather",
    "direct_search",
    "local_warp_search",
    "block_search",
)


def main(paths):
    times, picks = {}, {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if r.get("record") != "run" or r.get("status") != "ok":
                continue
            key = (r["op"], r["matrix"])
            times.setdefault(key, {})[r["schedule"]] = r["median_ms"]
            if r["schedule"] in ("auto", "tuned"):
                picks[key + (r["schedule"],)] = (
                    r.get("picked"),
                    r.get("tuning_ms"),
                    r.get("payback_launches"),
                )
    ratios = {"auto": [], "tuned": []}
    for (op, matrix), d in sorted(times.items()):
        cands = {s: t for s, t in d.items() if s not in NOT_CANDIDATES and "+" not in s}
        if not cands:
            continue
        best = min(cands, key=cands.get)
        line = f"{op:8} {matrix[:38]:38} oracle {best:22} {cands[best] * 1e3:10.1f} us"
        for who in ("auto", "tuned"):
            if who not in d:
                line += f"  {who} -"
                continue
            ratio = d[who] / cands[best]
            ratios[who].append(ratio)
            picked, tuning, payback = picks.get((op, matrix, who), (None, None, None))
            line += f"  {who} {ratio:.3f} ({picked}"
            if tuning is not None:
                line += f", tuning {tuning:.1f} ms"
            if payback is not None:
                line += f", paid back after {payback:.0f}"
            line += ")"
        if "cusparse" in d:
            line += f"  cuSPARSE {d['cusparse'] * 1e3:.1f} us"
        print(line)
    for who, v in ratios.items():
        if v:
            geo = math.exp(sum(map(math.log, v)) / len(v))
            within = sum(x <= 1.03 for x in v)
            print(f"{who}: geomean {geo:.3f}× the oracle, within 3% on {within}/{len(v)}")


if __name__ == "__main__":
    main(sys.argv[1:])
