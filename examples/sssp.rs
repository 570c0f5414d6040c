//! Single-source shortest paths by frontier relaxation (`lb::algorithms::sssp`) under every
//! frontier schedule, checked against Dijkstra with a binary heap.
//!
//! `cargo run --release --example sssp` builds the embedded default (a seeded power-law graph,
//! weights |w| of the generator's values); `cargo run --release --example sssp -- graph.mtx`
//! reads a square Matrix Market file (weights are the absolute values). `--vertices N` scales the
//! default graph, `--source S` picks the source (default 0).
//! The table shows iterations, traversed edges, kernel time (GPU) and wall-clock time of the whole
//! driver, traversed edges per second (on kernel time on a GPU, on wall time on the simulator),
//! and the host↔device bytes per iteration.

mod common;
use common::{number, MAX_ROWS};
use lb::algorithms::{dijkstra, schedules, sssp};
use lb::prelude::*;
use std::process::ExitCode;

struct Args {
    path: Option<String>,
    vertices: usize,
    source: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
        vertices: 5_000,
        source: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--vertices" => args.vertices = number(&mut it, "--vertices", 1..=MAX_ROWS)?,
            "--source" => args.source = number(&mut it, "--source", 0..=MAX_ROWS - 1)?,
            "-h" | "--help" => {
                return Err("usage: sssp [graph.mtx] [--vertices N] [--source S]".to_string())
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

fn run(args: &Args) -> lb::Result<bool> {
    let (mut g, origin) = match &args.path {
        Some(path) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        None => (
            lb::generate::power_law(args.vertices, args.vertices, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    // Dijkstra and the relaxation both need nonnegative weights.
    for w in &mut g.values {
        *w = w.abs();
    }
    println!(
        "graph: {} vertices, {} edges {origin}; source {}",
        g.num_rows,
        g.nnz(),
        args.source
    );
    if args.source >= g.num_rows {
        return Err(lb::Error::Shape(format!(
            "source {} is not a vertex",
            args.source
        )));
    }
    let want = dijkstra(&g, args.source);
    let reached = want.iter().filter(|d| d.is_finite()).count();
    println!("reachable: {reached} vertices");

    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceCsr::upload(&dev, &g)?;
    println!(
        "{:<22} {:>10} {:>12} {:>8} {:>11} {:>11} {:>12} {:>7} {:>7}",
        "schedule",
        "iterations",
        "edges",
        "retries",
        "kernel (ms)",
        "wall (ms)",
        "MTEPS",
        "B/iter",
        "check"
    );
    let mut all_ok = true;
    for &schedule in schedules() {
        let r = sssp(&dev, &dg, args.source, schedule)?;
        // Kernel time on a GPU; the simulator has none, so its rate is on wall time.
        let ms = r.elapsed_ms.map_or(r.wall_ms, f64::from);
        // f32 sums along different paths of equal length may round differently: compare with a
        // relative tolerance.
        let ok = r.dist.len() == want.len()
            && r.dist
                .iter()
                .zip(&want)
                .all(|(&got, &w)| got == w || (got - w).abs() <= 1e-5 * w.abs());
        all_ok &= ok;
        println!(
            "{:<22} {:>10} {:>12} {:>8} {:>11} {:>11.2} {:>12.2} {:>7.1} {:>7}",
            schedule.name(),
            r.iterations,
            r.edges,
            r.retries,
            r.elapsed_ms
                .map_or_else(|| "n/a".to_string(), |k| format!("{k:.2}")),
            r.wall_ms,
            r.edges as f64 / (ms * 1e-3) / 1e6,
            r.bytes_per_iteration(),
            if ok { "ok" } else { "FAILED" }
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "sssp",
        parse_args(),
        run,
        "a schedule disagreed with Dijkstra",
    )
}
