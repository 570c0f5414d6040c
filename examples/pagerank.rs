//! PageRank by power iteration (`lb::algorithms::pagerank`), every step on the device and
//! without atomics, under every schedule, checked against a plain f64 power iteration on the
//! host (`lb::algorithms::pagerank_reference`).
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
//! `(1 - d)/n + d·(sum + dangling/n)`, and the L1 change, read by the host as one `f32`. The
//! table shows the iterations, the L1 distance to the host's ranks, the time per iteration
//! (kernel time on a GPU, wall-clock time on the simulator) and the host↔device bytes per
//! iteration.

mod common;
#[path = "common/tolerance.rs"]
mod tolerance;
use common::{number, MAX_ROWS};
use lb::algorithms::{pagerank, pagerank_pull, pagerank_reference, PageRankGraph, PageRankOptions};
use lb::prelude::*;
use std::process::ExitCode;
use tolerance::tolerance;

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

/// `g` without the out-edges of every 16th vertex: real graphs have dangling vertices (pages
/// without links), whose rank the iteration spreads over every vertex.
fn with_dangling(g: &Csr<f32>) -> lb::Result<Csr<f32>> {
    let edges = (0..g.num_rows).filter(|u| u % 16 != 0).flat_map(|u| {
        g.row(u)
            .map(move |nz| (u, g.col_indices[nz] as usize, g.values[nz]))
    });
    Csr::from_triplets(g.num_rows, g.num_cols, edges.collect())
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
    let dev = Device::default();
    let dg = PageRankGraph::upload(&dev, &g)?;
    let dangling = (0..g.num_rows).filter(|&u| g.row(u).is_empty()).count();
    println!(
        "graph: {} vertices ({dangling} without out-edges), {} edges {origin}",
        g.num_rows,
        g.nnz()
    );
    let opts = PageRankOptions {
        tolerance: args.tol,
        max_iterations: args.max_iters,
        ..PageRankOptions::default()
    };
    let (want, host_iters) = pagerank_reference(&g, opts);
    println!(
        "host (f64): {host_iters} iterations to an L1 change below {:e}",
        args.tol
    );

    println!("device: {}", dev.name());
    println!(
        "{:<22} {:>10} {:>14} {:>14} {:>7} {:>7}",
        "schedule", "iterations", "L1 to host", "ms/iteration", "B/iter", "check"
    );
    // Both iterations stop within `tol` of each other's iterate; f32 rounding adds far less.
    let allowed = 10.0 * args.tol;
    let mut all_ok = true;
    for &schedule in pagerank_pull::SCHEDULES {
        let r = pagerank(&dev, &dg, schedule, opts)?;
        let iters = r.run.iterations.max(1);
        let ms = r.run.elapsed_ms.map_or(r.run.wall_ms, f64::from);
        let distance: f64 = r
            .rank
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (f64::from(a) - b).abs())
            .sum();
        let ok = distance <= allowed;
        all_ok &= ok;
        println!(
            "{:<22} {:>10} {:>14.3e} {:>14.3} {:>7.1} {:>7}",
            schedule.name(),
            r.run.iterations,
            distance,
            ms / iters as f64,
            r.run.bytes_per_iteration(),
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
