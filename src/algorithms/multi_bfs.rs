//! Breadth-first search across the devices of a group: each device expands the frontier
//! vertices whose out-edges it holds, and the devices exchange what they claimed after each
//! level.
//!
//! The graph is split by rows ([`MultiCsr`]): a part holds the out-edges of a range of vertices
//! (a vertex cut between two parts has out-edges in both). Every device keeps a copy of the
//! whole depth array. A level is three steps:
//!
//! 1. every part runs [`bfs_visit`] over its frontier (its own rows whose depth is the
//!    level) against its device's copy, claiming unvisited neighbours with `level + 1` and
//!    pushing them into its device's claim queue: a vertex two devices claim is claimed twice,
//!    once in each copy, with the same depth;
//! 2. the devices exchange their claims, in one of two ways ([`FrontierExchange`]):
//!    - **claim lists**: every device's claim queue is gathered into every device
//!      ([`Devices::all_gather_queues`], 4 bytes per claim), and each part takes them in
//!      ([`absorb_claims`]): it marks every claimed vertex in its device's copy and pushes
//!      those among its rows into its next frontier;
//!    - **all-reduce**: [`Devices::all_reduce`] takes the minimum of the copies of the depth
//!      array (4 bytes per vertex, whatever the frontier), and each part collects its rows
//!      marked `level + 1` ([`collect_rows_marked`], one thread per row);
//! 3. the host reads the parts' push counters, the next frontiers' lengths.
//!
//! The host also reads the claim counts after step 1 (they size the lists' copies and choose
//! the exchange): 16 bytes per part per level in all.
//!
//! The claim lists are the all-to-all of frontier vertices of Buluç and Madduri's 1-D
//! decomposition ("Parallel Breadth-First Search on Distributed Memory Systems", SC'11, §3),
//! sent to every device because every device keeps the whole depth array; the all-reduce is
//! their alternative, the all-gather of a frontier bitmap, with the depth array as the bitmap.
//! Which one costs less depends on the level: a deep graph (a road network, a mesh) has
//! thousands of levels of a few hundred claims each, where the all-reduce would move the whole
//! array thousands of times; a power-law graph has a few levels that claim most of the
//! vertices, where one reduce of the array beats lists as long as it.

use std::time::{Duration, Instant};

use super::bfs::bfs_visit;
use super::driver::{one_per_vertex, stamp, EDGE_SLOTS};
use super::multi_frontier::{
    check_source, claim_counts, edge_sum, first_row, lists_carry, per_part_stamps, reset,
    widen_inboxes, FrontierExchange, Frontiers,
};
use crate::multi::{Devices, MultiCsr, Reduce, Replicated};
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

