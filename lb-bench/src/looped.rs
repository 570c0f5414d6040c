//! `--loop N`: N back-to-back SpMV calls of one schedule on one stream, timed end to end on the
//! host (what an iterative solver sees), next to the kernel time of one call; the same N
//! calls replayed from a CUDA graph; and cuSPARSE's SpMV called N times in the same way.
//!
//! What the columns mean (µs per call):
//! - `kernel`: CUDA events around one synchronous call (includes the gaps between a plan's
//!   kernels, and the event pair's own cost).
//! - `enqueue`: host time to enqueue one call (the loop before its final synchronization):
//!   what the calls cost the CPU, whatever the GPU does meanwhile.
//! - `wall`: the whole loop, synchronization included, per call.
//! - `graph`: the same calls replayed from CUDA graphs: no host work per call, so this is the
//!   GPU's own time per call when launches are back to back.
//! - `over`: `wall − graph`, the time the host adds to a loop of calls (≤ 0 when the GPU, not
//!   the host, is the bottleneck).
//! - `lb host`: `enqueue − kernels × driver`, the host time lb adds per call beyond the driver's
//!   own launch cost (`driver`: `cuLaunchKernel` of an empty kernel with as many parameters,
//!   timed right after the row's loop).
//!
//! Every loop runs [`ROUNDS`] times; each column is its median round (`enqueue` the enqueue
//! time of the round whose wall time is the median).
//!
//! One line per (matrix, schedule) on stdout, and one JSON object per line into `--json`.

use std::io::Write;
use std::time::Instant;

use lb::prelude::*;
use serde::Serialize;

use crate::baseline::{CuCsr, Cusparse, SPMV_ALGS};
use crate::corpus::Matrix;
use crate::driver_floor;
use crate::run::spmv;

/// Launches per captured graph (replayed N / this many times).
const GRAPH_LAUNCHES: usize = 100;

/// Each loop (lb's, its graph's, cuSPARSE's, the driver's empty kernel) runs this many times and
/// reports its median round: one loop of 1000 calls varies by up to a microsecond per call
/// between runs on the H100 host of docs/benchmarks.md, as much as the host cost being measured.
const ROUNDS: usize = 5;

/// The driver's cost of enqueueing an empty kernel, µs: the median of [`ROUNDS`] loops of
/// `calls` launches (`None` on the simulator).
fn driver_us(dev: &Device, calls: usize) -> Result<Option<f64>, String> {
    let rounds = (0..ROUNDS)
        .map(|_| driver_floor::launch_us(dev, calls))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(median_by(rounds.into_iter().flatten().collect(), |&us| us))
}

/// The median of `rounds` by `key` (the upper one of an even count).
fn median_by<T: Copy>(mut rounds: Vec<T>, key: impl Fn(&T) -> f64) -> Option<T> {
    rounds.sort_by(|a, b| key(a).total_cmp(&key(b)));
    rounds.get(rounds.len() / 2).copied()
}

#[derive(Serialize)]
struct LoopRecord {
    matrix: String,
    nnz: usize,
    schedule: String,
    calls: usize,
    /// Median CUDA-event time of one synchronous call, µs (None on the simulator).
    kernel_us: Option<f64>,
    /// Host time to enqueue one call, µs.
    enqueue_us: f64,
    /// Host wall time of the loop (enqueue N calls, then synchronize once) per call, µs.
    wall_us: f64,
    /// Wall per call − graph wall per call, µs.
    overhead_us: Option<f64>,
    /// Wall per call when the calls are replayed from CUDA graphs of `GRAPH_LAUNCHES` calls.
    graph_wall_us: Option<f64>,
    /// Kernels one call launches.
    kernels: usize,
    /// Enqueue time minus `kernels` × the driver's own launch time, µs.
    lb_host_us: Option<f64>,
    /// The driver's own launch time that `lb_host_us` subtracts, timed after the row's loop, µs.
    driver_us: Option<f64>,
    error: Option<String>,
}

