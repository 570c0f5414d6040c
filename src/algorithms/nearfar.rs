//! Bucketed single-source shortest paths: the Near-Far method of Davidson, Baxter, Garland and
//! Owens ("Work-Efficient Parallel GPU Methods for Single-Source Shortest Paths", IPDPS 2014),
//! a two-bucket form of Meyer and Sanders' Δ-stepping, on the device-resident frontier loop.
//!
//! # The two piles
//!
//! Plain frontier relaxation ([`sssp`](super::sssp)) relaxes every improved vertex at once, so a
//! vertex whose distance drops several times relaxes its edges several times. Near-Far
//! processes only the vertices whose distance lies below a moving split: a relaxation that
//! lowers a distance below the split pushes the vertex onto the **near** pile (the next
//! frontier), one at or above it onto the **far** pile. When the near pile runs dry, every
//! vertex below the split is settled; the split moves up by Δ and the far pile is divided into
//! the new near pile (below the new split), the new far pile (at or above it), and the entries
//! already settled, which are dropped.
//!
//! # Everything on the device
//!
//! The split lives on the device, not the host. Each relaxation that goes to the far pile also
//! lowers `lo`, the least distance pushed there in the current phase (a lower bound of the far
//! pile's least distance), and the division kernel computes the next split as
//! `max(split, lo) + Δ` in every thread and stores it for the next phase's relaxations. Two
//! split slots and three `lo` slots rotate with the phase so that no kernel reads a slot
//! another thread of the same launch writes (`window`'s layout: [`WINDOW`]). A vertex enters
//! the near pile at most once per step (a stamp raised with `atomic_max` in `marks`, as
//! [`sssp`](super::sssp) does) and the far pile at most once per phase (the phase's stamp in
//! `far_marks`), so piles of `num_rows` slots never overflow. The host reads the two piles'
//! push counters after each step, **16 bytes per step**, relaxation or division alike (the
//! kernels run through the unchecked launchers, whose unproven indices this driver proves).
//!
//! # Δ
//!
//! Davidson et al. choose Δ from the graph's average edge weight and average degree. The default
//! here ([`Delta::FromWeights`]) is `32 · w̄ / d̄`: a warp's width of average edges' weight spread
//! over a vertex's average out-degree, so that a near pile holds about a warp's worth of
//! relaxations per vertex. The mean weight is one reduction on the device at the start.
//! A Δ of infinity is plain frontier relaxation (one phase); a tiny Δ approaches Dijkstra's order
//! and pays one division per distinct distance.

use std::time::Instant;

use super::driver::{one_per_vertex, pushed_into, stamp, start, Traversal, EDGE_SLOTS};
use crate::prelude::*;
use crate::{Error, Result};

/// `window`'s layout: `[split₀, split₁, lo₀, lo₁, lo₂]`; phase `p` reads split `p % 2` and lowers
/// `lo` `p % 3`.
pub const WINDOW: usize = 5;

/// Relaxes the near pile's out-edges in phase `phase`: an improved vertex below the phase's
/// split joins the near pile `near` once per step (stamp `mark` in `marks`), one at or above it
/// lowers the phase's `lo` and joins the far pile `far` once per phase (stamp `phase + 1` in
/// `far_marks`). Adds each frontier vertex's out-degree to `edges[u % edges.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn near_far_relax(
    g: &Csr<f32>,
    frontier: &[u32],
    dist: &mut [f32],
    marks: &mut [u32],
    mark: u32,
    far_marks: &mut [u32],
    window: &mut [f32],
    phase: u32,
    near: &mut Queue,
    far: &mut Queue,
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
    let d = dist[u] + g.values[e];
    if d < atomic_min(&mut dist[v], d) {
        if d < window[(phase % 2) as usize] {
            if atomic_max(&mut marks[v], mark) < mark {
                near.push(v as u32);
            }
        } else {
            atomic_min(&mut window[2 + (phase % 3) as usize], d);
            if atomic_max(&mut far_marks[v], phase + 1) < phase + 1 {
                far.push(v as u32);
            }
        }
    }
}

