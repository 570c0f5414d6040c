#!/usr/bin/env python3
"""Writes a Matrix Market file whose rows fall in all three tiers of the huge-tile split with
lanes: rows of 0-20 nonzeros (the schedule's own kernel), every tenth row 32-255 (the mid
tier), every 4000th row 2100-9000 (the huge tier, several chunks). Used on a GPU machine to
check first (cold) and later launches of the SpMM example on such a matrix.

    python3 scripts/gen-tiers-mtx.py OUT.mtx [SEED] [ROWS]
"""
import random
import sys


def main():
    out = sys.argv[1]
    random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    sizes = []
    for r in range(n):
        if r % 4000 == 0:
            sizes.append(random.randint(2100, 9000))
        elif r % 10 == 0:
            sizes.append(random.randint(32, 255))
        else:
            sizes.append(random.randint(0, 20))
    lines = [
        "%%MatrixMarket matrix coordinate real general\n",
        f"{n} {n} {sum(sizes)}\n",
    ]
    for r, d in enumerate(sizes):
        for c in sorted(random.sample(range(n), min(d, n))):
            lines.append(f"{r + 1} {c + 1} {random.uniform(-1, 1):.5f}\n")
    with open(out, "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
