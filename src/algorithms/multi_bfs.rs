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

/// One part's state: its frontier, the queue [`bfs_visit`] pushes its claims into (the
/// claims travel through the depth array instead, so these are not read), and the
/// one-entry-per-row tile set [`collect_rows_marked`] runs over.
struct PartState {
    frontier: DeviceQueue,
    claims: DeviceQueue,
    rows: DeviceCsr<f32>,
    len: u64,
}

/// Searches on a split graph: the device buffers every search needs (each device's copy of
/// the depths and its edge counters, each part's queues and row set), made once, so that a
/// search from a new source allocates and uploads nothing but the source's depth (4 bytes per
/// device).
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
    parts: Vec<PartState>,
    depth: Replicated<u32>,
    edges: Replicated<u64>,
}

impl<'a> MultiBfs<'a> {
    /// The buffers for searches on `split`, which holds a graph's adjacency matrix (row `u`
    /// lists `u`'s out-neighbours): square, with fewer than 2³² vertices.
    pub fn new(split: &'a MultiCsr<f32>) -> Result<MultiBfs<'a>> {
        let n = split.num_rows();
        if split.num_cols() != n || u32::try_from(n).is_err() {
            return Err(Error::Shape(format!(
                "bfs_multi: a graph's adjacency matrix is square with fewer than 2^32 \
                 vertices, this one is {n} × {}",
                split.num_cols()
            )));
        }
        let group = split.devices();
        let parts = split
            .parts()
            .iter()
            .map(|p| {
                let dev = p.device();
                Ok(PartState {
                    // A part's frontier holds each of its rows at most once, and its claims
                    // each vertex at most once per level (the `cas` on its device's copy):
                    // neither overflows.
                    frontier: DeviceQueue::new(dev, p.rows().len().max(1))?,
                    claims: DeviceQueue::new(dev, n.max(1))?,
                    rows: super::driver::one_per_vertex(dev, p.rows().len())?,
                    len: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiBfs {
            split,
            parts,
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
        let n = split.num_rows();
        if source >= n {
            return Err(Error::Shape(format!(
                "bfs_multi: source {source} is not a vertex of a graph with {n} vertices"
            )));
        }
        let group = split.devices();
        for (d, dev) in group.devices().iter().enumerate() {
            dev.fill(self.depth.on_mut(d), u32::MAX)?;
            dev.write_at(self.depth.on_mut(d), source, &[0])?;
            dev.fill(self.edges.on_mut(d), 0)?;
        }
        // The first frontier: the rows marked 0, the source's in every part that holds it.
        self.collect(0)?;
        let mut levels = 0;
        while self.parts.iter().any(|s| s.len > 0) {
            let level = u32::try_from(levels)
                .ok()
                .filter(|&l| l < u32::MAX - 1)
                .ok_or_else(|| Error::Shape(format!("bfs_multi: level {levels} exceeds u32")))?;
            for (p, s) in split.parts().iter().zip(&mut self.parts) {
                if s.len == 0 {
                    continue;
                }
                s.claims.clear()?;
                let d = p.index();
                // The visit's report is read at the collection's wait on the same stream.
                drop(bfs_visit::launch_with_async(
                    &p.device().stream(),
                    schedule,
                    p.tiles(),
                    s.frontier.slots(s.len),
                    self.depth.on_mut(d),
                    level,
                    &mut s.claims,
                    self.edges.on_mut(d),
                )?);
            }
            group.all_reduce(Reduce::Min, &mut self.depth)?;
            self.collect(stamp(levels, "bfs_multi")?)?;
            levels += 1;
        }
        out.edges = self
            .edges
            .download_all()?
            .iter()
            .flatten()
            .fold(0u64, |sum, &e| sum.wrapping_add(e));
        out.depth.download(&group.devices()[0], self.depth.on(0))?;
        out.levels = levels;
        out.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Refills every part's frontier with its rows marked `mark` in its device's copy of the
    /// depths, and reads how many each got (one wait per part, after every part's launch).
    fn collect(&mut self, mark: u32) -> Result<()> {
        let mut pending = Vec::with_capacity(self.parts.len());
        for (p, s) in self.split.parts().iter().zip(&mut self.parts) {
            s.frontier.clear()?;
            let first = u32::try_from(p.rows().start).map_err(|_| {
                Error::Shape(format!("bfs_multi: row {} exceeds u32", p.rows().start))
            })?;
            pending.push(collect_rows_marked::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                &s.rows,
                self.depth.on(p.index()),
                first,
                mark,
                &mut s.frontier,
            )?);
        }
        for (pending, s) in pending.into_iter().zip(&mut self.parts) {
            s.len = super::driver::pushed(&pending.wait()?)?;
        }
        Ok(())
    }
}

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
