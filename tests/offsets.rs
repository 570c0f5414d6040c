//! Device tile sets store 32-bit tile offsets when `tiles + atoms <= u32::MAX` and 64-bit ones
//! otherwise; every schedule has a plan for each width and the launcher runs the one that
//! matches the tile set: the 32-bit plans (entries with `_u32`) on small tile sets, the 64-bit
//! ones on a tile set forced to 64-bit offsets, and never a mismatched one.

mod common;

use common::*;
use lb::__private::ProblemSize;
use lb::prelude::*;
use lb::{execute, ArgValue, Error, KernelArg, OffsetWidth};

fn device() -> Device {
    Device::simulator()
}

/// Each row's degree, read through the body's own `row_offsets` field (a 32-bit load on a
/// tile set with 32-bit offsets), once per atom: row `r` sums to `degree²`.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
fn degree_squared(a: &Csr<f32>, #[tile] row: usize, #[atom] nz: usize) -> f32 {
    let _ = nz;
    (a.row_offsets[row + 1] - a.row_offsets[row]) as f32
}

fn is_u32_entry(entry: &str) -> bool {
    entry.contains("_u32") || entry.contains("_o32")
}

fn spmv_everywhere(da: &DeviceCsr<f32>, a: &Csr<f32>, x: &[f32], wide: bool) {
    let dev = da.device().clone();
    let dx = dev.upload(x).unwrap();
    let mut want = vec![0f32; a.num_rows];
    spmv::cpu(a, x, &mut want);
    for &s in spmv::SCHEDULES {
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        let launch = spmv::launch_with(&dev, s, da, &dx, &mut dy).unwrap();
        for k in &launch.kernels {
            assert_eq!(
                is_u32_entry(&k.entry),
                !wide,
                "{}: kernel `{}` does not read {:?} offsets",
                s.name(),
                k.entry,
                da.offset_width()
            );
        }
        let got = dev.download(&dy).unwrap();
        for (r, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let tol = 1e-4 * (1.0 + w.abs());
            assert!((g - w).abs() <= tol, "{} row {r}: {g} vs {w}", s.name());
        }
    }
}

#[test]
fn small_tile_sets_store_u32_offsets_and_run_the_u32_kernels() {
    let dev = device();
    for (i, &shape) in SHAPES.iter().enumerate() {
        let a = random_csr(shape, 90, 40, 7 + i as u64);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        assert_eq!(da.offset_width(), OffsetWidth::U32);
        assert_eq!(DeviceTileSet::offset_width(&da), OffsetWidth::U32);
        assert_eq!(da.download().unwrap(), a, "round trip at 32 bits");
        spmv_everywhere(&da, &a, &random_vec(a.num_cols, 3), false);

        let csc = a.to_csc().unwrap();
        let dc = DeviceCsc::upload(&dev, &csc).unwrap();
        assert_eq!(dc.offset_width(), OffsetWidth::U32);
        assert_eq!(dc.download().unwrap(), csc);
        let coo = a.to_coo().unwrap();
        let dcoo = DeviceCoo::upload(&dev, &coo).unwrap();
        assert_eq!(dcoo.offset_width(), OffsetWidth::U32);
        assert_eq!(dcoo.download().unwrap(), coo);
    }
}

#[test]
fn forced_u64_offsets_run_the_u64_kernels() {
    let dev = device();
    for (i, &shape) in SHAPES.iter().enumerate() {
        let a = random_csr(shape, 90, 40, 70 + i as u64);
        let da = DeviceCsr::upload_with_offsets(&dev, &a, OffsetWidth::U64).unwrap();
        assert_eq!(da.offset_width(), OffsetWidth::U64);
        assert_eq!(da.download().unwrap(), a, "round trip at 64 bits");
        spmv_everywhere(&da, &a, &random_vec(a.num_cols, 4), true);

        let csc = a.to_csc().unwrap();
        let dc = DeviceCsc::upload_with_offsets(&dev, &csc, OffsetWidth::U64).unwrap();
        assert_eq!(dc.offset_width(), OffsetWidth::U64);
        assert_eq!(dc.download().unwrap(), csc);
        let coo = a.to_coo().unwrap();
        let dcoo = DeviceCoo::upload_with_offsets(&dev, &coo, OffsetWidth::U64).unwrap();
        assert_eq!(dcoo.offset_width(), OffsetWidth::U64);
        assert_eq!(dcoo.download().unwrap(), coo);
    }
}

