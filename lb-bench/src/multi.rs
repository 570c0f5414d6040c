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
//! - `launch-host`: of `iteration`, the host's time inside the parts' launch calls (enqueuing
//!   the kernels), summed over the parts;
//! - `exch-host`: of `exchange`, the host's time to enqueue the all-gather (the rest is the wait
//!   for the devices): where it is most of `exchange`, the host's driver calls, not the links,
//!   bound the exchange;
//! - `one`: the same kernel on the whole matrix on the group's first device (no exchange: one
//!   device needs none);
//! - `scaling`: `one / iteration`;
//! - `loop`: an iterative method's time per iteration: `--reps` iterations enqueued back to
//!   back (`MultiCsr::launch_and_gather_async`, each one's gathered result the next one's
//!   input), waited for once, divided by their count; `one-loop` the same on the group's first
//!   device alone (the kernels only, which need no gather there), and `loop-scaling` their
//!   ratio;
//! - `chunks`, `transport`: how each device's share was launched (`--chunks`) and how the
//!   all-gather travelled (`--transport`); one line per combination;
//! - `iterate`: `--reps` iterations in one `MultiCsr::iterate_async` (its steps pipelined: a
//!   device's next step waits only for the rows copied to it), and `iter-scaling` against
//!   `one-loop`; on a square matrix on several devices (NaN otherwise);
//! - under the line: `parts' rows/atoms`, each part's rows and atoms; `part kernels`, each
//!   part's kernel time in `compute` (CUDA events, median), in part order (device by device,
//!   each device's chunks in order): how even the split is; `iterate's kernels`, each launch's
//!   kernel time within a step of `iterate` (the products over own columns first, where there
//!   are any): against `iterate`, what a step adds to its slowest kernel; `iterate's host`, the
//!   host's time per step to enqueue `iterate` (near `iterate`, the host bounds it); `parts
//!   alone`, each part's kernel launched with the other devices idle; `parts on one GPU`, each
//!   part's rows as a matrix of their own on the first device alone; `whole on one GPU`, the
//!   whole matrix's kernel there (what the parts add up against); with `--x-buffers N`, `x
//!   buffers`, that kernel with its input in each of N buffers of the same values, two passes;
//! - `rw`: how many atoms a row's end weighed in the split (`--row-weight`);
//! - `own`: `yes` where the split has column halves (`--local-first on`): in `iterate`, each
//!   device's products over its own columns ran first, while the others' rows of the input
//!   were copied in (the other columns launch whole parts, as without).
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
    /// Whether the split has column halves and `loop` ran them own columns first.
    pub(crate) local_first: bool,
    /// How many atoms a row's end weighed in the split (`--row-weight`).
    pub(crate) row_weight: usize,
    /// Each part's rows and atoms, in part order.
    pub(crate) part_rows: Vec<usize>,
    pub(crate) part_atoms: Vec<usize>,
    pub(crate) iteration_us: f64,
    pub(crate) compute_us: f64,
    pub(crate) exchange_us: f64,
    /// Host µs inside the parts' launch calls of `iteration`.
    pub(crate) launch_host_us: f64,
    /// Host µs to enqueue the all-gather of `exchange`.
    pub(crate) exchange_host_us: f64,
    /// µs per iteration of back-to-back iterations, on the group and on its first device.
    pub(crate) loop_us: f64,
    pub(crate) one_loop_us: f64,
    pub(crate) loop_scaling: f64,
    /// µs per iteration of `--reps` iterations in one `MultiCsr::iterate_async`, and
    /// `one_loop_us` over it.
    pub(crate) iterate_us: f64,
    pub(crate) iterate_scaling: f64,
    /// Each part's kernel µs in `compute` (median), in part order.
    pub(crate) part_us: Vec<f64>,
    /// Each launch's kernel µs within a step of `iterate` (median over the steps), in the
    /// order a step enqueues them (the products over own columns first, where there are any).
    pub(crate) iterate_part_us: Vec<f64>,
    /// Host µs per step inside `iterate`'s call (enqueuing it, before the wait): where it is
    /// near `iterate`, the host's driver calls bound the iteration, not the devices.
    pub(crate) iterate_host_us: f64,
    /// Each part's kernel µs launched alone, the other devices idle (median), in part order.
    pub(crate) alone_part_us: Vec<f64>,
    /// Each part's rows and atoms as a matrix of their own on the group's first device alone
    /// (uploaded like the whole matrix of `one`), kernel µs (median), in part order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) on_one_part_us: Vec<f64>,
    /// With `--x-buffers N`: the whole matrix's kernel µs on the group's first device with the
    /// dense input in each of N buffers of the same values (median of `--reps` back-to-back
    /// launches), two passes in opposite order, as `[buffer][pass]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) x_buffer_us: Vec<[f64; 2]>,
    /// The whole matrix's kernel µs on the group's first device alone (CUDA events, median of
    /// `one`'s synchronous launches): what the parts' kernels add up against.
    pub(crate) one_kernel_us: f64,
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
    pub(crate) launch_host: f64,
    pub(crate) exchange_host: f64,
    pub(crate) looped: f64,
    pub(crate) iterate: f64,
    pub(crate) parts: Vec<f64>,
    pub(crate) iterate_parts: Vec<f64>,
    pub(crate) iterate_host: f64,
    pub(crate) alone_parts: Vec<f64>,
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

