//! Single-source shortest paths by frontier relaxation (thesis §6.1.3), and Dijkstra's
//! algorithm as its reference.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use super::collect_marked;
use super::driver::{level_run, stamp, start, traverse, Choice, Kernels, Traversal};
use crate::prelude::*;
use crate::Result;

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

/// What [`sssp`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct SsspResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    pub run: Traversal,
}

/// Shortest distances from `source` over nonnegative edge weights, with queues of
/// `num_rows` slots (which never overflow). Each step's kernel runs `schedule`: a
/// [`Schedule`], or [`Choice::Auto`] for the rule's pick from that step's frontier.
pub fn sssp(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
) -> Result<SsspResult> {
    sssp_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`sssp`] with a chosen initial queue capacity (at least 1; grown on overflow).
pub fn sssp_with_capacity(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
    capacity: usize,
) -> Result<SsspResult> {
    sssp_run(dev, g, source, schedule.into(), capacity, Kernels::Checked)
}

/// [`sssp`] through the kernels without bounds tests (`launch_with_unchecked`), to measure what
/// the tests of the frontier cost. Safe: this driver proves what those kernels leave to their
/// caller (its frontiers hold vertices only, and `edges` is never empty).
pub fn sssp_unchecked(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
) -> Result<SsspResult> {
    sssp_run(
        dev,
        g,
        source,
        schedule.into(),
        g.num_rows(),
        Kernels::Unchecked,
    )
}

fn sssp_run(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Choice,
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
        (start, capacity),
        &mut state,
        |(dist, marks), next, frontier, edges, iteration| {
            let mark = stamp(iteration, "sssp")?;
            let s = schedule.schedule_for(g, frontier.len() as u64);
            match kernels {
                Kernels::Checked => {
                    sssp_relax::launch_with(dev, s, g, frontier, dist, marks, mark, next, edges)
                }
                // SAFETY: every frontier entry is a vertex and `edges` is not empty
                // (`Kernels::Unchecked`).
                Kernels::Unchecked => unsafe {
                    sssp_relax::launch_with_unchecked(
                        dev, s, g, frontier, dist, marks, mark, next, edges,
                    )
                },
            }
        },
        |(_, marks), vertices, next, iteration| {
            let mark = stamp(iteration, "sssp")?;
            collect_marked::launch_with(dev, Schedule::ThreadMapped, vertices, marks, mark, next)
        },
        |(dist, marks), current, next, len, edges, iteration| {
            let mark = stamp(iteration, "sssp")?;
            let Some(run) = level_run(schedule, g, (len, capacity), mark) else {
                return Ok(None);
            };
            let q = crate::LevelQueues { current, next, len };
            let state = (dist, marks, mark);
            crate::sssp_block_levels(&dev.stream(), g, state, q, run, edges).map(Some)
        },
    )?;
    let dist = state.0.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(SsspResult { dist, run })
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
