//! SpMV over a frontier: `y[r] = Σ A[r, c] · x[c]` for the rows a list names (an active set:
//! the rows whose inputs changed, one level of a traversal), every other row left as it was.
//!
//! `cargo run --release --example frontier_spmv` builds a seeded power law (20 000 rows; `--rows
//! N` scales it) and runs frontiers from one row to every row, each checked against the host's
//! f64 on every schedule listed below. On a GPU the table shows each launch's median time over
//! `--reps N` launches; on the simulator, instructions. A small frontier of a graph with hubs is
//! where a grid sized for the whole graph would cost the most: the work-oriented schedules stride
//! a resident grid over the frontier's own shares (docs/schedules.md, "A frontier's grid").

mod common;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;

/// One nonzero of a listed row.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y", tiles = "rows")]
fn frontier_spmv(a: &Csr<f32>, rows: &[u32], x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// The schedules timed: the work-oriented ones, a thread per row, and `auto`.
const TIMED: [Schedule; 5] = [
    Schedule::MergePath,
    Schedule::NonzeroSplit,
    Schedule::TwoPhase,
    Schedule::MultiPhase,
    Schedule::ThreadMapped,
];

/// The value every row outside the frontier keeps.
const UNTOUCHED: f32 = -3.0;

fn parse_args() -> Result<(usize, usize), String> {
    let (mut rows, mut reps) = (20_000, 50);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => rows = number(&mut it, "--rows", 1..=MAX_ROWS)?,
            "--reps" => reps = number(&mut it, "--reps", 1..=1_000_000)?,
            "-h" | "--help" => return Err("usage: frontier_spmv [--rows N] [--reps N]".into()),
            _ => return Err(format!("unknown argument `{arg}`")),
        }
    }
    Ok((rows, reps))
}

/// Frontiers of the matrix's rows: its longest row alone, then every `n`-th row for a few `n`
/// down to every row (a stride keeps the rows spread over the matrix, hubs included).
fn frontiers(a: &Csr<f32>) -> Vec<Vec<u32>> {
    let rows = a.num_rows as u32;
    let hub = (0..a.num_rows).max_by_key(|&r| a.row(r).len()).unwrap_or(0) as u32;
    let mut out = vec![vec![hub]];
    for every in [10_000, 100, 10, 1] {
        out.push((0..rows).step_by(every).collect());
    }
    out
}

/// Largest error on a listed row relative to the magnitude of its terms; infinite when a row
/// outside the frontier changed.
fn max_error(a: &Csr<f32>, x: &[f32], frontier: &[u32], got: &[f32]) -> f64 {
    let mut listed = vec![false; a.num_rows];
    frontier.iter().for_each(|&r| listed[r as usize] = true);
    (0..a.num_rows)
        .map(|row| {
            if !listed[row] {
                return if got[row] == UNTOUCHED {
                    0.0
                } else {
                    f64::INFINITY
                };
            }
            let terms = a
                .row(row)
                .map(|nz| f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]));
            let (sum, mag) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
            (f64::from(got[row]) - sum).abs() / mag.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max)
}

fn run(rows: usize, reps: usize) -> lb::Result<bool> {
    let a = lb::generate::power_law(rows, rows, 8.0, 42);
    let x = lb::generate::random_vector(a.num_cols, 7);
    let dev = Device::default();
    println!(
        "matrix: {} rows, {} nonzeros (seeded power law); device: {}",
        a.num_rows,
        a.nnz(),
        dev.name()
    );
    let (da, dx) = (DeviceCsr::upload(&dev, &a)?, dev.upload(&x)?);
    let measure = if dev.is_gpu() {
        "median us"
    } else {
        "instructions"
    };
    println!(
        "{:>9} {:>10} {:<15} {:>13} {:>12} check",
        "rows", "atoms", "schedule", measure, "max rel err"
    );
    let mut all_ok = true;
    for frontier in frontiers(&a) {
        let atoms: usize = frontier.iter().map(|&r| a.row(r as usize).len()).sum();
        let df = dev.upload(&frontier)?;
        for schedule in TIMED.iter().map(|&s| Some(s)).chain([None]) {
            let mut dy = dev.upload(&vec![UNTOUCHED; a.num_rows])?;
            let launch = |dy: &mut DeviceBuffer<f32>| match schedule {
                Some(s) => frontier_spmv::launch_with(&dev, s, &da, &df, &dx, dy),
                None => frontier_spmv::launch(&dev, &da, &df, &dx, dy),
            };
            let first = launch(&mut dy)?;
            let err = max_error(&a, &x, &frontier, &dev.download(&dy)?);
            let ok = err <= 1e-5;
            all_ok &= ok;
            let cost = if dev.is_gpu() {
                let mut times = Vec::with_capacity(reps);
                for _ in 0..reps {
                    times.push(launch(&mut dy)?.elapsed_ms.unwrap_or(f32::NAN));
                }
                times.sort_by(f32::total_cmp);
                format!("{:.1}", f64::from(times[times.len() / 2]) * 1e3)
            } else {
                first.sim.unwrap_or_default().instructions.to_string()
            };
            let name = match schedule {
                Some(s) => s.name().to_string(),
                None => format!("auto→{}", first.schedule),
            };
            let verdict = if ok { "ok" } else { "FAILED" };
            println!(
                "{:>9} {atoms:>10} {name:<15} {cost:>13} {err:>12.2e} {verdict}",
                frontier.len()
            );
        }
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "frontier_spmv",
        parse_args(),
        |&(rows, reps)| run(rows, reps),
        "a schedule's result differs from the reference",
    )
}
