//! PageRank by power iteration, every step on the device and without atomics, under every
//! schedule, checked against a plain f64 power iteration on the host.
//!
//! `cargo run --release --example pagerank` ranks the embedded default (a seeded power-law
//! graph); `cargo run --release --example pagerank -- graph.mtx` reads a square Matrix Market
//! file (entry (u, v) is an edge u → v; values are ignored). `--vertices N` scales the default
//! graph, `--tol T` stops when the ranks change by less than T in the L1 norm (default 1e-5),
//! `--max-iters N` bounds the iterations (default 200).
//!
//! One iteration is three launches: the dangling vertices' rank mass, the pull over the edges into
//! each vertex (tiles are the columns of the graph's CSC, so each vertex sums its in-edges and
//! no two threads write one rank), whose epilogue adds the teleport and dangling terms
//! `(1 - d)/n + d·(sum + dangling/n)`, and the L1 change. The table shows the iterations, the L1
//! distance to the host's ranks and the time per iteration: kernel time on a GPU, wall-clock time
//! on the simulator.

mod common;
#[path = "common/tolerance.rs"]
mod tolerance;
use common::{number, MAX_ROWS};
use lb::prelude::*;
use std::process::ExitCode;
use std::time::Instant;
use tolerance::tolerance;

/// The damping factor: the probability of following an edge rather than teleporting.
const DAMPING: f32 = 0.85;

/// The next rank of vertex `v`: `d` times the rank its in-neighbours pass on (each its rank over
/// its out-degree), plus the teleport `(1 - d)/n` and the dangling vertices' mass spread over
/// every vertex, added once per vertex by the epilogue after the sum is complete.
#[load_balanced(schedule = "auto", reduce = "sum", output = "next",
    epilogue = |_v, sum| (1.0 - d) * inv_n + d * (sum + dangling[0] * inv_n))]
fn pull(
    g: &Csc<f32>,
    rank: &[f32],
    inv_degree: &[f32],
    dangling: &[f32],
    d: f32,
    inv_n: f32,
    #[atom] e: usize,
) -> f32 {
    let u = g.row_indices[e] as usize;
    rank[u] * inv_degree[u]
}

/// out[0] = the rank of the vertices without out-edges (`is_dangling[i]` is 1 or 0), over a tile
/// set of one row holding every vertex: `nonzero_split` adds equal shares in a fixed order.
#[load_balanced(schedule = "nonzero_split", reduce = "sum", output = "out")]
fn dangling_mass(_all: &Csr<f32>, rank: &[f32], is_dangling: &[f32], #[atom] i: usize) -> f32 {
    rank[i] * is_dangling[i]
}

/// out[0] = Σ |next[i] − rank[i]|, the L1 change of an iteration.
#[load_balanced(schedule = "nonzero_split", reduce = "sum", output = "out")]
fn l1_change(_all: &Csr<f32>, next: &[f32], rank: &[f32], #[atom] i: usize) -> f32 {
    (next[i] - rank[i]).abs()
}

