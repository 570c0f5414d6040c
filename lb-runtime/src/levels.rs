//! A traversal's levels in one launch of one block (BFS and SSSP): the small frontiers of a
//! graph with a long diameter (a road network's thousands of levels of a few dozen vertices)
//! without a launch, a wait and a read per level.
//!
//! A traversal driven from the host pays per level a launch, a wait for the GPU and a read of
//! the next frontier's length: about 20 µs of host and driver time on an H100, where a level of
//! a road network is a few dozen vertices and its kernel a few microseconds (docs/benchmarks.md,
//! fifty-first session: 47 801 levels of `road-1000000` took 11 µs of kernels and 32 µs of wall
//! time each). Osama's thesis (Ch. 3, "persistent kernel") describes the remedy: a kernel that
//! stays resident and loops over the work until the algorithm needs the host, here a single
//! block that runs level after level, synchronizing with a block barrier instead of a kernel
//! boundary, while the frontier fits it, and returns when the frontier empties or outgrows it.
//!
//! The kernels (`lb_bfs_levels_u32` / `_u64` and `lb_sssp_levels_u32` / `_u64`, by the graph's
//! offset width; parameters `offsets, cols, state, first, a, b, len, mark, max_levels, limit,
//! capacity, vertices, edges, slots, out`, then SSSP's `values, marks`): level `i` (from 0)
//! reads the frontier from `first` (`i = 0`), `a` (odd `i`) or `b` (even `i > 0`) and writes
//! the next one to `a` (even `i`) or `b` (odd `i`), with the mark `mark + i`. Each thread takes
//! entries `tid, tid + ntid, …` and walks each one's out-edges in order, making the claim of
//! the generated kernels' body (BFS: `atom.cas` of `depth[v]` from `u32::MAX` to the mark, as
//! `bfs_visit`; SSSP: an atomic minimum of `dist[v]`, then the stamp raised by `atom.max` on
//! `marks[v]`, as `sssp_relax`) and pushing the vertex it claimed at a slot from a counter in
//! shared memory. A barrier ends the level; the counter then holds the next frontier's length
//! for every thread. Three counters rotate, so that thread 0 zeroes the one for the level after
//! next while the others may still read the last one, with one barrier per level. The loop
//! stops before a frontier that is empty or longer than `limit`, or after `max_levels` levels;
//! thread 0 then writes the frontier's length (low 32 bits) and the levels run (high 32 bits)
//! to `out`, one u64 (the host reads 8 bytes, as for a schedule's step), and each thread adds
//! the out-degrees it walked to `edges[tid % slots]`.
//!
//! Memory safety does not rest on the caller's data: an entry that is not a vertex (`≥
//! vertices`) is skipped, and so is a column index that is not, and a push at or past
//! `capacity` is counted but not stored (the host then reports the overflow; the loop has
//! stopped, since `limit ≤ capacity`). `bar.sync` makes each level's global writes (the
//! claims, the pushes) visible to the whole block before the next level reads them; the
//! frontier and the distances are read with plain loads, since the kernel writes them, and the
//! graph with `ld.global.nc`.

use std::fmt::Write;
use std::sync::LazyLock;

use lb_ptx::plan::OffsetWidth;

use crate::buffer::DeviceBuffer;
use crate::builtin::{self, Shape};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::formats::DeviceCsr;
use crate::queue::DeviceQueue;
use crate::stream::Stream;

/// The module: one entry per offset width.
static PTX: LazyLock<String> = LazyLock::new(ptx);

/// What one launch of [`bfs_block_levels`] or [`sssp_block_levels`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockLevels {
    /// Levels run: the frontiers expanded.
    pub levels: usize,
    /// The length of the frontier the launch stopped before: 0 when the search is over, more
    /// than the limit when the frontier outgrew the block. It lies in the queue the last level
    /// wrote: `next` when `levels` is odd, `current` when it is even.
    pub len: u64,
    /// The kernel's time, on a GPU.
    pub elapsed_ms: Option<f32>,
}

/// The frontier one launch of [`bfs_block_levels`] or [`sssp_block_levels`] starts from, and
/// the two queues its levels alternate between.
pub struct LevelQueues<'a> {
    /// The queue holding the first frontier in its first `len` slots.
    pub current: &'a mut DeviceQueue,
    /// The other queue: the first level writes here.
    pub next: &'a mut DeviceQueue,
    /// The first frontier's length.
    pub len: u64,
}

/// How far one launch may go: at most `max_levels` levels, each over a frontier of at most
/// `limit` vertices, in one block of `threads` threads.
#[derive(Clone, Copy, Debug)]
pub struct LevelRun {
    /// Levels the launch runs at most.
    pub max_levels: u32,
    /// The longest frontier the block expands; the launch stops before a longer one.
    pub limit: u64,
    /// Threads of the block: a multiple of 32 from 32 to 1024.
    pub threads: u32,
}

