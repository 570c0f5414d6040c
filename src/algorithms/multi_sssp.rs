//! Single-source shortest paths across the devices of a group: Bellman-Ford over frontiers
//! (the thesis's §6.1.3 relaxation), each device relaxing the out-edges it holds, and an
//! exchange per round merging the distances.
//!
//! As for [`MultiBfs`](super::MultiBfs), the graph is split by rows and every device keeps a
//! copy of the whole distance array. A round:
//!
//! 1. every part relaxes the out-edges of its frontier into its device's copy with
//!    `atomic_min`; with claim lists ([`sssp_relax_claim`]) each device also pushes every
//!    vertex whose distance it lowered into its claim queue, once per round;
//! 2. the devices exchange what they lowered ([`FrontierExchange`]):
//!    - **claim lists**: each device packs the distances of its claims beside them
//!      ([`pack_claimed`]), both lists are gathered into every device
//!      ([`Devices::all_gather_queues`], [`Devices::all_gather_prefixes`]: 8 bytes per claim),
//!      and each part takes them in ([`absorb_distances`]): every claimed distance lowers the
//!      device's copy, and a row of the part whose distance dropped below the best the part
//!      has seen joins its next frontier;
//!    - **all-reduce**: [`Devices::all_reduce`] takes the minimum of the copies (4 bytes per
//!      vertex), and every part collects its rows whose distance dropped below the best it has
//!      seen ([`collect_rows_improved`]);
//! 3. the host reads the parts' push counters (8 bytes per part), and with claim lists the
//!    claim counts after step 1.
//!
//! A vertex whose row is cut between parts is in each of those parts' frontiers, so each
//! relaxes its share of the vertex's out-edges.

use std::time::{Duration, Instant};

use super::driver::{one_per_vertex, EDGE_SLOTS};
use super::multi_frontier::{
    check_source, claim_counts, edge_sum, first_row, lists_carry, per_part_stamps, reset,
    widen_inboxes, FrontierExchange, Frontiers,
};
use crate::multi::{Devices, MultiCsr, Reduce, Replicated};
use crate::prelude::*;
use crate::{Error, Result};

/// Relaxes the out-edges of a part's frontier: its rows `u` are vertex `first + u`, whose
/// distance `dist` holds. Adds each frontier row's atoms to `edges[u % edges.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn sssp_relax_rows(
    g: &Csr<f32>,
    frontier: &[u32],
    dist: &mut [f32],
    first: u32,
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
    let d = dist[first as usize + u] + g.values[e];
    atomic_min(&mut dist[g.col_indices[e] as usize], d);
}

/// Pushes every row `u` of a part whose vertex's distance (`dist[first + u]`) is below
/// `best[u]`, the smallest the part has seen for it, and lowers `best[u]` to it. One thread
/// per row (`rows` has one atom per row), so no two threads share a `best` entry.
#[load_balanced(schedule = "thread_mapped")]
pub fn collect_rows_improved(
    _rows: &Csr<f32>,
    dist: &[f32],
    first: u32,
    best: &mut [f32],
    next: &mut Queue,
    #[tile] u: usize,
    #[atom] _e: usize,
) {
    let d = dist[first as usize + u];
    if d < best[u] {
        best[u] = d;
        next.push(u as u32);
    }
}

/// [`sssp_relax_rows`](fn@sssp_relax_rows) that also pushes every vertex whose distance it
/// lowered into `claims`, once per round: `claimed` (one entry per vertex) holds the last
/// round each vertex was pushed in.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn sssp_relax_claim(
    g: &Csr<f32>,
    frontier: &[u32],
    dist: &mut [f32],
    first: u32,
    round: u32,
    claimed: &mut [u32],
    claims: &mut Queue,
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
    let d = dist[first as usize + u] + g.values[e];
    let v = g.col_indices[e] as usize;
    if d < atomic_min(&mut dist[v], d) && atomic_exch(&mut claimed[v], round) != round {
        claims.push(v as u32);
    }
}

