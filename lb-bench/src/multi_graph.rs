//! `--devices N --ops bfs,sssp`: breadth-first search and shortest paths across N devices
//! (`lb::algorithms::MultiBfs`, `MultiSssp`) from `--sources` seeded random sources, against the
//! same search on the group's first device alone in the same run, each result checked against
//! the host's reference (a queue BFS; Dijkstra, within f32 rounding). SSSP's weights are the
//! absolute values of the matrix's.
//!
//! Each search runs once per `--frontier-exchange` (`exchange`; `listed`: the levels or rounds
//! whose claims travelled as lists, summed over the sources).
//! Columns, each a sum over the sources of the median wall time of `--reps` searches (after
//! `--warmup`): `wall ms` on the group (and of it `compute ms`, the expansions or relaxations,
//! and `exch ms`, the exchanges with the frontiers' collection, each from the run of median
//! wall time), `one ms` on its first device, `scaling` their ratio,
//! `steps` (BFS levels or SSSP rounds) and `GTEPS` (edges expanded or relaxed over the group's
//! wall time, summed over the sources), and `driver ms`: the one-device driver
//! (`lb::algorithms::bfs_into`, `sssp`) with the same schedule on the first device (what a graph
//! that fits one device would use instead).

use std::io::Write;

use lb::algorithms::{
    bfs_into, bfs_levels, dijkstra, sssp, BfsResult, FrontierExchange, MultiBfs, MultiBfsResult,
    MultiSssp,
};
use lb::multi::{Devices, MultiCsr};
use lb::prelude::*;
use serde::Serialize;

use crate::corpus::Matrix;
use crate::graph::{dist_error, skip_reason, sources, undirected};
use crate::{Cli, Op};

#[derive(Serialize)]
struct Record {
    matrix: String,
    vertices: usize,
    edges: usize,
    op: &'static str,
    schedule: String,
    /// How the devices exchanged their claims (`--frontier-exchange`).
    exchange: &'static str,
    /// Levels (rounds) whose claims travelled as lists, summed over the sources.
    claim_list_levels: usize,
    devices: usize,
    sources: Vec<usize>,
    steps: usize,
    edges_expanded: u64,
    wall_ms: f64,
    /// Of `wall_ms`, the expansions (BFS) or relaxations (SSSP) of every step.
    compute_ms: f64,
    /// Of `wall_ms`, the exchanges and frontier collections of every step.
    exchange_ms: f64,
    one_device_ms: f64,
    single_driver_ms: f64,
    scaling: f64,
    gteps: f64,
    error: Option<String>,
}

/// One search's outcome: its wall time (and of it the expansions' and the exchanges'), steps,
/// edges and levels by claim lists.
struct Searched {
    wall_ms: f64,
    compute_ms: f64,
    exchange_ms: f64,
    steps: usize,
    edges: u64,
    listed: usize,
}

