//! COO and CSC tile sets, lanes, frontiers and queues: every generated schedule against the CPU
//! reference on the simulator (or the GPU on a GPU machine), on random and adversarial shapes.

// Rows index the matrix, the reference and the output together; a range reads best.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use lb::prelude::*;
use lb::Error;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn device() -> Device {
    Device::default()
}

/// `got` agrees with the f64 `exact` within a relative tolerance of `magnitude`.
fn assert_close(got: f32, exact: f64, magnitude: f64, what: &str) {
    let tol = 1e-5 * magnitude.max(1e-30);
    assert!(
        (f64::from(got) - exact).abs() <= tol,
        "{what}: got {got}, f64 reference {exact}"
    );
}

/// A frontier of `len` random rows of `a`, with repeats; empty when the matrix has no rows.
fn random_frontier(rows: usize, len: usize, seed: u64) -> Vec<u32> {
    if rows == 0 {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut f: Vec<u32> = (0..len).map(|_| rng.random_range(0..rows as u32)).collect();
    if let Some(&first) = f.first() {
        // At least one repeated vertex.
        f.push(first);
    }
    f
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

#[test]
fn conversions_round_trip_and_validate() {
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let a = random_csr(shape, 97, 61, i as u64);
        let csc = a.to_csc().unwrap();
        csc.validate().unwrap();
        assert_eq!(csc.to_csr().unwrap(), a, "{shape:?}: CSR → CSC → CSR");
        let coo = a.to_coo().unwrap();
        coo.validate().unwrap();
        assert_eq!(coo.to_csr().unwrap(), a, "{shape:?}: CSR → COO → CSR");
        assert_eq!(coo.to_csc().unwrap(), csc, "{shape:?}: COO → CSC");
        assert_eq!(csc.to_coo().unwrap(), coo, "{shape:?}: CSC → COO");
        for j in 0..csc.num_cols {
            for e in csc.col(j) {
                let r = csc.row_indices[e] as usize;
                assert!(a.row(r).any(|nz| a.col_indices[nz] as usize == j));
            }
        }
    }
    // Bad input is an error naming the fault, never a panic.
    let unsorted = Coo::new(3, 3, vec![1, 0], vec![0, 0], vec![1.0f32, 2.0]);
    assert!(matches!(unsorted, Err(Error::InvalidMatrix(m)) if m.contains("sorted by row")));
    assert!(Coo::new(2, 2, vec![2], vec![0], vec![1.0f32]).is_err());
    assert!(Coo::new(2, 2, vec![0, 1], vec![0], vec![1.0f32]).is_err());
    assert!(Csc::new(2, 2, vec![0, 2, 1], vec![0, 1], vec![1.0f32, 2.0]).is_err());
    assert!(Csc::new(2, 2, vec![0, 1, 2], vec![0, 5], vec![1.0f32, 2.0]).is_err());
    assert!(Csc::new(2, 2, vec![0, 1], vec![0], vec![1.0f32]).is_err());
}

#[test]
fn host_queue_api() {
    let mut q = Queue::new();
    assert!(q.is_empty());
    q.push(3);
    q.push(1);
    assert_eq!((q.len(), q.as_slice()), (2, &[3, 1][..]));
    q.clear();
    assert!(q.is_empty());
}

#[test]
fn device_queue_clear_and_grow() {
    let dev = device();
    let a = random_csr(Shape::Random, 40, 30, 5);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let frontier: Vec<u32> = (0..a.num_rows as u32).collect();
    let df = dev.upload(&frontier).unwrap();
    let mut q = DeviceQueue::new(&dev, a.nnz()).unwrap();
    gather::launch_with(&dev, Schedule::ThreadMapped, &da, &df, &mut q).unwrap();
    assert_eq!(q.len().unwrap(), a.nnz());
    q.grow(a.nnz() * 2).unwrap();
    assert_eq!(q.capacity(), a.nnz() * 2);
    assert_eq!(sorted(q.download().unwrap()), sorted(a.col_indices.clone()));
    q.clear().unwrap();
    assert!(q.is_empty().unwrap());
    assert_eq!(q.pushed().unwrap(), 0);
}

fn check_coo(a: &Csr<f32>, seed: u64) {
    let dev = device();
    let coo = a.to_coo().unwrap();
    let x = random_vec(a.num_cols, seed);
    let mut reference = vec![f32::NAN; a.num_rows];
    coo_spmv::cpu(&coo, &x, &mut reference);
    let (da, dx) = (
        DeviceCoo::upload(&dev, &coo).unwrap(),
        dev.upload(&x).unwrap(),
    );
    for &s in coo_spmv::SCHEDULES {
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        coo_spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
        let got = dev.download(&dy).unwrap();
        for row in 0..a.num_rows {
            let terms: Vec<f64> = a
                .row(row)
                .map(|nz| f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]))
                .collect();
            let (exact, mag) = (terms.iter().sum(), terms.iter().map(|t| t.abs()).sum());
            assert_close(reference[row], exact, mag, "coo cpu");
            assert_close(got[row], exact, mag, &format!("coo {} row {row}", s.name()));
        }
    }
}