#[test]
fn csc_and_coo_run_every_schedule_at_both_widths() {
    let dev = device();
    let a = random_csr(Shape::Random, 70, 50, 11);
    let x_rows = random_vec(a.num_rows, 12);
    let x_cols = random_vec(a.num_cols, 13);
    let (csc, coo) = (a.to_csc().unwrap(), a.to_coo().unwrap());
    let mut want_t = vec![0f32; a.num_cols];
    csc_spmv_t::cpu(&csc, &x_rows, &mut want_t);
    let mut want = vec![0f32; a.num_rows];
    coo_spmv::cpu(&coo, &x_cols, &mut want);
    let close = |got: &[f32], want: &[f32], what: &str| {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{what} {i}: {g} vs {w}"
            );
        }
    };
    for (width, wide) in [(OffsetWidth::U32, false), (OffsetWidth::U64, true)] {
        let dc = DeviceCsc::upload_with_offsets(&dev, &csc, width).unwrap();
        let dx = dev.upload(&x_rows).unwrap();
        for &s in csc_spmv_t::SCHEDULES {
            let mut dy = dev.zeros::<f32>(a.num_cols).unwrap();
            let l = csc_spmv_t::launch_with(&dev, s, &dc, &dx, &mut dy).unwrap();
            assert!(l.kernels.iter().all(|k| is_u32_entry(&k.entry) != wide));
            close(
                &dev.download(&dy).unwrap(),
                &want_t,
                &format!("csc {width:?} {}", s.name()),
            );
        }
        let dcoo = DeviceCoo::upload_with_offsets(&dev, &coo, width).unwrap();
        let dx = dev.upload(&x_cols).unwrap();
        for &s in coo_spmv::SCHEDULES {
            let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
            let l = coo_spmv::launch_with(&dev, s, &dcoo, &dx, &mut dy).unwrap();
            assert!(l.kernels.iter().all(|k| is_u32_entry(&k.entry) != wide));
            close(
                &dev.download(&dy).unwrap(),
                &want,
                &format!("coo {width:?} {}", s.name()),
            );
        }
    }
}

#[test]
fn a_body_reading_the_offsets_sees_them_at_either_width() {
    let dev = device();
    let a = random_csr(Shape::Alternating, 60, 30, 21);
    let mut want = vec![0f32; a.num_rows];
    degree_squared::cpu(&a, &mut want);
    for width in [OffsetWidth::U32, OffsetWidth::U64] {
        let da = DeviceCsr::upload_with_offsets(&dev, &a, width).unwrap();
        for &s in degree_squared::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            degree_squared::launch_with(&dev, s, &da, &mut dy).unwrap();
            assert_eq!(dev.download(&dy).unwrap(), want, "{width:?} {}", s.name());
        }
    }
}

