//! What `merge_path`, `nonzero_split` and the searches (`direct_search`, `local_warp_search`,
//! `block_search`) share: their plans (one per index width), the kernel
//! frame, the per-thread walk over an even share of the work, the block-wide reduction of the
//! threads' carry-outs and the deterministic fix-up kernel; with a frontier, the scan of its tile
//! sizes ([`frontier_scan`]).
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.3 (work-oriented scheduling: "each thread is
//! assigned a contiguous range of work items to process in a sequential loop", static and exact)
//! and Algorithm 3 (complete tiles reduced in registers and stored, the partial tile at the end of
//! a range carried out, then a fix-up step), after Merrill & Garland's merge-based SpMV, whose
//! blocks reduce their threads' carries before anything leaves the block. The schedules differ
//! only in how a thread finds the two ends of its range (its `share` function); both describe a range by merge-path
//! coordinates `(i, j)`: `i` tiles finished before it, `j` atoms consumed before it.
//!
//! The walk from `(i0, j0)` to `(i1, j1)` consumes atom `j` while `j < end(i)`, otherwise finishes
//! tile `i` (§4.4.2.1: "complete" tiles, then the "partial" tile). Every tile is finished by
//! exactly one thread, empty tiles included. Shares are contiguous, so a thread's partial tile
//! is the next thread's first tile.
//!
//! Reduction, in three fixed-order levels and without atomic arithmetic on values, so equal
//! inputs give bitwise equal outputs:
//! 1. Thread: atoms left to right in registers. Every tile but the thread's first finished one
//!    is complete and stored with a plain store; the first waits for its carry-in. Where the
//!    share stages the block's tile ends in shared memory (`merge_path`), the stores are
//!    gathered there and made by the whole block at the end instead (`Gathered`).
//! 2. Block (`block_carry`): a segmented inclusive scan of the threads' partial values, with
//!    shuffles inside warps and shared memory across them (a new segment at each thread that
//!    finished a tile). A thread completes its
//!    first tile with the scan of the thread before it. The block's last scan value is its one
//!    carry-out (key: the partial tile's position × lanes + lane); the first tile finished in
//!    the block, which lacks the carries of earlier blocks, goes to the block's `head` slot
//!    instead of the output (except in a lane's first block, which has no earlier blocks).
//! 3. Grid ([`fixup`]): for each run of equal keys among the slots, the scans of its carries,
//!    then the head of the block after the run (the one that finished the tile), stored to
//!    the output. On a grid of at most `block` blocks the main kernel's last block to finish
//!    does it; on a larger one a fix-up kernel of one thread per slot does (a segmented scan in
//!    fix-up blocks of `block` slots, then its last block finishes the runs that cross fix-up
//!    blocks, walking back one fix-up block per step). A tile spanning `n` main blocks costs
//!    `log2(block)` scan steps and `⌈n / block⌉` serial steps.
//!
//! The output need not be zeroed, and every element is stored exactly once (twice for a tile
//! repeated in a frontier, see [`frontier_scan`]).
//!
//! Lanes: each lane is an independent copy of the decomposition, `blocks_per_lane` consecutive
//! blocks each (the grid is `blocks_per_lane × lanes`, see [`Grid::CoverWork`]), so a block never
//! mixes lanes and runs of keys never join across lanes.

pub mod fixup;
pub mod frontier_scan;

use std::borrow::Cow;

use crate::body::{Body, IndexRole, Reduce, Ty};
use crate::builder::{KernelBuilder, LoopScope};
use crate::codegen::{
    emit_body, load_offset, load_offset_as, offset_addr, ptx_type, reduce_combine, reduce_identity,
    reduce_op, AtomContext, KernelParams,
};
use crate::ir::{
    Address, BinOp, Cmp, Kernel, Label, Op, Operand, Reg, Rounding, ShflMode, Space, Special, Type,
};
use crate::plan::{FrontierGrid, Grid, KernelPlan, OffsetWidth, Plan, Temp, TempCount, TempRole};
use crate::primitives::walker::{KeptAtoms, Walker};
use crate::primitives::warp::shfl;
use crate::primitives::Layout;
use crate::schedules::common_temps;
use crate::{GenError, IndexWidth, Options};

/// The share of a thread when `Options::items_per_thread` is left at 1 (merge path: tiles plus
/// atoms; nonzero split: atoms), the same on every target for now. Seven is what Merrill &
/// Garland's CUB policy uses for 4-byte values: it amortizes a thread's two searches and the
/// block's carry scan over several items while the walk and its registers stay short.
pub const DEFAULT_ITEMS_PER_THREAD: u32 = 7;

/// The largest `tiles + atoms` the 32-bit variant handles: every index it keeps in 32 bits
/// (diagonals, tiles, atoms, tile offsets) is at most that sum.
pub const U32_INDEX_LIMIT: u64 = u32::MAX as u64;

/// Per block of the main kernel: the key of its carry-out (or [`NO_CARRY`]), the carry-out, and
/// the partial value of the first tile it finished ("head").
const CARRY_KEYS: &str = "carry_keys";
const CARRY_VALUES: &str = "carry_values";
const CARRY_HEADS: &str = "carry_heads";
/// The key of a carry slot that carries nothing.
const NO_CARRY: i64 = -1;
/// The block's segmented scan of its threads' partial values, and its segment flags.
const SCAN_VALUES: &str = "lb_scan_values";
const SCAN_FLAGS: &str = "lb_scan_flags";
/// Each warp's last scan value and flag, then the scan of those over the block's warps.
const WARP_VALUES: &str = "lb_scan_warp_values";
const WARP_FLAGS: &str = "lb_scan_warp_flags";

/// `Options::items_per_thread`, or [`DEFAULT_ITEMS_PER_THREAD`] when it is 1 (unspecified).
pub fn items_per_thread(opts: &Options) -> u32 {
    if opts.items_per_thread <= 1 {
        DEFAULT_ITEMS_PER_THREAD
    } else {
        opts.items_per_thread
    }
}

/// The index width a plan was built for, from its `index_limit`.
pub fn plan_width(plan: &Plan) -> Type {
    if plan.index_limit.is_some() {
        Type::U32
    } else {
        Type::U64
    }
}

/// The fix-up's grid: one thread per block of the main kernel, whose grid is `main`
/// ([`Grid::CoverWork`]). Counting `per_thread × block` work items per thread gives
/// `⌈work / (per_thread × block²)⌉ ≥ ⌈blocks / block⌉` blocks per lane, over the same work.
///
/// Over a strided frontier grid the fix-up keeps the bound's blocks ([`Grid::uncapped`]): the
/// main kernel's blocks stride over up to that many carry slots, and the fix-up's own grid, one
/// thread per slot, is `block` times smaller.
pub fn fixup_grid(main: Grid, block: u32) -> Grid {
    match main.uncapped() {
        Grid::CoverWork {
            per_thread,
            count_tiles,
            frontier,
        } => Grid::CoverWork {
            per_thread: per_thread.saturating_mul(block),
            count_tiles,
            frontier,
        },
        other => other,
    }
}

/// One plan per index width `opts.index` asks for, 32-bit first, for the schedule named
/// `schedule` (the plans' name and the prefix of their entries). `count_tiles`: whether a tile
/// counts as a work item (merge path) or only atoms do (nonzero split).
///
/// Over a frontier their grid is [`FrontierGrid::Bounded`].
pub fn plans(
    body: &Body,
    opts: &Options,
    schedule: &'static str,
    count_tiles: bool,
) -> Result<Vec<Plan>, GenError> {
    plans_of(body, opts, schedule, count_tiles, false)
}

/// [`plans`] for a schedule whose main kernel (such as [`main_kernel`]) runs the rounds of
/// [`Frame::stride`] and finds each virtual block's share from [`Frame::cta`] and [`Frame::tid`]
/// alone, with no temporary counted per block but the carries: over a frontier its blocks
/// stride over the frontier's shares ([`FrontierGrid::Strided`]), a reducing body's carry slots
/// sized for the grid's bound and taken one per virtual block.
pub fn strided_plans(
    body: &Body,
    opts: &Options,
    schedule: &'static str,
    count_tiles: bool,
) -> Result<Vec<Plan>, GenError> {
    plans_of(body, opts, schedule, count_tiles, true)
}

fn plans_of(
    body: &Body,
    opts: &Options,
    schedule: &'static str,
    count_tiles: bool,
    strides: bool,
) -> Result<Vec<Plan>, GenError> {
    let per_thread = items_per_thread(opts);
    // (index arithmetic, offsets): a tile set small enough for 32-bit offsets is admitted by
    // the 32-bit index plan (the same bound), so `auto` needs no 64-bit-index plan reading
    // 32-bit offsets; a forced 64-bit index does, for the tile sets stored with 32-bit offsets.
    let widths: &[(IndexWidth, OffsetWidth)] = match opts.index {
        IndexWidth::U32 => &[(IndexWidth::U32, OffsetWidth::U32)],
        IndexWidth::U64 => &[
            (IndexWidth::U64, OffsetWidth::U32),
            (IndexWidth::U64, OffsetWidth::U64),
        ],
        IndexWidth::Auto => &[
            (IndexWidth::U32, OffsetWidth::U32),
            (IndexWidth::U64, OffsetWidth::U64),
        ],
    };
    let frontier = match opts.tiles {
        None => FrontierGrid::No,
        Some(_) if strides => FrontierGrid::Strided,
        Some(_) => FrontierGrid::Bounded,
    };
    let grid = Grid::CoverWork {
        per_thread,
        count_tiles,
        frontier,
    };
    let mut temps = common_temps(opts);
    if let Some((ty, _)) = body.reduce {
        // One slot per block of the main kernel: `PerBlock` follows the plan's first kernel,
        // which always has the main kernel's grid.
        for (name, elem_bytes) in [
            (CARRY_KEYS, 8),
            (CARRY_VALUES, ty.size()),
            (CARRY_HEADS, ty.size()),
        ] {
            temps.push(Temp {
                name: Cow::Borrowed(name),
                elem_bytes,
                count: TempCount::PerBlock { extra: 0 },
                zero: false,
                role: TempRole::Scratch,
            });
        }
        temps.extend(fixup::temps());
    }
    Ok(widths
        .iter()
        .map(|&(w, offsets)| {
            let (suffix, index_limit) = match (w, offsets) {
                (IndexWidth::U32, _) => ("u32", Some(U32_INDEX_LIMIT)),
                (_, OffsetWidth::U32) => ("u64_o32", None),
                _ => ("u64", None),
            };
            let mut temps = temps.clone();
            if opts.tiles.is_some() {
                temps.extend(frontier_scan::temps(offsets));
            }
            let main = format!("{}_{schedule}_{suffix}", body.name);
            let mut kernels = Vec::new();
            if opts.tiles.is_some() {
                kernels.extend(frontier_scan::kernel_plans(&main, opts.block, grid));
            }
            kernels.push(KernelPlan {
                entry: Cow::Owned(main.clone()),
                block: opts.block,
                grid,
                dynamic_shared: 0,
                min_tile_atoms: None,
                min_grid: None,
                lanes: None,
                track: 0,
            });
            if body.reduce.is_some() {
                kernels.push(KernelPlan {
                    entry: Cow::Owned(format!("{main}_fixup")),
                    block: opts.block,
                    grid: fixup_grid(grid, opts.block),
                    dynamic_shared: 0,
                    min_tile_atoms: None,
                    min_grid: Some(fixup::kernels_from(opts.block)),
                    lanes: None,
                    track: 0,
                });
            }
            Plan {
                schedule: Cow::Borrowed(schedule),
                kernels: Cow::Owned(kernels),
                temps: Cow::Owned(temps),
                index_limit,
                select: None,
                offsets,
            }
        })
        .collect())
}

/// What a kernel of a work-oriented plan knows before it looks for its share. All u64.
pub struct Frame {
    pub w: Type,
    pub layout: Layout,
    pub params: KernelParams,
    /// The tile offsets the decomposition runs over: `row_offsets`, or with a frontier the scan
    /// of the frontier's tile sizes (`tiles + 1` entries either way).
    pub offsets: Reg,
    /// Whether the tile set is a frontier.
    pub frontier: bool,
    /// `offsets[tiles]`.
    pub atoms: Reg,
    /// `tiles + atoms` or `atoms`.
    pub work: Reg,
    /// Work items per thread: an immediate, or with a frontier a register (see `frame`).
    pub per_thread: Operand,
    /// `items_per_thread × block`: the most work items a block takes without a frontier.
    pub capacity: i64,
    pub block: i64,
    /// Blocks per lane of the main kernel's grid, when a lane or a frontier needs it.
    pub blocks: Option<Reg>,
    /// The block's index inside its lane's copy of the decomposition.
    pub cta: Reg,
    /// With lanes, the block's carry slot `lane × blocks + cta`: a lane's slots are consecutive,
    /// the order the fix-up walks them in. Without lanes the slot is the block index
    /// (`carry_slot`).
    pub slot: Option<Reg>,
    pub tid: Reg,
    /// The lane, with `Options::lanes`.
    pub lane: Option<Reg>,
    /// The type of the body's values when the main kernel may stage them for the block's atoms
    /// ([`may_stage_values`]): a share that stages its tile ends may then reserve room for the
    /// values in the same shared array ([`Share::values`]).
    pub stageable: Option<Ty>,
    /// Whether staged values may start below the block's first atom ([`STAGING_ALIGN`]): the
    /// body is pure and unchecked, so the staging pass may evaluate it at atoms that are not
    /// the block's and throw their values away.
    pub aligns_staging: bool,
    /// With [`FrontierGrid::Strided`], the rounds the main kernel's blocks stride over; `cta`
    /// and `lane` are set at the head of each ([`BlockStride::begin`]).
    pub stride: Option<BlockStride>,
}

/// A thread's range in merge-path coordinates (registers of width `Frame::w`), and where the walk
/// reads tile end offsets.
pub struct Share {
    pub i0: Reg,
    pub j0: Reg,
    pub i1: Reg,
    pub j1: Reg,
    pub ends: TileEnds,
    /// The block's atoms `first..end` (u64), when the schedule knows them without a frontier:
    /// then [`main_kernel`] may evaluate the body for them in one coalesced pass.
    pub block_atoms: Option<(Reg, Reg)>,
    /// Where [`main_kernel`] stages the block's values, when the share reserved room for them
    /// in the array of its tile ends ([`Frame::stageable`]).
    pub values: Option<Reg>,
}

/// Where `end(i) = offsets[i + 1]` is read during the walk.
#[derive(Clone, Copy)]
pub enum TileEnds {
    /// From global memory.
    Global,
    /// From a shared array of width `Frame::w` holding the ends of the block's `count` (u64)
    /// tiles `first..`. After the walk has read a tile's end, only the thread that finished the
    /// tile touches its slot again, so [`main_kernel`] may gather the block's outputs there
    /// (`Gathered`).
    Shared { base: Reg, first: Reg, count: Reg },
    /// From such a shared array when `fits` (a predicate, uniform over the block), from global
    /// memory otherwise: a block's tiles staged when there was room.
    Staged { base: Reg, first: Reg, fits: Reg },
}

/// The shared array [`from_next_thread`] passes warp-boundary values through.
const NEXT_WARP: &str = "lb_next_warp_first";

/// Shared bytes [`from_next_thread`] declares for a block of `block` threads.
pub fn next_thread_bytes(block: u32) -> u64 {
    8 * (u64::from(block / 32) + 1)
}

/// The value `x` (width `Frame::w`) of the block's next thread, and in the block's last thread
/// what `last` computes (thread 0 runs it). A thread's share ends where the next one's begins, so its end comes from the
/// neighbour's search instead of a second search of its own (the merge-path SpMV of Merrill and
/// Garland searches one diagonal per thread the same way). A shuffle inside the warp, shared
/// memory across warps; one barrier, which every thread of the block must reach.
pub fn from_next_thread(
    b: &mut KernelBuilder,
    f: &Frame,
    x: Reg,
    last: &mut dyn FnMut(&mut KernelBuilder) -> Reg,
) -> Reg {
    let w = f.w;
    let warps = (f.block / 32) as u32;
    b.shared(NEXT_WARP, 8, (warps + 1) * 8);
    let slots = b.mov(Type::U64, Operand::Symbol(NEXT_WARP.into()));
    let lane = b.bin(BinOp::And, Type::B64, f.tid, Operand::Imm(31));
    let warp = b.bin(BinOp::Shr, Type::U64, f.tid, Operand::Imm(5));
    let down = shfl(b, ShflMode::Down, x, w, Operand::Imm(1));
    let lead = b.setp(Cmp::Eq, Type::U64, lane, Operand::Imm(0));
    let mine = b.elem_addr(slots, warp, 8);
    let wide = widen(b, w, x);
    let store = |b: &mut KernelBuilder, pred: Reg, addr: Reg, v: Reg| {
        b.st_if(pred, Space::Shared, Type::U64, addr, v);
    };
    store(b, lead, mine, wide);
    // Thread 0 finds the block's end (one search, where a search is needed) for the last thread.
    let first = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(0));
    let scope = b.if_begin(first, false);
    let end_slot = b.bin(
        BinOp::Add,
        Type::U64,
        slots,
        Operand::Imm(i64::from(warps) * 8),
    );
    let value = last(b);
    let value = widen(b, w, value);
    b.st(Space::Shared, Type::U64, end_slot, value);
    b.if_end(scope);
    b.emit(Op::BarSync);
    let next = b.bin(BinOp::Add, Type::U64, mine, Operand::Imm(8));
    let across = b.ld(Space::Shared, Type::U64, next);
    let across = narrow(b, w, across);
    let tail = b.setp(Cmp::Eq, Type::U64, lane, Operand::Imm(31));
    b.selp(w, across, down, tail)
}

