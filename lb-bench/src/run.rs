//! The measurement loop: for each op × matrix, verify and time every schedule, `auto` and
//! cuSPARSE, and hand one record per run to the report.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use lb::multi::Devices;
use lb::prelude::*;
use lb::schedule::UserSchedule;

use crate::baseline::{CuCsr, Cusparse, Power, SPMM_ALGS, SPMV_ALGS};
use crate::corpus::{self, Family, Matrix};
use crate::gather_floor::{self, GatherFloor};
use crate::graph;
use crate::reference::{self, by_row_blocks};
use crate::report::{self, Context, Record};
use crate::variants::{self, Variant};
use crate::{Cli, Op};

/// y = A·x. The body is the work of one nonzero. Generated for every schedule, so that
/// `--schedules` can name the ones `"auto"` leaves out; a run without `--schedules` measures
/// `"auto"`'s ([`Schedule::ALL`]).
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub(crate) fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// C = A·B, B dense and row-major with k columns; one lane per column of B. Every schedule, as
/// for `spmv`.
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "k")]
pub(crate) fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// `--devices N,…`: each group (N GPUs, or N simulators without one) and its first device
/// alone.
fn run_devices(
    cli: &Cli,
    gpu: bool,
    matrices: &[Matrix],
    wanted: &[Schedule],
) -> Result<Summary, String> {
    let one = if gpu {
        Devices::cuda(&[0])
    } else {
        Devices::simulators(1)
    };
    let one = one.map_err(|e| format!("one device: {e}"))?;
    let schedules = if wanted.is_empty() {
        &[Schedule::MergePath][..]
    } else {
        wanted
    };
    let mut json = match &cli.json {
        Some(path) => Some(BufWriter::new(
            File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None => None,
    };
    let mut failed = 0;
    for &n in &cli.devices {
        let n = usize::from(n);
        let group = if gpu {
            Devices::cuda(&(0..n).collect::<Vec<_>>())
        } else {
            Devices::simulators(n)
        };
        let group = group.map_err(|e| format!("{n} devices: {e}"))?;
        eprintln!("lb-bench: {group:?}, {} matrices", matrices.len());
        if cli.ops.iter().any(|o| !o.is_graph()) {
            let out = json.as_mut().map(|w| w as &mut dyn Write);
            failed += crate::multi::run(&group, &one, matrices, cli, schedules, out);
        }
        for &op in cli.ops.iter().filter(|o| o.is_graph()) {
            if matches!(op, Op::Bfs | Op::Sssp) {
                let out = json.as_mut().map(|w| w as &mut dyn Write);
                let groups = (&group, &one);
                failed += crate::multi_graph::run(groups, op, matrices, cli, schedules, out);
            } else {
                eprintln!(
                    "lb-bench: {} does not run across devices (BFS and SSSP do)",
                    op.name()
                );
            }
        }
        if let Some(factor) = cli.oversize {
            let out = json.as_mut().map(|w| w as &mut dyn Write);
            failed += crate::oversize::run(&group, factor, cli, out);
        }
    }
    if let Some(w) = json.as_mut() {
        w.flush().map_err(|e| e.to_string())?;
    }
    Ok(Summary { failed })
}

/// C = A·B with A's values, B and C stored in `f16`: loads widen to f32, the sum is f32 and
/// each output rounds once.
#[load_balanced(schedule = "auto", reduce = "sum", output = "c", lanes = "k")]
fn hspmm(a: &Csr<f16>, b: &[f16], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f16 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// The smallest tolerance of a half-precision op: the output's own rounding (2^-11 of its
/// value) may land on the other side of a tie for a different summation order, one f16 ulp
/// (2^-10), plus the f32 accumulation; relative to the magnitudes, which bound the value.
const HALF_TOLERANCE: f64 = 1.0 / 512.0;

/// What the caller needs for the exit code.
pub struct Summary {
    pub failed: usize,
}

/// One op on one matrix, on the device.
struct Problem {
    op: Op,
    dev: Device,
    da: DeviceCsr<f32>,
    dx: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    want: Vec<f32>,
    /// Per output: the sum of the magnitudes of its terms, the scale of rounding differences.
    magnitude: Vec<f32>,
    /// Bytes that must move: offsets, indices, values, the dense input, the output.
    bytes: u64,
    /// The `f16` operands of a half-precision op, which its launches use instead of `da`, `dx`
    /// and `dy` (`da` still describes the tile set).
    half: Option<Half>,
}

/// A half-precision op's device operands.
struct Half {
    da: DeviceCsr<f16>,
    dx: DeviceBuffer<f16>,
    dy: DeviceBuffer<f16>,
}

/// A fresh upload of the matrix for `tuned`, in the op's value type.
enum Fresh {
    F32(DeviceCsr<f32>),
    F16(DeviceCsr<f16>),
}

impl Problem {
    fn new(op: Op, dev: &Device, a: &Csr<f32>, seed: u64) -> lb::Result<Problem> {
        let k = op.k().unwrap_or(1);
        let x = lb::generate::random_vector(a.num_cols * k, seed);
        let out_len = a.num_rows * k;
        let mut want = vec![0.0f32; out_len];
        let mut magnitude = vec![0.0f32; out_len];
        // A half-precision op computes on the f16 values of the same inputs, exactly widened.
        let inputs16 = op
            .is_half()
            .then(|| (a.map_values(f16::from_f32), lb::narrowed::<f16>(&x)));
        let wide = inputs16
            .as_ref()
            .map(|(a16, x16)| (a16.map_values(f16::to_f32), lb::widen(x16)));
        let (a, x) = match wide {
            Some((ref wa, wx)) => (wa, wx),
            None => (a, x),
        };
        let mut abs_a = a.clone();
        abs_a.values.iter_mut().for_each(|v| *v = v.abs());
        let abs_x: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let cores = reference::cores();
        match op.k() {
            None => {
                by_row_blocks(cores, (a, 1), &mut want, |a, y| spmv::cpu(a, &x, y));
                by_row_blocks(cores, (&abs_a, 1), &mut magnitude, |a, y| {
                    spmv::cpu(a, &abs_x, y)
                });
            }
            Some(k) if op.is_half() => {
                let (a16, x16) = inputs16.as_ref().expect("an f16 op has f16 inputs");
                let mut want16 = vec![f16::ZERO; out_len];
                by_row_blocks(cores, (a16, k), &mut want16, |a, c| {
                    hspmm::cpu(a, x16, k, c)
                });
                want = lb::widen(&want16);
                by_row_blocks(cores, (&abs_a, k), &mut magnitude, |a, c| {
                    spmm::cpu(a, &abs_x, k, c)
                });
            }
            Some(k) => {
                by_row_blocks(cores, (a, k), &mut want, |a, c| spmm::cpu(a, &x, k, c));
                by_row_blocks(cores, (&abs_a, k), &mut magnitude, |a, c| {
                    spmm::cpu(a, &abs_x, k, c)
                });
            }
        }
        let da = DeviceCsr::upload(dev, a)?;
        // The offsets at the width the device tile set stores them (4 bytes below 2^32 rows +
        // nonzeros, 8 above), which is what lb's kernels read; values 2 bytes for f16.
        let offset_bytes = u64::from(da.offset_width().bytes());
        let value_bytes: u64 = if op.is_half() { 2 } else { 4 };
        let bytes = (a.num_rows as u64 + 1) * offset_bytes
            + a.nnz() as u64 * (4 + value_bytes)
            + (x.len() + out_len) as u64 * value_bytes;
        let half = match &inputs16 {
            Some((a16, x16)) => Some(Half {
                da: DeviceCsr::upload(dev, a16)?,
                dx: dev.upload(x16)?,
                dy: dev.zeros::<f16>(out_len)?,
            }),
            None => None,
        };
        Ok(Problem {
            op,
            dev: dev.clone(),
            da,
            dx: dev.upload(&x)?,
            dy: dev.zeros::<f32>(out_len)?,
            want,
            magnitude,
            bytes,
            half,
        })
    }

    /// The largest error that passes: `--tolerance`, at least one f16 rounding for `f16` ops.
    fn tolerance(&self, cli: &Cli) -> f64 {
        if self.op.is_half() {
            cli.tolerance.max(HALF_TOLERANCE)
        } else {
            cli.tolerance
        }
    }

    /// The matrix uploaded again, in the op's value type.
    fn fresh(&self, a: &Csr<f32>) -> lb::Result<Fresh> {
        Ok(match self.half {
            Some(_) => Fresh::F16(DeviceCsr::upload(&self.dev, &a.map_values(f16::from_f32))?),
            None => Fresh::F32(DeviceCsr::upload(&self.dev, a)?),
        })
    }

    fn schedules(&self) -> &'static [Schedule] {
        match self.op.k() {
            None => spmv::SCHEDULES,
            Some(_) if self.op.is_half() => hspmm::SCHEDULES,
            Some(_) => spmm::SCHEDULES,
        }
    }

    /// The generated `launch` (the device's tuning picks the schedule) over the tile set `da`.
    fn launch_auto(&mut self, da: &Fresh) -> lb::Result<Launch> {
        let k = self.op.k();
        match (da, &mut self.half, k) {
            (Fresh::F16(da), Some(h), Some(k)) => hspmm::launch(&self.dev, da, &h.dx, k, &mut h.dy),
            (Fresh::F32(da), _, None) => spmv::launch(&self.dev, da, &self.dx, &mut self.dy),
            (Fresh::F32(da), _, Some(k)) => spmm::launch(&self.dev, da, &self.dx, k, &mut self.dy),
            _ => Err(lb::Error::Shape(
                "a fresh upload of another value type".into(),
            )),
        }
    }

    fn launch(&mut self, what: Subject) -> lb::Result<Launch> {
        if let (Some(h), Some(k)) = (&mut self.half, self.op.k()) {
            return match what {
                Subject::Schedule(s) => {
                    hspmm::launch_with(&self.dev, s, &h.da, &h.dx, k, &mut h.dy)
                }
                // SAFETY: as for `spmm` below: every access is proven by the host checks.
                Subject::Unchecked(s) => unsafe {
                    hspmm::launch_with_unchecked(&self.dev, s, &h.da, &h.dx, k, &mut h.dy)
                },
                Subject::User(s) => hspmm::launch_custom(&self.dev, s, &h.da, &h.dx, k, &mut h.dy),
                Subject::Variant(v) => Err(lb::Error::Shape(format!(
                    "the variant `{}` is SpMV only",
                    v.name
                ))),
            };
        }
        match (what, self.op.k()) {
            (Subject::Schedule(s), None) => {
                spmv::launch_with(&self.dev, s, &self.da, &self.dx, &mut self.dy)
            }
            (Subject::Schedule(s), Some(k)) => {
                spmm::launch_with(&self.dev, s, &self.da, &self.dx, k, &mut self.dy)
            }
            (Subject::Variant(v), _) => (v.launch)(&self.dev, &self.da, &self.dx, &mut self.dy),
            (Subject::User(s), None) => {
                spmv::launch_custom(&self.dev, s, &self.da, &self.dx, &mut self.dy)
            }
            (Subject::User(s), Some(k)) => {
                spmm::launch_custom(&self.dev, s, &self.da, &self.dx, k, &mut self.dy)
            }
            // SAFETY: every access of both bodies is proven in bounds by the host checks that
            // the unchecked launchers still make (`x` and `b` cover the columns, times `k`),
            // so their kernels are the safe ones and there is nothing left to the caller.
            (Subject::Unchecked(s), None) => unsafe {
                spmv::launch_with_unchecked(&self.dev, s, &self.da, &self.dx, &mut self.dy)
            },
            // SAFETY: as above.
            (Subject::Unchecked(s), Some(k)) => unsafe {
                spmm::launch_with_unchecked(&self.dev, s, &self.da, &self.dx, k, &mut self.dy)
            },
        }
    }

    /// Zeroes the output (so a schedule cannot pass on its predecessor's result).
    fn clear(&mut self) -> lb::Result<()> {
        match &mut self.half {
            Some(h) => h.dy = self.dev.zeros::<f16>(self.want.len())?,
            None => self.dy = self.dev.zeros::<f32>(self.want.len())?,
        }
        Ok(())
    }

    /// The largest relative error of the output against the CPU reference.
    fn error(&self) -> lb::Result<f64> {
        let got = match &self.half {
            Some(h) => lb::widen(&self.dev.download(&h.dy)?),
            None => self.dev.download(&self.dy)?,
        };
        Ok(got
            .iter()
            .zip(&self.want)
            .zip(&self.magnitude)
            .map(|((&g, &w), &m)| {
                let d = (f64::from(g) - f64::from(w)).abs();
                if d.is_nan() {
                    f64::INFINITY
                } else {
                    d / f64::from(m).max(f64::from(f32::MIN_POSITIVE))
                }
            })
            .fold(0.0, f64::max))
    }
}

/// What one run launches: a schedule of the `auto` list, a tuned variant (SpMV only), a
/// schedule through the unchecked launcher (`--unchecked`), or a schedule written outside lb
/// (`--custom`).
#[derive(Clone, Copy)]
enum Subject {
    Schedule(Schedule),
    Variant(&'static Variant),
    Unchecked(Schedule),
    User(&'static dyn UserSchedule),
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Schedule(s) => s.name().into(),
            Subject::Variant(v) => v.name.into(),
            Subject::Unchecked(s) => format!("{}{}", s.name(), variants::UNCHECKED),
            Subject::User(s) => s.name().into(),
        }
    }
}

/// The GPU-only parts, each optional: a missing library is reported once and its columns are n/a.
struct Gpu {
    copy_bytes_per_s: Option<f64>,
    cusparse: Option<Cusparse>,
    power: Option<Power>,
    gather: Option<GatherFloor>,
}

pub fn run(cli: &Cli) -> Result<Summary, String> {
    let dev = if cli.sim {
        Device::simulator()
    } else {
        Device::default()
    };
    // The `tuned` rows measure at the first launch on every tile set, simulator included; no
    // tuning file, so that every run measures afresh.
    dev.set_tuning(lb::Tuning::Tune);
    dev.set_tuning_file(None);
    let families = families(cli);
    let mut matrices: Vec<Matrix> = Vec::new();
    for path in &cli.mtx {
        let csr = lb::read_mtx::<f32>(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path.file_stem().map_or_else(
            || path.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        matrices.push(Matrix {
            name,
            family: "mtx".into(),
            csr,
        });
    }
    if !cli.no_corpus {
        matrices.extend(corpus::build(&families, cli.scale, cli.seed));
    }
    if cli.relabel {
        for m in &mut matrices {
            if m.csr.num_rows == m.csr.num_cols {
                m.csr = corpus::relabel(&m.csr, cli.seed);
                m.name.push_str("-relabelled");
            }
        }
    }
    if matrices.is_empty() && cli.oversize.is_none() {
        return Err("no matrices: give --mtx FILE or drop --no-corpus".into());
    }
    let wanted: Vec<Schedule> = cli
        .schedules
        .iter()
        .map(|n| {
            Schedule::from_name(n)
                .ok_or_else(|| format!("unknown schedule `{n}`; known: {}", names(spmv::SCHEDULES)))
        })
        .collect::<Result<_, _>>()?;

    if !cli.devices.is_empty() {
        return run_devices(cli, dev.is_gpu(), &matrices, &wanted);
    }

    let gpu = dev.is_gpu().then(|| {
        let copy = dev.measure_copy_bandwidth(cli.copy_bytes);
        let cusparse = if cli.no_cusparse {
            Err("skipped (--no-cusparse)".to_string())
        } else {
            Cusparse::new()
        };
        let power = Power::new();
        let gather = GatherFloor::new(&dev);
        for (what, err) in [
            (
                "copy bandwidth",
                copy.as_ref().err().map(ToString::to_string),
            ),
            ("cuSPARSE", cusparse.as_ref().err().cloned()),
            ("NVML", power.as_ref().err().cloned()),
            ("the gather floor", gather.as_ref().err().cloned()),
        ] {
            if let Some(e) = err {
                eprintln!("lb-bench: {what}: {e}; its columns are n/a");
            }
        }
        Gpu {
            copy_bytes_per_s: copy.ok(),
            cusparse: cusparse.ok(),
            power: power.ok(),
            gather: gather.ok().flatten(),
        }
    });
    let ctx = Context::new(
        &dev,
        gpu.as_ref()
            .and_then(|g| g.power.as_ref())
            .and_then(Power::driver_version),
    );
    let work = match (cli.cg_grid, cli.loop_calls) {
        (Some(n), _) => format!("CG on the {n}³ Poisson matrix"),
        (None, Some(calls)) => format!("{} matrices × SpMV loops of {calls}", matrices.len()),
        (None, None) => format!("{} matrices × {} ops", matrices.len(), cli.ops.len()),
    };
    eprintln!(
        "lb-bench: {} ({}), {work}",
        ctx.gpu,
        ctx.driver.as_deref().unwrap_or("driver n/a"),
    );
    if let Some(bw) = gpu.as_ref().and_then(|g| g.copy_bytes_per_s) {
        eprintln!(
            "lb-bench: device-to-device copy bandwidth {:.1} GB/s (read + write)",
            bw / 1e9
        );
    }

    let mut json = match &cli.json {
        Some(path) => Some(BufWriter::new(
            File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None => None,
    };
    if let Some(n) = cli.cg_grid {
        let schedules = if wanted.is_empty() {
            crate::cg::SCHEDULES
        } else {
            &wanted[..]
        };
        let cusparse = gpu.as_ref().and_then(|g| g.cusparse.as_ref());
        let out = json.as_mut().map(|w| w as &mut dyn Write);
        let failed = crate::cg::run(&dev, usize::from(n), schedules, cusparse, out);
        if let Some(w) = json.as_mut() {
            w.flush().map_err(|e| e.to_string())?;
        }
        return Ok(Summary { failed });
    }
    if let Some(calls) = cli.loop_calls {
        let schedules = if wanted.is_empty() {
            spmv::SCHEDULES
        } else {
            &wanted[..]
        };
        let cusparse = gpu.as_ref().and_then(|g| g.cusparse.as_ref());
        let out = json.as_mut().map(|w| w as &mut dyn Write);
        let failed = crate::looped::run(&dev, &matrices, schedules, calls, cusparse, out);
        if let Some(w) = json.as_mut() {
            w.flush().map_err(|e| e.to_string())?;
        }
        return Ok(Summary { failed });
    }
    let bar = if cli.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new((matrices.len() * cli.ops.len()) as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut records: Vec<Record> = Vec::new();
    if cli.ops.iter().any(|op| !op.is_graph()) {
        bar.suspend(|| report::print_header(dev.is_gpu()));
    }
    for &op in &cli.ops {
        if op.is_graph() {
            bar.suspend(|| report::print_graph_header(dev.is_gpu()));
        }
        for m in &matrices {
            bar.set_message(format!("{} {}", op.name(), m.name));
            let new = if !op.is_graph() {
                run_one(cli, op, m, &dev, gpu.as_ref(), &wanted, &ctx)
            } else if let Some(why) = graph::skip_reason(m, dev.is_gpu(), cli.undirected) {
                bar.suspend(|| report::print_graph_skip(op.name(), &m.name, &why));
                Vec::new()
            } else {
                graph::run_graph(cli, op, m, &dev, &wanted, &ctx)
            };
            for r in &new {
                bar.suspend(|| report::print_row(r));
                if let Some(out) = json.as_mut() {
                    let line = serde_json::to_string(r).map_err(|e| e.to_string())?;
                    writeln!(out, "{line}").map_err(|e| format!("writing JSON: {e}"))?;
                }
            }
            // Each matrix's lines reach the file before the next matrix runs: a run stopped by
            // a time limit (a large member at k = 128 takes minutes) keeps what it finished.
            if let Some(out) = json.as_mut() {
                out.flush().map_err(|e| format!("writing JSON: {e}"))?;
            }
            records.extend(new);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let summary = report::auto_summary(&records, &ctx);
    report::print_summary(&summary);
    if cli.unchecked {
        report::print_unchecked_summary(&records);
    }
    if cli.host_loop {
        report::print_host_loop_summary(&records);
    }
    if let Some(out) = json.as_mut() {
        for s in &summary {
            let line = serde_json::to_string(s).map_err(|e| e.to_string())?;
            writeln!(out, "{line}").map_err(|e| format!("writing JSON: {e}"))?;
        }
        out.flush().map_err(|e| format!("writing JSON: {e}"))?;
    }
    if let Some(dir) = &cli.plots {
        let points: Vec<report::PlotPoint> = records.iter().map(report::PlotPoint::from).collect();
        report::plots(dir, &points).map_err(|e| format!("plots in {}: {e}", dir.display()))?;
    }
    Ok(Summary {
        failed: records.iter().filter(|r| r.status != "ok").count(),
    })
}

fn names(s: &[Schedule]) -> String {
    s.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

/// Every record of one op on one matrix.
fn run_one(
    cli: &Cli,
    op: Op,
    m: &Matrix,
    dev: &Device,
    gpu: Option<&Gpu>,
    wanted: &[Schedule],
    ctx: &Context,
) -> Vec<Record> {
    let base = Record::base(ctx, op, m);
    let mut p = match Problem::new(op, dev, &m.csr, cli.seed ^ 0x5eed) {
        Ok(p) => p,
        Err(e) => return vec![base.failed(format!("setting up: {e}"))],
    };
    let schedules: Vec<Schedule> = p
        .schedules()
        .iter()
        .copied()
        .filter(|s| {
            if wanted.is_empty() {
                Schedule::ALL.contains(s)
            } else {
                wanted.contains(s)
            }
        })
        .collect();
    let mut out = Vec::new();
    for &s in &schedules {
        out.push(measure(cli, &mut p, Subject::Schedule(s), &base, gpu));
        if cli.unchecked {
            out.push(measure(cli, &mut p, Subject::Unchecked(s), &base, gpu));
        }
    }
    if cli.custom {
        for s in lb_custom_schedules::ALL {
            out.push(measure(cli, &mut p, Subject::User(s), &base, gpu));
        }
    }
    if cli.variants && op.k().is_none() {
        for v in variants::SPMV {
            out.push(measure(cli, &mut p, Subject::Variant(v), &base, gpu));
        }
    }
    // `auto`: what the generated `launch` of an `"auto"` function would pick.
    let lanes = p.op.k().unwrap_or(1) as u64;
    let picked = lb::choose_schedule(Schedule::ALL, p.da.stats(), lanes);
    let mut auto = match out.iter().find(|r| r.schedule == picked.name()) {
        Some(r) => r.clone(),
        None => measure(cli, &mut p, Subject::Schedule(picked), &base, gpu),
    };
    auto.schedule = "auto".into();
    auto.picked = Some(picked.name().into());
    out.push(auto);
    let tuned = tuned_run(cli, &mut p, &out, &base, &m.csr, gpu);
    out.push(tuned);
    if let Some(g) = gpu {
        retime_short(cli, &mut p, &mut out, g);
    }
    if let (Some(g), Some(cs)) = (gpu, gpu.and_then(|g| g.cusparse.as_ref())) {
        out.push(cusparse_run(cli, &mut p, &m.csr, cs, &base, g));
        let best_cusparse = out.last().and_then(|r| r.median_ms);
        for r in &mut out {
            if let (Some(ours), Some(theirs)) = (r.median_ms, best_cusparse) {
                if r.schedule != "cusparse" {
                    r.speedup_vs_cusparse = Some(theirs / ours);
                }
            }
        }
    }
    if let (Some(g), Some(floor)) = (gpu, gpu.and_then(|g| g.gather.as_ref())) {
        let gather = gather_run(cli, &p, &m.csr, floor, &base, g);
        if let Some(theirs) = gather.median_ms {
            for r in &mut out {
                r.gather_fraction = r.median_ms.map(|ours| theirs / ours);
            }
        }
        out.push(gather);
    }
    out
}

/// The gather floor of this op on this matrix ([`GatherFloor`]), checked by the total of its
/// partial sums against the total of the reference's outputs.
fn gather_run(
    cli: &Cli,
    p: &Problem,
    a: &Csr<f32>,
    floor: &GatherFloor,
    base: &Record,
    g: &Gpu,
) -> Record {
    let mut r = base.clone();
    r.schedule = "gather".into();
    if p.half.is_some() {
        return r.failed("the gather floor reads f32 operands only");
    }
    r.kernels = vec!["gather floor: the nonzeros in order, no rows".into()];
    let (ms, total) = match floor.time(&p.dev, a, &p.dx, p.op.k(), cli.reps.max(3)) {
        Ok(t) => t,
        Err(e) => return r.failed(e),
    };
    let (want, scale) = gather_floor::expected(&p.want, &p.magnitude);
    let err = (total - want).abs() / scale.max(f64::MIN_POSITIVE);
    if err > p.tolerance(cli) {
        return r.failed(format!(
            "wrong total: {total} against {want} (error {err:.2e} of the terms' magnitude)"
        ));
    }
    r.max_rel_err = Some(err);
    r.set_time(ms, cli.reps.max(3), p.bytes, g.copy_bytes_per_s);
    r.gather_fraction = Some(1.0);
    r
}

/// Kernels whose fastest schedule takes less than this (ms) are timed again in rounds.
const SHORT_MS: f64 = 0.1;

/// Timed runs per contender at least, whatever `--reps` says, when a problem is retimed: the
/// medians of 10 runs in rounds of the same two 9–10 µs kernels ranked them 3–5% apart in either
/// order between two runs (H100, large corpus, `tiny-100x100`), where the tuner's playoff gives
/// its close candidates 101 runs.
const SHORT_RUNS: usize = 100;

/// A schedule more than this many times slower than the fastest cannot be the fastest after
/// retiming; the tuner gives up on such a candidate at the same ratio.
const CONTENDER: f64 = 4.0;

/// What a record of `run_one` times, from its name; `None` for `auto`, `tuned` and `cusparse`.
fn subject_of(name: &str) -> Option<Subject> {
    if let Some(s) = name.strip_suffix(variants::UNCHECKED) {
        return Schedule::from_name(s).map(Subject::Unchecked);
    }
    Schedule::from_name(name)
        .map(Subject::Schedule)
        .or_else(|| {
            variants::SPMV
                .iter()
                .find(|v| v.name == name)
                .map(Subject::Variant)
        })
        .or_else(|| {
            lb_custom_schedules::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .map(Subject::User)
        })
}

/// Times the contenders of a short problem again in rounds and gives `auto` and `tuned` their
/// pick's new time. A contender is a record within [`CONTENDER`] times the fastest; in each
/// round it runs three times, the first untimed, until it has `--reps` timed runs (at least
/// [`SHORT_RUNS`], rounded up to even), and the median counts.
///
/// A kernel of a few microseconds is mostly its launch, whose time moves by 10–20% between
/// stretches of a run (the host's and the GPU's clocks): timed one schedule after the other,
/// two schedules within a few percent of each other rank by when they ran. In rounds every
/// schedule sees the same stretches. The untimed run takes the cost of the switch from another
/// schedule's kernels, which an application repeating one launch does not pay and which
/// depends on the schedule before (H100, medium `dense_rows` SpMV: `warp_mapped` 40 µs right
/// after `thread_mapped`'s 11 ms kernel, 24 µs in the tuner); the tuner times the same way
/// (docs/tuning.md).
/// `tuned`'s pick, when it is not among the schedules asked for (a search schedule), is timed in
/// the rounds under its own row.
fn retime_short(cli: &Cli, p: &mut Problem, out: &mut [Record], g: &Gpu) {
    let fastest = out
        .iter()
        .filter(|r| subject_of(&r.schedule).is_some())
        .filter_map(|r| r.median_ms)
        .fold(f64::INFINITY, f64::min);
    if fastest >= SHORT_MS {
        return;
    }
    let has_row = |out: &[Record], name: &str| out.iter().any(|r| r.schedule == name);
    let timed: Vec<(usize, Subject)> = (0..out.len())
        .filter(|&i| out[i].status == "ok")
        .filter(|&i| out[i].median_ms.is_some_and(|ms| ms < CONTENDER * fastest))
        .filter_map(|i| {
            let r = &out[i];
            let own = match r.schedule.as_str() {
                "auto" | "tuned" => r.picked.as_deref().filter(|&n| !has_row(out, n))?,
                name => name,
            };
            subject_of(own).map(|s| (i, s))
        })
        .collect();
    let before: Vec<Option<f64>> = out.iter().map(|r| r.median_ms).collect();
    let runs = 2 * cli.reps.max(SHORT_RUNS).div_ceil(2);
    let mut times = vec![Vec::with_capacity(runs); timed.len()];
    for _ in 0..runs / 2 {
        for (t, &(_, s)) in times.iter_mut().zip(&timed) {
            for timed_run in [false, true, true] {
                match p.launch(s) {
                    Ok(l) if timed_run => t.extend(l.elapsed_ms.map(f64::from)),
                    Ok(_) => {}
                    Err(e) => eprintln!("retiming {}: {e}", s.name()),
                }
            }
        }
    }
    for (mut t, &(i, _)) in times.into_iter().zip(&timed) {
        if t.len() == runs {
            t.sort_by(f64::total_cmp);
            out[i].set_time(t[runs / 2], runs, p.bytes, g.copy_bytes_per_s);
        }
    }
    let time_of = |out: &[Record], name: &str| {
        out.iter()
            .find(|r| r.schedule == name && r.status == "ok")
            .and_then(|r| r.median_ms)
    };
    for i in 0..out.len() {
        let r = &out[i];
        let pick = match (r.schedule.as_str(), &r.picked) {
            ("auto" | "tuned", Some(pick)) => pick.clone(),
            _ => continue,
        };
        let Some(ms) = time_of(out, &pick).or(out[i].median_ms) else {
            continue;
        };
        let before = before[i].unwrap_or(ms);
        let reps = out[i].reps.unwrap_or(runs);
        out[i].set_time(ms, reps.max(runs), p.bytes, g.copy_bytes_per_s);
        if let Some(tuning) = out[i].tuning_ms {
            // The first launch's wall time is what it was; one launch of the pick now costs `ms`.
            out[i].tuning_ms = Some(tuning + before - ms);
        }
    }
    let auto_ms = time_of(out, "auto");
    if let Some(r) = out.iter_mut().find(|r| r.schedule == "tuned") {
        if let (Some(ms), Some(tuning)) = (r.median_ms, r.tuning_ms) {
            r.payback_launches = auto_ms.filter(|&a| a > ms).map(|a| tuning / (a - ms));
        }
    }
}

/// `tuned`: the generated `launch` measuring every schedule at its first call, on a fresh upload
/// of the matrix (lb-bench keeps no tuning file, so every run measures): the record of the
/// schedule it picked, with the first call's extra time and the launches that pay it back
/// against the heuristic's pick.
fn tuned_run(
    cli: &Cli,
    p: &mut Problem,
    out: &[Record],
    base: &Record,
    a: &Csr<f32>,
    gpu: Option<&Gpu>,
) -> Record {
    let failed = |e: String| {
        let mut r = base.clone();
        r.schedule = "tuned".into();
        r.failed(e)
    };
    let fresh = match p.fresh(a) {
        Ok(d) => d,
        Err(e) => return failed(e.to_string()),
    };
    if let Err(e) = p.clear() {
        return failed(e.to_string());
    }
    let start = std::time::Instant::now();
    let launch = match p.launch_auto(&fresh) {
        Ok(l) => l,
        Err(e) => return failed(e.to_string()),
    };
    let first_ms = start.elapsed().as_secs_f64() * 1e3;
    match p.error() {
        Ok(err) if err <= p.tolerance(cli) => {}
        Ok(err) => return failed(format!("wrong result: max relative error {err:.2e}")),
        Err(e) => return failed(e.to_string()),
    }
    let lb::Picked::Tuned(costs) = &launch.picked else {
        return failed(format!(
            "the first launch did not tune ({:?})",
            launch.picked
        ));
    };
    let tuner_costs = costs
        .iter()
        .map(|&(s, c)| (s.name().to_string(), c))
        .collect();
    let winner = out
        .iter()
        .find(|r| r.schedule == launch.schedule && r.status == "ok")
        .cloned();
    let mut r = match (winner, Schedule::from_name(&launch.schedule)) {
        (Some(w), _) => w,
        (None, Some(s)) => measure(cli, p, Subject::Schedule(s), base, gpu),
        (None, None) => return failed(format!("unknown pick `{}`", launch.schedule)),
    };
    r.schedule = "tuned".into();
    r.picked = Some(launch.schedule.to_string());
    r.tuner_costs = Some(tuner_costs);
    if let Some(ms) = r.median_ms {
        r.tuning_ms = Some(first_ms - ms);
        let auto_ms = out
            .iter()
            .find(|o| o.schedule == "auto")
            .and_then(|o| o.median_ms);
        r.payback_launches = auto_ms
            .filter(|&auto| auto > ms)
            .map(|auto| (first_ms - ms) / (auto - ms));
    }
    r
}

/// Verifies `s` once, then times it (GPU) or reads the simulator's statistics.
fn measure(cli: &Cli, p: &mut Problem, s: Subject, base: &Record, gpu: Option<&Gpu>) -> Record {
    let mut r = base.clone();
    r.schedule = s.name();
    let first = p.clear().and_then(|()| p.launch(s));
    let launch = match first {
        Ok(l) => l,
        Err(e) => return r.failed(e.to_string()),
    };
    r.kernels = launch.kernels.iter().map(|k| k.entry.to_string()).collect();
    match p.error() {
        Ok(err) => {
            r.max_rel_err = Some(err);
            if err > p.tolerance(cli) {
                return r.failed(format!(
                    "wrong result: max relative error {err:.2e} > {:.0e}",
                    p.tolerance(cli)
                ));
            }
        }
        Err(e) => return r.failed(e.to_string()),
    }
    // The simulator's statistics of a launch after the first, as later calls run: the first
    // also runs the kernels that fill the tile set's caches (LRB's bins), which a user's loop
    // pays once, and the GPU's timings below skip it the same way.
    let sim = match launch.sim {
        Some(_) => match p.launch(s) {
            Ok(l) => l.sim,
            Err(e) => return r.failed(format!("while measuring: {e}")),
        },
        None => None,
    };
    if let Some(stats) = sim {
        let threads = stats.per_thread_instructions.len().max(1) as f64;
        let busiest = stats
            .per_thread_instructions
            .iter()
            .copied()
            .max()
            .unwrap_or(0) as f64;
        let mean = stats.instructions as f64 / threads;
        r.sim_instructions = Some(stats.instructions);
        r.sim_instr_per_atom =
            Some(stats.instructions as f64 / (p.da.nnz().max(1) * p.op.k().unwrap_or(1)) as f64);
        r.sim_busiest_over_mean = Some(busiest / mean.max(1.0));
        r.sim_busiest_instructions = Some(busiest as u64);
        r.sim_warp_efficiency = Some(stats.warp_efficiency());
    }
    let Some(g) = gpu else {
        return r;
    };
    let first_ms = f64::from(launch.elapsed_ms.unwrap_or(0.0)).max(1e-3);
    let reps = ((cli.budget_ms / first_ms) as usize).clamp(3, cli.reps.max(3));
    let mut times = Vec::with_capacity(reps);
    for i in 0..cli.warmup + reps {
        match p.launch(s) {
            Ok(l) if i >= cli.warmup => times.push(f64::from(l.elapsed_ms.unwrap_or(f32::NAN))),
            Ok(_) => {}
            Err(e) => return r.failed(format!("while timing: {e}")),
        }
    }
    times.sort_by(f64::total_cmp);
    let ms = times[times.len() / 2];
    r.set_time(ms, reps, p.bytes, g.copy_bytes_per_s);
    if let Some(power) = &g.power {
        r.set_energy(energy(power, cli.energy_ms, || {
            p.launch(s).map(drop).map_err(|e| e.to_string())
        }));
    }
    r
}

/// Energy per call (mJ) and average power (W) over a batch of calls lasting at least
/// `window_ms`, from NVML's counter. Each call synchronizes, so the energy includes the host's
/// share of a call, as a user's loop would see it.
fn energy(
    power: &Power,
    window_ms: f64,
    mut call: impl FnMut() -> Result<(), String>,
) -> Result<(f64, f64), String> {
    let before = power.energy_mj()?;
    let start = std::time::Instant::now();
    let mut calls = 0u64;
    while calls == 0 || start.elapsed().as_secs_f64() * 1e3 < window_ms {
        call()?;
        calls += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let mj = power.energy_mj()?.saturating_sub(before) as f64;
    if mj == 0.0 {
        return Err(format!(
            "NVML's energy counter did not advance over {calls} calls in {:.0} ms: raise --energy-ms",
            seconds * 1e3
        ));
    }
    Ok((mj / calls as f64, mj * 1e-3 / seconds.max(1e-9)))
}

/// The better of cuSPARSE's two algorithms for this op, verified like our schedules.
fn cusparse_run(
    cli: &Cli,
    p: &mut Problem,
    a: &Csr<f32>,
    cs: &Cusparse,
    base: &Record,
    g: &Gpu,
) -> Record {
    let mut r = base.clone();
    r.schedule = "cusparse".into();
    let ca = match CuCsr::upload(&p.dev, a) {
        Ok(ca) => ca,
        Err(e) => return r.failed(e),
    };
    // A half-precision op's matrix in f16, as lb's kernels read it.
    let ca16 = match p.half.is_some() {
        true => match CuCsr::upload(&p.dev, &a.map_values(f16::from_f32)) {
            Ok(ca) => Some(ca),
            Err(e) => return r.failed(e),
        },
        false => None,
    };
    r.kernels = vec![format!(
        "cuSPARSE CSR, {} offsets and columns{}",
        ca.index_type(),
        if ca16.is_some() {
            ", f16 values, f32 compute"
        } else {
            ""
        }
    )];
    let mut best: Option<(f64, &str)> = None;
    let mut errors = Vec::new();
    let algs: Vec<&str> = match p.op.k() {
        None => SPMV_ALGS.iter().map(|a| a.1).collect(),
        Some(_) => SPMM_ALGS.iter().map(|a| a.1).collect(),
    };
    for (i, name) in algs.into_iter().enumerate() {
        if let Err(e) = p.clear() {
            errors.push(format!("{name}: {e}"));
            continue;
        }
        let reps = cli.reps.max(3);
        let timed = match (p.op.k(), &mut p.half, &ca16) {
            (Some(k), Some(h), Some(ca16)) => {
                cs.spmm(ca16, &h.dx, k, &mut h.dy, SPMM_ALGS[i].0, reps)
            }
            (None, _, _) => cs.spmv(&ca, &p.dx, &mut p.dy, SPMV_ALGS[i].0, reps),
            (Some(k), _, _) => cs.spmm(&ca, &p.dx, k, &mut p.dy, SPMM_ALGS[i].0, reps),
        };
        let tolerance = p.tolerance(cli);
        let checked = timed.and_then(|ms| match p.error() {
            Ok(err) if err <= tolerance => Ok(ms),
            Ok(err) => Err(format!("wrong result: max relative error {err:.2e}")),
            Err(e) => Err(e.to_string()),
        });
        match checked {
            Ok(ms) if best.is_none_or(|(b, _)| ms < b) => best = Some((ms, name)),
            Ok(_) => {}
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    match best {
        Some((ms, name)) => {
            r.cusparse_alg = Some(name.into());
            r.set_time(ms, cli.reps.max(3), p.bytes, g.copy_bytes_per_s);
            if !errors.is_empty() {
                r.error = Some(errors.join("; "));
            }
            r
        }
        None => r.failed(errors.join("; ")),
    }
}

/// The corpus families of the run: `--families`, or every family, but `road-grid` only with a
/// graph op (a traversal input: without one, the default run and the history of its rows stay
/// what they were).
fn families(cli: &Cli) -> Vec<Family> {
    if !cli.families.is_empty() {
        return cli.families.clone();
    }
    let graphs = cli.ops.iter().any(|op| op.is_graph());
    <Family as clap::ValueEnum>::value_variants()
        .iter()
        .copied()
        .filter(|&f| graphs || f != Family::RoadGrid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn road_grid_joins_the_default_families_with_a_graph_op_only() {
        let parse = |args: &[&str]| {
            families(
                &Cli::try_parse_from(std::iter::once("lb-bench").chain(args.iter().copied()))
                    .unwrap(),
            )
        };
        let all = <Family as clap::ValueEnum>::value_variants().len();
        let default = parse(&[]);
        assert_eq!(default.len(), all - 1);
        assert!(!default.contains(&Family::RoadGrid));
        assert!(!parse(&["--ops", "spmv"]).contains(&Family::RoadGrid));
        let graphs = parse(&["--ops", "spmv,dobfs"]);
        assert_eq!(graphs.len(), all);
        assert_eq!(parse(&["--families", "road-grid"]), vec![Family::RoadGrid]);
        assert_eq!(
            parse(&["--ops", "bfs", "--families", "road"]),
            vec![Family::Road]
        );
    }
}
