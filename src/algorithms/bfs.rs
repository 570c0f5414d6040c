//! Breadth-first search by frontier expansion (top-down, "push"), and a queue BFS as its
//! reference.

use std::collections::VecDeque;
use std::time::Instant;

use super::collect_marked;
use super::driver::{level_run, stamp, start, traverse, Choice, Kernels, Traversal};
use crate::prelude::*;
use crate::Result;

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

/// What [`bfs`] computed. `D` holds the depths on the host: a `Vec`, or with [`bfs_into`] a
/// [`HostBuffer`] in page-locked memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BfsResult<D = Vec<u32>> {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: D,
    pub run: Traversal,
}

/// Hop counts from `source`, with queues of `num_rows` slots (which never overflow). Each
/// step's kernel runs `schedule`: a [`Schedule`], or [`Choice::Auto`] for the rule's pick from
/// that step's frontier.
///
/// ```
/// use lb::algorithms::{bfs, bfs_levels, Choice};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(400, 400, 6.0, 3);
/// let dev = Device::default();
/// let dg = DeviceCsr::upload(&dev, &g)?;
/// let r = bfs(&dev, &dg, 0, Choice::Auto)?;
/// assert_eq!(r.depth, bfs_levels(&g, 0));
/// // Which schedules the steps ran, and how many steps each.
/// let steps: usize = r.run.schedules.iter().map(|(_, n)| n).sum();
/// assert_eq!(steps, r.run.iterations);
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
) -> Result<BfsResult> {
    bfs_with_capacity(dev, g, source, schedule, g.num_rows())
}

/// [`bfs`] into `out`, reusing its depth buffer: searches in a loop then write their depths into
/// host memory already touched, where a new vector of several megabytes costs a page fault per
/// page on its first write (see [`Device::download_into`]). With a [`HostBuffer`] the depths
/// arrive about four times faster than into a `Vec` (page-locked memory, see
/// [`Device::download_to`]). `out` is overwritten; after an error its contents mean nothing.
///
/// ```
/// use lb::algorithms::{bfs_into, bfs_levels, BfsResult};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(300, 300, 6.0, 7);
/// let dev = Device::default();
/// let dg = DeviceCsr::upload(&dev, &g)?;
/// let mut r: BfsResult = BfsResult::default();
/// for source in [0, 5] {
///     bfs_into(&dev, &dg, source, Schedule::MergePath, &mut r)?;
///     assert_eq!(r.depth, bfs_levels(&g, source));
/// }
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs_into<D: HostDestination<u32>>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
    out: &mut BfsResult<D>,
) -> Result<()> {
    bfs_run(
        dev,
        g,
        source,
        schedule.into(),
        g.num_rows(),
        Kernels::Checked,
        out,
    )
}

/// [`bfs`] with a chosen initial queue capacity (at least 1; grown on overflow).
pub fn bfs_with_capacity(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
    capacity: usize,
) -> Result<BfsResult> {
    let mut out = BfsResult::default();
    bfs_run(
        dev,
        g,
        source,
        schedule.into(),
        capacity,
        Kernels::Checked,
        &mut out,
    )?;
    Ok(out)
}

/// [`bfs`] through the kernels without bounds tests, as [`sssp_unchecked`](super::sssp_unchecked).
pub fn bfs_unchecked(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: impl Into<Choice>,
) -> Result<BfsResult> {
    let mut out = BfsResult::default();
    bfs_run(
        dev,
        g,
        source,
        schedule.into(),
        g.num_rows(),
        Kernels::Unchecked,
        &mut out,
    )?;
    Ok(out)
}

fn bfs_run<D: HostDestination<u32>>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Choice,
    capacity: usize,
    kernels: Kernels,
    out: &mut BfsResult<D>,
) -> Result<()> {
    let clock = Instant::now();
    let start = start(g, source, "bfs")?;
    let mut depth = dev.filled(g.num_rows(), u32::MAX)?;
    dev.write_at(&mut depth, source, &[0])?;
    let mut run = traverse(
        dev,
        g,
        (start, capacity),
        &mut depth,
        |depth, next, frontier, edges, level| {
            let level = stamp(level, "bfs")? - 1;
            let s = schedule.schedule_for(g, frontier.len() as u64);
            match kernels {
                Kernels::Checked => {
                    bfs_visit::launch_with(dev, s, g, frontier, depth, level, next, edges)
                }
                // SAFETY: every frontier entry is a vertex and `edges` is not empty
                // (`Kernels::Unchecked`).
                Kernels::Unchecked => unsafe {
                    bfs_visit::launch_with_unchecked(dev, s, g, frontier, depth, level, next, edges)
                },
            }
        },
        |depth, vertices, next, level| {
            let mark = stamp(level, "bfs")?;
            collect_marked::launch_with(dev, Schedule::ThreadMapped, vertices, depth, mark, next)
        },
        |depth, current, next, len, edges, level| {
            let mark = stamp(level, "bfs")?;
            let Some(run) = level_run(schedule, g, (len, capacity), mark) else {
                return Ok(None);
            };
            let q = crate::LevelQueues { current, next, len };
            let state = (depth, mark - 1);
            crate::bfs_block_levels(&dev.stream(), g, state, q, run, edges).map(Some)
        },
    )?;
    out.depth.download(dev, &depth)?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    out.run = run;
    Ok(())
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