struct Args {
    path: Option<String>,
    vertices: usize,
    tol: f64,
    max_iters: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
        vertices: 3_000,
        tol: 1e-5,
        max_iters: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--vertices" => args.vertices = number(&mut it, "--vertices", 1..=MAX_ROWS)?,
            "--tol" => args.tol = tolerance(&mut it)?,
            "--max-iters" => args.max_iters = number(&mut it, "--max-iters", 1..=100_000)?,
            "-h" | "--help" => {
                return Err(
                    "usage: pagerank [graph.mtx] [--vertices N] [--tol T] [--max-iters N]"
                        .to_string(),
                )
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

/// The host's PageRank in f64, by the same iteration (pushing each vertex's rank along its
/// out-edges): the ranks and the iterations it took.
fn host_pagerank(g: &Csr<f32>, tol: f64, max_iters: usize) -> (Vec<f64>, usize) {
    let n = g.num_rows;
    let d = f64::from(DAMPING);
    let mut rank = vec![1.0 / n as f64; n];
    for iter in 1..=max_iters {
        let dangling: f64 = (0..n)
            .filter(|&u| g.row(u).is_empty())
            .map(|u| rank[u])
            .sum();
        let mut next = vec![(1.0 - d) / n as f64 + d * dangling / n as f64; n];
        for (u, &r) in rank.iter().enumerate() {
            let share = d * r / g.row(u).len().max(1) as f64;
            for nz in g.row(u) {
                next[g.col_indices[nz] as usize] += share;
            }
        }
        let change: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
        rank = next;
        if change < tol {
            return (rank, iter);
        }
    }
    (rank, max_iters)
}

/// `g` without the out-edges of every 16th vertex: real graphs have dangling vertices (pages
/// without links), whose rank the iteration spreads over every vertex.
fn with_dangling(g: &Csr<f32>) -> lb::Result<Csr<f32>> {
    let edges = (0..g.num_rows).filter(|u| u % 16 != 0).flat_map(|u| {
        g.row(u)
            .map(move |nz| (u, g.col_indices[nz] as usize, g.values[nz]))
    });
    Csr::from_triplets(g.num_rows, g.num_cols, edges.collect())
}

/// A tile set of one row holding the atoms `0..n`: only its shape matters.
fn one_row(n: usize) -> lb::Result<Csr<f32>> {
    Csr::new(1, n, vec![0, n], (0..n as u32).collect(), vec![0.0; n])
}

/// The graph on the device: its CSC (tiles are the vertices' in-edges), the one-row tile set of
/// the vector sums, each vertex's inverse out-degree (0 without out-edges) and dangling flag.
struct DeviceGraph {
    g: DeviceCsc<f32>,
    all: DeviceCsr<f32>,
    inv_degree: DeviceBuffer<f32>,
    is_dangling: DeviceBuffer<f32>,
    n: usize,
}

impl DeviceGraph {
    fn upload(dev: &Device, g: &Csr<f32>) -> lb::Result<DeviceGraph> {
        let n = g.num_rows;
        let degree: Vec<usize> = (0..n).map(|u| g.row(u).len()).collect();
        let inv_degree: Vec<f32> = degree
            .iter()
            .map(|&k| if k == 0 { 0.0 } else { 1.0 / k as f32 })
            .collect();
        let is_dangling: Vec<f32> = degree
            .iter()
            .map(|&k| f32::from(u8::from(k == 0)))
            .collect();
        Ok(DeviceGraph {
            g: DeviceCsc::upload(dev, &g.to_csc()?)?,
            all: DeviceCsr::upload(dev, &one_row(n)?)?,
            inv_degree: dev.upload(&inv_degree)?,
            is_dangling: dev.upload(&is_dangling)?,
            n,
        })
    }
}

/// The device's ranks with the pull under `schedule`, the iterations and the milliseconds they
/// took (the kernels' on a GPU, the wall clock on the simulator).
fn device_pagerank(
    dev: &Device,
    dg: &DeviceGraph,
    schedule: Schedule,
    args: &Args,
) -> lb::Result<(Vec<f32>, usize, f64)> {
    let n = dg.n;
    let mut rank = dev.upload(&vec![1.0 / n as f32; n])?;
    let mut next = dev.zeros::<f32>(n)?;
    let (mut dangling, mut change) = (dev.zeros::<f32>(1)?, dev.zeros::<f32>(1)?);
    let (d, inv_n) = (DAMPING, 1.0 / n as f32);
    let start = Instant::now();
    let mut kernel_ms = 0.0;
    let mut iters = args.max_iters;
    for iter in 1..=args.max_iters {
        let launches = [
            dangling_mass::launch(dev, &dg.all, &rank, &dg.is_dangling, &mut dangling)?,
            pull::launch_with(
                dev,
                schedule,
                &dg.g,
                &rank,
                &dg.inv_degree,
                &dangling,
                d,
                inv_n,
                &mut next,
            )?,
            l1_change::launch(dev, &dg.all, &next, &rank, &mut change)?,
        ];
        kernel_ms += launches
            .iter()
            .map(|l| l.elapsed_ms.map_or(0.0, f64::from))
            .sum::<f64>();
        std::mem::swap(&mut rank, &mut next);
        if f64::from(dev.download(&change)?[0]) < args.tol {
            iters = iter;
            break;
        }
    }
    let ms = if dev.is_gpu() {
        kernel_ms
    } else {
        start.elapsed().as_secs_f64() * 1e3
    };
    Ok((dev.download(&rank)?, iters, ms))
}

fn run(args: &Args) -> lb::Result<bool> {
    let (g, origin) = match &args.path {
        Some(path) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        None => (
            with_dangling(&lb::generate::power_law(
                args.vertices,
                args.vertices,
                8.0,
                42,
            ))?,
            "(seeded power law, every 16th vertex without out-edges)".to_string(),
        ),
    };
    if g.num_rows != g.num_cols || g.num_rows == 0 {
        return Err(lb::Error::Shape(format!(
            "PageRank needs a square graph with at least one vertex, this one is {} × {}",
            g.num_rows, g.num_cols
        )));
    }
    let dangling = (0..g.num_rows).filter(|&u| g.row(u).is_empty()).count();
    println!(
        "graph: {} vertices ({dangling} without out-edges), {} edges {origin}",
        g.num_rows,
        g.nnz()
    );
    let (want, host_iters) = host_pagerank(&g, args.tol, args.max_iters);
    println!(
        "host (f64): {host_iters} iterations to an L1 change below {:e}",
        args.tol
    );

    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceGraph::upload(&dev, &g)?;
    println!(
        "{:<22} {:>10} {:>14} {:>14} {:>7}",
        "schedule", "iterations", "L1 to host", "ms/iteration", "check"
    );
    // Both iterations stop within `tol` of each other's iterate; f32 rounding adds far less.
    let allowed = 10.0 * args.tol;
    let mut all_ok = true;
    for &schedule in pull::SCHEDULES {
        let (got, iters, ms) = device_pagerank(&dev, &dg, schedule, args)?;
        let distance: f64 = got
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (f64::from(a) - b).abs())
            .sum();
        let ok = distance <= allowed;
        all_ok &= ok;
        println!(
            "{:<22} {:>10} {:>14.3e} {:>14.3} {:>7}",
            schedule.name(),
            iters,
            distance,
            ms / iters as f64,
            if ok { "ok" } else { "FAILED" }
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "pagerank",
        parse_args(),
        run,
        "a schedule's ranks disagreed with the host's",
    )
}
