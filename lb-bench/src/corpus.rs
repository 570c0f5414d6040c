//! The built-in corpus: seeded generators for the families of matrices the seeds' datasets span
//! (docs/benchmarks.md lists every family's parameters per scale).

use std::collections::HashSet;

use clap::ValueEnum;
use lb::Csr;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// A few thousand nonzeros per matrix: the simulator finishes in seconds.
    Small,
    /// About 1–5 million nonzeros per matrix.
    Medium,
    /// 50–120 million nonzeros per matrix (for an H100/H200).
    Large,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Family {
    /// k nonzeros in every row, uniform columns.
    Regular,
    /// Road-network-like: average degree about 2, columns near the diagonal.
    Road,
    /// A road-like graph with a realistic diameter for the graph ops: a √n × √n grid numbered
    /// row-major, each vertex linked both ways to its right and lower neighbours (10 % of the
    /// links dropped) and now and then diagonally, positive random lengths; the diameter grows
    /// like √n, not like n. In the default families only when a graph op runs.
    RoadGrid,
    /// Row lengths log-normal with a given mean and standard deviation, capped at a maximum.
    PowerLaw,
    /// R-MAT / Kronecker graph (a, b, c, d = 0.57, 0.19, 0.19, 0.05), duplicates merged.
    Rmat,
    /// 7-point stencil on an n × n × n grid.
    Stencil,
    /// Rows of 1–3 nonzeros with a few very long rows.
    DenseRows,
    /// One row holding millions of nonzeros among rows of one nonzero: the shape where a
    /// schedule that gives a whole tile to one block or warp falls off a cliff.
    GiantRow,
    /// Tiny matrices where launch overhead dominates.
    Tiny,
    /// Rows of 2–8 nonzeros near the diagonal with every 16th row 40–700 wide, its columns in
    /// a band around the row (a mesh with coupled constraint rows): most atoms sit in rows of
    /// tens to hundreds, and the longest row is only about 25 times the mean.
    Banded,
    /// 90 % of the rows 1–4 nonzeros, 10 % 60–600, columns uniform: most atoms in rows of
    /// hundreds, the longest row about 17 times the mean.
    Bimodal,
}

/// One corpus member.
pub struct Matrix {
    pub name: String,
    pub family: String,
    pub csr: Csr<f32>,
}

/// Every matrix of `families` at `scale`, each from its own seed derived from `seed`.
pub fn build(families: &[Family], scale: Scale, seed: u64) -> Vec<Matrix> {
    let mut out = Vec::new();
    for (fi, &f) in families.iter().enumerate() {
        let s = seed.wrapping_mul(1_000_003).wrapping_add(fi as u64);
        let family = format!("{f:?}")
            .to_lowercase()
            .replace("powerlaw", "power_law")
            .replace("denserows", "dense_rows")
            .replace("giantrow", "giant_row")
            .replace("roadgrid", "road_grid");
        let mut push = |name: String, csr: Csr<f32>| {
            out.push(Matrix {
                name,
                family: family.clone(),
                csr,
            })
        };
        let pick = |small: usize, medium: usize, large: usize| match scale {
            Scale::Small => small,
            Scale::Medium => medium,
            Scale::Large => large,
        };
        match f {
            Family::Regular => {
                let rows = pick(256, 250_000, 8_000_000);
                for k in [4, 16] {
                    push(
                        format!("regular-{rows}x{k}"),
                        regular(rows, k, s + k as u64),
                    );
                }
            }
            Family::Road => {
                let rows = pick(1_000, 1_000_000, 30_000_000);
                push(format!("road-{rows}"), road(rows, s));
            }
            Family::RoadGrid => {
                let side = pick(32, 1_000, 4_000);
                push(format!("road_grid-{side}x{side}"), road_grid(side, s));
            }
            Family::PowerLaw => {
                let rows = pick(500, 500_000, 6_500_000);
                let (mean, std, max) = (
                    8.0,
                    pick(16, 100, 400) as f64,
                    pick(250, 100_000, 1_000_000),
                );
                push(
                    format!("power_law-{rows}-m{mean}-s{std}-max{max}"),
                    power_law(rows, mean, std, max, s),
                );
            }
            Family::Rmat => {
                let (scale_log2, edge_factor) = (pick(8, 18, 23), pick(8, 8, 16));
                push(
                    format!("rmat-{scale_log2}-ef{edge_factor}"),
                    rmat(scale_log2 as u32, edge_factor, s),
                );
            }
            Family::Stencil => {
                let n = pick(8, 80, 200);
                push(format!("stencil7-{n}^3"), stencil7(n, s));
            }
            Family::DenseRows => {
                let (rows, dense, len) = (
                    pick(1_000, 500_000, 20_000_000),
                    pick(2, 4, 8),
                    pick(1_000, 200_000, 4_000_000),
                );
                push(
                    format!("dense_rows-{rows}-d{dense}x{len}"),
                    dense_rows(rows, dense, len, s),
                );
            }
            Family::GiantRow => {
                let (rows, len) = (
                    pick(1_000, 1_000_000, 8_000_000),
                    pick(2_000, 3_000_000, 16_000_000),
                );
                push(format!("giant_row-{rows}-{len}"), giant_row(rows, len, s));
            }
            Family::Banded | Family::Bimodal => {
                let rows = pick(256, 120_000, 3_000_000);
                let make = if f == Family::Banded { banded } else { bimodal };
                push(format!("{family}-{rows}"), make(rows, s));
            }
            Family::Tiny => {
                push("tiny-8x8".into(), regular(8, 3, s));
                push("tiny-1x1000".into(), with_lengths(1000, &[1000], s));
                push("tiny-100x100".into(), power_law(100, 4.0, 8.0, 100, s));
            }
        }
    }
    out
}