fn check_csc(a: &Csr<f32>, seed: u64) {
    let dev = device();
    let csc = a.to_csc().unwrap();
    let x = random_vec(a.num_rows, seed);
    let mut reference = vec![f32::NAN; a.num_cols];
    csc_spmv_t::cpu(&csc, &x, &mut reference);
    // Aᵀ·x plus the ranks, from the CSC's own columns in f64.
    let exact: Vec<(f64, f64)> = (0..csc.num_cols)
        .map(|j| {
            let terms: Vec<f64> = csc
                .col(j)
                .enumerate()
                .map(|(k, e)| {
                    f64::from(csc.values[e]) * f64::from(x[csc.row_indices[e] as usize])
                        + k as f64 * 0.25
                })
                .collect();
            (terms.iter().sum(), terms.iter().map(|t| t.abs()).sum())
        })
        .collect();
    let (da, dx) = (
        DeviceCsc::upload(&dev, &csc).unwrap(),
        dev.upload(&x).unwrap(),
    );
    for &s in csc_spmv_t::SCHEDULES {
        let mut dy = dev.upload(&vec![f32::NAN; a.num_cols]).unwrap();
        csc_spmv_t::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
        let got = dev.download(&dy).unwrap();
        for j in 0..csc.num_cols {
            assert_close(reference[j], exact[j].0, exact[j].1, "csc cpu");
            assert_close(
                got[j],
                exact[j].0,
                exact[j].1,
                &format!("csc {} column {j}", s.name()),
            );
        }
    }
}

/// SpMM with `k` lanes over CSR (the common `spmm`) and COO (`coo_spmm`).
fn check_lanes(a: &Csr<f32>, k: usize, seed: u64) {
    let dev = device();
    let b = random_vec(a.num_cols * k, seed);
    let exact: Vec<(f64, f64)> = (0..a.num_rows * k)
        .map(|i| {
            let (row, j) = (i / k, i % k);
            let terms: Vec<f64> = a
                .row(row)
                .map(|nz| {
                    f64::from(a.values[nz]) * f64::from(b[a.col_indices[nz] as usize * k + j])
                })
                .collect();
            (terms.iter().sum(), terms.iter().map(|t| t.abs()).sum())
        })
        .collect();
    let mut reference = vec![f32::NAN; a.num_rows * k];
    spmm::cpu(a, &b, k, &mut reference);
    let coo = a.to_coo().unwrap();
    let mut coo_reference = vec![f32::NAN; a.num_rows * k];
    coo_spmm::cpu(&coo, &b, k, &mut coo_reference);
    let (da, dcoo, db) = (
        DeviceCsr::upload(&dev, a).unwrap(),
        DeviceCoo::upload(&dev, &coo).unwrap(),
        dev.upload(&b).unwrap(),
    );
    for &s in spmm::SCHEDULES {
        let mut dc = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
        spmm::launch_with(&dev, s, &da, &db, k, &mut dc).unwrap();
        let csr_got = dev.download(&dc).unwrap();
        let mut dc = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
        coo_spmm::launch_with(&dev, s, &dcoo, &db, k, &mut dc).unwrap();
        let coo_got = dev.download(&dc).unwrap();
        for i in 0..a.num_rows * k {
            let what = format!("k = {k}, {} item {i}", s.name());
            assert_close(reference[i], exact[i].0, exact[i].1, "spmm cpu");
            assert_close(coo_reference[i], exact[i].0, exact[i].1, "coo spmm cpu");
            assert_close(csr_got[i], exact[i].0, exact[i].1, &format!("csr {what}"));
            assert_close(coo_got[i], exact[i].0, exact[i].1, &format!("coo {what}"));
        }
    }
}

