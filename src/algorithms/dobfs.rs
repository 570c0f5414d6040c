//! Direction-optimizing breadth-first search (Beamer, Asanović & Patterson, "Direction-Optimizing
//! Breadth-First Search", SC'12): top-down steps ("push", [`bfs`](super::bfs)'s expansion of the
//! frontier's out-edges) while the frontier is small, bottom-up steps ("pull": every unvisited
//! vertex looks for a parent in the frontier among its in-edges) while it is large.
//!
//! # The switch rule (Beamer et al., §4, as their GAP benchmark suite's `bfs.cc` implements it)
//!
//! Before each step the driver knows the frontier's vertex count `n_f`, the out-edges of its
//! vertices `m_f`, and an upper bound `m_u` on the out-edges not examined yet:
//!
//! - push → pull when `m_f > m_u / α` (α = 14): the frontier's edges outnumber the share of the
//!   unexplored edges a bottom-up step would examine;
//! - pull → push when the frontier shrinks (`n_f` below the previous step's) and `n_f < n / β`
//!   (β = 24), so a tail of small frontiers is not paid for with whole-graph scans.
//!
//! `m_u` starts at the graph's edges and each top-down step subtracts the `m_f` it expands; `m_f`
//! is known after a top-down step (the degrees its claims added up). After a bottom-up phase
//! `m_f` is set to 1, so the next step pushes and measures it: the GAP suite's `scout_count = 1`,
//! which spares the bottom-up steps any counting on the host's behalf.
//!
//! # Counters on the device, 16 bytes per iteration
//!
//! Both steps claim a vertex with `atomic_cas` on `depth` and push it into the next frontier's
//! queue, so the queue's counter (read by the launch anyway) is `n_f`. The claiming lane also adds
//! the vertex's out-degree to one of [`CLAIM_SLOTS`] counters, which only grow (one array for
//! each direction). After a top-down step a one-block reduction sums the top-down counters,
//! enqueued behind the step, and the host reads that one `u64` in the same synchronization: its
//! growth is `m_f`. A bottom-up step reads its queue counter and no sum. The steps run through the
//! unchecked launchers, whose only unproven indices the driver proves (the frontier holds
//! vertices, `v % CLAIM_SLOTS` is a slot), so no error flag is read: an iteration moves at most
//! 16 bytes. The two sums are read once more at the end, for the traversed edges.
//!
//! # The bottom-up step is Beamer's scan
//!
//! Beamer's bottom-up step stops scanning a vertex's in-edges at its first parent in the
//! frontier, and that early exit is what makes it cheap: in the step that reaches most of a
//! scale-free graph, most vertices find a parent among their first few in-edges. So the pull is
//! his loop as written, one thread per vertex ([`dobfs_pull`], `thread_mapped` over a tile set of
//! one atom per vertex), and the `schedule` the caller picks balances the top-down steps. A
//! vertex already reached costs one load; a hub is reached early (it is everyone's neighbour),
//! so its long in-edge list is seldom scanned.
//!
//! The pull was first an lb kernel over the in-edges (one atom per edge, balanced by the
//! schedule). A body is one atom and cannot cancel its siblings, so every in-edge of every
//! vertex was scheduled and an atom after the claim still cost a load; measured on an H100
//! (docs/benchmarks.md, twenty-fifth session), that step was latency-bound with each thread's
//! atoms one after another, and took 2.2× (power law) to 6× (R-MAT's later steps) the scan's
//! time. A list of the unvisited vertices for the later steps (Gunrock's filter) was slower
//! still under the schedules whose frontier grids a hub makes the whole graph's.
//!
//! The parent test reads the frontier as a flag per vertex (`front[u]`, one byte, set by the step
//! before with the claim) rather than as `depth[u] == level`: the random reads touch a quarter
//! of the bytes. Two flag arrays alternate by level; the one a step writes is zeroed on the
//! device first.

use std::sync::Mutex;
use std::time::Instant;

use super::driver::{pushed_into, stamp, start, Traversal};
use crate::prelude::*;
use crate::{Error, Result};

