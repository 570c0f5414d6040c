//! The graph ops from `lb::algorithms` (SSSP, Near-Far SSSP, BFS, direction-optimizing BFS, connected
//! components, PageRank): each is a host-driven loop of launches, not one launch over a
//! `Problem`, so they get their own small path: verify against the sequential reference, then
//! time the driver from start to finish (wall clock, host work included) next to its kernel
//! time, and report edges per second on both, the iterations, and the host↔device bytes per
//! iteration.

use lb::algorithms::{
    bfs_direction_optimizing_into, bfs_into, bfs_levels, bfs_unchecked, components_union_find,
    connected_components, dijkstra, pagerank, pagerank_reference, schedules, sssp, sssp_near_far,
    sssp_unchecked, BfsResult, Choice, Delta, Direction, DoBfsGraph, DoBfsLevel, DoBfsResult,
    PageRankGraph, PageRankOptions, Traversal,
};
use lb::prelude::*;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::corpus::Matrix;
use crate::host_loop;
use crate::report::{Context, Record};
use crate::{Cli, Op};

/// The simulator runs every launch of every iteration on the CPU, so SSSP there (many
/// iterations on long-diameter graphs) stays fast only on small graphs.
pub const SIM_MAX_EDGES: usize = 20_000;

/// Why `m` is not run for a graph op, if it is not (`undirected`: with every edge also
/// reversed, twice the edges: [`undirected`]).
pub fn skip_reason(m: &Matrix, gpu: bool, undirected: bool) -> Option<String> {
    let a = &m.csr;
    let edges = if undirected { 2 * a.nnz() } else { a.nnz() };
    if a.num_rows != a.num_cols {
        Some(format!(
            "not square ({} × {}), not a graph",
            a.num_rows, a.num_cols
        ))
    } else if a.nnz() == 0 {
        Some("no edges, so no source with an out-edge".into())
    } else if !gpu && edges > SIM_MAX_EDGES {
        Some(format!(
            "{edges} edges > {SIM_MAX_EDGES}, the simulator's limit"
        ))
    } else {
        None
    }
}

/// `g` with every edge also reversed: row `u` holds `g`'s row `u` followed by `g`'s column `u`
/// (edge `v → u` becomes `u → v`, with its weight), so an edge that is there both ways appears
/// twice, which the drivers and their references handle like any duplicate edge (`--undirected`:
/// the graph traversal benchmarks of Gunrock and GAP run on undirected graphs, where a random
/// source reaches the bulk of a connected graph).
pub fn undirected(g: &Csr<f32>) -> lb::Result<Csr<f32>> {
    let t = g.to_csc()?;
    let n = g.num_rows;
    let mut offsets = Vec::with_capacity(n + 1);
    let mut cols = Vec::with_capacity(2 * g.nnz());
    let mut values = Vec::with_capacity(2 * g.nnz());
    offsets.push(0);
    for u in 0..n {
        let row = g.row(u);
        cols.extend_from_slice(&g.col_indices[row.clone()]);
        values.extend_from_slice(&g.values[row]);
        let col = t.col_offsets[u]..t.col_offsets[u + 1];
        cols.extend_from_slice(&t.row_indices[col.clone()]);
        values.extend_from_slice(&t.values[col]);
        offsets.push(cols.len());
    }
    Csr::new(n, n, offsets, cols, values)
}

/// `count` distinct sources (fewer when fewer vertices qualify) among the vertices with an
/// out-edge, drawn with a generator seeded by `seed` and the graph's shape, so every schedule
/// and every run with the same `--seed` traverses from the same vertices.
pub fn sources(g: &Csr<f32>, count: usize, seed: u64) -> Vec<usize> {
    let candidates: Vec<usize> = (0..g.num_rows).filter(|&u| !g.row(u).is_empty()).collect();
    let shape = (g.num_rows as u64).rotate_left(32) ^ g.nnz() as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ shape);
    let mut picked: Vec<usize> = candidates
        .choose_multiple(&mut rng, count)
        .copied()
        .collect();
    picked.sort_unstable();
    picked
}