/// Frontier SpMV writes exactly the listed rows; a frontier gather pushes exactly the CPU
/// reference's multiset of destinations.
fn check_frontier(a: &Csr<f32>, frontier: &[u32], seed: u64) {
    let dev = device();
    let x = random_vec(a.num_cols, seed);
    let (da, dx, df) = (
        DeviceCsr::upload(&dev, a).unwrap(),
        dev.upload(&x).unwrap(),
        dev.upload(frontier).unwrap(),
    );
    const UNTOUCHED: f32 = 7.5;
    let mut reference = vec![UNTOUCHED; a.num_rows];
    frontier_spmv::cpu(a, frontier, &x, &mut reference);
    let mut pushed = Queue::new();
    gather::cpu(a, frontier, &mut pushed);
    let expected = sorted(pushed.as_slice().to_vec());
    assert_frontier_rows(a, frontier, (&x, 1), &reference, f32::NAN, "frontier cpu");
    for &s in frontier_spmv::SCHEDULES {
        let mut dy = dev.upload(&vec![UNTOUCHED; a.num_rows]).unwrap();
        frontier_spmv::launch_with(&dev, s, &da, &df, &dx, &mut dy).unwrap();
        let got = dev.download(&dy).unwrap();
        let what = format!("frontier {}", s.name());
        assert_frontier_rows(a, frontier, (&x, 1), &got, UNTOUCHED, &what);
        let mut q = DeviceQueue::new(&dev, expected.len()).unwrap();
        gather::launch_with(&dev, s, &da, &df, &mut q).unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            expected,
            "gather {}",
            s.name()
        );
    }
}

/// `got` (`rows × k`) holds `A·B` on the rows `frontier` lists, within f32 rounding of the f64
/// product, and `untouched` elsewhere (NaN: the other rows are not checked).
fn assert_frontier_rows(
    a: &Csr<f32>,
    frontier: &[u32],
    (b, k): (&[f32], usize),
    got: &[f32],
    untouched: f32,
    what: &str,
) {
    for row in 0..a.num_rows {
        let listed = frontier.contains(&(row as u32));
        for j in 0..k {
            let g = got[row * k + j];
            if !listed {
                let kept = untouched.is_nan() || g.to_bits() == untouched.to_bits();
                assert!(kept, "{what}: row {row} is not in the frontier, got {g}");
                continue;
            }
            let terms: Vec<f64> = a
                .row(row)
                .map(|nz| {
                    f64::from(a.values[nz]) * f64::from(b[a.col_indices[nz] as usize * k + j])
                })
                .collect();
            let (exact, mag) = (terms.iter().sum(), terms.iter().map(|t| t.abs()).sum());
            assert_close(g, exact, mag, &format!("{what}: row {row}, lane {j}"));
        }
    }
}