/// Runs breadth-first search levels of `g` in one block, from the frontier of `q.len` vertices
/// at depth `level` in `q.current`, until a frontier is empty or longer than `run.limit`, or
/// `run.max_levels` levels have run: each level claims the unvisited out-neighbours of the
/// frontier (`depth` from `u32::MAX` to its level + 1, `bfs_visit`'s claim) and queues them as
/// the next frontier, in the queues alternately. Each thread adds the out-degrees of the
/// vertices it expanded to `edges[thread % edges.len()]`. Waits for the kernel and reads 8 bytes.
///
/// Errors ([`Error::Shape`], nothing launched): a graph that is not square or whose vertices do
/// not fit u32, `depth` not one entry per vertex, a first frontier longer than its queue, a
/// limit above either queue's capacity or `u32::MAX`, levels whose depths would reach
/// `u32::MAX`, a block not a multiple of 32 from 32 to 1024 threads, an empty `edges`;
/// [`Error::DeviceMismatch`] for buffers of another device. A frontier that outgrew the queues is
/// an [`Error::QueueOverflow`] after the launch: its vertices are claimed in `depth` but not all
/// stored. Queues of one slot per vertex never overflow: a vertex is claimed once per search.
pub fn bfs_block_levels(
    stream: &Stream,
    g: &DeviceCsr<f32>,
    (depth, level): (&mut DeviceBuffer<u32>, u32),
    q: LevelQueues<'_>,
    run: LevelRun,
    edges: &mut DeviceBuffer<u64>,
) -> Result<BlockLevels> {
    check(stream, g, &[depth.device()], depth.len(), &q, run, edges)?;
    let mark = level.checked_add(1).filter(|m| marks_fit(*m, run));
    let Some(mark) = mark else {
        return Err(Error::Shape(format!(
            "bfs_block_levels: {} levels from level {level} reach the mark of unreached \
             vertices, u32::MAX",
            run.max_levels
        )));
    };
    launch(
        stream,
        g,
        (Walk::Bfs, depth.device_addr(), &[]),
        mark,
        q,
        run,
        edges,
    )
}

/// [`bfs_block_levels`] for SSSP: each level relaxes the out-edges of the frontier, lowering
/// `dist[v]` to `dist[u] + w` (an atomic minimum) and, where it dropped, raising `marks[v]` to
/// the level's mark (`mark` for the first level, then one more each level), and queues `v` only
/// for the relaxation that raised it: `sssp_relax`'s steps, so a vertex is queued at most once
/// per level and queues of one slot per vertex never overflow. The same errors, for `dist` and
/// `marks` of one entry per vertex and a mark from 1 whose levels stay below `u32::MAX`.
pub fn sssp_block_levels(
    stream: &Stream,
    g: &DeviceCsr<f32>,
    (dist, marks, mark): (&mut DeviceBuffer<f32>, &mut DeviceBuffer<u32>, u32),
    q: LevelQueues<'_>,
    run: LevelRun,
    edges: &mut DeviceBuffer<u64>,
) -> Result<BlockLevels> {
    let n = dist.len();
    if marks.len() != n {
        return Err(Error::Shape(format!(
            "sssp_block_levels: `dist` has {n} entries and `marks` {}",
            marks.len()
        )));
    }
    let devices = [dist.device(), marks.device(), g.values.device()];
    check(stream, g, &devices, n, &q, run, edges)?;
    if mark == 0 || !marks_fit(mark, run) {
        return Err(Error::Shape(format!(
            "sssp_block_levels: {} levels from mark {mark} (marks run from 1 to below u32::MAX)",
            run.max_levels
        )));
    }
    let extra = [g.values.device_addr(), marks.device_addr()];
    launch(
        stream,
        g,
        (Walk::Sssp, dist.device_addr(), &extra),
        mark,
        q,
        run,
        edges,
    )
}

/// Whether the marks of `run.max_levels` levels from `mark` stay below `u32::MAX`.
fn marks_fit(mark: u32, run: LevelRun) -> bool {
    u64::from(mark) + u64::from(run.max_levels) <= u64::from(u32::MAX)
}

