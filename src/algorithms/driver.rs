//! What the traversal drivers share: the [`Traversal`] record, the source's checks, the
//! iteration stamps, and the frontier loop with its two alternating device queues.

use crate::heuristic::DEFAULT_RULE;
use crate::prelude::*;
use crate::{BlockLevels, Error, Result, TileStats};

/// Which schedule a traversal's frontier kernel runs at each step: what [`sssp`](super::sssp)
/// and [`bfs`](super::bfs) (and their `_unchecked`, `_with_capacity` and `_into` forms) take
/// (a `Schedule` converts into one); the other drivers take a `Schedule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// This schedule at every step.
    Named(Schedule),
    /// [`step_schedule`]'s pick for each step's frontier, from its length and the graph's
    /// statistics: nothing is measured, so a step moves the bytes a named schedule's does. Over
    /// queues of a slot per vertex, the frontiers of at most [`block_levels_limit`] vertices
    /// (but the source's) are expanded in one block instead, several levels a launch
    /// ([`BLOCK_LEVELS`]).
    Auto,
}

/// The schedule [`Choice::Auto`] runs for a frontier of `len` vertices of `g`.
///
/// On a graph with hubs (one the rule calls heavy-tailed: a longest row at least
/// [`Rule::heavy_imbalance`](crate::heuristic::Rule::heavy_imbalance) times the mean row), any
/// frontier may hold one, and a schedule that gives a tile to one thread or warp then waits for
/// it alone: `multi_phase`, which splits every step's atoms evenly over the grid whatever tiles
/// they come from. Its BFS on the large power-law and R-MAT members took 14% and 9% less kernel
/// time than `merge_path`'s, the rule's pick for such graphs' SpMV (H100, docs/benchmarks.md,
/// forty-ninth session), and its SSSP on the medium ones 12% and 15% less (medians of the
/// nineteenth session's runs). Elsewhere the rule ([`DEFAULT_RULE`]) picks from the frontier's
/// length and the graph's mean row: `thread_mapped` on a road network's short rows.
///
/// Measured with it (H100, docs/benchmarks.md, fifty-first session): BFS and SSSP on the large
/// power law and R-MAT within 1.1% of `multi_phase`'s wall time, the fastest of eight schedules;
/// BFS on the medium road grid and road network within 3% of the fastest schedule, SSSP there
/// 1.21× and 1.23× behind it (`group_mapped(4)` on the grid, `warp_mapped` on the road network;
/// neither beats `thread_mapped` on both).
///
/// The frontier's own atoms are not measured: that costs a kernel, a wait for the GPU and a read
/// per step (about 60 µs on an H100), more than a small step's kernel takes, and a large step
/// on a graph with hubs needs the split anyway. The pick is O(1) on the host.
pub fn step_schedule(g: &DeviceCsr<f32>, len: u64) -> Schedule {
    let whole = g.stats();
    let rule = &DEFAULT_RULE;
    if whole.imbalance() >= rule.heavy_imbalance {
        return Schedule::MultiPhase;
    }
    let atoms = (whole.mean_atoms * len as f64).round() as u64;
    let frontier = TileStats::new(len, whole.cols, atoms, whole.max_atoms.min(atoms));
    rule.choose(schedules(), &frontier, 1)
        .unwrap_or(Schedule::ThreadMapped)
}

/// The name [`Traversal::schedules`] and [`Step::schedule`] give to a launch of a traversal's
/// levels in one block ([`bfs_block_levels`](crate::bfs_block_levels),
/// [`sssp_block_levels`](crate::sssp_block_levels)), which [`Choice::Auto`] runs for the
/// frontiers up to [`block_levels_limit`] vertices.
pub const BLOCK_LEVELS: &str = "block_levels";

/// Threads of the block that runs a traversal's levels.
const LEVEL_THREADS: u32 = 1024;