/// Writes `values` into every device's copy of `x`, outside the timed regions. Each timed loop
/// iterates `x ← A·x` from the random input: started from zeros it would stay zeros, and a GPU
/// can run faster on zeros than on real data (fewer bits toggle). The values grow with the
/// iterations, so each timed block starts again from the input.
fn fill(x: &mut Replicated<f32>, devices: usize, values: &[f32]) -> lb::Result<()> {
    for d in 0..devices {
        x.on_mut(d).upload_into(values)?;
    }
    Ok(())
}

/// µs per iteration of `reps` iterations in one [`MultiCsr::iterate_async`], after `warmup` in
/// another, each started from `initial`: each device's products over its own columns first,
/// where the split has column halves. Then the same iterations again with CUDA events around
/// each launch: the median kernel µs of each launch of a step, in the order a step enqueues
/// them (empty on simulators). Leaves the last result in `x`.
fn time_iterate(
    split: &MultiCsr<f32>,
    op: Op,
    schedule: Schedule,
    (x, out, initial): (&mut Replicated<f32>, &mut RowParts<f32>, &[f32]),
    (warmup, reps): (usize, usize),
) -> lb::Result<(f64, f64, Vec<f64>)> {
    let reduction = spmv::REDUCTION.expect("spmv reduces");
    let devices = split.devices().count();
    let mut spare = split.devices().replicated_zeros::<f32>(x.len())?;
    let run =
        |p: &lb::multi::CsrPart<f32>, s: &Stream, x: &DeviceBuffer<f32>, o: &mut _| match op.k() {
            None => spmv::launch_with_async(s, schedule, p.tiles(), x, o),
            Some(k) => spmm::launch_with_async(s, schedule, p.tiles(), x, k, o),
        };
    fill(x, devices, initial)?;
    drop(split.iterate_async(reduction, warmup.max(1), x, &mut spare, out, run)?);
    split.devices().synchronize()?;
    fill(x, devices, initial)?;
    split.devices().synchronize()?;
    let start = Instant::now();
    drop(split.iterate_async(reduction, reps.max(1), x, &mut spare, out, run)?);
    let host = micros(start) / reps.max(1) as f64;
    split.devices().synchronize()?;
    let per_iteration = micros(start) / reps.max(1) as f64;
    fill(x, devices, initial)?;
    set_timing(split, true);
    let timed = split
        .iterate_async(reduction, reps.max(1), x, &mut spare, out, run)
        .and_then(|p| p.wait());
    set_timing(split, false);
    let kernels: Vec<f64> = timed?
        .parts
        .iter()
        .map(|l| l.elapsed_ms.map_or(f64::NAN, |t| f64::from(t) * 1e3))
        .collect();
    let per_step = kernels.len() / reps.max(1);
    let launches = (0..per_step)
        .map(|i| median(kernels.iter().skip(i).step_by(per_step).copied().collect()))
        .filter(|t| !t.is_nan())
        .collect();
    Ok((per_iteration, host, launches))
}

/// CUDA events around every launch on the devices' streams of `split` (`on`), or none.
fn set_timing(split: &MultiCsr<f32>, on: bool) {
    for d in split.devices().devices() {
        d.stream().set_timing(on);
    }
}

/// Each part of `split` (the rows and atoms of `a` it holds) uploaded as a matrix of its own on
/// `one` and timed there as [`time_parts_alone`] does: whether a part is slower than its share
/// of the whole because of its rows, or because of how the group holds it.
fn time_parts_on_one(
    one: &Devices,
    a: &Csr<f32>,
    split: &MultiCsr<f32>,
    (op, schedule): (Op, Schedule),
    dense_host: &[f32],
    reps: usize,
) -> lb::Result<Vec<f64>> {
    let dense = one.replicate(dense_host)?;
    let mut times = Vec::new();
    for p in split.parts() {
        let (rows, atoms) = (p.rows(), p.atoms());
        let row_offsets = (rows.start..=rows.end)
            .map(|r| a.row_offsets[r].clamp(atoms.start, atoms.end) - atoms.start)
            .collect();
        let sub = Csr::new(
            rows.len(),
            a.num_cols,
            row_offsets,
            a.col_indices[atoms.clone()].to_vec(),
            a.values[atoms].to_vec(),
        )?;
        let whole = MultiCsr::upload(one, &sub)?;
        let alone = time_parts_alone(&whole, op, schedule, &dense, reps)?;
        times.extend(alone);
    }
    Ok(times)
}