/// Launches `walk`'s kernel with the walk's state (`state`, then the parameters after the
/// common ones) after [`check`], waits for it and reads its outcome.
fn launch(
    stream: &Stream,
    g: &DeviceCsr<f32>,
    (walk, state, extra): (Walk, u64, &[u64]),
    mark: u32,
    q: LevelQueues<'_>,
    run: LevelRun,
    edges: &mut DeviceBuffer<u64>,
) -> Result<BlockLevels> {
    let dev = stream.device();
    let room = q.current.capacity().min(q.next.capacity()) as u64;
    let out = DeviceBuffer::<u64>::from_raw(dev.alloc_raw_on(stream, 8, true)?, 1);
    let width = match g.tiles.offsets.width() {
        OffsetWidth::U32 => "u32",
        OffsetWidth::U64 => "u64",
    };
    let entry = format!("{}_{width}", walk.stem().0);
    let mut params: Vec<u64> = [
        g.tiles.offsets.device_addr(),
        g.col_indices.device_addr(),
        state,
        q.current.items.device_addr(),
        q.next.items.device_addr(),
        q.current.items.device_addr(),
        q.len,
        u64::from(mark),
        u64::from(run.max_levels),
        run.limit,
        room,
        g.num_rows() as u64,
        edges.device_addr(),
        edges.len() as u64,
        out.device_addr(),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect();
    stream.order_after_device()?;
    // The parameters are the entry's, in order (4-byte ones in the low half of their slot).
    // Every buffer is on the stream's device (`check`): the offsets hold `vertices + 1` entries
    // of the entry's width, the column indices and values the graph's atoms, `state` (and
    // SSSP's marks) one entry a vertex, both queues at least `room` u32 slots (the kernel
    // stores a push only below `room`, and reads a frontier of `len ≤ current`'s capacity
    // first, then only of at most `limit ≤ room` entries), `edges` `slots ≥ 1` u64, and `out`
    // one u64, zeroed on this stream before the launch.
    let events = builtin::launch_shaped(
        stream,
        &PTX,
        &entry,
        Shape::OneBlock(run.threads),
        &mut params,
        true,
    )?;
    if let Some(cuda) = stream.cudarc() {
        cuda.synchronize()
            .map_err(|e| Error::cuda("running a traversal's levels in one block", e))?;
    }
    stream.order_device_after()?;
    let elapsed_ms = match &events {
        Some((start, stop)) => Some(
            start
                .elapsed_ms(stop)
                .map_err(|e| Error::cuda("reading the timing events", e))?,
        ),
        None => None,
    };
    let Some(&word) = dev.download(&out)?.first() else {
        return Err(Error::Shape(
            "the levels of a traversal came back short".into(),
        ));
    };
    let (len, levels) = (word & u64::from(u32::MAX), word >> 32);
    if len > room {
        // Pushes past the queues' room were counted but not stored: the frontier is incomplete.
        return Err(Error::QueueOverflow {
            param: "next".into(),
            needed: len,
            capacity: room,
        });
    }
    Ok(BlockLevels {
        levels: levels as usize,
        len,
        elapsed_ms,
    })
}

/// The checks both walks make before they launch: the graph square with u32 vertices, its state
/// (`per_vertex` entries) on `others`' devices, the queues and the run.
fn check(
    stream: &Stream,
    g: &DeviceCsr<f32>,
    others: &[&Device],
    per_vertex: usize,
    q: &LevelQueues<'_>,
    run: LevelRun,
    edges: &DeviceBuffer<u64>,
) -> Result<()> {
    let dev = stream.device();
    let ours = [
        g.col_indices.device(),
        q.current.device(),
        q.next.device(),
        edges.device(),
    ];
    if !ours.iter().chain(others).all(|d| d.same(dev)) || !g.tiles.offsets.device().same(dev) {
        return Err(Error::DeviceMismatch {
            what: "a buffer of a traversal's levels in one block".into(),
        });
    }
    let n = g.num_rows();
    let shape = |msg: String| Err(Error::Shape(format!("levels in one block: {msg}")));
    if n != g.num_cols() || u32::try_from(n).is_err() {
        return shape(format!(
            "a graph's adjacency matrix is square with at most u32::MAX vertices, this one is \
             {n} × {}",
            g.num_cols()
        ));
    }
    if per_vertex != n {
        return shape(format!(
            "the search's state has {per_vertex} entries for {n} vertices"
        ));
    }
    let room = q.current.capacity().min(q.next.capacity()) as u64;
    if q.len > q.current.capacity() as u64 {
        return shape(format!(
            "a frontier of {} vertices in a queue of {}",
            q.len,
            q.current.capacity()
        ));
    }
    if run.limit > room || run.limit > u64::from(u32::MAX) {
        return shape(format!(
            "a limit of {} vertices over queues of {room} (and at most u32::MAX)",
            run.limit
        ));
    }
    if !run.threads.is_multiple_of(32) || !(32..=1024).contains(&run.threads) {
        return shape(format!(
            "{} threads: a block has a multiple of 32 from 32 to 1024",
            run.threads
        ));
    }
    if edges.is_empty() {
        return shape("`edges` has no slots".into());
    }
    Ok(())
}

/// Which traversal a levels kernel runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// BFS: claims unvisited vertices in `depth`.
    Bfs,
    /// SSSP: lowers `dist` and stamps `marks`.
    Sssp,
}