/// Divides the far pile of phase `phase` (the frontier: one tile of one atom per entry of the
/// one-per-vertex `vertices`) for phase `phase + 1`: the split moves to `max(split, lo) + delta`
/// (stored by every thread, the same value), entries below the old split are settled and
/// dropped, those below the new split (or at `lo`, when Δ is lost to rounding) join the near
/// pile, the rest the next far pile, lowering the next phase's `lo`. The slot of `lo` the phase
/// after next will lower is reset to +∞.
#[load_balanced(schedule = "thread_mapped", tiles = "far")]
#[allow(clippy::too_many_arguments)]
pub fn near_far_divide(
    _vertices: &Csr<f32>,
    far: &[u32],
    dist: &[f32],
    marks: &mut [u32],
    mark: u32,
    far_marks: &mut [u32],
    window: &mut [f32],
    phase: u32,
    delta: f32,
    near: &mut Queue,
    next_far: &mut Queue,
    #[tile] v: usize,
    #[atom] _e: usize,
) {
    let split = window[(phase % 2) as usize];
    let lo = window[2 + (phase % 3) as usize];
    let next_split = split.max(lo) + delta;
    window[((phase + 1) % 2) as usize] = next_split;
    window[2 + ((phase + 2) % 3) as usize] = f32::INFINITY;
    let d = dist[v];
    if d >= split {
        if d < next_split || d <= lo {
            if atomic_max(&mut marks[v], mark) < mark {
                near.push(v as u32);
            }
        } else {
            atomic_min(&mut window[2 + ((phase + 1) % 3) as usize], d);
            if atomic_max(&mut far_marks[v], phase + 2) < phase + 2 {
                next_far.push(v as u32);
            }
        }
    }
}

/// `sums[e % sums.len()] += weight of e`, in f64: the edge weights' total, spread over
/// [`WEIGHT_SLOTS`] counters so that a warp's atomics hit different addresses.
#[load_balanced(schedule = "auto")]
pub fn weight_sum(g: &Csr<f32>, sums: &mut [f64], #[atom] e: usize) {
    atomic_add(&mut sums[e % sums.len()], g.values[e] as f64);
}

/// Counters of [`weight_sum`](fn@weight_sum).
pub const WEIGHT_SLOTS: usize = 1024;

/// How [`sssp_near_far`] picks the width of the near window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Delta {
    /// `32 · w̄ / d̄` from the graph's mean edge weight and mean out-degree (module docs); +∞
    /// (one phase) for a graph without edges or with a mean weight of zero.
    #[default]
    FromWeights,
    /// `c · w̄ / d̄`: [`Delta::FromWeights`] with another factor than 32 (positive).
    Scaled(f32),
    /// This Δ: positive, or +∞ for plain frontier relaxation.
    Fixed(f32),
}

/// What [`sssp_near_far`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct NearFarResult {
    /// Distance from the source; `f32::INFINITY` for unreachable vertices.
    pub dist: Vec<f32>,
    /// `iterations` counts every step: the relaxations and the far pile's divisions.
    pub run: Traversal,
    /// Far-pile divisions: phases after the first.
    pub divisions: usize,
    /// The Δ used.
    pub delta: f32,
}

