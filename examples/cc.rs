//! Connected components by hooking and pointer jumping (`lb::algorithms::connected_components`)
//! under every schedule, checked against union-find (`components_union_find`).
//!
//! `cargo run --release --example cc` labels the embedded default (a seeded sparse power-law
//! graph, two edges per vertex on average, so that it falls into many components);
//! `cargo run --release --example cc -- graph.mtx` reads a square Matrix Market file (entry
//! (u, v) is an edge, taken both ways; values are ignored). `--vertices N` scales the default.
//! The table shows the iterations (launches), kernel time (GPU) and wall-clock time of the whole
//! driver, and the host↔device bytes per iteration (the changed stamp and the error flag).

mod common;
use common::{number, MAX_ROWS};
use lb::algorithms::{cc_hook, components_union_find, connected_components};
use lb::prelude::*;
use std::process::ExitCode;

struct Args {
    path: Option<String>,
    vertices: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
        vertices: 5_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--vertices" => args.vertices = number(&mut it, "--vertices", 1..=MAX_ROWS)?,
            "-h" | "--help" => return Err("usage: cc [graph.mtx] [--vertices N]".to_string()),
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
            lb::generate::power_law(args.vertices, args.vertices, 2.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    if g.num_rows != g.num_cols {
        return Err(lb::Error::Shape(format!(
            "a graph's adjacency matrix is square, this one is {} × {}",
            g.num_rows, g.num_cols
        )));
    }
    let want = components_union_find(&g);
    let count = (0..want.len()).filter(|&u| want[u] as usize == u).count();
    println!(
        "graph: {} vertices, {} edges {origin}; {count} components (union-find)",
        g.num_rows,
        g.nnz()
    );
    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceCsr::upload(&dev, &g)?;
    println!(
        "{:<22} {:>10} {:>11} {:>11} {:>11} {:>7} {:>7}",
        "schedule", "iterations", "components", "kernel (ms)", "wall (ms)", "B/iter", "check"
    );
    let mut all_ok = true;
    for &schedule in cc_hook::SCHEDULES {
        let r = connected_components(&dev, &dg, schedule)?;
        let ok = r.labels == want;
        all_ok &= ok;
        println!(
            "{:<22} {:>10} {:>11} {:>11} {:>11.2} {:>7.1} {:>7}",
            schedule.name(),
            r.run.iterations,
            r.components,
            r.run
                .elapsed_ms
                .map_or_else(|| "n/a".to_string(), |k| format!("{k:.2}")),
            r.run.wall_ms,
            r.run.bytes_per_iteration(),
            if ok { "ok" } else { "FAILED" }
        );
    }
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "cc",
        parse_args(),
        run,
        "a schedule's labels disagreed with union-find",
    )
}
