//! `merge_path`: an even share of `tiles + atoms` per thread, found by a diagonal search of the
//! merge path between the tile end offsets (`row_offsets[1..]`) and the atom indices.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.3 ("a 2-D split of the grid created using the
//! row-offsets and the nonzero indices ... the search along the diagonal of the grid allows each
//! thread to find its starting and ending rows and nonzeros"; first across blocks, "and then to
//! threads within a block to reduce the search space each thread has to search through") and
//! §4.4.2.1 (a tile and an atom are the same amount of work; complete tiles, then the partial
//! tile), after Merrill & Garland's merge-based SpMV [64].
//!
//! Two threads of each block search the block's two diagonals in global memory; the block stages
//! the end offsets of its tiles in shared memory (at most `block × items_per_thread` of them, as
//! the block's share bounds how many tiles it finishes); each thread then searches its own two
//! diagonals in shared memory and walks its share ([`super::work_oriented`]). The search at
//! diagonal `d` finds the split `(i, d - i)` with `i` the first tile such that
//! `row_offsets[i + 1] > d - i - 1`: a tile whose end is at or before an atom is finished first,
//! as in the walk.

use std::borrow::Cow;

use super::{Schedule, ScheduleTemplate};
use crate::body::{Body, Ty};
use crate::builder::KernelBuilder;
use crate::ir::{BinOp, Cmp, Kernel, LdCache, Op, Operand, Reg, Space, Type};
use crate::plan::{KernelPlan, Plan, Temp, TempCount, TempRole};
use crate::primitives::work_oriented::{
    self, global_end, narrow, select_to, Frame, Share, TileEnds,
};
use crate::{GenError, IndexWidth, Options};

/// The `merge_path` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct MergePath;

const TILE_ENDS: &str = "lb_tile_ends";
/// Slots the staged values may start below the block's first atom.
const ALIGN_SLOTS: u32 = work_oriented::STAGING_ALIGN as u32;
const BOUNDS_TEMP: &str = "merge_bounds";
/// Static shared memory every target offers a block.
const SHARED_LIMIT: u32 = 48 * 1024;

impl ScheduleTemplate for MergePath {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let mut plans = self.plans(body, opts)?;
        Ok(plans.remove(0))
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        let opts = &with_default_items(body, opts);
        let bytes = staged_bytes(body, opts, work_oriented::items_per_thread(opts));
        if bytes > u64::from(SHARED_LIMIT) {
            return Err(GenError::BadBlock {
                schedule: Schedule::MergePath.name(),
                block: opts.block,
                why: format!(
                    "a block stages `block × items_per_thread` tile offsets and scans its carries \
                     in shared memory ({bytes} bytes, over {SHARED_LIMIT}): use fewer threads or \
                     items per thread"
                ),
            });
        }
        let mut plans = work_oriented::strided_plans(body, opts, Schedule::MergePath.name(), true)?;
        if opts.tiles.is_none() {
            for plan in &mut plans {
                with_partition(plan);
            }
        }
        Ok(plans)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let opts = &with_default_items(body, opts);
        let mut kernels = Vec::new();
        if opts.tiles.is_none() {
            kernels.push(partition_kernel(body, opts, plan)?);
        }
        kernels.extend(work_oriented::build(body, opts, plan, true, share)?);
        Ok(kernels)
    }
}

/// Work items per thread when the attribute leaves `items_per_thread` out and the block stages
/// its values (a reducing body that reads neither tile nor rank, no frontier): 13, where that
/// fits in shared memory; otherwise the work-oriented default, 7. The block's diagonal search,
/// carry scan and fix-up are amortized over more items while the staged pass keeps every
/// thread's gathers coalesced. On an H100 (docs/benchmarks.md, 2026-11-22), with the values and
/// the tile ends in separate arrays, 11 items took 0.66–0.87× the time of 7 on every large
/// member and 15 was slower than 7 on most. With one array for both (`ends_after_values`) and
/// 32-bit staging, on an H200 (thirty-ninth session), 13 items fit the SpMV kernel in 32
/// registers and 15.5 KB, eight blocks an SM (11 items: 36 registers, six), and took 0.87× the
/// time of 11 on `banded-3000000` (288 → 250 µs), 0.9–1.0× on the medium corpus and 1.0× on the
/// large members whose gathers are random; 15 lost 3–10% on the medium power law, bimodal and
/// giant-row members.
const DEFAULT_ITEMS: u32 = 13;

