//! `--devices N`: one iteration of an iterative method on N devices, SpMV (or SpMM) on every part
//! of a split matrix followed by the all-gather of its result into every device's input, against
//! the same kernel on one device of the same group in the same run.
//!
//! Columns (µs per iteration, the median over the repetitions; wall clock around each phase,
//! each phase ending when every device has finished):
//! - `iteration`: the kernels on every part at once, the rows cut between parts combined, and
//!   the all-gather of the result enqueued behind them (`MultiCsr::launch_and_gather`);
//! - `compute`: the same kernels alone, waited for (`MultiCsr::launch`);
//! - `exchange`: the all-gather alone (peer copies or NCCL broadcasts of each part's rows),
//!   waited for;
//! - `one`: the same kernel on the whole matrix on the group's first device (no exchange: one
//!   device needs none);
//! - `scaling`: `one / iteration`;
//! - `chunks`, `transport`: how each device's share was launched (`--chunks`) and how the
//!   all-gather travelled (`--transport`); one line per combination.
//!
//! On simulators the times mean nothing; the run still verifies every result.

use std::io::Write;
use std::time::Instant;

use lb::multi::{Devices, MultiCsr, Replicated, RowParts, SplitOptions, Transport};
use lb::prelude::*;
use serde::Serialize;

use crate::corpus::Matrix;
use crate::run::{spmm, spmv};
use crate::{Cli, Op};

#[derive(Serialize)]
pub(crate) struct MultiRecord {
    pub(crate) matrix: String,
    pub(crate) rows: usize,
    pub(crate) nnz: usize,
    pub(crate) op: &'static str,
    pub(crate) schedule: String,
    pub(crate) devices: usize,
    pub(crate) chunks: usize,
    pub(crate) transport: String,
    pub(crate) iteration_us: f64,
    pub(crate) compute_us: f64,
    pub(crate) exchange_us: f64,
    pub(crate) one_device_us: f64,
    pub(crate) scaling: f64,
    /// Largest relative error of the gathered result against the f64 reference.
    pub(crate) max_rel_error: f64,
    pub(crate) error: Option<String>,
}

/// The per-iteration phases' times, µs.
pub(crate) struct Times {
    pub(crate) iteration: f64,
    pub(crate) compute: f64,
    pub(crate) exchange: f64,
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
pub(crate) fn time_iterations(
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

/// One (matrix, op, schedule) on its first device, then on the whole group for every chunk
/// count and transport asked for: one record per combination.
fn measure(
    group: &Devices,
    one: &Devices,
    m: &Matrix,
    op: Op,
    schedule: Schedule,
    cli: &Cli,
) -> lb::Result<Vec<MultiRecord>> {
    let reps = (cli.warmup, cli.reps.max(1));
    let a = &m.csr;
    let k = op.k().unwrap_or(1);
    let dense_host = lb::generate::random_vector(a.num_cols * k, 11);
    let one_us = {
        let split = MultiCsr::upload(one, a)?;
        let dense = one.replicate(&dense_host)?;
        let mut out = split.outputs::<f32>(k)?;
        let mut gathered = one.replicated_zeros::<f32>(a.num_rows * k)?;
        time_iterations(&split, op, schedule, &dense, &mut out, &mut gathered, reps)?.compute
    };
    let chunk_counts: Vec<Option<usize>> = if cli.chunks.is_empty() {
        vec![None]
    } else {
        cli.chunks.iter().map(|&c| Some(usize::from(c))).collect()
    };
    let transports = if cli.transports.is_empty() {
        vec![group.transport()]
    } else {
        cli.transports.clone()
    };
    let dense = group.replicate(&dense_host)?;
    let mut records = Vec::new();
    for chunks in chunk_counts {
        let options = SplitOptions {
            chunks,
            ..SplitOptions::default()
        };
        let split = MultiCsr::upload_with(group, a, options)?;
        let mut out = split.outputs::<f32>(k)?;
        for &transport in &transports {
            group.set_transport(transport)?;
            let mut gathered = group.replicated_zeros::<f32>(a.num_rows * k)?;
            let times =
                time_iterations(&split, op, schedule, &dense, &mut out, &mut gathered, reps)?;
            // The gathered copy of the last device holds what every device received.
            let last = gathered.on(group.count() - 1).download()?;
            records.push(MultiRecord {
                matrix: m.name.clone(),
                rows: a.num_rows,
                nnz: a.nnz(),
                op: op.name(),
                schedule: schedule.to_string(),
                devices: group.count(),
                chunks: split.chunks(),
                transport: transport_name(transport).into(),
                iteration_us: times.iteration,
                compute_us: times.compute,
                exchange_us: times.exchange,
                one_device_us: one_us,
                scaling: one_us / times.iteration,
                max_rel_error: max_rel_error(a, &dense_host, k, &last),
                error: None,
            });
        }
    }
    Ok(records)
}

pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::PeerStores => "stores",
        Transport::PeerKernel => "kernel",
        Transport::PeerCopy => "peer",
        Transport::Nccl => "nccl",
    }
}

const HEADER: [&str; 10] = [
    "matrix",
    "op",
    "schedule",
    "chunks",
    "transport",
    "iteration",
    "compute",
    "exchange",
    "one",
    "scaling",
];

/// Prints `record`'s line (and appends it to the JSON lines); whether it failed.
pub(crate) fn report(
    record: &MultiRecord,
    tolerance: f64,
    json: &mut Option<&mut dyn Write>,
) -> bool {
    let bad =
        record.error.is_some() || record.max_rel_error.is_nan() || record.max_rel_error > tolerance;
    println!(
        "{:<40} {:<8} {:<16} {:>6} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2}{}",
        record.matrix,
        record.op,
        record.schedule,
        record.chunks,
        record.transport,
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
        let line = serde_json::to_string(record).expect("records serialize");
        let _ = writeln!(w, "{line}");
    }
    bad
}

fn print_header() {
    let h = HEADER;
    println!(
        "{:<40} {:<8} {:<16} {:>6} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8}",
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]
    );
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
    print_header();
    let mut failed = 0;
    for m in matrices {
        for &op in cli.ops.iter().filter(|o| !o.is_graph()) {
            for &schedule in schedules {
                let records = measure(group, one, m, op, schedule, cli).unwrap_or_else(|e| {
                    vec![MultiRecord {
                        matrix: m.name.clone(),
                        rows: m.csr.num_rows,
                        nnz: m.csr.nnz(),
                        op: op.name(),
                        schedule: schedule.to_string(),
                        devices: group.count(),
                        chunks: 0,
                        transport: transport_name(group.transport()).into(),
                        iteration_us: f64::NAN,
                        compute_us: f64::NAN,
                        exchange_us: f64::NAN,
                        one_device_us: f64::NAN,
                        scaling: f64::NAN,
                        max_rel_error: f64::NAN,
                        error: Some(e.to_string()),
                    }]
                });
                for r in &records {
                    failed += usize::from(report(r, cli.tolerance, &mut json));
                }
            }
        }
    }
    failed
}