/// The block copies the end offsets of tiles `first .. first + count` (u64) into the shared
/// array at `base`, width `Frame::w`, thread `t` taking entries `t, t + block, ..` (coalesced).
/// The caller places the barrier.
pub fn stage_tile_ends(b: &mut KernelBuilder, f: &Frame, base: Reg, (first, count): (Reg, Reg)) {
    let w = f.w;
    let k = b.mov(Type::U64, f.tid);
    let stage = b.loop_begin();
    let staged = b.setp(Cmp::Ge, Type::U64, k, count);
    b.break_if(&stage, staged, false);
    let tile = b.bin(BinOp::Add, Type::U64, first, k);
    let end = global_end_as(b, f, w, tile);
    let dst = b.elem_addr(base, k, w.size());
    b.st(Space::Shared, w, dst, end);
    b.bin_to(BinOp::Add, Type::U64, k, k, Operand::Imm(f.block));
    b.loop_end(stage);
}

/// Converts a u64 register to width `w` (a no-op for U64).
pub fn narrow(b: &mut KernelBuilder, w: Type, r: Reg) -> Reg {
    if w == Type::U64 {
        r
    } else {
        b.cvt(Rounding::None, Type::U32, Type::U64, r)
    }
}

/// Converts a register of width `w` to u64 (a no-op for U64).
pub fn widen(b: &mut KernelBuilder, w: Type, r: Reg) -> Reg {
    if w == Type::U64 {
        r
    } else {
        b.cvt(Rounding::None, Type::U64, Type::U32, r)
    }
}

/// `offsets[i]` (u64) for u64 `i`, at the frame's offset width.
pub fn global_offset_u64(b: &mut KernelBuilder, frame: &Frame, i: Reg) -> Reg {
    let width = frame.layout.offsets;
    let addr = offset_addr(b, width, frame.offsets, i);
    load_offset(b, width, addr)
}

