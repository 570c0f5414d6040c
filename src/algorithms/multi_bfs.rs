//! Breadth-first search across the devices of a group: each device expands the frontier
//! vertices whose out-edges it holds, and one all-reduce per level merges what the devices
//! claimed.
//!
//! The graph is split by rows ([`MultiCsr`]): a part holds the out-edges of a range of vertices
//! (a vertex cut between two parts has out-edges in both). Every device keeps a copy of the
//! whole depth array. A level is three steps:
//!
//! 1. every part runs [`bfs_visit`] over its frontier (its own rows whose depth is the
//!    level) against its device's copy, claiming unvisited neighbours with `level + 1`: a
//!    vertex two devices claim is claimed twice, once in each copy, with the same depth;
//! 2. [`Devices::all_reduce`] takes the minimum of the copies, so every copy holds every
//!    claim (NCCL's all-reduce on GPUs: the frontier travels as the changed entries of the
//!    depth array, with no host staging);
//! 3. every part collects its rows marked `level + 1` into its next frontier
//!    ([`collect_rows_marked`]), and the host reads the parts' push counters: the only bytes
//!    to the host per level, 8 per part.
//!
//! This is the all-gather of a frontier bitmap that Buluç and Madduri describe for distributed
//! BFS ("Parallel Breadth-First Search on Distributed Memory Systems", SC'11, §3, the 1-D
//! decomposition), with the depth array as the bitmap: one word per vertex instead of one bit,
//! which NCCL reduces directly.

use std::time::Instant;

use super::bfs::bfs_visit;
use super::driver::{stamp, EDGE_SLOTS};
use super::multi_frontier::{check_source, edge_sum, first_row, reset, Frontiers};
use crate::multi::{MultiCsr, Reduce, Replicated};
use crate::prelude::*;
use crate::{Error, Result};

/// Pushes every row `u` of a part whose vertex (`first + u`) is marked `mark`: the part's next
/// frontier, in its own row numbers. `rows` has one entry per row of the part (one atom each),
/// so each thread tests one vertex.
#[load_balanced(schedule = "thread_mapped")]
pub fn collect_rows_marked(
    _rows: &Csr<f32>,
    marks: &[u32],
    first: u32,
    mark: u32,
    next: &mut Queue,
    #[tile] u: usize,
    #[atom] _e: usize,
) {
    if marks[first as usize + u] == mark {
        next.push(u as u32);
    }
}

/// What [`bfs_multi`] computed. `D` holds the depths on the host: a `Vec`, or with
/// [`MultiBfs::search_into`] a [`HostBuffer`] in page-locked memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MultiBfsResult<D = Vec<u32>> {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: D,
    /// Levels expanded (frontiers that were not empty).
    pub levels: usize,
    /// Edges expanded over all levels (out-degrees of every frontier vertex).
    pub edges: u64,
    /// Wall-clock time of the search, from the reset of the depths to the result's download
    /// ([`MultiBfs::new`]'s allocations not included).
    pub wall_ms: f64,
}

/// Searches on a split graph: the device buffers every search needs (each device's copy of
/// the depths and its edge counters, each part's frontier, row set and claim queue), made once,
/// so that a search from a new source allocates and uploads nothing but the source's depth (4
/// bytes per device).
///
/// ```
/// use lb::algorithms::{bfs_levels, MultiBfs};
/// use lb::multi::{Devices, MultiCsr};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(400, 400, 5.0, 3);
/// let split = MultiCsr::upload(&Devices::simulators(3)?, &g)?;
/// let mut bfs = MultiBfs::new(&split)?;
/// for source in [7, 100] {
///     assert_eq!(bfs.search(source, Schedule::MergePath)?.depth, bfs_levels(&g, source));
/// }
/// # Ok::<(), lb::Error>(())
/// ```
pub struct MultiBfs<'a> {
    split: &'a MultiCsr<f32>,
    frontiers: Frontiers,
    /// Per device, the queue [`bfs_visit`] pushes its claims into: the claims travel through
    /// the depth array instead, so these are not read, and a device's parts share one. Each
    /// holds every vertex, because a device claims a vertex at most once per search (the
    /// `cas` on its copy): none overflows.
    claims: Vec<DeviceQueue>,
    depth: Replicated<u32>,
    edges: Replicated<u64>,
}

