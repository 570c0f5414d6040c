//! Graph algorithms driven from the host around one load-balanced kernel each: single-source
//! shortest paths (frontier relaxation, thesis §6.1.3) and breadth-first search, with sequential
//! references (Dijkstra with a binary heap, queue BFS) to check them against.
//!
//! # The frontier stays on the device
//!
//! Each iteration runs the kernel over the frontier, and the kernel pushes the vertices it
//! improved into a [`DeviceQueue`]. Two queues alternate: the one just filled is the next
//! launch's frontier ([`DeviceQueue::slots`]: its own memory, no copy), the other is cleared on
//! the device and filled. The host learns the next frontier's length from the push counter
//! that the launch's overflow check reads anyway ([`Launch::pushed`]), so an iteration moves at
//! most 16 bytes between host and device: that counter (8) and, with the checked kernels, the
//! first word of the error flag (8). [`SsspResult::bytes_to_host`] and
//! [`SsspResult::bytes_to_device`] count it ([`Device::transferred`]).
//!
//! **Invariant: each vertex is pushed at most once per iteration, and every vertex that must be
//! in the next frontier is marked on the device, whether or not its push fit.** BFS claims each
//! vertex once with `atomic_cas` on `depth` (`depth[v] == level + 1` marks the next frontier).
//! SSSP stamps a vertex whose distance dropped with the iteration's number in `marks`
//! (`atomic_max`), and only the lane that raised the stamp pushes it; stamps only grow, so they
//! never need clearing, and `marks[v] == iteration + 1` marks the next frontier. Hence a queue of
//! `num_rows` slots never overflows, and no host sort or deduplication is needed.
//!
//! A smaller, caller-chosen capacity may overflow. The kernel has still relaxed every edge and
//! marked every vertex it should have pushed, so nothing is rerun and nothing is restored: the
//! overflowed queue is replaced by one of the reported size and [`collect_marked`](fn@collect_marked) refills it
//! from the marks (one thread per vertex, over a one-entry-per-vertex tile set built at the
//! first overflow). No O(V) state is copied or snapshotted per iteration.
//!
//! `edges` is counted on the device too: the first lane of each frontier vertex adds its
//! out-degree to one of [`EDGE_SLOTS`] counters (spread so that the atomics do not all hit one
//! address), read once at the end.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use crate::prelude::*;
use crate::{Error, Result};

/// Counters the kernels add traversed edges to (a frontier vertex `u` adds to slot
/// `u % EDGE_SLOTS`); their sum is the run's `edges`.
pub const EDGE_SLOTS: usize = 32;

/// Relaxes the edges of the frontier's vertices; pushes each vertex whose distance dropped
/// once per iteration: the lane whose `atomic_max` raised its stamp in `marks` to `mark`.
/// Adds each frontier vertex's out-degree to `edges[u % edges.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn sssp_relax(
    g: &Csr<f32>,
    frontier: &[u32],
    dist: &mut [f32],
    marks: &mut [u32],
    mark: u32,
    next: &mut Queue,
    edges: &mut [u64],
    #[tile] u: usize,
    #[atom] e: usize,
    #[rank] k: usize,
) {
    if k == 0 {
        atomic_add(
            &mut edges[u % edges.len()],
            (g.row_offsets[u + 1] - g.row_offsets[u]) as u64,
        );
    }
    let v = g.col_indices[e] as usize;
    let d = dist[u] + g.values[e];
    if d < atomic_min(&mut dist[v], d) && atomic_max(&mut marks[v], mark) < mark {
        next.push(v as u32);
    }
}

/// Visits the unvisited neighbours of the frontier: the `cas` lets exactly one edge claim each.
/// Adds each frontier vertex's out-degree to `edges[u % edges.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn bfs_visit(
    g: &Csr<f32>,
    frontier: &[u32],
    depth: &mut [u32],
    level: u32,
    next: &mut Queue,
    edges: &mut [u64],
    #[tile] u: usize,
    #[atom] e: usize,
    #[rank] k: usize,
) {
    if k == 0 {
        atomic_add(
            &mut edges[u % edges.len()],
            (g.row_offsets[u + 1] - g.row_offsets[u]) as u64,
        );
    }
    let v = g.col_indices[e] as usize;
    if atomic_cas(&mut depth[v], u32::MAX, level + 1) == u32::MAX {
        next.push(v as u32);
    }
}

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
    sssp_relax::SCHEDULES
}