/// `offsets[i + 1]` in width `ty` for u64 `i`, at the frame's offset width.
pub fn global_end_as(b: &mut KernelBuilder, frame: &Frame, ty: Type, i: Reg) -> Reg {
    let width = frame.layout.offsets;
    let addr = offset_addr(b, width, frame.offsets, i);
    let next = b.bin(
        BinOp::Add,
        Type::U64,
        addr,
        Operand::Imm(width.bytes().into()),
    );
    load_offset_as(b, width, ty, next)
}

/// `offsets[i + 1]` (u64) for u64 `i`.
pub fn global_end_u64(b: &mut KernelBuilder, frame: &Frame, i: Reg) -> Reg {
    global_end_as(b, frame, Type::U64, i)
}

/// `offsets[i + 1]` in width `w`, for `i` of width `w`. With 32-bit offsets and index
/// arithmetic, `i + 1` stays in 32 bits (it is at most the tile count) and is widened only to
/// form the address (`mul.wide.u32`).
pub fn global_end(b: &mut KernelBuilder, frame: &Frame, i: Reg) -> Reg {
    if frame.w == Type::U32 && frame.layout.offsets == OffsetWidth::U32 {
        let next = b.bin(BinOp::Add, Type::U32, i, Operand::Imm(1));
        let bytes = b.bin(BinOp::MulWide, Type::U32, next, Operand::Imm(4));
        let addr = b.bin(BinOp::Add, Type::U64, frame.offsets, bytes);
        return load_offset_as(b, OffsetWidth::U32, Type::U32, addr);
    }
    let i64_ = widen(b, frame.w, i);
    global_end_as(b, frame, frame.w, i64_)
}

/// `dst = pred ? a : b` into an existing register.
pub fn select_to(b: &mut KernelBuilder, ty: Type, dst: Reg, a: Reg, c: Reg, pred: Reg) {
    b.emit(Op::Selp {
        ty,
        dst,
        a: a.into(),
        b: c.into(),
        pred,
    });
}

/// Declares the params and computes the [`Frame`] at kernel entry.
///
/// With a frontier the host sizes the grid before the frontier's atoms are known, for
/// `min(nnz, frontier length × longest tile)` atoms ([`Grid::CoverWork`]), and the plan's first
/// kernel stores the blocks per lane in `main_blocks`, which every kernel here reads. A frontier
/// may hold more atoms than that (repeated tiles), so each thread takes
/// `max(items_per_thread, ⌈work / (blocks × block)⌉)` items: the grid always covers the work, and
/// surplus threads get empty shares.
pub(crate) fn frame(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
) -> Result<Frame, GenError> {
    let params = KernelParams::declare(b, body, plan)?;
    let layout = Layout::new(b, body, opts, &params)?;
    let frontier = opts.tiles.is_some();
    let strided = plan.kernels.iter().any(|k| {
        matches!(
            k.grid,
            Grid::CoverWork {
                frontier: FrontierGrid::Strided,
                ..
            }
        )
    });
    let offsets = if frontier {
        params.temps[temp_index(plan, frontier_scan::TILE_OFFSETS)?]
    } else {
        layout.csr.row_offsets
    };
    let last = offset_addr(b, layout.offsets, offsets, layout.tiles);
    let atoms = load_offset(b, layout.offsets, last);
    let with_tiles = |b: &mut KernelBuilder, atoms: Reg| {
        if count_tiles {
            b.bin(BinOp::Add, Type::U64, layout.tiles, atoms)
        } else {
            atoms
        }
    };
    let work = with_tiles(b, atoms);
    let items = i64::from(items_per_thread(opts));
    let block = i64::from(opts.block);
    let capacity = items * block;
    let blocks = if strided {
        Some(strided_blocks(
            b,
            body,
            &layout,
            work,
            (capacity, count_tiles),
        ))
    } else if frontier {
        let slot = params.temps[temp_index(plan, frontier_scan::MAIN_BLOCKS)?];
        Some(b.ld(Space::Global, Type::U64, slot))
    } else {
        layout
            .lanes
            .is_some()
            .then(|| blocks_per_lane(b, work, capacity))
    };
    let grows = frontier && (!strided || body.reduce.is_some());
    let per_thread = if let Some(blocks) = blocks.filter(|_| grows) {
        let threads = b.bin(BinOp::Mul, Type::U64, blocks, Operand::Imm(block));
        let up = b.bin(BinOp::Add, Type::U64, work, threads);
        let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
        let share = b.bin(BinOp::Div, Type::U64, up, threads);
        let share = b.bin(BinOp::Max, Type::U64, share, Operand::Imm(items));
        Operand::Reg(share)
    } else {
        Operand::Imm(items)
    };
    let ctaid = b.special(Special::CtaidX);
    let ctaid = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let tid = b.special(Special::TidX);
    let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    if strided {
        return Ok(strided_frame(
            b,
            (layout, params),
            (offsets, atoms, work),
            (blocks, per_thread, body.reduce.is_some()),
            plan,
            opts,
        ));
    }
    let (cta, lane, slot) = match (layout.lanes, blocks) {
        (Some(lanes), Some(blocks)) => {
            // Lane fastest: consecutive blocks take the same share of the work for consecutive
            // lanes, so the blocks resident together read the same atoms and neighbouring
            // columns of the rows they gather (a lane-major order streams the whole gathered
            // matrix from memory once per lane).
            let lanes = b.bin(BinOp::Max, Type::U64, lanes, Operand::Imm(1));
            let lane = b.bin(BinOp::Rem, Type::U64, ctaid, lanes);
            let cta = b.bin(BinOp::Div, Type::U64, ctaid, lanes);
            let before = b.bin(BinOp::Mul, Type::U64, lane, blocks);
            let slot = b.bin(BinOp::Add, Type::U64, before, cta);
            (cta, Some(lane), Some(slot))
        }
        _ => (ctaid, None, None),
    };
    Ok(Frame {
        w: plan_width(plan),
        layout,
        params,
        offsets,
        frontier,
        atoms,
        work,
        per_thread,
        capacity,
        block,
        blocks,
        cta,
        slot,
        tid,
        lane,
        stride: None,
        stageable: stageable(body, frontier),
        aligns_staging: stageable(body, frontier).is_some() && body.is_pure() && !opts.checked,
    })
}

/// [`Frame::stageable`].
fn stageable(body: &Body, frontier: bool) -> Option<Ty> {
    body.reduce
        .filter(|_| may_stage_values(body, frontier))
        .map(|(ty, _)| ty)
}

/// The virtual blocks per lane of a strided frontier grid ([`FrontierGrid::Strided`]), each of
/// `capacity` work items: as many as the frontier's `work` needs. A reducing body keeps a carry
/// slot per virtual block, and the host sized those slots for the bound of
/// [`Grid::CoverWork`], `min(atoms, tiles × longest tile)` atoms (plus the tiles with
/// `count_tiles`), of which the kernels know the graph's atoms but not its longest tile: the
/// frontier's atoms are at most `tiles × longest` anyway, so capping its work at the graph's
/// (`min(work, graph atoms (+ tiles))`) never counts more blocks than the host's bound. A
/// frontier that repeats tiles past the graph's atoms then gives each thread a larger share
/// ([`frame`]'s `per_thread`), as a bounded grid does.
fn strided_blocks(
    b: &mut KernelBuilder,
    body: &Body,
    layout: &Layout,
    work: Reg,
    (capacity, count_tiles): (i64, bool),
) -> Reg {
    if body.reduce.is_none() {
        return blocks_per_lane(b, work, capacity);
    }
    let csr = &layout.csr;
    let end = offset_addr(b, layout.offsets, csr.row_offsets, csr.num_rows);
    let graph = load_offset(b, layout.offsets, end);
    let graph = if count_tiles {
        b.bin(BinOp::Add, Type::U64, graph, layout.tiles)
    } else {
        graph
    };
    let slots = b.bin(BinOp::Min, Type::U64, work, graph);
    blocks_per_lane(b, slots, capacity)
}

/// The frame of a main kernel whose blocks stride over a frontier's shares
/// ([`FrontierGrid::Strided`]): `cta` and `lane` (and with a reducing body the carry `slot`) are
/// set at the head of each round of [`BlockStride::begin`], from the virtual block `index`,
/// which starts at `%ctaid.x` and advances by `%nctaid.x` up to `blocks × lanes`.
fn strided_frame(
    b: &mut KernelBuilder,
    (layout, params): (Layout, KernelParams),
    (offsets, atoms, work): (Reg, Reg, Reg),
    (blocks, per_thread, reduces): (Option<Reg>, Operand, bool),
    plan: &Plan,
    opts: &Options,
) -> Frame {
    let blocks = blocks.expect("a strided frame counts its blocks");
    let items = i64::from(items_per_thread(opts));
    let block = i64::from(opts.block);
    let ctaid = b.special(Special::CtaidX);
    let index = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let total = match layout.lanes {
        Some(lanes) => {
            let lanes = b.bin(BinOp::Max, Type::U64, lanes, Operand::Imm(1));
            b.bin(BinOp::Mul, Type::U64, blocks, lanes)
        }
        None => blocks,
    };
    let tid = b.special(Special::TidX);
    let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let cta = b.reg_for(Type::U64);
    let lane = layout.lanes.map(|_| b.reg_for(Type::U64));
    let slot = (reduces && lane.is_some()).then(|| b.reg_for(Type::U64));
    Frame {
        w: plan_width(plan),
        layout,
        params,
        offsets,
        frontier: true,
        atoms,
        work,
        per_thread,
        capacity: items * block,
        block,
        blocks: Some(blocks),
        cta,
        slot,
        tid,
        lane,
        stride: Some(BlockStride { index, total }),
        stageable: None,
        aligns_staging: false,
    }
}