impl Walk {
    /// The entry's name stem and its parameters after the common ones.
    fn stem(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Walk::Bfs => ("lb_bfs_levels", &[]),
            Walk::Sssp => ("lb_sssp_levels", &["values", "marks"]),
        }
    }

    /// Instructions per frontier vertex `u` (`%rd19`, a vertex), before its offsets are read:
    /// SSSP keeps the address of its distance in `%rd37`.
    fn per_vertex(self) -> &'static str {
        match self {
            Walk::Bfs => "",
            Walk::Sssp => "shl.b64 %rd37, %rd19, 2;\n    add.u64 %rd37, %rd2, %rd37;\n    ",
        }
    }

    /// Instructions per edge `e` (`%rd23`) to a vertex `v` (`%rd24`): fall through to push `v`
    /// (`%r7`) with the level's mark `%r9`, or branch to `L6` to skip it. BFS: `depth[v]`
    /// from `u32::MAX` to the mark by `atom.cas`, as `bfs_visit`. SSSP: `dist[v]` lowered to
    /// `dist[u] + w` by a `cas` loop on its bits with `min.f32` (the generated kernels' float
    /// atomic minimum), then, if it dropped, `marks[v]` raised to the mark, pushing only for the
    /// thread that raised it, as `sssp_relax`. `dist[u]` is read at each edge, as
    /// `sssp_relax`'s body reads it per atom: where another edge lowers it during the level, the
    /// rest of `u`'s edges relax from the lower value. Read once per vertex, SSSP on the small
    /// corpus's `road-1000` relaxed 2.2 times the edges (simulator, 68 229 against 30 717).
    fn claim(self) -> &'static str {
        match self {
            Walk::Bfs => {
                "shl.b64 %rd24, %rd24, 2;\n    add.u64 %rd24, %rd2, %rd24;\n    \
                 atom.global.cas.b32 %r8, [%rd24], %r14, %r9;\n    \
                 setp.ne.u32 %p1, %r8, %r14;\n    @%p1 bra L6;\n"
            }
            Walk::Sssp => {
                "shl.b64 %rd34, %rd23, 2;\n    add.u64 %rd34, %rd32, %rd34;\n    \
                 ld.global.nc.f32 %f1, [%rd34];\n    ld.global.f32 %f0, [%rd37];\n    \
                 add.f32 %f2, %f0, %f1;\n    \
                 shl.b64 %rd24, %rd24, 2;\n    add.u64 %rd35, %rd2, %rd24;\n    \
                 ld.global.b32 %r15, [%rd35];\n\
                 L12:\n    mov.b32 %f3, %r15;\n    min.f32 %f4, %f3, %f2;\n    \
                 mov.b32 %r16, %f4;\n    atom.global.cas.b32 %r17, [%rd35], %r15, %r16;\n    \
                 setp.ne.u32 %p1, %r17, %r15;\n    mov.u32 %r15, %r17;\n    @%p1 bra L12;\n    \
                 mov.b32 %f3, %r15;\n    setp.lt.f32 %p1, %f2, %f3;\n    @!%p1 bra L6;\n    \
                 add.u64 %rd36, %rd33, %rd24;\n    atom.global.max.u32 %r8, [%rd36], %r9;\n    \
                 setp.ge.u32 %p1, %r8, %r9;\n    @%p1 bra L6;\n"
            }
        }
    }
}

/// The parameters every levels kernel takes, in order; the two u32 ones are `mark` and
/// `max_levels`.
const COMMON: [&str; 15] = [
    "offsets",
    "cols",
    "state",
    "first",
    "a",
    "b",
    "len",
    "mark",
    "max_levels",
    "limit",
    "capacity",
    "vertices",
    "edges",
    "slots",
    "out",
];

