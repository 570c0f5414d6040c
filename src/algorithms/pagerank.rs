//! PageRank by power iteration in pull form (Page, Brin, Motwani & Winograd, "The PageRank
//! Citation Ranking", 1999), every step on the device and without atomics, with an f64 power
//! iteration on the host as its reference.
//!
//! One iteration is three launches: the dangling vertices' rank mass (a one-row reduction), the
//! pull over the edges into each vertex (tiles are the columns of the graph's CSC, so each vertex
//! sums its in-edges and no two threads write one rank), whose epilogue adds the teleport and
//! the dangling terms `(1 - d)/n + d·(sum + dangling/n)` once per vertex, and the L1 change
//! between the iterates (a one-row reduction). The host reads that change, one `f32`, and stops
//! below the tolerance: 4 bytes per iteration, plus the pull's error flag (8: the epilogue's
//! `dangling[0]` is tested), 12 in all.

use std::time::Instant;

use super::driver::Traversal;
use crate::prelude::*;
use crate::{Error, Result};

/// The next rank of vertex `v`: `d` times the rank its in-neighbours pass on (each its rank over
/// its out-degree), plus the teleport `(1 - d)/n` and the dangling vertices' mass spread over
/// every vertex, added once per vertex by the epilogue after the sum is complete.
#[load_balanced(schedule = "auto", reduce = "sum", output = "next",
    epilogue = |_v, sum| (1.0 - d) * inv_n + d * (sum + dangling[0] * inv_n))]
pub fn pagerank_pull(
    g: &Csc<f32>,
    rank: &[f32],
    inv_degree: &[f32],
    dangling: &[f32],
    d: f32,
    inv_n: f32,
    #[atom] e: usize,
) -> f32 {
    let u = g.row_indices[e] as usize;
    rank[u] * inv_degree[u]
}

/// out[0] = the rank of the vertices without out-edges (`is_dangling[i]` is 1 or 0), over a tile
/// set of one row holding every vertex: `nonzero_split` adds equal shares in a fixed order.
#[load_balanced(schedule = "nonzero_split", reduce = "sum", output = "out")]
pub fn dangling_mass(_all: &Csr<f32>, rank: &[f32], is_dangling: &[f32], #[atom] i: usize) -> f32 {
    rank[i] * is_dangling[i]
}

/// out[0] = Σ |next[i] − rank[i]|, the L1 change of an iteration.
#[load_balanced(schedule = "nonzero_split", reduce = "sum", output = "out")]
pub fn l1_change(_all: &Csr<f32>, next: &[f32], rank: &[f32], #[atom] i: usize) -> f32 {
    (next[i] - rank[i]).abs()
}

/// A graph ready for [`pagerank`]: its CSC (tiles are the vertices' in-edges), a one-row tile
/// set over the vertices for the two sums, each vertex's inverse out-degree (0 without
/// out-edges) and dangling flag (1.0 without out-edges, else 0.0).
pub struct PageRankGraph {
    in_edges: DeviceCsc<f32>,
    all: DeviceCsr<f32>,
    inv_degree: DeviceBuffer<f32>,
    is_dangling: DeviceBuffer<f32>,
    n: usize,
}

impl PageRankGraph {
    /// Uploads `g` (entry (u, v) is an edge u → v; values are ignored): square, at least one
    /// vertex.
    pub fn upload(dev: &Device, g: &Csr<f32>) -> Result<PageRankGraph> {
        let n = g.num_rows;
        if n != g.num_cols || n == 0 {
            return Err(Error::Shape(format!(
                "pagerank: needs a square graph with at least one vertex, this one is {} × {}",
                g.num_rows, g.num_cols
            )));
        }
        let degree: Vec<usize> = (0..n).map(|u| g.row(u).len()).collect();
        let inv_degree: Vec<f32> = degree
            .iter()
            .map(|&k| if k == 0 { 0.0 } else { 1.0 / k as f32 })
            .collect();
        let is_dangling: Vec<f32> = degree
            .iter()
            .map(|&k| f32::from(u8::from(k == 0)))
            .collect();
        let all = Csr::new(1, n, vec![0, n], (0..n as u32).collect(), vec![0.0; n])?;
        Ok(PageRankGraph {
            in_edges: DeviceCsc::upload(dev, &g.to_csc()?)?,
            all: DeviceCsr::upload(dev, &all)?,
            inv_degree: dev.upload(&inv_degree)?,
            is_dangling: dev.upload(&is_dangling)?,
            n,
        })
    }

    /// The vertex count.
    pub fn num_vertices(&self) -> usize {
        self.n
    }

    /// The edge count.
    pub fn num_edges(&self) -> usize {
        self.in_edges.nnz()
    }
}

