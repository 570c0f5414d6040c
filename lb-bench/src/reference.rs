//! The CPU references of the benchmark's ops, on row blocks of the matrix side by side.
//!
//! The generated sequential reference (`cpu`) walks every lane of every row in order on one
//! core: SpMM at k = 128 took about 3.6 ns per (nonzero, lane) on the build machine, about a
//! minute per call on a large member, and a problem needs two calls (the result and its terms'
//! magnitudes). Each row's outputs depend only on that row, so blocks of rows can run at once.

use std::ops::Range;
use std::thread;

use lb::prelude::Csr;

/// The row blocks [`by_row_blocks`] makes by default: one per available core.
pub fn cores() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// `reference(block, out)` on row blocks of `a` of about equal nonzeros, at most `parts` of them
/// ([`cores`]), side by side. `out` holds `width` outputs per row, and each call gets its
/// block's rows' outputs. A row's outputs come from the same code in the same order as one call
/// on the whole matrix, so the result is the same, bit for bit.
pub fn by_row_blocks<T, O>(
    parts: usize,
    (a, width): (&Csr<T>, usize),
    out: &mut [O],
    reference: impl Fn(&Csr<T>, &mut [O]) + Sync,
) where
    T: Clone + Sync,
    O: Send,
{
    let bounds = row_bounds(a, parts);
    if bounds.len() <= 2 {
        reference(a, out);
        return;
    }
    let reference = &reference;
    thread::scope(|s| {
        let mut rest = out;
        for w in bounds.windows(2) {
            let rows = w[0]..w[1];
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * width);
            rest = tail;
            s.spawn(move || reference(&rows_of(a, rows), mine));
        }
    });
}

/// Row indices `0 = b0 < b1 < … < bn = num_rows` that cut `a` into at most `parts` blocks of
/// about equal nonzeros; `[0, 0]` for a matrix without rows.
fn row_bounds<T>(a: &Csr<T>, parts: usize) -> Vec<usize> {
    let mut bounds = vec![0];
    let nnz = a.nnz() as u128;
    for i in 1..parts {
        // The first row that starts at or after the i-th share of the nonzeros.
        let target = (nnz * i as u128 / parts as u128) as usize;
        let row = a.row_offsets[..a.num_rows].partition_point(|&o| o < target);
        if row > *bounds.last().expect("starts with row 0") {
            bounds.push(row);
        }
    }
    if a.num_rows > *bounds.last().expect("starts with row 0") || a.num_rows == 0 {
        bounds.push(a.num_rows);
    }
    bounds
}

/// Rows `rows` of `a` as a matrix of their own (offsets from 0, the same columns).
fn rows_of<T: Clone>(a: &Csr<T>, rows: Range<usize>) -> Csr<T> {
    let atoms = a.row_offsets[rows.start]..a.row_offsets[rows.end];
    Csr {
        num_rows: rows.len(),
        num_cols: a.num_cols,
        row_offsets: a.row_offsets[rows.start..=rows.end]
            .iter()
            .map(|o| o - atoms.start)
            .collect(),
        col_indices: a.col_indices[atoms.clone()].to_vec(),
        values: a.values[atoms].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{spmm, spmv};

    /// Row lengths of every shape the blocks must survive: empty rows (also first and last),
    /// one giant row, one-atom rows.
    fn matrix(lengths: &[usize], cols: usize, seed: u64) -> Csr<f32> {
        let mut offsets = vec![0];
        let (mut columns, mut values) = (Vec::new(), Vec::new());
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for &n in lengths {
            for _ in 0..n {
                columns.push((next() % cols as u64) as u32);
                values.push((next() % 2001) as f32 / 1000.0 - 1.0);
            }
            offsets.push(columns.len());
        }
        Csr::new(lengths.len(), cols, offsets, columns, values).expect("a valid matrix")
    }

    fn shapes(seed: u64) -> Vec<Csr<f32>> {
        let mut giant = vec![1; 50];
        giant[17] = 5000;
        vec![
            matrix(&[], 5, seed),
            matrix(&[0], 5, seed),
            matrix(&[3], 5, seed),
            matrix(&[0, 0, 4, 0, 0], 7, seed),
            matrix(&giant, 300, seed),
            matrix(
                &(0..200).map(|i| (i * 7919) % 13).collect::<Vec<_>>(),
                64,
                seed,
            ),
        ]
    }

    /// SpMM and SpMV by blocks give exactly the one-call reference, for every block count,
    /// more blocks than rows included.
    #[test]
    fn blocks_give_the_sequential_reference_bit_for_bit() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64);
        eprintln!("seed {seed}");
        for a in shapes(seed) {
            for k in [1usize, 3, 8] {
                let b: Vec<f32> = (0..a.num_cols * k).map(|i| (i % 17) as f32 - 8.0).collect();
                let mut whole = vec![f32::NAN; a.num_rows * k];
                spmm::cpu(&a, &b, k, &mut whole);
                for parts in [1, 2, 3, 7, 64, 1000] {
                    let mut blocks = vec![f32::NAN; a.num_rows * k];
                    by_row_blocks(parts, (&a, k), &mut blocks, |a, out| {
                        spmm::cpu(a, &b, k, out)
                    });
                    let same = whole
                        .iter()
                        .zip(&blocks)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "k = {k}, {parts} parts, {} rows", a.num_rows);
                }
            }
            let x: Vec<f32> = (0..a.num_cols).map(|i| 1.0 / (i + 1) as f32).collect();
            let mut whole = vec![f32::NAN; a.num_rows];
            spmv::cpu(&a, &x, &mut whole);
            let mut blocks = vec![f32::NAN; a.num_rows];
            by_row_blocks(cores(), (&a, 1), &mut blocks, |a, out| {
                spmv::cpu(a, &x, out)
            });
            assert!(whole
                .iter()
                .zip(&blocks)
                .all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }

    /// The bounds cover every row once, in order, in at most `parts` blocks.
    #[test]
    fn bounds_cover_every_row_once_in_order() {
        for a in shapes(3) {
            for parts in [1, 2, 5, 300] {
                let b = row_bounds(&a, parts);
                assert_eq!(b[0], 0);
                assert_eq!(*b.last().unwrap(), a.num_rows);
                assert!(b.windows(2).all(|w| w[0] < w[1] || a.num_rows == 0));
                assert!(b.len() <= parts + 1 || a.num_rows == 0);
            }
        }
    }
}