/// Counters the steps add claimed vertices' out-degrees to (vertex `v` adds to slot
/// `v % CLAIM_SLOTS`), spread over 64 cache lines so that the atomics do not queue on one
/// (see [`EDGE_SLOTS`](super::EDGE_SLOTS)).
pub const CLAIM_SLOTS: usize = 1024;

/// The top-down step: [`bfs_visit`](fn@super::bfs_visit)'s claim of each unvisited out-neighbour,
/// plus the claimed vertex's mark (`mark[v]`, the next frontier as a flag per vertex) and its
/// out-degree added to `claimed[v % claimed.len()]`.
#[load_balanced(schedule = "auto", tiles = "frontier")]
#[allow(clippy::too_many_arguments)]
pub fn dobfs_push(
    g: &Csr<f32>,
    frontier: &[u32],
    degree: &[u64],
    depth: &mut [u32],
    level: u32,
    next: &mut Queue,
    mark: &mut [bool],
    claimed: &mut [u64],
    #[tile] _u: usize,
    #[atom] e: usize,
) {
    let v = g.col_indices[e] as usize;
    if atomic_cas(&mut depth[v], u32::MAX, level + 1) == u32::MAX {
        next.push(v as u32);
        mark[v] = true;
        atomic_add(&mut claimed[v % claimed.len()], degree[v]);
    }
}

/// Beamer's bottom-up step as written (§3): one thread per vertex (`vertices` has one atom per
/// vertex) scans the vertex's in-edges (`in_sources[in_offsets[v]..in_offsets[v + 1]]`) in order
/// and stops at the first parent in the frontier. The thread owns its vertex in this step, so
/// the claim is a plain store.
#[load_balanced(schedule = "thread_mapped")]
#[allow(clippy::too_many_arguments)]
pub fn dobfs_pull(
    vertices: &Tiles,
    in_offsets: &[u64],
    in_sources: &[u32],
    degree: &[u64],
    depth: &mut [u32],
    level: u32,
    front: &[bool],
    next: &mut Queue,
    mark: &mut [bool],
    claimed: &mut [u64],
    #[tile] v: usize,
    #[atom] _e: usize,
) {
    if depth[v] == u32::MAX {
        let end = in_offsets[v + 1] as usize;
        let mut e = in_offsets[v] as usize;
        while e < end {
            if front[in_sources[e] as usize] {
                depth[v] = level + 1;
                next.push(v as u32);
                mark[v] = true;
                atomic_add(&mut claimed[v % claimed.len()], degree[v]);
                break;
            }
            e += 1;
        }
    }
}

/// `total[r]` = the sum of `x` at the columns of row `r` of `pick`: the claim counters' sum, for
/// the host to read as one `u64`. A block per row: the counters are a thousand loads, one thread
/// would chain them.
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

/// A graph ready for [`bfs_direction_optimizing`], uploaded once and searched from any number
/// of sources: its out-edges (a CSR, the top-down step's tile set), its in-edges (the transpose's
/// offsets and sources, which the bottom-up step scans), a tile set of one atom per vertex (the
/// bottom-up step's threads), every vertex's out-degree (on the device for the claims, on the
/// host for the source's) and a one-row tile set over the claim counters (their sum).
///
/// It also keeps the device buffers of its last search (the depths, the frontier queues and
/// flags, the counters) and resets them on the device for the next one, so a search from a new
/// source allocates nothing; searches that run at once on one graph each get their own.
pub struct DoBfsGraph {
    out_edges: DeviceCsr<f32>,
    vertices: DeviceTiles,
    in_offsets: DeviceBuffer<u64>,
    in_sources: DeviceBuffer<u32>,
    degree: DeviceBuffer<u64>,
    host_degree: Vec<u64>,
    slots: DeviceCsr<f32>,
    /// The last search's buffers, for the next (`None` while a search holds them).
    scratch: Mutex<Option<Scratch>>,
}

