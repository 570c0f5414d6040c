//! Every generated schedule × every example body against the CPU reference, on random and
//! adversarial tile sets. Runs on `Device::default()`: the simulator here, the GPU on a GPU machine.

// Rows index the matrix, the reference and the output together; a range reads best.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use lb::prelude::*;
use proptest::prelude::*;

fn device() -> Device {
    Device::default()
}

fn check_spmv(a: &Csr<f32>, seed: u64) -> Result<(), TestCaseError> {
    let dev = device();
    let x = random_vec(a.num_cols, seed);
    let mut reference = vec![f32::NAN; a.num_rows];
    spmv::cpu(a, &x, &mut reference);
    assert_spmv_close(a, &x, &reference, "cpu reference");
    let da = DeviceCsr::upload(&dev, a).unwrap();
    let dx = dev.upload(&x).unwrap();
    for &s in spmv::SCHEDULES {
        // Garbage in the output first: every row, empty ones included, must be written.
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
        let got = dev.download(&dy).unwrap();
        assert_spmv_close(a, &x, &got, s.name());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn spmv_matches_reference(shape in 0..SHAPES.len(), rows in 1usize..1500, cols in 1usize..900, seed in any::<u64>()) {
        check_spmv(&random_csr(SHAPES[shape], rows, cols, seed), seed)?;
    }

    #[test]
    fn min_max_reductions_are_exact(shape in 0..SHAPES.len(), rows in 1usize..600, cols in 1usize..300, seed in any::<u64>()) {
        let dev = device();
        let a32 = random_csr(SHAPES[shape], rows, cols, seed);
        let a = to_f64(&a32);
        let x: Vec<f64> = random_vec(a.num_cols, seed ^ 1).into_iter().map(f64::from).collect();
        let mut lo_ref = vec![0.0; a.num_rows];
        row_min::cpu(&a, &x, &mut lo_ref);
        let mut hi_ref = vec![0u32; a.num_rows];
        row_max_col::cpu(&a32, &mut hi_ref);
        for row in 0..a.num_rows {
            let lo = a.row(row).map(|nz| a.values[nz] * x[a.col_indices[nz] as usize]).fold(f64::INFINITY, f64::min);
            prop_assert_eq!(lo_ref[row], lo);
            let hi = a.row(row).enumerate().map(|(k, nz)| a.col_indices[nz] + k as u32).max().unwrap_or(0);
            prop_assert_eq!(hi_ref[row], hi);
        }
        let (da, da32, dx) = (DeviceCsr::upload(&dev, &a).unwrap(), DeviceCsr::upload(&dev, &a32).unwrap(), dev.upload(&x).unwrap());
        for &s in row_min::SCHEDULES {
            let mut lo = dev.zeros::<f64>(a.num_rows).unwrap();
            row_min::launch_with(&dev, s, &da, &dx, &mut lo).unwrap();
            prop_assert_eq!(dev.download(&lo).unwrap(), lo_ref.clone(), "row_min {}", s.name());
        }
        for &s in row_max_col::SCHEDULES {
            let mut hi = dev.upload(&vec![7u32; a.num_rows]).unwrap();
            row_max_col::launch_with(&dev, s, &da32, &mut hi).unwrap();
            prop_assert_eq!(dev.download(&hi).unwrap(), hi_ref.clone(), "row_max_col {}", s.name());
        }
    }

    #[test]
    fn side_effects_visit_every_atom_once(shape in 0..SHAPES.len(), rows in 1usize..800, cols in 1usize..200, seed in any::<u64>()) {
        let dev = device();
        let a = random_csr(SHAPES[shape], rows, cols, seed);
        let mut counts_ref = vec![0u32; a.num_cols];
        let mut sums_ref = vec![0.0f32; a.num_cols];
        scatter::cpu(&a, &mut counts_ref, &mut sums_ref);
        let mut per_column = vec![0u32; a.num_cols];
        for &c in &a.col_indices {
            per_column[c as usize] += 1;
        }
        prop_assert_eq!(&counts_ref, &per_column);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for &s in scatter::SCHEDULES {
            let mut counts = dev.zeros::<u32>(a.num_cols).unwrap();
            let mut sums = dev.zeros::<f32>(a.num_cols).unwrap();
            scatter::launch_with(&dev, s, &da, &mut counts, &mut sums).unwrap();
            prop_assert_eq!(dev.download(&counts).unwrap(), per_column.clone(), "{}", s.name());
            let got = dev.download(&sums).unwrap();
            for c in 0..a.num_cols {
                let tol = 1e-4 * (1.0 + sums_ref[c].abs());
                prop_assert!((got[c] - sums_ref[c]).abs() <= tol, "{} column {c}: {} vs {}", s.name(), got[c], sums_ref[c]);
            }
        }
    }

    #[test]
    fn mixed_body_matches_reference(shape in 0..SHAPES.len(), rows in 1usize..400, cols in 1usize..300, shift in -50i32..50, seed in any::<u64>()) {
        let dev = device();
        let a = to_f64(&random_csr(SHAPES[shape], rows, cols, seed));
        let x: Vec<f64> = random_vec(a.num_cols, seed ^ 2).into_iter().map(f64::from).collect();
        let mut want = vec![0.0; a.num_rows];
        mixed::cpu(&a, &x, shift, &mut want);
        let (da, dx) = (DeviceCsr::upload(&dev, &a).unwrap(), dev.upload(&x).unwrap());
        for &s in mixed::SCHEDULES {
            let mut out = dev.zeros::<f64>(a.num_rows).unwrap();
            mixed::launch_with(&dev, s, &da, &dx, shift, &mut out).unwrap();
            let got = dev.download(&out).unwrap();
            for row in 0..a.num_rows {
                let tol = 1e-9 * (1.0 + want[row].abs()) * (a.row(row).len() as f64 + 1.0);
                prop_assert!((got[row] - want[row]).abs() <= tol, "{} row {row}: {} vs {}", s.name(), got[row], want[row]);
            }
        }
    }

    #[test]
    fn spmm_lanes_match_reference(rows in 1usize..300, cols in 1usize..100, k in prop::sample::select(vec![1usize, 3, 32, 33]), seed in any::<u64>()) {
        let dev = device();
        let a = random_csr(Shape::Random, rows, cols, seed);
        let b = random_vec(a.num_cols * k, seed ^ 3);
        let mut want = vec![0.0f32; a.num_rows * k];
        spmm::cpu(&a, &b, k, &mut want);
        let (da, db) = (DeviceCsr::upload(&dev, &a).unwrap(), dev.upload(&b).unwrap());
        for &s in spmm::SCHEDULES {
            let mut c = dev.zeros::<f32>(a.num_rows * k).unwrap();
            spmm::launch_with(&dev, s, &da, &db, k, &mut c).unwrap();
            let got = dev.download(&c).unwrap();
            for i in 0..want.len() {
                let (row, j) = (i / k, i % k);
                let exact: f64 = a.row(row).map(|nz| f64::from(a.values[nz]) * f64::from(b[a.col_indices[nz] as usize * k + j])).sum();
                let magnitude: f64 = a.row(row).map(|nz| (f64::from(a.values[nz]) * f64::from(b[a.col_indices[nz] as usize * k + j])).abs()).sum();
                prop_assert!((f64::from(got[i]) - exact).abs() <= 1e-5 * magnitude.max(1e-30), "{} c[{row}][{j}]: {} vs {exact}", s.name(), got[i]);
            }
        }
    }
}

/// A bipartite relaxation: sources (the first half) point only at targets (the second half), so
/// the result does not depend on the order atoms run in. Distances and weights are negative too.
#[test]
fn atomic_min_relaxation_handles_negative_floats() {
    let dev = device();
    for seed in 0..6u64 {
        let half = 300;
        let base = random_csr(Shape::Random, half, half, seed);
        let mut offsets = base.row_offsets.clone();
        offsets.extend(std::iter::repeat_n(base.nnz(), half));
        let cols: Vec<u32> = base.col_indices.iter().map(|&c| c + half as u32).collect();
        let g = Csr::new(2 * half, 2 * half, offsets, cols, base.values.clone()).unwrap();
        let dist0: Vec<f32> = random_vec(2 * half, seed ^ 9)
            .iter()
            .map(|v| v * 3.0)
            .collect();

        let mut want = dist0.clone();
        let mut want_improved = vec![0u32; 2 * half];
        for u in 0..half {
            for e in g.row(u) {
                let v = g.col_indices[e] as usize;
                let d = dist0[u] + g.values[e];
                if d < want[v] {
                    want[v] = d;
                    want_improved[v] = 1;
                }
            }
        }
        let mut cpu_dist = dist0.clone();
        let mut cpu_improved = vec![0u32; 2 * half];
        relax::cpu(&g, &mut cpu_dist, &mut cpu_improved);
        assert_eq!(cpu_dist, want);
        assert_eq!(cpu_improved, want_improved);

        let dg = DeviceCsr::upload(&dev, &g).unwrap();
        for &s in relax::SCHEDULES {
            let mut dist = dev.upload(&dist0).unwrap();
            let mut improved = dev.zeros::<u32>(2 * half).unwrap();
            relax::launch_with(&dev, s, &dg, &mut dist, &mut improved).unwrap();
            assert_eq!(
                dev.download(&dist).unwrap(),
                want,
                "{} seed {seed}",
                s.name()
            );
            assert_eq!(
                dev.download(&improved).unwrap(),
                want_improved,
                "{} seed {seed}",
                s.name()
            );
        }
    }
}

#[test]
fn checked_launch_reports_out_of_range_index() {
    let dev = device();
    // Column 5 is valid for the matrix but x has only 3 entries.
    let a = Csr::new(2, 6, vec![0, 1, 2], vec![1, 5], vec![1.0f32, 2.0]).unwrap();
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&[1.0f32, 2.0, 3.0]).unwrap(),
    );
    for &s in spmv_checked::SCHEDULES {
        let mut dy = dev.zeros::<f32>(2).unwrap();
        match spmv_checked::launch_with(&dev, s, &da, &dx, &mut dy) {
            Err(lb::Error::OutOfBounds { param, index }) => {
                assert_eq!(param, "x", "{}", s.name());
                assert_eq!(index, 5, "{}", s.name());
            }
            other => panic!(
                "{}: expected an out-of-bounds error, got {other:?}",
                s.name()
            ),
        }
    }
    let good = dev.upload(&[1.0f32; 6]).unwrap();
    let mut dy = dev.zeros::<f32>(2).unwrap();
    spmv_checked::launch(&dev, &da, &good, &mut dy).unwrap();
    assert_eq!(dev.download(&dy).unwrap(), vec![1.0, 2.0]);
}

