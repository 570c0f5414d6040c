//! Breadth-first search by frontier expansion (`lb::algorithms::bfs`) under every
//! frontier schedule, checked against a sequential queue BFS.
//!
//! `cargo run --release --example bfs` builds the embedded default (a seeded power-law graph);
//! `cargo run --release --example bfs -- graph.mtx` reads a square Matrix Market file (the
//! values are ignored). `--vertices N` scales the
//! default graph, `--source S` picks the source (default 0).
//! The table shows iterations, traversed edges and traversed edges per second: kernel time on a
//! GPU, wall-clock time of the whole driver on the simulator.

mod common;
use common::{number, MAX_ROWS};
use lb::algorithms::{bfs, bfs_levels, schedules};
use lb::prelude::*;
use std::process::ExitCode;
use std::time::Instant;

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
                return Err("usage: bfs [graph.mtx] [--vertices N] [--source S]".to_string())
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

fn run(args: &Args) -> lb::Result<bool> {
    let (g, origin) = match &args.path {
        Some(path) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        None => (
            lb::generate::power_law(args.vertices, args.vertices, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
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
    let want = bfs_levels(&g, args.source);
    let reached = want.iter().filter(|&&d| d != u32::MAX).count();
    println!("reachable: {reached} vertices");

    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceCsr::upload(&dev, &g)?;
    println!(
        "{:<22} {:>10} {:>12} {:>8} {:>11} {:>12} {:>7}",
        "schedule", "iterations", "edges", "retries", "time (ms)", "MTEPS", "check"
    );
    let mut all_ok = true;
    for &schedule in schedules() {
        let start = Instant::now();
        let r = bfs(&dev, &dg, args.source, schedule)?;
        let wall_ms = start.elapsed().as_secs_f64() * 1e3;
        let ms = r.elapsed_ms.map_or(wall_ms, f64::from);
        let ok = r.depth == want;
        all_ok &= ok;
        println!(
            "{:<22} {:>10} {:>12} {:>8} {:>11.2} {:>12.2} {:>7}",
            schedule.name(),
            r.iterations,
            r.edges,
            r.retries,
            ms,
            r.edges as f64 / (ms * 1e-3) / 1e6,
            if ok { "ok" } else { "FAILED" }
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "bfs",
        parse_args(),
        run,
        "a schedule disagreed with the queue BFS",
    )
}
