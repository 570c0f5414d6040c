//! lb-bench: every schedule × op × matrix, against cuSPARSE in the same process on a GPU, or
//! the simulator's load-balance figures without one. docs/benchmarks.md explains every option.

// Every unsafe block and impl says why it is sound, in a `// SAFETY:` comment above it.
#![warn(clippy::undocumented_unsafe_blocks)]

mod baseline;
mod cg;
mod corpus;
mod driver_floor;
mod fit;
mod gather_floor;
mod graph;
mod host_loop;
mod looped;
mod multi;
mod multi_graph;
mod oversize;
mod reference;
mod report;
mod run;
mod variants;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use corpus::{Family, Scale};
use lb::algorithms::FrontierExchange;
use lb::multi::Transport;

/// The operations measured. A new kernel op is added here and in `run::Problem::new` /
/// `run::Problem::launch` (a device problem, a launch per schedule and a CPU reference); the graph
/// ops, host-driven loops of launches, run through `graph::run_graph` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// y = A·x.
    Spmv,
    /// C = A·B, B dense with 8 columns.
    Spmm8,
    /// C = A·B with 32 columns.
    Spmm32,
    /// C = A·B with 128 columns.
    Spmm128,
    /// C = A·B with 32 columns, A's values, B and C in `f16` (computed in f32); cuSPARSE runs
    /// the same: CUDA_R_16F operands, CUDA_R_32F compute.
    Spmm32h,
    /// Single-source shortest paths from `--sources` seeded random sources, weights |A|, in
    /// traversed edges per second.
    Sssp,
    /// Breadth-first search from `--sources` seeded random sources, in traversed edges per
    /// second.
    Bfs,
    /// Near-Far bucketed SSSP (`lb::algorithms::sssp_near_far`, Δ = `--delta-factor` · mean
    /// weight / mean degree) from the same sources and weights as `sssp`.
    Nearfar,
    /// Direction-optimizing BFS (push/pull switch, α = 14, β = 24) from the same sources as
    /// `bfs`; edges are counted as `bfs` counts them, so the GTEPS compare.
    Dobfs,
    /// Connected components (hooking and pointer jumping), edges = edges × iterations.
    Cc,
    /// PageRank by power iteration (pull form, damping 0.85, L1 tolerance 1e-5), edges = edges
    /// × iterations.
    Pagerank,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Spmv => "spmv",
            Op::Spmm8 => "spmm8",
            Op::Spmm32 => "spmm32",
            Op::Spmm128 => "spmm128",
            Op::Spmm32h => "spmm32h",
            Op::Sssp => "sssp",
            Op::Bfs => "bfs",
            Op::Nearfar => "nearfar",
            Op::Dobfs => "dobfs",
            Op::Cc => "cc",
            Op::Pagerank => "pagerank",
        }
    }

    /// Dense columns: `None` for SpMV and the graph ops.
    pub fn k(self) -> Option<usize> {
        match self {
            Op::Spmv | Op::Sssp | Op::Nearfar | Op::Bfs | Op::Dobfs | Op::Cc | Op::Pagerank => None,
            Op::Spmm8 => Some(8),
            Op::Spmm32 | Op::Spmm32h => Some(32),
            Op::Spmm128 => Some(128),
        }
    }

    /// The ops whose values are stored in `f16`.
    pub fn is_half(self) -> bool {
        self == Op::Spmm32h
    }

    /// The graph ops: run by `graph::run_graph`, not as a `run::Problem`.
    pub fn is_graph(self) -> bool {
        matches!(
            self,
            Op::Sssp | Op::Nearfar | Op::Bfs | Op::Dobfs | Op::Cc | Op::Pagerank
        )
    }

    /// The graph ops that start from `--sources` (connected components and PageRank do not).
    pub fn has_sources(self) -> bool {
        matches!(self, Op::Sssp | Op::Nearfar | Op::Bfs | Op::Dobfs)
    }
}