#[test]
fn short_output_is_an_error_not_a_fault() {
    let dev = device();
    let a = random_csr(Shape::Random, 10, 10, 1);
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&random_vec(10, 2)).unwrap(),
    );
    let mut dy = dev.zeros::<f32>(9).unwrap();
    assert!(matches!(
        spmv::launch(&dev, &da, &dx, &mut dy),
        Err(lb::Error::Shape(_))
    ));
}

/// Every schedule promises determinism (docs/schedules.md): equal inputs give bitwise equal
/// outputs, launch after launch. The matrices make the promise hard to keep: rows split across
/// threads and blocks (the fix-ups), one row long enough for the huge-tile split (which runs
/// with the default block of 256 from 16 384 atoms), empty rows between long ones, and on a GPU
/// enough blocks that their order of completion varies. Each output is also held to the f64
/// reference, so a schedule that is wrong the same way every time fails too.
#[test]
fn repeated_launches_are_bitwise_identical() {
    let dev = device();
    // A GPU schedules blocks differently from run to run; the simulator does not, so a few runs
    // suffice there and keep the suite quick.
    let runs = if dev.is_gpu() { 20 } else { 2 };
    let matrices = [
        ("alternating", random_csr(Shape::Alternating, 700, 500, 11)),
        ("one giant row", giant_row_matrix()),
    ];
    for (name, a) in &matrices {
        let x = random_vec(a.num_cols, 12);
        let (da, dx) = (DeviceCsr::upload(&dev, a).unwrap(), dev.upload(&x).unwrap());
        for &s in spmv::SCHEDULES {
            let mut first: Option<Vec<u32>> = None;
            for run in 0..runs {
                let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
                spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
                let y = dev.download(&dy).unwrap();
                let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                match &first {
                    None => {
                        assert_spmv_close(a, &x, &y, &format!("{name}, {}", s.name()));
                        first = Some(bits);
                    }
                    Some(want) => {
                        let differ = bits.iter().zip(want).filter(|(g, w)| g != w).count();
                        assert!(
                            differ == 0,
                            "{name}: {} is not deterministic: run {run} differs from the first \
                             in {differ} rows",
                            s.name()
                        );
                    }
                }
            }
        }
    }
}

