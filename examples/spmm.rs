//! SpMM, C = A·B with B dense row-major (n × k): the lanes are the k columns of B. Every
//! generated schedule is checked against a plain CSR × dense product in f64.
//!
//! `cargo run --release --example spmm` builds the embedded default (a seeded power-law matrix);
//! `cargo run --release --example spmm -- path/to/matrix.mtx` reads a Matrix Market file.
//! `--k K` sets the columns of B (default 32), `--rows N` scales the default matrix, `--reps N`
//! the timed repetitions on a GPU. On a GPU the table shows time and GB/s; on the simulator,
//! instructions and warp efficiency.

mod common;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;

/// One nonzero times one column of B: `C[row][j] += A[row][col] · B[col][j]`.
#[load_balanced(schedule = "auto", reduce = "sum", output = "c", lanes = "k")]
fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

struct Args {
    path: Option<String>,
    rows: usize,
    k: usize,
    reps: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
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
            "-h" | "--help" => {
                return Err("usage: spmm [matrix.mtx] [--k K] [--rows N] [--reps N]".to_string())
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

/// C = A·B in f64, and the magnitude of each entry's terms (the tolerance's scale).
fn reference(a: &Csr<f32>, b: &[f32], k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0f64; a.num_rows * k];
    let mut magnitude = vec![0.0f64; a.num_rows * k];
    for row in 0..a.num_rows {
        for nz in a.row(row) {
            let col = a.col_indices[nz] as usize;
            for j in 0..k {
                let term = f64::from(a.values[nz]) * f64::from(b[col * k + j]);
                c[row * k + j] += term;
                magnitude[row * k + j] += term.abs();
            }
        }
    }
    (c, magnitude)
}

fn max_relative_error(got: &[f32], want: &[f64], magnitude: &[f64]) -> f64 {
    got.iter()
        .zip(want.iter().zip(magnitude))
        .map(|(&g, (&w, &m))| (f64::from(g) - w).abs() / m.max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max)
}

fn run(args: &Args) -> lb::Result<bool> {
    let (a, origin) = match &args.path {
        Some(path) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        None => (
            lb::generate::power_law(args.rows, args.rows, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    let k = args.k;
    let b = lb::generate::random_vector(a.num_cols * k, 7);
    println!(
        "A: {} × {}, {} nonzeros {origin}; B: {} × {k}",
        a.num_rows,
        a.num_cols,
        a.nnz(),
        a.num_cols
    );
    let (want, magnitude) = reference(&a, &b, k);

    let dev = Device::default();
    println!("device: {}", dev.name());
    let da = DeviceCsr::upload(&dev, &a)?;
    let db = dev.upload(&b)?;
    let mut dc = dev.zeros::<f32>(a.num_rows * k)?;
    // Bytes that must move: A once, B once, C once.
    let bytes = (a.num_rows + 1) * 8 + a.nnz() * 8 + (a.num_cols + a.num_rows) * k * 4;

    let mut all_ok = true;
    if dev.is_gpu() {
        println!(
            "{:<22} {:>10} {:>8} {:>12} {:>7}",
            "schedule", "time (us)", "GB/s", "max rel err", "check"
        );
    } else {
        println!(
            "{:<22} {:>13} {:>9} {:>12} {:>7}",
            "schedule", "instructions", "warp eff", "max rel err", "check"
        );
    }
    for &schedule in spmm::SCHEDULES {
        let launch = spmm::launch_with(&dev, schedule, &da, &db, k, &mut dc)?;
        let err = max_relative_error(&dev.download(&dc)?, &want, &magnitude);
        let ok = err <= 1e-5;
        all_ok &= ok;
        let verdict = if ok { "ok" } else { "FAILED" };
        if dev.is_gpu() {
            let mut times = Vec::with_capacity(args.reps);
            for _ in 0..args.reps {
                times.push(
                    spmm::launch_with(&dev, schedule, &da, &db, k, &mut dc)?
                        .elapsed_ms
                        .unwrap_or(f32::NAN),
                );
            }
            times.sort_by(f32::total_cmp);
            let median_ms = f64::from(times[times.len() / 2]);
            let gbs = bytes as f64 / (median_ms * 1e-3) / 1e9;
            println!(
                "{:<22} {:>10.1} {:>8.1} {:>12.2e} {:>7}",
                schedule.name(),
                median_ms * 1e3,
                gbs,
                err,
                verdict
            );
        } else {
            let stats = launch.sim.unwrap_or_default();
            println!(
                "{:<22} {:>13} {:>8.1}% {:>12.2e} {:>7}",
                schedule.name(),
                stats.instructions,
                100.0 * stats.warp_efficiency(),
                err,
                verdict
            );
        }
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "spmm",
        parse_args(),
        run,
        "a schedule disagreed with the reference",
    )
}
