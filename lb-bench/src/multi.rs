//! `--devices N`: one iteration of an iterative method on N devices, SpMV (or SpMM) on every part
//! of a split matrix followed by the all-gather of its result into every device's input, against
//! the same kernel on one device of the same group in the same run.
//!
//! Columns (µs per iteration, the median over the repetitions; wall clock around each phase,
//! each phase ending when every device has finished):
//! - `iteration`: the kernels on every part at once, the rows cut between parts combined, and
//!   the all-gather of the result enqueued behind them (`MultiCsr::launch_and_gather`);
//! - `compute`: the same kernels alone, waited for (`MultiCsr::launch`);
//! - `exchange`: the all-gather alone (NCCL broadcasts of each part's rows), waited for;
//! - `one`: the same kernel on the whole matrix on the group's first device (no exchange: one
//!   device needs none);
//! - `scaling`: `one / iteration`.
//!
//! On simulators the times mean nothing; the run still verifies every result.

use std::io::Write;
use std::time::Instant;

use lb::multi::{Devices, MultiCsr, Replicated, RowParts};
use lb::prelude::*;
use serde::Serialize;

use crate::corpus::Matrix;
use crate::run::{spmm, spmv};
use crate::{Cli, Op};

#[derive(Serialize)]
struct MultiRecord {
    matrix: String,
    rows: usize,
    nnz: usize,
    op: &'static str,
    schedule: String,
    devices: usize,
    iteration_us: f64,
    compute_us: f64,
    exchange_us: f64,
    one_device_us: f64,
    scaling: f64,
    /// Largest relative error of the gathered result against the f64 reference.
    max_rel_error: f64,
    error: Option<String>,
}