/// A main kernel's blocks striding over the virtual blocks of a frontier's decomposition
/// ([`FrontierGrid::Strided`]): virtual block `index` (lane fastest with lanes, as
/// `frame` orders a grid) of `total`.
#[derive(Clone, Copy)]
pub struct BlockStride {
    index: Reg,
    total: Reg,
}

impl BlockStride {
    /// Opens a round: leaves the loop when the virtual blocks are done, else sets the frame's
    /// `cta` and `lane` for this one. The test is uniform over the block, so the round's
    /// barriers are reached by every thread.
    pub fn begin(&self, b: &mut KernelBuilder, f: &Frame) -> LoopScope {
        let rounds = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, self.index, self.total);
        b.break_if(&rounds, done, false);
        match (f.layout.lanes, f.lane) {
            (Some(lanes), Some(lane)) => {
                let lanes = b.bin(BinOp::Max, Type::U64, lanes, Operand::Imm(1));
                b.bin_to(BinOp::Rem, Type::U64, lane, self.index, lanes);
                b.bin_to(BinOp::Div, Type::U64, f.cta, self.index, lanes);
                if let (Some(slot), Some(blocks)) = (f.slot, f.blocks) {
                    // A lane's carry slots are consecutive, the order the fix-up walks them in.
                    let before = b.bin(BinOp::Mul, Type::U64, lane, blocks);
                    b.bin_to(BinOp::Add, Type::U64, slot, before, f.cta);
                }
            }
            _ => b.mov_to(Type::U64, f.cta, self.index),
        }
        rounds
    }

    /// Closes the round: a barrier (the next round's neighbour exchange must not overwrite a
    /// value a slower warp still reads), then the next virtual block.
    pub fn end(&self, b: &mut KernelBuilder, rounds: LoopScope) {
        b.emit(Op::BarSync);
        let nctaid = b.special(Special::NctaidX);
        let stride = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
        b.bin_to(BinOp::Add, Type::U64, self.index, self.index, stride);
        b.loop_end(rounds);
    }
}

/// The block's carry slot (u64): [`Frame::slot`] with lanes, the virtual block in a strided
/// grid, else `%ctaid.x` read where it is used, so the address is one `mad.wide.u32`.
fn carry_slot(b: &mut KernelBuilder, f: &Frame) -> Reg {
    match (f.slot, f.stride) {
        (Some(slot), _) => slot,
        (None, Some(_)) => f.cta,
        (None, None) => {
            let ctaid = b.special(Special::CtaidX);
            b.cvt(Rounding::None, Type::U64, Type::U32, ctaid)
        }
    }
}

/// Thread `g` of a boundary kernel's grid (u64), one boundary per main-kernel block and one
/// past the last: threads past the lane's [`blocks_per_lane`] branch to `done`.
pub(crate) fn boundary_thread(b: &mut KernelBuilder, f: &Frame, done: Label) -> Reg {
    let ctaid = b.special(Special::CtaidX);
    let first = b.bin(BinOp::MulWide, Type::U32, ctaid, Operand::Imm(f.block));
    let g = b.bin(BinOp::Add, Type::U64, first, f.tid);
    let blocks = match f.blocks {
        Some(blocks) => blocks,
        None => blocks_per_lane(b, f.work, f.capacity),
    };
    let past = b.setp(Cmp::Gt, Type::U64, g, blocks);
    b.bra_if(past, false, done);
    g
}

/// The main kernel's blocks per lane, `max(1, ⌈work / per_block⌉)` (u64), as
/// [`Grid::CoverWork`] counts them.
pub(crate) fn blocks_per_lane(b: &mut KernelBuilder, work: Reg, per_block: i64) -> Reg {
    let up = b.bin(BinOp::Add, Type::U64, work, Operand::Imm(per_block - 1));
    let blocks = b.bin(BinOp::Div, Type::U64, up, Operand::Imm(per_block));
    b.bin(BinOp::Max, Type::U64, blocks, Operand::Imm(1))
}

pub(crate) fn temp_index(plan: &Plan, name: &str) -> Result<usize, GenError> {
    plan.temps
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| GenError::Unsupported(format!("the plan lacks the `{name}` temporary")))
}

/// The entry at `back` places from the end of the plan's kernels (the fix-up is last).
pub(crate) fn entry_from_back(plan: &Plan, back: usize) -> &str {
    plan.kernels[plan.kernels.len() - 1 - back].entry.as_ref()
}

/// Where a tile position's atoms are: the tile (u64), the first virtual atom `offsets[i]`, and
/// with a frontier `row_offsets[tile] - offsets[i]`, what turns a virtual atom into a real one.
pub(crate) struct TileAt {
    pub tile: Reg,
    pub begin: Option<Reg>,
    pub shift: Option<Reg>,
}

/// The [`TileAt`] of position `i` (u64, `< tiles`). `begin` is loaded when the rank is wanted or
/// with a frontier. Under `checked`, a frontier entry that is not a row is recorded by
/// [`Layout::tile`] and has no atoms (the scan gave it none); `row_offsets` is then read at
/// `num_rows` so that the read stays in bounds.
pub(crate) fn tile_at(
    b: &mut KernelBuilder,
    f: &Frame,
    i: Reg,
    wants_begin: bool,
    checked: bool,
) -> TileAt {
    if !f.frontier {
        let begin = wants_begin.then(|| global_offset_u64(b, f, i));
        return TileAt {
            tile: i,
            begin,
            shift: None,
        };
    }
    let skip = b.label();
    let tile = f.layout.tile(b, &f.params, i, checked, skip);
    b.place(skip);
    let row = if checked {
        b.bin(BinOp::Min, Type::U64, tile, f.layout.csr.num_rows)
    } else {
        tile
    };
    let width = f.layout.offsets;
    let addr = offset_addr(b, width, f.layout.csr.row_offsets, row);
    let real = load_offset(b, width, addr);
    let begin = global_offset_u64(b, f, i);
    let shift = b.bin(BinOp::Sub, Type::U64, real, begin);
    TileAt {
        tile,
        begin: Some(begin),
        shift: Some(shift),
    }
}

/// Builds the main kernel: the frame, the schedule's `share` search, the walk and, for a
/// reducing body, the block's carry reduction.
pub fn main_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
    share: fn(&mut KernelBuilder, &Frame) -> Share,
) -> Result<Kernel, GenError> {
    let back = usize::from(body.reduce.is_some());
    let mut b = KernelBuilder::new(entry_from_back(plan, back));
    let f = frame(&mut b, body, opts, plan, count_tiles)?;
    let rounds = f.stride.map(|stride| (stride, stride.begin(&mut b, &f)));
    let s = share(&mut b, &f);
    let lane = lane_index(&mut b, body, &f);
    let wants_rank = body.roles.contains(&IndexRole::Rank);
    let gather = Gathered::of(body, &f, &s);
    let walk = Walk {
        reduce: body.reduce,
        locate: true,
        wants_begin: wants_rank,
        gather,
    };
    let staged = match s.block_atoms {
        Some(range) if s.values.is_some() || stages_values(&b, body, &f) => Some(stage_values(
            &mut b,
            &f,
            body,
            opts.checked,
            (range, s.values),
            lane,
        )?),
        _ => None,
    };
    // A thread's atoms are consecutive (without a frontier), so the body's atom arrays, or the
    // staged values, are read through pointers that advance one atom per step, across tile ends
    // too.
    let kept = if staged.is_some() || f.layout.has_frontier() || wants_rank {
        None
    } else {
        let j0 = widen(&mut b, f.w, s.j0);
        KeptAtoms::new(&mut b, body, &f.params, opts.checked, j0)?
    };
    let value_ptr = match (staged, s.block_atoms, body.reduce) {
        (Some(base), Some((first, _)), Some((ty, _))) => {
            let j0 = widen(&mut b, f.w, s.j0);
            let k = b.bin(BinOp::Sub, Type::U64, j0, first);
            Some((b.elem_addr(base, k, ty.size()), ty))
        }
        _ => None,
    };
    let mut atom = |b: &mut KernelBuilder, at: &TileAt, j: Reg| {
        if let Some((ptr, ty)) = value_ptr {
            let value = b.ld(Space::Shared, ptx_type(ty), ptr);
            let step = Operand::Imm(ty.size().into());
            b.bin_to(BinOp::Add, Type::U64, ptr, ptr, step);
            return Ok(Some(value));
        }
        let ctx = match &kept {
            Some(k) => AtomContext {
                tile: Some(at.tile),
                lane,
                atom_addrs: k.addrs(),
                ..AtomContext::default()
            },
            None => atom_context(b, &f, at, j, lane, wants_rank),
        };
        let value = emit_body(b, body, &f.params, &ctx, opts.checked)?;
        if let Some(k) = &kept {
            k.advance(b, 1);
        }
        Ok(value)
    };
    let values = walk.run(&mut b, &f, body, &s, lane, opts.checked, &mut atom)?;
    if let (Some(values), Some(reduce)) = (values, body.reduce) {
        let carry = Carry {
            share: &s,
            values,
            reduce,
            lane,
            chain: None,
            gather: gather.as_ref(),
        };
        block_carry(&mut b, &f, plan, body, carry, opts.checked)?;
        if let Some(g) = &gather {
            g.store(&mut b, &f, body, (reduce.0, lane), opts.checked)?;
        }
        if rounds.is_none() {
            fixup::in_kernel(&mut b, &f, plan, body, opts.checked)?;
        }
    }
    if let Some((stride, scope)) = rounds {
        stride.end(&mut b, scope);
        // Every virtual block's carry is written once the grid's blocks have left their rounds.
        fixup::in_kernel(&mut b, &f, plan, body, opts.checked)?;
    }
    Ok(b.finish())
}

