//! Half-precision storage (`f16`, `bf16`) with `f32` arithmetic. One generic SpMV and one
//! generic SpMM (lanes) are instantiated for f32, f64, f16 and bf16 and run on every schedule
//! on fresh random matrices (empty rows, no rows, one giant row longer than a block, one
//! nonzero, no nonzeros), each held to an f64 reference of its own (exactly representable)
//! inputs within a bound derived from the formats' precision: the f32 (or f64) accumulation
//! error plus one final rounding to the output's type. Where the summation order is fixed
//! (`thread_mapped`), the kernels and the CPU reference agree bit for bit (`fma = false`: every
//! operation rounds as the reference's do). The conversions
//! themselves are checked exhaustively (every f16 and bf16 widened) and on the hard cases of
//! rounding (ties, subnormals, overflow, NaN) and random bit patterns, against the `half` crate;
//! so are stores beside a reduction, an epilogue reading a half output, bounds tests of an
//! unproven 16-bit load, and ptxas for sm_75, sm_80 and sm_90 on every module here.

mod common;

use common::{random_csr, random_vec, SHAPES};
use lb::prelude::*;

#[load_balanced(
    schedule = "auto",
    reduce = "sum",
    output = "y",
    types = "f32, f64, f16, bf16",
    fma = false
)]
fn hspmv<T>(a: &Csr<T>, x: &[T], #[atom] nz: usize) -> T {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

#[load_balanced(
    schedule = "auto",
    reduce = "sum",
    output = "c",
    lanes = "k",
    types = "f32, f64, f16, bf16",
    fma = false
)]
fn hspmm<T>(a: &Csr<T>, b: &[T], k: usize, #[atom] nz: usize, #[lane] j: usize) -> T {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// Every stored value widened: the load conversions, on all 2^16 bit patterns.
#[load_balanced(schedule = "thread_mapped")]
fn widen_all(a: &Csr<f16>, b: &[bf16], w: &mut [f32], v: &mut [f32], #[atom] nz: usize) {
    w[nz] = a.values[nz];
    v[nz] = b[nz];
}

/// `f32` values rounded into both half types: the store conversions.
#[load_balanced(schedule = "thread_mapped")]
fn narrow_all(a: &Csr<f32>, h: &mut [f16], b: &mut [bf16], #[atom] nz: usize) {
    h[nz] = a.values[nz];
    b[nz] = a.values[nz];
}

/// A store to a half-precision slice beside a reduction, and a half output after an epilogue
/// that reads the old output: each rounds once, where it is stored.
#[load_balanced(schedule = "thread_mapped, merge_path", reduce = "sum", output = "y",
    epilogue = |_row, s, old| s * 0.5 + old)]
fn rmw(a: &Csr<bf16>, tripled: &mut [f16], #[atom] nz: usize) -> f16 {
    tripled[nz] = a.values[nz] * 3.0;
    a.values[nz]
}

/// An element type the tests run: how to make one from an `f32`, its `f64` value, and the
/// precisions that bound its results.
trait Elem: lb::Element + std::fmt::Debug + PartialEq {
    fn of(v: f32) -> Self;
    fn wide(self) -> f64;
    /// The unit roundoff of the arithmetic (f32, or f64 for f64).
    const ACC: f64;
    /// The unit roundoff of the stored result, and the smallest spacing of its subnormals.
    const STORE: (f64, f64);
}

macro_rules! elem {
    ($t:ty, $of:expr, $wide:expr, $acc:expr, $store:expr) => {
        impl Elem for $t {
            fn of(v: f32) -> Self {
                $of(v)
            }
            fn wide(self) -> f64 {
                $wide(self)
            }
            const ACC: f64 = $acc;
            const STORE: (f64, f64) = $store;
        }
    };
}

/// The unit roundoff of f32, 2^-24 (also the spacing of f16's subnormals).
const F32_UNIT: f64 = f32::EPSILON as f64 / 2.0;