/// Edges a thread of that block walks in a level, on average, at most: the frontier's limit is
/// this many per thread over the graph's mean row. A level in the block costs a few dependent
/// memory accesses per edge a thread walks (the vertex, its offsets, each column, the claim); a
/// level run by a schedule's kernel costs a launch, a wait and a read on the host, about 20 µs
/// on an H100. Set from that estimate, not timed yet (docs/benchmarks.md, fifty-second
/// session).
const LEVEL_EDGES_PER_THREAD: u64 = 8;

/// The longest row of a graph whose small frontiers [`Choice::Auto`] expands in one block: a
/// thread walks a frontier vertex's edges alone, so one hub would make every level wait for it.
const LEVEL_LONGEST_ROW: u64 = 32;

/// The longest frontier of `g` that [`Choice::Auto`]'s BFS and SSSP expand in one block, level
/// after level, until a frontier is longer or empty ([`BLOCK_LEVELS`]): `1024 × 8` edges' worth
/// of the graph's mean row, or 0 (never) on a graph with a row longer than 32 atoms. This is for
/// graphs of a long diameter and short rows, whose thousands of levels of a few dozen vertices
/// would each cost a launch and a read (a road network: docs/graph-apps.md, "Levels in one
/// block").
pub fn block_levels_limit(g: &DeviceCsr<f32>) -> u64 {
    let s = g.stats();
    if s.max_atoms > LEVEL_LONGEST_ROW {
        return 0;
    }
    let mean = (s.mean_atoms.ceil() as u64).max(1);
    u64::from(LEVEL_THREADS) * LEVEL_EDGES_PER_THREAD / mean
}

/// How one launch of a traversal's levels in one block may go under `choice` over queues of
/// `capacity` slots, with `mark` the mark of its first level: `None` unless `choice` is
/// [`Choice::Auto`], no level can overflow the queues (a slot per vertex) and the frontier of
/// `len` vertices is at most [`block_levels_limit`].
pub(super) fn level_run(
    choice: Choice,
    g: &DeviceCsr<f32>,
    (len, capacity): (u64, usize),
    mark: u32,
) -> Option<crate::LevelRun> {
    let limit = match choice {
        Choice::Auto if capacity >= g.num_rows() => block_levels_limit(g).min(capacity as u64),
        _ => 0,
    };
    (len <= limit).then_some(crate::LevelRun {
        // The last level's mark stays below `u32::MAX`, the mark of unreached vertices.
        max_levels: u32::MAX - mark,
        limit,
        threads: LEVEL_THREADS,
    })
}

impl From<Schedule> for Choice {
    fn from(s: Schedule) -> Self {
        Choice::Named(s)
    }
}

impl Choice {
    /// The schedule a step over a frontier of `len` vertices of `g` runs: the named one, or
    /// [`step_schedule`]'s pick.
    pub fn schedule_for(self, g: &DeviceCsr<f32>, len: u64) -> Schedule {
        match self {
            Choice::Named(s) => s,
            Choice::Auto => step_schedule(g, len),
        }
    }

    /// The schedule's name, or `"auto"`.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Named(s) => s.name(),
            Choice::Auto => "auto",
        }
    }
}

/// Counters the kernels add traversed edges to (a frontier vertex `u` adds to slot
/// `u % EDGE_SLOTS`); their sum is the run's `edges`. An atomic's throughput is the L2's on
/// one cache line, whatever the address within it: 32 slots are two 128-byte lines, and a
/// BFS's one add per vertex queued on them (about 3 ms of 11 per search on a 6.5 M-vertex
/// power-law graph, H100). 1024 slots spread them over 64 lines.
pub const EDGE_SLOTS: usize = 1024;

