//! Single-source shortest paths across the devices of a group: Bellman-Ford over frontiers
//! (the thesis's §6.1.3 relaxation), each device relaxing the out-edges it holds, and one
//! all-reduce per round merging the distances.
//!
//! As for [`MultiBfs`](super::MultiBfs), the graph is split by rows and every device keeps a
//! copy of the whole distance array. A round:
//!
//! 1. every part relaxes the out-edges of its frontier ([`sssp_relax_rows`]) into its
//!    device's copy with `atomic_min`;
//! 2. [`Devices::all_reduce`](crate::multi::Devices::all_reduce) takes the minimum of the
//!    copies;
//! 3. every part collects its rows whose distance dropped below the best it has seen
//!    ([`collect_rows_improved`], which keeps that best per row of the part) into its next
//!    frontier, and the host reads the parts' push counters (8 bytes per part).
//!
//! A vertex whose row is cut between parts is in each of those parts' frontiers, so each
//! relaxes its share of the vertex's out-edges.

use std::time::{Duration, Instant};

use super::driver::EDGE_SLOTS;
use super::multi_frontier::{check_source, edge_sum, first_row, reset, Frontiers};
use crate::multi::{MultiCsr, Reduce, Replicated};
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

/// What [`MultiSssp::search`] computed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MultiSsspResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    /// Rounds run (frontiers that were not empty).
    pub rounds: usize,
    /// Edges relaxed over all rounds.
    pub edges: u64,
    /// Of the wall time, the rounds' relaxations: from the first [`sssp_relax_rows`] launch of
    /// each round to the end of the waits for them (host clock).
    pub relax_ms: f64,
    /// Of the wall time, the rounds' exchanges: from the end of the relaxations' waits to the
    /// next frontiers' lengths on the host (the all-reduce and each part's collection). The
    /// rest is the reset, the first frontier and the download.
    pub exchange_ms: f64,
    /// Wall-clock time of the search, from the reset of the distances to the result's download
    /// ([`MultiSssp::new`]'s allocations not included).
    pub wall_ms: f64,
}

/// Shortest-path searches on a split graph (nonnegative weights in the values): the device
/// buffers every search needs, made once.
///
/// ```
/// use lb::algorithms::{dijkstra, MultiSssp};
/// use lb::multi::{Devices, MultiCsr};
/// use lb::prelude::*;
///
/// let mut g = lb::generate::power_law(400, 400, 5.0, 3);
/// g.values.iter_mut().for_each(|w| *w = w.abs().round());
/// let split = MultiCsr::upload(&Devices::simulators(3)?, &g)?;
/// let mut sssp = MultiSssp::new(&split)?;
/// assert_eq!(sssp.search(7, Schedule::MergePath)?.dist, dijkstra(&g, 7));
/// # Ok::<(), lb::Error>(())
/// ```
pub struct MultiSssp<'a> {
    split: &'a MultiCsr<f32>,
    frontiers: Frontiers,
    /// Per part, the smallest distance it has seen per row ([`collect_rows_improved`]).
    best: Vec<DeviceBuffer<f32>>,
    dist: Replicated<f32>,
    edges: Replicated<u64>,
}

impl<'a> MultiSssp<'a> {
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
            best,
            dist: group.replicated_zeros(split.num_rows())?,
            edges: group.replicated_zeros(EDGE_SLOTS)?,
        })
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
        reset(group, &mut self.dist, f32::INFINITY, (source, 0.0))?;
        reset(group, &mut self.edges, 0, (0, 0))?;
        for (p, best) in split.parts().iter().zip(&mut self.best) {
            p.device().fill(best, f32::INFINITY)?;
        }
        // The first frontier: the source, in every part that holds its row.
        self.collect()?;
        let mut rounds = 0;
        let (mut relax, mut exchange) = (Duration::ZERO, Duration::ZERO);
        while self.frontiers.any() {
            if rounds > n {
                return Err(Error::Shape(format!(
                    "{WHAT}: distances still drop after {rounds} rounds on {n} vertices: a \
                     cycle of negative weight (the weights must be nonnegative)"
                )));
            }
            let started = Instant::now();
            let mut pending = Vec::new();
            for (p, f) in split.parts().iter().zip(&mut self.frontiers.parts) {
                if f.len == 0 {
                    continue;
                }
                let d = p.index();
                pending.push(sssp_relax_rows::launch_with_async(
                    &p.device().stream(),
                    schedule,
                    p.tiles(),
                    f.queue.slots(f.len),
                    self.dist.on_mut(d),
                    first_row(p, WHAT)?,
                    self.edges.on_mut(d),
                )?);
            }
            // Waited for here, not at the collection's wait, so that the round's two phases
            // are timed apart (one more wait on the host per round).
            for launch in pending {
                launch.wait()?;
            }
            let relaxed = Instant::now();
            relax += relaxed - started;
            group.all_reduce(Reduce::Min, &mut self.dist)?;
            self.collect()?;
            exchange += relaxed.elapsed();
            rounds += 1;
        }
        Ok(MultiSsspResult {
            relax_ms: relax.as_secs_f64() * 1e3,
            exchange_ms: exchange.as_secs_f64() * 1e3,
            edges: edge_sum(&self.edges)?,
            dist: self.dist.on(0).download()?,
            rounds,
            wall_ms: clock.elapsed().as_secs_f64() * 1e3,
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

/// The name errors give.
const WHAT: &str = "MultiSssp";