elem!(f32, |v| v, f64::from, F32_UNIT, (0.0, 0.0));
elem!(f64, f64::from, |v| v, (f64::EPSILON / 2.0), (0.0, 0.0));
elem!(
    f16,
    f16::from_f32,
    |v: f16| f64::from(v.to_f32()),
    F32_UNIT,
    ((1.0 / 2048.0), F32_UNIT)
);
elem!(
    bf16,
    bf16::from_f32,
    |v: bf16| f64::from(v.to_f32()),
    F32_UNIT,
    ((1.0 / 256.0), 0.0)
);

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(5, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

/// One output's reference and bound: `Σ a·b` in f64 over the (exact) inputs, and the error the
/// kernel may make: `n + 1` roundings of the accumulator per term's magnitude, then the output's
/// one rounding (relative, or half its subnormal spacing near zero).
fn bound<T: Elem>(terms: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let (mut sum, mut mag, mut n) = (0.0, 0.0, 0.0);
    for (a, b) in terms {
        sum += a * b;
        mag += (a * b).abs();
        n += 1.0;
    }
    let (unit, tiny) = T::STORE;
    let acc = (n + 1.0) * T::ACC * mag;
    (sum, acc + unit * (sum.abs() + acc) + tiny)
}

fn check<T: Elem>(got: &[T], want: &[(f64, f64)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &(w, tol))) in got.iter().zip(want).enumerate() {
        assert!(
            (g.wide() - w).abs() <= tol,
            "{what} [{i}]: {g:?} vs {w} (± {tol})"
        );
    }
}

/// SpMV of one element type on every schedule, against the f64 reference; `thread_mapped`, which
/// sums each row in order, also bit for bit against the CPU reference.
fn spmv_case<T: Elem>(
    schedules: &[Schedule],
    launch: impl Fn(&Device, Schedule, &DeviceCsr<T>, &DeviceBuffer<T>, &mut DeviceBuffer<T>),
    cpu: impl Fn(&Csr<T>, &[T], &mut [T]),
    seed: u64,
) {
    let dev = Device::default();
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let base = random_csr(shape, 300, 400, seed.wrapping_add(i as u64));
        let a = base.map_values(T::of);
        let x: Vec<T> = random_vec(base.num_cols, seed ^ 3)
            .into_iter()
            .map(T::of)
            .collect();
        let want: Vec<(f64, f64)> = (0..a.num_rows)
            .map(|r| {
                bound::<T>(
                    (a.row_offsets[r]..a.row_offsets[r + 1])
                        .map(|nz| (a.values[nz].wide(), x[a.col_indices[nz] as usize].wide())),
                )
            })
            .collect();
        let mut reference = vec![T::of(f32::NAN); a.num_rows];
        cpu(&a, &x, &mut reference);
        check(&reference, &want, &format!("cpu {shape:?}"));
        let (da, dx) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for &s in schedules {
            let mut y = dev.upload(&vec![T::of(f32::NAN); a.num_rows]).unwrap();
            launch(&dev, s, &da, &dx, &mut y);
            let got = y.download().unwrap();
            check(&got, &want, &format!("{s} {shape:?}"));
            if s == Schedule::ThreadMapped {
                assert_eq!(
                    got, reference,
                    "{shape:?}: thread_mapped vs the CPU reference"
                );
            }
        }
    }
}

#[test]
fn one_generic_spmv_for_four_element_types() {
    let s = seed();
    spmv_case::<f32>(
        hspmv::f32::SCHEDULES,
        |dev, sch, a, x, y| drop(hspmv::f32::launch_with(dev, sch, a, x, y).unwrap()),
        hspmv::f32::cpu,
        s,
    );
    spmv_case::<f64>(
        hspmv::f64::SCHEDULES,
        |dev, sch, a, x, y| drop(hspmv::f64::launch_with(dev, sch, a, x, y).unwrap()),
        hspmv::f64::cpu,
        s,
    );
    spmv_case::<f16>(
        hspmv::f16::SCHEDULES,
        |dev, sch, a, x, y| drop(hspmv::f16::launch_with(dev, sch, a, x, y).unwrap()),
        hspmv::f16::cpu,
        s,
    );
    spmv_case::<bf16>(
        hspmv::bf16::SCHEDULES,
        |dev, sch, a, x, y| drop(hspmv::bf16::launch_with(dev, sch, a, x, y).unwrap()),
        hspmv::bf16::cpu,
        s,
    );
}

type SpmmLaunch<'a, T> =
    &'a dyn Fn(&Device, Schedule, &DeviceCsr<T>, &DeviceBuffer<T>, usize, &mut DeviceBuffer<T>);