/// Benchmarks every lb schedule against cuSPARSE (GPU) or reports the simulator's load balance.
///
/// On a GPU each run reports the median time over warm repetitions (CUDA events, allocations and
/// uploads outside), GB/s, the fraction of the bandwidth floor, the speedup over the better of
/// two cuSPARSE algorithms, and energy per call from NVML. Without a GPU it runs the simulator
/// and reports load balance per schedule. A run that fails verification is never timed.
#[derive(Debug, Parser)]
#[command(name = "lb-bench", version)]
pub struct Cli {
    /// Operations, comma-separated. `sssp` and `bfs` (not in the default list) run
    /// `lb::algorithms` from `--sources` seeded random sources on each square matrix (weights
    /// |A|), checked against Dijkstra / queue BFS, and report kernel and wall time, traversed
    /// edges per second on both, and host↔device bytes per iteration; no cuSPARSE, no `auto`.
    /// On the simulator they report correctness, iterations and bytes only, on graphs of at
    /// most 20 000 edges.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Op::Spmv, Op::Spmm8, Op::Spmm32, Op::Spmm128])]
    pub ops: Vec<Op>,
    /// Schedules to run, comma-separated, as written in `schedule = "…"` (default: every
    /// generated one). `auto` rows are always reported as well.
    #[arg(long, value_delimiter = ',')]
    pub schedules: Vec<String>,
    /// Size of the built-in corpus: small (simulator), medium, large (≥ 50 M nonzeros).
    #[arg(long, value_enum, default_value_t = Scale::Small)]
    pub scale: Scale,
    /// Built-in corpus families, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub families: Vec<Family>,
    /// Leave out the built-in corpus (use with --mtx).
    #[arg(long)]
    pub no_corpus: bool,
    /// Relabel the vertices of every square matrix (the corpus's and `--mtx` files) by one
    /// seeded random permutation, rows and columns alike (P·A·Pᵀ), as Graph500's generator
    /// does; names get `-relabelled`. Shows how much a kernel's time owes to the numbering.
    #[arg(long)]
    pub relabel: bool,
    /// Matrix Market files to add (repeatable).
    #[arg(long = "mtx", value_name = "FILE")]
    pub mtx: Vec<PathBuf>,
    /// Seed of the built-in corpus, of the dense inputs and of the graph ops' sources.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Graph ops: sources per graph, distinct, drawn (seeded by `--seed`) among the vertices
    /// with an out-edge.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub sources: u16,
    /// Timed repetitions per run on a GPU (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Untimed warm-up launches before timing.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// GPU time budget per run in ms: fewer repetitions (at least 3) when one call is slow.
    #[arg(long, default_value_t = 2000.0, value_parser = non_negative)]
    pub budget_ms: f64,
    /// Wall time in ms of the batch of calls measured for energy: NVML's counter advances in
    /// coarse steps, so the batch runs until this much time has passed (at least one call).
    #[arg(long, default_value_t = 500.0, value_parser = non_negative)]
    pub energy_ms: f64,
    /// Bytes per device-to-device copy when measuring the copy bandwidth.
    #[arg(long, default_value_t = 1 << 30)]
    pub copy_bytes: usize,
    /// Largest relative error (to the sum of the magnitudes of a row's terms) that passes.
    #[arg(long, default_value_t = 1e-4, value_parser = non_negative)]
    pub tolerance: f64,
    /// Also time the tuned SpMV variants: `multi_phase` with other iteration factors,
    /// `consolidate` at the block and warp levels and with another threshold, `binning` with
    /// other thresholds. They are not candidates of `auto`'s oracle.
    #[arg(long)]
    pub variants: bool,
    /// Also time the schedules written outside lb in `examples/custom-schedules` (Busato &
    /// Bombieri's `direct_search`, `local_warp_search`, `block_search`) on SpMV and SpMM, through
    /// the generated `launch_custom`: rows of their own names, not candidates of `auto`.
    #[arg(long)]
    pub custom: bool,
    /// Also time every SpMV, SpMM, SSSP and BFS schedule through the unsafe unchecked launcher
    /// (`launch_with_unchecked`, kernels without bounds tests; for the graph ops the drivers
    /// `sssp_unchecked`/`bfs_unchecked`), reported as `<schedule>+unchecked` rows and summarised
    /// as the safe launchers' geomean cost over the unchecked ones. They are not candidates of
    /// `auto`'s oracle.
    #[arg(long)]
    pub unchecked: bool,
    /// Graph ops: also run every schedule through the host-driven loop that the
    /// device-resident drivers replaced (frontier sorted on the host, O(V) snapshot per
    /// iteration), as `<schedule>+host_loop` rows, and print per op the geomean of the
    /// device-resident wall time over the host loop's.
    #[arg(long)]
    pub host_loop: bool,
    /// SSSP and BFS on a GPU: record every launch of the first timed search from each source
    /// in the JSON (`steps`: source, frontier length, its tiles' atoms and longest tile where
    /// the reference knows them, kernel ms, the step's wall ms, schedule, levels run: one, or
    /// more for `auto`'s `block_levels`), to compare schedules step by step.
    #[arg(long)]
    pub steps: bool,
    /// Graph ops: traverse each matrix with every edge also reversed (the undirected graph
    /// traversal benchmarks use), so that a random source reaches most of a connected graph;
    /// by default the matrix is the directed graph, where on the generated power-law members a
    /// source with an out-edge typically dies out within a few edges. Not for the `road` family:
    /// its band of near-diagonal edges has a diameter that grows with the rows, so an undirected
    /// traversal there takes about as many iterations as there are vertices.
    #[arg(long)]
    pub undirected: bool,
    /// `nearfar`: the factor c of Near-Far's Δ = c · mean weight / mean degree.
    #[arg(long, default_value_t = 32.0, value_parser = positive_f32)]
    pub delta_factor: f32,
    /// `dobfs`: the switch's α and β as `ALPHA:BETA` (Beamer et al.'s 14:24 by default): pull
    /// when the frontier's out-edges exceed the unexplored edges over α, push again when the
    /// frontier shrinks below the vertices over β.
    #[arg(long, value_name = "ALPHA:BETA", default_value = "14:24", value_parser = direction)]
    pub direction: lb::algorithms::Direction,
    /// Instead of the per-call timings: N back-to-back SpMV calls of each schedule (and of
    /// cuSPARSE) on one stream, timed end to end on the host and replayed from CUDA graphs;
    /// reports wall µs per call next to the kernel time (docs/streams.md).
    #[arg(long = "loop", value_name = "N")]
    pub loop_calls: Option<usize>,
    /// Instead of the per-call timings: conjugate gradient (examples/cg.rs's solver) on the
    /// N × N × N 3-D Poisson matrix with each SpMV schedule, `auto` and cuSPARSE's SpMV in the
    /// same solver; reports iterations, the f64 residual and µs per iteration.
    #[arg(long = "cg", value_name = "N", value_parser = clap::value_parser!(u16).range(2..=400))]
    pub cg_grid: Option<u16>,
    /// Instead of the per-call timings: the ops (SpMV, SpMM) on N devices, the matrix split by
    /// a merge path and each iteration's result all-gathered into every device's input (one
    /// iteration of an iterative method), against the same kernel on one device in the same
    /// run; reports compute and exchange µs per iteration and the scaling. Several counts
    /// (`--devices 2,4`) run one after another on the first GPUs. N GPUs exchange through peer
    /// copies or NCCL (`--transport`); with `--sim` (or without a GPU) N simulators verify the
    /// results only. `--ops bfs,sssp` runs breadth-first search and shortest paths across the
    /// devices (`lb::algorithms::MultiBfs`, `MultiSssp`) from `--sources` sources against one
    /// device, each search checked against the host's reference. Default schedules:
    /// `merge_path`.
    #[arg(long = "devices", value_name = "N", value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(1..=64))]
    pub devices: Vec<u16>,
    /// With `--devices`: chunks per device to time, comma-separated (each device's share is
    /// launched in this many chunks, each exchanged while the next computes; default: the
    /// split's own choice).
    #[arg(long = "chunks", value_name = "C", value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(1..=256))]
    pub chunks: Vec<u16>,
    /// With `--devices`: how the all-gather travels between GPUs, comma-separated: `stores`
    /// (the kernels store their rows into every GPU's copy), `kernel` (a copy kernel on each GPU
    /// pushes its rows, after the kernels), `peer` (copy engines over peer access, after the
    /// kernels), `nccl` (NCCL broadcasts). Default: the group's own.
    #[arg(long = "transport", value_name = "T", value_delimiter = ',', value_parser = transport)]
    pub transports: Vec<Transport>,
    /// With `--devices` and `--ops bfs,sssp`: how the devices exchange the vertices they
    /// claimed in a level (round), comma-separated: `auto` (claim lists while a step claims few
    /// vertices, an all-reduce of the depths or distances otherwise), `lists` (every step's
    /// claims gathered into every device), `all-reduce` (every step an all-reduce). Default:
    /// `auto`.
    #[arg(long = "frontier-exchange", value_name = "E", value_delimiter = ',',
        value_parser = frontier_exchange)]
    pub frontier_exchanges: Vec<FrontierExchange>,
    /// With `--devices`: whether each device's products over its own columns run first, while
    /// the others' rows of the input are copied in, comma-separated `off`/`on` (`on`: the split
    /// is uploaded with `SplitOptions::local_columns_first` and the `loop` column runs its
    /// iterations in one `MultiCsr::iterate_async`). Default: `off`.
    #[arg(long = "local-first", value_name = "off|on", value_delimiter = ',', value_parser = on_off)]
    pub local_first: Vec<bool>,
    /// With `--devices`: how many atoms a row's end weighs when the matrix is split between
    /// the devices (`SplitOptions::row_weight`), comma-separated, one split per weight.
    /// Default: 1 (rows plus atoms).
    #[arg(long = "row-weight", value_name = "W", value_delimiter = ',')]
    pub row_weights: Vec<usize>,
    /// With `--devices`: also time the kernel on the whole matrix on the first device with its
    /// dense input in each of N buffers of the same values (the `x buffers` line): how much a
    /// kernel's time depends on where its input lies. Default: 0 (not timed).
    #[arg(long = "x-buffers", value_name = "N", default_value_t = 0)]
    pub x_buffers: usize,
    /// With `--devices`: also SpMV on a generated matrix this many times larger than the first
    /// GPU's memory (so one GPU cannot hold it), on the group only, verified row by row
    /// against f64 on every core of the host.
    #[arg(long = "oversize", value_name = "FACTOR", value_parser = oversize_factor)]
    pub oversize: Option<f64>,
    /// Instead of running anything: refit the thresholds of `auto`'s cold-start rule on these
    /// JSON-lines results of earlier runs (`--json`), leaving one matrix family out at a time.
    #[arg(long = "fit-rule", value_name = "FILE", num_args = 1..)]
    pub fit_rule: Vec<PathBuf>,
    /// Instead of running anything: draw the plots of `--plots DIR` from these JSON-lines
    /// results of earlier runs (`--json`), e.g. several calls' files of one corpus together.
    #[arg(long = "plots-from", value_name = "FILE", num_args = 1.., requires = "plots")]
    pub plots_from: Vec<PathBuf>,
    /// Skip cuSPARSE.
    #[arg(long)]
    pub no_cusparse: bool,
    /// Force the simulator even when a GPU is present.
    #[arg(long)]
    pub sim: bool,
    /// Write one JSON object per run to this file (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the PNG plots into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long)]
    pub quiet: bool,
}