/// A power law of 3 000 rows with row 1 000 replaced by 20 000 atoms: long enough for the
/// huge-tile split (16 384 atoms at the default block of 256).
fn giant_row_matrix() -> Csr<f32> {
    let base = lb::generate::power_law(3000, 25_000, 6.0, 21);
    let mut triplets: Vec<(usize, usize, f32)> = (0..base.num_rows)
        .filter(|&r| r != 1000)
        .flat_map(|r| {
            let base = &base;
            base.row(r)
                .map(move |nz| (r, base.col_indices[nz] as usize, base.values[nz]))
        })
        .collect();
    // 20 000 atoms in row 1000.
    triplets.extend((0..20_000).map(|c| (1000, c, 0.25 + (c % 13) as f32 * 0.5)));
    Csr::from_triplets(3000, 25_000, triplets).unwrap()
}

/// The same promise with lanes: SpMM with 5 columns over the giant row, whose huge-tile split
/// and fix-up then run per lane.
#[test]
fn repeated_spmm_launches_are_bitwise_identical() {
    let dev = device();
    let runs = if dev.is_gpu() { 20 } else { 2 };
    let (a, k) = (giant_row_matrix(), 5);
    let b = random_vec(a.num_cols * k, 13);
    let (da, db) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&b).unwrap(),
    );
    for &s in spmm::SCHEDULES {
        let mut first: Option<Vec<u32>> = None;
        for run in 0..runs {
            let mut c = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
            spmm::launch_with(&dev, s, &da, &db, k, &mut c).unwrap();
            let got = dev.download(&c).unwrap();
            let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
            let Some(want) = &first else {
                for j in 0..k {
                    let column: Vec<f32> = (0..a.num_rows).map(|r| got[r * k + j]).collect();
                    let bj: Vec<f32> = (0..a.num_cols).map(|c| b[c * k + j]).collect();
                    assert_spmv_close(&a, &bj, &column, &format!("{}, lane {j}", s.name()));
                }
                first = Some(bits);
                continue;
            };
            let differ = bits.iter().zip(want).filter(|(g, w)| g != w).count();
            assert!(
                differ == 0,
                "{} SpMM is not deterministic: run {run} differs from the first in {differ} \
                 entries",
                s.name()
            );
        }
    }
}