/// Writes the distance of every claim beside it: `values[i] = dist[claims[i]]`, for each
/// position `i` the frontier lists (`0..count`; `positions` has one one-atom row per
/// position), once the round's relaxations are done.
#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
pub fn pack_claimed(
    _positions: &Csr<f32>,
    frontier: &[u32],
    claims: &[u32],
    dist: &[f32],
    values: &mut [f32],
    #[tile] i: usize,
    #[atom] _e: usize,
) {
    values[i] = dist[claims[i] as usize];
}

/// Takes in a round's claims gathered from every device, a vertex and its distance at each
/// position `i` the frontier lists: lowers the device's copy of the vertex's distance to it,
/// and pushes a vertex among the part's rows `first..end` whose distance dropped below
/// `best` (the smallest the part has seen per row) into the part's next frontier, once:
/// `seen` holds the last round each row was pushed in.
#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn absorb_distances(
    _positions: &Csr<f32>,
    frontier: &[u32],
    ids: &[u32],
    values: &[f32],
    dist: &mut [f32],
    first: u32,
    end: u32,
    round: u32,
    best: &mut [f32],
    seen: &mut [u32],
    next: &mut Queue,
    #[tile] i: usize,
    #[atom] _e: usize,
) {
    let v = ids[i] as usize;
    let d = values[i];
    atomic_min(&mut dist[v], d);
    if v >= first as usize && v < end as usize {
        let row = v - first as usize;
        if d < atomic_min(&mut best[row], d) && atomic_exch(&mut seen[row], round) != round {
            next.push(row as u32);
        }
    }
}

/// What [`MultiSssp::search`] computed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MultiSsspResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    /// Rounds run (frontiers that were not empty).
    pub rounds: usize,
    /// Rounds whose claims travelled as claim lists (the others by all-reduce).
    pub claim_list_rounds: usize,
    /// Edges relaxed over all rounds.
    pub edges: u64,
    /// Of the wall time, the rounds' relaxations: from the first relaxation launch of each
    /// round to the end of the waits for them (host clock).
    pub relax_ms: f64,
    /// Of the wall time, the rounds' exchanges: from the end of the relaxations' waits to the
    /// next frontiers' lengths on the host (the exchange and each part's taking in or
    /// collection of its frontier). The rest is the reset, the first frontier and the
    /// download.
    pub exchange_ms: f64,
    /// Wall-clock time of the search, from the reset of the distances to the result's download
    /// ([`MultiSssp::new`]'s allocations not included).
    pub wall_ms: f64,
}

/// Shortest-path searches on a split graph (nonnegative weights in the values): the device
/// buffers every search needs, made once.
///
/// ```
/// use lb::algorithms::{dijkstra, FrontierExchange, MultiSssp};
/// use lb::multi::{Devices, MultiCsr};
/// use lb::prelude::*;
///
/// let mut g = lb::generate::power_law(400, 400, 5.0, 3);
/// g.values.iter_mut().for_each(|w| *w = w.abs().round());
/// let split = MultiCsr::upload(&Devices::simulators(3)?, &g)?;
/// let mut sssp = MultiSssp::new(&split)?;
/// assert_eq!(sssp.search(7, Schedule::MergePath)?.dist, dijkstra(&g, 7));
/// // The same distances whichever way the claims travel.
/// sssp.set_exchange(FrontierExchange::AllReduce);
/// assert_eq!(sssp.search(7, Schedule::Lrb)?.dist, dijkstra(&g, 7));
/// # Ok::<(), lb::Error>(())
/// ```
pub struct MultiSssp<'a> {
    split: &'a MultiCsr<f32>,
    frontiers: Frontiers,
    exchange: FrontierExchange,
    /// Per part, the smallest distance it has seen per row ([`collect_rows_improved`],
    /// [`absorb_distances`]).
    best: Vec<DeviceBuffer<f32>>,
    /// What the claim lists need, made by the first search that may use them (boxed: a
    /// dozen vectors the all-reduce never touches).
    lists: Option<Box<SsspLists>>,
    dist: Replicated<f32>,
    edges: Replicated<u64>,
}