/// A finite, non-negative number: a NaN tolerance would pass every comparison and turn
/// verification off, and a NaN or negative budget would make no sense.
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a finite number of at least 0")),
        Err(e) => Err(format!("`{text}` is not a number: {e}")),
    }
}

/// `--transport`: `stores`, `kernel`, `peer` or `nccl`.
fn transport(text: &str) -> Result<Transport, String> {
    match text {
        "stores" => Ok(Transport::PeerStores),
        "kernel" => Ok(Transport::PeerKernel),
        "peer" => Ok(Transport::PeerCopy),
        "nccl" => Ok(Transport::Nccl),
        _ => Err(format!(
            "`{text}` is not a transport: `stores`, `kernel`, `peer` or `nccl`"
        )),
    }
}

/// `--frontier-exchange`: `auto`, `lists` or `all-reduce`.
fn frontier_exchange(text: &str) -> Result<FrontierExchange, String> {
    match text {
        "auto" => Ok(FrontierExchange::Auto),
        "lists" => Ok(FrontierExchange::ClaimLists),
        "all-reduce" => Ok(FrontierExchange::AllReduce),
        _ => Err(format!(
            "`{text}` is not a frontier exchange: `auto`, `lists` or `all-reduce`"
        )),
    }
}

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("`{text}` is neither `on` nor `off`")),
    }
}

