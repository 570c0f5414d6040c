#!/usr/bin/env python3
"""Writes Matrix Market files of shapes that lb-bench's built-in corpus does not generate, to
check on a GPU machine that a change tuned on the corpus also holds on families it never saw.
Every family has rows in all of the lane split's tiers (short, mid, huge):

  lognormal  row lengths log-normal (median 12, sigma 1.3, capped at 20 000), columns uniform:
             a hub-free social or citation graph.
  banded     rows of 2-8 nonzeros with every 16th row 40-700 wide, columns in a band around
             the diagonal (a mesh with coupled constraint rows: B's rows are reused nearby).
  bimodal    90% rows of 1-4 nonzeros, 10% rows of 60-600, columns uniform.

    python3 scripts/gen-unseen-mtx.py OUT_DIR [SEED] [ROWS]
writes OUT_DIR/{lognormal,banded,bimodal}.mtx (square, ROWS rows, default 200 000).
"""
import math
import os
import random
import sys


def lognormal(rng, r, n):
    return min(int(math.exp(rng.gauss(math.log(12), 1.3))), 20_000, n)


def banded(rng, r, n):
    return rng.randint(40, 700) if r % 16 == 0 else rng.randint(2, 8)


def bimodal(rng, r, n):
    return rng.randint(60, 600) if rng.random() < 0.1 else rng.randint(1, 4)


def columns(rng, family, r, d, n):
    """`d` distinct sorted columns of row `r`."""
    if family == "banded":
        width = max(4 * d, 64)
        lo = max(0, min(r - width // 2, n - width))
        pool = range(lo, min(n, lo + width))
        return sorted(rng.sample(pool, min(d, len(pool))))
    cols = set()
    while len(cols) < d:
        cols.add(rng.randrange(n))
    return sorted(cols)


def write(path, family, length, rng, n):
    rows = [(r, columns(rng, family, r, length(rng, r, n), n)) for r in range(n)]
    nnz = sum(len(c) for _, c in rows)
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n")
        f.write(f"{n} {n} {nnz}\n")
        for r, cols in rows:
            f.writelines(f"{r + 1} {c + 1} {rng.uniform(-1, 1):.6f}\n" for c in cols)
    print(f"{path}: {n} rows, {nnz} nonzeros")


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    os.makedirs(out, exist_ok=True)
    for family, length in [("lognormal", lognormal), ("banded", banded), ("bimodal", bimodal)]:
        write(os.path.join(out, f"{family}.mtx"), family, length, random.Random(seed), n)


if __name__ == "__main__":
    main()
