//! Kernel bodies and random tile sets shared by the integration tests.

#![allow(dead_code)]

use lb::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// y = A·x.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// The smallest weighted entry of each row, in f64.
#[load_balanced(schedule = "every", reduce = "min", output = "lo")]
pub fn row_min(a: &Csr<f64>, x: &[f64], #[atom] nz: usize) -> f64 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// The largest column index of each row plus the atom's rank: integer max.
#[load_balanced(schedule = "every", reduce = "max", output = "hi")]
pub fn row_max_col(a: &Csr<f32>, #[atom] nz: usize, #[rank] k: usize) -> u32 {
    a.col_indices[nz] + k as u32
}

/// Side effects only: a column histogram and a scatter of weighted values through atomics, with
/// an `if` that skips negative entries.
#[load_balanced(schedule = "every")]
pub fn scatter(
    a: &Csr<f32>,
    counts: &mut [u32],
    sums: &mut [f32],
    #[tile] row: usize,
    #[atom] nz: usize,
) {
    let c = a.col_indices[nz] as usize;
    atomic_add(&mut counts[c], 1);
    if a.values[nz] >= 0.0 {
        atomic_add(&mut sums[c], a.values[nz] * (row as f32 + 1.0));
    }
}

/// if/else expressions, casts between every width, f64 math, `&&`, a bounded loop and `mul_add`.
#[load_balanced(schedule = "every", reduce = "sum", output = "out")]
pub fn mixed(a: &Csr<f64>, x: &[f64], shift: i32, #[tile] row: usize, #[atom] nz: usize) -> f64 {
    let col = a.col_indices[nz];
    let v = a.values[nz];
    let signed = col as i32 - shift;
    let wide = signed as i64 * 3;
    let mut acc = 0.0f64;
    for j in 0..(col % 4) {
        acc += j as f64 * 0.5;
    }
    let w = if signed > 0 && v > 0.0 {
        v.mul_add(x[col as usize], acc)
    } else if wide < -2 {
        (v * v).sqrt() - (wide as f64)
    } else {
        v.abs().min(2.0) - v.max(-1.0) * 0.5 + (row as f32 * 0.25) as f64
    };
    w + (wide as u32) as f64
}

/// Relaxes a frontier's edges: `atomic_min` on f32 distances, including negative ones.
#[load_balanced(schedule = "every")]
pub fn relax(
    g: &Csr<f32>,
    dist: &mut [f32],
    improved: &mut [u32],
    #[tile] u: usize,
    #[atom] e: usize,
) {
    let v = g.col_indices[e] as usize;
    let d = dist[u] + g.values[e];
    if d < atomic_min(&mut dist[v], d) {
        improved[v] = 1;
    }
}

/// The same SpMV with bounds checks: an out-of-range column becomes an error, not a fault.
#[load_balanced(schedule = "every", reduce = "sum", output = "y", checked)]
pub fn spmv_checked(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// SpMM with lanes: C = A·B, B dense row-major with k columns.
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "k")]
pub fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// Row lengths for the adversarial shapes the schedules must survive.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// Random lengths, some empty.
    Random,
    /// No rows at all.
    Empty,
    /// Rows, but no nonzeros.
    AllRowsEmpty,
    /// One row holds every nonzero.
    OneGiantRow,
    /// Exactly one nonzero.
    SingleAtom,
    /// Empty and long rows alternate.
    Alternating,
}

pub const SHAPES: [Shape; 6] = [
    Shape::Random,
    Shape::Empty,
    Shape::AllRowsEmpty,
    Shape::OneGiantRow,
    Shape::SingleAtom,
    Shape::Alternating,
];

/// A random CSR matrix of the given shape, `rows` rows (ignored for `Empty`), values in [-2, 2).
pub fn random_csr(shape: Shape, rows: usize, cols: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rows = if matches!(shape, Shape::Empty) {
        0
    } else {
        rows.max(1)
    };
    let cols = cols.max(1);
    let lengths: Vec<usize> = (0..rows)
        .map(|r| match shape {
            Shape::Random => {
                if rng.random_bool(0.2) {
                    0
                } else {
                    rng.random_range(1..=cols.min(12))
                }
            }
            Shape::Empty | Shape::AllRowsEmpty => 0,
            Shape::OneGiantRow => {
                if r == rows / 2 {
                    cols.min(700)
                } else {
                    0
                }
            }
            Shape::SingleAtom => usize::from(r == rows - 1),
            Shape::Alternating => {
                if r % 2 == 0 {
                    0
                } else {
                    cols.min(300)
                }
            }
        })
        .collect();
    let mut offsets = vec![0usize];
    let mut col_indices = Vec::new();
    let mut values = Vec::new();
    for len in lengths {
        let mut picked: Vec<u32> = (0..len).map(|_| rng.random_range(0..cols as u32)).collect();
        picked.sort_unstable();
        for c in picked {
            col_indices.push(c);
            values.push(rng.random_range(-2.0f32..2.0));
        }
        offsets.push(col_indices.len());
    }
    Csr::new(rows, cols, offsets, col_indices, values).expect("generated matrices are valid")
}