/// The buffers of the claim-list exchange.
struct SsspLists {
    /// Per device, the vertices it lowered in a round (each at most once: `claimed`).
    claims: Vec<DeviceQueue>,
    /// Per device, the last round each vertex was claimed in.
    claimed: Vec<DeviceBuffer<u32>>,
    /// Per device, the distances of its claims, position by position.
    values: Vec<DeviceBuffer<f32>>,
    /// Per device, one one-atom row per vertex: [`pack_claimed`]'s tile set, whose positions
    /// go up to a device's claims.
    vertex_rows: Vec<DeviceCsr<f32>>,
    /// Per device, every device's claims, and their distances: `width` of each.
    inbox: Vec<DeviceQueue>,
    inbox_values: Replicated<f32>,
    /// Per device, the positions `0, 1, …, width - 1`: the position kernels' frontiers.
    positions: Vec<DeviceQueue>,
    /// Per device, one one-atom row per position of the inbox, where it is wider than
    /// `vertex_rows`: [`absorb_distances`]'s tile set (the kernels' buffers indexed by the
    /// position are as long as their tile set's rows).
    wide_rows: Option<Vec<DeviceCsr<f32>>>,
    width: usize,
    /// Per part, the last round each row was pushed in.
    seen: Vec<DeviceBuffer<u32>>,
}

impl<'a> MultiSssp<'a> {
    /// [`FrontierExchange::Auto`] sends a round's claims as lists while there are at most this
    /// many per vertex of the graph (summed over the devices), and all-reduces the distances
    /// above: a claim travels with its distance (8 bytes), so the lists stay under a quarter
    /// of the all-reduce's bytes (about 8 per vertex through each device's links), as
    /// [`MultiBfs::CLAIMS_PER_VERTEX`](super::MultiBfs::CLAIMS_PER_VERTEX)'s do at 4 bytes.
    pub const CLAIMS_PER_VERTEX: f64 = 0.25;

