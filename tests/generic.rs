//! One kernel function for several element types (`fn f<T>` with `types = "…"`): every
//! instantiation is a whole kernel family of its own, launched here on `Device::default()` (the
//! simulator without a GPU) through several schedules on fresh random matrices with empty rows
//! and one long row, and held to a reference computed here in f64 (floats) or exactly (integers).

mod common;

use common::{random_csr, random_vec, SHAPES};
use lb::prelude::*;

/// SpMV for three element types; `T::MAX` in the body and a cast `as T` are substituted too.
#[load_balanced(
    schedule = "thread_mapped, merge_path, warp_mapped, lrb",
    reduce = "sum",
    output = "y",
    types = "f32, f64, i64"
)]
fn gspmv<T>(a: &Csr<T>, x: &[T], #[atom] nz: usize) -> T {
    let v = a.values[nz];
    let capped = if v > T::MAX { T::MAX } else { v };
    capped * x[a.col_indices[nz] as usize] + (0 as T)
}

/// A min-reduction with an epilogue naming the type: rows without atoms (whose identity, `+inf`
/// or `T::MAX`, is at least `T::MAX`) give `-1`.
#[load_balanced(schedule = "merge_path, block_mapped", reduce = "min", output = "lo",
    types = "f64, i32",
    epilogue = |_row, m| if m >= T::MAX { 0 as T - 1 as T } else { m })]
fn gmin<T>(a: &Csr<T>, #[atom] nz: usize) -> T {
    a.values[nz]
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(11, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

/// `a` with its values mapped by `f`.
fn with_values<T>(a: &Csr<f32>, f: impl Fn(f32) -> T) -> Csr<T> {
    Csr {
        num_rows: a.num_rows,
        num_cols: a.num_cols,
        row_offsets: a.row_offsets.clone(),
        col_indices: a.col_indices.clone(),
        values: a.values.iter().map(|&v| f(v)).collect(),
    }
}

/// `A·x` in f64, row by row.
fn reference(a: &Csr<f64>, x: &[f64]) -> Vec<f64> {
    (0..a.num_rows)
        .map(|r| {
            (a.row_offsets[r]..a.row_offsets[r + 1])
                .map(|nz| a.values[nz] * x[a.col_indices[nz] as usize])
                .sum()
        })
        .collect()
}

#[test]
fn every_instantiation_matches_its_reference_on_every_schedule() {
    let dev = Device::default();
    let seed = seed();
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let base = random_csr(shape, 300, 240, seed.wrapping_add(i as u64));
        let xs = random_vec(base.num_cols, seed ^ 7);
        let a64 = with_values(&base, f64::from);
        let x64: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
        let want = reference(&a64, &x64);
        let scale = |r: usize| {
            1e-5 * (1.0 + want[r].abs()) * (1 + a64.row_offsets[r + 1] - a64.row_offsets[r]) as f64
        };

        let a = DeviceCsr::upload(&dev, &with_values(&base, |v| v)).unwrap();
        let x = dev.upload(&xs).unwrap();
        for &s in gspmv::f32::SCHEDULES {
            let mut y = dev.upload(&vec![f32::NAN; base.num_rows]).unwrap();
            gspmv::f32::launch_with(&dev, s, &a, &x, &mut y).unwrap();
            for (r, got) in y.download().unwrap().into_iter().enumerate() {
                assert!(
                    (f64::from(got) - want[r]).abs() <= scale(r),
                    "f32 {s} {shape:?} row {r}: {got} vs {}",
                    want[r]
                );
            }
        }

        let a = DeviceCsr::upload(&dev, &a64).unwrap();
        let x = dev.upload(&x64).unwrap();
        for &s in gspmv::f64::SCHEDULES {
            let mut y = dev.upload(&vec![f64::NAN; base.num_rows]).unwrap();
            gspmv::f64::launch_with(&dev, s, &a, &x, &mut y).unwrap();
            for (r, got) in y.download().unwrap().into_iter().enumerate() {
                assert!(
                    (got - want[r]).abs() <= 1e-9 * (1.0 + want[r].abs()),
                    "f64 {s} {shape:?} row {r}"
                );
            }
        }

        // Integers: small values, so the exact sums fit, and every schedule agrees exactly.
        let ai = with_values(&base, |v| (v * 8.0).round() as i64);
        let xi: Vec<i64> = xs.iter().map(|&v| (v * 8.0).round() as i64).collect();
        let want_i: Vec<i64> = (0..ai.num_rows)
            .map(|r| {
                (ai.row_offsets[r]..ai.row_offsets[r + 1])
                    .map(|nz| ai.values[nz] * xi[ai.col_indices[nz] as usize])
                    .sum()
            })
            .collect();
        assert_eq!(gspmv::f32::SCHEDULES.len(), 4);
        let a = DeviceCsr::upload(&dev, &ai).unwrap();
        let x = dev.upload(&xi).unwrap();
        for &s in gspmv::i64::SCHEDULES {
            let mut y = dev.upload(&vec![i64::MIN; base.num_rows]).unwrap();
            gspmv::i64::launch_with(&dev, s, &a, &x, &mut y).unwrap();
            assert_eq!(y.download().unwrap(), want_i, "i64 {s} {shape:?}");
        }
        // The reference of an instantiation is the substituted function itself.
        let mut cpu = vec![0i64; base.num_rows];
        gspmv::i64::cpu(&ai, &xi, &mut cpu);
        assert_eq!(cpu, want_i);
    }
}

#[test]
fn the_epilogue_names_the_element_type_too() {
    let dev = Device::default();
    let seed = seed();
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let base = random_csr(shape, 200, 150, seed.wrapping_add(i as u64));
        let a64 = with_values(&base, f64::from);
        let want: Vec<f64> = (0..a64.num_rows)
            .map(|r| {
                let row = &a64.values[a64.row_offsets[r]..a64.row_offsets[r + 1]];
                if row.is_empty() {
                    -1.0
                } else {
                    row.iter().copied().fold(f64::INFINITY, f64::min)
                }
            })
            .collect();
        let a = DeviceCsr::upload(&dev, &a64).unwrap();
        let ai = with_values(&base, |v| (v * 100.0).round() as i32);
        let want_i: Vec<i32> = (0..ai.num_rows)
            .map(|r| {
                ai.values[ai.row_offsets[r]..ai.row_offsets[r + 1]]
                    .iter()
                    .copied()
                    .min()
                    .unwrap_or(-1)
            })
            .collect();
        let di = DeviceCsr::upload(&dev, &ai).unwrap();
        for &s in gmin::f64::SCHEDULES {
            let mut lo = dev.zeros::<f64>(base.num_rows).unwrap();
            gmin::f64::launch_with(&dev, s, &a, &mut lo).unwrap();
            assert_eq!(lo.download().unwrap(), want, "f64 {s} {shape:?}");
            let mut lo = dev.zeros::<i32>(base.num_rows).unwrap();
            gmin::i32::launch_with(&dev, s, &di, &mut lo).unwrap();
            assert_eq!(lo.download().unwrap(), want_i, "i32 {s} {shape:?}");
        }
    }
}
