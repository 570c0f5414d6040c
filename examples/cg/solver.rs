//! The conjugate-gradient solver of `examples/cg.rs`, shared with `tests/cg.rs`: an f32 CG whose
//! every step runs on the device, an f64 CG on the host to compare with, the 3-D Poisson matrix
//! and the f64 residual that judges both.
//!
//! All four device kernels are lb kernels, so the same solver runs on a GPU and on the simulator:
//! the SpMV over the matrix, a dot product over a tile set of one row that holds every index, and
//! the two vector updates over a tile set of one index per row. The scalars α = r·r / p·q and
//! β = r'·r' / r·r never visit the host: the dot products write one-element device buffers that
//! the update kernels read, so an iteration is five launches enqueued back to back on one stream.

use lb::prelude::*;
use std::time::{Duration, Instant};

/// q = A·p, one nonzero per atom.
#[load_balanced(schedule = "auto", reduce = "sum", output = "q")]
fn spmv(a: &Csr<f32>, p: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * p[a.col_indices[nz] as usize]
}

/// `out[0] = u·v` over a tile set of one row holding every index. nonzero_split gives each thread
/// an equal share of that row and adds the shares in a fixed order without atomics, so a run is
/// repeatable and the one long row keeps the whole grid busy.
#[load_balanced(schedule = "nonzero_split", reduce = "sum", output = "out")]
fn dot(_all: &Csr<f32>, u: &[f32], v: &[f32], #[atom] i: usize) -> f32 {
    u[i] * v[i]
}

/// x += α·p and r −= α·q with α = rr / pq, over a tile set of one index per row.
#[load_balanced(schedule = "thread_mapped")]
fn step(
    _each: &Csr<f32>,
    x: &mut [f32],
    r: &mut [f32],
    p: &[f32],
    q: &[f32],
    rr: &[f32],
    pq: &[f32],
    #[atom] i: usize,
) {
    let alpha = rr[0] / pq[0];
    x[i] += alpha * p[i];
    r[i] -= alpha * q[i];
}

/// p = r + β·p with β = rr_new / rr.
#[load_balanced(schedule = "thread_mapped")]
fn direction(
    _each: &Csr<f32>,
    p: &mut [f32],
    r: &[f32],
    rr_new: &[f32],
    rr: &[f32],
    #[atom] i: usize,
) {
    p[i] = r[i] + rr_new[0] / rr[0] * p[i];
}

/// The schedules the SpMV was generated for.
pub const SPMV_SCHEDULES: &[Schedule] = spmv::SCHEDULES;

/// The SpMV schedule called `name` ("auto": the launcher's heuristic picks per call), or a
/// message listing the names there are.
pub fn spmv_schedule(name: &str) -> Result<Option<Schedule>, String> {
    if name == "auto" {
        return Ok(None);
    }
    SPMV_SCHEDULES
        .iter()
        .find(|s| s.name() == name)
        .map(|&s| Some(s))
        .ok_or_else(|| {
            let names: Vec<_> = SPMV_SCHEDULES.iter().map(|s| s.name()).collect();
            format!(
                "unknown schedule `{name}`; one of: auto, {}",
                names.join(", ")
            )
        })
}

/// The 7-point Laplacian of an n × n × n grid with zero boundary values: 6 on the diagonal, −1
/// for each neighbour inside the grid. Symmetric positive definite.
pub fn poisson3d(n: usize) -> lb::Result<Csr<f32>> {
    let unknowns = n * n * n;
    let mut row_offsets = Vec::with_capacity(unknowns + 1);
    let mut col_indices = Vec::with_capacity(7 * unknowns);
    let mut values = Vec::with_capacity(7 * unknowns);
    row_offsets.push(0);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let me = (z * n + y) * n + x;
                // Ascending column order: −z, −y, −x, self, +x, +y, +z.
                let neighbours = [
                    (z > 0, me.wrapping_sub(n * n)),
                    (y > 0, me.wrapping_sub(n)),
                    (x > 0, me.wrapping_sub(1)),
                    (true, me),
                    (x + 1 < n, me + 1),
                    (y + 1 < n, me + n),
                    (z + 1 < n, me + n * n),
                ];
                for (inside, col) in neighbours {
                    if inside {
                        col_indices.push(col as u32);
                        values.push(if col == me { 6.0 } else { -1.0 });
                    }
                }
                row_offsets.push(col_indices.len());
            }
        }
    }
    Csr::new(unknowns, unknowns, row_offsets, col_indices, values)
}

/// CG needs A·x and b in one space: a matrix that is not square is refused with its shape.
pub fn check_square(a: &Csr<f32>) -> lb::Result<()> {
    if a.num_rows == a.num_cols {
        Ok(())
    } else {
        Err(lb::Error::InvalidMatrix(format!(
            "conjugate gradient needs a square matrix, this one is {} × {}",
            a.num_rows, a.num_cols
        )))
    }
}