/// Pushes every vertex `u` with `marks[u] == mark`: the complete next frontier after a queue
/// overflow. `vertices` has one entry per vertex (row `u` holds one atom), so each thread
/// tests one vertex and vertices without out-edges are found too.
#[load_balanced(schedule = "thread_mapped")]
pub fn collect_marked(
    _vertices: &Csr<f32>,
    marks: &[u32],
    mark: u32,
    next: &mut Queue,
    #[tile] u: usize,
    #[atom] _e: usize,
) {
    if marks[u] == mark {
        next.push(u as u32);
    }
}

/// The schedules the drivers accept: every built-in one.
pub fn schedules() -> &'static [Schedule] {
    super::sssp_relax::SCHEDULES
}

/// How a traversal ([`sssp`](super::sssp), [`bfs`](super::bfs)) went: the same for both algorithms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traversal {
    /// Kernel iterations (frontiers processed).
    pub iterations: usize,
    /// Edges relaxed over all iterations (out-degrees of every frontier vertex).
    pub edges: u64,
    /// Queue overflows, each repaired by refilling a larger queue from the marks.
    pub retries: usize,
    /// Kernel time summed over the launches, on a GPU (an iteration whose queue overflowed
    /// counts its refill's time only: the overflow error carries no time).
    pub elapsed_ms: Option<f32>,
    /// Wall-clock time of the whole call: the state's fill on the device, every iteration with
    /// its host work, and the result's download.
    pub wall_ms: f64,
    /// Bytes copied from the device to the host by the iterations (counters and error flags;
    /// the result's download is not an iteration's).
    pub bytes_to_host: u64,
    /// Bytes copied from the host to the device by the iterations (the initial state's setup
    /// is not an iteration's).
    pub bytes_to_device: u64,
    /// The schedules the iterations' frontier kernels ran, with how many iterations ran each,
    /// in the order first run: one entry for a named schedule, those `auto` picked for
    /// [`Choice::Auto`]. An iteration whose push overflowed its queue (repaired by a refill,
    /// see `retries`) is not counted: its error does not say which schedule ran. Filled by
    /// SSSP and BFS; empty for the drivers that take a `Schedule` only.
    pub schedules: Vec<(String, usize)>,
    /// Every launch of SSSP and BFS in order: its first frontier's length, the schedule its
    /// kernel ran, the levels it ran (one, or more for [`BLOCK_LEVELS`]) and the kernel's time.
    /// An iteration whose push overflowed its queue records its refill's launch
    /// ([`collect_marked()`]). The steps' `levels` add up to `iterations`. Empty for the drivers
    /// that take a `Schedule` only.
    pub steps: Vec<Step>,
}

/// One launch of a traversal ([`Traversal::steps`]): an iteration, or several levels of a BFS
/// in one block ([`BLOCK_LEVELS`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// Vertices in the frontier the launch expanded first (its tiles).
    pub frontier: u64,
    /// The schedule of the launch's kernel, or [`BLOCK_LEVELS`].
    pub schedule: String,
    /// Iterations the launch ran: 1 for a schedule's kernel, the levels it ran for
    /// [`BLOCK_LEVELS`].
    pub levels: usize,
    /// The kernel's time, on a GPU.
    pub kernel_ms: Option<f32>,
    /// The launch's wall-clock time on the host: the launch (with `auto`'s pick), the wait
    /// for its kernel, the read of the queue's counter (or of the levels' outcome).
    pub wall_ms: f64,
}

impl Traversal {
    /// Counts `iterations` more iterations of `schedule` in [`Traversal::schedules`].
    pub(super) fn count_schedule(&mut self, schedule: &str, iterations: usize) {
        match self.schedules.iter_mut().find(|(s, _)| s == schedule) {
            Some((_, n)) => *n += iterations,
            None => self.schedules.push((schedule.to_string(), iterations)),
        }
    }

    /// Host↔device bytes per iteration, both directions together.
    pub fn bytes_per_iteration(&self) -> f64 {
        if self.iterations == 0 {
            0.0
        } else {
            (self.bytes_to_host + self.bytes_to_device) as f64 / self.iterations as f64
        }
    }
}

