//! SpMM with half-precision storage: one generic kernel instantiated for `f32` and `f16`. The
//! `f16` instantiation reads A's values and B in 16 bits, computes in `f32` and writes C in 16
//! bits; both are checked against an f64 product of the same (f16-exact) inputs, the `f16` one
//! to within one rounding of its output, and on a GPU timed side by side.
//!
//! `cargo run --release --example spmm_half [-- --rows N --k K --reps N]`.

mod common;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;

/// C = A·B; for `f16`, `T` is the storage of A, B and C, and the products and sums are `f32`.
#[load_balanced(
    schedule = "auto",
    reduce = "sum",
    output = "c",
    lanes = "k",
    types = "f32, f16"
)]
fn spmm<T>(a: &Csr<T>, b: &[T], k: usize, #[atom] nz: usize, #[lane] j: usize) -> T {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

struct Args {
    rows: usize,
    k: usize,
    reps: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        rows: 2_000,
        k: 32,
        reps: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => args.rows = number(&mut it, "--rows", 1..=MAX_ROWS)?,
            "--k" => args.k = number(&mut it, "--k", 1..=1024)?,
            "--reps" => args.reps = number(&mut it, "--reps", 1..=1_000_000)?,
            _ => return Err("usage: spmm_half [--rows N] [--k K] [--reps N]".to_string()),
        }
    }
    Ok(args)
}

/// The largest error of `got` against the f64 product of `a` and `b`, relative to the
/// magnitude of each entry's terms.
fn max_relative_error(a: &Csr<f32>, b: &[f32], k: usize, got: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for row in 0..a.num_rows {
        for j in 0..k {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for nz in a.row(row) {
                let term =
                    f64::from(a.values[nz]) * f64::from(b[a.col_indices[nz] as usize * k + j]);
                sum += term;
                magnitude += term.abs();
            }
            let err = (f64::from(got[row * k + j]) - sum).abs();
            worst = worst.max(err / magnitude.max(f64::MIN_POSITIVE));
        }
    }
    worst
}

/// The median time in ms of `reps` launches (NaN on the simulator, which has no clock, and
/// printed as such).
fn median_ms(reps: usize, mut launch: impl FnMut() -> lb::Result<Launch>) -> lb::Result<f64> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(launch()?.elapsed_ms.unwrap_or(f32::NAN));
    }
    times.sort_by(f32::total_cmp);
    Ok(f64::from(times[times.len() / 2]))
}

fn run(args: &Args) -> lb::Result<bool> {
    let k = args.k;
    // The inputs rounded to f16 once, so that both instantiations multiply the same numbers.
    let a = lb::generate::power_law(args.rows, args.rows, 8.0, 42)
        .map_values(|v| f16::from_f32(v).to_f32());
    let b: Vec<f32> = lb::generate::random_vector(a.num_cols * k, 7)
        .into_iter()
        .map(|v| f16::from_f32(v).to_f32())
        .collect();
    let (a16, b16) = (a.map_values(f16::from_f32), lb::narrowed::<f16>(&b));
    let dev = Device::default();
    println!(
        "A: {} × {}, {} nonzeros; B: {} × {k}; device: {}",
        a.num_rows,
        a.num_cols,
        a.nnz(),
        a.num_cols,
        dev.name()
    );
    let (da, db, mut dc) = (
        DeviceCsr::upload(&dev, &a)?,
        dev.upload(&b)?,
        dev.zeros::<f32>(a.num_rows * k)?,
    );
    let (da16, db16, mut dc16) = (
        DeviceCsr::upload(&dev, &a16)?,
        dev.upload(&b16)?,
        dev.zeros::<f16>(a.num_rows * k)?,
    );
    println!(
        "{:<22} {:>10} {:>10} {:>12} {:>12}",
        "schedule", "f32 (us)", "f16 (us)", "f32 rel err", "f16 rel err"
    );
    // The simulator has no clock: one launch each checks the result.
    let reps = if dev.is_gpu() { args.reps } else { 1 };
    let mut all_ok = true;
    for &s in spmm::f16::SCHEDULES {
        let t32 = median_ms(reps, || {
            spmm::f32::launch_with(&dev, s, &da, &db, k, &mut dc)
        })?;
        let t16 = median_ms(reps, || {
            spmm::f16::launch_with(&dev, s, &da16, &db16, k, &mut dc16)
        })?;
        let e32 = max_relative_error(&a, &b, k, &dc.download()?);
        let e16 = max_relative_error(&a, &b, k, &lb::widen(&dc16.download()?));
        // f16 output: one rounding (2^-11 of the value) on top of the f32 sum's error.
        let ok = e32 <= 1e-5 && e16 <= 1e-5 + 1.0 / 2048.0;
        all_ok &= ok;
        println!(
            "{:<22} {:>10.1} {:>10.1} {:>12.2e} {:>12.2e} {}",
            s.name(),
            t32 * 1e3,
            t16 * 1e3,
            e32,
            e16,
            if ok { "ok" } else { "FAILED" }
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "spmm_half",
        parse_args(),
        run,
        "a schedule disagreed with the reference",
    )
}