/// Frontier SpMV in blocks of 32 threads of two work items: a virtual block of the
/// work-oriented schedules takes 64 tiles and atoms, so a frontier of a few hundred rows needs
/// more virtual blocks than a block has threads (the fix-up kernel), and on the simulator, which
/// holds four resident blocks, a strided grid runs each block over many of them.
#[load_balanced(
    schedule = "every",
    reduce = "sum",
    output = "y",
    tiles = "frontier",
    block = 32,
    items_per_thread = 2
)]
fn narrow_frontier_spmv(a: &Csr<f32>, frontier: &[u32], x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// [`narrow_frontier_spmv`] with lanes: each lane is its own copy of the decomposition, with its
/// own run of carry slots.
#[load_balanced(
    schedule = "every",
    reduce = "sum",
    output = "c",
    lanes = "k",
    tiles = "frontier",
    block = 32,
    items_per_thread = 2
)]
fn narrow_frontier_spmm(
    a: &Csr<f32>,
    frontier: &[u32],
    b: &[f32],
    k: usize,
    #[atom] nz: usize,
    #[lane] j: usize,
) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// The frontiers of [`frontier_reductions_over_many_virtual_blocks`] over `a`, whose row `hub`
/// is its longest: one short row (one virtual block), every eighth row (a few: the main kernel
/// joins their carries), every row (dozens), every row three times over in a shuffled order (more
/// atoms than the graph has: each thread takes a larger share), and the hub forty times.
fn many_block_frontiers(a: &Csr<f32>, hub: u32, seed: u64) -> Vec<(&'static str, Vec<u32>)> {
    let rows = a.num_rows as u32;
    let short = (0..rows)
        .find(|&r| a.row(r as usize).len() == 1)
        .unwrap_or(0);
    let mut thrice: Vec<u32> = (0..3 * rows).map(|i| i % rows).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for i in (1..thrice.len()).rev() {
        thrice.swap(i, rng.random_range(0..=i));
    }
    vec![
        ("one short row", vec![short]),
        ("every eighth row", (0..rows).step_by(8).collect()),
        ("every row", (0..rows).collect()),
        ("every row thrice", thrice),
        ("the hub forty times", vec![hub; 40]),
    ]
}

/// Reductions over frontiers that need from one to hundreds of virtual blocks, repeats past the
/// graph's atoms included, without and with lanes, against the f64 product; the rows the
/// frontier does not list keep their values. On the simulator the work-oriented schedules
/// (`merge_path`, `nonzero_split`, `two_phase`, `multi_phase`) launch at most its four resident
/// blocks a lane however many virtual blocks the frontier needs.
#[test]
fn frontier_reductions_over_many_virtual_blocks() {
    const UNTOUCHED: f32 = 7.5;
    let dev = device();
    let mut a = lb::generate::power_law(500, 500, 6.0, 41);
    let hub = (0..a.num_rows).max_by_key(|&r| a.row(r).len()).unwrap_or(0) as u32;
    a.values.iter_mut().for_each(|v| *v = 0.5 + v.abs());
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    for (name, frontier) in many_block_frontiers(&a, hub, 5) {
        let df = dev.upload(&frontier).unwrap();
        for k in [1usize, 3, 33] {
            let b = random_vec(a.num_cols * k, k as u64);
            let db = dev.upload(&b).unwrap();
            let schedules = if k == 1 {
                narrow_frontier_spmv::SCHEDULES
            } else {
                narrow_frontier_spmm::SCHEDULES
            };
            for &s in schedules {
                let mut dc = dev.upload(&vec![UNTOUCHED; a.num_rows * k]).unwrap();
                let run = if k == 1 {
                    narrow_frontier_spmv::launch_with(&dev, s, &da, &df, &db, &mut dc)
                } else {
                    narrow_frontier_spmm::launch_with(&dev, s, &da, &df, &db, k, &mut dc)
                };
                let run = run.unwrap();
                let what = format!("{name}, k = {k}, {}", s.name());
                let got = dev.download(&dc).unwrap();
                assert_frontier_rows(&a, &frontier, (&b, k), &got, UNTOUCHED, &what);
                let strided = matches!(
                    s,
                    Schedule::MergePath
                        | Schedule::NonzeroSplit
                        | Schedule::TwoPhase
                        | Schedule::MultiPhase
                );
                if strided && !dev.is_gpu() {
                    // Four blocks a lane; the fix-up keeps a thread per carry slot of the bound.
                    for l in run.kernels.iter().filter(|l| !l.entry.ends_with("_fixup")) {
                        let most = 4 * k as u32;
                        assert!(l.grid <= most, "{what}: {} grid {}", l.entry, l.grid);
                    }
                }
            }
        }
    }
}

