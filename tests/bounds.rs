//! Safe by default: the kernels of the safe launchers test every access the host checks do not
//! prove in bounds, on every schedule, and the unchecked launchers run the same work without the
//! tests. An out-of-range index is an `Err` naming the parameter and the index. Runs on
//! `Device::default()`: on the simulator, which faults on any access outside a live allocation,
//! an `OutOfBounds` result (not `Sim`) also shows that nothing out of range was read or written;
//! on a GPU machine the same tests run the real kernels (and compute-sanitizer can watch them).

use lb::__private::{Plan, TempRole};
use lb::prelude::*;
use lb::Error;
use proptest::prelude::*;

/// `w[col + 1]`: within `x.len() >= num_cols` for `x`, but not for `w`, whose index no host check
/// bounds, so every kernel tests it.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
fn shifted(a: &Csr<f32>, x: &[f32], w: &[f32], #[atom] nz: usize) -> f32 {
    let c = a.col_indices[nz] as usize;
    a.values[nz] * x[c] + w[c + 1]
}

/// A store at an unproven index: `y[col + 1] += value`, one atomic per atom.
#[load_balanced(schedule = "every")]
fn scatter_next(a: &Csr<f32>, y: &mut [f32], #[atom] nz: usize) {
    atomic_add(&mut y[a.col_indices[nz] as usize + 1], a.values[nz]);
}

/// SpMV: every access proven, so the safe kernels are the unchecked ones.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// Row sums over a frontier, whose entries only the kernels can check.
#[load_balanced(schedule = "every", reduce = "sum", output = "y", tiles = "frontier")]
fn frontier_sums(a: &Csr<f32>, frontier: &[u32], #[atom] nz: usize) -> f32 {
    a.values[nz]
}

/// A crate that denies unsafe code still expands the macro: the unchecked entry points allow it
/// for themselves.
#[deny(unsafe_code)]
mod strict {
    use lb::prelude::*;

    #[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
    pub fn strict_spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
        a.values[nz] * x[a.col_indices[nz] as usize]
    }
}

/// A random matrix with at least one nonzero in the last column, so that `col + 1` reaches
/// `num_cols`.
fn matrix(rows: usize, cols: usize, seed: u64) -> Csr<f32> {
    let a = lb::generate::power_law(rows, cols, 4.0, seed);
    let mut triplets: Vec<(usize, usize, f32)> = (0..a.num_rows)
        .flat_map(|r| a.row(r).map(move |nz| (r, nz)))
        .map(|(r, nz)| (r, a.col_indices[nz] as usize, a.values[nz]))
        .collect();
    triplets.push((seed as usize % a.num_rows, a.num_cols - 1, 0.5));
    Csr::from_triplets(a.num_rows, a.num_cols, triplets).expect("a valid matrix")
}

/// `y[row] = Σ values · x[col] + w[col + 1]`, in f64, from the matrix alone, with the sum of the
/// magnitudes of each term's parts.
fn shifted_reference(a: &Csr<f32>, x: &[f32], w: &[f32]) -> Vec<(f64, f64)> {
    (0..a.num_rows)
        .map(|r| {
            a.row(r).fold((0.0, 0.0), |(sum, magnitude), nz| {
                let c = a.col_indices[nz] as usize;
                let product = f64::from(a.values[nz]) * f64::from(x[c]);
                let shift = f64::from(w[c + 1]);
                // The scale of f32 rounding is that of the term's two parts, which may cancel.
                (
                    sum + product + shift,
                    magnitude + product.abs() + shift.abs(),
                )
            })
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[(f64, f64)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &(sum, magnitude))) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * magnitude.max(1e-30);
        assert!(
            (f64::from(g) - sum).abs() <= tol,
            "{what}: [{i}]: got {g}, want {sum}"
        );
    }
}

