//! SpMV on every generated schedule, checked against the CPU reference.
//!
//! `cargo run --release --example spmv` builds the embedded default (a seeded power-law matrix);
//! `cargo run --release --example spmv -- path/to/matrix.mtx` reads a Matrix Market file.
//! `--rows N` scales the default matrix, `--regular K` makes every row hold K nonzeros instead of
//! a power law, `--reps N` sets the timed repetitions on a GPU.
//! On a GPU the table shows time and GB/s; on the simulator, instructions and warp efficiency.
//! Then `y = α·A·x + β·y` (the reduce kernel's `epilogue` reading the old output) is checked on
//! every schedule against the host's f64.

mod common;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;

/// y = A·x. The body is the work of one nonzero; the schedule does the rest.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// y = α·A·x + β·y, in place: the epilogue reads each output element's old value and stores
/// the combination, once per row after the row's sum is complete.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y",
    epilogue = |_row, sum, old| alpha * sum + beta * old)]
fn spmv_axpby(a: &Csr<f32>, x: &[f32], alpha: f32, beta: f32, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

struct Args {
    path: Option<String>,
    rows: usize,
    regular: Option<usize>,
    reps: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
        rows: 20_000,
        regular: None,
        reps: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => args.rows = number(&mut it, "--rows", 1..=MAX_ROWS)?,
            "--regular" => args.regular = Some(number(&mut it, "--regular", 1..=1 << 16)?),
            "--reps" => args.reps = number(&mut it, "--reps", 1..=1_000_000)?,
            "-h" | "--help" => {
                return Err(
                    "usage: spmv [matrix.mtx] [--rows N] [--regular K] [--reps N]".to_string(),
                );
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

/// Largest error relative to the magnitude of the row's terms: the schedules may sum a row in a
/// different order than the sequential reference.
fn max_relative_error(a: &Csr<f32>, x: &[f32], got: &[f32], want: &[f32]) -> f64 {
    (0..a.num_rows)
        .map(|row| {
            let magnitude: f64 = a
                .row(row)
                .map(|nz| {
                    (f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize])).abs()
                })
                .sum();
            (f64::from(got[row]) - f64::from(want[row])).abs() / magnitude.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max)
}

fn run(args: &Args) -> lb::Result<bool> {
    let (a, origin) = match (&args.path, args.regular) {
        (Some(path), _) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        (None, Some(k)) => (
            lb::generate::uniform(args.rows, args.rows, k, 42),
            format!("({k} per row, uniform columns)"),
        ),
        (None, None) => (
            lb::generate::power_law(args.rows, args.rows, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    let x = lb::generate::random_vector(a.num_cols, 7);
    let longest = (0..a.num_rows).map(|r| a.row(r).len()).max().unwrap_or(0);
    println!(
        "matrix: {} rows, {} columns, {} nonzeros (longest row {longest}) {origin}",
        a.num_rows,
        a.num_cols,
        a.nnz(),
    );

    let mut want = vec![0.0f32; a.num_rows];
    spmv::cpu(&a, &x, &mut want);

    let dev = Device::default();
    println!("device: {}", dev.name());
    let da = DeviceCsr::upload(&dev, &a)?;
    let dx = dev.upload(&x)?;
    let mut dy = dev.zeros::<f32>(a.num_rows)?;
    // Bytes that must move: offsets, indices, values, x once, y once.
    let bytes = (a.num_rows + 1) * 8 + a.nnz() * 8 + a.num_cols * 4 + a.num_rows * 4;

    let mut all_ok = true;
    if dev.is_gpu() {
        println!(
            "{:<22} {:<34} {:>10} {:>8} {:>12} {:>7}",
            "schedule", "kernels", "time (us)", "GB/s", "max rel err", "check"
        );
    } else {
        println!(
            "{:<22} {:<34} {:>13} {:>9} {:>9} {:>9} {:>12} {:>7}",
            "schedule",
            "kernels",
            "instructions",
            "instr/nz",
            "max/mean",
            "warp eff",
            "max rel err",
            "check"
        );
    }
    for &schedule in spmv::SCHEDULES {
        let launch = spmv::launch_with(&dev, schedule, &da, &dx, &mut dy)?;
        let got = dev.download(&dy)?;
        let err = max_relative_error(&a, &x, &got, &want);
        let ok = err <= 1e-5;
        all_ok &= ok;
        let verdict = if ok { "ok" } else { "FAILED" };
        // The entries that ran: shows which variant a dynamic schedule or index width picked.
        let kernels = launch
            .kernels
            .iter()
            .map(|k| k.entry.trim_start_matches("spmv_"))
            .collect::<Vec<_>>()
            .join("+");
        if dev.is_gpu() {
            let mut times = Vec::with_capacity(args.reps);
            for _ in 0..args.reps {
                let l = spmv::launch_with(&dev, schedule, &da, &dx, &mut dy)?;
                times.push(l.elapsed_ms.unwrap_or(f32::NAN));
            }
            times.sort_by(f32::total_cmp);
            let median_ms = f64::from(times[times.len() / 2]);
            let gbs = bytes as f64 / (median_ms * 1e-3) / 1e9;
            println!(
                "{:<22} {:<34} {:>10.1} {:>8.1} {:>12.2e} {:>7}",
                schedule.name(),
                kernels,
                median_ms * 1e3,
                gbs,
                err,
                verdict
            );
        } else {
            let stats = launch.sim.unwrap_or_default();
            let per_nz = stats.instructions as f64 / a.nnz().max(1) as f64;
            // Load balance: the busiest thread's instructions over the mean thread's.
            let busiest = stats
                .per_thread_instructions
                .iter()
                .copied()
                .max()
                .unwrap_or(0) as f64;
            let mean =
                stats.instructions as f64 / stats.per_thread_instructions.len().max(1) as f64;
            println!(
                "{:<22} {:<34} {:>13} {:>9.1} {:>9.1} {:>8.1}% {:>12.2e} {:>7}",
                schedule.name(),
                kernels,
                stats.instructions,
                per_nz,
                busiest / mean.max(1.0),
                100.0 * stats.warp_efficiency(),
                err,
                verdict
            );
        }
    }
    Ok(all_ok & check_axpby(&dev, &a, &x, &da, &dx)?)
}

/// `y = α·A·x + β·y` on every schedule against the host's f64, to a tolerance relative to the
/// magnitude of the row's terms and of `β·y`.
fn check_axpby(
    dev: &Device,
    a: &Csr<f32>,
    x: &[f32],
    da: &DeviceCsr<f32>,
    dx: &DeviceBuffer<f32>,
) -> lb::Result<bool> {
    let (alpha, beta) = (2.0f32, -0.5f32);
    let y0 = lb::generate::random_vector(a.num_rows, 8);
    let want: Vec<(f64, f64)> = (0..a.num_rows)
        .map(|row| {
            let (sum, magnitude) = a.row(row).fold((0.0f64, 0.0f64), |(s, m), nz| {
                let t = f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
                (s + t, m + t.abs())
            });
            let old = f64::from(beta) * f64::from(y0[row]);
            (
                f64::from(alpha) * sum + old,
                f64::from(alpha) * magnitude + old.abs(),
            )
        })
        .collect();
    println!("y = α·A·x + β·y with α = {alpha}, β = {beta}:");
    let mut all_ok = true;
    for &schedule in spmv_axpby::SCHEDULES {
        let mut dy = dev.upload(&y0)?;
        spmv_axpby::launch_with(dev, schedule, da, dx, alpha, beta, &mut dy)?;
        let got = dev.download(&dy)?;
        let err = got
            .iter()
            .zip(&want)
            .map(|(&g, &(w, m))| (f64::from(g) - w).abs() / m.max(f64::MIN_POSITIVE))
            .fold(0.0, f64::max);
        let ok = err <= 1e-5;
        all_ok &= ok;
        let verdict = if ok { "ok" } else { "FAILED" };
        println!(
            "  {:<22} max rel err {err:>9.2e} {verdict:>7}",
            schedule.name()
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "spmv",
        parse_args(),
        run,
        "a schedule disagreed with the CPU reference",
    )
}
