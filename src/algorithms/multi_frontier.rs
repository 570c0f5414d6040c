//! What the searches across devices ([`MultiBfs`](super::MultiBfs),
//! [`MultiSssp`](super::MultiSssp)) share: each part's frontier and the one-entry-per-row tile
//! set its collection runs over, the collection's launch-then-wait, the choice of exchange and
//! the claim counts it reads, the state's reset, and the checks of the graph and the source.

use super::driver::{one_per_vertex, pushed};
use crate::multi::{CsrPart, Devices, MultiCsr, Replicated};
use crate::prelude::*;
use crate::{Element, Error, Result};

/// One part's frontier: its own row numbers, `len` of them since the last collection.
pub(super) struct Frontier {
    pub(super) queue: DeviceQueue,
    /// One atom per row of the part: the tile set a collection runs over, a thread per row.
    pub(super) rows: DeviceCsr<f32>,
    pub(super) len: u64,
}

/// Every part's frontier, in part order.
pub(super) struct Frontiers {
    pub(super) parts: Vec<Frontier>,
}

impl Frontiers {
    /// Empty frontiers for the parts of `split`, after checking that it holds a graph: square,
    /// with fewer than 2³² vertices (`what` names the caller in the error).
    pub(super) fn new(split: &MultiCsr<f32>, what: &str) -> Result<Frontiers> {
        let n = split.num_rows();
        if split.num_cols() != n || u32::try_from(n).is_err() {
            return Err(Error::Shape(format!(
                "{what}: a graph's adjacency matrix is square with fewer than 2^32 vertices, \
                 this one is {n} × {}",
                split.num_cols()
            )));
        }
        let parts = split
            .parts()
            .iter()
            .map(|p| {
                let rows = p.rows().len();
                Ok(Frontier {
                    // A part's frontier holds each of its rows at most once.
                    queue: DeviceQueue::new(p.device(), rows.max(1))?,
                    rows: one_per_vertex(p.device(), rows)?,
                    len: 0,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Frontiers { parts })
    }

    /// Whether some part's frontier is not empty.
    pub(super) fn any(&self) -> bool {
        self.parts.iter().any(|f| f.len > 0)
    }

    /// Clears the claim queue (`claims`, one per device) of every device with a part whose
    /// frontier is not empty: the devices the step launches on. The others' counts are not
    /// read, so a deep graph's step, whose frontier often lies on one device, clears one.
    pub(super) fn clear_claims(
        &self,
        split: &MultiCsr<f32>,
        claims: &mut [DeviceQueue],
    ) -> Result<()> {
        let mut cleared = vec![false; claims.len()];
        for (p, f) in split.parts().iter().zip(&self.parts) {
            let d = p.index();
            if f.len > 0 && !cleared[d] {
                claims[d].clear()?;
                cleared[d] = true;
            }
        }
        Ok(())
    }

    /// Clears every part's frontier and refills it with `launch(q, part, frontier)` (part `q`
    /// of `split`, launched on its device's stream), then waits for each and reads how many
    /// rows it pushed: every launch is enqueued before the first wait.
    pub(super) fn collect(
        &mut self,
        split: &MultiCsr<f32>,
        mut launch: impl FnMut(usize, &CsrPart<f32>, &mut Frontier) -> Result<Pending>,
    ) -> Result<()> {
        let mut pending = Vec::with_capacity(self.parts.len());
        for (q, (p, f)) in split.parts().iter().zip(&mut self.parts).enumerate() {
            f.queue.clear()?;
            pending.push(launch(q, p, f)?);
        }
        for (pending, f) in pending.into_iter().zip(&mut self.parts) {
            f.len = pushed(&pending.wait()?)?;
        }
        Ok(())
    }
}

/// An error unless `source` is a vertex of the `n`-vertex graph.
pub(super) fn check_source(n: usize, source: usize, what: &str) -> Result<()> {
    if source < n {
        Ok(())
    } else {
        Err(Error::Shape(format!(
            "{what}: source {source} is not a vertex of a graph with {n} vertices"
        )))
    }
}

/// A part's first row as the kernels' `u32`.
pub(super) fn first_row(part: &CsrPart<f32>, what: &str) -> Result<u32> {
    let row = part.rows().start;
    u32::try_from(row).map_err(|_| Error::Shape(format!("{what}: row {row} exceeds u32")))
}

/// Every device's copy of `x` filled with `value` on the device, and `at_source` written at
/// `source` (4 or 8 bytes from the host per device).
pub(super) fn reset<T: Element>(
    group: &Devices,
    x: &mut Replicated<T>,
    value: T,
    (source, at_source): (usize, T),
) -> Result<()> {
    for (d, dev) in group.devices().iter().enumerate() {
        dev.fill(x.on_mut(d), value)?;
        dev.write_at(x.on_mut(d), source, &[at_source])?;
    }
    Ok(())
}

/// The sum of every device's edge counters.
pub(super) fn edge_sum(edges: &Replicated<u64>) -> Result<u64> {
    Ok(edges
        .download_all()?
        .iter()
        .flatten()
        .fold(0u64, |sum, &e| sum.wrapping_add(e)))
}

/// How the devices of a search across devices ([`MultiBfs`](super::MultiBfs),
/// [`MultiSssp`](super::MultiSssp)) share the vertices they claimed (reached, or lowered) in a
/// step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrontierExchange {
    /// Claim lists while a step's claims (summed over the devices) are few for the graph's
    /// vertices (each search's `CLAIMS_PER_VERTEX`), the all-reduce otherwise.
    #[default]
    Auto,
    /// Every step an all-reduce (minimum) of the depth or distance arrays: 4 bytes per vertex.
    AllReduce,
    /// Every step an all-gather of the devices' claims: 4 bytes per claim for BFS, 8 with
    /// their distances for SSSP. The inboxes grow to the largest step's claims.
    ClaimLists,
}

/// Whether `exchange` sends a step's `total` claims as lists on a graph of `vertices`
/// vertices, `Auto` while they are at most `per_vertex` per vertex.
pub(super) fn lists_carry(
    exchange: FrontierExchange,
    total: u64,
    per_vertex: f64,
    vertices: usize,
) -> bool {
    match exchange {
        FrontierExchange::AllReduce => false,
        FrontierExchange::ClaimLists => true,
        FrontierExchange::Auto => total as f64 <= per_vertex * vertices as f64,
    }
}

/// Waits for the claiming launches in `pending` (each with its device) and returns how many
/// vertices each of the `devices` devices claimed. A device's parts push into one queue on one
/// stream: the last one's count, read after it ran, is the device's (the counter only grows).
pub(super) fn claim_counts(pending: Vec<(usize, Pending)>, devices: usize) -> Result<Vec<u64>> {
    let mut claimed = vec![0u64; devices];
    for (d, launch) in pending {
        claimed[d] = claimed[d].max(pushed(&launch.wait()?)?);
    }
    Ok(claimed)
}

/// Per part, one stamp per row (zero): the step each row was last pushed in.
pub(super) fn per_part_stamps(split: &MultiCsr<f32>) -> Result<Vec<DeviceBuffer<u32>>> {
    split
        .parts()
        .iter()
        .map(|p| p.device().zeros(p.rows().len().max(1)))
        .collect()
}

/// Makes every inbox (one per device of `group`) hold at least `room` items, replacing those
/// too small with empty ones of the next power of two: a step that claims more than any before.
pub(super) fn widen_inboxes(
    group: &Devices,
    inboxes: &mut [DeviceQueue],
    room: usize,
) -> Result<()> {
    for (inbox, dev) in inboxes.iter_mut().zip(group.devices()) {
        if inbox.capacity() < room {
            *inbox = DeviceQueue::new(dev, room.next_power_of_two())?;
        }
    }
    Ok(())
}