/// ‖b − A·x‖ / ‖b‖ in f64 (0 when b is 0 and so is the residual).
pub fn relative_residual(a: &Csr<f32>, b: &[f32], x: &[f64]) -> f64 {
    let (mut rr, mut bb) = (0.0f64, 0.0f64);
    for (row, &bi) in b.iter().enumerate() {
        let ax: f64 = a
            .row(row)
            .map(|nz| f64::from(a.values[nz]) * x[a.col_indices[nz] as usize])
            .sum();
        rr += (f64::from(bi) - ax).powi(2);
        bb += f64::from(bi).powi(2);
    }
    if bb == 0.0 {
        rr.sqrt()
    } else {
        (rr / bb).sqrt()
    }
}

/// When to stop and which SpMV schedule to run.
pub struct Options {
    pub max_iters: usize,
    /// Stop when the recurrence's ‖r‖ / ‖b‖ is at most this.
    pub tol: f64,
    /// Read the residual back every this many iterations (the only host synchronization).
    pub check_every: usize,
    /// None: the launcher's heuristic.
    pub schedule: Option<Schedule>,
    /// Replay the iterations from a CUDA graph of two iterations (so a check comes after an even
    /// number of them) instead of launching each kernel.
    pub graph: bool,
}

/// What a solve gives back.
pub struct Solve {
    pub x: Vec<f64>,
    pub iterations: usize,
    pub converged: bool,
    /// The recurrence's ‖r‖ / ‖b‖ at the end (what the convergence test saw).
    pub estimate: f64,
    /// Host wall time of the iterations (the device solve: enqueueing, running, the checks).
    pub wall: Duration,
}

/// CG in f64 on the host, testing convergence at every iteration.
pub fn cpu_cg(a: &Csr<f32>, b: &[f32], tol: f64, max_iters: usize) -> Solve {
    let start = Instant::now();
    let n = a.num_rows;
    let spmv = |p: &[f64], q: &mut [f64]| {
        for (row, qi) in q.iter_mut().enumerate() {
            *qi = a
                .row(row)
                .map(|nz| f64::from(a.values[nz]) * p[a.col_indices[nz] as usize])
                .sum();
        }
    };
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    let mut x = vec![0.0f64; n];
    let mut r: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
    let mut p = r.clone();
    let mut q = vec![0.0f64; n];
    let b_norm = dot(&r, &r).sqrt();
    let mut rr = dot(&r, &r);
    let mut iterations = 0;
    let estimate = |rr: f64| {
        if b_norm == 0.0 {
            0.0
        } else {
            rr.sqrt() / b_norm
        }
    };
    while iterations < max_iters && estimate(rr) > tol {
        spmv(&p, &mut q);
        let alpha = rr / dot(&p, &q);
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let rr_new = dot(&r, &r);
        for i in 0..n {
            p[i] = r[i] + rr_new / rr * p[i];
        }
        rr = rr_new;
        iterations += 1;
    }
    Solve {
        x,
        iterations,
        converged: estimate(rr) <= tol,
        estimate: estimate(rr),
        wall: start.elapsed(),
    }
}

/// The device's vectors of one solve.
struct State {
    x: DeviceBuffer<f32>,
    r: DeviceBuffer<f32>,
    p: DeviceBuffer<f32>,
    q: DeviceBuffer<f32>,
    rr: DeviceBuffer<f32>,
    rr_new: DeviceBuffer<f32>,
    pq: DeviceBuffer<f32>,
}

impl State {
    /// x = 0, r = p = b.
    fn new(dev: &Device, b: &[f32]) -> lb::Result<State> {
        Ok(State {
            x: dev.zeros(b.len())?,
            r: dev.upload(b)?,
            p: dev.upload(b)?,
            q: dev.zeros(b.len())?,
            rr: dev.zeros(1)?,
            rr_new: dev.zeros(1)?,
            pq: dev.zeros(1)?,
        })
    }
}

/// q = A·p enqueued on the stream it is given, without waiting: lb's SpMV in [`device_cg`], or
/// any other (another library's) through [`device_cg_with`].
pub type SpmvFn<'a> =
    dyn FnMut(&Stream, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>) -> lb::Result<()> + 'a;

/// The two index tile sets on the device.
struct Operands {
    /// One row per index: the vector updates.
    each: DeviceCsr<f32>,
    /// One row of every index: the dot products.
    all: DeviceCsr<f32>,
}

/// A tile set of `rows` rows whose row i holds the atoms `i * per_row .. (i + 1) * per_row`;
/// only its shape matters (the kernels index vectors by atom), the values are never read.
fn index_set(rows: usize, per_row: usize) -> lb::Result<Csr<f32>> {
    let atoms = rows * per_row;
    Csr::new(
        rows,
        atoms,
        (0..=rows).map(|r| r * per_row).collect(),
        (0..atoms as u32).collect(),
        vec![0.0; atoms],
    )
}

