//! SpMM against an f64 reference computed here, independent of the macro, for every schedule and
//! lane counts on both sides of each register-blocking step (`lanes_per_thread`: 1, 2 or 4 lanes
//! per thread) and of the warp: k ∈ {1, 2, 3, 5, 8, 31, 32, 33, 64, 100, 128}, on adversarial
//! matrices (no rows, rows without nonzeros, one nonzero, a row longer than a block, rows longer
//! than a warp, a row past the huge-tile threshold). A body with side effects (an atomic per
//! lane) is checked the same way: its masked lanes must be skipped, not clamped; and so is SpMM
//! over a frontier of rows, repeats included.

mod common;

use common::*;
use lb::prelude::*;

/// The lane counts the issue names: the edges of R = 1, 2, 4 and of a warp of lanes.
const KS: [usize; 11] = [1, 2, 3, 5, 8, 31, 32, 33, 64, 100, 128];

/// C = A·B through atomics, without `reduce`: each (atom, lane) adds its product to C.
#[load_balanced(schedule = "every", lanes = "k")]
fn spmm_atomic(
    a: &Csr<f32>,
    b: &[f32],
    k: usize,
    c: &mut [f32],
    #[tile] row: usize,
    #[atom] nz: usize,
    #[lane] j: usize,
) {
    atomic_add(
        &mut c[row * k + j],
        a.values[nz] * b[a.col_indices[nz] as usize * k + j],
    );
}

/// C = A·B on the rows a frontier lists (`c[row * k + j]`); other rows are not written.
#[load_balanced(
    schedule = "every",
    reduce = "sum",
    output = "c",
    lanes = "k",
    tiles = "frontier"
)]
fn frontier_spmm(
    a: &Csr<f32>,
    frontier: &[u32],
    b: &[f32],
    k: usize,
    #[atom] nz: usize,
    #[lane] j: usize,
) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// The adversarial matrices, each with a name for the messages.
fn matrices(seed: u64) -> Vec<(String, Csr<f32>)> {
    let mut out: Vec<(String, Csr<f32>)> = SHAPES
        .iter()
        .map(|&shape| (format!("{shape:?}"), random_csr(shape, 90, 800, seed)))
        .collect();
    out.push((
        "power_law".into(),
        lb::generate::power_law(300, 300, 6.0, seed),
    ));
    out
}

/// Runs every schedule of both bodies on `a` with `k` lanes and checks each result.
fn check(dev: &Device, a: &Csr<f32>, k: usize, seed: u64, name: &str) {
    let b = random_vec(a.num_cols * k, seed);
    let da = DeviceCsr::upload(dev, a).unwrap();
    let db = dev.upload(&b).unwrap();
    for &s in spmm::SCHEDULES {
        // Garbage first: every element of C, empty rows' and the last lane's included, is written.
        let mut dc = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
        spmm::launch_with(dev, s, &da, &db, k, &mut dc).unwrap();
        let what = format!("{name} (seed {seed}), k = {k}, {}", s.name());
        assert_spmm_close(a, &b, k, &dev.download(&dc).unwrap(), &what);
    }
    for &s in spmm_atomic::SCHEDULES {
        let mut dc = dev.upload(&vec![0.0f32; a.num_rows * k]).unwrap();
        spmm_atomic::launch_with(dev, s, &da, &db, k, &mut dc).unwrap();
        let what = format!("{name} (seed {seed}), k = {k}, atomic {}", s.name());
        assert_spmm_close(a, &b, k, &dev.download(&dc).unwrap(), &what);
    }
}

#[test]
fn spmm_matches_the_f64_reference_for_every_lane_count_and_schedule() {
    let dev = Device::default();
    for (i, &k) in KS.iter().enumerate() {
        let seed = 1000 + i as u64;
        for (name, a) in matrices(seed) {
            check(&dev, &a, k, seed, &name);
        }
    }
}

/// A row past the huge-tile threshold (`4 × block × 16` atoms at the default block) among short
/// ones, and rows around the split's lane threshold (256 atoms) and one lane chunk (2048): the
/// tile-oriented schedules hand them to the huge-tile split.
#[test]
fn spmm_with_a_huge_row_matches_the_f64_reference() {
    let dev = Device::default();
    let (rows, giant) = (40, 17_000);
    let mut t = Vec::new();
    // With lanes the split takes rows from 256 atoms: one row just below, rows of one lane
    // chunk (2048) and just past it, walked by the split's lane walk.
    let long = [(5, 255), (10, 256), (15, 2048), (25, 2049)];
    for r in 0..rows {
        if r == rows / 2 {
            t.extend((0..giant).map(|c| (r, c, 0.25 + (c % 5) as f32)));
        } else if let Some(&(_, n)) = long.iter().find(|l| l.0 == r) {
            t.extend((0..n).map(|c| (r, (c * 7 + r) % giant, 0.5 - (c % 3) as f32)));
        } else {
            t.push((r, (r * 389) % giant, 1.5 - (r % 3) as f32));
        }
    }
    let a = Csr::from_triplets(rows, giant, t).expect("a valid matrix");
    for (k, seed) in [(3, 7), (33, 8)] {
        check(&dev, &a, k, seed, "huge row");
    }
}

/// SpMM over a frontier that lists some rows, one of them twice, for lane counts on both sides of
/// each register-blocking step: listed rows hold the product, the others what was there.
#[test]
fn frontier_spmm_matches_the_f64_reference() {
    const UNTOUCHED: f32 = -7.0;
    let dev = Device::default();
    let a = lb::generate::power_law(200, 200, 6.0, 21);
    let mut frontier: Vec<u32> = (0..a.num_rows as u32).filter(|r| r % 3 != 1).collect();
    frontier.push(frontier[frontier.len() / 2]);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let df = dev.upload(&frontier).unwrap();
    for k in [3usize, 16, 33, 100] {
        let b = random_vec(a.num_cols * k, k as u64);
        let db = dev.upload(&b).unwrap();
        // (exact product, sum of the terms' magnitudes) per element, in f64.
        let want: Vec<(f64, f64)> = (0..a.num_rows * k)
            .map(|e| {
                let (row, j) = (e / k, e % k);
                a.row(row).fold((0.0, 0.0), |(sum, mag), nz| {
                    let col = a.col_indices[nz] as usize;
                    let term = f64::from(a.values[nz]) * f64::from(b[col * k + j]);
                    (sum + term, mag + term.abs())
                })
            })
            .collect();
        for &s in frontier_spmm::SCHEDULES {
            let mut dc = dev.upload(&vec![UNTOUCHED; a.num_rows * k]).unwrap();
            frontier_spmm::launch_with(&dev, s, &da, &df, &db, k, &mut dc).unwrap();
            let got = dev.download(&dc).unwrap();
            for row in 0..a.num_rows {
                let listed = frontier.contains(&(row as u32));
                for j in 0..k {
                    let (g, (w, mag)) = (got[row * k + j], want[row * k + j]);
                    let what = format!("frontier, k = {k}, {}: c[{row}][{j}]", s.name());
                    if listed {
                        let err = (f64::from(g) - w).abs();
                        assert!(err <= 1e-5 * mag.max(1e-30), "{what} = {g}, f64 {w}");
                    } else {
                        assert_eq!(g.to_bits(), UNTOUCHED.to_bits(), "{what} was written");
                    }
                }
            }
        }
    }
}
