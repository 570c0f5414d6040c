//! Output: the table on stdout, the JSON-lines records, the `auto` summary and the PNG plots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::Serialize;

use crate::corpus::Matrix;
use crate::Op;

/// The font of the plots, carried in the binary so plots render on a machine without fonts
/// (DejaVu Sans from Debian's fonts-dejavu-core; its licence is in lb-bench/assets/).
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// What every record repeats about the run.
#[derive(Clone, Debug, Serialize)]
pub struct Context {
    pub gpu: String,
    pub driver: Option<String>,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    pub command: String,
}

impl Context {
    pub fn new(dev: &lb::Device, driver: Option<String>) -> Context {
        Context {
            gpu: dev.name().to_string(),
            driver,
            date: utc_now(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }
}

/// Civil UTC date from the Unix clock (Howard Hinnant's days-to-civil), to avoid a date crate.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// One run: one op × matrix × schedule (or `auto`, or `cusparse`). Fields that do not apply
/// (GPU figures on the simulator and the reverse) are left out of the JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    /// "run".
    pub record: &'static str,
    #[serde(flatten)]
    pub context: Context,
    pub op: &'static str,
    /// Dense columns for SpMM.
    pub k: Option<usize>,
    pub matrix: String,
    pub family: String,
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub max_row: usize,
    /// A schedule's name, "auto", "tuned", "cusparse" or "gather" (the gather floor).
    pub schedule: String,
    /// For "auto": the schedule the heuristic picked; for "tuned": the one measured fastest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picked: Option<String>,
    /// For "tuned": the first launch's extra time over a launch of its pick (GPU), ms.
    pub tuning_ms: Option<f64>,
    /// For "tuned": launches after which the tuning time is paid back against the heuristic's
    /// pick (`None` when the heuristic picked as well, or on the simulator).
    pub payback_launches: Option<f64>,
    /// For "tuned": each candidate's cost as the tuner measured it (ms on a GPU, the busiest
    /// thread's instructions on the simulator), cheapest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tuner_costs: Option<Vec<(String, f64)>>,
    /// "ok" or "failed" (an error, or a result off the CPU reference); failed runs are not timed.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub kernels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rel_err: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reps: Option<usize>,
    /// Bytes that must move over the median time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// The time the bytes would take at the copy bandwidth, over the median time (1 = at the floor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<f64>,
    /// The gather floor's time over this run's (1 = as fast as the nonzeros' own gathers allow;
    /// `crate::gather_floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gather_fraction: Option<f64>,
    /// cuSPARSE's best time over this run's; above 1 means faster than cuSPARSE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_vs_cusparse: Option<f64>,
    /// For "cusparse": the faster algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cusparse_alg: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_mj_per_call: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg_power_w: Option<f64>,
    /// Graph ops: kernel iterations (frontiers) and edges traversed by one run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edges: Option<u64>,
    /// Graph ops on a GPU: million traversed edges per second of median kernel time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mteps: Option<f64>,
    /// Graph ops: the sources traversed from (seeded, random among vertices with an out-edge);
    /// `iterations`, `edges`, `median_ms` and `wall_ms` are sums over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<usize>>,
    /// Graph ops on a GPU: the driver's wall-clock time from source to finish (state upload,
    /// every iteration with its host work, result download), median per source, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
    /// Graph ops on a GPU: billion traversed edges per second of `wall_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gteps_wall: Option<f64>,
    /// Graph ops: host↔device bytes per iteration (both directions), the largest over sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_iteration: Option<f64>,
    /// `dobfs`: the bottom-up (pull) iterations among `iterations`, summed over the sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_iterations: Option<usize>,
    /// `dobfs` on a GPU: the steps of the last timed search from the first source, each as
    /// (direction, tiles its kernel ran over, vertices reached, kernel ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<(&'static str, u64, u64, f32)>>,
    /// SSSP and BFS with `--steps`: every iteration of the first timed search from each
    /// source (`crate::graph::StepRecord`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<crate::graph::StepRecord>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_instructions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_instr_per_atom: Option<f64>,
    /// The busiest thread's instructions over the mean thread's: the proxy for max / mean atoms
    /// per thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_busiest_over_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_busiest_instructions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_warp_efficiency: Option<f64>,
}

impl Record {
    pub fn base(ctx: &Context, op: Op, m: &Matrix) -> Record {
        let a = &m.csr;
        Record {
            record: "run",
            context: ctx.clone(),
            op: op.name(),
            k: op.k(),
            matrix: m.name.clone(),
            family: m.family.clone(),
            rows: a.num_rows,
            cols: a.num_cols,
            nnz: a.nnz(),
            max_row: a
                .row_offsets
                .windows(2)
                .map(|w| w[1] - w[0])
                .max()
                .unwrap_or(0),
            schedule: String::new(),
            picked: None,
            tuning_ms: None,
            payback_launches: None,
            tuner_costs: None,
            status: "ok",
            error: None,
            kernels: Vec::new(),
            max_rel_err: None,
            median_ms: None,
            reps: None,
            gbps: None,
            floor_fraction: None,
            gather_fraction: None,
            copy_gbps: None,
            speedup_vs_cusparse: None,
            cusparse_alg: None,
            energy_mj_per_call: None,
            avg_power_w: None,
            iterations: None,
            edges: None,
            mteps: None,
            sources: None,
            wall_ms: None,
            gteps_wall: None,
            bytes_per_iteration: None,
            pull_iterations: None,
            levels: None,
            steps: None,
            sim_instructions: None,
            sim_instr_per_atom: None,
            sim_busiest_over_mean: None,
            sim_busiest_instructions: None,
            sim_warp_efficiency: None,
        }
    }