/// `"every"` expands to `"auto"`'s schedules and the extra ones, so the loops above test each
/// built-in schedule; every
/// schedule has a plan (several when it has index-width or group-size variants) whose kernels are
/// in the module.
#[test]
fn every_generates_every_schedule() {
    assert!(!Schedule::ALL.is_empty());
    assert!(Schedule::ALL.iter().all(|s| spmv::SCHEDULES.contains(s)));
    assert_eq!(spmv::SCHEDULES, Schedule::every().collect::<Vec<_>>());
    for schedule in spmv::SCHEDULES {
        assert!(
            spmv::PLANS.iter().any(|p| p.schedule == schedule.name()),
            "no plan for {}",
            schedule.name()
        );
    }
    for plan in spmv::PLANS {
        assert!(
            spmv::SCHEDULES.iter().any(|s| s.name() == plan.schedule),
            "stray plan {}",
            plan.schedule
        );
        for k in plan.kernels.iter() {
            assert!(
                spmv::PTX.contains(&format!(".entry {}(", k.entry)),
                "{} missing from PTX",
                k.entry
            );
        }
    }
}

/// LRB's binning depends only on the tile set: the first launch bins, later launches on the same
/// matrix reuse the bins and skip the count, scan and scatter kernels; another matrix bins anew.
#[test]
fn lrb_reuses_its_bins_for_the_same_tile_set_only() {
    let dev = device();
    let a = random_csr(Shape::Alternating, 400, 300, 21);
    let b = random_csr(Shape::Random, 500, 300, 22);
    let x = random_vec(300, 23);
    let dx = dev.upload(&x).unwrap();
    let (da, db) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        DeviceCsr::upload(&dev, &b).unwrap(),
    );
    let ran = |l: &Launch| {
        l.kernels
            .iter()
            .map(|k| k.entry.clone())
            .collect::<Vec<_>>()
    };
    // The 32-bit-offsets plan: these tile sets are small.
    let producers = [
        "spmv_lrb_count_u32",
        "spmv_lrb_scan_u32",
        "spmv_lrb_scatter_u32",
    ];

    let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    let first = spmv::launch_with(&dev, Schedule::Lrb, &da, &dx, &mut dy).unwrap();
    assert!(
        producers.iter().all(|p| ran(&first).iter().any(|e| e == p)),
        "{:?}",
        ran(&first)
    );
    assert_spmv_close(&a, &x, &dev.download(&dy).unwrap(), "lrb, cold");
    assert_eq!(da.temp_cache().len(), 1);

    let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    let second = spmv::launch_with(&dev, Schedule::Lrb, &da, &dx, &mut dy).unwrap();
    assert!(
        producers
            .iter()
            .all(|p| !ran(&second).iter().any(|e| e == p)),
        "{:?}",
        ran(&second)
    );
    assert!(!second.kernels.is_empty());
    assert_spmv_close(&a, &x, &dev.download(&dy).unwrap(), "lrb, warm");

    assert!(db.temp_cache().is_empty());
    let mut dyb = dev.upload(&vec![f32::NAN; b.num_rows]).unwrap();
    let other = spmv::launch_with(&dev, Schedule::Lrb, &db, &dx, &mut dyb).unwrap();
    assert!(
        producers.iter().all(|p| ran(&other).iter().any(|e| e == p)),
        "{:?}",
        ran(&other)
    );
    assert_spmv_close(&b, &x, &dev.download(&dyb).unwrap(), "lrb, other matrix");
}