/// The per-iteration phases' times, µs.
struct Times {
    iteration: f64,
    compute: f64,
    exchange: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn micros(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// Largest error relative to the magnitude of a row's terms, over every row and lane.
fn max_rel_error(a: &Csr<f32>, dense: &[f32], k: usize, got: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for row in 0..a.num_rows {
        for j in 0..k {
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for nz in a.row(row) {
                let t =
                    f64::from(a.values[nz]) * f64::from(dense[a.col_indices[nz] as usize * k + j]);
                exact += t;
                magnitude += t.abs();
            }
            let err = (f64::from(got[row * k + j]) - exact).abs() / magnitude.max(1e-30);
            worst = worst.max(err);
        }
    }
    worst
}

/// One part's launch of the op's kernel.
fn launch_part(
    op: Op,
    schedule: Schedule,
    part: &lb::multi::CsrPart<f32>,
    stream: &Stream,
    dense: &Replicated<f32>,
    out: &mut DeviceBuffer<f32>,
) -> lb::Result<Pending> {
    let d = dense.on(part.index());
    match op.k() {
        None => spmv::launch_with_async(stream, schedule, part.tiles(), d, out),
        Some(k) => spmm::launch_with_async(stream, schedule, part.tiles(), d, k, out),
    }
}

/// Times `reps` iterations (after `warmup`) of compute then exchange on `split`.
fn time_iterations(
    split: &MultiCsr<f32>,
    op: Op,
    schedule: Schedule,
    dense: &Replicated<f32>,
    out: &mut RowParts<f32>,
    gathered: &mut Replicated<f32>,
    (warmup, reps): (usize, usize),
) -> lb::Result<Times> {
    let reduction = spmv::REDUCTION.expect("spmv reduces");
    let (mut iteration, mut compute, mut exchange) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..warmup + reps {
        let start = Instant::now();
        split.launch_and_gather(reduction, out, gathered, |p, s, o| {
            launch_part(op, schedule, p, s, dense, o)
        })?;
        let t = micros(start);
        let start = Instant::now();
        split.launch(reduction, out, |p, s, o| {
            launch_part(op, schedule, p, s, dense, o)
        })?;
        let c = micros(start);
        let start = Instant::now();
        split.all_gather(out, gathered)?;
        split.devices().synchronize()?;
        let e = micros(start);
        if i >= warmup {
            iteration.push(t);
            compute.push(c);
            exchange.push(e);
        }
    }
    Ok(Times {
        iteration: median(iteration),
        compute: median(compute),
        exchange: median(exchange),
    })
}

/// One (matrix, op, schedule) on the whole group and on its first device.
fn measure(
    group: &Devices,
    one: &Devices,
    m: &Matrix,
    op: Op,
    schedule: Schedule,
    reps: (usize, usize),
) -> lb::Result<MultiRecord> {
    let a = &m.csr;
    let k = op.k().unwrap_or(1);
    let dense_host = lb::generate::random_vector(a.num_cols * k, 11);
    let mut per_device = Vec::new();
    let mut error = 0.0;
    for devices in [one, group] {
        let split = MultiCsr::upload(devices, a)?;
        let dense = devices.replicate(&dense_host)?;
        let mut out = split.outputs::<f32>(k)?;
        let mut gathered = devices.replicated_zeros::<f32>(a.num_rows * k)?;
        let times = time_iterations(&split, op, schedule, &dense, &mut out, &mut gathered, reps)?;
        if devices.same(group) {
            // The gathered copy of the last device holds what every device received.
            let last = gathered.on(devices.count() - 1).download()?;
            error = max_rel_error(a, &dense_host, k, &last);
        }
        per_device.push(times);
    }
    let one_us = per_device[0].compute;
    let total = per_device[1].iteration;
    Ok(MultiRecord {
        matrix: m.name.clone(),
        rows: a.num_rows,
        nnz: a.nnz(),
        op: op.name(),
        schedule: schedule.to_string(),
        devices: group.count(),
        iteration_us: total,
        compute_us: per_device[1].compute,
        exchange_us: per_device[1].exchange,
        one_device_us: one_us,
        scaling: one_us / total,
        max_rel_error: error,
        error: None,
    })
}

/// Runs every (matrix, op, schedule) on `group`; returns how many runs failed.
pub fn run(
    group: &Devices,
    one: &Devices,
    matrices: &[Matrix],
    cli: &Cli,
    schedules: &[Schedule],
    mut json: Option<&mut dyn Write>,
) -> usize {
    let reps = (cli.warmup, cli.reps.max(1));
    println!(
        "{:<40} {:<8} {:<16} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "matrix", "op", "schedule", "iteration", "compute", "exchange", "one", "scaling"
    );
    let mut failed = 0;
    for m in matrices {
        for &op in cli.ops.iter().filter(|o| !o.is_graph()) {
            for &schedule in schedules {
                let record =
                    measure(group, one, m, op, schedule, reps).unwrap_or_else(|e| MultiRecord {
                        matrix: m.name.clone(),
                        rows: m.csr.num_rows,
                        nnz: m.csr.nnz(),
                        op: op.name(),
                        schedule: schedule.to_string(),
                        devices: group.count(),
                        iteration_us: f64::NAN,
                        compute_us: f64::NAN,
                        exchange_us: f64::NAN,
                        one_device_us: f64::NAN,
                        scaling: f64::NAN,
                        max_rel_error: f64::NAN,
                        error: Some(e.to_string()),
                    });
                let bad = record.error.is_some()
                    || record.max_rel_error.is_nan()
                    || record.max_rel_error > cli.tolerance;
                failed += usize::from(bad);
                println!(
                    "{:<40} {:<8} {:<16} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2}{}",
                    record.matrix,
                    record.op,
                    record.schedule,
                    record.iteration_us,
                    record.compute_us,
                    record.exchange_us,
                    record.one_device_us,
                    record.scaling,
                    match (&record.error, bad) {
                        (Some(e), _) => format!("  error: {e}"),
                        (None, true) => format!("  WRONG: error {:.2e}", record.max_rel_error),
                        (None, false) => String::new(),
                    }
                );
                if let Some(w) = json.as_mut() {
                    let line = serde_json::to_string(&record).expect("records serialize");
                    let _ = writeln!(w, "{line}");
                }
            }
        }
    }
    failed
}