/// A block's outputs gathered in shared memory and stored together (Merrill & Garland's
/// merge-based SpMV, SC'16 §4, writes a tile's row results the same way). A thread finishes its
/// tiles at different steps of its walk, so storing each one as it is finished makes every store
/// instruction write a few scattered elements: a partial 32-byte sector each, which on an H100
/// cost the SpMV as many L2 sector writes as it has rows (4–6 M per launch on the large power
/// law and R-MAT members, against 1.2–1.7 M for cuSPARSE). Instead the walk and the head put the
/// value of tile `first + k` in slot `k` of the staged tile-end array (whose slot only the tile's
/// finishing thread reads, before), and after the block's carry scan the block stores slots
/// `0..count` with consecutive threads on consecutive tiles.
#[derive(Clone, Copy)]
pub(crate) struct Gathered {
    /// The staged tile-end array (shared), slots of `Frame::w` bytes.
    base: Reg,
    /// The block's first tile (width `Frame::w`).
    first: Reg,
    /// The block's tiles (u64).
    count: Reg,
    /// Bytes per slot: the tile ends' width, which holds the value.
    slot: u32,
}

impl Gathered {
    /// The gathering of a main kernel whose share stages its tile ends in shared memory, for a
    /// reducing body without lanes whose value fits a slot.
    fn of(body: &Body, f: &Frame, s: &Share) -> Option<Gathered> {
        let (ty, _) = body.reduce?;
        let TileEnds::Shared { base, first, count } = s.ends else {
            return None;
        };
        let fits = ty.size() <= f.w.size();
        (fits && f.layout.lanes.is_none() && f.lane.is_none()).then_some(Gathered {
            base,
            first,
            count,
            slot: f.w.size(),
        })
    }

    /// Puts `value` in slot `k` (u64).
    fn put(&self, b: &mut KernelBuilder, k: Reg, (value, ty): (Reg, Ty)) {
        let addr = b.elem_addr(self.base, k, self.slot);
        b.st(Space::Shared, ptx_type(ty), addr, value);
    }

    /// After every thread has put its tiles: the block stores slots `0..count`, coalesced, but
    /// the first in a block that is not its lane's first (that tile's value is the block's head,
    /// completed by the fix-up).
    fn store(
        &self,
        b: &mut KernelBuilder,
        f: &Frame,
        body: &Body,
        (ty, lane): (Ty, Option<Reg>),
        checked: bool,
    ) -> Result<(), GenError> {
        b.emit(Op::BarSync);
        let later = b.setp(Cmp::Ne, Type::U64, f.cta, Operand::Imm(0));
        let skip = b.selp(Type::U64, Operand::Imm(1), Operand::Imm(0), later);
        let k = b.bin(BinOp::Add, Type::U64, f.tid, skip);
        let first = widen(b, f.w, self.first);
        let each = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, k, self.count);
        b.break_if(&each, done, false);
        let addr = b.elem_addr(self.base, k, self.slot);
        let value = b.ld(Space::Shared, ptx_type(ty), addr);
        let tile = b.bin(BinOp::Add, Type::U64, first, k);
        f.layout
            .store_output(b, body, &f.params, (tile, lane), (value, ty), checked)?;
        b.bin_to(BinOp::Add, Type::U64, k, k, Operand::Imm(f.block));
        b.loop_end(each);
        Ok(())
    }
}

/// The shared array of [`stage_values`].
const STAGED_VALUES: &str = "lb_staged_values";

/// Atoms a warp's staging loads are aligned to, where the share allows it
/// ([`Frame::aligns_staging`]): 32 four-byte indices or values, one 128-byte line. A block's
/// atoms start anywhere, so a warp reading 32 consecutive atoms from the block's first one
/// touches two lines of each array, and the L2 serves a request per line: on the large power
/// law (H200) `merge_path` made 56.7 M L2 read requests where cuSPARSE made 54.1 M and the
/// gather floor 53.9 M, for the same sectors within 1.5%, and with the L2's throughput at 96%
/// the extra requests were its 5% (docs/benchmarks.md, forty-eighth session). Staging from the
/// first atom rounded down to this many costs a block up to `STAGING_ALIGN - 1` values it
/// throws away, in lines it reads anyway.
pub const STAGING_ALIGN: u64 = 32;

/// Whether the main kernel evaluates the body in a coalesced pass first: a reducing body that
/// needs neither its tile nor its rank (so an atom's value does not depend on where the merge
/// path puts it), without a frontier, when the values fit in shared memory beside everything
/// else the kernel stages (the carry scan is declared later, so it is counted here).
fn stages_values(b: &KernelBuilder, body: &Body, f: &Frame) -> bool {
    may_stage_values(body, f.frontier)
        && b.shared_bytes() + staged_values_bytes(body, f.block as u32, f.capacity as u64)
            <= SHARED_LIMIT
}

/// Whether a body's values may be staged at all (see `stages_values`): it reduces, reads
/// neither its tile nor its rank, and there is no frontier.
pub fn may_stage_values(body: &Body, frontier: bool) -> bool {
    body.reduce.is_some()
        && !body.reads(IndexRole::Tile)
        && !body.reads(IndexRole::Rank)
        && !frontier
}

/// Shared bytes the staged values and the carry scan (declared after them) take for a block of
/// `block` threads staging `capacity` values.
fn staged_values_bytes(body: &Body, block: u32, capacity: u64) -> u64 {
    let size = body.reduce.map_or(0, |(ty, _)| u64::from(ty.size()));
    u64::from(block) * (size + 4) + capacity * size
}

/// Static shared memory every target offers a block.
pub const SHARED_LIMIT: u64 = 48 * 1024;

/// The block evaluates the body for its atoms `first..end` in a coalesced pass (thread `t` takes
/// atoms `first + t, first + t + block, ..`) and stages the values in shared memory, as the
/// merge-path SpMV of Merrill and Garland (SC'16, §4) gathers a tile's nonzero products before
/// the threads walk their merge paths. The values go `into` the room a share reserved for them
/// ([`Share::values`]), or into an array of their own. Returns the values' base.
fn stage_values(
    b: &mut KernelBuilder,
    f: &Frame,
    body: &Body,
    checked: bool,
    ((first, end), into): ((Reg, Reg), Option<Reg>),
    lane: Option<Reg>,
) -> Result<Reg, GenError> {
    let Some((ty, _)) = body.reduce else {
        return Err(GenError::Unsupported(
            "staged values need a reducing body".into(),
        ));
    };
    let base = match into {
        Some(base) => base,
        None => {
            b.shared(STAGED_VALUES, 8, (f.capacity as u32) * ty.size());
            b.mov(Type::U64, Operand::Symbol(STAGED_VALUES.into()))
        }
    };
    let slot = b.elem_addr(base, f.tid, ty.size());
    let start = b.bin(BinOp::Add, Type::U64, first, f.tid);
    if body.is_pure() && !checked {
        unrolled_values(b, f, body, (first, start, end), (slot, ty), lane)?;
    } else {
        let walker = Walker {
            body,
            params: &f.params,
            checked,
            lane,
        };
        let step = Operand::Imm(f.block * i64::from(ty.size()));
        walker.walk(b, None, (first, start, end), f.block as u32, |b, value| {
            if let Some(v) = value {
                b.st(Space::Shared, ptx_type(ty), slot, v);
            }
            b.bin_to(BinOp::Add, Type::U64, slot, slot, step.clone());
            Ok(())
        })?;
    }
    b.emit(Op::BarSync);
    Ok(base)
}

/// The staging pass of a pure body: each of the thread's `items` atoms (`start`, `start +
/// block`, ..) is evaluated and stored only when below `end`, in straight-line code that lets
/// every gather of the thread be in flight at once (memory-level parallelism, what a
/// latency-bound SpMV lives on). A block without atoms skips it (the branch is uniform).
///
/// An item past `end` is evaluated at the clamped atom `end - 1` and its value dropped, so that
/// it costs a load of a line the thread just read, not a gather of its own (evaluating it at its
/// own atom instead, which lies inside the tile set in every block but the last, made
/// `merge_path` up to 28% slower on the large corpus's members with random columns: a block
/// whose atoms leave `t` items empty gathered `t` more columns for nothing). Under a 32-bit
/// plan the clamped atom is computed in 32 bits as `start + min(r × block, end - 1 - start)`
/// (no sum passes `end`, so none wraps) and handed to the body as [`AtomContext::atom32`]:
/// each load at the atom is one `mul.wide.u32` from it.
///
/// A block whose atoms fill every item but the last for all its threads (`end ≥ first +
/// capacity - block`: at most one tile per thread, rows of a dozen atoms or more) needs no
/// clamp there: under a 32-bit plan, when the body reads the atom only through the tile set's
/// arrays, it reads them through pointers at the thread's first atom ([`KeptAtoms`]) at
/// immediate offsets and stores unguarded, and only the last item is clamped. About 9 SASS
/// instructions an atom instead of 15 to 20 for the SpMV body on sm_90 (the kernel's
/// instructions on `banded-3000000`: 170 M → 149 M). The branch is uniform over the block.
fn unrolled_values(
    b: &mut KernelBuilder,
    f: &Frame,
    body: &Body,
    (first, start, end): (Reg, Reg, Reg),
    (slot, ty): (Reg, Ty),
    lane: Option<Reg>,
) -> Result<(), GenError> {
    let skip = b.label();
    let none = b.setp(Cmp::Ge, Type::U64, start, end);
    b.bra_if(none, false, skip);
    let kept = match f.w {
        Type::U32 => KeptAtoms::new(b, body, &f.params, false, start)?,
        _ => None,
    };
    let stage = Staging {
        f,
        body,
        range: (start, end),
        slot: (slot, ty),
        lane,
    };
    match kept {
        Some(kept) => {
            // Every item but the last is in range for every thread of the block.
            let full = b.bin(
                BinOp::Add,
                Type::U64,
                first,
                Operand::Imm(f.capacity - f.block),
            );
            let long = b.setp(Cmp::Ge, Type::U64, end, full);
            let mut scope = b.if_begin(long, false);
            stage.unclamped(b, &kept)?;
            b.if_else(&mut scope);
            stage.clamped(b, 0)?;
            b.if_end(scope);
        }
        None => stage.clamped(b, 0)?,
    }
    b.place(skip);
    Ok(())
}