/// Which driver a row measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// `lb::algorithms::sssp` / `bfs`: the frontier stays on the device.
    Device,
    /// `sssp_unchecked` / `bfs_unchecked` (`--unchecked`).
    Unchecked,
    /// The host-driven loop they replaced (`--host-loop`, `crate::host_loop`).
    HostLoop,
}

impl Driver {
    /// The suffix of its rows' schedule names.
    fn suffix(self) -> &'static str {
        match self {
            Driver::Device => "",
            Driver::Unchecked => crate::variants::UNCHECKED,
            Driver::HostLoop => crate::variants::HOST_LOOP,
        }
    }
}

/// The reference result of one op from one source (or of the whole graph).
enum Reference {
    Dist(Vec<f32>),
    /// Dijkstra's distances, for the Near-Far driver.
    NearFarDist(Vec<f32>),
    Depth(Vec<u32>),
    /// BFS depths, for the direction-optimizing driver.
    DirectionDepth(Vec<u32>),
    /// Union-find's component labels.
    Labels(Vec<u32>),
    /// The f64 power iteration's ranks.
    Rank(Vec<f64>),
}

/// The graph on the device in the forms the ops read.
struct DeviceGraph {
    g: DeviceCsr<f32>,
    /// `dobfs`: its own upload (the transpose, the degrees).
    directed: Option<DoBfsGraph>,
    /// `pagerank`: its own upload (CSC, inverse degrees).
    ranked: Option<PageRankGraph>,
    /// `nearfar`: the factor of Δ (`--delta-factor`).
    delta_factor: f32,
    /// `dobfs`: the switch's constants (`--direction`).
    direction: Direction,
    /// `bfs` with `--steps`: per source, each level's frontier as (atoms, longest tile), from
    /// the reference's depths (a BFS's levels do not depend on the schedule).
    frontiers: Vec<Vec<(u64, u64)>>,
}

/// A launch as the JSON record holds it: (source's index, frontier length, the frontier tiles'
/// atoms and longest tile where known (BFS), kernel ms, wall ms, schedule, levels run: one but
/// for `block_levels`).
pub type StepRecord = (
    usize,
    u64,
    Option<u64>,
    Option<u64>,
    f32,
    f64,
    String,
    usize,
);

/// The frontiers of a BFS from its depths, level by level: the out-degrees of the vertices at
/// depth `l`, summed and the largest.
fn level_tiles(g: &Csr<f32>, depth: &[u32]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (u, &d) in depth.iter().enumerate() {
        if d == u32::MAX {
            continue;
        }
        let d = d as usize;
        if out.len() <= d {
            out.resize(d + 1, (0, 0));
        }
        let n = (g.row_offsets[u + 1] - g.row_offsets[u]) as u64;
        out[d] = (out[d].0 + n, out[d].1.max(n));
    }
    out
}

/// What one run gave: the driver's record, its error against the reference, and (`dobfs`) its
/// pull iterations.
struct Outcome {
    run: Traversal,
    error: f64,
    pulls: Option<usize>,
    levels: Option<Vec<DoBfsLevel>>,
}

/// The host results of one row's runs, kept from run to run as an application that searches in
/// a loop keeps them (`bfs_into`, `bfs_direction_optimizing_into`), in page-locked memory: a
/// result of tens of megabytes written into fresh host pages costs a page fault per page, which
/// on a virtual machine can take longer than the search (docs/benchmarks.md, twenty-fifth
/// session), and into pageable memory the copy runs at a quarter of the bus's speed
/// (twenty-sixth session). Push BFS (`Driver::Device`) and DO-BFS, the pair whose ratio issue
/// 17 asks for, keep theirs alike.
#[derive(Default)]
struct Kept {
    bfs: BfsResult<HostBuffer<u32>>,
    dobfs: DoBfsResult<HostBuffer<u32>>,
}

/// PageRank's settings in every row: the defaults (damping 0.85, L1 tolerance 1e-5).
fn pagerank_options() -> PageRankOptions {
    PageRankOptions::default()
}