type SpmmCpu<T> = fn(&Csr<T>, &[T], usize, &mut [T]);

/// SpMM of one element type, as [`spmv_case`], for lane counts around the register blocking.
fn spmm_case<T: Elem>(
    schedules: &[Schedule],
    launch: SpmmLaunch<'_, T>,
    cpu: SpmmCpu<T>,
    seed: u64,
) {
    let dev = Device::default();
    for (i, shape) in SHAPES.into_iter().enumerate() {
        let k = [1, 3, 8, 33][i % 4];
        let base = random_csr(shape, 120, 300, seed.wrapping_add(i as u64));
        let a = base.map_values(T::of);
        let b: Vec<T> = random_vec(base.num_cols * k, seed ^ 5)
            .into_iter()
            .map(T::of)
            .collect();
        let want: Vec<(f64, f64)> = (0..a.num_rows * k)
            .map(|o| {
                let (r, j) = (o / k, o % k);
                bound::<T>((a.row_offsets[r]..a.row_offsets[r + 1]).map(|nz| {
                    (
                        a.values[nz].wide(),
                        b[a.col_indices[nz] as usize * k + j].wide(),
                    )
                }))
            })
            .collect();
        let mut reference = vec![T::of(f32::NAN); a.num_rows * k];
        cpu(&a, &b, k, &mut reference);
        check(&reference, &want, &format!("cpu {shape:?} k={k}"));
        let (da, db) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&b).unwrap(),
        );
        for &s in schedules {
            let mut c = dev.upload(&vec![T::of(f32::NAN); a.num_rows * k]).unwrap();
            launch(&dev, s, &da, &db, k, &mut c);
            let got = c.download().unwrap();
            check(&got, &want, &format!("{s} {shape:?} k={k}"));
            if s == Schedule::ThreadMapped {
                assert_eq!(
                    got, reference,
                    "{shape:?} k={k}: thread_mapped vs the CPU reference"
                );
            }
        }
    }
}

#[test]
fn one_generic_spmm_for_four_element_types() {
    let s = seed();
    spmm_case::<f32>(
        hspmm::f32::SCHEDULES,
        &|dev, sch, a, b, k, c| drop(hspmm::f32::launch_with(dev, sch, a, b, k, c).unwrap()),
        hspmm::f32::cpu,
        s,
    );
    spmm_case::<f64>(
        hspmm::f64::SCHEDULES,
        &|dev, sch, a, b, k, c| drop(hspmm::f64::launch_with(dev, sch, a, b, k, c).unwrap()),
        hspmm::f64::cpu,
        s,
    );
    spmm_case::<f16>(
        hspmm::f16::SCHEDULES,
        &|dev, sch, a, b, k, c| drop(hspmm::f16::launch_with(dev, sch, a, b, k, c).unwrap()),
        hspmm::f16::cpu,
        s,
    );
    spmm_case::<bf16>(
        hspmm::bf16::SCHEDULES,
        &|dev, sch, a, b, k, c| drop(hspmm::bf16::launch_with(dev, sch, a, b, k, c).unwrap()),
        hspmm::bf16::cpu,
        s,
    );
}

/// A one-row matrix holding `values` (all in column 0).
fn one_row<T: Clone>(values: Vec<T>) -> Csr<T> {
    let n = values.len();
    Csr::new(1, 1, vec![0, n], vec![0; n], values).unwrap()
}

#[test]
fn every_half_value_widens_exactly() {
    let dev = Device::default();
    let h: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let b: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    let a = DeviceCsr::upload(&dev, &one_row(h.clone())).unwrap();
    let db = dev.upload(&b).unwrap();
    let mut w = dev.zeros::<f32>(h.len()).unwrap();
    let mut v = dev.zeros::<f32>(h.len()).unwrap();
    widen_all::launch(&dev, &a, &db, &mut w, &mut v).unwrap();
    let (w, v) = (w.download().unwrap(), v.download().unwrap());
    for i in 0..h.len() {
        let (want_h, want_b) = (h[i].to_f32(), b[i].to_f32());
        assert!(w[i].to_bits() == want_h.to_bits() || (w[i].is_nan() && want_h.is_nan()));
        assert!(v[i].to_bits() == want_b.to_bits() || (v[i].is_nan() && want_b.is_nan()));
    }
}