    pub fn failed(mut self, message: impl Into<String>) -> Record {
        self.status = "failed";
        self.error = Some(message.into());
        self
    }

    pub fn set_time(&mut self, ms: f64, reps: usize, bytes: u64, copy_bytes_per_s: Option<f64>) {
        self.median_ms = Some(ms);
        self.reps = Some(reps);
        let seconds = ms * 1e-3;
        self.gbps = Some(bytes as f64 / seconds / 1e9);
        if let Some(bw) = copy_bytes_per_s {
            self.copy_gbps = Some(bw / 1e9);
            self.floor_fraction = Some(bytes as f64 / bw / seconds);
        }
    }

    /// Energy figures, or the reason they are missing in `error` (the run itself stays ok).
    pub fn set_energy(&mut self, e: Result<(f64, f64), String>) {
        match e {
            Ok((mj, w)) => {
                self.energy_mj_per_call = Some(mj);
                self.avg_power_w = Some(w);
            }
            Err(msg) => self.error = Some(msg),
        }
    }
}

/// The header of the graph ops' rows (their columns differ from SpMV's and SpMM's).
pub fn print_graph_header(gpu: bool) {
    println!(
        "{:<8} {:<34} {:<28} {:>8} {:>10} {:>11} {:>11} {:>8} {:>7} {:>7}  status{}",
        "op",
        "matrix",
        "schedule",
        "iters",
        "edges",
        "kernel(us)",
        "wall(us)",
        "MTEPS",
        "GTEPS/w",
        "B/iter",
        if gpu {
            String::new()
        } else {
            format!(
                " (simulator: no time; graphs of ≤ {} edges)",
                crate::graph::SIM_MAX_EDGES
            )
        }
    );
}

/// A graph op's matrix that is not run, and why, in the table.
pub fn print_graph_skip(op: &str, matrix: &str, why: &str) {
    println!("{op:<8} {matrix:<34} skipped: {why}");
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.prec$}"))
}

pub fn print_header(gpu: bool) {
    if gpu {
        println!(
            "{:<8} {:<34} {:<28} {:>10} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7}  status",
            "op",
            "matrix",
            "schedule",
            "time(us)",
            "GB/s",
            "floor",
            "gather",
            "vs cuSP",
            "mJ/call",
            "W"
        );
    } else {
        println!(
            "{:<8} {:<34} {:<28} {:>11} {:>9} {:>9} {:>9}  status",
            "op", "matrix", "schedule", "instr", "instr/at", "max/mean", "warp eff"
        );
    }
}