/// The module's text: per walk and offset width, an entry. Registers: `%rd0`–`%rd12` the
/// common parameters but the two u32 ones (`%r0` the mark, `%r1` the most levels), `%rd32` and
/// `%rd33` SSSP's values and marks, `%rd13` the frontier read, `%rd14` the one written, `%rd15`
/// the counters' base, `%rd16` the out-degrees walked, `%rd17` the entry, `%rd18` the block's
/// threads, `%rd19`–`%rd37` vertices, edges and addresses; `%r2` the levels run, `%r3` the
/// thread, `%r5` this level's counter and `%r12` the one to zero, `%r9` the level's mark.
fn ptx() -> String {
    let mut out = String::from(".version 7.8\n.target sm_75\n.address_size 64\n");
    for walk in [Walk::Bfs, Walk::Sssp] {
        for (name, shift, load) in [
            (
                "u32",
                2,
                "ld.global.nc.u32 %r15, [%rd20];\n    ld.global.nc.u32 %r16, [%rd20+4];\n    \
                 cvt.u64.u32 %rd21, %r15;\n    cvt.u64.u32 %rd22, %r16;",
            ),
            (
                "u64",
                3,
                "ld.global.nc.u64 %rd21, [%rd20];\n    ld.global.nc.u64 %rd22, [%rd20+8];",
            ),
        ] {
            let (stem, extra) = walk.stem();
            let _ = write!(out, "\n.visible .entry {stem}_{name}(\n");
            let params: Vec<&str> = COMMON.iter().chain(extra).copied().collect();
            for (i, p) in params.iter().enumerate() {
                let ty = if matches!(*p, "mark" | "max_levels") {
                    "u32"
                } else {
                    "u64"
                };
                let sep = if i + 1 == params.len() { "" } else { "," };
                let _ = writeln!(out, "    .param .{ty} p_{p}{sep}");
            }
            // One block of up to 1 024 threads shares the register file's 64 K: at most 64
            // registers a thread, or the launch of a full block fails.
            out.push_str(
                ")\n.maxnreg 64\n{\n    .reg .pred %p<3>;\n    .reg .b32 %r<20>;\n    \
                 .reg .b64 %rd<40>;\n    .reg .f32 %f<6>;\n    \
                 .shared .align 4 .b8 lb_levels_count[12];\n",
            );
            for (i, p) in params.iter().enumerate() {
                let _ = match (i, *p) {
                    (_, "mark") => writeln!(out, "    ld.param.u32 %r0, [p_mark];"),
                    (_, "max_levels") => writeln!(out, "    ld.param.u32 %r1, [p_max_levels];"),
                    (0..7, _) => writeln!(out, "    ld.param.u64 %rd{i}, [p_{p}];"),
                    (7..15, _) => writeln!(out, "    ld.param.u64 %rd{}, [p_{p}];", i - 2),
                    _ => writeln!(out, "    ld.param.u64 %rd{}, [p_{p}];", i + 17),
                };
            }
            let _ = write!(out, "{}", body(walk, shift, load));
        }
    }
    out
}