/// Values in [-1, 1) for `n` entries.
fn values(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A matrix from sorted, distinct columns per row.
fn from_rows(cols: usize, rows: Vec<Vec<u32>>, rng: &mut ChaCha8Rng) -> Csr<f32> {
    let mut row_offsets = Vec::with_capacity(rows.len() + 1);
    row_offsets.push(0);
    let mut col_indices = Vec::with_capacity(rows.iter().map(Vec::len).sum());
    for r in &rows {
        col_indices.extend_from_slice(r);
        row_offsets.push(col_indices.len());
    }
    let vals = values(rng, col_indices.len());
    Csr {
        num_rows: rows.len(),
        num_cols: cols,
        row_offsets,
        col_indices,
        values: vals,
    }
}

/// `n` distinct sorted columns below `cols` (Floyd's sampling).
fn distinct(rng: &mut ChaCha8Rng, n: usize, cols: usize) -> Vec<u32> {
    let n = n.min(cols);
    if n == cols {
        return (0..cols as u32).collect();
    }
    let mut chosen = HashSet::with_capacity(n);
    for j in (cols - n)..cols {
        let t = rng.random_range(0..=j);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let mut v: Vec<u32> = chosen.into_iter().map(|c| c as u32).collect();
    v.sort_unstable();
    v
}

fn with_lengths(cols: usize, lengths: &[usize], seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rows = lengths
        .iter()
        .map(|&l| distinct(&mut rng, l, cols))
        .collect();
    from_rows(cols, rows, &mut rng)
}

pub fn regular(rows: usize, k: usize, seed: u64) -> Csr<f32> {
    with_lengths(rows, &vec![k; rows], seed)
}

/// Degree 1, 2 or 3 (mean 2), neighbours within ±16 of the diagonal, like a road network
/// numbered along its geography.
pub fn road(rows: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rows_v = (0..rows)
        .map(|i| {
            let deg = rng.random_range(1..=3usize);
            let lo = i.saturating_sub(16);
            let hi = (i + 17).min(rows);
            let mut cols: Vec<u32> = (0..deg).map(|_| rng.random_range(lo..hi) as u32).collect();
            cols.sort_unstable();
            cols.dedup();
            cols
        })
        .collect();
    from_rows(rows, rows_v, &mut rng)
}

/// A `side` × `side` grid of intersections numbered row-major (so neighbours on the map are
/// near in the numbering, as in a road network ordered along its geography). Each vertex is
/// linked to its right and lower neighbours with probability 0.9 each, and with probability
/// 0.05 to one lower diagonal neighbour; every link is a two-way street (both directions, the
/// same length), of length uniform in [0.1, 1). Mean degree about 3.8, diameter about 2 × side.
pub fn road_grid(side: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x05ee_d0ad);
    let n = side * side;
    let mut rows: Vec<Vec<(u32, f32)>> = vec![Vec::new(); n];
    let link = |rows: &mut Vec<Vec<(u32, f32)>>, rng: &mut ChaCha8Rng, a: usize, b: usize| {
        let w = rng.random_range(0.1f32..1.0);
        rows[a].push((b as u32, w));
        rows[b].push((a as u32, w));
    };
    for r in 0..side {
        for c in 0..side {
            let u = r * side + c;
            if c + 1 < side && rng.random_bool(0.9) {
                link(&mut rows, &mut rng, u, u + 1);
            }
            if r + 1 < side && rng.random_bool(0.9) {
                link(&mut rows, &mut rng, u, u + side);
            }
            if r + 1 < side && rng.random_bool(0.05) {
                let c2 = if rng.random_bool(0.5) {
                    c + 1
                } else {
                    c.wrapping_sub(1)
                };
                if c2 < side {
                    link(&mut rows, &mut rng, u, (r + 1) * side + c2);
                }
            }
        }
    }
    let mut square = Square::new(n, 0);
    for row in &mut rows {
        square.push(row);
    }
    square.finish()
}

/// A square matrix built row by row from (column, value) pairs.
struct Square {
    n: usize,
    row_offsets: Vec<usize>,
    col_indices: Vec<u32>,
    values: Vec<f32>,
}

impl Square {
    /// Room for `n` rows and `atoms` entries.
    fn new(n: usize, atoms: usize) -> Square {
        let mut row_offsets = Vec::with_capacity(n + 1);
        row_offsets.push(0);
        Square {
            n,
            row_offsets,
            col_indices: Vec::with_capacity(atoms),
            values: Vec::with_capacity(atoms),
        }
    }

    /// Appends `row`, sorted by column here.
    fn push(&mut self, row: &mut [(u32, f32)]) {
        row.sort_unstable_by_key(|&(c, _)| c);
        self.col_indices.extend(row.iter().map(|&(c, _)| c));
        self.values.extend(row.iter().map(|&(_, v)| v));
        self.row_offsets.push(self.col_indices.len());
    }

    fn finish(self) -> Csr<f32> {
        Csr {
            num_rows: self.n,
            num_cols: self.n,
            row_offsets: self.row_offsets,
            col_indices: self.col_indices,
            values: self.values,
        }
    }
}

/// Log-normal row lengths with this mean and standard deviation, capped at `max` (the cap
/// pulls the realized mean slightly down; the report prints the realized statistics).
pub fn power_law(rows: usize, mean: f64, std: f64, max: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9);
    let sigma2 = (1.0 + (std / mean).powi(2)).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    let max = max.min(rows);
    let lengths: Vec<usize> = (0..rows)
        .map(|_| {
            // Box–Muller: one standard normal from two uniforms; 1 - u is in (0, 1].
            let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            ((mu + sigma2.sqrt() * z).exp().round() as usize).min(max)
        })
        .collect();
    with_lengths(rows, &lengths, seed)
}