pub fn print_row(r: &Record) {
    let schedule = match (&r.picked, r.pull_iterations) {
        (Some(p), _) => format!("{}→{p}", r.schedule),
        (None, Some(pulls)) => format!("{} ({pulls} pulled)", r.schedule),
        (None, None) => r.schedule.clone(),
    };
    let status = match (&r.status, &r.error) {
        (&"ok", _) => "ok".to_string(),
        (_, Some(e)) => format!("FAILED: {e}"),
        _ => "FAILED".to_string(),
    };
    if [
        Op::Sssp,
        Op::Nearfar,
        Op::Bfs,
        Op::Dobfs,
        Op::Cc,
        Op::Pagerank,
    ]
    .iter()
    .any(|o| o.name() == r.op)
    {
        println!(
            "{:<8} {:<34} {:<28} {:>8} {:>10} {:>11} {:>11} {:>8} {:>7} {:>7}  {status}",
            r.op,
            r.matrix,
            schedule,
            r.iterations.map_or_else(|| "n/a".into(), |v| v.to_string()),
            r.edges.map_or_else(|| "n/a".into(), |v| v.to_string()),
            opt(r.median_ms.map(|ms| ms * 1e3), 1),
            opt(r.wall_ms.map(|ms| ms * 1e3), 1),
            opt(r.mteps, 1),
            opt(r.gteps_wall, 3),
            opt(r.bytes_per_iteration, 1),
        );
    } else if r.sim_instructions.is_some()
        || (r.median_ms.is_none() && r.context.gpu == "simulator")
    {
        println!(
            "{:<8} {:<34} {:<28} {:>11} {:>9} {:>9} {:>8}%  {status}",
            r.op,
            r.matrix,
            schedule,
            r.sim_instructions
                .map_or_else(|| "n/a".into(), |v| v.to_string()),
            opt(r.sim_instr_per_atom, 1),
            opt(r.sim_busiest_over_mean, 1),
            opt(r.sim_warp_efficiency.map(|w| 100.0 * w), 1),
        );
    } else {
        println!(
            "{:<8} {:<34} {:<28} {:>10} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7}  {status}",
            r.op,
            r.matrix,
            schedule,
            opt(r.median_ms.map(|ms| ms * 1e3), 1),
            opt(r.gbps, 1),
            opt(r.floor_fraction, 2),
            opt(r.gather_fraction, 2),
            opt(r.speedup_vs_cusparse, 2),
            opt(r.energy_mj_per_call, 3),
            opt(r.avg_power_w, 0),
        );
    }
}

/// How well `auto` did for one op, against the oracle (the best measured schedule every time).
#[derive(Debug, Serialize)]
pub struct AutoSummary {
    /// "auto_summary".
    pub record: &'static str,
    #[serde(flatten)]
    pub context: Context,
    pub op: &'static str,
    /// "auto" (the heuristic) or "tuned" (measured at the first launch).
    pub subject: &'static str,
    /// What "best" means: "median_ms" (kernel time) on a GPU, "wall_ms" (a search from start to
    /// finish) for the graph ops on a GPU, "sim_busiest_instructions" on the simulator.
    pub metric: &'static str,
    pub matrices: usize,
    /// Matrices where `auto` picked a best schedule (ties count).
    pub auto_picked_best: usize,
    /// Geometric mean over matrices of auto's cost / the oracle's (1 = always the best).
    pub geomean_loss: f64,
    pub worst_loss: f64,
}

/// The cost a schedule is ranked by: GPU time, or on the simulator the busiest thread's
/// instructions (the critical path of a perfectly parallel machine).
fn cost(r: &Record) -> Option<f64> {
    r.median_ms.or(r.sim_busiest_instructions.map(|v| v as f64))
}

/// The cost `auto` and `tuned` are ranked by, with its name: for the graph ops the wall time of
/// a search (host work and `auto`'s own frontier measurements included, which their kernel
/// time leaves out), else [`cost`].
fn pick_cost(r: &Record) -> Option<(f64, &'static str)> {
    match (r.wall_ms, r.median_ms, r.sim_busiest_instructions) {
        (Some(wall), _, _) => Some((wall, "wall_ms")),
        (None, Some(kernel), _) => Some((kernel, "median_ms")),
        (None, None, Some(v)) => Some((v as f64, "sim_busiest_instructions")),
        _ => None,
    }
}