/// How a traversal ([`sssp`], [`bfs`]) went: the same for both algorithms.
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
}

impl Traversal {
    /// Host↔device bytes per iteration, both directions together.
    pub fn bytes_per_iteration(&self) -> f64 {
        if self.iterations == 0 {
            0.0
        } else {
            (self.bytes_to_host + self.bytes_to_device) as f64 / self.iterations as f64
        }
    }
}

/// What [`sssp`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct SsspResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    pub run: Traversal,
}

/// What [`bfs`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct BfsResult {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: Vec<u32>,
    pub run: Traversal,
}

/// Shortest distances from `source` over nonnegative edge weights, with queues of
/// `num_rows` slots (which never overflow).
pub fn sssp(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<SsspResult> {
    sssp_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`sssp`] with a chosen initial queue capacity (at least 1; grown on overflow).
pub fn sssp_with_capacity(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    capacity: usize,
) -> Result<SsspResult> {
    sssp_run(dev, g, source, schedule, capacity, Kernels::Checked)
}

/// [`sssp`] through the kernels without bounds tests (`launch_with_unchecked`), to measure what
/// the tests of the frontier cost. Safe: this driver proves what those kernels leave to their
/// caller (its frontiers hold vertices only, and `edges` is never empty).
pub fn sssp_unchecked(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<SsspResult> {
    sssp_run(dev, g, source, schedule, g.num_rows(), Kernels::Unchecked)
}

/// Which launcher a driver calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernels {
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

fn sssp_run(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    capacity: usize,
    kernels: Kernels,
) -> Result<SsspResult> {
    let clock = Instant::now();
    let start = start(g, source, "sssp")?;
    // The state starts on the device: a fill and one 4-byte write, not an O(V) upload.
    let mut dist = dev.filled(g.num_rows(), f32::INFINITY)?;
    dev.write_at(&mut dist, source, &[0.0])?;
    let marks = dev.zeros::<u32>(g.num_rows())?;
    let mut state = (dist, marks);
    let mut run = traverse(
        dev,
        g,
        start,
        capacity,
        &mut state,
        |(dist, marks), next, frontier, edges, iteration| {
            let mark = stamp(iteration, "sssp")?;
            match kernels {
                Kernels::Checked => sssp_relax::launch_with(
                    dev, schedule, g, frontier, dist, marks, mark, next, edges,
                ),
                // SAFETY: every frontier entry is a vertex and `edges` is not empty
                // (`Kernels::Unchecked`).
                Kernels::Unchecked => unsafe {
                    sssp_relax::launch_with_unchecked(
                        dev, schedule, g, frontier, dist, marks, mark, next, edges,
                    )
                },
            }
        },
        |(_, marks), vertices, next, iteration| {
            let mark = stamp(iteration, "sssp")?;
            collect_marked::launch_with(dev, Schedule::ThreadMapped, vertices, marks, mark, next)
        },
    )?;
    let dist = state.0.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(SsspResult { dist, run })
}

/// The mark of the vertices that iteration `iteration` puts into the next frontier: its BFS
/// level + 1, or its SSSP stamp (0 is no stamp).
fn stamp(iteration: usize, what: &str) -> Result<u32> {
    u32::try_from(iteration + 1)
        .ok()
        .filter(|&m| m < u32::MAX)
        .ok_or_else(|| Error::Shape(format!("{what}: iteration {iteration} exceeds u32")))
}

/// Hop counts from `source`, with queues of `num_rows` slots (which never overflow).
pub fn bfs(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<BfsResult> {
    bfs_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`bfs`] with a chosen initial queue capacity (at least 1; grown on overflow).
pub fn bfs_with_capacity(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    capacity: usize,
) -> Result<BfsResult> {
    bfs_run(dev, g, source, schedule, capacity, Kernels::Checked)
}

/// [`bfs`] through the kernels without bounds tests, as [`sssp_unchecked`].
pub fn bfs_unchecked(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<BfsResult> {
    bfs_run(dev, g, source, schedule, g.num_rows(), Kernels::Unchecked)
}

fn bfs_run(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    capacity: usize,
    kernels: Kernels,
) -> Result<BfsResult> {
    let clock = Instant::now();
    let start = start(g, source, "bfs")?;
    let mut depth = dev.filled(g.num_rows(), u32::MAX)?;
    dev.write_at(&mut depth, source, &[0])?;
    let mut run = traverse(
        dev,
        g,
        start,
        capacity,
        &mut depth,
        |depth, next, frontier, edges, level| {
            let level = stamp(level, "bfs")? - 1;
            match kernels {
                Kernels::Checked => {
                    bfs_visit::launch_with(dev, schedule, g, frontier, depth, level, next, edges)
                }
                // SAFETY: every frontier entry is a vertex and `edges` is not empty
                // (`Kernels::Unchecked`).
                Kernels::Unchecked => unsafe {
                    bfs_visit::launch_with_unchecked(
                        dev, schedule, g, frontier, depth, level, next, edges,
                    )
                },
            }
        },
        |depth, vertices, next, level| {
            let mark = stamp(level, "bfs")?;
            collect_marked::launch_with(dev, Schedule::ThreadMapped, vertices, depth, mark, next)
        },
    )?;
    let depth = depth.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(BfsResult { depth, run })
}

/// The source as a one-vertex frontier, after checking it is a vertex of a square graph.
fn start(g: &DeviceCsr<f32>, source: usize, what: &str) -> Result<u32> {
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

/// The frontier loop shared by both algorithms (see the module docs):
/// `step(state, next, frontier, edges, iteration)` runs one iteration's kernel, pushing into
/// `next`; `collect(state, vertices, next, iteration)` refills `next` from the marks that
/// iteration left in `state`, after its push overflowed.
fn traverse<S>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: u32,
    capacity: usize,
    state: &mut S,
    mut step: impl FnMut(
        &mut S,
        &mut DeviceQueue,
        &DeviceBuffer<u32>,
        &mut DeviceBuffer<u64>,
        usize,
    ) -> Result<Launch>,
    mut collect: impl FnMut(&S, &DeviceCsr<f32>, &mut DeviceQueue, usize) -> Result<Launch>,
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
        next.clear()?;
        let frontier = if run.iterations == 0 {
            &first
        } else {
            current.slots(len)
        };
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
            launch => launch?,
        };
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
fn pushed(launch: &Launch) -> Result<u64> {
    match launch.pushed.as_slice() {
        [(_, n)] => Ok(*n),
        other => Err(Error::Shape(format!(
            "a frontier launch reported {} queue counters, not one",
            other.len()
        ))),
    }
}

/// A tile set of `n` rows of one atom each: [`collect_marked`]'s, one thread per vertex.
fn one_per_vertex(dev: &Device, n: usize) -> Result<DeviceCsr<f32>> {
    let csr = Csr::new(n, 1, (0..=n).collect(), vec![0; n], vec![0.0; n])?;
    DeviceCsr::upload(dev, &csr)
}

/// Dijkstra with a binary heap, in f32 with the kernel's rounding (`dist[u] + w`): the
/// reference for [`sssp`]. Weights must be nonnegative; unreachable vertices stay infinite.
/// Panics if `source` is not a vertex.
pub fn dijkstra(g: &Csr<f32>, source: usize) -> Vec<f32> {
    let mut dist = vec![f32::INFINITY; g.num_rows];
    dist[source] = 0.0;
    // Nonnegative f32 distances order like their bit patterns.
    let mut heap = BinaryHeap::from([Reverse((0f32.to_bits(), source))]);
    while let Some(Reverse((bits, u))) = heap.pop() {
        if bits != dist[u].to_bits() {
            continue;
        }
        for e in g.row(u) {
            let v = g.col_indices[e] as usize;
            let d = dist[u] + g.values[e];
            if d < dist[v] {
                dist[v] = d;
                heap.push(Reverse((d.to_bits(), v)));
            }
        }
    }
    dist
}

/// Queue BFS: the reference for [`bfs`]. Panics if `source` is not a vertex.
pub fn bfs_levels(g: &Csr<f32>, source: usize) -> Vec<u32> {
    let mut depth = vec![u32::MAX; g.num_rows];
    depth[source] = 0;
    let mut queue = VecDeque::from([source]);
    while let Some(u) = queue.pop_front() {
        for e in g.row(u) {
            let v = g.col_indices[e] as usize;
            if depth[v] == u32::MAX {
                depth[v] = depth[u] + 1;
                queue.push_back(v);
            }
        }
    }
    depth
}