/// R-MAT with 2^scale vertices and `edge_factor` × 2^scale edges before merging duplicates.
pub fn rmat(scale: u32, edge_factor: usize, seed: u64) -> Csr<f32> {
    let n = 1usize << scale;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
    for _ in 0..n * edge_factor {
        let (mut r, mut c) = (0usize, 0usize);
        for _ in 0..scale {
            let p: f64 = rng.random();
            let (dr, dc) = if p < 0.57 {
                (0, 0)
            } else if p < 0.76 {
                (0, 1)
            } else if p < 0.95 {
                (1, 0)
            } else {
                (1, 1)
            };
            r = r * 2 + dr;
            c = c * 2 + dc;
        }
        rows[r].push(c as u32);
    }
    for r in &mut rows {
        r.sort_unstable();
        r.dedup();
    }
    from_rows(n, rows, &mut rng)
}

/// `a` with its vertices relabelled by one seeded random permutation `p` (P·A·Pᵀ: row `p[i]`
/// holds row `i`'s entries with every column `j` renamed `p[j]`), each row's columns sorted
/// again; a non-square matrix is returned as it is. Graph500's Kronecker generator relabels its
/// vertices the same way after generating the edges, so that a vertex's number says nothing of
/// its degree; the corpus's R-MAT does not, which leaves its hubs at small, power-of-two-spaced
/// numbers (docs/multi-gpu.md: why the buffer that holds `x` may matter on R-MAT).
pub fn relabel(a: &Csr<f32>, seed: u64) -> Csr<f32> {
    if a.num_rows != a.num_cols {
        return a.clone();
    }
    relabel_by(a, &permutation(a.num_rows, seed))
}

/// A seeded uniform random permutation of `0..n` (Fisher–Yates).
fn permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut p: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        p.swap(i, rng.random_range(0..=i));
    }
    p
}