/// Rows that are not one schedule's own: the picks, cuSPARSE and the gather floor.
fn is_pick(schedule: &str) -> bool {
    matches!(schedule, "auto" | "tuned" | "cusparse" | "gather")
}

pub fn auto_summary(records: &[Record], ctx: &Context) -> Vec<AutoSummary> {
    let mut by_op: BTreeMap<(&str, &'static str), Vec<(f64, f64)>> = BTreeMap::new();
    let mut groups: BTreeMap<(&str, &str), Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.status == "ok") {
        groups.entry((r.op, r.matrix.as_str())).or_default().push(r);
    }
    let mut metrics: BTreeMap<&str, &'static str> = BTreeMap::new();
    for ((op, _), rs) in groups {
        let best = rs
            .iter()
            .filter(|r| !is_pick(&r.schedule))
            .filter(|r| !crate::variants::is_variant(&r.schedule))
            .filter_map(|r| pick_cost(r))
            .inspect(|&(_, metric)| {
                metrics.insert(op, metric);
            })
            .map(|(c, _)| c)
            .fold(f64::INFINITY, f64::min);
        for subject in ["auto", "tuned"] {
            let picked = rs
                .iter()
                .find(|r| r.schedule == subject)
                .and_then(|r| pick_cost(r))
                .map(|(c, _)| c);
            if let Some(a) = picked.filter(|_| best.is_finite() && best > 0.0) {
                by_op.entry((op, subject)).or_default().push((a, best));
            }
        }
    }
    by_op
        .into_iter()
        .map(|((op, subject), pairs)| {
            let losses: Vec<f64> = pairs.iter().map(|&(a, b)| a / b).collect();
            AutoSummary {
                record: "auto_summary",
                context: ctx.clone(),
                op,
                subject,
                metric: metrics
                    .get(op)
                    .copied()
                    .unwrap_or("sim_busiest_instructions"),
                matrices: losses.len(),
                auto_picked_best: losses.iter().filter(|&&l| l <= 1.0 + 1e-9).count(),
                geomean_loss: (losses.iter().map(|l| l.ln()).sum::<f64>()
                    / losses.len().max(1) as f64)
                    .exp(),
                worst_loss: losses.iter().copied().fold(1.0, f64::max),
            }
        })
        .collect()
}

pub fn print_summary(s: &[AutoSummary]) {
    for a in s {
        println!(
            "{}, {}: picked the best schedule on {}/{} matrices; geomean loss against the oracle {:.3}× (worst {:.2}×; by {})",
            a.subject, a.op, a.auto_picked_best, a.matrices, a.geomean_loss, a.worst_loss, a.metric
        );
    }
}

/// `--unchecked`: per op, the geometric mean over every schedule × matrix measured both ways of
/// the safe launcher's cost over the unchecked one's (1 = the bounds tests cost nothing).
pub fn print_unchecked_summary(records: &[Record]) {
    let mut by_op: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut metric = "sim_busiest_instructions";
    for u in records.iter().filter(|r| r.status == "ok") {
        let Some(schedule) = u.schedule.strip_suffix(crate::variants::UNCHECKED) else {
            continue;
        };
        let safe = records.iter().find(|r| {
            r.status == "ok" && r.op == u.op && r.matrix == u.matrix && r.schedule == schedule
        });
        if u.median_ms.is_some() {
            metric = "median_ms";
        }
        if let (Some(s), Some(c)) = (safe.and_then(cost), cost(u)) {
            if s > 0.0 && c > 0.0 {
                by_op.entry(u.op).or_default().push(s / c);
            }
        }
    }
    for (op, ratios) in by_op {
        let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let worst = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "unchecked, {op}: the safe launchers cost {geomean:.3}× the unchecked ones (geomean over {} runs, worst {worst:.3}×; by {metric})",
            ratios.len()
        );
    }
}