/// One entry's instructions after its parameters are loaded (see [`ptx`] for the registers):
/// `shift` is log2 of the offsets' width and `load` reads a vertex's offsets at `%rd20` into
/// `%rd21` (first edge) and `%rd22` (end).
fn body(walk: Walk, shift: u32, load: &str) -> String {
    let (per_vertex, claim) = (walk.per_vertex(), walk.claim());
    format!(
        "    mov.u32 %r3, %tid.x;\n    mov.u32 %r4, %ntid.x;\n    cvt.u64.u32 %rd18, %r4;\n    \
         mov.u64 %rd15, lb_levels_count;\n    mov.u64 %rd16, 0;\n    mov.u32 %r2, 0;\n    \
         mov.u32 %r5, 0;\n    mov.u64 %rd13, %rd3;\n    mov.u64 %rd14, %rd4;\n    \
         mov.u32 %r14, 4294967295;\n    mov.u32 %r11, 0;\n    setp.ne.u32 %p0, %r3, 0;\n    \
         @%p0 bra L1;\n    st.shared.u32 [%rd15], %r11;\n    st.shared.u32 [%rd15+4], %r11;\n    \
         st.shared.u32 [%rd15+8], %r11;\n\
         L1:\n    bar.sync 0;\n\
         L2:\n    setp.eq.u64 %p1, %rd6, 0;\n    @%p1 bra L9;\n    \
         setp.gt.u64 %p1, %rd6, %rd7;\n    @%p1 bra L9;\n    \
         setp.ge.u32 %p1, %r2, %r1;\n    @%p1 bra L9;\n    \
         add.u32 %r12, %r5, 1;\n    setp.eq.u32 %p2, %r12, 3;\n    selp.u32 %r12, 0, %r12, %p2;\n    \
         @%p0 bra L3;\n    mul.wide.u32 %rd25, %r12, 4;\n    add.u64 %rd25, %rd15, %rd25;\n    \
         st.shared.u32 [%rd25], %r11;\n\
         L3:\n    mul.wide.u32 %rd26, %r5, 4;\n    add.u64 %rd26, %rd15, %rd26;\n    \
         add.u32 %r9, %r0, %r2;\n    cvt.u64.u32 %rd17, %r3;\n\
         L4:\n    setp.ge.u64 %p1, %rd17, %rd6;\n    @%p1 bra L8;\n    \
         shl.b64 %rd20, %rd17, 2;\n    add.u64 %rd20, %rd13, %rd20;\n    \
         ld.global.u32 %r6, [%rd20];\n    cvt.u64.u32 %rd19, %r6;\n    \
         setp.ge.u64 %p1, %rd19, %rd9;\n    @%p1 bra L7;\n    {per_vertex}\
         shl.b64 %rd20, %rd19, {shift};\n    add.u64 %rd20, %rd0, %rd20;\n    {load}\n    \
         sub.u64 %rd27, %rd22, %rd21;\n    add.u64 %rd16, %rd16, %rd27;\n    \
         mov.u64 %rd23, %rd21;\n\
         L5:\n    setp.ge.u64 %p1, %rd23, %rd22;\n    @%p1 bra L7;\n    \
         shl.b64 %rd20, %rd23, 2;\n    add.u64 %rd20, %rd1, %rd20;\n    \
         ld.global.nc.u32 %r7, [%rd20];\n    cvt.u64.u32 %rd24, %r7;\n    \
         setp.ge.u64 %p1, %rd24, %rd9;\n    @%p1 bra L6;\n    {claim}    \
         atom.shared.add.u32 %r10, [%rd26], 1;\n    cvt.u64.u32 %rd28, %r10;\n    \
         setp.ge.u64 %p1, %rd28, %rd8;\n    @%p1 bra L6;\n    \
         shl.b64 %rd28, %rd28, 2;\n    add.u64 %rd28, %rd14, %rd28;\n    \
         st.global.u32 [%rd28], %r7;\n\
         L6:\n    add.u64 %rd23, %rd23, 1;\n    bra L5;\n\
         L7:\n    add.u64 %rd17, %rd17, %rd18;\n    bra L4;\n\
         L8:\n    bar.sync 0;\n    ld.shared.u32 %r13, [%rd26];\n    cvt.u64.u32 %rd6, %r13;\n    \
         add.u32 %r2, %r2, 1;\n    mov.u32 %r5, %r12;\n    \
         mov.u64 %rd13, %rd14;\n    setp.eq.u64 %p1, %rd14, %rd4;\n    \
         selp.u64 %rd14, %rd5, %rd4, %p1;\n    bra L2;\n\
         L9:\n    setp.eq.u64 %p1, %rd16, 0;\n    @%p1 bra L10;\n    \
         cvt.u64.u32 %rd29, %r3;\n    rem.u64 %rd29, %rd29, %rd11;\n    shl.b64 %rd29, %rd29, 3;\n    \
         add.u64 %rd29, %rd10, %rd29;\n    atom.global.add.u64 %rd30, [%rd29], %rd16;\n\
         L10:\n    @%p0 bra L11;\n    cvt.u64.u32 %rd31, %r2;\n    shl.b64 %rd31, %rd31, 32;\n    \
         or.b64 %rd31, %rd31, %rd6;\n    st.global.u64 [%rd12], %rd31;\n\
         L11:\n    ret;\n}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::Csr;
    use rand::{Rng, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, VecDeque};

    /// Queue BFS on the host: each vertex's level, `u32::MAX` where unreached.
    fn bfs_reference(g: &Csr<f32>, source: usize) -> Vec<u32> {
        let mut depth = vec![u32::MAX; g.num_rows];
        depth[source] = 0;
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for &v in &g.col_indices[g.row_offsets[u]..g.row_offsets[u + 1]] {
                if depth[v as usize] == u32::MAX {
                    depth[v as usize] = depth[u] + 1;
                    queue.push_back(v as usize);
                }
            }
        }
        depth
    }

    /// Dijkstra on the host, in f64 (the test weights are small integers, so f32 sums are
    /// exact): each vertex's distance, infinite where unreached.
    fn dijkstra(g: &Csr<f32>, source: usize) -> Vec<f32> {
        let mut dist = vec![f64::INFINITY; g.num_rows];
        dist[source] = 0.0;
        let mut heap = BinaryHeap::from([Reverse((0u64, source))]);
        while let Some(Reverse((d, u))) = heap.pop() {
            if d as f64 > dist[u] {
                continue;
            }
            for e in g.row_offsets[u]..g.row_offsets[u + 1] {
                let v = g.col_indices[e] as usize;
                let nd = dist[u] + f64::from(g.values[e]);
                if nd < dist[v] {
                    dist[v] = nd;
                    heap.push(Reverse((nd as u64, v)));
                }
            }
        }
        dist.iter().map(|&d| d as f32).collect()
    }

    /// A random graph of `n` vertices, weights 0 to 5: empty rows, self-loops, repeated
    /// edges, and with `hub` one vertex linked to every other.
    fn random_graph(rng: &mut impl Rng, n: usize, mean: usize, hub: bool) -> Csr<f32> {
        let mut offsets = vec![0usize];
        let mut cols = Vec::new();
        for u in 0..n {
            let len = if hub && u == n / 3 {
                n
            } else if rng.random_range(0..5) == 0 {
                0
            } else {
                rng.random_range(1..=2 * mean)
            };
            for i in 0..len {
                cols.push(match rng.random_range(0..8) {
                    _ if hub && u == n / 3 => i as u32,
                    0 => u as u32,
                    1 => cols.last().copied().unwrap_or(0),
                    _ => rng.random_range(0..n) as u32,
                });
            }
            offsets.push(cols.len());
        }
        let values = (0..cols.len())
            .map(|_| rng.random_range(0..=5u32) as f32)
            .collect();
        Csr::new(n, n, offsets, cols, values).unwrap()
    }

    /// A path 0 → 1 → … → n − 1: a level per vertex.
    fn path(n: usize) -> Csr<f32> {
        let offsets = (0..=n).map(|u| u.min(n - 1)).collect();
        let cols = (1..n as u32).collect::<Vec<_>>();
        let values = vec![1.0; n - 1];
        Csr::new(n, n, offsets, cols, values).unwrap()
    }

    /// How a search by levels in one block went: the state downloaded (depths, or distances
    /// as bits), the edges walked, the iterations and the launches.
    struct Search {
        state: Vec<u32>,
        edges: u64,
        levels: usize,
        launches: usize,
    }

    /// Searches `g` from `source` (BFS, or SSSP with `sssp`) with launches of at most
    /// `max_levels` levels and frontiers of at most `limit` vertices; a frontier longer than
    /// that is expanded by a launch of one level without a limit (where a traversal's driver
    /// would run a schedule's step). Checks each launch's reason to stop.
    fn search(
        g: &Csr<f32>,
        (width, sssp): (OffsetWidth, bool),
        source: u32,
        (threads, limit, max_levels): (u32, u64, u32),
    ) -> Search {
        let dev = Device::simulator();
        let n = g.num_rows;
        let stream = dev.stream();
        let dg = DeviceCsr::upload_with_offsets(&dev, g, width).unwrap();
        let mut depth = dev.filled(n, u32::MAX).unwrap();
        dev.write_at(&mut depth, source as usize, &[0]).unwrap();
        let mut dist = dev.filled(n, f32::INFINITY).unwrap();
        dev.write_at(&mut dist, source as usize, &[0.0]).unwrap();
        let mut marks = dev.zeros::<u32>(n).unwrap();
        let mut current = DeviceQueue::new(&dev, n).unwrap();
        let mut next = DeviceQueue::new(&dev, n).unwrap();
        dev.write_at(&mut current.items, 0, &[source]).unwrap();
        let mut edges = dev.zeros::<u64>(7).unwrap();
        let (mut len, mut level, mut launches) = (1u64, 0u32, 0usize);
        while len > 0 {
            let run = if len > limit {
                LevelRun {
                    max_levels: 1,
                    limit: n as u64,
                    threads,
                }
            } else {
                // `u32::MAX` levels is unbounded: as many as the marks allow.
                LevelRun {
                    max_levels: max_levels.min(u32::MAX - 1 - level),
                    limit,
                    threads,
                }
            };
            let q = LevelQueues {
                current: &mut current,
                next: &mut next,
                len,
            };
            let r = if sssp {
                let state = (&mut dist, &mut marks, level + 1);
                sssp_block_levels(&stream, &dg, state, q, run, &mut edges)
            } else {
                bfs_block_levels(&stream, &dg, (&mut depth, level), q, run, &mut edges)
            };
            let r = r.unwrap();
            launches += 1;
            assert!((1..=run.max_levels as usize).contains(&r.levels), "{r:?}");
            assert!(
                r.len == 0 || r.len > run.limit || r.levels == run.max_levels as usize,
                "stopped after {} levels before a frontier of {}",
                r.levels,
                r.len
            );
            if r.levels % 2 == 1 {
                std::mem::swap(&mut current, &mut next);
            }
            len = r.len;
            level += r.levels as u32;
        }
        let state = if sssp {
            // A vertex is stamped by a level that lowered its distance: every reached vertex
            // but the source, none other, and no stamp after the last level.
            let (dist, marks) = (dev.download(&dist).unwrap(), dev.download(&marks).unwrap());
            for (v, (&d, &m)) in dist.iter().zip(&marks).enumerate() {
                let lowered = d.is_finite() && v != source as usize;
                assert_eq!(m > 0, lowered, "vertex {v}: distance {d}, stamp {m}");
                assert!(m <= level, "vertex {v}: stamp {m} after {level} levels");
            }
            dist.iter().map(|d| d.to_bits()).collect()
        } else {
            dev.download(&depth).unwrap()
        };
        Search {
            state,
            edges: dev.download(&edges).unwrap().iter().sum(),
            levels: level as usize,
            launches,
        }
    }

    /// The out-degrees of the vertices `depth` reached: the edges a BFS walks.
    fn reached_edges(g: &Csr<f32>, depth: &[u32]) -> u64 {
        (0..g.num_rows)
            .filter(|&u| depth[u] != u32::MAX)
            .map(|u| (g.row_offsets[u + 1] - g.row_offsets[u]) as u64)
            .sum()
    }

    /// Fresh random graphs (empty rows, self-loops, repeated edges, zero weights, a hub), both
    /// offset widths, blocks of one and two warps (frontiers longer than the block), limits
    /// from one vertex to every vertex, launches of one level to unbounded: BFS's levels and
    /// edges are the queue BFS's, SSSP's distances Dijkstra's, walking every reached edge at
    /// least once.
    #[test]
    fn levels_in_one_block_match_the_references() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x1e7e15);
        for round in 0..10 {
            let n = rng.random_range(1..300);
            let g = random_graph(&mut rng, n, 3, round % 3 == 2);
            let source = rng.random_range(0..n) as u32;
            let depth = bfs_reference(&g, source as usize);
            let dist: Vec<u32> = dijkstra(&g, source as usize)
                .iter()
                .map(|d| d.to_bits())
                .collect();
            let width = if round % 2 == 0 {
                OffsetWidth::U32
            } else {
                OffsetWidth::U64
            };
            for shape in [(32, 1, u32::MAX), (64, 40, 3), (32, n as u64, u32::MAX)] {
                let got = search(&g, (width, false), source, shape);
                assert_eq!(got.state, depth, "bfs, round {round}, {shape:?}");
                assert_eq!(got.edges, reached_edges(&g, &depth), "round {round}");
                let deepest = depth.iter().filter(|&&d| d != u32::MAX).max().copied();
                assert_eq!(got.levels, deepest.unwrap_or(0) as usize + 1);
                let got = search(&g, (width, true), source, shape);
                assert_eq!(got.state, dist, "sssp, round {round}, {shape:?}");
                assert!(got.edges >= reached_edges(&g, &depth), "round {round}");
            }
        }
    }

    /// A path of 500 vertices is 500 levels of one vertex: one launch runs them all.
    #[test]
    fn one_launch_runs_a_long_diameter() {
        let g = path(500);
        for sssp in [false, true] {
            let got = search(&g, (OffsetWidth::U32, sssp), 0, (32, 64, u32::MAX));
            let want: Vec<u32> = match sssp {
                false => (0..500).collect(),
                true => (0..500).map(|d| (d as f32).to_bits()).collect(),
            };
            assert_eq!(got.state, want);
            assert_eq!((got.launches, got.levels, got.edges), (1, 500, 499));
        }
    }

    /// Arguments that do not fit are errors before anything runs.
    #[test]
    fn bad_arguments_are_errors() {
        let dev = Device::simulator();
        let stream = dev.stream();
        let g = DeviceCsr::upload(&dev, &path(10)).unwrap();
        let mut depth = dev.filled(10, u32::MAX).unwrap();
        let mut short = dev.filled(9, u32::MAX).unwrap();
        let mut dist = dev.filled(10, f32::INFINITY).unwrap();
        let mut a = DeviceQueue::new(&dev, 10).unwrap();
        let mut b = DeviceQueue::new(&dev, 4).unwrap();
        let mut edges = dev.zeros::<u64>(1).unwrap();
        let mut none = dev.zeros::<u64>(0).unwrap();
        let run = |limit: u64, threads: u32| LevelRun {
            max_levels: 1,
            limit,
            threads,
        };
        let shape = |r: Result<BlockLevels>| matches!(r, Err(Error::Shape(_)));
        let mut bfs = |state: (&mut DeviceBuffer<u32>, u32),
                       len: u64,
                       run: LevelRun,
                       edges: &mut DeviceBuffer<u64>| {
            let q = LevelQueues {
                current: &mut a,
                next: &mut b,
                len,
            };
            bfs_block_levels(&stream, &g, state, q, run, edges)
        };
        assert!(shape(bfs((&mut short, 0), 1, run(4, 32), &mut edges)));
        assert!(shape(bfs((&mut depth, 0), 11, run(4, 32), &mut edges)));
        assert!(shape(bfs((&mut depth, 0), 1, run(5, 32), &mut edges)));
        assert!(shape(bfs((&mut depth, 0), 1, run(4, 48), &mut edges)));
        assert!(shape(bfs((&mut depth, 0), 1, run(4, 2048), &mut edges)));
        assert!(shape(bfs((&mut depth, 0), 1, run(4, 32), &mut none)));
        assert!(shape(bfs(
            (&mut depth, u32::MAX - 1),
            1,
            run(4, 32),
            &mut edges
        )));
        let mut sssp = |mark: u32, marks: &mut DeviceBuffer<u32>| {
            let q = LevelQueues {
                current: &mut a,
                next: &mut b,
                len: 1,
            };
            let state = (&mut dist, marks, mark);
            sssp_block_levels(&stream, &g, state, q, run(4, 32), &mut edges)
        };
        assert!(shape(sssp(0, &mut depth)));
        assert!(shape(sssp(u32::MAX, &mut depth)));
        assert!(shape(sssp(1, &mut short)));
        let rect = Csr::new(2, 3, vec![0, 1, 1], vec![2], vec![1.0]).unwrap();
        let rect = DeviceCsr::upload(&dev, &rect).unwrap();
        let q = LevelQueues {
            current: &mut a,
            next: &mut b,
            len: 1,
        };
        let r = bfs_block_levels(&stream, &rect, (&mut depth, 0), q, run(1, 32), &mut edges);
        assert!(shape(r));
    }

    /// ptxas (when `LB_PTXAS` names it) accepts the module for sm_75, sm_80 and sm_90, unspilled.
    #[test]
    fn the_module_assembles() {
        lb_ptx::ptxas::assert_assembles("the levels-in-one-block kernels", &PTX);
    }
}
