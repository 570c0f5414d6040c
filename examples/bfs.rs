//! Breadth-first search by frontier expansion (`lb::algorithms::bfs`) under every
//! frontier schedule, checked against a sequential queue BFS.
//!
//! `cargo run --release --example bfs` builds the embedded default (a seeded power-law graph);
//! `cargo run --release --example bfs -- graph.mtx` reads a square Matrix Market file (the
//! values are ignored), and `--grid W` a W × W grid of two-way streets (a road network's long
//! diameter: `Choice::Auto`'s row then runs its small levels in one block, `block_levels`).
//! `--vertices N` scales the default graph, `--source S` picks the source (default 0), `--undirected` adds every edge
//! reversed, and `--direction-optimizing` runs `lb::algorithms::bfs_direction_optimizing` (Beamer
//! et al.'s push/pull switch, α = 14, β = 24) after each schedule's push BFS, as a
//! `<schedule> do p/q` row (p steps pushed, q pulled) checked against the same depths.
//! The table shows iterations, traversed edges, kernel time (GPU) and wall-clock time of the whole
//! driver, traversed edges per second (on kernel time on a GPU, on wall time on the simulator),
//! and the host↔device bytes per iteration.

mod common;
#[path = "common/traversal.rs"]
mod traversal;
use lb::algorithms::{
    bfs, bfs_direction_optimizing, bfs_levels, schedules, Choice, Direction, DoBfsGraph,
};
use lb::prelude::*;
use std::process::ExitCode;

fn run(args: &traversal::Args) -> lb::Result<bool> {
    let g = traversal::graph(args)?;
    let want = bfs_levels(&g, args.source);
    let reached = want.iter().filter(|&&d| d != u32::MAX).count();
    println!("reachable: {reached} vertices");

    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceCsr::upload(&dev, &g)?;
    let directed = if args.direction_optimizing {
        Some(DoBfsGraph::upload(&dev, &g)?)
    } else {
        None
    };
    traversal::print_header();
    let mut all_ok = true;
    for &schedule in schedules() {
        let r = bfs(&dev, &dg, args.source, schedule)?;
        let ok = r.depth == want;
        all_ok &= ok;
        traversal::print_row(schedule.name(), &r.run, ok);
        if let Some(directed) = &directed {
            let d = bfs_direction_optimizing(
                &dev,
                directed,
                args.source,
                schedule,
                Direction::default(),
            )?;
            let ok = d.depth == want;
            all_ok &= ok;
            let label = format!(
                "{} do {}/{}",
                schedule.name(),
                d.push_iterations,
                d.pull_iterations
            );
            traversal::print_row(&label, &d.run, ok);
        }
    }
    // `Choice::Auto`: `step_schedule`'s pick for each step's frontier.
    let r = bfs(&dev, &dg, args.source, Choice::Auto)?;
    all_ok &= traversal::print_auto_row(&r.run, r.depth == want);
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "bfs",
        traversal::parse_args("bfs"),
        run,
        "a schedule disagreed with the queue BFS",
    )
}
