//! Direction-optimizing breadth-first search (Beamer, Asanović & Patterson, "Direction-Optimizing
//! Breadth-First Search", SC'12): top-down steps ("push", [`bfs`](super::bfs)'s expansion of the
//! frontier's out-edges) while the frontier is small, bottom-up steps ("pull": every unvisited
//! vertex looks for a parent in the frontier among its in-edges) while it is large.
//!
//! # The switch rule (Beamer et al., §4)
//!
//! Before each step the driver knows the frontier's vertex count `n_f`, the out-edges of its
//! vertices `m_f`, and the out-edges of the vertices not reached yet `m_u`:
//!
//! - push → pull when `m_f > m_u / α` (α = 14): the frontier's edges outnumber the share of the
//!   unexplored edges a bottom-up step would examine;
//! - pull → push when the frontier shrinks (`n_f` below the previous step's) and `n_f < n / β`
//!   (β = 24), so a tail of small frontiers is not paid for with whole-graph scans.
//!
//! # Counters on the device, 16 bytes per iteration
//!
//! Both steps claim a vertex with `atomic_cas` on `depth` and push it into the next frontier's
//! queue, so the queue's counter (read by the launch anyway) is `n_f`. The claiming lane also adds
//! the vertex's out-degree to one of [`CLAIM_SLOTS`] counters, which only grow: their sum, taken
//! by a one-block reduction after each step and read as one `u64`, is the out-degree of every
//! vertex reached so far, from which the host gets `m_f` (its growth) and `m_u` (the graph's
//! edges minus it). The steps run through the unchecked launchers, whose only unproven indices
//! the driver proves (the frontier holds vertices, `v % CLAIM_SLOTS` is a slot), so no error
//! flag is read: an iteration moves the counter (8 bytes) and the sum (8), nothing else.
//!
//! # The cost of the bottom-up step
//!
//! Beamer's bottom-up step stops scanning a vertex's in-edges at its first parent in the
//! frontier. A body here is the work of one in-edge (an atom), and the schedule, not the body,
//! decides which atoms run, so no atom can cancel its siblings. Each atom first reads its
//! vertex's depth and stops there when the vertex is already claimed: atoms that run after the
//! claim (later in the same thread under `thread_mapped`, later warps or blocks under the other
//! schedules) cost one load instead of two and an atomic. The step's tiles are all the vertices,
//! so a reached vertex still costs its in-edges' atoms that one load each.

use std::time::Instant;

use super::driver::{pushed, stamp, start, Traversal};
use crate::prelude::*;
use crate::{Error, Result};

/// Counters the steps add claimed vertices' out-degrees to (vertex `v` adds to slot
/// `v % CLAIM_SLOTS`), spread over 64 cache lines so that the atomics do not queue on one
/// (see [`EDGE_SLOTS`](super::EDGE_SLOTS)).
pub const CLAIM_SLOTS: usize = 1024;

/// The top-down step: [`bfs_visit`](fn@super::bfs_visit)'s claim of each unvisited out-neighbour,
/// plus the claimed vertex's out-degree added to `claimed[v % claimed.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn dobfs_push(
    g: &Csr<f32>,
    frontier: &[u32],
    degree: &[u64],
    depth: &mut [u32],
    level: u32,
    next: &mut Queue,
    claimed: &mut [u64],
    #[tile] _u: usize,
    #[atom] e: usize,
) {
    let v = g.col_indices[e] as usize;
    if atomic_cas(&mut depth[v], u32::MAX, level + 1) == u32::MAX {
        next.push(v as u32);
        atomic_add(&mut claimed[v % claimed.len()], degree[v]);
    }
}