/// Runs `op` (BFS or SSSP) on every square matrix under every schedule; returns how many runs
/// failed.
pub fn run(
    (group, one): (&Devices, &Devices),
    op: Op,
    matrices: &[Matrix],
    cli: &Cli,
    schedules: &[Schedule],
    mut json: Option<&mut dyn Write>,
) -> usize {
    println!(
        "{:<40} {:<6} {:<16} {:<10} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10}",
        "graph",
        "op",
        "schedule",
        "exchange",
        "devices",
        "steps",
        "listed",
        "wall ms",
        "compute ms",
        "exch ms",
        "one ms",
        "scaling",
        "GTEPS",
        "driver ms"
    );
    let gpu = group.devices()[0].is_gpu();
    let mut failed = 0;
    for m in matrices {
        if let Some(why) = skip_reason(m, gpu, cli.undirected) {
            eprintln!("lb-bench: {} on {} skipped: {why}", op.name(), m.name);
            continue;
        }
        let graph = if cli.undirected {
            undirected(&m.csr)
        } else {
            Ok(m.csr.clone())
        };
        let graph = graph.map(|mut g| {
            g.values.iter_mut().for_each(|w| *w = w.abs());
            g
        });
        let exchanges = match cli.frontier_exchanges.as_slice() {
            [] => vec![FrontierExchange::Auto],
            chosen => chosen.to_vec(),
        };
        for (schedule, exchange) in schedules
            .iter()
            .flat_map(|&s| exchanges.iter().map(move |&e| (s, e)))
        {
            let mut record = Record {
                matrix: m.name.clone(),
                vertices: m.csr.num_rows,
                edges: m.csr.nnz(),
                op: op.name(),
                schedule: schedule.to_string(),
                exchange: exchange_name(exchange),
                claim_list_levels: 0,
                devices: group.count(),
                sources: Vec::new(),
                steps: 0,
                edges_expanded: 0,
                wall_ms: 0.0,
                compute_ms: 0.0,
                exchange_ms: 0.0,
                one_device_ms: 0.0,
                single_driver_ms: 0.0,
                scaling: f64::NAN,
                gteps: f64::NAN,
                error: None,
            };
            let outcome = graph
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|g| measure((group, one), op, g, (schedule, exchange), cli, &mut record));
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

/// The searches a record times, made once for its sources: on the group, and on its first
/// device alone.
enum Searches<'a> {
    Bfs(MultiBfs<'a>, MultiBfs<'a>),
    Sssp(MultiSssp<'a>, MultiSssp<'a>),
}

/// The run of median wall time among `--reps` runs of `search` (after `--warmup`).
fn median_of(
    cli: &Cli,
    mut search: impl FnMut() -> Result<Searched, String>,
) -> Result<Searched, String> {
    let mut timed = Vec::new();
    for i in 0..cli.warmup + cli.reps.max(1) {
        let s = search()?;
        if i >= cli.warmup {
            timed.push(s);
        }
    }
    timed.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
    let middle = timed.len() / 2;
    Ok(timed.swap_remove(middle))
}

/// Times and checks the searches from `record`'s sources on the group, on one device, and by
/// the one-device driver.
fn measure(
    (group, one): (&Devices, &Devices),
    op: Op,
    g: &Csr<f32>,
    (schedule, exchange): (Schedule, FrontierExchange),
    cli: &Cli,
    record: &mut Record,
) -> Result<(), String> {
    let err = |e: lb::Error| e.to_string();
    let split = MultiCsr::upload(group, g).map_err(err)?;
    let alone = MultiCsr::upload(one, g).map_err(err)?;
    let single_graph = DeviceCsr::upload(&one.devices()[0], g).map_err(err)?;
    record.sources = sources(g, usize::from(cli.sources), cli.seed);
    let mut searches = if op == Op::Sssp {
        let mut paths = MultiSssp::new(&split).map_err(err)?;
        let mut paths_alone = MultiSssp::new(&alone).map_err(err)?;
        paths.set_exchange(exchange);
        paths_alone.set_exchange(exchange);
        Searches::Sssp(paths, paths_alone)
    } else {
        let mut bfs = MultiBfs::new(&split).map_err(err)?;
        let mut bfs_alone = MultiBfs::new(&alone).map_err(err)?;
        bfs.set_exchange(exchange);
        bfs_alone.set_exchange(exchange);
        Searches::Bfs(bfs, bfs_alone)
    };
    for &source in &record.sources {
        let (on_group, on_one, driver) = match &mut searches {
            Searches::Sssp(paths, paths_alone) => {
                let want = dijkstra(g, source);
                (
                    median_of(cli, || search_sssp(paths, source, schedule, &want, cli))?,
                    median_of(cli, || {
                        search_sssp(paths_alone, source, schedule, &want, cli)
                    })?,
                    median_of(cli, || {
                        let r = sssp(single_graph.device(), &single_graph, source, schedule)
                            .map_err(err)?;
                        check_dist(&r.dist, &want, cli, "the one-device driver")?;
                        Ok(Searched {
                            wall_ms: r.run.wall_ms,
                            compute_ms: 0.0,
                            exchange_ms: 0.0,
                            steps: r.run.iterations,
                            edges: r.run.edges,
                            listed: 0,
                        })
                    })?,
                )
            }
            Searches::Bfs(bfs, bfs_alone) => {
                let want = bfs_levels(g, source);
                // The depths arrive in page-locked memory that every search reuses (its
                // allocation, several milliseconds for a large graph, is not the search's).
                let mut kept = BfsResult::<HostBuffer<u32>>::default();
                let mut kept_group = MultiBfsResult::<HostBuffer<u32>>::default();
                let mut kept_alone = MultiBfsResult::<HostBuffer<u32>>::default();
                (
                    median_of(cli, || {
                        search_bfs(bfs, (source, schedule), &want, &mut kept_group)
                    })?,
                    median_of(cli, || {
                        search_bfs(bfs_alone, (source, schedule), &want, &mut kept_alone)
                    })?,
                    median_of(cli, || {
                        bfs_into(
                            single_graph.device(),
                            &single_graph,
                            source,
                            schedule,
                            &mut kept,
                        )
                        .map_err(err)?;
                        if *kept.depth != *want {
                            return Err(format!(
                                "source {source}: the one-device driver's depths differ from a \
                             queue BFS"
                            ));
                        }
                        Ok(Searched {
                            wall_ms: kept.run.wall_ms,
                            compute_ms: 0.0,
                            exchange_ms: 0.0,
                            steps: kept.run.iterations,
                            edges: kept.run.edges,
                            listed: 0,
                        })
                    })?,
                )
            }
        };
        record.steps += on_group.steps;
        record.edges_expanded += on_group.edges;
        record.claim_list_levels += on_group.listed;
        record.wall_ms += on_group.wall_ms;
        record.compute_ms += on_group.compute_ms;
        record.exchange_ms += on_group.exchange_ms;
        record.one_device_ms += on_one.wall_ms;
        record.single_driver_ms += driver.wall_ms;
    }
    record.scaling = record.one_device_ms / record.wall_ms;
    record.gteps = record.edges_expanded as f64 / (record.wall_ms * 1e6);
    Ok(())
}

/// One search of `bfs` into `r`, whose page-locked depths every search reuses (as the
/// one-device benchmarks' do), checked against `want`.
fn search_bfs(
    bfs: &mut MultiBfs,
    (source, schedule): (usize, Schedule),
    want: &[u32],
    r: &mut MultiBfsResult<HostBuffer<u32>>,
) -> Result<Searched, String> {
    bfs.search_into(source, schedule, r)
        .map_err(|e| e.to_string())?;
    if *r.depth != *want {
        return Err(format!("source {source}: depths differ from a queue BFS"));
    }
    Ok(Searched {
        wall_ms: r.wall_ms,
        compute_ms: r.expand_ms,
        exchange_ms: r.exchange_ms,
        steps: r.levels,
        edges: r.edges,
        listed: r.claim_list_levels,
    })
}

/// One search of `paths`, checked against Dijkstra's `want`.
fn search_sssp(
    paths: &mut MultiSssp,
    source: usize,
    schedule: Schedule,
    want: &[f32],
    cli: &Cli,
) -> Result<Searched, String> {
    let r = paths.search(source, schedule).map_err(|e| e.to_string())?;
    check_dist(&r.dist, want, cli, "the distances")?;
    Ok(Searched {
        wall_ms: r.wall_ms,
        compute_ms: r.relax_ms,
        exchange_ms: r.exchange_ms,
        steps: r.rounds,
        edges: r.edges,
        listed: r.claim_list_rounds,
    })
}

/// An error where `got` is further from Dijkstra's `want` than `--tolerance` (f32 sums along
/// paths of equal length round differently).
fn check_dist(got: &[f32], want: &[f32], cli: &Cli, what: &str) -> Result<(), String> {
    let e = dist_error(got, want);
    if e <= cli.tolerance {
        Ok(())
    } else {
        Err(format!(
            "{what} differ from Dijkstra's by {e:.2e} (over --tolerance {:.0e})",
            cli.tolerance
        ))
    }
}

fn print(r: &Record) {
    println!(
        "{:<40} {:<6} {:<16} {:<10} {:>7} {:>7} {:>7} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.2} {:>8.3} {:>10.2}{}",
        r.matrix,
        r.op,
        r.schedule,
        r.exchange,
        r.devices,
        r.steps,
        r.claim_list_levels,
        r.wall_ms,
        r.compute_ms,
        r.exchange_ms,
        r.one_device_ms,
        r.scaling,
        r.gteps,
        r.single_driver_ms,
        r.error
            .as_ref()
            .map_or(String::new(), |e| format!("  error: {e}"))
    );
}

/// `--frontier-exchange`'s name for `e`.
fn exchange_name(e: FrontierExchange) -> &'static str {
    match e {
        FrontierExchange::Auto => "auto",
        FrontierExchange::ClaimLists => "lists",
        FrontierExchange::AllReduce => "all-reduce",
    }
}