/// Takes in a level's claims gathered from every device (`frontier`: vertex numbers, a vertex
/// once per device that claimed it; `vertices` has one one-atom row per vertex of the graph):
/// marks each claimed vertex `mark` in this device's depths, and pushes each one among the
/// part's rows `first..end` into the part's next frontier, in the part's row numbers, once:
/// `seen` (one entry per row of the part) holds the last mark each row was pushed with.
///
/// The plain store is right because every claim of a level carries the same mark, and a
/// vertex claimed in this level was unvisited in every copy before it (the copies agree after
/// each level).
#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn absorb_claims(
    _vertices: &Csr<f32>,
    frontier: &[u32],
    depth: &mut [u32],
    mark: u32,
    first: u32,
    end: u32,
    seen: &mut [u32],
    next: &mut Queue,
    #[tile] v: usize,
    #[atom] _e: usize,
) {
    depth[v] = mark;
    if v >= first as usize && v < end as usize {
        let row = v - first as usize;
        if atomic_exch(&mut seen[row], mark) != mark {
            next.push(row as u32);
        }
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
    /// Levels whose claims travelled as claim lists (the others by all-reduce).
    pub claim_list_levels: usize,
    /// Of the wall time, the levels' expansions: from the first
    /// [`bfs_visit`](fn@super::bfs_visit) launch of each level to the end of the waits for
    /// them (host clock).
    pub expand_ms: f64,
    /// Of the wall time, the levels' exchanges: from the end of the expansions' waits to the
    /// next frontiers' lengths on the host (the exchange and each part's taking in or
    /// collection of its frontier). The rest is the reset, the first frontier and the
    /// download.
    pub exchange_ms: f64,
    /// Wall-clock time of the search, from the reset of the depths to the result's download
    /// ([`MultiBfs::new`]'s allocations not included).
    pub wall_ms: f64,
}

/// Searches on a split graph: the device buffers every search needs (each device's copy of
/// the depths, its claim queue, inbox and edge counters, each part's frontier and row set),
/// made once, so that a search from a new source allocates and uploads nothing but the
/// source's depth (4 bytes per device).
///
/// ```
/// use lb::algorithms::{bfs_levels, FrontierExchange, MultiBfs};
/// use lb::multi::{Devices, MultiCsr};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(400, 400, 5.0, 3);
/// let split = MultiCsr::upload(&Devices::simulators(3)?, &g)?;
/// let mut bfs = MultiBfs::new(&split)?;
/// for source in [7, 100] {
///     assert_eq!(bfs.search(source, Schedule::MergePath)?.depth, bfs_levels(&g, source));
/// }
/// // The same depths whichever way the claims travel.
/// bfs.set_exchange(FrontierExchange::AllReduce);
/// assert_eq!(bfs.search(7, Schedule::Lrb)?.depth, bfs_levels(&g, 7));
/// # Ok::<(), lb::Error>(())
/// ```
pub struct MultiBfs<'a> {
    split: &'a MultiCsr<f32>,
    frontiers: Frontiers,
    exchange: FrontierExchange,
    /// Per device, the queue [`bfs_visit`] pushes its claims into (a device's parts share
    /// one). Each holds every vertex, because a device claims a vertex at most once per search
    /// (the `cas` on its copy): none overflows.
    claims: Vec<DeviceQueue>,
    /// What the claim lists need, made by the first search that may use them.
    lists: Option<ClaimLists>,
    depth: Replicated<u32>,
    edges: Replicated<u64>,
}

/// The buffers of the claim-list exchange.
struct ClaimLists {
    /// Per device, every device's claims of a level.
    inbox: Vec<DeviceQueue>,
    /// Per device, one one-atom row per vertex: [`absorb_claims`]'s tile set.
    vertices: Vec<DeviceCsr<f32>>,
    /// Per part, the mark each of its rows was last pushed with.
    seen: Vec<DeviceBuffer<u32>>,
}

