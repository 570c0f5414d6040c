//! Single-source shortest paths by frontier relaxation (`lb::algorithms::sssp`) under every
//! frontier schedule, checked against Dijkstra with a binary heap.
//!
//! `cargo run --release --example sssp` builds the embedded default (a seeded power-law graph,
//! weights |w| of the generator's values); `cargo run --release --example sssp -- graph.mtx`
//! reads a square Matrix Market file (weights are the absolute values), and `--grid W` a W × W
//! grid of two-way streets of lengths 1 to 9 (a road network's long diameter: `Choice::Auto`'s
//! row then runs its small levels in one block, `block_levels`). `--vertices N` scales the
//! default graph, `--source S` picks the source (default 0), and `--near-far` adds a row of
//! `lb::algorithms::sssp_near_far` (Near-Far buckets, Δ from the weights) under each schedule.
//! The table shows iterations, traversed edges, kernel time (GPU) and wall-clock time of the whole
//! driver, traversed edges per second (on kernel time on a GPU, on wall time on the simulator),
//! and the host↔device bytes per iteration.

mod common;
#[path = "common/traversal.rs"]
mod traversal;
use lb::algorithms::{dijkstra, schedules, sssp, sssp_near_far, Choice, Delta};
use lb::prelude::*;
use std::process::ExitCode;

fn run(args: &traversal::Args) -> lb::Result<bool> {
    let mut g = traversal::graph(args)?;
    // Dijkstra and the relaxation both need nonnegative weights.
    for w in &mut g.values {
        *w = w.abs();
    }
    let want = dijkstra(&g, args.source);
    let reached = want.iter().filter(|d| d.is_finite()).count();
    println!("reachable: {reached} vertices");

    let dev = Device::default();
    println!("device: {}", dev.name());
    let dg = DeviceCsr::upload(&dev, &g)?;
    traversal::print_header();
    let mut all_ok = true;
    // f32 sums along different paths of equal length may round differently: compare with a
    // relative tolerance.
    let matches = |dist: &[f32]| {
        dist.len() == want.len()
            && dist
                .iter()
                .zip(&want)
                .all(|(&got, &w)| got == w || (got - w).abs() <= 1e-5 * w.abs())
    };
    for &schedule in schedules() {
        let r = sssp(&dev, &dg, args.source, schedule)?;
        let ok = matches(&r.dist);
        all_ok &= ok;
        traversal::print_row(schedule.name(), &r.run, ok);
        if args.near_far {
            let nf = sssp_near_far(&dev, &dg, args.source, schedule, Delta::default())?;
            let ok = matches(&nf.dist);
            all_ok &= ok;
            traversal::print_row(&format!("  near-far ({} div)", nf.divisions), &nf.run, ok);
        }
    }
    // `Choice::Auto`: `step_schedule`'s pick for each step's frontier.
    let r = sssp(&dev, &dg, args.source, Choice::Auto)?;
    all_ok &= traversal::print_auto_row(&r.run, matches(&r.dist));
    Ok(all_ok)
}

fn main() -> ExitCode {
    common::exit(
        "sssp",
        traversal::parse_args("sssp"),
        run,
        "a schedule disagreed with Dijkstra",
    )
}
