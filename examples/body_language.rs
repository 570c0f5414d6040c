//! A row-wise log-sum-exp written with the wider body language: a helper `fn` declared inside
//! the kernel, a `while` loop and `exp`, checked on every generated schedule against plain Rust
//! in f64.
//!
//! `cargo run --release --example body_language` runs a small seeded power-law matrix (on the
//! simulator when there is no GPU); `--rows N` scales it. It prints the largest relative error
//! per schedule and exits nonzero when one is past the tolerance.

use lb::prelude::*;
use std::process::ExitCode;

/// Each atom contributes `exp(s)` for its score `s = 4·a_ij·x_j`, first brought into [-8, 8] by
/// halving (a `while` loop in a helper); the host takes the logarithm of each row's sum.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y")]
fn sum_exp(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    fn squash(mut s: f32) -> f32 {
        while s.abs() > 8.0 {
            s *= 0.5;
        }
        s
    }
    squash(4.0 * a.values[nz] * x[a.col_indices[nz] as usize]).exp()
}

/// The same per-row log-sum-exp in f64, from the f32 score (whose rounding both share).
fn reference(a: &Csr<f32>, x: &[f32]) -> Vec<f64> {
    (0..a.num_rows)
        .map(|r| {
            let sum: f64 = (a.row_offsets[r]..a.row_offsets[r + 1])
                .map(|nz| {
                    let mut s = f64::from(4.0 * a.values[nz] * x[a.col_indices[nz] as usize]);
                    while s.abs() > 8.0 {
                        s /= 2.0;
                    }
                    s.exp()
                })
                .sum();
            sum.ln()
        })
        .collect()
}

fn main() -> ExitCode {
    let mut rows = 2_000usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--rows", Some(n)) if n > 0 => rows = n,
            _ => {
                eprintln!("usage: body_language [--rows N]");
                return ExitCode::from(2);
            }
        }
    }
    let a = lb::generate::power_law(rows, rows, 6.0, 3);
    let x = lb::generate::random_vector(a.num_cols, 4);
    let want = reference(&a, &x);
    let dev = Device::default();
    let run = || -> lb::Result<Vec<(&'static str, f64)>> {
        let da = DeviceCsr::upload(&dev, &a)?;
        let dx = dev.upload(&x)?;
        let mut errors = Vec::new();
        for &s in sum_exp::SCHEDULES {
            let mut dy = dev.zeros::<f32>(a.num_rows)?;
            sum_exp::launch_with(&dev, s, &da, &dx, &mut dy)?;
            let got = dy.download()?;
            // log-sum-exp of an empty row is ln 0 = -inf on both sides.
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| {
                    let g = f64::from(g).ln();
                    if g == w {
                        0.0
                    } else {
                        (g - w).abs() / w.abs().max(1.0)
                    }
                })
                .fold(0.0, f64::max);
            errors.push((s.name(), worst));
        }
        Ok(errors)
    };
    let errors = match run() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("launch failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    // exp's documented error (docs/kernel-language.md) on |s| <= 8, and the sum's rounding.
    let tolerance = 1e-5;
    let mut ok = true;
    println!(
        "log-sum-exp of {} rows, {} atoms",
        a.num_rows,
        a.values.len()
    );
    for (name, worst) in errors {
        let verdict = if worst <= tolerance { "ok" } else { "MISMATCH" };
        ok &= worst <= tolerance;
        println!("{name:>24}  max error {worst:.2e}  {verdict}");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