/// `--host-loop`: per graph op, the geometric mean over every schedule × graph measured both
/// ways of the device-resident driver's wall time over the host-driven loop's (below 1 = the
/// device-resident loop is faster), and the worst (largest) ratio.
pub fn print_host_loop_summary(records: &[Record]) {
    let mut by_op: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for h in records.iter().filter(|r| r.status == "ok") {
        let Some(schedule) = h.schedule.strip_suffix(crate::variants::HOST_LOOP) else {
            continue;
        };
        let device = records.iter().find(|r| {
            r.status == "ok" && r.op == h.op && r.matrix == h.matrix && r.schedule == schedule
        });
        if let (Some(d), Some(old)) = (device.and_then(|d| d.wall_ms), h.wall_ms) {
            if d > 0.0 && old > 0.0 {
                by_op.entry(h.op).or_default().push(d / old);
            }
        }
    }
    for (op, ratios) in by_op {
        let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let worst = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "host loop, {op}: the device-resident driver's wall time is {geomean:.3}× the host loop's (geomean over {} runs, worst {worst:.3}×)",
            ratios.len()
        );
    }
}

type Series = BTreeMap<String, Vec<(f64, f64)>>;

/// What the plots read of one run: a [`Record`] of this process, or a JSON line of an earlier
/// one (`--plots-from`).
#[derive(Clone, Debug, PartialEq)]
pub struct PlotPoint {
    pub op: String,
    pub matrix: String,
    pub nnz: usize,
    pub schedule: String,
    /// The run passed verification and was timed.
    pub ok: bool,
    pub gbps: Option<f64>,
    pub sim_instr_per_atom: Option<f64>,
    pub speedup_vs_cusparse: Option<f64>,
}

impl From<&Record> for PlotPoint {
    fn from(r: &Record) -> PlotPoint {
        PlotPoint {
            op: r.op.to_string(),
            matrix: r.matrix.clone(),
            nnz: r.nnz,
            schedule: r.schedule.clone(),
            ok: r.status == "ok",
            gbps: r.gbps,
            sim_instr_per_atom: r.sim_instr_per_atom,
            speedup_vs_cusparse: r.speedup_vs_cusparse,
        }
    }
}

impl PlotPoint {
    /// The run record of one line of `--json` output; `None` for the other records (the
    /// `auto_summary` lines) and for a run line without an op, matrix, size or schedule.
    pub fn from_json(v: &serde_json::Value) -> Option<PlotPoint> {
        if v["record"] != "run" {
            return None;
        }
        Some(PlotPoint {
            op: v["op"].as_str()?.to_string(),
            matrix: v["matrix"].as_str()?.to_string(),
            nnz: usize::try_from(v["nnz"].as_u64()?).ok()?,
            schedule: v["schedule"].as_str()?.to_string(),
            ok: v["status"] == "ok",
            gbps: v["gbps"].as_f64(),
            sim_instr_per_atom: v["sim_instr_per_atom"].as_f64(),
            speedup_vs_cusparse: v["speedup_vs_cusparse"].as_f64(),
        })
    }
}

/// Every value of JSON-lines files written by `--json`, in file order (`--plots-from`,
/// `--fit-rule`). Blank lines are skipped; a line that is not JSON is an error that names its
/// file and line.
pub fn read_json_lines(files: &[PathBuf]) -> Result<Vec<serde_json::Value>, String> {
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
            out.push(v);
        }
    }
    Ok(out)
}

/// The run records of JSON-lines files written by `--json`, in file order (`--plots-from`);
/// the other records are skipped, and files without any run record are an error.
pub fn read_plot_points(files: &[PathBuf]) -> Result<Vec<PlotPoint>, String> {
    let out: Vec<PlotPoint> = read_json_lines(files)?
        .iter()
        .filter_map(PlotPoint::from_json)
        .collect();
    if out.is_empty() {
        return Err("no run records to plot: pass files written by `--json`".into());
    }
    Ok(out)
}