#[test]
fn stores_round_to_nearest_even_as_the_half_crate_does() {
    let dev = Device::default();
    let mut x: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        65504.0,
        65520.0,
        1e6,
        -1e6,
        2f32.powi(-25),
        2f32.powi(-26),
        3.0 * 2f32.powi(-26),
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffff_ffff),
    ];
    let mut state = seed();
    for _ in 0..20_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x.push(f32::from_bits((state >> 32) as u32));
    }
    let a = one_row(x.clone());
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let mut h = dev.zeros::<f16>(x.len()).unwrap();
    let mut b = dev.zeros::<bf16>(x.len()).unwrap();
    narrow_all::launch(&dev, &da, &mut h, &mut b).unwrap();
    let (h, b) = (h.download().unwrap(), b.download().unwrap());
    let mut cpu_h = vec![f16::ZERO; x.len()];
    let mut cpu_b = vec![bf16::ZERO; x.len()];
    narrow_all::cpu(&a, &mut cpu_h, &mut cpu_b);
    for (i, &v) in x.iter().enumerate() {
        let (want_h, want_b) = (f16::from_f32(v), bf16::from_f32(v));
        assert_eq!(cpu_h[i].to_bits(), want_h.to_bits(), "cpu f16 of {v:e}");
        assert_eq!(cpu_b[i].to_bits(), want_b.to_bits(), "cpu bf16 of {v:e}");
        if v.is_nan() {
            assert!(h[i].is_nan() && b[i].is_nan(), "NaN {:#x}", v.to_bits());
        } else {
            assert_eq!(h[i].to_bits(), want_h.to_bits(), "f16 of {v:e}");
            assert_eq!(b[i].to_bits(), want_b.to_bits(), "bf16 of {v:e}");
        }
    }
}

#[test]
fn read_modify_writes_and_epilogues_round_once_where_stored() {
    let dev = Device::default();
    let base = random_csr(common::Shape::Random, 50, 50, seed());
    let a = base.map_values(bf16::from_f32);
    let old: Vec<f16> = random_vec(a.num_rows, 10)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    // By hand: per atom, round(3 v); per row, round(0.5 Σ v + old) with the sum in f32.
    let want_tripled: Vec<f16> = a
        .values
        .iter()
        .map(|v| f16::from_f32(v.to_f32() * 3.0))
        .collect();
    let want_y: Vec<f16> = (0..a.num_rows)
        .map(|r| {
            let row = &a.values[a.row_offsets[r]..a.row_offsets[r + 1]];
            let sum = row.iter().fold(0f32, |s, v| s + v.to_f32());
            f16::from_f32(sum * 0.5 + old[r].to_f32())
        })
        .collect();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    for &s in rmw::SCHEDULES {
        let mut tripled = dev.zeros::<f16>(a.values.len()).unwrap();
        let mut y = dev.upload(&old).unwrap();
        rmw::launch_with(&dev, s, &da, &mut tripled, &mut y).unwrap();
        assert_eq!(tripled.download().unwrap(), want_tripled, "{s}");
        // merge_path sums a split row in another order: within one rounding of the output.
        for (r, (got, want)) in y.download().unwrap().into_iter().zip(&want_y).enumerate() {
            let (g, w) = (got.to_f32(), want.to_f32());
            assert!(
                (g - w).abs() <= 2f32.powi(-10) * w.abs().max(1.0),
                "{s} row {r}: {g} vs {w}"
            );
            if s == Schedule::ThreadMapped {
                assert_eq!(got, *want, "{s} row {r}");
            }
        }
    }
    let mut cpu_tripled = vec![f16::ZERO; a.values.len()];
    let mut cpu_y = old.clone();
    rmw::cpu(&a, &mut cpu_tripled, &mut cpu_y);
    assert_eq!(cpu_tripled, want_tripled);
    assert_eq!(cpu_y, want_y);
}