/// Which launcher a driver calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernels {
    /// `launch_with`: the kernels test every frontier entry and unproven index.
    Checked,
    /// `launch_with_unchecked`: the kernels test nothing. Their unproven indices are the
    /// frontier's entries and `edges[u % edges.len()]` (every other index is a column index,
    /// which the upload validated and the launcher checks `dist`, `depth` and `marks` against,
    /// or the tile, which the launcher checks against the slices' lengths). The driver's
    /// frontiers hold the source, checked by [`start`] to be a vertex, and vertices the kernels
    /// pushed: column indices of a square graph, or rows of the one-per-vertex tile set, hence
    /// vertices too; and `edges` has [`EDGE_SLOTS`] (nonzero) entries, so `u % edges.len()`
    /// is one of them.
    Unchecked,
}

/// The mark of the vertices that iteration `iteration` puts into the next frontier: its BFS
/// level + 1, or its SSSP stamp (0 is no stamp).
pub(super) fn stamp(iteration: usize, what: &str) -> Result<u32> {
    u32::try_from(iteration + 1)
        .ok()
        .filter(|&m| m < u32::MAX)
        .ok_or_else(|| Error::Shape(format!("{what}: iteration {iteration} exceeds u32")))
}

/// The source as a one-vertex frontier, after checking it is a vertex of a square graph.
pub(super) fn start(g: &DeviceCsr<f32>, source: usize, what: &str) -> Result<u32> {
    if g.num_rows() != g.num_cols() {
        return Err(Error::Shape(format!(
            "{what}: a graph's adjacency matrix is square, this one is {} × {}",
            g.num_rows(),
            g.num_cols()
        )));
    }
    if source >= g.num_rows() {
        return Err(Error::Shape(format!(
            "{what}: source {source} is not a vertex of a graph with {} vertices",
            g.num_rows()
        )));
    }
    u32::try_from(source).map_err(|_| Error::Shape(format!("{what}: source {source} exceeds u32")))
}