/// What [`unrolled_values`] stages: the thread's atoms `start..end` (u64), stepping by the
/// block, into the shared slots from `slot`.
struct Staging<'a> {
    f: &'a Frame,
    body: &'a Body,
    range: (Reg, Reg),
    slot: (Reg, Ty),
    lane: Option<Reg>,
}

impl Staging<'_> {
    fn items(&self) -> i64 {
        self.f.capacity / self.f.block
    }

    /// Every item but the last evaluated at its own atom through `kept` (at the thread's first
    /// atom) and stored unguarded, for a block whose atoms fill all but the last item; the last
    /// item as [`Staging::clamped`] does.
    fn unclamped(&self, b: &mut KernelBuilder, kept: &KeptAtoms) -> Result<(), GenError> {
        let (slot, ty) = self.slot;
        for r in 0..self.items() - 1 {
            let step = r * self.f.block;
            let ahead = u32::try_from(step)
                .map_err(|_| GenError::Unsupported(format!("{step} atoms per block")))?;
            let ctx = AtomContext {
                lane: self.lane,
                coalesced: true,
                atom_addrs: kept.addrs_at(b, ahead),
                ..AtomContext::default()
            };
            if let Some(v) = emit_body(b, self.body, &self.f.params, &ctx, false)? {
                let offset = step * i64::from(ty.size());
                b.emit(Op::St {
                    space: Space::Shared,
                    ty: ptx_type(ty),
                    addr: Address::Reg { base: slot, offset },
                    src: v.into(),
                });
            }
        }
        self.clamped(b, self.items() - 1)
    }

    /// Every item evaluated at its atom clamped to `end - 1`.
    fn clamped(&self, b: &mut KernelBuilder, from: i64) -> Result<(), GenError> {
        let (start, end) = self.range;
        let narrow_atoms = (self.f.w == Type::U32).then(|| {
            let start32 = narrow(b, Type::U32, start);
            let end32 = narrow(b, Type::U32, end);
            let left = b.bin(BinOp::Sub, Type::U32, end32, start32);
            let last_step = b.bin(BinOp::Sub, Type::U32, left, Operand::Imm(1));
            (start32, left, last_step)
        });
        let last = narrow_atoms
            .is_none()
            .then(|| b.bin(BinOp::Sub, Type::U64, end, Operand::Imm(1)));
        let mut values = Vec::new();
        for r in from..self.items() {
            let step = Operand::Imm(r * self.f.block);
            let (in_range, clamped, atom32) = match narrow_atoms {
                Some((start32, left, last_step)) => {
                    let in_range = b.setp(Cmp::Gt, Type::U32, left, step.clone());
                    let offset = b.bin(BinOp::Min, Type::U32, last_step, step);
                    let atom32 = b.bin(BinOp::Add, Type::U32, start32, offset);
                    (in_range, widen(b, Type::U32, atom32), Some(atom32))
                }
                None => {
                    let last = last.expect("computed for 64-bit atoms");
                    let atom = b.bin(BinOp::Add, Type::U64, start, step);
                    let in_range = b.setp(Cmp::Lt, Type::U64, atom, end);
                    (in_range, b.bin(BinOp::Min, Type::U64, atom, last), None)
                }
            };
            let ctx = AtomContext {
                atom: Some(clamped),
                atom32,
                lane: self.lane,
                coalesced: true,
                ..AtomContext::default()
            };
            if let Some(v) = emit_body(b, self.body, &self.f.params, &ctx, false)? {
                values.push((r, v, in_range));
            }
        }
        self.store(b, values);
        Ok(())
    }

    /// Stores item `r`'s value to its slot when it is in range.
    fn store(&self, b: &mut KernelBuilder, values: Vec<(i64, Reg, Reg)>) {
        let (slot, ty) = self.slot;
        for (r, v, in_range) in values {
            b.emit_guarded(
                in_range,
                false,
                Op::St {
                    space: Space::Shared,
                    ty: ptx_type(ty),
                    addr: Address::Reg {
                        base: slot,
                        offset: r * self.f.block * i64::from(ty.size()),
                    },
                    src: v.into(),
                },
            );
        }
    }
}

/// The `#[lane]` index: the frame's lane, or 0 when the body asks for it without `lanes`.
pub(crate) fn lane_index(b: &mut KernelBuilder, body: &Body, f: &Frame) -> Option<Reg> {
    match f.lane {
        Some(l) => Some(l),
        None if body.roles.contains(&IndexRole::Lane) => Some(b.mov(Type::U64, Operand::Imm(0))),
        None => None,
    }
}

/// The body's view of virtual atom `j` (width `Frame::w`) of the tile at `at`: the real atom
/// (shifted with a frontier), and the rank when `wants_rank` (then `at.begin` is loaded).
pub(crate) fn atom_context(
    b: &mut KernelBuilder,
    f: &Frame,
    at: &TileAt,
    j: Reg,
    lane: Option<Reg>,
    wants_rank: bool,
) -> AtomContext {
    let virtual_atom = widen(b, f.w, j);
    let atom = match at.shift {
        Some(shift) => b.bin(BinOp::Add, Type::U64, virtual_atom, shift),
        None => virtual_atom,
    };
    let rank = wants_rank
        .then_some(at.begin)
        .flatten()
        .map(|begin| b.bin(BinOp::Sub, Type::U64, virtual_atom, begin));
    AtomContext {
        tile: Some(at.tile),
        atom: Some(atom),
        lane,
        rank,
        ..AtomContext::default()
    }
}

/// `end(i)` (width `Frame::w`) for `i` of width `Frame::w`, from where `ends` says.
pub(crate) fn tile_end(b: &mut KernelBuilder, f: &Frame, ends: &TileEnds, i: Reg) -> Reg {
    let w = f.w;
    let shared = |b: &mut KernelBuilder, base: Reg, first: Reg| {
        let k = b.bin(BinOp::Sub, w, i, first);
        let k = widen(b, w, k);
        let addr = b.elem_addr(base, k, w.size());
        b.ld(Space::Shared, w, addr)
    };
    match *ends {
        TileEnds::Global => global_end(b, f, i),
        TileEnds::Shared { base, first, .. } => shared(b, base, first),
        TileEnds::Staged { base, first, fits } => {
            let value = b.reg_for(w);
            let mut scope = b.if_begin(fits, false);
            let e = shared(b, base, first);
            b.mov_to(w, value, e);
            b.if_else(&mut scope);
            let e = global_end(b, f, i);
            b.mov_to(w, value, e);
            b.if_end(scope);
            value
        }
    }
}

/// What emits the work of one atom during a [`Walk`]: `(builder, tile, j)` for virtual atom `j`
/// (width `Frame::w`); returns the atom's value when the walk reduces.
pub(crate) type AtomWork<'a> =
    dyn FnMut(&mut KernelBuilder, &TileAt, Reg) -> Result<Option<Reg>, GenError> + 'a;

/// How a thread walks its share from `(i0, j0)` to `(i1, j1)` (module docs): tile by tile,
/// atom by atom, finishing every tile whose end it passes.
pub(crate) struct Walk {
    /// A reducing walk combines the atoms' values per tile, stores every finished tile but the
    /// first, and returns the [`BlockValues`] for [`block_carry`].
    pub reduce: Option<(Ty, Reduce)>,
    /// Whether the atom work needs the tile ([`tile_at`]) or only its position
    /// (`TileAt::tile` is then the position and nothing is loaded). A reducing walk locates.
    pub locate: bool,
    /// Whether [`tile_at`] loads the tile's first atom (for the rank).
    pub wants_begin: bool,
    /// Where finished tiles go instead of the output, when the block gathers its outputs.
    pub gather: Option<Gathered>,
}

impl Walk {
    /// Emits the walk of share `s`, with `atom` for each atom.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        b: &mut KernelBuilder,
        f: &Frame,
        body: &Body,
        s: &Share,
        lane: Option<Reg>,
        checked: bool,
        atom: &mut AtomWork<'_>,
    ) -> Result<Option<BlockValues>, GenError> {
        let w = f.w;
        let locate = self.locate || self.reduce.is_some();
        let identity = |b: &mut KernelBuilder| {
            self.reduce
                .map(|(ty, r)| reduce_identity(b, ty, r))
                .transpose()
        };
        let acc = identity(b)?;
        // The thread's first finished tile waits for the block's carry-in, so it is kept here.
        let head = identity(b)?;
        let head_tile = head.map(|_| b.mov(Type::U64, Operand::Imm(0)));
        let i = b.mov(w, s.i0);
        let j = b.mov(w, s.j0);
        let at_position = |b: &mut KernelBuilder, position: Reg| {
            if locate {
                tile_at(b, f, position, self.wants_begin, checked)
            } else {
                TileAt {
                    tile: position,
                    begin: None,
                    shift: None,
                }
            }
        };

        // Consumes atoms `j..limit` of the tile at `at`, combining into `acc`.
        let mut atoms_of =
            |b: &mut KernelBuilder, at: &TileAt, limit: Reg| -> Result<(), GenError> {
                let atoms = b.loop_begin();
                let done = b.setp(Cmp::Ge, w, j, limit);
                b.break_if(&atoms, done, false);
                let x = atom(b, at, j)?;
                if let (Some(acc), Some(x), Some((ty, r))) = (acc, x, self.reduce) {
                    reduce_combine(b, ty, r, acc, x)?;
                }
                b.bin_to(BinOp::Add, w, j, j, Operand::Imm(1));
                b.loop_end(atoms);
                Ok(())
            };

        let tiles = b.loop_begin();
        let done = b.setp(Cmp::Ge, w, i, s.i1);
        b.break_if(&tiles, done, false);
        let end = tile_end(b, f, &s.ends, i);
        let position = widen(b, w, i);
        let at = at_position(b, position);
        atoms_of(b, &at, end)?;
        if let (Some(acc), Some(head), Some(head_tile), Some((ty, r))) =
            (acc, head, head_tile, self.reduce)
        {
            let first = b.setp(Cmp::Eq, w, i, s.i0);
            let mut scope = b.if_begin(first, false);
            b.mov_to(ptx_type(ty), head, acc);
            b.mov_to(Type::U64, head_tile, at.tile);
            b.if_else(&mut scope);
            match &self.gather {
                Some(g) => {
                    let k = b.bin(BinOp::Sub, w, i, g.first);
                    let k = widen(b, w, k);
                    g.put(b, k, (acc, ty));
                }
                None => f.layout.store_output(
                    b,
                    body,
                    &f.params,
                    (at.tile, lane),
                    (acc, ty),
                    checked,
                )?,
            }
            b.if_end(scope);
            let identity = reduce_identity(b, ty, r)?;
            b.mov_to(ptx_type(ty), acc, identity);
        }
        b.bin_to(BinOp::Add, w, i, i, Operand::Imm(1));
        b.loop_end(tiles);

        // The partial tile, when it has atoms here (then `i < tiles`, so its position is valid).
        let position = widen(b, w, i);
        let some = b.setp(Cmp::Lt, w, j, s.j1);
        let scope = b.if_begin(some, false);
        let at = at_position(b, position);
        atoms_of(b, &at, s.j1)?;
        b.if_end(scope);

        Ok(match (acc, head, head_tile) {
            (Some(acc), Some(head), Some(head_tile)) => Some(BlockValues {
                acc,
                head,
                head_tile,
                position,
            }),
            _ => None,
        })
    }
}

