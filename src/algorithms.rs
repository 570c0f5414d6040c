//! Graph algorithms driven from the host around one load-balanced kernel each: single-source
//! shortest paths (frontier relaxation, thesis §6.1.3) and breadth-first search, with sequential
//! references (Dijkstra with a binary heap, queue BFS) to check them against.
//!
//! Each iteration runs the kernel over the frontier; the kernel pushes the vertices it improved
//! into a [`DeviceQueue`], which becomes the next frontier (sorted and deduplicated on the host)
//! until it is empty. A queue that overflows is grown to the reported size and the iteration
//! rerun, after restoring the distances from a snapshot taken before it: the failed attempt
//! already lowered some distances, so without the restore the rerun would not push those
//! vertices again and they would silently drop out of the traversal.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::prelude::*;
use crate::{Element, Error, Result};

/// Relaxes the edges of the frontier's vertices; pushes every vertex whose distance dropped.
#[load_balanced(schedule = "auto", tiles = "frontier")]
pub fn sssp_relax(
    g: &Csr<f32>,
    frontier: &[u32],
    dist: &mut [f32],
    next: &mut Queue,
    #[tile] u: usize,
    #[atom] e: usize,
) {
    let v = g.col_indices[e] as usize;
    let d = dist[u] + g.values[e];
    if d < atomic_min(&mut dist[v], d) {
        next.push(v as u32);
    }
}

/// Visits the unvisited neighbours of the frontier: the `cas` lets exactly one edge claim each.
#[load_balanced(schedule = "auto", tiles = "frontier")]
pub fn bfs_visit(
    g: &Csr<f32>,
    frontier: &[u32],
    depth: &mut [u32],
    level: u32,
    next: &mut Queue,
    #[atom] e: usize,
) {
    let v = g.col_indices[e] as usize;
    if atomic_cas(&mut depth[v], u32::MAX, level + 1) == u32::MAX {
        next.push(v as u32);
    }
}

/// The schedules the drivers accept: every built-in one.
pub fn schedules() -> &'static [Schedule] {
    sssp_relax::SCHEDULES
}

/// What [`sssp`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct SsspResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    /// Kernel iterations (frontiers processed).
    pub iterations: usize,
    /// Edges relaxed over all iterations (out-degrees of every frontier vertex).
    pub edges: u64,
    /// Iterations rerun after a queue overflow.
    pub retries: usize,
    /// Kernel time summed over the launches that counted, on a GPU.
    pub elapsed_ms: Option<f32>,
}

/// What [`bfs`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct BfsResult {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: Vec<u32>,
    pub iterations: usize,
    pub edges: u64,
    pub retries: usize,
    pub elapsed_ms: Option<f32>,
}

/// Shortest distances from `source` over nonnegative edge weights, with a queue of initial
/// capacity `num_rows` (grown on overflow).
pub fn sssp(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<SsspResult> {
    sssp_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`sssp`] with a chosen initial queue capacity (at least 1).
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
/// caller (see [`Kernels::Unchecked`]).
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
    /// `launch_with`: the kernels test every frontier entry.
    Checked,
    /// `launch_with_unchecked`: the kernels test nothing. Their only unproven indices are the
    /// frontier's entries (every other index is a column index, which the upload validated, or
    /// the tile, which the launcher checks against the slices' lengths), and the driver's
    /// frontiers hold the source, checked by [`start`] to be a vertex, and vertices the kernel
    /// pushed: column indices of a square graph, hence vertices too.
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
    let mut dist = vec![f32::INFINITY; g.num_rows()];
    let start = start(g, source, "sssp")?;
    dist[source] = 0.0;
    let mut dist = dev.upload(&dist)?;
    let run = traverse(
        dev,
        g,
        start,
        capacity,
        &mut dist,
        |queue, frontier, dist, _| match kernels {
            Kernels::Checked => sssp_relax::launch_with(dev, schedule, g, frontier, dist, queue),
            // SAFETY: every frontier entry is a vertex (`Kernels::Unchecked`).
            Kernels::Unchecked => unsafe {
                sssp_relax::launch_with_unchecked(dev, schedule, g, frontier, dist, queue)
            },
        },
    )?;
    Ok(SsspResult {
        dist: dist.download()?,
        iterations: run.iterations,
        edges: run.edges,
        retries: run.retries,
        elapsed_ms: run.elapsed_ms,
    })
}

/// Hop counts from `source`, with a queue of initial capacity `num_rows` (grown on overflow).
pub fn bfs(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<BfsResult> {
    bfs_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`bfs`] with a chosen initial queue capacity (at least 1).
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
    let mut depth = vec![u32::MAX; g.num_rows()];
    let start = start(g, source, "bfs")?;
    depth[source] = 0;
    let mut depth = dev.upload(&depth)?;
    let run = traverse(
        dev,
        g,
        start,
        capacity,
        &mut depth,
        |queue, frontier, depth, level| {
            let level = u32::try_from(level)
                .map_err(|_| Error::Shape(format!("bfs: level {level} exceeds u32")))?;
            match kernels {
                Kernels::Checked => {
                    bfs_visit::launch_with(dev, schedule, g, frontier, depth, level, queue)
                }
                // SAFETY: every frontier entry is a vertex (`Kernels::Unchecked`).
                Kernels::Unchecked => unsafe {
                    bfs_visit::launch_with_unchecked(
                        dev, schedule, g, frontier, depth, level, queue,
                    )
                },
            }
        },
    )?;
    Ok(BfsResult {
        depth: depth.download()?,
        iterations: run.iterations,
        edges: run.edges,
        retries: run.retries,
        elapsed_ms: run.elapsed_ms,
    })
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

struct Run {
    iterations: usize,
    edges: u64,
    retries: usize,
    elapsed_ms: Option<f32>,
}

/// The frontier loop shared by both algorithms: `step(queue, frontier, state, iteration)` runs
/// one kernel; `state` is snapshotted before each iteration and restored before a rerun.
fn traverse<T: Element>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: u32,
    capacity: usize,
    state: &mut DeviceBuffer<T>,
    mut step: impl FnMut(
        &mut DeviceQueue,
        &DeviceBuffer<u32>,
        &mut DeviceBuffer<T>,
        usize,
    ) -> Result<Launch>,
) -> Result<Run> {
    // Out-degrees, for the traversed-edge count.
    let offsets = g.download()?.row_offsets;
    let mut queue = DeviceQueue::new(dev, capacity.max(1))?;
    let mut snapshot = dev.zeros::<T>(state.len())?;
    let mut frontier = vec![source];
    let mut run = Run {
        iterations: 0,
        edges: 0,
        retries: 0,
        elapsed_ms: None,
    };
    while !frontier.is_empty() {
        let on_device = dev.upload(&frontier)?;
        dev.copy(state, &mut snapshot)?;
        let launch = loop {
            queue.clear()?;
            match step(&mut queue, &on_device, state, run.iterations) {
                Ok(launch) => break launch,
                Err(Error::QueueOverflow { needed, .. }) => {
                    dev.copy(&snapshot, state)?;
                    let needed = usize::try_from(needed)
                        .map_err(|_| Error::Shape(format!("a queue of {needed} items")))?;
                    queue.grow(needed)?;
                    run.retries += 1;
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(ms) = launch.elapsed_ms {
            *run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        run.iterations += 1;
        run.edges += frontier
            .iter()
            .map(|&u| (offsets[u as usize + 1] - offsets[u as usize]) as u64)
            .sum::<u64>();
        frontier = queue.download()?;
        frontier.sort_unstable();
        frontier.dedup();
    }
    Ok(run)
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