impl Reference {
    /// One run from `source` with schedule `s`, through the driver `how`, and its error
    /// against the reference: the largest relative distance error (SSSP), 0 / ∞ for depths or
    /// labels that match / do not (BFS, DO-BFS, CC), the L1 distance of the ranks (PageRank).
    fn traverse(
        &self,
        dev: &Device,
        dg: &DeviceGraph,
        (source, choice, how): (usize, Choice, Driver),
        kept: &mut Kept,
    ) -> lb::Result<Outcome> {
        let g = &dg.g;
        let exact = |same: bool| if same { 0.0 } else { f64::INFINITY };
        // `auto` at every step is SSSP's and BFS's device drivers' alone (`run_graph` asks no
        // other op for it).
        let named = || match choice {
            Choice::Named(s) => Ok(s),
            Choice::Auto => Err(lb::Error::Shape(
                "lb-bench: `auto` per step runs SSSP and BFS only".into(),
            )),
        };
        let (run, error) = match self {
            Reference::Dist(want) => {
                let r = match how {
                    Driver::Device => sssp(dev, g, source, choice)?,
                    Driver::Unchecked => sssp_unchecked(dev, g, source, choice)?,
                    Driver::HostLoop => host_loop::sssp(dev, g, source, named()?)?,
                };
                (r.run, dist_error(&r.dist, want))
            }
            Reference::NearFarDist(want) => {
                let delta = Delta::Scaled(dg.delta_factor);
                let r = sssp_near_far(dev, g, source, named()?, delta)?;
                (r.run, dist_error(&r.dist, want))
            }
            Reference::Depth(want) => {
                let r = match how {
                    Driver::Device => {
                        bfs_into(dev, g, source, choice, &mut kept.bfs)?;
                        return Ok(Outcome {
                            run: kept.bfs.run.clone(),
                            error: exact(kept.bfs.depth == *want),
                            pulls: None,
                            levels: None,
                        });
                    }
                    Driver::Unchecked => bfs_unchecked(dev, g, source, choice)?,
                    Driver::HostLoop => host_loop::bfs(dev, g, source, named()?)?,
                };
                (r.run, exact(&r.depth == want))
            }
            Reference::DirectionDepth(want) => {
                let directed = dg
                    .directed
                    .as_ref()
                    .ok_or_else(|| missing("DO-BFS graph"))?;
                let r = &mut kept.dobfs;
                bfs_direction_optimizing_into(dev, directed, source, named()?, dg.direction, r)?;
                return Ok(Outcome {
                    run: r.run.clone(),
                    error: exact(r.depth == *want),
                    pulls: Some(r.pull_iterations),
                    levels: Some(r.levels.clone()),
                });
            }
            Reference::Labels(want) => {
                let r = connected_components(dev, g, named()?)?;
                (r.run, exact(&r.labels == want))
            }
            Reference::Rank(want) => {
                let ranked = dg
                    .ranked
                    .as_ref()
                    .ok_or_else(|| missing("PageRank graph"))?;
                let r = pagerank(dev, ranked, named()?, pagerank_options())?;
                let l1 = r
                    .rank
                    .iter()
                    .zip(want)
                    .map(|(&a, &b)| (f64::from(a) - b).abs())
                    .sum();
                (r.run, l1)
            }
        };
        Ok(Outcome {
            run,
            error,
            pulls: None,
            levels: None,
        })
    }
}

/// An upload `run_graph` makes for the op that needs it, absent: a bug in this file, reported
/// as a failed row rather than a panic.
fn missing(what: &str) -> lb::Error {
    lb::Error::Shape(format!("lb-bench: no {what} was uploaded for this op"))
}

/// f32 sums along different paths of equal length may round differently, hence a relative
/// error; an infinity on one side only is an infinite error.
pub(crate) fn dist_error(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g == w {
                0.0
            } else {
                let d = (f64::from(g) - f64::from(w)).abs();
                if d.is_finite() {
                    d / f64::from(w.abs()).max(f64::from(f32::MIN_POSITIVE))
                } else {
                    f64::INFINITY
                }
            }
        })
        .fold(0.0, f64::max)
}