impl DoBfsGraph {
    /// Uploads `g` (entry (u, v) is an edge u → v; values are ignored), which must be square
    /// with fewer than 2³² vertices.
    pub fn upload(dev: &Device, g: &Csr<f32>) -> Result<DoBfsGraph> {
        if g.num_rows != g.num_cols || u32::try_from(g.num_rows).is_err() {
            return Err(Error::Shape(format!(
                "dobfs: a graph's adjacency matrix is square with fewer than 2^32 vertices, \
                 this one is {} × {}",
                g.num_rows, g.num_cols
            )));
        }
        let host_degree: Vec<u64> = (0..g.num_rows).map(|u| g.row(u).len() as u64).collect();
        let slots: Vec<u32> = (0..CLAIM_SLOTS as u32).collect();
        let slots = Csr::new(
            1,
            CLAIM_SLOTS,
            vec![0, CLAIM_SLOTS],
            slots,
            vec![0.0; CLAIM_SLOTS],
        )?;
        let csc = g.to_csc()?;
        let in_offsets: Vec<u64> = csc.col_offsets.iter().map(|&o| o as u64).collect();
        Ok(DoBfsGraph {
            out_edges: DeviceCsr::upload(dev, g)?,
            vertices: DeviceTiles::upload(dev, &Tiles::new((0..=g.num_rows).collect())?)?,
            in_offsets: dev.upload(&in_offsets)?,
            in_sources: dev.upload(&csc.row_indices)?,
            degree: dev.upload(&host_degree)?,
            host_degree,
            slots: DeviceCsr::upload(dev, &slots)?,
            scratch: Mutex::new(None),
        })
    }

    /// The out-edges, as uploaded.
    pub fn graph(&self) -> &DeviceCsr<f32> {
        &self.out_edges
    }

    /// The vertex count.
    pub fn num_vertices(&self) -> usize {
        self.host_degree.len()
    }

    /// The buffers of a search from `source` on `dev`, reset: the last search's when it left
    /// them on the same device, else new ones (a search running meanwhile holds them).
    fn scratch(&self, dev: &Device, source: u32) -> Result<Scratch> {
        let kept = self.scratch.lock().ok().and_then(|mut slot| slot.take());
        let mut scratch = match kept {
            Some(s) if s.depth.device().same(dev) => s,
            _ => Scratch::new(dev, self.num_vertices())?,
        };
        scratch.reset(dev, source)?;
        Ok(scratch)
    }

    /// Keeps a finished search's buffers for the next.
    fn keep(&self, scratch: Scratch) {
        if let Ok(mut slot) = self.scratch.lock() {
            *slot = Some(scratch);
        }
    }
}

/// One step of a direction-optimizing search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DoBfsLevel {
    /// A bottom-up step; else top-down.
    pub pulled: bool,
    /// The tiles its kernel ran over: the frontier's vertices (top-down) or every vertex
    /// (bottom-up).
    pub tiles: u64,
    /// The vertices it reached: the next frontier.
    pub reached: u64,
    /// Its kernels' time (the claim counters' sum included), on a GPU.
    pub kernel_ms: Option<f32>,
}

/// What [`bfs_direction_optimizing`] computed. `D` holds the depths on the host: a `Vec`, or
/// with [`bfs_direction_optimizing_into`] a [`HostBuffer`] in page-locked memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DoBfsResult<D = Vec<u32>> {
    /// Hops from the source; `u32::MAX` for unreachable vertices.
    pub depth: D,
    /// `edges` counts the out-edges of every reached vertex, as [`bfs`](super::bfs) does, so
    /// both report the same traversed edges per second however few edges a pull examined.
    pub run: Traversal,
    /// Top-down steps.
    pub push_iterations: usize,
    /// Bottom-up steps.
    pub pull_iterations: usize,
    /// Every step, in order.
    pub levels: Vec<DoBfsLevel>,
}