/// `opts` with merge_path's default items per thread filled in (see [`DEFAULT_ITEMS`]).
fn with_default_items<'a>(body: &Body, opts: &'a Options) -> Cow<'a, Options> {
    if opts.items_per_thread > 1
        || !work_oriented::may_stage_values(body, opts.tiles.is_some())
        || staged_bytes(body, opts, DEFAULT_ITEMS) > work_oriented::SHARED_LIMIT
    {
        return Cow::Borrowed(opts);
    }
    Cow::Owned(Options {
        items_per_thread: DEFAULT_ITEMS,
        ..opts.clone()
    })
}

/// Shared memory of the main kernel with `items` per thread: the array of the staged tile ends
/// (and values, ahead of them, when the body's values are staged: see `ends_after_values`), the
/// carry scan's values and flags, and the neighbour exchange.
fn staged_bytes(body: &Body, opts: &Options, items: u32) -> u64 {
    let width = if opts.index == IndexWidth::U32 { 4 } else { 8 };
    let (slot, pad) = match body.reduce {
        Some((ty, _)) if work_oriented::may_stage_values(body, opts.tiles.is_some()) => {
            (u64::from(ty.size()).max(width), width)
        }
        _ => (width, 0),
    };
    let scan = body.reduce.map_or(0, |(ty, _)| u64::from(ty.size()) + 4);
    let aligned = if pad > 0 {
        u64::from(ALIGN_SLOTS) * slot
    } else {
        0
    };
    u64::from(opts.block) * (u64::from(items) * slot + scan)
        + aligned
        + pad
        + work_oriented::next_thread_bytes(opts.block)
}

/// Without a frontier the blocks' diagonals are searched once per tile set: a partition kernel
/// (one thread per block boundary, Merrill & Garland's "path search" kernel) writes where each
/// block's share starts into `merge_bounds`, which is cached with the tile set, so on later
/// launches the main kernel starts walking at once instead of each block first paying a
/// serial search of the whole tile set in global memory. Every lane shares the partition.
fn with_partition(plan: &mut Plan) {
    let mut kernels = plan.kernels.to_vec();
    let main = kernels[0].clone();
    kernels.insert(
        0,
        KernelPlan {
            entry: Cow::Owned(format!("{}_partition", main.entry)),
            ..main
        },
    );
    let mut temps = plan.temps.to_vec();
    temps.push(Temp {
        name: Cow::Borrowed(BOUNDS_TEMP),
        elem_bytes: 8,
        count: TempCount::PerBlock { extra: 1 },
        zero: false,
        role: TempRole::Cached { producers: 1 },
    });
    plan.kernels = Cow::Owned(kernels);
    plan.temps = Cow::Owned(temps);
}

/// `merge_bounds`: the plan's last temporary ([`with_partition`] pushes it last).
fn bounds_temp(f: &Frame) -> Reg {
    *f.params
        .temps
        .last()
        .expect("a merge_path plan without a frontier ends with `merge_bounds`")
}

/// Thread `g` of the grid writes `merge_bounds[g]`, the tiles finished before diagonal
/// `g × capacity`, for `g` in `0..=blocks` (blocks of one lane). The grid is the main kernel's,
/// which has more than `blocks + 1` threads.
fn partition_kernel(body: &Body, opts: &Options, plan: &Plan) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(plan.kernels[0].entry.as_ref());
    let f = work_oriented::frame(&mut b, body, opts, plan, true)?;
    let bounds = bounds_temp(&f);
    let done = b.label();
    let g = work_oriented::boundary_thread(&mut b, &f, done);
    let d = b.bin(BinOp::Mul, Type::U64, g, Operand::Imm(f.capacity));
    let d = b.bin(BinOp::Min, Type::U64, d, f.work);
    let zero = b.mov(Type::U64, Operand::Imm(0));
    let x = diagonal_search(
        &mut b,
        Type::U64,
        d,
        f.atoms,
        (zero, f.layout.tiles),
        &mut |b, pivot| work_oriented::global_end_u64(b, &f, pivot),
    );
    let addr = b.elem_addr(bounds, g, 8);
    b.st(Space::Global, Type::U64, addr, x);
    b.place(done);
    Ok(b.finish())
}