/// Every schedule of the graph op `op` on the square matrix `m`, from `--sources` seeded
/// random sources (SSSP, BFS, DO-BFS; CC and PageRank run once over the whole graph), with
/// weights |values| (Dijkstra and the relaxation need nonnegative weights); with
/// `--unchecked`, each SSSP and BFS schedule also through the kernels without bounds tests, as
/// a `<schedule>+unchecked` row, and with `--host-loop` through the host-driven loop, as a
/// `<schedule>+host_loop` row.
pub fn run_graph(
    cli: &Cli,
    op: Op,
    m: &Matrix,
    dev: &Device,
    wanted: &[Schedule],
    ctx: &Context,
) -> Vec<Record> {
    let mut base = Record::base(ctx, op, m);
    let mut g = if cli.undirected {
        match undirected(&m.csr) {
            Ok(g) => g,
            Err(e) => return vec![base.failed(format!("reversing the edges: {e}"))],
        }
    } else {
        m.csr.clone()
    };
    g.values.iter_mut().for_each(|w| *w = w.abs());
    let references: Vec<(usize, Reference)> = match op {
        Op::Cc => vec![(0, Reference::Labels(components_union_find(&g)))],
        Op::Pagerank => vec![(
            0,
            Reference::Rank(pagerank_reference(&g, pagerank_options()).0),
        )],
        _ => {
            let sources = sources(&g, usize::from(cli.sources), cli.seed);
            base.sources = Some(sources.clone());
            sources
                .iter()
                .map(|&s| {
                    let r = match op {
                        Op::Sssp => Reference::Dist(dijkstra(&g, s)),
                        Op::Nearfar => Reference::NearFarDist(dijkstra(&g, s)),
                        Op::Dobfs => Reference::DirectionDepth(bfs_levels(&g, s)),
                        _ => Reference::Depth(bfs_levels(&g, s)),
                    };
                    (s, r)
                })
                .collect()
        }
    };
    let dg = match upload(dev, &g, op, cli) {
        Ok(mut dg) => {
            if cli.steps {
                dg.frontiers = references
                    .iter()
                    .map(|(_, r)| match r {
                        Reference::Depth(depth) => level_tiles(&g, depth),
                        _ => Vec::new(),
                    })
                    .collect();
            }
            dg
        }
        Err(e) => return vec![base.failed(format!("setting up: {e}"))],
    };
    // The unchecked kernels and the host loop are SSSP's and BFS's alone.
    let twins = matches!(op, Op::Sssp | Op::Bfs);
    let mut out = Vec::new();
    let row = |s: Choice, how: Driver| measure(cli, dev, &dg, &references, s, how, &base);
    for &s in schedules()
        .iter()
        .filter(|s| wanted.is_empty() || wanted.contains(s))
    {
        let s = Choice::Named(s);
        out.push(row(s, Driver::Device));
        if cli.unchecked && twins {
            out.push(row(s, Driver::Unchecked));
        }
        if cli.host_loop && twins {
            out.push(row(s, Driver::HostLoop));
        }
    }
    // SSSP's and BFS's `auto` picks at every step from that step's frontier, as SpMV's row
    // `auto` is always there.
    if twins {
        out.push(row(Choice::Auto, Driver::Device));
        if cli.unchecked {
            out.push(row(Choice::Auto, Driver::Unchecked));
        }
    }
    out
}

/// `g` on the device, with DO-BFS's upload (`dobfs`) or PageRank's upload (`pagerank`) when `op`
/// reads them.
fn upload(dev: &Device, g: &Csr<f32>, op: Op, cli: &Cli) -> lb::Result<DeviceGraph> {
    Ok(DeviceGraph {
        g: DeviceCsr::upload(dev, g)?,
        directed: match op {
            Op::Dobfs => Some(DoBfsGraph::upload(dev, g)?),
            _ => None,
        },
        ranked: match op {
            Op::Pagerank => Some(PageRankGraph::upload(dev, g)?),
            _ => None,
        },
        delta_factor: cli.delta_factor,
        direction: cli.direction,
        frontiers: Vec::new(),
    })
}