/// The median kernel µs (CUDA events; the stream's timing must be on) of `reps` synchronous
/// `launch`es after one more that warms the caches.
fn kernel_us(mut launch: impl FnMut() -> lb::Result<Pending>, reps: usize) -> lb::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..reps.max(1) + 1 {
        let launched = launch()?.wait()?;
        times.push(launched.elapsed_ms.map_or(f64::NAN, |t| f64::from(t) * 1e3));
    }
    Ok(median(times.split_off(1)))
}

/// The kernel on the whole of `a` on `one`, `reps` launches back to back (CUDA events, median)
/// with the dense input in each of `n` buffers of the same values, in two passes of opposite
/// order (drift shows as a difference between the passes, placement between the buffers).
fn time_x_buffers(
    one: &Devices,
    a: &Csr<f32>,
    (op, schedule): (Op, Schedule),
    dense_host: &[f32],
    (n, reps): (usize, usize),
) -> lb::Result<Vec<[f64; 2]>> {
    let k = op.k().unwrap_or(1);
    let whole = MultiCsr::upload(one, a)?;
    let part = &whole.parts()[0];
    let stream = part.device().stream();
    let mut out = part.device().zeros::<f32>(a.num_rows * k)?;
    let xs = (0..n)
        .map(|_| one.replicate(dense_host))
        .collect::<lb::Result<Vec<_>>>()?;
    let mut times = vec![[f64::NAN; 2]; n];
    set_timing(&whole, true);
    let orders: [Vec<usize>; 2] = [(0..n).collect(), (0..n).rev().collect()];
    for (pass, order) in orders.iter().enumerate() {
        for &b in order {
            times[b][pass] = kernel_us(
                || launch_part(op, schedule, part, &stream, &xs[b], &mut out),
                reps,
            )?;
        }
    }
    set_timing(&whole, false);
    Ok(times)
}

/// Each part's kernel µs (median of `reps`) launched alone on its device, the others idle:
/// against the parts' times when all run at once, what running together costs each part.
fn time_parts_alone(
    split: &MultiCsr<f32>,
    op: Op,
    schedule: Schedule,
    dense: &Replicated<f32>,
    reps: usize,
) -> lb::Result<Vec<f64>> {
    let k = op.k().unwrap_or(1);
    set_timing(split, true);
    let mut alone = Vec::new();
    for p in split.parts() {
        let stream = p.device().stream();
        let mut out = p.device().zeros::<f32>(p.rows().len() * k)?;
        alone.push(kernel_us(
            || launch_part(op, schedule, p, &stream, dense, &mut out),
            reps,
        )?);
    }
    set_timing(split, false);
    Ok(alone)
}