/// When [`pagerank`] stops, and its damping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageRankOptions {
    /// The probability of following an edge rather than teleporting (0.85 by default).
    pub damping: f32,
    /// Stop when an iteration changes the ranks by less than this in the L1 norm (1e-5). The f32
    /// iterates settle within rounding of the fixed point (a few ulps of the largest rank per
    /// vertex), so a much smaller tolerance may never be met on a large graph: the run then
    /// ends after `max_iterations` with `converged` false.
    pub tolerance: f64,
    /// Stop after this many iterations at most (200).
    pub max_iterations: usize,
}

impl Default for PageRankOptions {
    fn default() -> Self {
        PageRankOptions {
            damping: 0.85,
            tolerance: 1e-5,
            max_iterations: 200,
        }
    }
}

/// What [`pagerank`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct PageRankResult {
    /// The ranks, summing to 1 (to rounding).
    pub rank: Vec<f32>,
    /// Whether the last iteration's L1 change was below the tolerance.
    pub converged: bool,
    /// `edges` counts every edge once per iteration; `retries` is always 0.
    pub run: Traversal,
}

/// PageRank of `g` by power iteration under `schedule` (the pull's; the two sums run
/// `nonzero_split`), from the uniform ranks.
///
/// ```
/// use lb::algorithms::{pagerank, pagerank_reference, PageRankGraph, PageRankOptions};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(200, 200, 5.0, 3);
/// let dev = Device::default();
/// let opts = PageRankOptions::default();
/// let r = pagerank(&dev, &PageRankGraph::upload(&dev, &g)?, Schedule::ThreadMapped, opts)?;
/// let (want, _) = pagerank_reference(&g, opts);
/// let l1: f64 = r.rank.iter().zip(&want).map(|(&a, &b)| (f64::from(a) - b).abs()).sum();
/// assert!(r.converged && l1 < 1e-4, "{l1}");
/// # Ok::<(), lb::Error>(())
/// ```
pub fn pagerank(
    dev: &Device,
    g: &PageRankGraph,
    schedule: Schedule,
    opts: PageRankOptions,
) -> Result<PageRankResult> {
    let clock = Instant::now();
    // NaN fails both range tests.
    let valid =
        (0.0..=1.0).contains(&opts.damping) && (0.0..=f64::INFINITY).contains(&opts.tolerance);
    if !valid {
        return Err(Error::Shape(format!(
            "pagerank: damping {} must be in [0, 1] and tolerance {} ≥ 0",
            opts.damping, opts.tolerance
        )));
    }
    let n = g.n;
    let mut rank = dev.filled(n, 1.0 / n as f32)?;
    let mut next = dev.zeros::<f32>(n)?;
    let (mut dangling, mut change) = (dev.zeros::<f32>(1)?, dev.zeros::<f32>(1)?);
    let (d, inv_n) = (opts.damping, 1.0 / n as f32);
    let mut run = Traversal::default();
    let mut converged = false;
    let before = dev.transferred();
    while run.iterations < opts.max_iterations && !converged {
        let launches = [
            dangling_mass::launch(dev, &g.all, &rank, &g.is_dangling, &mut dangling)?,
            pagerank_pull::launch_with(
                dev,
                schedule,
                &g.in_edges,
                &rank,
                &g.inv_degree,
                &dangling,
                d,
                inv_n,
                &mut next,
            )?,
            l1_change::launch(dev, &g.all, &next, &rank, &mut change)?,
        ];
        for ms in launches.iter().filter_map(|l| l.elapsed_ms) {
            *run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        std::mem::swap(&mut rank, &mut next);
        run.iterations += 1;
        run.edges += g.num_edges() as u64;
        let delta = change.download()?.first().copied().unwrap_or(f32::NAN);
        converged = f64::from(delta) < opts.tolerance;
    }
    let moved = dev.transferred().since(before);
    run.bytes_to_host = moved.to_host;
    run.bytes_to_device = moved.to_device;
    let rank = rank.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(PageRankResult {
        rank,
        converged,
        run,
    })
}

/// The reference for [`pagerank`]: the same iteration in f64 on the host, pushing each vertex's
/// rank along its out-edges, with the same stopping rule; the ranks and the iterations taken.
/// Panics if `g` is not square or has no vertex.
pub fn pagerank_reference(g: &Csr<f32>, opts: PageRankOptions) -> (Vec<f64>, usize) {
    assert!(g.num_rows == g.num_cols && g.num_rows > 0, "a square graph");
    let n = g.num_rows;
    let d = f64::from(opts.damping);
    let mut rank = vec![1.0 / n as f64; n];
    for iter in 1..=opts.max_iterations {
        let dangling: f64 = (0..n)
            .filter(|&u| g.row(u).is_empty())
            .map(|u| rank[u])
            .sum();
        let mut next = vec![(1.0 - d) / n as f64 + d * dangling / n as f64; n];
        for (u, &r) in rank.iter().enumerate() {
            let share = d * r / g.row(u).len().max(1) as f64;
            for nz in g.row(u) {
                next[g.col_indices[nz] as usize] += share;
            }
        }
        let change: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
        rank = next;
        if change < opts.tolerance {
            return (rank, iter);
        }
    }
    (rank, opts.max_iterations)
}