/// Shortest distances from `source` over nonnegative edge weights by Near-Far (module docs),
/// with Δ from `delta`. The distances are [`sssp`](super::sssp)'s and [`dijkstra`](super::dijkstra)'s.
///
/// ```
/// use lb::algorithms::{dijkstra, sssp_near_far, Delta};
/// use lb::prelude::*;
///
/// let mut g = lb::generate::power_law(300, 300, 6.0, 7);
/// g.values.iter_mut().for_each(|w| *w = w.abs());
/// let dev = Device::default();
/// let r = sssp_near_far(&dev, &DeviceCsr::upload(&dev, &g)?, 0, Schedule::ThreadMapped, Delta::default())?;
/// assert_eq!(r.dist, dijkstra(&g, 0));
/// # Ok::<(), lb::Error>(())
/// ```
pub fn sssp_near_far(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    schedule: Schedule,
    delta: Delta,
) -> Result<NearFarResult> {
    let clock = Instant::now();
    let source = start(g, source, "sssp_near_far")?;
    let delta = match delta {
        Delta::Fixed(d) if d > 0.0 => d,
        Delta::Fixed(d) => {
            return Err(Error::Shape(format!(
                "sssp_near_far: Δ = {d} must be positive (or infinite, for one phase)"
            )))
        }
        Delta::FromWeights => delta_from_weights(dev, g, 32.0)?,
        Delta::Scaled(c) if c > 0.0 && c.is_finite() => delta_from_weights(dev, g, c)?,
        Delta::Scaled(c) => {
            return Err(Error::Shape(format!(
                "sssp_near_far: the factor {c} of Δ = c · w̄ / d̄ must be positive and finite"
            )))
        }
    };
    let n = g.num_rows();
    let mut dist = dev.filled(n, f32::INFINITY)?;
    dev.write_at(&mut dist, source as usize, &[0.0])?;
    let mut piles = Piles {
        dev,
        schedule,
        first: dev.upload(&[source])?,
        near: [DeviceQueue::new(dev, n)?, DeviceQueue::new(dev, n)?],
        far: [DeviceQueue::new(dev, n)?, DeviceQueue::new(dev, n)?],
        marks: dev.zeros::<u32>(n)?,
        far_marks: dev.zeros::<u32>(n)?,
        window: dev.upload(&[delta, 0.0, f32::INFINITY, f32::INFINITY, f32::INFINITY])?,
        edges: dev.zeros::<u64>(EDGE_SLOTS)?,
        vertices: None,
    };
    let mut out = NearFarResult {
        dist: Vec::new(),
        run: Traversal::default(),
        divisions: 0,
        delta,
    };
    let before = dev.transferred();
    let mut excluded = 0u64;
    let (mut near_len, mut far_len, mut phase) = (1u64, 0u64, 0u32);
    loop {
        let step = out.run.iterations;
        let (counts, ms) = if near_len > 0 {
            piles.relax(g, &mut dist, step, near_len, phase)?
        } else if far_len > 0 {
            let setup = dev.transferred();
            piles.vertex_set(n)?;
            excluded += dev.transferred().since(setup).to_device;
            out.divisions += 1;
            let counts = piles.divide(&dist, step, far_len, phase, delta)?;
            phase = phase
                .checked_add(1)
                .filter(|&p| p < u32::MAX - 1)
                .ok_or_else(|| Error::Shape("sssp_near_far: more than 2^32 phases".into()))?;
            counts
        } else {
            break;
        };
        if let Some(ms) = ms {
            *out.run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        (near_len, far_len) = counts;
        out.run.iterations += 1;
    }
    let moved = dev.transferred().since(before);
    out.run.bytes_to_host = moved.to_host;
    out.run.bytes_to_device = moved.to_device.saturating_sub(excluded);
    out.run.edges = piles.edges.download()?.iter().sum();
    out.dist = dist.download()?;
    out.run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(out)
}

/// `c · w̄ / d̄`, the mean weight from one reduction on the device; +∞ where that is not a
/// positive finite number (no edges, zero weights).
fn delta_from_weights(dev: &Device, g: &DeviceCsr<f32>, c: f32) -> Result<f32> {
    if g.nnz() == 0 || g.num_rows() == 0 {
        return Ok(f32::INFINITY);
    }
    let mut sums = dev.zeros::<f64>(WEIGHT_SLOTS)?;
    weight_sum::launch(dev, g, &mut sums)?;
    let total: f64 = sums.download()?.iter().sum();
    let mean_weight = total / g.nnz() as f64;
    let mean_degree = g.nnz() as f64 / g.num_rows() as f64;
    let delta = (f64::from(c) * mean_weight / mean_degree) as f32;
    Ok(if delta.is_finite() && delta > 0.0 {
        delta
    } else {
        f32::INFINITY
    })
}

/// The loop's device state besides the distances: the two piles, each double-buffered, their
/// stamps, the split window and the edge counters.
struct Piles<'a> {
    dev: &'a Device,
    schedule: Schedule,
    /// The first near pile, the source alone.
    first: DeviceBuffer<u32>,
    /// The current near pile and the one being filled.
    near: [DeviceQueue; 2],
    /// The current far pile (appended to by the relaxations) and the next one (filled by a
    /// division).
    far: [DeviceQueue; 2],
    marks: DeviceBuffer<u32>,
    far_marks: DeviceBuffer<u32>,
    window: DeviceBuffer<f32>,
    edges: DeviceBuffer<u64>,
    /// The one-per-vertex tile set the divisions run over, made at the first division.
    vertices: Option<DeviceCsr<f32>>,
}