/// The landscape per op (GB/s against nonzeros, one series per schedule; on the simulator,
/// instructions per atom) and, on a GPU, the speedup over cuSPARSE per matrix.
pub fn plots(dir: &Path, records: &[PlotPoint]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the embedded font is invalid".to_string())?;
    let ops: Vec<&str> = {
        // Each op once, in the order of its first run (files of several calls may interleave).
        let mut v: Vec<&str> = Vec::new();
        for r in records {
            if !v.contains(&r.op.as_str()) {
                v.push(r.op.as_str());
            }
        }
        v
    };
    for op in ops {
        let mine = || records.iter().filter(move |r| r.op == op && r.ok);
        let gpu = mine().any(|r| r.gbps.is_some());
        let mut landscape = Series::new();
        for r in mine().filter(|r| r.schedule != "auto" && r.schedule != "tuned") {
            let y = if gpu { r.gbps } else { r.sim_instr_per_atom };
            if let Some(y) = y {
                landscape
                    .entry(r.schedule.clone())
                    .or_default()
                    .push((r.nnz.max(1) as f64, y));
            }
        }
        let (file, y_label) = if gpu {
            (format!("landscape-{op}.png"), "GB/s")
        } else {
            (
                format!("landscape-{op}-sim.png"),
                "simulated instructions per atom",
            )
        };
        scatter(
            &dir.join(file),
            &format!("{op}: performance landscape"),
            y_label,
            &landscape,
        )?;
        if gpu {
            let mut speedup = Series::new();
            for r in mine() {
                let best_ours = mine()
                    .filter(|o| o.matrix == r.matrix && !is_pick(&o.schedule))
                    .filter_map(|o| o.speedup_vs_cusparse)
                    .fold(f64::NAN, f64::max);
                let x = r.nnz as f64;
                if r.schedule == "auto" {
                    if let Some(s) = r.speedup_vs_cusparse {
                        speedup.entry("auto".into()).or_default().push((x, s));
                    }
                    if best_ours.is_finite() {
                        speedup
                            .entry("oracle (best schedule)".into())
                            .or_default()
                            .push((x, best_ours));
                    }
                }
            }
            scatter(
                &dir.join(format!("speedup-{op}.png")),
                &format!("{op}: speedup over cuSPARSE per matrix"),
                "speedup",
                &speedup,
            )?;
        }
    }
    Ok(())
}

/// A log-log scatter plot with one coloured series per key.
fn scatter(path: &Path, title: &str, y_label: &str, series: &Series) -> Result<(), String> {
    let pts = series
        .values()
        .flatten()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
    for &(x, y) in pts {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if !x0.is_finite() || !y0.is_finite() {
        return Ok(());
    }
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let root = BitMapBackend::new(path, (1200, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 / 1.5..x1 * 1.5).log_scale(),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("nonzeros")
        .y_desc(y_label)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|(x, y)| *x > 0.0 && *y > 0.0)
                    .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
            )
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of `op` on one matrix: `schedule` with kernel time `kernel` and, for a graph op,
    /// wall time `wall` (ms).
    fn row(op: Op, schedule: &str, kernel: f64, wall: Option<f64>) -> Record {
        let ctx = Context {
            gpu: "test".into(),
            driver: None,
            date: String::new(),
            command: String::new(),
        };
        let m = Matrix {
            name: "g".into(),
            family: "g".into(),
            csr: lb::generate::power_law(50, 50, 3.0, 1),
        };
        let mut r = Record::base(&ctx, op, &m);
        r.schedule = schedule.into();
        r.median_ms = Some(kernel);
        r.wall_ms = wall;
        r
    }

    /// `auto` on a graph op is ranked by wall time (its frontier measurements are host work),
    /// SpMV's by kernel time: here `auto` has the best kernel time of BFS but not the best wall
    /// time, and is SpMV's best.
    #[test]
    fn graph_ops_rank_auto_by_wall_time() {
        let records = [
            row(Op::Bfs, "merge_path", 10.0, Some(12.0)),
            row(Op::Bfs, "thread_mapped", 11.0, Some(13.0)),
            row(Op::Bfs, "auto", 9.0, Some(15.0)),
            row(Op::Spmv, "merge_path", 2.0, None),
            row(Op::Spmv, "auto", 2.0, None),
        ];
        let ctx = records[0].context.clone();
        let summary = auto_summary(&records, &ctx);
        let bfs = summary.iter().find(|s| s.op == "bfs").unwrap();
        assert_eq!(bfs.metric, "wall_ms");
        assert!((bfs.geomean_loss - 1.25).abs() < 1e-12, "{bfs:?}");
        assert_eq!(bfs.auto_picked_best, 0);
        let spmv = summary.iter().find(|s| s.op == "spmv").unwrap();
        assert_eq!(spmv.metric, "median_ms");
        assert_eq!((spmv.auto_picked_best, spmv.geomean_loss), (1, 1.0));
    }
}