/// SpMV over the other tile-set formats with half-precision values: a COO's rows and a CSC's
/// columns (Aᵀ·x), each row or column summed in order by `thread_mapped`.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", fma = false)]
fn coo_h(a: &Coo<f16>, x: &[bf16], #[atom] nz: usize) -> f16 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", fma = false)]
fn csc_h(a: &Csc<bf16>, x: &[f16], #[atom] nz: usize) -> bf16 {
    a.values[nz] * x[a.row_indices[nz] as usize]
}

#[test]
fn coo_and_csc_tile_sets_hold_half_values_too() {
    let dev = Device::default();
    let base = random_csr(common::Shape::Random, 80, 70, seed());
    let coo = base.map_values(f16::from_f32).to_coo().unwrap();
    let csc = base.map_values(bf16::from_f32).to_csc().unwrap();
    let x_cols: Vec<bf16> = lb::narrowed(&random_vec(base.num_cols, 1));
    let x_rows: Vec<f16> = lb::narrowed(&random_vec(base.num_rows, 2));
    let mut want = vec![f16::ZERO; base.num_rows];
    coo_h::cpu(&coo, &x_cols, &mut want);
    let mut y = dev.zeros::<f16>(base.num_rows).unwrap();
    let (da, dx) = (
        DeviceCoo::upload(&dev, &coo).unwrap(),
        dev.upload(&x_cols).unwrap(),
    );
    coo_h::launch(&dev, &da, &dx, &mut y).unwrap();
    assert_eq!(y.download().unwrap(), want);
    let mut want = vec![bf16::ZERO; base.num_cols];
    csc_h::cpu(&csc, &x_rows, &mut want);
    let mut y = dev.zeros::<bf16>(base.num_cols).unwrap();
    let (da, dx) = (
        DeviceCsc::upload(&dev, &csc).unwrap(),
        dev.upload(&x_rows).unwrap(),
    );
    csc_h::launch(&dev, &da, &dx, &mut y).unwrap();
    assert_eq!(y.download().unwrap(), want);
    // And the references sum what the kernels sum: in f32, rounded once.
    let w0: f32 = (0..csc.col_offsets[1])
        .map(|nz| csc.values[nz].to_f32() * x_rows[csc.row_indices[nz] as usize].to_f32())
        .fold(0.0, |s, t| s + t);
    assert_eq!(want[0], bf16::from_f32(w0));
}

/// An index the launcher cannot prove in bounds: the safe kernels test it on the 16-bit array
/// too, and report the first one out of range.
#[load_balanced(schedule = "thread_mapped, merge_path", reduce = "sum", output = "y")]
fn shifted(a: &Csr<f16>, x: &[f16], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize + 1]
}

#[test]
fn unproven_half_precision_loads_are_tested() {
    let dev = Device::default();
    let base = random_csr(common::Shape::Random, 60, 40, seed());
    let a = base.map_values(f16::from_f32);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let x: Vec<f16> = lb::narrowed(&random_vec(a.num_cols + 1, 4));
    let mut want = vec![0f32; a.num_rows];
    shifted::cpu(&a, &x, &mut want);
    let last = (0..a.nnz()).any(|nz| a.col_indices[nz] as usize == a.num_cols - 1);
    for &s in shifted::SCHEDULES {
        let mut y = dev.zeros::<f32>(a.num_rows).unwrap();
        shifted::launch_with(&dev, s, &da, &dev.upload(&x).unwrap(), &mut y).unwrap();
        let got = y.download().unwrap();
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{s} row {r}: {g} vs {w}"
            );
        }
        let short = dev.upload(&x[..a.num_cols]).unwrap();
        let result = shifted::launch_with(&dev, s, &da, &short, &mut y);
        match result {
            Err(lb::Error::OutOfBounds { param, index }) => {
                assert!(
                    last,
                    "{s}: reported an access out of bounds that no column makes"
                );
                assert_eq!((param.as_str(), index), ("x", a.num_cols as u64), "{s}");
            }
            other => assert!(!last, "{s}: {other:?}"),
        }
    }
}

/// The half-precision kernels assemble for sm_75, sm_80 and sm_90 without spills: every load,
/// store and output conversion on every schedule, bounds tests included.
#[test]
fn half_precision_modules_assemble() {
    for (name, ptx) in [
        ("hspmm_f16", hspmm::f16::PTX),
        ("hspmm_bf16", hspmm::bf16::PTX),
        ("rmw", rmw::PTX),
        ("shifted", shifted::PTX),
        ("narrow_all", narrow_all::PTX),
        ("widen_all", widen_all::PTX),
    ] {
        lb_ptx::ptxas::assert_assembles(name, ptx);
    }
}
