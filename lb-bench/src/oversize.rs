//! `--devices N --oversize F`: SpMV with the all-gather of its result on a matrix `F` times larger
//! than the first GPU's memory, which only a group of GPUs can hold: generated on every core of
//! the host, split across the group, timed like the corpus, and verified row by row in f64.

use std::io::Write;
use std::thread;

use lb::multi::{Devices, MultiCsr};
use lb::prelude::*;

use crate::multi::{report, time_iterations, MultiRecord};
use crate::{Cli, Op};

/// Nonzeros per row of the generated matrix.
const PER_ROW: usize = 16;

/// SplitMix64's finalizer: a stateless hash, so every thread draws its own rows' entries.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A value in [-1, 1) from a hash's top 24 bits.
fn unit(h: u64) -> f32 {
    (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

fn threads() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// A square `rows × rows` matrix with `PER_ROW` entries per row, one in each of `PER_ROW`
/// equal column bands at a hashed position (sorted, distinct, spread over all of `x`), and
/// hashed values; filled by every core.
fn generate(rows: usize) -> Csr<f32> {
    let stride = (rows / PER_ROW).max(1) as u64;
    let nnz = rows * PER_ROW;
    let mut col_indices = vec![0u32; nnz];
    let mut values = vec![0f32; nnz];
    let rows_per = rows.div_ceil(threads()).max(1);
    thread::scope(|s| {
        for (t, (cols, vals)) in col_indices
            .chunks_mut(rows_per * PER_ROW)
            .zip(values.chunks_mut(rows_per * PER_ROW))
            .enumerate()
        {
            s.spawn(move || {
                let first = (t * rows_per * PER_ROW) as u64;
                for (i, (c, v)) in cols.iter_mut().zip(vals.iter_mut()).enumerate() {
                    let at = first + i as u64;
                    let h = mix(at);
                    let band = at % PER_ROW as u64;
                    *c = (band * stride + h % stride).min(rows as u64 - 1) as u32;
                    *v = unit(h);
                }
            });
        }
    });
    Csr {
        num_rows: rows,
        num_cols: rows,
        row_offsets: (0..=rows).map(|r| r * PER_ROW).collect(),
        col_indices,
        values,
    }
}

/// The largest error of `got` relative to the magnitude of each row's terms, in f64, on every
/// core.
fn max_rel_error(a: &Csr<f32>, x: &[f32], got: &[f32]) -> f64 {
    let rows_per = a.num_rows.div_ceil(threads()).max(1);
    thread::scope(|s| {
        let workers: Vec<_> = (0..a.num_rows)
            .step_by(rows_per)
            .map(|start| {
                s.spawn(move || {
                    let mut worst = 0.0f64;
                    let end = (start + rows_per).min(a.num_rows);
                    for (row, &y) in got.iter().enumerate().take(end).skip(start) {
                        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
                        for nz in a.row(row) {
                            let t =
                                f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
                            exact += t;
                            magnitude += t.abs();
                        }
                        let err = (f64::from(y) - exact).abs() / magnitude.max(1e-30);
                        worst = worst.max(err);
                    }
                    worst
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a verification thread"))
            .fold(0.0, f64::max)
    })
}

/// Runs the oversize SpMV on `group` (GPUs only); how many runs failed (0 or 1).
pub fn run(group: &Devices, factor: f64, cli: &Cli, mut json: Option<&mut dyn Write>) -> usize {
    match measure(group, factor, cli) {
        Ok(record) => usize::from(report(&record, cli.tolerance, &mut json)),
        Err(e) => {
            eprintln!(
                "lb-bench: the oversize matrix on {} devices: {e}",
                group.count()
            );
            1
        }
    }
}

fn measure(group: &Devices, factor: f64, cli: &Cli) -> Result<MultiRecord, String> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("GPU 0: {e}"))?;
    let memory = ctx
        .total_mem()
        .map_err(|e| format!("GPU 0's memory: {e}"))?;
    // Column index and value per nonzero, one offset per row.
    let bytes_per_row = PER_ROW * 8 + 8;
    let rows = (memory as f64 * factor / bytes_per_row as f64) as usize;
    let started = std::time::Instant::now();
    let a = generate(rows);
    let x: Vec<f32> = (0..rows as u64).map(|i| unit(mix(!i))).collect();
    let matrix_bytes = a.nnz() * 8 + (rows + 1) * 8;
    eprintln!(
        "lb-bench: oversize matrix {rows} rows, {} nonzeros, {:.1} GB against {:.1} GB on one GPU \
         (made in {:.1} s)",
        a.nnz(),
        matrix_bytes as f64 / 1e9,
        memory as f64 / 1e9,
        started.elapsed().as_secs_f64()
    );
    let err = |e: lb::Error| e.to_string();
    let split = MultiCsr::upload(group, &a).map_err(err)?;
    let dense = group.replicate(&x).map_err(err)?;
    let mut out = split.outputs::<f32>(1).map_err(err)?;
    let mut gathered = group.replicated_zeros::<f32>(rows).map_err(err)?;
    let times = time_iterations(
        &split,
        Op::Spmv,
        Schedule::MergePath,
        &dense,
        &mut out,
        &mut gathered,
        (1, cli.reps.clamp(1, 5)),
    )
    .map_err(err)?;
    let last = gathered.on(group.count() - 1).download().map_err(err)?;
    Ok(MultiRecord {
        matrix: format!("oversize-{:.0}GB", matrix_bytes as f64 / 1e9),
        rows,
        nnz: a.nnz(),
        op: Op::Spmv.name(),
        schedule: Schedule::MergePath.to_string(),
        devices: group.count(),
        chunks: split.chunks(),
        transport: crate::multi::transport_name(group.transport()).into(),
        local_first: false,
        row_weight: 1,
        part_rows: Vec::new(),
        part_atoms: Vec::new(),
        iteration_us: times.iteration,
        compute_us: times.compute,
        exchange_us: times.exchange,
        launch_host_us: times.launch_host,
        exchange_host_us: times.exchange_host,
        loop_us: times.looped,
        one_loop_us: f64::NAN,
        loop_scaling: f64::NAN,
        iterate_us: times.iterate,
        iterate_scaling: f64::NAN,
        part_us: times.parts.clone(),
        iterate_part_us: times.iterate_parts.clone(),
        iterate_host_us: times.iterate_host,
        alone_part_us: times.alone_parts.clone(),
        on_one_part_us: Vec::new(),
        x_buffer_us: Vec::new(),
        one_kernel_us: f64::NAN,
        one_device_us: f64::NAN,
        scaling: f64::NAN,
        max_rel_error: max_rel_error(&a, &x, &last),
        error: None,
    })
}