/// Runs the loop benchmark over `matrices`; returns how many runs failed.
pub fn run(
    dev: &Device,
    matrices: &[Matrix],
    schedules: &[Schedule],
    calls: usize,
    cusparse: Option<&Cusparse>,
    json: Option<&mut dyn Write>,
) -> usize {
    let mut failed = 0;
    let mut out = json;
    match driver_us(dev, calls) {
        Ok(Some(us)) => println!("lb-bench: the driver enqueues an empty kernel in {us:.2} µs"),
        Ok(None) => {}
        Err(e) => println!("lb-bench: timing the driver's empty launch failed: {e}"),
    }
    println!(
        "{:<28} {:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "matrix", "schedule", "kernel", "enqueue", "wall", "graph", "over", "lb host"
    );
    for m in matrices {
        let mut records = Vec::new();
        for &s in schedules {
            records.push(lb_loop(dev, m, s, calls).unwrap_or_else(|e| failure(m, s.name(), e)));
        }
        if let Some(cs) = cusparse {
            records.push(
                cusparse_loop(dev, cs, m, calls).unwrap_or_else(|e| failure(m, "cusparse", e)),
            );
        }
        for r in &records {
            failed += usize::from(r.error.is_some());
            let f = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"));
            println!(
                "{:<28} {:<22} {:>8} {:>8.2} {:>8.2} {:>8} {:>8} {:>8}{}",
                r.matrix,
                r.schedule,
                f(r.kernel_us),
                r.enqueue_us,
                r.wall_us,
                f(r.graph_wall_us),
                f(r.overhead_us),
                f(r.lb_host_us),
                r.error
                    .as_deref()
                    .map_or_else(String::new, |e| format!("  ERROR {e}"))
            );
            if let Some(w) = out.as_mut() {
                if let Ok(line) = serde_json::to_string(r) {
                    let _ = writeln!(w, "{line}");
                }
            }
        }
    }
    failed
}

fn failure(m: &Matrix, schedule: &str, e: String) -> LoopRecord {
    LoopRecord {
        matrix: m.name.clone(),
        nnz: m.csr.nnz(),
        schedule: schedule.into(),
        calls: 0,
        kernel_us: None,
        enqueue_us: f64::NAN,
        wall_us: f64::NAN,
        overhead_us: None,
        graph_wall_us: None,
        kernels: 0,
        lb_host_us: None,
        driver_us: None,
        error: Some(e),
    }
}

/// The largest error of `got` relative to each row's term magnitudes, against an f64 SpMV.
fn spmv_error(a: &Csr<f32>, x: &[f32], got: &[f32]) -> f64 {
    (0..a.num_rows)
        .map(|row| {
            let (mut exact, mut mag) = (0.0f64, 0.0f64);
            for nz in a.row(row) {
                let t = f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
                exact += t;
                mag += t.abs();
            }
            (f64::from(got[row]) - exact).abs() / mag.max(1e-30)
        })
        .fold(0.0, f64::max)
}

fn lb_loop(dev: &Device, m: &Matrix, s: Schedule, calls: usize) -> Result<LoopRecord, String> {
    let e = |e: lb::Error| e.to_string();
    let a = &m.csr;
    let x = lb::generate::random_vector(a.num_cols, 11);
    let da = DeviceCsr::upload(dev, a).map_err(e)?;
    let dx = dev.upload(&x).map_err(e)?;
    let mut dy = dev.zeros::<f32>(a.num_rows).map_err(e)?;
    let mut times = Vec::new();
    let mut kernels = 0;
    for _ in 0..5 {
        let l = spmv::launch_with(dev, s, &da, &dx, &mut dy).map_err(e)?;
        times.extend(l.elapsed_ms.map(|ms| f64::from(ms) * 1e3));
        kernels = l.kernels.len();
    }
    let err = spmv_error(a, &x, &dy.download().map_err(e)?);
    if err > 1e-4 {
        return Err(format!("wrong result: max relative error {err:.2e}"));
    }
    times.sort_by(f64::total_cmp);
    let kernel_us = times.get(times.len() / 2).copied();
    let stream = dev.stream();
    let per_call = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / calls.max(1) as f64;
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..calls {
            // SpMV's kernels test nothing, so a dropped Pending leaves no report behind; a fault
            // would still surface at the synchronization below.
            drop(spmv::launch_with_async(&stream, s, &da, &dx, &mut dy).map_err(e)?);
        }
        let enqueue_us = per_call(start);
        stream.synchronize().map_err(e)?;
        rounds.push((enqueue_us, per_call(start)));
    }
    let (enqueue_us, wall_us) = median_by(rounds, |r| r.1).ok_or("no loop ran")?;
    // The host's speed drifts over a run by as much as lb's own cost: the driver's floor is
    // timed right after the loop it is subtracted from. A timing that fails leaves the column
    // empty rather than the row.
    let driver_us = driver_us(dev, calls).ok().flatten();
    let graph_wall_us = if dev.is_gpu() {
        // CUDA's legacy default stream (the device's) cannot be captured: use a stream of its
        // own, ordered after the uploads.
        let capture = dev.new_stream().map_err(e)?;
        capture.wait_for(&stream).map_err(e)?;
        Some(graph_loop(&capture, s, &da, &dx, &mut dy, calls).map_err(e)?)
    } else {
        None
    };
    let err = spmv_error(a, &x, &dy.download().map_err(e)?);
    if err > 1e-4 {
        return Err(format!(
            "wrong result after the loop: max relative error {err:.2e}"
        ));
    }
    Ok(LoopRecord {
        matrix: m.name.clone(),
        nnz: a.nnz(),
        schedule: s.name().into(),
        calls,
        kernel_us,
        enqueue_us,
        wall_us,
        overhead_us: graph_wall_us.map(|g| wall_us - g),
        graph_wall_us,
        kernels,
        lb_host_us: driver_us.map(|d| enqueue_us - kernels as f64 * d),
        driver_us,
        error: None,
    })
}