/// `--direction`: `ALPHA:BETA`, α at least 0 and β above 0 (either may be `inf`).
fn direction(text: &str) -> Result<lb::algorithms::Direction, String> {
    let (a, b) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not ALPHA:BETA (say 14:24)"))?;
    let number = |t: &str| {
        t.trim()
            .parse::<f64>()
            .map_err(|e| format!("`{t}` in `{text}` is not a number: {e}"))
    };
    let (alpha, beta) = (number(a)?, number(b)?);
    if alpha.is_nan() || beta.is_nan() || alpha < 0.0 || beta <= 0.0 {
        return Err(format!("`{text}`: α must be at least 0 and β above 0"));
    }
    Ok(lb::algorithms::Direction { alpha, beta })
}

/// `--oversize`: a factor above 1 (the matrix must not fit one GPU) and not absurd.
fn oversize_factor(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if (1.0..=16.0).contains(&v) && v > 1.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a factor above 1 and at most 16")),
        Err(e) => Err(format!("`{text}` is not a number: {e}")),
    }
}

/// A positive finite `f32` (`--delta-factor`).
fn positive_f32(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive finite number")),
        Err(e) => Err(format!("`{text}` is not a number: {e}")),
    }
}

/// The exit of a mode that reads earlier results instead of running (`--fit-rule`,
/// `--plots-from`): success, or the error on stderr and status 2.
fn offline(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lb-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !cli.fit_rule.is_empty() {
        return offline(fit::run(&cli.fit_rule));
    }
    if let (false, Some(dir)) = (cli.plots_from.is_empty(), &cli.plots) {
        let drawn = report::read_plot_points(&cli.plots_from)
            .and_then(|points| report::plots(dir, &points));
        return offline(drawn);
    }
    match run::run(&cli) {
        Ok(summary) if summary.failed == 0 => ExitCode::SUCCESS,
        Ok(summary) => {
            eprintln!(
                "lb-bench: {} run(s) failed verification or errored",
                summary.failed
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("lb-bench: {e}");
            ExitCode::from(2)
        }
    }
}