/// The bottom-up step over the transpose: tiles are all the vertices, atoms their in-edges. An
/// unvisited vertex with a parent at `level` is claimed once (the `cas`), pushed, and its
/// out-degree added to `claimed[v % claimed.len()]`; an atom of a claimed vertex stops after one
/// load (see the module docs).
#[load_balanced(schedule = "auto")]
#[allow(clippy::too_many_arguments)]
pub fn dobfs_pull(
    gt: &Csc<f32>,
    degree: &[u64],
    depth: &mut [u32],
    level: u32,
    next: &mut Queue,
    claimed: &mut [u64],
    #[tile] v: usize,
    #[atom] e: usize,
) {
    if depth[v] == u32::MAX {
        let u = gt.row_indices[e] as usize;
        if depth[u] == level && atomic_cas(&mut depth[v], u32::MAX, level + 1) == u32::MAX {
            next.push(v as u32);
            atomic_add(&mut claimed[v % claimed.len()], degree[v]);
        }
    }
}

/// `degree[u]` = the out-degree of `u`: each edge counts one.
#[load_balanced(schedule = "auto", reduce = "sum", output = "degree")]
pub fn out_degree(_g: &Csr<f32>, #[atom] _e: usize) -> u64 {
    1
}

/// `total[r]` = the sum of `x` at the columns of row `r` of `pick`: the claim counters' sum, or
/// one vertex's degree, for the host to read as one `u64`. A block per row: the counters are a
/// thousand loads, one thread would chain them.
#[load_balanced(schedule = "block_mapped", reduce = "sum", output = "total")]
pub fn gather_sum(pick: &Csr<f32>, x: &[u64], #[atom] e: usize) -> u64 {
    x[pick.col_indices[e] as usize]
}

/// The switch's constants (Beamer et al. §4); [`Default`] is the paper's α = 14, β = 24.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Direction {
    /// Pull when the frontier's out-edges exceed the unexplored edges over `alpha`.
    pub alpha: f64,
    /// Push again when the frontier shrinks below the vertex count over `beta`.
    pub beta: f64,
}

impl Default for Direction {
    fn default() -> Self {
        Direction {
            alpha: 14.0,
            beta: 24.0,
        }
    }
}

impl Direction {
    /// Always push: the plain top-down BFS, through this driver (α = 0: `m_u / α` is never
    /// exceeded).
    pub const PUSH_ONLY: Direction = Direction {
        alpha: 0.0,
        beta: 24.0,
    };
    /// Pull from the first frontier with an out-edge on, and never push again (α = ∞: any
    /// `m_f > 0` exceeds `m_u / α`; β = ∞: no frontier is below `n / β`).
    pub const PULL_ONLY: Direction = Direction {
        alpha: f64::INFINITY,
        beta: f64::INFINITY,
    };
}

/// What [`bfs_direction_optimizing`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct DoBfsResult {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: Vec<u32>,
    /// `edges` counts the out-edges of every reached vertex, as [`bfs`](super::bfs) does, so
    /// both report the same traversed edges per second however few edges a pull examined.
    pub run: Traversal,
    /// Top-down steps.
    pub push_iterations: usize,
    /// Bottom-up steps.
    pub pull_iterations: usize,
}