/// A thread's values at the end of its walk.
pub(crate) struct BlockValues {
    /// The partial value of its last (unfinished) tile.
    acc: Reg,
    /// The partial value of its first finished tile, and that tile.
    head: Reg,
    head_tile: Reg,
    /// The position of its last tile (u64; `tiles` past the end).
    position: Reg,
}

/// A block that walks its atoms in several rounds of shares, one segmented scan per round
/// (`multi_phase`'s iterated search): what the rounds so far leave for the next. The block's
/// shares are ordered by round, then thread, so a round continues the scan of the one before.
pub(crate) struct Chain {
    /// The partial value of the tile open after the previous round (the identity before the
    /// first), uniform over the block.
    pub carry: Reg,
    /// u32: 1 once a thread of the block has finished a tile in an earlier round.
    pub closed: Reg,
    /// Whether this is the block's last round: only then is the carry slot written.
    pub last: Reg,
}

/// What [`block_carry`] reduces: a thread's share and the values its walk left.
pub(crate) struct Carry<'a> {
    pub share: &'a Share,
    pub values: BlockValues,
    pub reduce: (Ty, Reduce),
    pub lane: Option<Reg>,
    /// Rounds after the first continue the scan of the ones before.
    pub chain: Option<&'a Chain>,
    /// Where the head goes instead of the output, when the block gathers its outputs.
    pub gather: Option<&'a Gathered>,
}

/// An inclusive segmented scan of `acc` over the block's threads, in place: `flag` (u32) is 1
/// where a segment starts and becomes 1 wherever a segment start lies between the block's start
/// and the thread. With [`ScanBy::Shuffles`] each warp scans its lanes with shuffles
/// ([`warp_segmented_scan`]); the last lane of every warp leaves its warp's result in shared
/// memory, the first warp scans those the same way, and a thread whose segment began before its
/// warp prepends the scan of the warps before it (the two levels of Merrill & Garland's
/// block-wide reduction of carry-outs, after CUB's warp-then-block scan). At most three barriers
/// whatever the block size, where a Hillis–Steele scan over the whole block in shared memory
/// took two per step (sixteen at 256 threads) and four shared accesses per thread and step. The combination tree depends only on the flags and
/// the block size: bitwise reproducible. Leaves every thread's result and flag in shared memory
/// behind a barrier and returns their addresses, so that `addr - size` is the previous
/// thread's (so does [`ScanBy::SharedSteps`]).
fn segmented_scan(
    b: &mut KernelBuilder,
    block: i64,
    tid: Reg,
    (ty, r): (Ty, Reduce),
    (acc, flag): (Reg, Reg),
    by: ScanBy,
) -> Result<(Reg, Reg), GenError> {
    if by == ScanBy::SharedSteps {
        return segmented_scan_in_steps(b, block, tid, (ty, r), acc, flag);
    }
    if ty == Ty::Bool {
        return Err(GenError::Unsupported(
            "`reduce` over `bool` is not supported".into(),
        ));
    }
    let (t, size) = (ptx_type(ty), ty.size());
    let op = reduce_op(r);
    let lane = b.special(Special::LaneId);
    warp_segmented_scan(b, lane, (t, op), acc, flag);
    if block > 32 {
        let warps = block / 32;
        b.shared(WARP_VALUES, 8, warps as u32 * size);
        b.shared(WARP_FLAGS, 4, warps as u32 * 4);
        let values = b.mov(Type::U64, Operand::Symbol(WARP_VALUES.into()));
        let flags = b.mov(Type::U64, Operand::Symbol(WARP_FLAGS.into()));
        let warp = b.bin(BinOp::Shr, Type::U64, tid, Operand::Imm(5));
        let last_lane = b.setp(Cmp::Eq, Type::U32, lane, Operand::Imm(31));
        let scope = b.if_begin(last_lane, false);
        let addr = b.elem_addr(values, warp, size);
        b.st(Space::Shared, t, addr, acc);
        let addr = b.elem_addr(flags, warp, 4);
        b.st(Space::Shared, Type::U32, addr, flag);
        b.if_end(scope);
        b.emit(Op::BarSync);
        // The first warp scans the warps' results, one lane each (the identity past the last
        // warp, which no lower lane reads).
        let first_warp = b.setp(Cmp::Lt, Type::U64, tid, Operand::Imm(32));
        let scope = b.if_begin(first_warp, false);
        let value = reduce_identity(b, ty, r)?;
        let warp_flag = b.mov(Type::U32, Operand::Imm(0));
        let slot = b.cvt(Rounding::None, Type::U64, Type::U32, lane);
        let value_addr = b.elem_addr(values, slot, size);
        let flag_addr = b.elem_addr(flags, slot, 4);
        let inside = b.setp(Cmp::Lt, Type::U32, lane, Operand::Imm(warps));
        let load = b.if_begin(inside, false);
        b.ld_to(Space::Shared, t, value, value_addr);
        b.ld_to(Space::Shared, Type::U32, warp_flag, flag_addr);
        b.if_end(load);
        warp_segmented_scan(b, lane, (t, op), value, warp_flag);
        let store = b.if_begin(inside, false);
        b.st(Space::Shared, t, value_addr, value);
        b.st(Space::Shared, Type::U32, flag_addr, warp_flag);
        b.if_end(store);
        b.if_end(scope);
        b.emit(Op::BarSync);
        let later_warp = b.setp(Cmp::Ge, Type::U64, tid, Operand::Imm(32));
        let open = b.setp(Cmp::Eq, Type::U32, flag, Operand::Imm(0));
        let continues = b.bin(BinOp::And, Type::Pred, later_warp, open);
        let scope = b.if_begin(continues, false);
        let before = b.bin(BinOp::Sub, Type::U64, warp, Operand::Imm(1));
        let addr = b.elem_addr(values, before, size);
        let earlier = b.ld(Space::Shared, t, addr);
        combine_earlier(b, (t, op), acc, earlier);
        let addr = b.elem_addr(flags, before, 4);
        b.ld_to(Space::Shared, Type::U32, flag, addr);
        b.if_end(scope);
    }
    Ok(publish_scan(b, block, tid, (t, size), acc, flag))
}

/// Stores every thread's scan value and flag at its index of the block's scan arrays, behind a
/// barrier; returns the thread's two addresses.
fn publish_scan(
    b: &mut KernelBuilder,
    block: i64,
    tid: Reg,
    (t, size): (Type, u32),
    acc: Reg,
    flag: Reg,
) -> (Reg, Reg) {
    b.shared(SCAN_VALUES, 8, block as u32 * size);
    b.shared(SCAN_FLAGS, 4, block as u32 * 4);
    let values = b.mov(Type::U64, Operand::Symbol(SCAN_VALUES.into()));
    let flags = b.mov(Type::U64, Operand::Symbol(SCAN_FLAGS.into()));
    let my_value = b.elem_addr(values, tid, size);
    let my_flag = b.elem_addr(flags, tid, 4);
    b.st(Space::Shared, t, my_value, acc);
    b.st(Space::Shared, Type::U32, my_flag, flag);
    b.emit(Op::BarSync);
    (my_value, my_flag)
}

/// How [`segmented_scan`] crosses the block's threads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanBy {
    /// Shuffles within each warp, shared memory across warps: three barriers.
    Shuffles,
    /// Hillis–Steele over the whole block in shared memory, two barriers per step. Kept for
    /// `multi_phase`'s rounds: with the shuffles its main kernel needs 40 registers instead of
    /// 32 on sm_90 (the warp scan alone does it), a quarter of its occupancy, and took 461 µs
    /// instead of 429 on `banded-3000000` on an H200 (docs/benchmarks.md, thirty-seventh
    /// session), where `merge_path` and `two_phase` gained 2–4%.
    SharedSteps,
}