/// The first `i` in `lo..hi` (clamped to the diagonal) with `end(i) > d - i - 1`: the number of
/// tiles finished before diagonal `d`. Every register has width `w`.
fn diagonal_search(
    b: &mut KernelBuilder,
    w: Type,
    d: Reg,
    atoms: Reg,
    (lo, hi): (Reg, Reg),
    end: &mut dyn FnMut(&mut KernelBuilder, Reg) -> Reg,
) -> Reg {
    let over = b.setp(Cmp::Gt, w, d, atoms);
    let diff = b.bin(BinOp::Sub, w, d, atoms);
    let zero = b.mov(w, Operand::Imm(0));
    let below = b.selp(w, diff, zero, over);
    let x_min = b.bin(BinOp::Max, w, lo, below);
    let x_max = b.bin(BinOp::Min, w, d, hi);
    let search = b.loop_begin();
    let found = b.setp(Cmp::Ge, w, x_min, x_max);
    b.break_if(&search, found, false);
    let span = b.bin(BinOp::Sub, w, x_max, x_min);
    let half = b.bin(BinOp::Shr, w, span, Operand::Imm(1));
    let pivot = b.bin(BinOp::Add, w, x_min, half);
    let e = end(b, pivot);
    let rest = b.bin(BinOp::Sub, w, d, pivot);
    let rest = b.bin(BinOp::Sub, w, rest, Operand::Imm(1));
    let finished = b.setp(Cmp::Le, w, e, rest);
    let next = b.bin(BinOp::Add, w, pivot, Operand::Imm(1));
    select_to(b, w, x_min, next, x_min, finished);
    select_to(b, w, x_max, x_max, pivot, finished);
    b.loop_end(search);
    x_min
}

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    if f.frontier {
        return frontier_share(b, f);
    }
    let w = f.w;
    // With the values ahead of the ends: room for the ends' alignment after the values, and
    // for the values of the atoms the aligned staging starts below the block's first.
    let (slot, pad) = f
        .stageable
        .map_or((w.size(), 0), |ty| (ty.size().max(w.size()), w.size()));
    let slots = f.capacity as u32 + if f.aligns_staging { ALIGN_SLOTS } else { 0 };
    b.shared(TILE_ENDS, 8, slots * slot + pad);

    let start = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.capacity));
    let d0 = b.bin(BinOp::Min, Type::U64, start, f.work);
    let stop = b.bin(BinOp::Add, Type::U64, d0, Operand::Imm(f.capacity));
    let d1 = b.bin(BinOp::Min, Type::U64, stop, f.work);

    // Where the block's diagonals cross the tiles, from the partition kernel.
    let at = b.elem_addr(bounds_temp(f), f.cta, 8);
    let cache = LdCache::Default;
    let i_start = b.ld_global(Type::U64, (at, 0), cache);
    let i_end = b.ld_global(Type::U64, (at, 8), cache);
    // The block's atoms: its diagonals minus the tiles finished before them.
    let block_first = b.bin(BinOp::Sub, Type::U64, d0, i_start);
    let block_end = b.bin(BinOp::Sub, Type::U64, d1, i_end);
    let block_first = if f.aligns_staging {
        aligned_first(b, f, (block_first, block_end))
    } else {
        block_first
    };
    let stage = b.mov(Type::U64, Operand::Symbol(TILE_ENDS.into()));
    let (base, values) = match f.stageable {
        Some(ty) => (
            ends_after_values(b, w, stage, ty, (block_first, block_end)),
            Some(stage),
        ),
        None => (stage, None),
    };
    let count = b.bin(BinOp::Sub, Type::U64, i_end, i_start);
    work_oriented::stage_tile_ends(b, f, base, (i_start, count));
    b.emit(Op::BarSync);

    let mine = b.bin(BinOp::Mul, Type::U64, f.tid, f.per_thread.clone());
    let mine = b.bin(BinOp::Add, Type::U64, d0, mine);
    let t0 = b.bin(BinOp::Min, Type::U64, mine, f.work);
    let past = b.bin(BinOp::Add, Type::U64, t0, f.per_thread.clone());
    let t1 = b.bin(BinOp::Min, Type::U64, past, f.work);
    let (t0, t1) = (narrow(b, w, t0), narrow(b, w, t1));
    let atoms = narrow(b, w, f.atoms);
    let first = narrow(b, w, i_start);
    let last = narrow(b, w, i_end);
    let mut staged_end = |b: &mut KernelBuilder, pivot: Reg| {
        let k = b.bin(BinOp::Sub, w, pivot, first);
        let k = work_oriented::widen(b, w, k);
        let addr = b.elem_addr(base, k, w.size());
        b.ld(Space::Shared, w, addr)
    };
    let i0 = diagonal_search(b, w, t0, atoms, (first, last), &mut staged_end);
    let j0 = b.bin(BinOp::Sub, w, t0, i0);
    // The next thread searched this thread's end diagonal; the block's end is `i_end`.
    let i1 = work_oriented::from_next_thread(b, f, i0, &mut |_| last);
    let j1 = b.bin(BinOp::Sub, w, t1, i1);
    Share {
        i0,
        j0,
        i1,
        j1,
        ends: TileEnds::Shared { base, first, count },
        block_atoms: Some((block_first, block_end)),
        values,
    }
}