/// What the runs of one schedule add up to over the sources.
#[derive(Default)]
struct Totals {
    iterations: usize,
    /// `dobfs`: the pull iterations among them.
    pulls: Option<usize>,
    edges: u64,
    error: f64,
    /// The largest bytes per iteration of any verified run.
    bytes_per_iteration: f64,
    /// Sums over the sources of the per-source medians (GPU).
    kernel_ms: f64,
    wall_ms: f64,
    reps: usize,
}

/// Verifies schedule `s` from every source, then (GPU) times `--reps` traversals per source,
/// by kernel time and by wall time.
fn measure(
    cli: &Cli,
    dev: &Device,
    g: &DeviceGraph,
    references: &[(usize, Reference)],
    s: Choice,
    how: Driver,
    base: &Record,
) -> Record {
    let mut r = base.clone();
    r.schedule = format!("{}{}", s.name(), how.suffix());
    let mut t = Totals::default();
    let mut timed = dev.is_gpu();
    let mut kept = Kept::default();
    let mut steps: Vec<StepRecord> = Vec::new();
    for (index, (source, reference)) in references.iter().enumerate() {
        let from = if base.sources.is_some() {
            format!("source {source}")
        } else {
            "the run".to_string()
        };
        let (first, error) = match reference.traverse(dev, g, (*source, s, how), &mut kept) {
            Ok(o) => {
                if let Some(p) = o.pulls {
                    *t.pulls.get_or_insert(0) += p;
                }
                (o.run, o.error)
            }
            Err(e) => return r.failed(format!("{from}: {e}")),
        };
        if s == Choice::Auto && r.picked.is_none() {
            r.picked = Some(picks(&first));
        }
        t.iterations += first.iterations;
        t.edges += first.edges;
        t.error = t.error.max(error);
        t.bytes_per_iteration = t.bytes_per_iteration.max(first.bytes_per_iteration());
        if error > cli.tolerance {
            r.max_rel_err = Some(error);
            return r.failed(match reference {
                Reference::Dist(_) | Reference::NearFarDist(_) => format!(
                    "{from}: wrong distances: max relative error {:.2e} > {:.0e}",
                    error, cli.tolerance
                ),
                Reference::Depth(_) | Reference::DirectionDepth(_) => {
                    format!("{from}: wrong depths")
                }
                Reference::Labels(_) => format!("{from}: labels differ from union-find's"),
                Reference::Rank(_) => format!(
                    "{from}: ranks {:.2e} from the f64 power iteration in L1 > {:.0e}",
                    error, cli.tolerance
                ),
            });
        }
        // The simulator reports no kernel time, and its wall time is the CPU's: correctness,
        // iterations, edges and bytes only.
        if first.elapsed_ms.is_none() {
            timed = false;
            continue;
        }
        // The budget is shared by the sources, and wall time bounds kernel time.
        let budget = cli.budget_ms / references.len().max(1) as f64;
        let reps = ((budget / first.wall_ms.max(1e-3)) as usize).clamp(3, cli.reps.max(3));
        let (mut kernel, mut wall) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
        for rep in 0..reps {
            match reference.traverse(dev, g, (*source, s, how), &mut kept) {
                Ok(o) => {
                    if cli.steps && rep == 0 {
                        let tiles = g.frontiers.get(index);
                        steps.extend(o.run.steps.iter().scan(0, |level, st| {
                            let known = tiles.and_then(|t| t.get(*level));
                            *level += st.levels;
                            Some((
                                index,
                                st.frontier,
                                known.map(|k| k.0),
                                known.map(|k| k.1),
                                st.kernel_ms.unwrap_or(f32::NAN),
                                st.wall_ms,
                                st.schedule.clone(),
                                st.levels,
                            ))
                        }));
                    }
                    kernel.push(f64::from(o.run.elapsed_ms.unwrap_or(f32::NAN)));
                    wall.push(o.run.wall_ms);
                    if t.reps == 0 {
                        r.levels = o.levels.map(|l| l.iter().map(level_record).collect());
                    }
                }
                Err(e) => return r.failed(format!("{from}, while timing: {e}")),
            }
        }
        t.kernel_ms += median(&mut kernel);
        t.wall_ms += median(&mut wall);
        t.reps += reps;
    }
    r.iterations = Some(t.iterations);
    r.edges = Some(t.edges);
    r.max_rel_err = Some(t.error);
    r.bytes_per_iteration = Some(t.bytes_per_iteration);
    r.pull_iterations = t.pulls;
    if !steps.is_empty() {
        r.steps = Some(steps);
    }
    if timed {
        r.median_ms = Some(t.kernel_ms);
        r.wall_ms = Some(t.wall_ms);
        r.reps = Some(t.reps);
        r.mteps = Some(t.edges as f64 / (t.kernel_ms * 1e-3) / 1e6);
        r.gteps_wall = Some(t.edges as f64 / (t.wall_ms * 1e-3) / 1e9);
    }
    r
}