fn out_of_bounds(result: lb::Result<Launch>, what: &str) -> (String, u64) {
    match result {
        Err(Error::OutOfBounds { param, index }) => (param, index),
        other => panic!("{what}: expected Error::OutOfBounds, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3, ..ProptestConfig::default() })]

    #[test]
    fn an_unproven_index_is_tested_on_every_schedule(rows in 20usize..200, cols in 2usize..150, seed in any::<u64>()) {
        let a = matrix(rows, cols, seed);
        let x = lb::generate::random_vector(a.num_cols, seed ^ 1);
        let w = lb::generate::random_vector(a.num_cols + 1, seed ^ 2);
        let dev = Device::default();
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let (dx, dw) = (dev.upload(&x).unwrap(), dev.upload(&w).unwrap());
        let short = dev.upload(&w[..a.num_cols]).unwrap();
        let want = shifted_reference(&a, &x, &w);
        let mut cpu = vec![f32::NAN; a.num_rows];
        shifted::cpu(&a, &x, &w, &mut cpu);
        assert_close(&cpu, &want, "cpu");
        for &s in shifted::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            let (param, index) = out_of_bounds(
                shifted::launch_with(&dev, s, &da, &dx, &short, &mut dy),
                s.name(),
            );
            prop_assert_eq!(param, "w", "{}", s.name());
            prop_assert_eq!(index, a.num_cols as u64, "{}", s.name());
            shifted::launch_with(&dev, s, &da, &dx, &dw, &mut dy).unwrap();
            assert_close(&dev.download(&dy).unwrap(), &want, s.name());
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            // SAFETY: `dw` holds `num_cols + 1` elements, so `w[col + 1]` is in range.
            unsafe { shifted::launch_with_unchecked(&dev, s, &da, &dx, &dw, &mut dy) }.unwrap();
            assert_close(&dev.download(&dy).unwrap(), &want, &format!("{} unchecked", s.name()));
        }
    }

    #[test]
    fn an_unproven_store_is_tested_on_every_schedule(rows in 20usize..200, cols in 2usize..150, seed in any::<u64>()) {
        let a = matrix(rows, cols, seed);
        let dev = Device::default();
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let mut want = vec![(0.0f64, 0.0f64); a.num_cols + 1];
        for (c, &v) in a.col_indices.iter().zip(&a.values) {
            let slot = &mut want[*c as usize + 1];
            *slot = (slot.0 + f64::from(v), slot.1 + f64::from(v).abs());
        }
        for &s in scatter_next::SCHEDULES {
            let mut short = dev.zeros::<f32>(a.num_cols).unwrap();
            let (param, index) = out_of_bounds(
                scatter_next::launch_with(&dev, s, &da, &mut short),
                s.name(),
            );
            prop_assert_eq!(param, "y", "{}", s.name());
            prop_assert_eq!(index, a.num_cols as u64, "{}", s.name());
            let mut dy = dev.zeros::<f32>(a.num_cols + 1).unwrap();
            scatter_next::launch_with(&dev, s, &da, &mut dy).unwrap();
            assert_close(&dev.download(&dy).unwrap(), &want, s.name());
        }
    }

    #[test]
    fn a_frontier_entry_that_is_no_tile_is_reported_by_default(rows in 5usize..200, seed in any::<u64>()) {
        let a = lb::generate::power_law(rows, 50, 4.0, seed);
        let dev = Device::default();
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let bad = a.num_rows as u32 + (seed % 1000) as u32;
        let good: Vec<u32> = (0..a.num_rows as u32).rev().step_by(3).collect();
        let mut entries = good.clone();
        entries.insert(entries.len() / 2, bad);
        let (dgood, dbad) = (dev.upload(&good).unwrap(), dev.upload(&entries).unwrap());
        for &s in frontier_sums::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            let (param, index) = out_of_bounds(
                frontier_sums::launch_with(&dev, s, &da, &dbad, &mut dy),
                s.name(),
            );
            prop_assert_eq!(param, "frontier", "{}", s.name());
            prop_assert_eq!(index, u64::from(bad), "{}", s.name());
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            frontier_sums::launch_with(&dev, s, &da, &dgood, &mut dy).unwrap();
            let got = dev.download(&dy).unwrap();
            for &r in &good {
                let row = r as usize;
                let (sum, magnitude) = a.row(row).fold((0.0f64, 0.0f64), |(s, m), nz| {
                    let v = f64::from(a.values[nz]);
                    (s + v, m + v.abs())
                });
                prop_assert!((f64::from(got[row]) - sum).abs() <= 1e-5 * magnitude.max(1e-30),
                    "{}: row {}: got {}, want {}", s.name(), row, got[row], sum);
            }
        }
    }
}

/// Whether any plan carries the error flag, which only a kernel with tests reads.
fn tests_anything(plans: &[Plan]) -> bool {
    plans
        .iter()
        .any(|p| p.temps.iter().any(|t| t.role == TempRole::ErrorFlag))
}

#[test]
fn a_proven_body_runs_the_unchecked_kernels_by_default() {
    assert!(std::ptr::eq(spmv::PLANS, spmv::UNCHECKED_PLANS));
    assert!(!tests_anything(spmv::PLANS));
    assert!(!spmv::PTX.contains("_unchecked_"), "one set of kernels");
    assert!(std::ptr::eq(
        strict::strict_spmv::PLANS,
        strict::strict_spmv::UNCHECKED_PLANS
    ));
    // A body with an unproven index carries both: tested kernels for the safe launchers,
    // untested twins for the unchecked ones.
    for (plans, unchecked, ptx) in [
        (shifted::PLANS, shifted::UNCHECKED_PLANS, shifted::PTX),
        (
            frontier_sums::PLANS,
            frontier_sums::UNCHECKED_PLANS,
            frontier_sums::PTX,
        ),
    ] {
        assert!(tests_anything(plans));
        assert!(!tests_anything(unchecked));
        assert_eq!(plans.len(), unchecked.len());
        for (p, u) in plans.iter().zip(unchecked) {
            assert_eq!(p.schedule, u.schedule);
            for k in u.kernels.iter() {
                assert!(k.entry.contains("_unchecked_"), "{}", k.entry);
                assert!(ptx.contains(&format!(".entry {}(", k.entry)), "{}", k.entry);
            }
        }
    }
}

#[test]
fn the_unchecked_launchers_keep_the_host_checks() {
    let a = matrix(40, 30, 7);
    let dev = Device::default();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let x = dev.upload(&vec![1.0f32; a.num_cols - 1]).unwrap();
    let w = dev.upload(&vec![1.0f32; a.num_cols + 1]).unwrap();
    let mut y = dev.zeros::<f32>(a.num_rows).unwrap();
    // SAFETY: the launch is refused before any kernel runs (`x` is shorter than the columns).
    let e = unsafe { shifted::launch_unchecked(&dev, &da, &x, &w, &mut y) }.unwrap_err();
    assert!(matches!(&e, Error::Shape(m) if m.contains("`x`")), "{e}");
}