/// The frontier loop shared by both algorithms (see the module docs), from the frontier of
/// `source` alone, over queues of `capacity` slots:
/// `step(state, next, frontier, edges, iteration)` runs one iteration's kernel, pushing into
/// `next`; `collect(state, vertices, next, iteration)` refills `next` from the marks that
/// iteration left in `state`, after its push overflowed; `levels(state, current, next, len,
/// edges, iteration)` may instead run several iterations from the frontier in `current`'s
/// first `len` slots (BFS: [`BLOCK_LEVELS`]), or decline with `None`.
pub(super) fn traverse<S>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    (source, capacity): (u32, usize),
    state: &mut S,
    mut step: impl FnMut(
        &mut S,
        &mut DeviceQueue,
        &DeviceBuffer<u32>,
        &mut DeviceBuffer<u64>,
        usize,
    ) -> Result<Launch>,
    mut collect: impl FnMut(&S, &DeviceCsr<f32>, &mut DeviceQueue, usize) -> Result<Launch>,
    mut levels: impl FnMut(
        &mut S,
        &mut DeviceQueue,
        &mut DeviceQueue,
        u64,
        &mut DeviceBuffer<u64>,
        usize,
    ) -> Result<Option<BlockLevels>>,
) -> Result<Traversal> {
    let capacity = capacity.max(1);
    let first = dev.upload(&[source])?;
    let mut edges = dev.zeros::<u64>(EDGE_SLOTS)?;
    let (mut current, mut next) = (
        DeviceQueue::new(dev, capacity)?,
        DeviceQueue::new(dev, capacity)?,
    );
    // The one-entry-per-vertex tile set `collect` runs over, made at the first overflow.
    let mut vertex_set: Option<DeviceCsr<f32>> = None;
    let mut excluded = 0u64;
    let mut run = Traversal::default();
    let before = dev.transferred();
    let mut len = 1u64;
    while len > 0 {
        // The first frontier is the source's own buffer, not a queue: a schedule's step.
        if run.iterations > 0 {
            let clock = std::time::Instant::now();
            let ran = levels(
                state,
                &mut current,
                &mut next,
                len,
                &mut edges,
                run.iterations,
            )?;
            if let Some(done) = ran {
                run.count_schedule(BLOCK_LEVELS, done.levels);
                run.steps.push(Step {
                    frontier: len,
                    schedule: BLOCK_LEVELS.to_string(),
                    levels: done.levels,
                    kernel_ms: done.elapsed_ms,
                    wall_ms: clock.elapsed().as_secs_f64() * 1e3,
                });
                if let Some(ms) = done.elapsed_ms {
                    *run.elapsed_ms.get_or_insert(0.0) += ms;
                }
                run.iterations += done.levels;
                len = done.len;
                // An odd number of levels leaves the frontier in the queue the first wrote.
                if !done.levels.is_multiple_of(2) {
                    std::mem::swap(&mut current, &mut next);
                }
                continue;
            }
        }
        next.clear()?;
        let frontier = if run.iterations == 0 {
            &first
        } else {
            current.slots(len)
        };
        let clock = std::time::Instant::now();
        let launch = match step(state, &mut next, frontier, &mut edges, run.iterations) {
            Err(Error::QueueOverflow { needed, .. }) => {
                // Building the vertex set is a one-time setup, not the iteration's traffic.
                let setup = dev.transferred();
                let vertices = match vertex_set.take() {
                    Some(v) => v,
                    None => one_per_vertex(dev, g.num_rows())?,
                };
                excluded += dev.transferred().since(setup).to_device;
                let grown = usize::try_from(needed)
                    .map_err(|_| Error::Shape(format!("a queue of {needed} items")))?;
                next = DeviceQueue::new(dev, grown)?;
                run.retries += 1;
                let launch = collect(state, &vertices, &mut next, run.iterations);
                vertex_set = Some(vertices);
                launch?
            }
            launch => {
                let launch = launch?;
                run.count_schedule(&launch.schedule, 1);
                launch
            }
        };
        run.steps.push(Step {
            frontier: len,
            schedule: launch.schedule.to_string(),
            levels: 1,
            kernel_ms: launch.elapsed_ms,
            wall_ms: clock.elapsed().as_secs_f64() * 1e3,
        });
        if let Some(ms) = launch.elapsed_ms {
            *run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        len = pushed(&launch)?;
        run.iterations += 1;
        std::mem::swap(&mut current, &mut next);
    }
    let moved = dev.transferred().since(before);
    run.bytes_to_device = moved.to_device.saturating_sub(excluded);
    run.bytes_to_host = moved.to_host;
    run.edges = edges.download()?.iter().sum();
    Ok(run)
}

/// The pushes the launch counted into its queue (the overflow check read the counter).
pub(super) fn pushed(launch: &Launch) -> Result<u64> {
    match launch.pushed.as_slice() {
        [(_, n)] => Ok(*n),
        other => Err(Error::Shape(format!(
            "a frontier launch reported {} queue counters, not one",
            other.len()
        ))),
    }
}

/// The pushes the launch counted into its queue parameter `param`.
pub(super) fn pushed_into(launch: &Launch, param: &str) -> Result<u64> {
    launch
        .pushed
        .iter()
        .find(|(p, _)| *p == param)
        .map(|&(_, n)| n)
        .ok_or_else(|| {
            Error::Shape(format!(
                "a frontier launch reported no counter for its queue `{param}`"
            ))
        })
}

/// A tile set of `n` rows of one atom each: [`collect_marked`]'s, one thread per vertex.
pub(super) fn one_per_vertex(dev: &Device, n: usize) -> Result<DeviceCsr<f32>> {
    let csr = Csr::new(n, 1, (0..=n).collect(), vec![0; n], vec![0.0; n])?;
    DeviceCsr::upload(dev, &csr)
}