/// Times `reps` iterations (after `warmup`) of compute then exchange on `split`, and on a
/// square matrix on several devices the same in one [`MultiCsr::iterate_async`]
/// ([`time_iterate`]).
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
    let devices = split.devices().count();
    // The loops below iterate from `dense` where the matrix is square (its length is then
    // the gathered result's).
    let initial = if dense.len() == gathered.len() {
        Some(dense.on(0).download()?)
    } else {
        None
    };
    // First the iterations back to back (they leave `gathered` as whatever the last one
    // made; the synchronous iterations after them leave it as `A · dense` again).
    let (iterate, iterate_host, iterate_parts) = match &initial {
        Some(initial) if devices > 1 => time_iterate(
            split,
            op,
            schedule,
            (gathered, out, initial),
            (warmup, reps),
        )?,
        _ => (f64::NAN, f64::NAN, Vec::new()),
    };
    let alone_parts = if devices > 1 {
        time_parts_alone(split, op, schedule, dense, reps)?
    } else {
        Vec::new()
    };
    let looped = {
        let (warmup, reps) = (warmup.max(1), reps.max(1));
        let mut other = split.devices().replicated_zeros::<f32>(gathered.len())?;
        let mut start = Instant::now();
        for i in 0..warmup + reps {
            if i == 0 || i == warmup {
                split.devices().synchronize()?;
                if let Some(initial) = &initial {
                    fill(gathered, devices, initial)?;
                    fill(&mut other, devices, initial)?;
                    split.devices().synchronize()?;
                }
                start = Instant::now();
            }
            let (input, into) = if i % 2 == 0 {
                (&*gathered, &mut other)
            } else {
                (&other, &mut *gathered)
            };
            // A matrix that is not square has no iteration: every launch reads `dense`.
            let input = if input.len() == dense.len() {
                input
            } else {
                dense
            };
            let part = |p: &_, s: &_, o: &mut _| launch_part(op, schedule, p, s, input, o);
            // One device needs no gather: its next iteration would read `out` itself. Each
            // iteration's reports are read at the synchronization below.
            drop(if split.devices().count() == 1 {
                split.launch_async(reduction, out, part)?
            } else {
                split.launch_and_gather_async(reduction, out, into, part)?
            });
        }
        split.devices().synchronize()?;
        micros(start) / reps as f64
    };
    let (mut iteration, mut compute, mut exchange) = (Vec::new(), Vec::new(), Vec::new());
    let (mut launch_host, mut exchange_host) = (Vec::new(), Vec::new());
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); split.parts().len()];
    set_timing(split, true);
    for i in 0..warmup + reps {
        let mut in_launches = 0.0;
        let start = Instant::now();
        split.launch_and_gather(reduction, out, gathered, |p, s, o| {
            let called = Instant::now();
            let launched = launch_part(op, schedule, p, s, dense, o);
            in_launches += micros(called);
            launched
        })?;
        let t = micros(start);
        let start = Instant::now();
        let launched = split.launch(reduction, out, |p, s, o| {
            launch_part(op, schedule, p, s, dense, o)
        })?;
        let c = micros(start);
        if i >= warmup {
            for (q, l) in launched.parts.iter().enumerate() {
                parts[q].push(l.elapsed_ms.map_or(f64::NAN, |t| f64::from(t) * 1e3));
            }
        }
        let start = Instant::now();
        split.all_gather(out, gathered)?;
        let g = micros(start);
        split.devices().synchronize()?;
        let e = micros(start);
        if i >= warmup {
            iteration.push(t);
            compute.push(c);
            exchange.push(e);
            launch_host.push(in_launches);
            exchange_host.push(g);
        }
    }
    set_timing(split, false);
    Ok(Times {
        parts: parts.into_iter().map(median).collect(),
        iterate_parts,
        iterate_host,
        alone_parts,
        iteration: median(iteration),
        compute: median(compute),
        exchange: median(exchange),
        launch_host: median(launch_host),
        exchange_host: median(exchange_host),
        looped,
        iterate,
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
    let one_times = {
        let split = MultiCsr::upload(one, a)?;
        let dense = one.replicate(&dense_host)?;
        let mut out = split.outputs::<f32>(k)?;
        let mut gathered = one.replicated_zeros::<f32>(a.num_rows * k)?;
        time_iterations(&split, op, schedule, &dense, &mut out, &mut gathered, reps)?
    };
    let one_us = one_times.compute;
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
    let local_first = if cli.local_first.is_empty() {
        vec![false]
    } else {
        cli.local_first.clone()
    };
    let dense = group.replicate(&dense_host)?;
    let x_buffers = if cli.x_buffers > 0 {
        time_x_buffers(one, a, (op, schedule), &dense_host, (cli.x_buffers, reps.1))?
    } else {
        Vec::new()
    };
    let mut records = Vec::new();
    let weights = if cli.row_weights.is_empty() {
        vec![1]
    } else {
        cli.row_weights.clone()
    };
    for ((chunks, local_columns_first), row_weight) in chunk_counts
        .into_iter()
        .flat_map(|c| local_first.iter().map(move |&l| (c, l)))
        .flat_map(|c| weights.iter().map(move |&w| (c, w)))
    {
        let options = SplitOptions {
            chunks,
            local_columns_first,
            row_weight: Some(row_weight),
            ..SplitOptions::default()
        };
        let split = MultiCsr::upload_with(group, a, options)?;
        let mut out = split.outputs::<f32>(k)?;
        let on_one = if local_columns_first || group.count() == 1 {
            Vec::new()
        } else {
            time_parts_on_one(one, a, &split, (op, schedule), &dense_host, reps.1)?
        };
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
                local_first: split.parts().iter().any(|p| p.column_halves().is_some()),
                row_weight: row_weight.max(1),
                part_rows: split.parts().iter().map(|p| p.rows().len()).collect(),
                part_atoms: split.parts().iter().map(|p| p.atoms().len()).collect(),
                iteration_us: times.iteration,
                compute_us: times.compute,
                exchange_us: times.exchange,
                launch_host_us: times.launch_host,
                exchange_host_us: times.exchange_host,
                loop_us: times.looped,
                one_loop_us: one_times.looped,
                loop_scaling: one_times.looped / times.looped,
                iterate_us: times.iterate,
                iterate_scaling: one_times.looped / times.iterate,
                part_us: times.parts.clone(),
                iterate_part_us: times.iterate_parts.clone(),
                iterate_host_us: times.iterate_host,
                alone_part_us: times.alone_parts.clone(),
                on_one_part_us: on_one.clone(),
                x_buffer_us: x_buffers.clone(),
                one_kernel_us: one_times.parts.first().copied().unwrap_or(f64::NAN),
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

const HEADER: [&str; 19] = [
    "matrix",
    "op",
    "schedule",
    "chunks",
    "transport",
    "own",
    "rw",
    "iteration",
    "compute",
    "exchange",
    "one",
    "scaling",
    "launch-host",
    "exch-host",
    "loop",
    "one-loop",
    "loop-scaling",
    "iterate",
    "iter-scaling",
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
        "{:<40} {:<8} {:<16} {:>6} {:>9} {:>4} {:>3} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2} {:>11.1} {:>10.1} {:>9.1} {:>9.1} {:>12.2} {:>9.1} {:>12.2}{}",
        record.matrix,
        record.op,
        record.schedule,
        record.chunks,
        record.transport,
        if record.local_first { "yes" } else { "no" },
        record.row_weight,
        record.iteration_us,
        record.compute_us,
        record.exchange_us,
        record.one_device_us,
        record.scaling,
        record.launch_host_us,
        record.exchange_host_us,
        record.loop_us,
        record.one_loop_us,
        record.loop_scaling,
        record.iterate_us,
        record.iterate_scaling,
        match (&record.error, bad) {
            (Some(e), _) => format!("  error: {e}"),
            (None, true) => format!("  WRONG: error {:.2e}", record.max_rel_error),
            (None, false) => String::new(),
        }
    );
    if !record.part_rows.is_empty() {
        let sizes: Vec<String> = (record.part_rows.iter().zip(&record.part_atoms))
            .map(|(r, a)| format!("{r}/{a}"))
            .collect();
        println!("  parts' rows/atoms: {}", sizes.join(" "));
    }
    if !record.x_buffer_us.is_empty() {
        let times: Vec<String> = (record.x_buffer_us.iter())
            .map(|[a, b]| format!("{a:.1}/{b:.1}"))
            .collect();
        println!("  x buffers, µs (two passes): {}", times.join(" "));
    }
    for (what, times) in [
        ("part kernels", &record.part_us[..]),
        ("iterate's kernels", &record.iterate_part_us),
        (
            "iterate's host, per step",
            std::slice::from_ref(&record.iterate_host_us),
        ),
        ("parts alone", &record.alone_part_us),
        ("parts on one GPU", &record.on_one_part_us),
        (
            "whole on one GPU",
            std::slice::from_ref(&record.one_kernel_us),
        ),
    ] {
        if !times.is_empty() {
            let times: Vec<String> = times.iter().map(|t| format!("{t:.1}")).collect();
            println!("  {what}, µs: {}", times.join(" "));
        }
    }
    if let Some(w) = json.as_mut() {
        let line = serde_json::to_string(record).expect("records serialize");
        let _ = writeln!(w, "{line}");
    }
    bad
}

fn print_header() {
    let h = HEADER;
    println!(
        "{:<40} {:<8} {:<16} {:>6} {:>9} {:>4} {:>3} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11} {:>10} {:>9} {:>9} {:>12} {:>9} {:>12}",
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
        h[13], h[14], h[15], h[16], h[17], h[18]
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
                        local_first: false,
                        row_weight: 1,
                        part_rows: Vec::new(),
                        part_atoms: Vec::new(),
                        iteration_us: f64::NAN,
                        compute_us: f64::NAN,
                        exchange_us: f64::NAN,
                        launch_host_us: f64::NAN,
                        exchange_host_us: f64::NAN,
                        loop_us: f64::NAN,
                        one_loop_us: f64::NAN,
                        loop_scaling: f64::NAN,
                        iterate_us: f64::NAN,
                        iterate_scaling: f64::NAN,
                        part_us: Vec::new(),
                        iterate_part_us: Vec::new(),
                        iterate_host_us: f64::NAN,
                        alone_part_us: Vec::new(),
                        on_one_part_us: Vec::new(),
                        x_buffer_us: Vec::new(),
                        one_kernel_us: f64::NAN,
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