/// P·A·Pᵀ for the square `a` and the permutation `p` of its vertices.
fn relabel_by(a: &Csr<f32>, p: &[u32]) -> Csr<f32> {
    let n = a.num_rows;
    let mut old_of = vec![0usize; n];
    for (old, &new) in p.iter().enumerate() {
        old_of[new as usize] = old;
    }
    let mut square = Square::new(n, a.col_indices.len());
    let mut row: Vec<(u32, f32)> = Vec::new();
    for &old in &old_of {
        let (lo, hi) = (a.row_offsets[old], a.row_offsets[old + 1]);
        row.clear();
        row.extend(
            a.col_indices[lo..hi]
                .iter()
                .zip(&a.values[lo..hi])
                .map(|(&c, &v)| (p[c as usize], v)),
        );
        square.push(&mut row);
    }
    square.finish()
}

/// The 7-point Laplacian stencil on an n³ grid (values random, structure exact).
pub fn stencil7(n: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let id = |x: usize, y: usize, z: usize| ((z * n + y) * n + x) as u32;
    let mut rows = Vec::with_capacity(n * n * n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let mut r = Vec::with_capacity(7);
                if z > 0 {
                    r.push(id(x, y, z - 1));
                }
                if y > 0 {
                    r.push(id(x, y - 1, z));
                }
                if x > 0 {
                    r.push(id(x - 1, y, z));
                }
                r.push(id(x, y, z));
                if x + 1 < n {
                    r.push(id(x + 1, y, z));
                }
                if y + 1 < n {
                    r.push(id(x, y + 1, z));
                }
                if z + 1 < n {
                    r.push(id(x, y, z + 1));
                }
                rows.push(r);
            }
        }
    }
    from_rows(n * n * n, rows, &mut rng)
}

/// `rows` rows of one uniform nonzero, but the middle one holds `len` (`len` columns).
pub fn giant_row(rows: usize, len: usize, seed: u64) -> Csr<f32> {
    let lengths: Vec<usize> = (0..rows)
        .map(|i| if i == rows / 2 { len } else { 1 })
        .collect();
    with_lengths(len.max(rows), &lengths, seed)
}

/// `rows` rows of 1–3 uniform nonzeros, of which `dense` evenly spaced rows hold `len`.
pub fn dense_rows(rows: usize, dense: usize, len: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let every = (rows / dense.max(1)).max(1);
    let lengths: Vec<usize> = (0..rows)
        .map(|i| {
            if i % every == 0 && i / every < dense {
                len
            } else {
                rng.random_range(1..=3)
            }
        })
        .collect();
    with_lengths(rows, &lengths, seed)
}

/// `rows` rows of 2–8 nonzeros, every 16th 40–700 (at most the row count), each row's columns
/// drawn from a window of `max(4 × its length, 64)` columns centred on the row.
pub fn banded(rows: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cols = (0..rows)
        .map(|r| {
            let len = if r % 16 == 0 {
                rng.random_range(40..=700)
            } else {
                rng.random_range(2..=8)
            };
            let width = (4 * len).max(64).min(rows);
            let first = r.saturating_sub(width / 2).min(rows - width);
            distinct(&mut rng, len.min(width), width)
                .into_iter()
                .map(|c| c + first as u32)
                .collect()
        })
        .collect();
    from_rows(rows, cols, &mut rng)
}