    /// The buffers for searches on `split`, which holds a graph's adjacency matrix (row `u`
    /// lists `u`'s out-edges, their weights in the values): square, with fewer than 2³²
    /// vertices.
    pub fn new(split: &'a MultiCsr<f32>) -> Result<MultiSssp<'a>> {
        let frontiers = Frontiers::new(split, WHAT)?;
        let best = split
            .parts()
            .iter()
            .map(|p| p.device().zeros(p.rows().len()))
            .collect::<Result<_>>()?;
        let group = split.devices();
        Ok(MultiSssp {
            split,
            frontiers,
            exchange: FrontierExchange::default(),
            best,
            lists: None,
            dist: group.replicated_zeros(split.num_rows())?,
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

    /// Shortest distances from `source`. Bellman-Ford needs at most one round per vertex with
    /// nonnegative weights; a search still changing after that many (a negative cycle) is an
    /// error.
    pub fn search(&mut self, source: usize, schedule: Schedule) -> Result<MultiSsspResult> {
        let clock = Instant::now();
        let split = self.split;
        let n = split.num_rows();
        check_source(n, source, WHAT)?;
        let group = split.devices();
        let claiming = self.exchange != FrontierExchange::AllReduce;
        if claiming {
            self.prepare_lists()?;
        }
        reset(group, &mut self.dist, f32::INFINITY, (source, 0.0))?;
        reset(group, &mut self.edges, 0, (0, 0))?;
        for (p, best) in split.parts().iter().zip(&mut self.best) {
            p.device().fill(best, f32::INFINITY)?;
        }
        if let Some(lists) = &mut self.lists {
            // The rounds start again from 1.
            for (dev, claimed) in group.devices().iter().zip(&mut lists.claimed) {
                dev.fill(claimed, 0)?;
            }
            for (p, seen) in split.parts().iter().zip(&mut lists.seen) {
                p.device().fill(seen, 0)?;
            }
        }
        // The first frontier: the source, in every part that holds its row.
        self.collect()?;
        let (mut rounds, mut by_lists) = (0, 0);
        let (mut relax, mut exchange) = (Duration::ZERO, Duration::ZERO);
        while self.frontiers.any() {
            if rounds > n {
                return Err(Error::Shape(format!(
                    "{WHAT}: distances still drop after {rounds} rounds on {n} vertices: a \
                     cycle of negative weight (the weights must be nonnegative)"
                )));
            }
            let round = u32::try_from(rounds + 1)
                .ok()
                .filter(|&r| r < u32::MAX)
                .ok_or_else(|| Error::Shape(format!("{WHAT}: round {rounds} exceeds u32")))?;
            let started = Instant::now();
            let claimed = self.relax(schedule, round, claiming)?;
            let relaxed = Instant::now();
            relax += relaxed - started;
            rounds += 1;
            match claimed {
                Some(claimed) => {
                    let total: u64 = claimed.iter().sum();
                    if total == 0 {
                        // Nothing was lowered: no frontier follows.
                        break;
                    }
                    if self.by_lists(total) {
                        self.exchange_lists(&claimed, total, round)?;
                        by_lists += 1;
                    } else {
                        group.all_reduce(Reduce::Min, &mut self.dist)?;
                        self.collect()?;
                    }
                }
                None => {
                    group.all_reduce(Reduce::Min, &mut self.dist)?;
                    self.collect()?;
                }
            }
            exchange += relaxed.elapsed();
        }
        Ok(MultiSsspResult {
            relax_ms: relax.as_secs_f64() * 1e3,
            exchange_ms: exchange.as_secs_f64() * 1e3,
            edges: edge_sum(&self.edges)?,
            dist: self.dist.on(0).download()?,
            rounds,
            claim_list_rounds: by_lists,
            wall_ms: clock.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Relaxes every part's frontier and waits for it (waited here, not at the collection's
    /// wait, so that the round's two phases are timed apart); with `claiming`, each device
    /// also pushes the vertices it lowered, and how many each pushed is returned.
    fn relax(
        &mut self,
        schedule: Schedule,
        round: u32,
        claiming: bool,
    ) -> Result<Option<Vec<u64>>> {
        let split = self.split;
        let mut lists = self.lists.as_mut().filter(|_| claiming);
        if let Some(lists) = lists.as_mut() {
            self.frontiers.clear_claims(split, &mut lists.claims)?;
        }
        let mut pending = Vec::new();
        for (p, f) in split.parts().iter().zip(&mut self.frontiers.parts) {
            if f.len == 0 {
                continue;
            }
            let d = p.index();
            let stream = p.device().stream();
            let first = first_row(p, WHAT)?;
            let launch = match lists.as_mut() {
                Some(lists) => sssp_relax_claim::launch_with_async(
                    &stream,
                    schedule,
                    p.tiles(),
                    f.queue.slots(f.len),
                    self.dist.on_mut(d),
                    first,
                    round,
                    &mut lists.claimed[d],
                    &mut lists.claims[d],
                    self.edges.on_mut(d),
                )?,
                None => sssp_relax_rows::launch_with_async(
                    &stream,
                    schedule,
                    p.tiles(),
                    f.queue.slots(f.len),
                    self.dist.on_mut(d),
                    first,
                    self.edges.on_mut(d),
                )?,
            };
            pending.push((d, launch));
        }
        if lists.is_none() {
            for (_, launch) in pending {
                launch.wait()?;
            }
            return Ok(None);
        }
        claim_counts(pending, split.devices().count()).map(Some)
    }

    /// Whether a round whose devices claimed `total` vertices exchanges them as lists.
    fn by_lists(&self, total: u64) -> bool {
        let n = self.split.num_rows();
        lists_carry(self.exchange, total, Self::CLAIMS_PER_VERTEX, n)
    }

    /// Makes the claim lists' buffers unless they exist; the inboxes start with room for one
    /// claim per vertex, more than [`FrontierExchange::Auto`]'s largest list.
    fn prepare_lists(&mut self) -> Result<()> {
        if self.lists.is_some() {
            return Ok(());
        }
        let split = self.split;
        let n = split.num_rows();
        let group = split.devices();
        let devices = group.devices();
        let width = n.max(1);
        self.lists = Some(Box::new(SsspLists {
            claims: devices
                .iter()
                .map(|dev| DeviceQueue::new(dev, width))
                .collect::<Result<_>>()?,
            claimed: devices
                .iter()
                .map(|dev| dev.zeros(width))
                .collect::<Result<_>>()?,
            values: devices
                .iter()
                .map(|dev| dev.zeros(width))
                .collect::<Result<_>>()?,
            vertex_rows: devices
                .iter()
                .map(|dev| one_per_vertex(dev, width))
                .collect::<Result<_>>()?,
            inbox: devices
                .iter()
                .map(|dev| DeviceQueue::new(dev, width))
                .collect::<Result<_>>()?,
            inbox_values: group.replicated_zeros(width)?,
            positions: positions(group, width)?,
            wide_rows: None,
            width,
            seen: per_part_stamps(split)?,
        }));
        Ok(())
    }

    /// Packs every device's `claimed` claims (`total` in all) with their distances, gathers
    /// both into every device, then lets every part take them in as its next frontier.
    fn exchange_lists(&mut self, claimed: &[u64], total: u64, round: u32) -> Result<()> {
        let split = self.split;
        let group: &Devices = split.devices();
        let lists = self.lists.as_mut().expect("made by the search");
        let room = usize::try_from(total)
            .map_err(|_| Error::Shape(format!("{WHAT}: {total} claims exceed usize")))?;
        lists.grow(group, room)?;
        let counts: Vec<usize> = claimed
            .iter()
            .zip(&lists.claims)
            .map(|(&c, q)| usize::try_from(c).map_or(q.capacity(), |c| c.min(q.capacity())))
            .collect();
        for (d, dev) in group.devices().iter().enumerate() {
            if counts[d] == 0 {
                continue;
            }
            // Its report is read at the wait of the part's collection on the same stream.
            drop(pack_claimed::launch_with_async(
                &dev.stream(),
                Schedule::ThreadMapped,
                &lists.vertex_rows[d],
                lists.positions[d].slots(counts[d] as u64),
                lists.claims[d].slots(u64::MAX),
                self.dist.on(d),
                &mut lists.values[d],
            )?);
        }
        group.all_gather_queues(&lists.claims, claimed, &mut lists.inbox)?;
        let values: Vec<&DeviceBuffer<f32>> = lists.values.iter().collect();
        group.all_gather_prefixes(&values, &counts, &mut lists.inbox_values)?;
        let (dist, best) = (&mut self.dist, &mut self.best);
        self.frontiers.collect(split, |q, p, f| {
            let d = p.index();
            let first = first_row(p, WHAT)?;
            absorb_distances::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                lists
                    .wide_rows
                    .as_ref()
                    .map_or(&lists.vertex_rows[d], |rows| &rows[d]),
                lists.positions[d].slots(total),
                lists.inbox[d].slots(u64::MAX),
                lists.inbox_values.on(d),
                dist.on_mut(d),
                first,
                first + p.rows().len() as u32,
                round,
                &mut best[q],
                &mut lists.seen[q],
                &mut f.queue,
            )
        })
    }

    /// Refills every part's frontier with its rows whose distance dropped.
    fn collect(&mut self) -> Result<()> {
        let (dist, best) = (&self.dist, &mut self.best);
        self.frontiers.collect(self.split, |q, p, f| {
            collect_rows_improved::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                &f.rows,
                dist.on(p.index()),
                first_row(p, WHAT)?,
                &mut best[q],
                &mut f.queue,
            )
        })
    }
}

impl SsspLists {
    /// Room for `room` claims in every inbox (and as many positions), made larger only when
    /// a round claims more than one per vertex.
    fn grow(&mut self, group: &Devices, room: usize) -> Result<()> {
        if room <= self.width {
            return Ok(());
        }
        widen_inboxes(group, &mut self.inbox, room)?;
        let width = room.next_power_of_two();
        let devices = group.devices();
        self.inbox_values = group.replicated_zeros(width)?;
        self.positions = positions(group, width)?;
        self.wide_rows = Some(
            devices
                .iter()
                .map(|dev| one_per_vertex(dev, width))
                .collect::<Result<_>>()?,
        );
        self.width = width;
        Ok(())
    }
}

/// `0, 1, …, count - 1` on every device of `group`.
fn positions(group: &Devices, count: usize) -> Result<Vec<DeviceQueue>> {
    let count = u32::try_from(count)
        .map_err(|_| Error::Shape(format!("{WHAT}: {count} positions exceed u32")))?;
    let iota: Vec<u32> = (0..count).collect();
    group
        .devices()
        .iter()
        .map(|dev| DeviceQueue::upload(dev, &iota))
        .collect()
}

/// The name errors give.
const WHAT: &str = "MultiSssp";