/// Hop counts from `source` by direction-optimizing BFS: `g` is the graph, `gt` its transpose
/// as a CSC (`g.to_csc()`, whose column `v` lists the in-edges of `v`), `schedule` runs both
/// steps. The depths are [`bfs`](super::bfs)'s.
///
/// `gt` must hold the same edges as `g`: its shape and edge count are checked, its entries
/// cannot be without a download, and a different graph gives wrong depths (never an invalid
/// memory access: every index is in range for any uploaded CSC of that shape).
///
/// ```
/// use lb::algorithms::{bfs_direction_optimizing, bfs_levels, Direction};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(300, 300, 6.0, 7);
/// let dev = Device::default();
/// let dg = DeviceCsr::upload(&dev, &g)?;
/// let gt = DeviceCsc::upload(&dev, &g.to_csc()?)?;
/// let r = bfs_direction_optimizing(&dev, &dg, &gt, 0, Schedule::ThreadMapped, Direction::default())?;
/// assert_eq!(r.depth, bfs_levels(&g, 0));
/// assert_eq!(r.push_iterations + r.pull_iterations, r.run.iterations);
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs_direction_optimizing(
    dev: &Device,
    g: &DeviceCsr<f32>,
    gt: &DeviceCsc<f32>,
    source: usize,
    schedule: Schedule,
    direction: Direction,
) -> Result<DoBfsResult> {
    let clock = Instant::now();
    let source = start(g, source, "dobfs")?;
    check_transpose(g, gt)?;
    check_direction(&direction)?;
    let n = g.num_rows();
    let mut depth = dev.filled(n, u32::MAX)?;
    dev.write_at(&mut depth, source as usize, &[0])?;
    let mut degree = dev.zeros::<u64>(n)?;
    out_degree::launch_with(dev, schedule, g, &mut degree)?;
    let mut total = dev.zeros::<u64>(1)?;
    let source_degree = read_sum(dev, &one_row(dev, &[source], n)?, &degree, &mut total)?.0;
    let mut steps = Steps {
        dev,
        schedule,
        frontier: dev.upload(&[source])?,
        current: DeviceQueue::new(dev, n)?,
        next: DeviceQueue::new(dev, n)?,
        claimed: dev.zeros::<u64>(CLAIM_SLOTS)?,
        slots: one_row(
            dev,
            &(0..CLAIM_SLOTS as u32).collect::<Vec<_>>(),
            CLAIM_SLOTS,
        )?,
        total,
    };
    let mut out = DoBfsResult {
        depth: Vec::new(),
        run: Traversal::default(),
        push_iterations: 0,
        pull_iterations: 0,
    };
    let before = dev.transferred();
    let edges = g.nnz() as u64;
    // The frontier's vertices, their out-edges, and the out-edges of every vertex reached.
    let (mut len, mut frontier_edges, mut reached_edges) = (1u64, source_degree, source_degree);
    let (mut previous_len, mut pulling) = (0u64, false);
    while len > 0 {
        let unexplored = edges.saturating_sub(reached_edges);
        pulling = if pulling {
            len >= previous_len || len as f64 >= n as f64 / direction.beta
        } else {
            frontier_edges as f64 > unexplored as f64 / direction.alpha
        };
        let level = stamp(out.run.iterations, "dobfs")? - 1;
        let (pushed_now, ms) = steps.step(g, gt, &degree, &mut depth, level, len, pulling)?;
        let (sum, sum_ms) = steps.claimed_sum()?;
        if let Some(ms) = ms {
            *out.run.elapsed_ms.get_or_insert(0.0) += ms + sum_ms.unwrap_or(0.0);
        }
        let now = source_degree + sum;
        frontier_edges = now.saturating_sub(reached_edges);
        reached_edges = now;
        previous_len = len;
        len = pushed_now;
        out.run.iterations += 1;
        if pulling {
            out.pull_iterations += 1;
        } else {
            out.push_iterations += 1;
        }
    }
    let moved = dev.transferred().since(before);
    out.run.bytes_to_host = moved.to_host;
    out.run.bytes_to_device = moved.to_device;
    out.run.edges = reached_edges;
    out.depth = depth.download()?;
    out.run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(out)
}

/// The device state of the loop that is not the result: the frontier queues, the claim
/// counters and their one-row sum.
struct Steps<'a> {
    dev: &'a Device,
    schedule: Schedule,
    /// The first frontier, the source alone.
    frontier: DeviceBuffer<u32>,
    current: DeviceQueue,
    next: DeviceQueue,
    claimed: DeviceBuffer<u64>,
    /// One row over the claim counters, for [`gather_sum`].
    slots: DeviceCsr<f32>,
    total: DeviceBuffer<u64>,
}