/// `rows` rows, each with probability 0.1 of 60–600 uniform nonzeros, else 1–4.
pub fn bimodal(rows: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let lengths: Vec<usize> = (0..rows)
        .map(|_| {
            if rng.random_bool(0.1) {
                rng.random_range(60..=600)
            } else {
                rng.random_range(1..=4)
            }
        })
        .collect();
    with_lengths(rows, &lengths, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relabelling is P·A·Pᵀ: `y = A·x` relabelled is the relabelled matrix times the relabelled
    /// `x`, on a square R-MAT with empty rows, and a non-square matrix comes back unchanged.
    #[test]
    fn relabelling_permutes_rows_and_columns_alike() {
        let a = rmat(9, 4, 3);
        let b = relabel(&a, 11);
        b.validate().unwrap();
        assert_eq!(b.col_indices.len(), a.col_indices.len());
        assert_ne!(b.row_offsets, a.row_offsets);
        let n = a.num_rows;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let spmv = |m: &Csr<f32>, x: &[f64]| -> Vec<f64> {
            (0..m.num_rows)
                .map(|r| {
                    (m.row_offsets[r]..m.row_offsets[r + 1])
                        .map(|e| f64::from(m.values[e]) * x[m.col_indices[e] as usize])
                        .sum()
                })
                .collect()
        };
        let p = permutation(n, 11);
        let mut seen = vec![false; n];
        for &v in &p {
            assert!(!std::mem::replace(&mut seen[v as usize], true), "{v} twice");
        }
        let y = spmv(&a, &x);
        let p: Vec<usize> = p.into_iter().map(|v| v as usize).collect();
        let mut px = vec![0.0; n];
        for i in 0..n {
            px[p[i]] = x[i];
        }
        let py = spmv(&b, &px);
        for i in 0..n {
            // The row's terms are the same, added in the new columns' order.
            assert!(
                (py[p[i]] - y[i]).abs() <= 1e-12 * (1.0 + y[i].abs()),
                "row {i}"
            );
        }
        let wide = regular(8, 3, 1);
        let wide = Csr {
            num_cols: 9,
            ..wide
        };
        assert_eq!(relabel(&wide, 5).col_indices, wide.col_indices);
    }

    /// Both families put most atoms in rows of at least 32 (the split's mid tier with lanes)
    /// while the longest row stays under 32 times the mean (not a heavy tail to the rule), and
    /// `banded` keeps every column within its row's window.
    #[test]
    fn banded_and_bimodal_have_most_atoms_in_rows_of_tens_to_hundreds() {
        for (name, m) in [
            ("banded", banded(20_000, 7)),
            ("bimodal", bimodal(20_000, 8)),
        ] {
            m.validate().unwrap();
            let lengths: Vec<usize> = (0..m.num_rows).map(|r| m.row(r).len()).collect();
            let long: usize = lengths.iter().filter(|&&l| l >= 32).sum();
            assert!(
                long * 4 > m.nnz() * 3,
                "{name}: {long} of {} atoms",
                m.nnz()
            );
            let mean = m.nnz() as f64 / m.num_rows as f64;
            let max = *lengths.iter().max().unwrap() as f64;
            assert!(
                (15.0..32.0).contains(&(max / mean)),
                "{name}: {max} / {mean}"
            );
        }
        let m = banded(20_000, 7);
        for r in 0..m.num_rows {
            let width = (4 * m.row(r).len()).max(64) as i64;
            for e in m.row(r) {
                let c = m.col_indices[e] as i64;
                assert!((c - r as i64).abs() <= width, "row {r}: column {c}");
            }
        }
        let small = banded(256, 1);
        assert!(small.validate().is_ok() && small.nnz() > 0);
        assert_eq!(bimodal(300, 2).col_indices, bimodal(300, 2).col_indices);
    }

    /// The grid is a symmetric graph of side² vertices, about 3.8 edges each, whose BFS depth
    /// from a corner grows like the side (a path numbered along the map would grow like n).
    #[test]
    fn road_grid_has_a_grid_diameter() {
        for (side, seed) in [(1, 3), (2, 4), (40, 5), (90, 6)] {
            let g = road_grid(side, seed);
            let n = side * side;
            assert_eq!((g.num_rows, g.num_cols), (n, n));
            g.validate().unwrap();
            let mut edges: Vec<(usize, u32, u32)> = (0..n)
                .flat_map(|u| g.row(u).map(move |e| (u, e)))
                .map(|(u, e)| (u, g.col_indices[e], g.values[e].to_bits()))
                .collect();
            let mut reversed: Vec<(usize, u32, u32)> = edges
                .iter()
                .map(|&(u, v, w)| (v as usize, u as u32, w))
                .collect();
            edges.sort_unstable();
            reversed.sort_unstable();
            assert_eq!(edges, reversed, "side {side}: every street is two-way");
            assert!(g.values.iter().all(|&w| (0.1..1.0).contains(&w)));
            if side >= 40 {
                let mean = g.nnz() as f64 / n as f64;
                assert!(
                    (3.3..4.0).contains(&mean),
                    "side {side}: mean degree {mean}"
                );
                let depth = lb::algorithms::bfs_levels(&g, 0);
                let reached: Vec<u32> = depth.into_iter().filter(|&d| d != u32::MAX).collect();
                let deepest = *reached.iter().max().unwrap() as usize;
                assert!(reached.len() > n * 9 / 10, "side {side}: mostly connected");
                assert!(
                    (side..=3 * side).contains(&deepest),
                    "side {side}: depth {deepest}"
                );
            }
        }
        assert_eq!(road_grid(30, 9).col_indices, road_grid(30, 9).col_indices);
        assert_ne!(road_grid(30, 9).col_indices, road_grid(30, 10).col_indices);
    }
}