/// Every adversarial shape at 1, 37 and 700 rows, and one row of 20 000 atoms among 49 short or
/// empty ones: a tile spread over more than ten 256-thread blocks at 7 atoms per thread, whose
/// carries a work-oriented fix-up combines. Named for messages, seeds included.
pub fn adversarial_matrices(seed: u64) -> Vec<(String, Csr<f32>)> {
    let mut out = Vec::new();
    for (i, &shape) in SHAPES.iter().enumerate() {
        for (rows, cols) in [(1, 1), (37, 19), (700, 300)] {
            let seed = seed.wrapping_add((i * 1000 + rows) as u64);
            out.push((
                format!("{shape:?} {rows}x{cols} seed {seed}"),
                random_csr(shape, rows, cols, seed),
            ));
        }
    }
    let mut lengths = vec![0usize; 50];
    lengths[20] = 20_000;
    lengths[21] = 3;
    let mut offsets = vec![0usize];
    for l in &lengths {
        offsets.push(offsets.last().unwrap() + l);
    }
    let atoms = *offsets.last().unwrap();
    let cols: Vec<u32> = (0..atoms as u32).map(|i| i % 97).collect();
    out.push((
        format!("one row of 20000 atoms, seed {seed}"),
        Csr::new(50, 97, offsets, cols, random_vec(atoms, seed ^ 5)).unwrap(),
    ));
    out
}

pub fn random_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// The same matrix with f64 values.
pub fn to_f64(a: &Csr<f32>) -> Csr<f64> {
    Csr::new(
        a.num_rows,
        a.num_cols,
        a.row_offsets.clone(),
        a.col_indices.clone(),
        a.values.iter().map(|&v| f64::from(v)).collect(),
    )
    .expect("same structure")
}

/// Every edge of a frontier's vertices pushes its destination: a BFS expansion without the
/// visited check, so repeated frontier entries and shared neighbours push repeatedly.
#[load_balanced(schedule = "every", tiles = "frontier")]
pub fn gather(g: &Csr<f32>, frontier: &[u32], out: &mut Queue, #[atom] e: usize) {
    out.push(g.col_indices[e]);
}

/// SpMV restricted to a frontier's rows: `y[row]` for each listed row, other rows untouched.
#[load_balanced(schedule = "every", reduce = "sum", output = "y", tiles = "frontier")]
pub fn frontier_spmv(a: &Csr<f32>, frontier: &[u32], x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// A push inside an `if`, under every schedule: the positions of the positive entries (so the
/// pushing lanes of a warp are a scattered subset).
#[load_balanced(schedule = "every")]
pub fn positives(a: &Csr<f32>, out: &mut Queue, #[atom] nz: usize) {
    if a.values[nz] > 0.0 {
        out.push(nz as u32);
    }
}

/// SpMV over a COO; the body checks that its atom's stored row is the tile it was given (a
/// wrong tile mapping shows up as 1000 in the output).
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub fn coo_spmv(a: &Coo<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    if a.row_indices[nz] as usize == row {
        a.values[nz] * x[a.col_indices[nz] as usize]
    } else {
        1000.0
    }
}

/// y = Aᵀ·x over a CSC (tiles are columns), plus each atom's rank so `#[rank]` is checked too.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub fn csc_spmv_t(a: &Csc<f32>, x: &[f32], #[atom] nz: usize, #[rank] k: usize) -> f32 {
    a.values[nz] * x[a.row_indices[nz] as usize] + k as f32 * 0.25
}

/// SpMM over a COO with lanes.
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "k")]
pub fn coo_spmm(a: &Coo<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// Pushes inside a loop whose trip count differs per lane: `col % 3` copies of each atom.
#[load_balanced(schedule = "every")]
pub fn repeat_push(a: &Csr<f32>, out: &mut Queue, #[atom] nz: usize) {
    for _ in 0..a.col_indices[nz] % 3 {
        out.push(nz as u32);
    }
}

/// A frontier over a COO: each atom pushes its stored row, which must be its tile.
#[load_balanced(schedule = "every", tiles = "frontier")]
pub fn coo_frontier_rows(a: &Coo<f32>, frontier: &[u32], out: &mut Queue, #[atom] nz: usize) {
    out.push(a.row_indices[nz]);
}

/// A frontier of columns over a CSC: each atom pushes its row index.
#[load_balanced(schedule = "every", tiles = "frontier")]
pub fn csc_frontier_rows(a: &Csc<f32>, frontier: &[u32], out: &mut Queue, #[atom] nz: usize) {
    out.push(a.row_indices[nz]);
}

/// Sums agree within a relative tolerance of the row's magnitude (schedules may add in another
/// order); the reference is recomputed in f64 from the matrix, independent of the macro.
pub fn assert_spmv_close(a: &Csr<f32>, x: &[f32], got: &[f32], what: &str) {
    assert_eq!(got.len(), a.num_rows, "{what}: output length");
    for (row, &value) in got.iter().enumerate() {
        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
        for nz in a.row(row) {
            let term = f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
            exact += term;
            magnitude += term.abs();
        }
        let tol = 1e-5 * magnitude.max(1e-30);
        assert!(
            (f64::from(value) - exact).abs() <= tol,
            "{what}: row {row}: got {value}, f64 reference {exact}"
        );
    }
}

/// C = A·B (`got` row-major `rows × k`, B row-major `cols × k`) against the f64 product recomputed
/// here, to a tolerance relative to the sum of the terms' magnitudes (the schedules sum in
/// different orders).
pub fn assert_spmm_close(a: &Csr<f32>, b: &[f32], k: usize, got: &[f32], what: &str) {
    assert_eq!(got.len(), a.num_rows * k, "{what}: output length");
    for row in 0..a.num_rows {
        for j in 0..k {
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for nz in a.row(row) {
                let col = a.col_indices[nz] as usize;
                let term = f64::from(a.values[nz]) * f64::from(b[col * k + j]);
                exact += term;
                magnitude += term.abs();
            }
            let value = got[row * k + j];
            assert!(
                (f64::from(value) - exact).abs() <= 1e-5 * magnitude.max(1e-30),
                "{what}: c[{row}][{j}] = {value}, f64 reference {exact}"
            );
        }
    }
}