fn check_positives(a: &Csr<f32>) {
    let dev = device();
    let mut pushed = Queue::new();
    positives::cpu(a, &mut pushed);
    let expected: Vec<u32> = (0..a.nnz() as u32)
        .filter(|&nz| a.values[nz as usize] > 0.0)
        .collect();
    assert_eq!(pushed.as_slice(), &expected[..]);
    let da = DeviceCsr::upload(&dev, a).unwrap();
    for &s in positives::SCHEDULES {
        let mut q = DeviceQueue::new(&dev, expected.len()).unwrap();
        positives::launch_with(&dev, s, &da, &mut q).unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            expected,
            "positives {}",
            s.name()
        );
    }
}

/// Pushes from a loop, and frontiers over COO rows and CSC columns.
fn check_loops_and_format_frontiers(a: &Csr<f32>, seed: u64) {
    let dev = device();
    let mut pushed = Queue::new();
    repeat_push::cpu(a, &mut pushed);
    let expected = sorted(pushed.as_slice().to_vec());
    let da = DeviceCsr::upload(&dev, a).unwrap();
    for &s in repeat_push::SCHEDULES {
        let mut q = DeviceQueue::new(&dev, expected.len()).unwrap();
        repeat_push::launch_with(&dev, s, &da, &mut q).unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            expected,
            "repeat_push {}",
            s.name()
        );
    }

    let (coo, csc) = (a.to_coo().unwrap(), a.to_csc().unwrap());
    let rows = random_frontier(a.num_rows, 40, seed);
    let cols = random_frontier(a.num_cols, 40, seed ^ 1);
    // Row r appears once per atom of r, per listing; the CSC's rows once per atom of each column.
    let want_rows = sorted(
        rows.iter()
            .flat_map(|&r| std::iter::repeat_n(r, a.row(r as usize).len()))
            .collect(),
    );
    let want_cols = sorted(
        cols.iter()
            .flat_map(|&c| csc.col(c as usize).map(|e| csc.row_indices[e]))
            .collect(),
    );
    let mut cpu_rows = Queue::new();
    coo_frontier_rows::cpu(&coo, &rows, &mut cpu_rows);
    assert_eq!(sorted(cpu_rows.as_slice().to_vec()), want_rows);
    let mut cpu_cols = Queue::new();
    csc_frontier_rows::cpu(&csc, &cols, &mut cpu_cols);
    assert_eq!(sorted(cpu_cols.as_slice().to_vec()), want_cols);
    let (dcoo, dcsc) = (
        DeviceCoo::upload(&dev, &coo).unwrap(),
        DeviceCsc::upload(&dev, &csc).unwrap(),
    );
    let (drows, dcols) = (dev.upload(&rows).unwrap(), dev.upload(&cols).unwrap());
    for &s in coo_frontier_rows::SCHEDULES {
        let mut q = DeviceQueue::new(&dev, want_rows.len()).unwrap();
        coo_frontier_rows::launch_with(&dev, s, &dcoo, &drows, &mut q).unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            want_rows,
            "coo frontier {}",
            s.name()
        );
        let mut q = DeviceQueue::new(&dev, want_cols.len()).unwrap();
        csc_frontier_rows::launch_with(&dev, s, &dcsc, &dcols, &mut q).unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            want_cols,
            "csc frontier {}",
            s.name()
        );
    }
}

