//! SpMV with more than 2^32 nonzeros: the 64-bit index path of every schedule, the searches
//! outside `auto` included.
//!
//! `cargo run --release --example spmv_huge -- [--rows R] [--per-row K] [--reps N]` builds a
//! structured matrix (R rows of K nonzeros, scattered columns, small integer values) whose product
//! with a small-integer vector is exact in f32, so every row is checked exactly against a closed
//! form. The default (2^27 rows × 33) has 4 429 185 024 nonzeros and needs about 37 GB of device
//! memory and twice that on the host; `--rows 1000` runs anywhere, on the simulator too.

mod common;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;

#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

const COLS: usize = 1 << 24;

fn column(row: usize, k: usize) -> u32 {
    ((row * 33 + k) as u64 * 7919 % COLS as u64) as u32
}

fn value(k: usize) -> f32 {
    (k % 5) as f32 - 2.0
}

fn x_at(c: usize) -> f32 {
    (c % 3) as f32
}

/// `--rows R`, `--per-row K` and `--reps N`, each at least 1; anything else is an error.
fn parse_args() -> Result<(usize, usize, usize), String> {
    let (mut rows, mut per_row, mut reps) = (1 << 27, 33, 3);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => rows = number(&mut it, "--rows", 1..=MAX_ROWS)?,
            "--per-row" => per_row = number(&mut it, "--per-row", 1..=1 << 16)?,
            "--reps" => reps = number(&mut it, "--reps", 1..=1_000)?,
            _ => {
                return Err(format!(
                    "unknown argument `{arg}`; usage: spmv_huge [--rows R] [--per-row K] [--reps N]"
                ))
            }
        }
    }
    Ok((rows, per_row, reps))
}

/// A vector of `n` elements, or an error naming the bytes that could not be had (instead of
/// the process aborting).
fn vec_for<T>(n: usize, what: &str) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        format!(
            "cannot allocate {n} {what} ({} bytes) on the host: try a smaller --rows",
            n.saturating_mul(std::mem::size_of::<T>())
        )
    })?;
    Ok(v)
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let (rows, per_row, reps) = parse_args()?;
    let nnz = rows
        .checked_mul(per_row)
        .ok_or("--rows × --per-row overflows the address space")?;
    println!(
        "matrix: {rows} rows × {per_row} = {nnz} nonzeros ({:.2} × 2^32), {COLS} columns",
        nnz as f64 / 2f64.powi(32)
    );

    let mut row_offsets = vec_for(rows + 1, "row offsets")?;
    row_offsets.extend((0..=rows).map(|r| r * per_row));
    let mut col_indices = vec_for(nnz, "column indices")?;
    let mut values = vec_for(nnz, "values")?;
    for row in 0..rows {
        for k in 0..per_row {
            col_indices.push(column(row, k));
            values.push(value(k));
        }
    }
    let a = Csr::new(rows, COLS, row_offsets, col_indices, values)?;
    let x: Vec<f32> = (0..COLS).map(x_at).collect();

    let dev = Device::default();
    println!("device: {}", dev.name());
    let da = DeviceCsr::upload(&dev, &a)?;
    drop(a);
    let dx = dev.upload(&x)?;
    // Every schedule starts from NaN, so one that writes nothing cannot pass on the previous
    // schedule's output.
    let mut nan = vec_for(rows, "outputs")?;
    nan.resize(rows, f32::NAN);
    let bytes = (rows + 1) * 8 + nnz * 8 + COLS * 4 + rows * 4;

    let mut all_ok = true;
    println!(
        "{:<22} {:<52} {:>10} {:>8} {:>8}",
        "schedule", "kernels", "time (ms)", "GB/s", "check"
    );
    for &schedule in spmv::SCHEDULES {
        let mut times = Vec::new();
        let mut kernels = String::new();
        // A schedule that refuses (no 64-bit path, or the device is short of memory for its
        // temporaries) is reported in its row and fails the run; the others still run.
        let mut refused = None;
        let mut dy = dev.upload(&nan)?;
        for _ in 0..reps {
            let launch = match spmv::launch_with(&dev, schedule, &da, &dx, &mut dy) {
                Ok(launch) => launch,
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
            };
            kernels = launch
                .kernels
                .iter()
                .map(|k| k.entry.as_ref())
                .collect::<Vec<_>>()
                .join("+");
            times.extend(launch.elapsed_ms);
        }
        if let Some(e) = refused {
            all_ok = false;
            println!("{:<22} error: {e}", schedule.name());
            continue;
        }
        let y = dev.download(&dy)?;
        let wrong = (0..rows)
            .filter(|&row| {
                let want: f32 = (0..per_row)
                    .map(|k| value(k) * x_at(column(row, k) as usize))
                    .sum();
                y[row] != want
            })
            .count();
        all_ok &= wrong == 0;
        times.sort_by(f32::total_cmp);
        // The simulator has no clock: its rows show only the check.
        let (ms, gbs) = match times.get(times.len() / 2) {
            Some(&t) => {
                let ms = f64::from(t);
                (
                    format!("{ms:.2}"),
                    format!("{:.1}", bytes as f64 / (ms * 1e-3) / 1e9),
                )
            }
            None => ("-".to_string(), "-".to_string()),
        };
        let verdict = if wrong == 0 {
            "ok".to_string()
        } else {
            format!("{wrong} rows wrong")
        };
        println!(
            "{:<22} {:<52} {:>10} {:>8} {:>8}",
            schedule.name(),
            kernels,
            ms,
            gbs,
            verdict
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "spmv_huge",
        Ok(()),
        |_| run(),
        "a schedule failed or disagreed with the reference",
    )
}