/// [`segmented_scan`] as a Hillis–Steele scan over `log2(block)` fixed steps in shared memory
/// (thread `t` combines `t - d` into itself until its segment's start is reached). Ends with a
/// barrier; returns the shared-memory addresses of the thread's value and flag.
fn segmented_scan_in_steps(
    b: &mut KernelBuilder,
    block: i64,
    tid: Reg,
    (ty, r): (Ty, Reduce),
    acc: Reg,
    flag: Reg,
) -> Result<(Reg, Reg), GenError> {
    let (t, size) = (ptx_type(ty), ty.size());
    let (my_value, my_flag) = publish_scan(b, block, tid, (t, size), acc, flag);
    let other_value = b.reg_for(t);
    let other_flag = b.reg_for(Type::U32);
    let mut d = 1;
    while d < block {
        // Read in one phase, write in the next, so every read sees the previous step.
        let reads = b.setp(Cmp::Ge, Type::U64, tid, Operand::Imm(d));
        let open = b.setp(Cmp::Eq, Type::U32, flag, Operand::Imm(0));
        let outer = b.if_begin(reads, false);
        let inner = b.if_begin(open, false);
        let addr = b.bin(
            BinOp::Sub,
            Type::U64,
            my_value,
            Operand::Imm(d * i64::from(size)),
        );
        b.ld_to(Space::Shared, t, other_value, addr);
        let addr = b.bin(BinOp::Sub, Type::U64, my_flag, Operand::Imm(4 * d));
        b.ld_to(Space::Shared, Type::U32, other_flag, addr);
        b.if_end(inner);
        b.if_end(outer);
        b.emit(Op::BarSync);
        let outer = b.if_begin(reads, false);
        let inner = b.if_begin(open, false);
        reduce_combine(b, ty, r, acc, other_value)?;
        b.mov_to(Type::U32, flag, other_flag);
        b.st(Space::Shared, t, my_value, acc);
        b.st(Space::Shared, Type::U32, my_flag, flag);
        b.if_end(inner);
        b.if_end(outer);
        b.emit(Op::BarSync);
        d *= 2;
    }
    Ok((my_value, my_flag))
}

/// [`segmented_scan`] over one warp's lanes (`lane` is `%laneid`), in place, for a value
/// of PTX type `t` combined with `op`: Hillis–Steele over shuffles, lane `l` prepending lane
/// `l - d` while no segment starts between them. Every lane runs every shuffle.
fn warp_segmented_scan(
    b: &mut KernelBuilder,
    lane: Reg,
    (t, op): (Type, BinOp),
    acc: Reg,
    flag: Reg,
) {
    let mut d = 1;
    while d < 32 {
        let earlier = shfl(b, ShflMode::Up, acc, t, Operand::Imm(d));
        let earlier_flag = shfl(b, ShflMode::Up, flag, Type::U32, Operand::Imm(d));
        let reads = b.setp(Cmp::Ge, Type::U32, lane, Operand::Imm(d));
        let open = b.setp(Cmp::Eq, Type::U32, flag, Operand::Imm(0));
        let take = b.bin(BinOp::And, Type::Pred, reads, open);
        b.emit_guarded(
            take,
            false,
            Op::Bin {
                op,
                ty: t,
                dst: acc,
                a: earlier.into(),
                b: acc.into(),
            },
        );
        select_to(b, Type::U32, flag, earlier_flag, flag, take);
        d *= 2;
    }
}

/// `acc = earlier ⊕ acc`.
fn combine_earlier(b: &mut KernelBuilder, (t, op): (Type, BinOp), acc: Reg, earlier: Reg) {
    b.emit(Op::Bin {
        op,
        ty: t,
        dst: acc,
        a: earlier.into(),
        b: acc.into(),
    });
}

/// The end of a reducing main kernel, after every thread's walk (level 2 in the module docs):
/// a segmented inclusive scan of the threads' partial values, a new segment at each thread that
/// finished a tile. A thread that finished a tile completes its first one with the scan of the
/// thread before it and stores it, or, when no thread before it in the block finished a tile and
/// the block is not its lane's first, leaves it in the block's head slot for the fix-up. The last
/// thread writes the block's carry slot: the key of its partial tile (or [`NO_CARRY`] past the
/// last tile) and its scan, the block's whole contribution to that tile.
///
/// With a [`Chain`], thread 0 first prepends the carry of the earlier rounds (to its first
/// finished tile, or to its partial tile when it finishes none), a tile finished in an earlier
/// round closes the head like one finished by an earlier thread, the chain takes this round's
/// carry and the carry slot waits for the last round.
pub(crate) fn block_carry(
    b: &mut KernelBuilder,
    f: &Frame,
    plan: &Plan,
    body: &Body,
    c: Carry<'_>,
    checked: bool,
) -> Result<(), GenError> {
    let (s, v, (ty, r), lane) = (c.share, c.values, c.reduce, c.lane);
    let (w, t) = (f.w, ptx_type(ty));
    let size = ty.size();
    let slot_of = |name: &str| temp_index(plan, name).map(|k| f.params.temps[k]);
    let finishes = b.setp(Cmp::Lt, w, s.i0, s.i1);
    let flag = b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), finishes);
    if let Some(chain) = c.chain {
        let first = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(0));
        let scope = b.if_begin(first, false);
        let into = b.selp(t, v.head, v.acc, finishes);
        let joined = b.mov(t, chain.carry);
        reduce_combine(b, ty, r, joined, into)?;
        select_to(b, t, v.head, joined, v.head, finishes);
        select_to(b, t, v.acc, v.acc, joined, finishes);
        b.if_end(scope);
    }
    let by = match c.chain {
        Some(_) => ScanBy::SharedSteps,
        None => ScanBy::Shuffles,
    };
    let (my_value, my_flag) = segmented_scan(b, f.block, f.tid, (ty, r), (v.acc, flag), by)?;
    let other_value = b.reg_for(t);

    // The head: is a thread before this one in the block finishing a tile (`closed`)?
    let outer = b.if_begin(finishes, false);
    let closed = b.reg_for(Type::U32);
    match c.chain {
        Some(chain) => b.mov_to(Type::U32, closed, chain.closed),
        None => b.mov_to(Type::U32, closed, Operand::Imm(0)),
    }
    let later = b.setp(Cmp::Ne, Type::U64, f.tid, Operand::Imm(0));
    let inner = b.if_begin(later, false);
    let addr = b.bin(BinOp::Sub, Type::U64, my_value, Operand::Imm(size.into()));
    b.ld_to(Space::Shared, t, other_value, addr);
    reduce_combine(b, ty, r, v.head, other_value)?;
    let addr = b.bin(BinOp::Sub, Type::U64, my_flag, Operand::Imm(4));
    let before = b.ld(Space::Shared, Type::U32, addr);
    b.bin_to(BinOp::Or, Type::B32, closed, closed, before);
    b.if_end(inner);
    let open = b.setp(Cmp::Eq, Type::U32, closed, Operand::Imm(0));
    let not_first = b.setp(Cmp::Ne, Type::U64, f.cta, Operand::Imm(0));
    let pending = b.bin(BinOp::And, Type::Pred, open, not_first);
    let mut choice = b.if_begin(pending, false);
    let slot = carry_slot(b, f);
    let addr = b.elem_addr(slot_of(CARRY_HEADS)?, slot, size);
    b.st(Space::Global, t, addr, v.head);
    b.if_else(&mut choice);
    match c.gather {
        Some(g) => {
            let first = widen(b, w, g.first);
            let k = b.bin(BinOp::Sub, Type::U64, v.head_tile, first);
            g.put(b, k, (v.head, ty));
        }
        None => f.layout.store_output(
            b,
            body,
            &f.params,
            (v.head_tile, lane),
            (v.head, ty),
            checked,
        )?,
    }
    b.if_end(choice);
    b.if_end(outer);

    let last_thread = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(f.block - 1));
    let writes = match c.chain {
        Some(chain) => {
            // Every thread takes the round's carry; the barrier keeps the next round's scan
            // from overwriting it before the slowest warp has read it.
            let values = b.mov(Type::U64, Operand::Symbol(SCAN_VALUES.into()));
            let at = (f.block - 1) * i64::from(size);
            let last = b.bin(BinOp::Add, Type::U64, values, Operand::Imm(at));
            b.ld_to(Space::Shared, t, chain.carry, last);
            let flags = b.mov(Type::U64, Operand::Symbol(SCAN_FLAGS.into()));
            let at = (f.block - 1) * 4;
            let last_flag = b.bin(BinOp::Add, Type::U64, flags, Operand::Imm(at));
            let any = b.ld(Space::Shared, Type::U32, last_flag);
            b.bin_to(BinOp::Or, Type::B32, chain.closed, chain.closed, any);
            b.emit(Op::BarSync);
            b.bin(BinOp::And, Type::Pred, last_thread, chain.last)
        }
        None => last_thread,
    };
    let scope = b.if_begin(writes, false);
    let key = match (f.layout.lanes, lane) {
        (Some(lanes), Some(l)) => {
            let row = b.bin(BinOp::Mul, Type::U64, v.position, lanes);
            b.bin(BinOp::Add, Type::U64, row, l)
        }
        _ => v.position,
    };
    let inside = b.setp(Cmp::Lt, Type::U64, v.position, f.layout.tiles);
    let key = b.selp(Type::U64, key, Operand::Imm(NO_CARRY), inside);
    let slot = carry_slot(b, f);
    let addr = b.elem_addr(slot_of(CARRY_KEYS)?, slot, 8);
    b.st(Space::Global, Type::U64, addr, key);
    let addr = b.elem_addr(slot_of(CARRY_VALUES)?, slot, size);
    b.st(Space::Global, t, addr, v.acc);
    b.if_end(scope);
    Ok(())
}

/// The kernels of a work-oriented plan: with a frontier the scan of its tile sizes, then the
/// main kernel, and the fix-up kernel when the body reduces.
pub fn build(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
    share: fn(&mut KernelBuilder, &Frame) -> Share,
) -> Result<Vec<Kernel>, GenError> {
    let mut kernels = Vec::new();
    if opts.tiles.is_some() {
        kernels.extend(frontier_scan::kernels(body, opts, plan)?);
    }
    kernels.push(main_kernel(body, opts, plan, count_tiles, share)?);
    if body.reduce.is_some() {
        kernels.push(fixup::fixup_kernel(body, opts, plan, count_tiles)?);
    }
    Ok(kernels)
}