#[test]
fn a_plan_of_the_other_width_is_an_error_and_launches_nothing() {
    let dev = device();
    let a = random_csr(Shape::Random, 20, 20, 5);
    let x = random_vec(a.num_cols, 6);
    for width in [OffsetWidth::U32, OffsetWidth::U64] {
        let da = DeviceCsr::upload_with_offsets(&dev, &a, width).unwrap();
        let dx = dev.upload(&x).unwrap();
        let dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        for plan in spmv::PLANS.iter().filter(|p| p.offsets != width) {
            let mut args = Vec::<ArgValue>::new();
            da.push_args(&mut args);
            dx.push_args(&mut args);
            dy.push_args(&mut args);
            let size = ProblemSize {
                tiles: a.num_rows as u64,
                atoms: a.nnz() as u64,
                lanes: 1,
                max_tile_atoms: u64::MAX,
                offsets: da.offset_width(),
            };
            // SAFETY: the arguments are the kernel's own (tile set, x, y), and the launch is
            // refused before any kernel runs (the plan reads the other offset width).
            let err =
                unsafe { execute(&dev, spmv::PTX, plan, &["a", "x"], args, size) }.unwrap_err();
            assert!(
                matches!(err, Error::OffsetWidthMismatch { plan_bits, tile_set_bits, .. }
                    if plan_bits == plan.offsets.bytes() * 8
                        && tile_set_bits == width.bytes() * 8),
                "{}: {err}",
                plan.schedule
            );
            assert!(err.to_string().contains("tile offsets"), "{err}");
            let untouched = dev.download(&dy).unwrap();
            assert!(untouched.iter().all(|v| v.is_nan()), "nothing ran");
        }
    }
}

/// The 32-bit plans keep a lane walk's positions and lane groups in 32 bits, so over 32-bit
/// offsets a lane count (or a frontier) past `u32::MAX` is an error before anything runs.
#[test]
fn counts_past_32_bits_over_32_bit_offsets_are_refused() {
    let dev = device();
    let a = random_csr(Shape::Random, 20, 20, 7);
    let da = DeviceCsr::upload_with_offsets(&dev, &a, OffsetWidth::U32).unwrap();
    let dx = dev.upload(&random_vec(a.num_cols, 8)).unwrap();
    let dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    let big = u64::from(u32::MAX) + 1;
    for (tiles, lanes) in [(a.num_rows as u64, big), (big, 1)] {
        let plan = spmv::PLANS
            .iter()
            .find(|p| p.offsets == OffsetWidth::U32)
            .expect("a 32-bit plan");
        let mut args = Vec::<ArgValue>::new();
        da.push_args(&mut args);
        dx.push_args(&mut args);
        dy.push_args(&mut args);
        let size = ProblemSize {
            tiles,
            atoms: a.nnz() as u64,
            lanes,
            max_tile_atoms: u64::MAX,
            offsets: OffsetWidth::U32,
        };
        // SAFETY: the arguments are the kernel's own (tile set, x, y), and the launch is
        // refused before any kernel runs (a count past 32 bits over 32-bit offsets).
        let err = unsafe { execute(&dev, spmv::PTX, plan, &["a", "x"], args, size) }.unwrap_err();
        assert!(
            matches!(&err, Error::Shape(m) if m.contains("32-bit offsets")),
            "{tiles} tiles, {lanes} lanes: {err}"
        );
        let untouched = dev.download(&dy).unwrap();
        assert!(untouched.iter().all(|v| v.is_nan()), "nothing ran");
    }
}

#[test]
fn the_storage_rule_matches_the_32_bit_plans() {
    let limit = u64::from(u32::MAX);
    assert_eq!(OffsetWidth::for_tile_set(0, 0), OffsetWidth::U32);
    assert_eq!(OffsetWidth::for_tile_set(1, limit - 1), OffsetWidth::U32);
    assert_eq!(OffsetWidth::for_tile_set(1, limit), OffsetWidth::U64);
    assert_eq!(OffsetWidth::for_tile_set(limit, 1), OffsetWidth::U64);
    assert_eq!(
        OffsetWidth::for_tile_set(u64::MAX, u64::MAX),
        OffsetWidth::U64
    );
    // The work-oriented 32-bit plans admit exactly the tile sets stored with 32-bit offsets.
    for p in spmv::PLANS.iter().filter(|p| p.index_limit.is_some()) {
        assert_eq!(p.index_limit, Some(OffsetWidth::U32_LIMIT));
        assert_eq!(p.offsets, OffsetWidth::U32, "{}", p.schedule);
    }
}