/// Enqueues one CG iteration on `stream`, waiting for nothing: the `Pending`s are dropped, so any
/// report they carry surfaces at the next synchronization (the residual's download).
fn iterate(
    stream: &Stream,
    ops: &Operands,
    s: &mut State,
    spmv: &mut SpmvFn<'_>,
) -> lb::Result<()> {
    spmv(stream, &s.p, &mut s.q)?;
    drop(dot::launch_async(stream, &ops.all, &s.p, &s.q, &mut s.pq)?);
    drop(step::launch_async(
        stream, &ops.each, &mut s.x, &mut s.r, &s.p, &s.q, &s.rr, &s.pq,
    )?);
    drop(dot::launch_async(
        stream,
        &ops.all,
        &s.r,
        &s.r,
        &mut s.rr_new,
    )?);
    drop(direction::launch_async(
        stream, &ops.each, &mut s.p, &s.r, &s.rr_new, &s.rr,
    )?);
    // The new r·r becomes the current one: a swap of handles, nothing on the device.
    std::mem::swap(&mut s.rr, &mut s.rr_new);
    Ok(())
}

/// CG in f32 on `dev`, every step on the device's stream; the host reads r·r back every
/// `check_every` iterations and nothing else until the end. The SpMV is lb's, with
/// `opts.schedule`.
pub fn device_cg(dev: &Device, a: &Csr<f32>, b: &[f32], opts: &Options) -> lb::Result<Solve> {
    check_square(a)?;
    let da = DeviceCsr::upload(dev, a)?;
    let schedule = opts.schedule;
    device_cg_with(dev, a, b, opts, &mut |stream, p, q| {
        drop(match schedule {
            Some(sched) => spmv::launch_with_async(stream, sched, &da, p, q)?,
            None => spmv::launch_async(stream, &da, p, q)?,
        });
        Ok(())
    })
}

/// [`device_cg`] with the SpMV `spmv` (`opts.schedule` is not used): the same iterations, so
/// two SpMVs can be compared inside one solver.
pub fn device_cg_with(
    dev: &Device,
    a: &Csr<f32>,
    b: &[f32],
    opts: &Options,
    spmv: &mut SpmvFn<'_>,
) -> lb::Result<Solve> {
    check_square(a)?;
    if a.num_rows != b.len() {
        return Err(lb::Error::Shape(format!(
            "right-hand side has {} entries, the matrix {} rows",
            b.len(),
            a.num_rows
        )));
    }
    let b_norm = b.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
    if b_norm == 0.0 {
        return Ok(Solve {
            x: vec![0.0; b.len()],
            iterations: 0,
            converged: true,
            estimate: 0.0,
            wall: Duration::ZERO,
        });
    }
    let ops = Operands {
        each: DeviceCsr::upload(dev, &index_set(b.len(), 1)?)?,
        all: DeviceCsr::upload(dev, &index_set(1, b.len())?)?,
    };
    // CUDA's legacy default stream (the device's) cannot be captured: a graph runs on a stream
    // of its own, ordered after the uploads.
    let stream = if opts.graph {
        let own = dev.new_stream()?;
        own.wait_for(&dev.stream())?;
        own
    } else {
        dev.stream()
    };
    // One iteration on throwaway vectors first: loading the modules and allocating the workspace
    // and tile-set caches happen once, outside the timed loop (and outside a capture, which
    // cannot allocate).
    let mut warm = State::new(dev, b)?;
    stream.wait_for(&dev.stream())?;
    iterate(&stream, &ops, &mut warm, spmv)?;
    stream.synchronize()?;
    drop(warm);

    let mut s = State::new(dev, b)?;
    stream.wait_for(&dev.stream())?;
    let start = Instant::now();
    drop(dot::launch_async(&stream, &ops.all, &s.r, &s.r, &mut s.rr)?);
    // Two iterations per graph: the second swaps r·r's buffers back, so every replay reads and
    // writes the addresses the capture saw.
    let graph = if opts.graph {
        stream.begin_capture()?;
        for _ in 0..2 {
            iterate(&stream, &ops, &mut s, spmv)?;
        }
        Some(stream.end_capture()?)
    } else {
        None
    };
    let (mut iterations, mut estimate) = (0, 1.0);
    while iterations < opts.max_iters {
        let batch = opts.check_every.min(opts.max_iters - iterations);
        match &graph {
            Some(g) => {
                for _ in 0..batch.div_ceil(2) {
                    // SAFETY: the captured launches' arguments (the tile sets in `ops`, the
                    // vectors in `s`, what `spmv` holds) live until this function returns, after
                    // the download of x below has synchronized the last replay.
                    unsafe { g.launch() }?;
                }
                iterations += 2 * batch.div_ceil(2);
            }
            None => {
                for _ in 0..batch {
                    iterate(&stream, &ops, &mut s, spmv)?;
                }
                iterations += batch;
            }
        }
        // The download waits for the device's stream, which every launch and replay orders
        // after itself: the iteration's only synchronization.
        let rr = s.rr.download()?[0];
        estimate = f64::from(rr).sqrt() / b_norm;
        if !estimate.is_finite() {
            return Err(lb::Error::InvalidMatrix(format!(
                "CG broke down after {iterations} iterations (r·r = {rr}): \
                 is the matrix symmetric positive definite?"
            )));
        }
        if estimate <= opts.tol {
            break;
        }
    }
    let wall = start.elapsed();
    Ok(Solve {
        x: s.x.download()?.into_iter().map(f64::from).collect(),
        iterations,
        converged: estimate <= opts.tol,
        estimate,
        wall,
    })
}