/// Wall µs per call of `calls` launches replayed from graphs of `GRAPH_LAUNCHES` launches.
fn graph_loop(
    stream: &Stream,
    s: Schedule,
    da: &DeviceCsr<f32>,
    dx: &DeviceBuffer<f32>,
    dy: &mut DeviceBuffer<f32>,
    calls: usize,
) -> lb::Result<f64> {
    let per_graph = GRAPH_LAUNCHES.min(calls.max(1));
    // Warm: the stream's workspace and tile-set caches exist before the capture.
    spmv::launch_with_async(stream, s, da, dx, dy)?.wait()?;
    stream.begin_capture()?;
    for _ in 0..per_graph {
        drop(spmv::launch_with_async(stream, s, da, dx, dy)?);
    }
    let graph = stream.end_capture()?;
    // SAFETY: the captured launches' arguments are borrowed for this whole function, and every
    // replay is synchronized before it returns.
    unsafe { graph.launch() }?;
    stream.synchronize()?;
    let replays = calls.div_ceil(per_graph);
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..replays {
            // SAFETY: as above.
            unsafe { graph.launch() }?;
        }
        stream.synchronize()?;
        rounds.push(start.elapsed().as_secs_f64() * 1e6 / (replays * per_graph) as f64);
    }
    Ok(median_by(rounds, |&us| us).unwrap_or(f64::NAN))
}

fn cusparse_loop(
    dev: &Device,
    cs: &Cusparse,
    m: &Matrix,
    calls: usize,
) -> Result<LoopRecord, String> {
    let e = |e: lb::Error| e.to_string();
    let a = &m.csr;
    let x = lb::generate::random_vector(a.num_cols, 11);
    let ca = CuCsr::upload(dev, a)?;
    let dx = dev.upload(&x).map_err(e)?;
    let mut dy = dev.zeros::<f32>(a.num_rows).map_err(e)?;
    let mut best: Option<((f64, f64), f64)> = None;
    for (alg, _) in SPMV_ALGS {
        let kernel_ms = cs.spmv(&ca, &dx, &mut dy, alg, 5)?;
        let rounds = (0..ROUNDS)
            .map(|_| cs.spmv_loop(&ca, &dx, &mut dy, alg, calls))
            .collect::<Result<Vec<_>, _>>()?;
        let loop_ms = median_by(rounds, |r| r.1).ok_or("no loop ran")?;
        if best.is_none_or(|((_, w), _)| loop_ms.1 < w) {
            best = Some((loop_ms, kernel_ms));
        }
    }
    let err = spmv_error(a, &x, &dy.download().map_err(e)?);
    if err > 1e-4 {
        return Err(format!("wrong result: max relative error {err:.2e}"));
    }
    let ((enqueue_ms, wall_ms), kernel_ms) = best.ok_or("no cuSPARSE algorithm")?;
    let per_call = |ms: f64| ms * 1e3 / calls.max(1) as f64;
    Ok(LoopRecord {
        matrix: m.name.clone(),
        nnz: a.nnz(),
        schedule: "cusparse".into(),
        calls,
        kernel_us: Some(kernel_ms * 1e3),
        enqueue_us: per_call(enqueue_ms),
        wall_us: per_call(wall_ms),
        overhead_us: None,
        graph_wall_us: None,
        kernels: 0,
        lb_host_us: None,
        driver_us: None,
        error: None,
    })
}