/// The piles' lengths after a step, and its kernel time.
type Step = ((u64, u64), Option<f32>);

impl Piles<'_> {
    /// Relaxes the near pile (`len` entries; the source at step 0): the next near pile's and
    /// the far pile's lengths.
    fn relax(
        &mut self,
        g: &DeviceCsr<f32>,
        dist: &mut DeviceBuffer<f32>,
        step: usize,
        len: u64,
        phase: u32,
    ) -> Result<Step> {
        let mark = stamp(step, "sssp_near_far")?;
        let [current, next] = &mut self.near;
        next.clear()?;
        let frontier = if step == 0 {
            &self.first
        } else {
            current.slots(len)
        };
        // SAFETY: the unproven indices are the frontier's entries, `edges[u % edges.len()]` and
        // `window`'s slots. The frontier holds the source, which `start` checked, or vertices
        // the kernels pushed: column indices of the square `g` (validated at upload) or far
        // entries, themselves such vertices. `edges` has EDGE_SLOTS > 0 entries, and `window`
        // has WINDOW = 5 entries, of which `2 + phase % 3` is one.
        let launch = unsafe {
            near_far_relax::launch_with_unchecked(
                self.dev,
                self.schedule,
                g,
                frontier,
                dist,
                &mut self.marks,
                mark,
                &mut self.far_marks,
                &mut self.window,
                phase,
                next,
                &mut self.far[0],
                &mut self.edges,
            )
        }?;
        self.near.swap(0, 1);
        piles_after(&launch, "far")
    }

    /// Divides the far pile (`len` entries) for the phase after `phase`: the new near pile's and
    /// far pile's lengths.
    fn divide(
        &mut self,
        dist: &DeviceBuffer<f32>,
        step: usize,
        len: u64,
        phase: u32,
        delta: f32,
    ) -> Result<Step> {
        let mark = stamp(step, "sssp_near_far")?;
        let vertices = self
            .vertices
            .as_ref()
            .ok_or_else(|| Error::Shape("sssp_near_far: no vertex set for a division".into()))?;
        self.near[1].clear()?;
        let [far, next_far] = &mut self.far;
        next_far.clear()?;
        // SAFETY: the frontier's entries are far-pile entries, vertices of `g` (see `relax`),
        // and `vertices` has one row per vertex; `window` has WINDOW = 5 entries, of which
        // `phase % 2`, `(phase + 1) % 2` and `2 + (phase + i) % 3` are some.
        let launch = unsafe {
            near_far_divide::launch_with_unchecked(
                self.dev,
                Schedule::ThreadMapped,
                vertices,
                far.slots(len),
                dist,
                &mut self.marks,
                mark,
                &mut self.far_marks,
                &mut self.window,
                phase,
                delta,
                &mut self.near[1],
                next_far,
            )
        }?;
        self.near.swap(0, 1);
        self.far.swap(0, 1);
        piles_after(&launch, "next_far")
    }

    /// Makes the one-per-vertex tile set of the divisions, once.
    fn vertex_set(&mut self, n: usize) -> Result<()> {
        if self.vertices.is_none() {
            self.vertices = Some(one_per_vertex(self.dev, n)?);
        }
        Ok(())
    }
}

/// The step's result: the near pile's length, the far pile's (the queue parameter `far`), and
/// the kernel time.
fn piles_after(launch: &Launch, far: &str) -> Result<Step> {
    Ok((
        (pushed_into(launch, "near")?, pushed_into(launch, far)?),
        launch.elapsed_ms,
    ))
}