impl Steps<'_> {
    /// One step from the frontier at `level` (of `len` vertices) in the chosen direction: the
    /// next frontier's size and the step's kernel time. The queues then swap.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        g: &DeviceCsr<f32>,
        gt: &DeviceCsc<f32>,
        degree: &DeviceBuffer<u64>,
        depth: &mut DeviceBuffer<u32>,
        level: u32,
        len: u64,
        pulling: bool,
    ) -> Result<(u64, Option<f32>)> {
        let (dev, schedule) = (self.dev, self.schedule);
        self.next.clear()?;
        let (next, claimed) = (&mut self.next, &mut self.claimed);
        let launch = if pulling {
            // SAFETY: the pull's only unproven index is `claimed[v % claimed.len()]`, and
            // `claimed` has CLAIM_SLOTS > 0 entries.
            unsafe {
                dobfs_pull::launch_with_unchecked(
                    dev, schedule, gt, degree, depth, level, next, claimed,
                )
            }?
        } else {
            let frontier = if level == 0 {
                &self.frontier
            } else {
                self.current.slots(len)
            };
            // SAFETY: besides `claimed[v % claimed.len()]` (CLAIM_SLOTS > 0 entries), the push's
            // unproven indices are its frontier's entries: the source, which `start` checked,
            // or vertices a step pushed: column indices of the square `g` (validated at upload)
            // or tiles of `gt`, whose column count `check_transpose` made `g`'s vertex count.
            unsafe {
                dobfs_push::launch_with_unchecked(
                    dev, schedule, g, frontier, degree, depth, level, next, claimed,
                )
            }?
        };
        std::mem::swap(&mut self.current, &mut self.next);
        Ok((pushed(&launch)?, launch.elapsed_ms))
    }

    /// The claim counters' sum (one `u64` read) and its kernel's time.
    fn claimed_sum(&mut self) -> Result<(u64, Option<f32>)> {
        read_sum(self.dev, &self.slots, &self.claimed, &mut self.total)
    }
}

/// The sum of `x` over the columns of the one-row `pick`, stored in `total` and read as one
/// `u64`, with its kernel's time.
fn read_sum(
    dev: &Device,
    pick: &DeviceCsr<f32>,
    x: &DeviceBuffer<u64>,
    total: &mut DeviceBuffer<u64>,
) -> Result<(u64, Option<f32>)> {
    let launch = gather_sum::launch_with(dev, Schedule::BlockMapped, pick, x, total)?;
    let sum = total.download()?.first().copied().unwrap_or(0);
    Ok((sum, launch.elapsed_ms))
}

/// A one-row tile set whose atoms are `columns` (below `width`), for [`gather_sum`].
fn one_row(dev: &Device, columns: &[u32], width: usize) -> Result<DeviceCsr<f32>> {
    let csr = Csr::new(
        1,
        width,
        vec![0, columns.len()],
        columns.to_vec(),
        vec![0.0; columns.len()],
    )?;
    DeviceCsr::upload(dev, &csr)
}

/// `gt` has `g`'s shape and edge count, as `g`'s transpose must.
fn check_transpose(g: &DeviceCsr<f32>, gt: &DeviceCsc<f32>) -> Result<()> {
    if (gt.num_rows(), gt.num_cols(), gt.nnz()) != (g.num_rows(), g.num_cols(), g.nnz()) {
        return Err(Error::Shape(format!(
            "dobfs: the transpose is {} × {} with {} edges, the graph {} × {} with {}: \
             upload `g.to_csc()` of the same graph",
            gt.num_rows(),
            gt.num_cols(),
            gt.nnz(),
            g.num_rows(),
            g.num_cols(),
            g.nnz()
        )));
    }
    Ok(())
}

/// α and β are positive (infinity allowed: a direction that never switches) and not NaN.
fn check_direction(d: &Direction) -> Result<()> {
    if d.alpha.is_nan() || d.beta.is_nan() || d.alpha < 0.0 || d.beta <= 0.0 {
        return Err(Error::Shape(format!(
            "dobfs: α = {} must be ≥ 0 and β = {} > 0",
            d.alpha, d.beta
        )));
    }
    Ok(())
}