/// A queue one slot short (or smaller): the launch reports every push it needed, and what it
/// stored is part of what was pushed.
fn check_overflow(a: &Csr<f32>, frontier: &[u32], capacity_cut: usize) {
    let dev = device();
    let mut pushed = Queue::new();
    gather::cpu(a, frontier, &mut pushed);
    let needed = pushed.len();
    if needed == 0 {
        return;
    }
    let capacity = needed.saturating_sub(capacity_cut.max(1));
    let (da, df) = (
        DeviceCsr::upload(&dev, a).unwrap(),
        dev.upload(frontier).unwrap(),
    );
    for &s in gather::SCHEDULES {
        let mut q = DeviceQueue::new(&dev, capacity).unwrap();
        let err = gather::launch_with(&dev, s, &da, &df, &mut q).unwrap_err();
        match &err {
            Error::QueueOverflow {
                param,
                needed: n,
                capacity: c,
            } => {
                assert_eq!(
                    (param.as_str(), *n, *c),
                    ("out", needed as u64, capacity as u64),
                    "{}",
                    s.name()
                );
            }
            other => panic!("{}: expected an overflow, got {other}", s.name()),
        }
        assert!(err.to_string().contains(&format!(
            "needed {needed} slots, the queue holds {capacity}"
        )));
        let stored = q.download().unwrap();
        assert_eq!(stored.len(), capacity, "{}", s.name());
        let mut left = sorted(pushed.as_slice().to_vec());
        for v in stored {
            let at = left
                .binary_search(&v)
                .unwrap_or_else(|_| panic!("{}: {v} was never pushed", s.name()));
            left.remove(at);
        }
    }
}

#[test]
fn empty_frontier_pushes_nothing_and_writes_nothing() {
    let a = random_csr(Shape::Random, 50, 50, 3);
    check_frontier(&a, &[], 3);
}

#[test]
fn lanes_one_and_thirty_three() {
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let a = random_csr(shape, 70, 40, 100 + i as u64);
        check_lanes(&a, 1, i as u64);
        check_lanes(&a, 33, i as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn coo_and_csc_match_reference(shape in 0..SHAPES.len(), rows in 1usize..700, cols in 1usize..500, seed in any::<u64>()) {
        let a = random_csr(SHAPES[shape], rows, cols, seed);
        check_coo(&a, seed);
        check_csc(&a, seed ^ 7);
    }

    #[test]
    fn frontiers_and_queues_match_reference(shape in 0..SHAPES.len(), rows in 1usize..600, cols in 1usize..400, len in 0usize..300, seed in any::<u64>()) {
        let a = random_csr(SHAPES[shape], rows, cols, seed);
        let frontier = random_frontier(a.num_rows, len, seed ^ 3);
        check_frontier(&a, &frontier, seed);
        check_positives(&a);
    }

    #[test]
    fn loop_pushes_and_format_frontiers_match_reference(shape in 0..SHAPES.len(), rows in 1usize..400, cols in 1usize..300, seed in any::<u64>()) {
        check_loops_and_format_frontiers(&random_csr(SHAPES[shape], rows, cols, seed), seed);
    }

    #[test]
    fn overflow_is_reported_with_the_needed_size(rows in 1usize..300, cols in 1usize..200, len in 1usize..200, cut in 1usize..50, seed in any::<u64>()) {
        let a = random_csr(Shape::Random, rows, cols, seed);
        let frontier = random_frontier(a.num_rows, len, seed ^ 5);
        check_overflow(&a, &frontier, cut);
    }

    #[test]
    fn lanes_match_reference(shape in 0..SHAPES.len(), rows in 1usize..200, cols in 1usize..100, k in 1usize..40, seed in any::<u64>()) {
        check_lanes(&random_csr(SHAPES[shape], rows, cols, seed), k, seed);
    }
}