/// Hop counts from `source` by direction-optimizing BFS on `g` (see [`DoBfsGraph`]), with
/// `schedule` running both steps. The depths are [`bfs`](super::bfs)'s.
///
/// ```
/// use lb::algorithms::{bfs_direction_optimizing, bfs_levels, Direction, DoBfsGraph};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(300, 300, 6.0, 7);
/// let dev = Device::default();
/// let dg = DoBfsGraph::upload(&dev, &g)?;
/// let r = bfs_direction_optimizing(&dev, &dg, 0, Schedule::ThreadMapped, Direction::default())?;
/// assert_eq!(r.depth, bfs_levels(&g, 0));
/// assert_eq!(r.push_iterations + r.pull_iterations, r.run.iterations);
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs_direction_optimizing(
    dev: &Device,
    g: &DoBfsGraph,
    source: usize,
    schedule: Schedule,
    direction: Direction,
) -> Result<DoBfsResult> {
    let mut out = DoBfsResult::default();
    bfs_direction_optimizing_into(dev, g, source, schedule, direction, &mut out)?;
    Ok(out)
}

/// [`bfs_direction_optimizing`] into `out`, reusing its buffers: searches in a loop then write
/// their depths into host memory already touched, where a new vector of several megabytes costs
/// a page fault per page on its first write (see [`Device::download_into`]). With a
/// [`HostBuffer`] the depths arrive about four times faster than into a `Vec` (page-locked
/// memory, see [`Device::download_to`]); on a large graph that is most of a search's time
/// outside its kernels. `out` is overwritten; after an error its contents mean nothing.
///
/// ```
/// use lb::algorithms::{bfs_direction_optimizing_into, bfs_levels, Direction, DoBfsGraph, DoBfsResult};
/// use lb::prelude::*;
///
/// let g = lb::generate::power_law(300, 300, 6.0, 7);
/// let dev = Device::default();
/// let dg = DoBfsGraph::upload(&dev, &g)?;
/// let mut r: DoBfsResult = DoBfsResult::default();
/// for source in [0, 5] {
///     bfs_direction_optimizing_into(&dev, &dg, source, Schedule::MergePath, Direction::default(), &mut r)?;
///     assert_eq!(r.depth, bfs_levels(&g, source));
/// }
/// # Ok::<(), lb::Error>(())
/// ```
pub fn bfs_direction_optimizing_into<D: HostDestination<u32>>(
    dev: &Device,
    g: &DoBfsGraph,
    source: usize,
    schedule: Schedule,
    direction: Direction,
    out: &mut DoBfsResult<D>,
) -> Result<()> {
    let clock = Instant::now();
    let source = start(&g.out_edges, source, "dobfs")?;
    check_direction(&direction)?;
    let n = g.num_vertices();
    let Scratch { mut depth, buffers } = g.scratch(dev, source)?;
    let mut steps = Steps {
        dev,
        g,
        schedule,
        b: buffers,
    };
    let _timing = Timing::on(dev.stream());
    out.run = Traversal::default();
    out.push_iterations = 0;
    out.pull_iterations = 0;
    out.levels.clear();
    let before = dev.transferred();
    let source_degree = g.host_degree[source as usize];
    // The frontier's vertices and out-edges, the bound on the edges not examined, and the
    // top-down counters' sum when last read.
    let (mut len, mut frontier_edges) = (1u64, source_degree);
    let (mut unexplored, mut pushed_sum) = (g.out_edges.nnz() as u64, 0u64);
    let (mut previous_len, mut pulling) = (0u64, false);
    while len > 0 {
        pulling = if pulling {
            len >= previous_len || len as f64 >= n as f64 / direction.beta
        } else {
            frontier_edges as f64 > unexplored as f64 / direction.alpha
        };
        let level = stamp(out.run.iterations, "dobfs")? - 1;
        let step = if pulling {
            frontier_edges = 1;
            steps.pull(&mut depth, level)?
        } else {
            unexplored = unexplored.saturating_sub(frontier_edges);
            let (step, sum) = steps.push(&mut depth, level, len)?;
            frontier_edges = sum - pushed_sum;
            pushed_sum = sum;
            step
        };
        if let Some(ms) = step.kernel_ms {
            *out.run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        out.levels.push(step);
        previous_len = len;
        len = step.reached;
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
    out.run.edges = source_degree + steps.claimed_edges()?;
    out.depth.download(dev, &depth)?;
    g.keep(Scratch {
        depth,
        buffers: steps.b,
    });
    out.run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(())
}

/// A search's steps: the graph, the schedule of the top-down steps and the buffers.
struct Steps<'a> {
    dev: &'a Device,
    g: &'a DoBfsGraph,
    schedule: Schedule,
    b: Buffers,
}

/// The device state of the loop that is not the result: the frontier queues and flags, the claim
/// counters of each direction and their sum.
struct Buffers {
    /// The first frontier, the source alone.
    frontier: DeviceBuffer<u32>,
    current: DeviceQueue,
    next: DeviceQueue,
    /// `marks[d % 2][v]`: `v` is at depth `d`, for the steps at `d` (read by a bottom-up step)
    /// and `d - 1` (written by either); zeroed before that step.
    marks: [DeviceBuffer<bool>; 2],
    pushed: DeviceBuffer<u64>,
    pulled: DeviceBuffer<u64>,
    total: DeviceBuffer<u64>,
}

/// Everything a search writes on the device, kept by its [`DoBfsGraph`] for the next search.
struct Scratch {
    depth: DeviceBuffer<u32>,
    buffers: Buffers,
}

impl Scratch {
    fn new(dev: &Device, n: usize) -> Result<Scratch> {
        Ok(Scratch {
            depth: dev.zeros(n)?,
            buffers: Buffers {
                frontier: dev.zeros(1)?,
                current: DeviceQueue::new(dev, n)?,
                next: DeviceQueue::new(dev, n)?,
                marks: [dev.zeros(n)?, dev.zeros(n)?],
                pushed: dev.zeros(CLAIM_SLOTS)?,
                pulled: dev.zeros(CLAIM_SLOTS)?,
                total: dev.zeros(1)?,
            },
        })
    }

    /// The state before a search from `source`, set on the device: every depth unknown but the
    /// source's, the source alone in the first frontier and its flags, the counters at zero.
    /// (The queues are cleared by each step, and `marks[1]` by the first.)
    fn reset(&mut self, dev: &Device, source: u32) -> Result<()> {
        let (b, at) = (&mut self.buffers, source as usize);
        dev.fill(&mut self.depth, u32::MAX)?;
        dev.write_at(&mut self.depth, at, &[0])?;
        dev.write_at(&mut b.frontier, 0, &[source])?;
        dev.fill(&mut b.marks[0], false)?;
        dev.write_at(&mut b.marks[0], at, &[true])?;
        dev.fill(&mut b.pushed, 0)?;
        dev.fill(&mut b.pulled, 0)
    }
}

impl<'a> Steps<'a> {
    /// A top-down step from the frontier at `level` (of `len` vertices), and the top-down claim
    /// counters' sum after it. The queues then swap.
    fn push(
        &mut self,
        depth: &mut DeviceBuffer<u32>,
        level: u32,
        len: u64,
    ) -> Result<(DoBfsLevel, u64)> {
        let (dev, g) = (self.dev, self.g);
        let stream = dev.stream();
        self.b.next.clear()?;
        let (_, mark) = split_marks(dev, &mut self.b.marks, level)?;
        let frontier = if level == 0 {
            &self.b.frontier
        } else {
            self.b.current.slots(len)
        };
        // SAFETY: besides `claimed[v % claimed.len()]` (CLAIM_SLOTS > 0 entries), the push's
        // unproven indices are its frontier's entries: the source, which `start` checked, or
        // vertices a step pushed: column indices of the square graph (validated at upload) or
        // tiles of the one-atom-per-vertex tile set, which has one tile per vertex.
        let step = unsafe {
            dobfs_push::launch_with_unchecked_async(
                &stream,
                self.schedule,
                &g.out_edges,
                frontier,
                &g.degree,
                depth,
                level,
                &mut self.b.next,
                mark,
                &mut self.b.pushed,
            )
        }?;
        let (sum, sum_ms) = read_sum(&stream, &g.slots, &self.b.pushed, &mut self.b.total)?;
        let step = step.wait()?;
        std::mem::swap(&mut self.b.current, &mut self.b.next);
        let level = DoBfsLevel {
            pulled: false,
            tiles: len,
            reached: pushed_into(&step, "next")?,
            kernel_ms: add_ms(step.elapsed_ms, sum_ms),
        };
        Ok((level, sum))
    }

    /// A bottom-up step at `level` over every vertex. The frontier queues swap.
    fn pull(&mut self, depth: &mut DeviceBuffer<u32>, level: u32) -> Result<DoBfsLevel> {
        let g = self.g;
        self.b.next.clear()?;
        let (front, mark) = split_marks(self.dev, &mut self.b.marks, level)?;
        // SAFETY: `in_offsets` holds the n + 1 column offsets of a validated CSC (so
        // `in_offsets[v + 1]` is in range for a vertex `v`, and every `e` below it indexes
        // `in_sources`), whose row indices are vertices (`front[u]`); `claimed` has
        // CLAIM_SLOTS > 0 entries.
        let step = unsafe {
            dobfs_pull::launch_with_unchecked(
                self.dev,
                Schedule::ThreadMapped,
                &g.vertices,
                &g.in_offsets,
                &g.in_sources,
                &g.degree,
                depth,
                level,
                front,
                &mut self.b.next,
                mark,
                &mut self.b.pulled,
            )
        }?;
        std::mem::swap(&mut self.b.current, &mut self.b.next);
        Ok(DoBfsLevel {
            pulled: true,
            tiles: g.num_vertices() as u64,
            reached: pushed_into(&step, "next")?,
            kernel_ms: step.elapsed_ms,
        })
    }

    /// The out-degrees of every vertex either direction claimed: both counters' sums.
    fn claimed_edges(&mut self) -> Result<u64> {
        let stream = self.dev.stream();
        let (g, total) = (self.g, &mut self.b.total);
        let pushed = read_sum(&stream, &g.slots, &self.b.pushed, total)?.0;
        let pulled = read_sum(&stream, &g.slots, &self.b.pulled, total)?.0;
        Ok(pushed + pulled)
    }
}

/// Times the asynchronous launches of a stream while it lives (a top-down step is enqueued
/// with its sum, then both are waited on once, and its kernel time is a level's record), and
/// puts the stream's setting back when dropped, on every return path.
struct Timing {
    stream: Stream,
    was: bool,
}

impl Timing {
    fn on(stream: Stream) -> Timing {
        let was = stream.timing();
        stream.set_timing(true);
        Timing { stream, was }
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        self.stream.set_timing(self.was);
    }
}

/// The marks of the vertices at `level` (the step's frontier) and of those it reaches, zeroed
/// first.
fn split_marks<'m>(
    dev: &Device,
    marks: &'m mut [DeviceBuffer<bool>; 2],
    level: u32,
) -> Result<(&'m DeviceBuffer<bool>, &'m mut DeviceBuffer<bool>)> {
    let [even, odd] = marks;
    let (front, mark) = if level.is_multiple_of(2) {
        (even, odd)
    } else {
        (odd, even)
    };
    dev.fill(mark, false)?;
    Ok((&*front, mark))
}

/// Two kernel times, `None` unless both are known.
fn add_ms(a: Option<f32>, b: Option<f32>) -> Option<f32> {
    Some(a? + b?)
}

/// The sum of `x` over the columns of the one-row `pick`, stored in `total` and read as one
/// `u64` (one synchronization of `stream`, which also finishes what was enqueued before), with
/// its kernel's time when the stream times launches.
fn read_sum(
    stream: &Stream,
    pick: &DeviceCsr<f32>,
    x: &DeviceBuffer<u64>,
    total: &mut DeviceBuffer<u64>,
) -> Result<(u64, Option<f32>)> {
    let launch = gather_sum::launch_with_async(stream, Schedule::BlockMapped, pick, x, total)?;
    let sum = total.download()?.first().copied().unwrap_or(0);
    Ok((sum, launch.wait()?.elapsed_ms))
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
