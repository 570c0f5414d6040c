//! `--devices N --ops bfs`: breadth-first search across N devices
//! (`lb::algorithms::MultiBfs`) from `--sources` seeded random sources, against the same
//! search on the group's first device alone in the same run, each result checked against a
//! queue BFS on the host.
//!
//! Columns, each a sum over the sources of the median wall time of `--reps` searches (after
//! `--warmup`): `wall ms` on the group, `one ms` on its first device, `scaling` their ratio,
//! `levels` and `GTEPS` (edges expanded over the group's wall time, summed over the sources),
//! and `bfs ms`: the one-device driver `lb::algorithms::bfs_into` with the same schedule on
//! the first device (what a graph that fits one device would use instead).

use std::io::Write;

use lb::algorithms::{bfs_into, bfs_levels, BfsResult, MultiBfs, MultiBfsResult};
use lb::multi::{Devices, MultiCsr};
use lb::prelude::*;
use serde::Serialize;

use crate::corpus::Matrix;
use crate::graph::{skip_reason, sources, undirected};
use crate::Cli;

#[derive(Serialize)]
struct Record {
    matrix: String,
    vertices: usize,
    edges: usize,
    op: &'static str,
    schedule: String,
    devices: usize,
    sources: Vec<usize>,
    levels: usize,
    edges_expanded: u64,
    wall_ms: f64,
    one_device_ms: f64,
    single_driver_ms: f64,
    scaling: f64,
    gteps: f64,
    error: Option<String>,
}

/// Runs BFS on every square matrix under every schedule; returns how many runs failed.
pub fn run(
    group: &Devices,
    one: &Devices,
    matrices: &[Matrix],
    cli: &Cli,
    schedules: &[Schedule],
    mut json: Option<&mut dyn Write>,
) -> usize {
    println!(
        "{:<40} {:<6} {:<16} {:>7} {:>7} {:>10} {:>10} {:>8} {:>8} {:>10}",
        "graph",
        "op",
        "schedule",
        "devices",
        "levels",
        "wall ms",
        "one ms",
        "scaling",
        "GTEPS",
        "bfs ms"
    );
    let gpu = group.devices()[0].is_gpu();
    let mut failed = 0;
    for m in matrices {
        if let Some(why) = skip_reason(m, gpu, cli.undirected) {
            eprintln!("lb-bench: bfs on {} skipped: {why}", m.name);
            continue;
        }
        let graph = if cli.undirected {
            undirected(&m.csr)
        } else {
            Ok(m.csr.clone())
        };
        for &schedule in schedules {
            let mut record = Record {
                matrix: m.name.clone(),
                vertices: m.csr.num_rows,
                edges: m.csr.nnz(),
                op: "bfs",
                schedule: schedule.to_string(),
                devices: group.count(),
                sources: Vec::new(),
                levels: 0,
                edges_expanded: 0,
                wall_ms: 0.0,
                one_device_ms: 0.0,
                single_driver_ms: 0.0,
                scaling: f64::NAN,
                gteps: f64::NAN,
                error: None,
            };
            let outcome = graph
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|g| measure((group, one), g, schedule, cli, &mut record));
            if let Err(e) = outcome {
                record.error = Some(e);
                failed += 1;
            }
            print(&record);
            if let Some(w) = json.as_mut() {
                let line = serde_json::to_string(&record).expect("records serialize");
                let _ = writeln!(w, "{line}");
            }
        }
    }
    failed
}

/// The median wall time of `--reps` searches from `source` with `bfs` (after `--warmup`),
/// and the levels and edges of a search; an error where a search's depths are not `want`.
fn time(
    bfs: &mut MultiBfs,
    source: usize,
    schedule: Schedule,
    want: &[u32],
    cli: &Cli,
) -> Result<(f64, usize, u64), String> {
    let mut walls = Vec::new();
    // The depths arrive in page-locked memory that every search reuses, as the one-device
    // benchmarks' do (`bfs_into`).
    let mut r = MultiBfsResult::<HostBuffer<u32>>::default();
    for i in 0..cli.warmup + cli.reps.max(1) {
        bfs.search_into(source, schedule, &mut r)
            .map_err(|e| e.to_string())?;
        if *r.depth != *want {
            return Err(format!("source {source}: depths differ from a queue BFS"));
        }
        if i >= cli.warmup {
            walls.push(r.wall_ms);
        }
    }
    walls.sort_by(f64::total_cmp);
    Ok((walls[walls.len() / 2], r.levels, r.edges))
}

/// Times and checks the searches from `record`'s sources on the group and on one device.
fn measure(
    (group, one): (&Devices, &Devices),
    g: &Csr<f32>,
    schedule: Schedule,
    cli: &Cli,
    record: &mut Record,
) -> Result<(), String> {
    let err = |e: lb::Error| e.to_string();
    let split = MultiCsr::upload(group, g).map_err(err)?;
    let alone = MultiCsr::upload(one, g).map_err(err)?;
    let (mut bfs, mut bfs_alone) = (
        MultiBfs::new(&split).map_err(err)?,
        MultiBfs::new(&alone).map_err(err)?,
    );
    let dev = &one.devices()[0];
    let single_graph = DeviceCsr::upload(dev, g).map_err(err)?;
    record.sources = sources(g, usize::from(cli.sources), cli.seed);
    for &source in &record.sources {
        let want = bfs_levels(g, source);
        let (wall, levels, edges) = time(&mut bfs, source, schedule, &want, cli)?;
        let (alone_wall, ..) = time(&mut bfs_alone, source, schedule, &want, cli)?;
        record.levels += levels;
        record.edges_expanded += edges;
        record.wall_ms += wall;
        record.one_device_ms += alone_wall;
        record.single_driver_ms += single(&single_graph, source, schedule, &want, cli)?;
    }
    record.scaling = record.one_device_ms / record.wall_ms;
    record.gteps = record.edges_expanded as f64 / (record.wall_ms * 1e6);
    Ok(())
}

/// The median wall time of `--reps` searches from `source` by the one-device driver (after
/// `--warmup`); an error where a search's depths are not `want`.
fn single(
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    want: &[u32],
    cli: &Cli,
) -> Result<f64, String> {
    let mut walls = Vec::new();
    let mut r = BfsResult::<HostBuffer<u32>>::default();
    for i in 0..cli.warmup + cli.reps.max(1) {
        bfs_into(g.device(), g, source, schedule, &mut r).map_err(|e| e.to_string())?;
        if *r.depth != *want {
            return Err(format!(
                "source {source}: the one-device driver's depths differ from a queue BFS"
            ));
        }
        if i >= cli.warmup {
            walls.push(r.run.wall_ms);
        }
    }
    walls.sort_by(f64::total_cmp);
    Ok(walls[walls.len() / 2])
}

fn print(r: &Record) {
    println!(
        "{:<40} {:<6} {:<16} {:>7} {:>7} {:>10.2} {:>10.2} {:>8.2} {:>8.3} {:>10.2}{}",
        r.matrix,
        r.op,
        r.schedule,
        r.devices,
        r.levels,
        r.wall_ms,
        r.one_device_ms,
        r.scaling,
        r.gteps,
        r.single_driver_ms,
        r.error
            .as_ref()
            .map_or(String::new(), |e| format!("  error: {e}"))
    );
}