impl<'a> MultiBfs<'a> {
    /// [`FrontierExchange::Auto`] sends a level's claims as lists while there are at most
    /// this many per vertex of the graph (summed over the devices), and all-reduces the depths
    /// above. A list moves 4 bytes per claim to each peer and a scattered store per claim into
    /// each copy; the all-reduce moves about 8 bytes per vertex through each device's links
    /// (a ring's reduce-scatter and all-gather) and reads the part's rows again to collect the
    /// frontier. Below half a claim per vertex the lists move at most a quarter of the
    /// all-reduce's bytes, which pays for their scattered stores.
    pub const CLAIMS_PER_VERTEX: f64 = 0.5;

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
            exchange: FrontierExchange::default(),
            claims,
            lists: None,
            depth: group.replicated_zeros(n)?,
            edges: group.replicated_zeros(EDGE_SLOTS)?,
        })
    }

    /// The split graph the searches run on.
    pub fn graph(&self) -> &'a MultiCsr<f32> {
        self.split
    }

    /// How the next searches exchange their claims ([`FrontierExchange::Auto`] unless set).
    pub fn set_exchange(&mut self, exchange: FrontierExchange) {
        self.exchange = exchange;
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
        self.prepare_lists()?;
        if let Some(lists) = &mut self.lists {
            // The marks start again from 1.
            for (p, seen) in split.parts().iter().zip(&mut lists.seen) {
                p.device().fill(seen, 0)?;
            }
        }
        reset(group, &mut self.depth, u32::MAX, (source, 0))?;
        reset(group, &mut self.edges, 0, (0, 0))?;
        // The first frontier: the rows marked 0, the source's in every part that holds it.
        self.collect(0)?;
        let (mut levels, mut by_lists) = (0, 0);
        let (mut expand, mut exchange) = (Duration::ZERO, Duration::ZERO);
        while self.frontiers.any() {
            let level = u32::try_from(levels)
                .ok()
                .filter(|&l| l < u32::MAX - 1)
                .ok_or_else(|| Error::Shape(format!("{WHAT}: level {levels} exceeds u32")))?;
            let started = Instant::now();
            let claimed = self.visit(schedule, level)?;
            let expanded = Instant::now();
            expand += expanded - started;
            let mark = stamp(levels, WHAT)?;
            levels += 1;
            let total: u64 = claimed.iter().sum();
            if total == 0 {
                break;
            }
            if self.by_lists(total) {
                self.exchange_lists(&claimed, total, mark)?;
                by_lists += 1;
            } else {
                group.all_reduce(Reduce::Min, &mut self.depth)?;
                self.collect(mark)?;
            }
            exchange += expanded.elapsed();
        }
        out.edges = edge_sum(&self.edges)?;
        out.depth.download(&group.devices()[0], self.depth.on(0))?;
        out.levels = levels;
        out.claim_list_levels = by_lists;
        out.expand_ms = expand.as_secs_f64() * 1e3;
        out.exchange_ms = exchange.as_secs_f64() * 1e3;
        out.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Runs [`bfs_visit`] on every part with a frontier, then waits for them; returns how many
    /// vertices each device claimed.
    fn visit(&mut self, schedule: Schedule, level: u32) -> Result<Vec<u64>> {
        let split = self.split;
        self.frontiers.clear_claims(split, &mut self.claims)?;
        let mut pending = Vec::new();
        for (p, f) in split.parts().iter().zip(&mut self.frontiers.parts) {
            if f.len == 0 {
                continue;
            }
            let d = p.index();
            pending.push((
                d,
                bfs_visit::launch_with_async(
                    &p.device().stream(),
                    schedule,
                    p.tiles(),
                    f.queue.slots(f.len),
                    self.depth.on_mut(d),
                    level,
                    &mut self.claims[d],
                    self.edges.on_mut(d),
                )?,
            ));
        }
        claim_counts(pending, self.claims.len())
    }

    /// Whether a level whose devices claimed `total` vertices exchanges them as lists.
    fn by_lists(&self, total: u64) -> bool {
        let n = self.split.num_rows();
        lists_carry(self.exchange, total, Self::CLAIMS_PER_VERTEX, n)
    }

    /// Makes the claim lists' buffers, unless the exchange never uses them or they exist. The
    /// inboxes start with room for [`FrontierExchange::Auto`]'s largest list.
    fn prepare_lists(&mut self) -> Result<()> {
        if self.exchange == FrontierExchange::AllReduce || self.lists.is_some() {
            return Ok(());
        }
        let split = self.split;
        let n = split.num_rows();
        let room = ((Self::CLAIMS_PER_VERTEX * n as f64) as usize).max(1);
        let devices = split.devices().devices();
        self.lists = Some(ClaimLists {
            inbox: devices
                .iter()
                .map(|dev| DeviceQueue::new(dev, room))
                .collect::<Result<_>>()?,
            vertices: devices
                .iter()
                .map(|dev| one_per_vertex(dev, n))
                .collect::<Result<_>>()?,
            seen: per_part_stamps(split)?,
        });
        Ok(())
    }

    /// Gathers every device's `claimed` claims (`total` in all) into every device, then lets
    /// every part take them in as its next frontier, marked `mark`.
    fn exchange_lists(&mut self, claimed: &[u64], total: u64, mark: u32) -> Result<()> {
        let split = self.split;
        let group: &Devices = split.devices();
        let lists = self.lists.as_mut().expect("made by the search");
        let room = usize::try_from(total)
            .map_err(|_| Error::Shape(format!("{WHAT}: {total} claims exceed usize")))?;
        widen_inboxes(group, &mut lists.inbox, room)?;
        group.all_gather_queues(&self.claims, claimed, &mut lists.inbox)?;
        let depth = &mut self.depth;
        self.frontiers.collect(split, |q, p, f| {
            let d = p.index();
            let first = first_row(p, WHAT)?;
            let end = first + p.rows().len() as u32;
            absorb_claims::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                &lists.vertices[d],
                lists.inbox[d].slots(total),
                depth.on_mut(d),
                mark,
                first,
                end,
                &mut lists.seen[q],
                &mut f.queue,
            )
        })
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
