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

use std::time::Instant;

use super::driver::{pushed, EDGE_SLOTS};
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
    /// Wall-clock time of the search, from the reset of the distances to the result's download
    /// ([`MultiSssp::new`]'s allocations not included).
    pub wall_ms: f64,
}

/// One part's state: its frontier, the best distance it has seen per row, and the
/// one-entry-per-row tile set [`collect_rows_improved`] runs over.
struct PartState {
    frontier: DeviceQueue,
    best: DeviceBuffer<f32>,
    rows: DeviceCsr<f32>,
    len: u64,
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
    parts: Vec<PartState>,
    dist: Replicated<f32>,
    edges: Replicated<u64>,
}

impl<'a> MultiSssp<'a> {
    /// The buffers for searches on `split`, which holds a graph's adjacency matrix (row `u`
    /// lists `u`'s out-edges, their weights in the values): square, with fewer than 2³²
    /// vertices.
    pub fn new(split: &'a MultiCsr<f32>) -> Result<MultiSssp<'a>> {
        let n = split.num_rows();
        if split.num_cols() != n || u32::try_from(n).is_err() {
            return Err(Error::Shape(format!(
                "MultiSssp: a graph's adjacency matrix is square with fewer than 2^32 \
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
                let rows = p.rows().len();
                Ok(PartState {
                    // A part's frontier holds each of its rows at most once.
                    frontier: DeviceQueue::new(dev, rows.max(1))?,
                    best: dev.zeros(rows)?,
                    rows: super::driver::one_per_vertex(dev, rows)?,
                    len: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiSssp {
            split,
            parts,
            dist: group.replicated_zeros(n)?,
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
        if source >= n {
            return Err(Error::Shape(format!(
                "MultiSssp: source {source} is not a vertex of a graph with {n} vertices"
            )));
        }
        let group = split.devices();
        for (d, dev) in group.devices().iter().enumerate() {
            dev.fill(self.dist.on_mut(d), f32::INFINITY)?;
            dev.write_at(self.dist.on_mut(d), source, &[0.0])?;
            dev.fill(self.edges.on_mut(d), 0)?;
        }
        for (p, s) in split.parts().iter().zip(&mut self.parts) {
            p.device().fill(&mut s.best, f32::INFINITY)?;
        }
        // The first frontier: the source, in every part that holds its row.
        self.collect()?;
        let mut rounds = 0;
        while self.parts.iter().any(|s| s.len > 0) {
            if rounds > n {
                return Err(Error::Shape(format!(
                    "MultiSssp: distances still drop after {rounds} rounds on {n} vertices: \
                     a cycle of negative weight (the weights must be nonnegative)"
                )));
            }
            for (p, s) in split.parts().iter().zip(&mut self.parts) {
                if s.len == 0 {
                    continue;
                }
                let d = p.index();
                // The relaxation's report is read at the collection's wait on the same stream.
                drop(sssp_relax_rows::launch_with_async(
                    &p.device().stream(),
                    schedule,
                    p.tiles(),
                    s.frontier.slots(s.len),
                    self.dist.on_mut(d),
                    first_row(p.rows().start)?,
                    self.edges.on_mut(d),
                )?);
            }
            group.all_reduce(Reduce::Min, &mut self.dist)?;
            self.collect()?;
            rounds += 1;
        }
        let edges = self
            .edges
            .download_all()?
            .iter()
            .flatten()
            .fold(0u64, |sum, &e| sum.wrapping_add(e));
        Ok(MultiSsspResult {
            dist: self.dist.on(0).download()?,
            rounds,
            edges,
            wall_ms: clock.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Refills every part's frontier with its rows whose distance dropped, and reads how many
    /// each got (one wait per part, after every part's launch).
    fn collect(&mut self) -> Result<()> {
        let mut pending = Vec::with_capacity(self.parts.len());
        for (p, s) in self.split.parts().iter().zip(&mut self.parts) {
            s.frontier.clear()?;
            pending.push(collect_rows_improved::launch_with_async(
                &p.device().stream(),
                Schedule::ThreadMapped,
                &s.rows,
                self.dist.on(p.index()),
                first_row(p.rows().start)?,
                &mut s.best,
                &mut s.frontier,
            )?);
        }
        for (pending, s) in pending.into_iter().zip(&mut self.parts) {
            s.len = pushed(&pending.wait()?)?;
        }
        Ok(())
    }
}

/// A part's first row as the kernels' `u32`.
fn first_row(row: usize) -> Result<u32> {
    u32::try_from(row).map_err(|_| Error::Shape(format!("MultiSssp: row {row} exceeds u32")))
}