impl<'a> MultiBfs<'a> {
    /// The buffers for searches on `split`, which holds a graph's adjacency matrix (row `u`
    /// lists `u`'s out-neighbours): square, with fewer than 2³² vertices.
    pub fn new(split: &'a MultiCsr<f32>) -> Result<MultiBfs<'a>> {
        let frontiers = Frontiers::new(split, WHAT)?;
        let n = split.num_rows();
        let group = split.devices();
        let claims = group
            .devices()
            .iter()
            .map(|dev| DeviceQueue::new(dev, n.max(1)))
            .collect::<Result<_>>()?;
        Ok(MultiBfs {
            split,
            frontiers,
            claims,
            depth: group.replicated_zeros(n)?,
            edges: group.replicated_zeros(EDGE_SLOTS)?,
        })
    }

    /// Hop counts from `source`: exactly [`bfs`](super::bfs)'s result on one device, whatever
    /// the split.
    pub fn search(&mut self, source: usize, schedule: Schedule) -> Result<MultiBfsResult> {
        let mut out = MultiBfsResult::default();
        self.search_into(source, schedule, &mut out)?;
        Ok(out)
    }

    /// [`search`](Self::search) into `out`, reusing its depth buffer: searches in a loop then
    /// write their depths into host memory already touched (see
    /// [`bfs_into`](super::bfs_into)). `out` is overwritten; after an error its contents mean
    /// nothing.
    pub fn search_into<D: HostDestination<u32>>(
        &mut self,
        source: usize,
        schedule: Schedule,
        out: &mut MultiBfsResult<D>,
    ) -> Result<()> {
        let clock = Instant::now();
        let split = self.split;
        check_source(split.num_rows(), source, WHAT)?;
        let group = split.devices();
        reset(group, &mut self.depth, u32::MAX, (source, 0))?;
        reset(group, &mut self.edges, 0, (0, 0))?;
        // The first frontier: the rows marked 0, the source's in every part that holds it.
        self.collect(0)?;
        let mut levels = 0;
        while self.frontiers.any() {
            let level = u32::try_from(levels)
                .ok()
                .filter(|&l| l < u32::MAX - 1)
                .ok_or_else(|| Error::Shape(format!("{WHAT}: level {levels} exceeds u32")))?;
            for (p, f) in split.parts().iter().zip(&mut self.frontiers.parts) {
                if f.len == 0 {
                    continue;
                }
                let d = p.index();
                let claims = &mut self.claims[d];
                claims.clear()?;
                // The visit's report is read at the collection's wait on the same stream.
                drop(bfs_visit::launch_with_async(
                    &p.device().stream(),
                    schedule,
                    p.tiles(),
                    f.queue.slots(f.len),
                    self.depth.on_mut(d),
                    level,
                    claims,
                    self.edges.on_mut(d),
                )?);
            }
            group.all_reduce(Reduce::Min, &mut self.depth)?;
            self.collect(stamp(levels, WHAT)?)?;
            levels += 1;
        }
        out.edges = edge_sum(&self.edges)?;
        out.depth.download(&group.devices()[0], self.depth.on(0))?;
        out.levels = levels;
        out.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Refills every part's frontier with its rows marked `mark` in its device's copy of the
    /// depths.
    fn collect(&mut self, mark: u32) -> Result<()> {
        let depth = &self.depth;
        self.frontiers.collect(self.split, |_, p, f| {
            collect_rows_marked::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                &f.rows,
                depth.on(p.index()),
                first_row(p, WHAT)?,
                mark,
                &mut f.queue,
            )
        })
    }
}

/// The name errors give.
const WHAT: &str = "bfs_multi";

/// Hop counts from `source` on a graph split across devices (`split` holds its adjacency
/// matrix: row `u` lists `u`'s out-neighbours): [`MultiBfs::new`] then
/// [`MultiBfs::search`]. Searches from several sources should keep one [`MultiBfs`].
///
/// ```
/// use lb::algorithms::{bfs_levels, bfs_multi};
/// use lb::multi::{Devices, MultiCsr};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(400, 400, 5.0, 3);
/// let split = MultiCsr::upload(&Devices::simulators(3)?, &g)?;
/// let r = bfs_multi(&split, 7, Schedule::MergePath)?;
/// assert_eq!(r.depth, bfs_levels(&g, 7));
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs_multi(
    split: &MultiCsr<f32>,
    source: usize,
    schedule: Schedule,
) -> Result<MultiBfsResult> {
    MultiBfs::new(split)?.search(source, schedule)
}