/// Where the block's staged values start: its first atom rounded down to
/// [`work_oriented::STAGING_ALIGN`], so that every warp's loads of the atoms' indices and values
/// each read one line, unless the rounds of the staging pass (`capacity` atoms from there) would
/// then not reach the block's last atom (a block of long rows, whose few tiles leave it nearly
/// `capacity` atoms): then its first atom. The same in every thread of the block.
fn aligned_first(b: &mut KernelBuilder, f: &Frame, (first, end): (Reg, Reg)) -> Reg {
    let down = b.bin(
        BinOp::And,
        Type::B64,
        first,
        Operand::Imm(!(work_oriented::STAGING_ALIGN as i64 - 1)),
    );
    let span = b.bin(BinOp::Sub, Type::U64, end, down);
    let fits = b.setp(Cmp::Le, Type::U64, span, Operand::Imm(f.capacity));
    b.selp(Type::U64, down, first, fits)
}

/// Where the tile ends go when the block's values are staged ahead of them in the same array:
/// after the block's `atoms` values of type `ty`, aligned to the ends' width `w`. A block's
/// share is at most `capacity` items, tiles and atoms together, so one array of `capacity`
/// slots (plus the alignment) holds both; two arrays of `capacity` each took 24.7 KB a block at
/// 11 items, which left six resident blocks only 92 KB of the 256 KB an H100 or H200 SM shares
/// between L1 and shared memory, where the random gathers of `x` want all the L1 they can get
/// (docs/benchmarks.md, thirty-eighth and thirty-ninth sessions).
fn ends_after_values(
    b: &mut KernelBuilder,
    w: Type,
    stage: Reg,
    ty: Ty,
    (first, end): (Reg, Reg),
) -> Reg {
    let atoms = b.bin(BinOp::Sub, Type::U64, end, first);
    let mut bytes = b.bin(BinOp::Mul, Type::U64, atoms, Operand::Imm(ty.size().into()));
    if !ty.size().is_multiple_of(w.size()) {
        let align = i64::from(w.size()) - 1;
        let up = b.bin(BinOp::Add, Type::U64, bytes, Operand::Imm(align));
        bytes = b.bin(BinOp::And, Type::B64, up, Operand::Imm(!align));
    }
    b.bin(BinOp::Add, Type::U64, stage, bytes)
}

/// With a frontier a thread's share grows with the frontier's atoms (see `work_oriented`'s
/// frame), so a block's tiles need not fit the shared staging array: each thread searches its
/// two diagonals over every tile, reading the scanned offsets from global memory.
fn frontier_share(b: &mut KernelBuilder, f: &Frame) -> Share {
    let w = f.w;
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.block));
    let thread = b.bin(BinOp::Add, Type::U64, first, f.tid);
    let start = b.bin(BinOp::Mul, Type::U64, thread, f.per_thread.clone());
    let t0 = b.bin(BinOp::Min, Type::U64, start, f.work);
    let past = b.bin(BinOp::Add, Type::U64, t0, f.per_thread.clone());
    let t1 = b.bin(BinOp::Min, Type::U64, past, f.work);
    let (t0, t1) = (narrow(b, w, t0), narrow(b, w, t1));
    let atoms = narrow(b, w, f.atoms);
    let lo = b.mov(w, Operand::Imm(0));
    let hi = narrow(b, w, f.layout.tiles);
    let mut end = |b: &mut KernelBuilder, pivot: Reg| global_end(b, f, pivot);
    let i0 = diagonal_search(b, w, t0, atoms, (lo, hi), &mut end);
    let j0 = b.bin(BinOp::Sub, w, t0, i0);
    let i1 = diagonal_search(b, w, t1, atoms, (lo, hi), &mut end);
    let j1 = b.bin(BinOp::Sub, w, t1, i1);
    Share {
        i0,
        j0,
        i1,
        j1,
        ends: TileEnds::Global,
        block_atoms: None,
        values: None,
    }
}