/// The schedules `auto` ran, with their steps: `thread_mapped:24+merge_path:1`.
fn picks(run: &Traversal) -> String {
    let each: Vec<String> = run
        .schedules
        .iter()
        .map(|(s, n)| format!("{s}:{n}"))
        .collect();
    each.join("+")
}

/// A DO-BFS step as the JSON record holds it.
fn level_record(l: &DoBfsLevel) -> (&'static str, u64, u64, f32) {
    let direction = if l.pulled { "pull" } else { "push" };
    (
        direction,
        l.tiles,
        l.reached,
        l.kernel_ms.unwrap_or(f32::NAN),
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_seeded_distinct_and_have_out_edges() {
        // Vertices 0, 3 and 5 have out-edges; the rest do not.
        let g = Csr::from_triplets(
            7,
            7,
            vec![(0, 1, 1.0), (3, 3, 1.0), (5, 0, 2.0), (5, 6, 1.0)],
        )
        .unwrap();
        for seed in 0..20 {
            let s = sources(&g, 2, seed);
            assert_eq!(s.len(), 2);
            assert!(s[0] < s[1], "distinct and sorted: {s:?}");
            assert!(s.iter().all(|&u| !g.row(u).is_empty()), "{s:?}");
            assert_eq!(s, sources(&g, 2, seed), "same seed, same sources");
        }
        assert_eq!(sources(&g, 10, 1), vec![0, 3, 5], "all of them, no more");
        let spread: std::collections::BTreeSet<Vec<usize>> =
            (0..20).map(|seed| sources(&g, 1, seed)).collect();
        assert!(spread.len() > 1, "the seed changes the pick");
    }

    /// Every edge of a random graph (with self-loops and duplicates) is in the undirected graph
    /// once each way with its weight, and nothing else is.
    #[test]
    fn undirected_holds_every_edge_both_ways() {
        let g = lb::generate::power_law(300, 300, 5.0, 17);
        let u = undirected(&g).unwrap();
        assert_eq!((u.num_rows, u.num_cols, u.nnz()), (300, 300, 2 * g.nnz()));
        let mut want = Vec::new();
        for r in 0..g.num_rows {
            for e in g.row(r) {
                let (c, w) = (g.col_indices[e] as usize, g.values[e].to_bits());
                want.extend([(r, c, w), (c, r, w)]);
            }
        }
        let mut got = Vec::new();
        for r in 0..u.num_rows {
            for e in u.row(r) {
                got.push((r, u.col_indices[e] as usize, u.values[e].to_bits()));
            }
        }
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        let loops = Csr::from_triplets(2, 2, vec![(0, 0, 3.0), (1, 0, 1.0)]).unwrap();
        let both = undirected(&loops).unwrap();
        assert_eq!(both.row_offsets, vec![0, 3, 4]);
        assert!(undirected(&Csr::<f32>::empty(0, 0).unwrap()).unwrap().nnz() == 0);
    }
}
