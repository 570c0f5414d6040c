//! Seeded matrix and vector generators for tests and benchmarks.
//!
//! Everything draws from `ChaCha8Rng` with explicit 64-bit ranges, so a seed gives the same
//! matrix on every platform and every run.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::formats::Csr;

/// Pareto shape of [`power_law`] row lengths: below 2 the variance is infinite, so a few rows are
/// far longer than the mean (the load imbalance lb exists for), while the mean stays finite.
const PARETO_ALPHA: f64 = 1.5;

/// `n` distinct columns below `cols`, sorted (Floyd's sampling: O(n) draws, no rejection loop).
fn distinct_sorted(rng: &mut ChaCha8Rng, n: u64, cols: u64) -> Vec<u32> {
    let mut chosen: HashSet<u64> = HashSet::with_capacity(n as usize);
    for j in (cols - n)..cols {
        let t = rng.random_range(0..=j);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let mut out: Vec<u32> = chosen.into_iter().map(|c| c as u32).collect();
    out.sort_unstable();
    out
}

/// A matrix with the given row lengths, uniform distinct columns and values in [-1, 1).
fn with_row_lengths(rng: &mut ChaCha8Rng, cols: usize, lengths: &[u64]) -> Csr<f32> {
    let total: u64 = lengths.iter().sum();
    let mut row_offsets = Vec::with_capacity(lengths.len() + 1);
    let mut col_indices = Vec::with_capacity(total as usize);
    row_offsets.push(0);
    for &len in lengths {
        col_indices.extend(distinct_sorted(rng, len, cols as u64));
        row_offsets.push(col_indices.len());
    }
    let values = (0..col_indices.len())
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    Csr {
        num_rows: lengths.len(),
        num_cols: cols,
        row_offsets,
        col_indices,
        values,
    }
}

/// Columns are `u32`; more cannot be indexed.
fn cap_cols(cols: usize) -> usize {
    cols.min(u32::MAX as usize + 1)
}

/// A `rows × cols` matrix whose row lengths follow a Pareto law (heavy tail) with mean
/// `avg_nnz_per_row`, capped at `cols`. Lengths are scaled so the total is close to
/// `rows × avg_nnz_per_row` (mass cut off by the cap moves to the other rows), then rounded
/// stochastically, which keeps the mean.
pub fn power_law(rows: usize, cols: usize, avg_nnz_per_row: f64, seed: u64) -> Csr<f32> {
    let cols = cap_cols(cols);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Pareto(x_m = 1, alpha) by inversion; 1 - u lies in (0, 1], so the power is finite.
    let weights: Vec<f64> = (0..rows)
        .map(|_| (1.0 - rng.random::<f64>()).powf(-1.0 / PARETO_ALPHA))
        .collect();
    let target = (avg_nnz_per_row.max(0.0) * rows as f64).min(rows as f64 * cols as f64);
    // Scale the weights to the target total; rows that would exceed `cols` are capped and the
    // rest rescaled to make up the difference, until no new row hits the cap.
    let mut capped = vec![false; rows];
    let mut scale = 0.0;
    loop {
        let capped_total = capped.iter().filter(|&&c| c).count() as f64 * cols as f64;
        let free: f64 = weights
            .iter()
            .zip(&capped)
            .filter(|(_, &c)| !c)
            .map(|(w, _)| w)
            .sum();
        if free > 0.0 {
            scale = (target - capped_total).max(0.0) / free;
        }
        let mut changed = false;
        for (w, c) in weights.iter().zip(capped.iter_mut()) {
            if !*c && w * scale >= cols as f64 {
                *c = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let lengths: Vec<u64> = weights
        .iter()
        .zip(&capped)
        .map(|(w, &c)| {
            if c {
                return cols as u64;
            }
            let x = w * scale;
            let up = rng.random::<f64>() < x.fract();
            (x.floor() as u64 + u64::from(up)).min(cols as u64)
        })
        .collect();
    with_row_lengths(&mut rng, cols, &lengths)
}

/// A `rows × cols` matrix with exactly `min(nnz_per_row, cols)` entries in every row.
pub fn uniform(rows: usize, cols: usize, nnz_per_row: usize, seed: u64) -> Csr<f32> {
    let cols = cap_cols(cols);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let lengths = vec![nnz_per_row.min(cols) as u64; rows];
    with_row_lengths(&mut rng, cols, &lengths)
}

/// `n` values uniform in [-1, 1).
pub fn random_vector(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}
