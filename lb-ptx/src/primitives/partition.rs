//! What `two_phase` and `multi_phase` share: the searches of a prefix sum (lower-bound binary
//! and interpolation), the partition kernel that finds each block's first tile, and the
//! expansion's share search over the block's tile offsets staged in shared memory (which
//! `block_search` also uses, for a range its block found itself: `stage_range`).
//!
//! Busato & Bombieri `seeds/000_441aa2418e6e0d1e.txt` §2.4.4 (two-phase search, after Davidson
//! et al., Green et al. and Baxter): "the whole prefix-sum array is partitioned into *balanced*
//! chunks, i.e., chunks that point to the same amount of work-units"; "one thread per block runs
//! a binary search on the whole prefix-sum array in global memory"; "the new partition array,
//! which contains all the chunk boundaries, is stored in global memory"; then "all the threads of
//! each block load the corresponding chunks into the shared memory" and "each thread ... runs a
//! binary search in such a local partition to get the (first) assigned work-unit".
//!
//! Here a work-unit is an atom and the prefix sum is the tile offsets. Block `c` takes atoms
//! `c × chunk .. (c + 1) × chunk` with `chunk = items_per_thread × block`, and thread `g` of the
//! lane takes `items_per_thread` of them, as in `nonzero_split` (the thread's share in
//! merge-path coordinates, the walk, the carry-out and the fix-up are
//! [`super::work_oriented`]'s). The partition kernel writes `block_starts[c]`, the number of
//! tiles that end at or before atom `c × chunk` (0 for block 0, so that it also finishes the
//! empty tiles at the front; `tiles` for the slot after the last block). Every search of block
//! `c` then lies in `block_starts[c] ..= block_starts[c + 1]`. Only atoms are work, so a block's
//! range may hold any number of empty tiles: it is staged in shared memory when it fits in
//! `items_per_thread × block` entries (always, unless long runs of empty tiles fall into one
//! chunk), and searched in global memory otherwise.

use std::borrow::Cow;

use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::ir::{BinOp, Cmp, Kernel, Op, Operand, Reg, Rounding, Space, Type};
use crate::plan::{KernelPlan, Plan, Select, Temp, TempCount, TempRole};
use crate::primitives::work_oriented::frontier_scan;
use crate::primitives::work_oriented::{
    self, boundary_thread, global_end, narrow, select_to, temp_index, widen, Frame, Share, TileEnds,
};
use crate::{GenError, IndexWidth, Options};

/// `block_starts`: u64, one per block of the main kernel plus one. It is the plan's last
/// temporary, which is how the share search (a plain `fn`) finds it among `KernelParams::temps`.
const BLOCK_STARTS: &str = "block_starts";
/// The block's staged tile end offsets.
const STAGED_ENDS: &str = "lb_staged_ends";
/// The block's first tile and the tile after its last, found by the block itself
/// ([`block_range`]).
const BLOCK_RANGE: &str = "lb_block_range";
/// Static shared memory every target offers a block.
pub const SHARED_LIMIT: u32 = 48 * 1024;

/// The shared memory of a two-phase block: its staged tile offsets (64-bit unless the plans are
/// 32-bit only), its carry scan, and `buffer` more bytes.
pub fn shared_bytes(body: &Body, opts: &Options, buffer: u64) -> u64 {
    let width = if opts.index == IndexWidth::U32 { 4 } else { 8 };
    let scan = body.reduce.map_or(0, |(ty, _)| u64::from(ty.size()) + 4);
    let staged = u64::from(work_oriented::items_per_thread(opts)) * width;
    u64::from(opts.block) * (staged + scan) + buffer
}

/// How a prefix sum is searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// The lower-bound-only binary search of B&B §3.1.1: one load per step ("each thread checks,
    /// at each iteration, only the lower bound").
    LowerBound,
    /// The interpolation search of B&B §3.1.2 with integer arithmetic ("replacing them with
    /// 64-bit integer operations when possible"): `O(log log n)` steps on evenly spread offsets.
    Interpolation,
}

/// The first `i` in `lo..hi` with `end(i) > a`, or `hi` when there is none: the number of
/// entries of a sorted array that are at most `a`, counted from `lo`. Registers of width `w`;
/// `end` loads entry `i`. `lo` and `hi` are copied, not changed.
pub fn tiles_ending_by(
    b: &mut KernelBuilder,
    w: Type,
    search: Search,
    a: Reg,
    (lo, hi): (Reg, Reg),
    end: &mut dyn FnMut(&mut KernelBuilder, Reg) -> Reg,
) -> Reg {
    let lo = b.mov(w, lo);
    let hi = b.mov(w, hi);
    // Interpolation alternates with bisection, by the parity of the step.
    let round = (search == Search::Interpolation).then(|| b.mov(Type::U32, Operand::Imm(0)));
    let steps = b.loop_begin();
    let found = b.setp(Cmp::Ge, w, lo, hi);
    b.break_if(&steps, found, false);
    let pivot = match (search, round) {
        (Search::LowerBound, _) | (Search::Interpolation, None) => {
            let span = b.bin(BinOp::Sub, w, hi, lo);
            let half = b.bin(BinOp::Shr, w, span, Operand::Imm(1));
            b.bin(BinOp::Add, w, lo, half)
        }
        (Search::Interpolation, Some(round)) => {
            // B&B's loop runs while `Array[left] <= S <= Array[right]`; outside that the answer
            // is an end of the range.
            let first = end(b, lo);
            let above = b.setp(Cmp::Gt, w, first, a);
            b.break_if(&steps, above, false);
            let last = b.bin(BinOp::Sub, w, hi, Operand::Imm(1));
            let top = end(b, last);
            let below = b.setp(Cmp::Le, w, top, a);
            select_to(b, w, lo, hi, lo, below);
            b.break_if(&steps, below, false);
            // Now `end(lo) <= a < end(hi - 1)`, so `hi - lo >= 2` and the probe
            // `lo + (a - end(lo)) × n / rise` lies in `lo..hi - 1`. It is computed exactly
            // (a slope rounded to an integer overshoots by the same fraction every step, and
            // the search then creeps towards the answer one probe at a time: 87.8 ms on a road
            // network on an H200). Every other step bisects instead, which bounds the steps by
            // twice binary search's on offsets that are not evenly spread.
            let n = b.bin(BinOp::Sub, w, last, lo);
            let rise = b.bin(BinOp::Sub, w, top, first);
            let offset = b.bin(BinOp::Sub, w, a, first);
            let step = interpolation_step(b, w, offset, n, rise);
            let interpolated = b.bin(BinOp::Add, w, lo, step);
            let span = b.bin(BinOp::Sub, w, hi, lo);
            let half = b.bin(BinOp::Shr, w, span, Operand::Imm(1));
            let middle = b.bin(BinOp::Add, w, lo, half);
            let parity = b.bin(BinOp::And, Type::B32, round, Operand::Imm(1));
            let bisects = b.setp(Cmp::Ne, Type::U32, parity, Operand::Imm(0));
            b.bin_to(BinOp::Add, Type::U32, round, round, Operand::Imm(1));
            b.selp(w, middle, interpolated, bisects)
        }
    };
    let e = end(b, pivot);
    let before = b.setp(Cmp::Le, w, e, a);
    let next = b.bin(BinOp::Add, w, pivot, Operand::Imm(1));
    select_to(b, w, lo, next, lo, before);
    select_to(b, w, hi, hi, pivot, before);
    b.loop_end(steps);
    lo
}

/// `⌊offset × n / rise⌋` for `offset < rise` (so the result is below `n`), at width `w`: exact
/// in 64-bit integers for 32-bit operands, in double precision for 64-bit ones (B&B §3.1.2:
/// "minimizing the expensive double precision operations and ... replacing them with 64-bit
/// integer operations when possible"), then clamped below `n`.
fn interpolation_step(b: &mut KernelBuilder, w: Type, offset: Reg, n: Reg, rise: Reg) -> Reg {
    if w == Type::U32 {
        let offset = widen(b, w, offset);
        let n = widen(b, w, n);
        let rise = widen(b, w, rise);
        let product = b.bin(BinOp::Mul, Type::U64, offset, n);
        let step = b.bin(BinOp::Div, Type::U64, product, rise);
        return narrow(b, w, step);
    }
    let as_f64 = |b: &mut KernelBuilder, r: Reg| b.cvt(Rounding::Rn, Type::F64, Type::U64, r);
    let (offset, n_f, rise) = (as_f64(b, offset), as_f64(b, n), as_f64(b, rise));
    let scaled = b.bin(BinOp::Mul, Type::F64, offset, n_f);
    let ratio = b.bin(BinOp::Div, Type::F64, scaled, rise);
    let step = b.cvt(Rounding::Rzi, Type::U64, Type::F64, ratio);
    let below = b.bin(BinOp::Sub, Type::U64, n, Operand::Imm(1));
    b.bin(BinOp::Min, Type::U64, step, below)
}

/// Whether a two-phase plan's main kernel strides over a frontier's virtual blocks
/// ([`FrontierGrid::Strided`](crate::plan::FrontierGrid::Strided)): over every frontier. Its
/// blocks then find their tiles themselves ([`stage_block`]): the partition kernel would need
/// one `block_starts` entry per virtual block, and their number is known only once the
/// frontier's atoms are summed on the device. A reducing body's carries are counted for the
/// grid's bound, as in every strided work-oriented plan.
pub fn strides(opts: &Options) -> bool {
    opts.tiles.is_some()
}

/// The static shared memory of a two-phase plan's main kernel: [`shared_bytes`] with `buffer`,
/// plus, for a strided plan ([`strides`]), the 16 bytes through which its blocks pass their
/// range ([`block_range`]). What a schedule that sizes its shape to fit must count.
pub fn plan_shared_bytes(body: &Body, opts: &Options, buffer: u64) -> u64 {
    let range = if strides(opts) { 16 } else { 0 };
    shared_bytes(body, opts, buffer + range)
}

/// The plans of a two-phase schedule: `work_oriented`'s (atoms as work, one per index width)
/// with the partition kernel before the main kernel and `block_starts` last among the
/// temporaries, once per `(variant, select)`. Variants differ only in their partition kernel,
/// whose entry carries the variant's name; the others are shared (one copy in the module,
/// see [`crate::generate`]). A strided plan ([`strides`]) has neither the partition kernel nor
/// `block_starts`.
pub fn plans(
    body: &Body,
    opts: &Options,
    schedule: &'static str,
    variants: &[(&str, Option<Select>)],
    buffer: u64,
) -> Result<Vec<Plan>, GenError> {
    let bytes = plan_shared_bytes(body, opts, buffer);
    if bytes > u64::from(SHARED_LIMIT) {
        let buffered = if buffer > 0 {
            format!(", plus {buffer} bytes of expansion buffer,")
        } else {
            String::new()
        };
        return Err(GenError::BadBlock {
            schedule,
            block: opts.block,
            why: format!(
                "a block stages `block × items_per_thread` tile offsets and scans its carries in \
                 shared memory{buffered} ({bytes} bytes, over {SHARED_LIMIT}): use fewer threads \
                 or items per thread"
            ),
        });
    }
    if strides(opts) {
        // Over a frontier each virtual block searches for its own tiles in the main kernel
        // ([`stage_block`]), so there is no partition kernel and no `block_starts`, whose length
        // the host could not bound.
        let mut out = Vec::new();
        for base in work_oriented::strided_plans(body, opts, schedule, false)? {
            for &(_, select) in variants {
                out.push(Plan {
                    select,
                    ..base.clone()
                });
            }
        }
        return Ok(out);
    }
    let prefix = format!("{}_{schedule}_", body.name);
    let at = if opts.tiles.is_some() {
        frontier_scan::KERNELS
    } else {
        0
    };
    let mut out = Vec::new();
    for base in work_oriented::plans(body, opts, schedule, false)? {
        for &(variant, select) in variants {
            let mut kernels = base.kernels.to_vec();
            // The main kernel's grid: `block_starts` is counted per block of the plan's first
            // kernel, which must be the main kernel's.
            let main = kernels[at].clone();
            let rest = main
                .entry
                .strip_prefix(prefix.as_str())
                .unwrap_or(&main.entry);
            let partition = if variant.is_empty() {
                format!("{}_partition", main.entry)
            } else {
                format!("{prefix}{variant}_{rest}_partition")
            };
            kernels.insert(
                at,
                KernelPlan {
                    entry: Cow::Owned(partition),
                    ..main
                },
            );
            let mut temps = base.temps.to_vec();
            // Without a frontier the partition depends only on the tile set (every lane shares
            // it, so the first launch's array is long enough for any lane count): it is cached
            // with the tile set and the partition kernel runs on the first launch only.
            let role = if opts.tiles.is_none() {
                TempRole::Cached { producers: 1 }
            } else {
                TempRole::Scratch
            };
            temps.push(Temp {
                name: Cow::Borrowed(BLOCK_STARTS),
                elem_bytes: 8,
                count: TempCount::PerBlock { extra: 1 },
                zero: false,
                role,
            });
            out.push(Plan {
                kernels: Cow::Owned(kernels),
                temps: Cow::Owned(temps),
                select,
                ..base.clone()
            });
        }
    }
    Ok(out)
}

/// The kernels of a two-phase plan: the frontier scan (with `tiles`), the partition, the `main`
/// kernel, and the fix-up when the body reduces.
pub fn build(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    search: Search,
    main: Kernel,
) -> Result<Vec<Kernel>, GenError> {
    build_with(body, opts, plan, (search, None), main)
}

/// [`build`] for a plan over a frontier that has [`with_squares`]: the partition picks its
/// search on the device from the frontier's tile sizes, by B&B §3.1.2's rule, `rule` =
/// `(max_avg, max_std_dev)` (interpolation when the mean, rounded up, is at most `max_avg`
/// atoms and the standard deviation at most `max_std_dev`), which the host applies to a whole tile set's statistics
/// ([`Select::Spread`]). The choice is uniform over the grid, and both searches find the same
/// boundaries, so it changes only how fast they are found.
pub fn build_measured(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    rule: (u64, u64),
    main: Kernel,
) -> Result<Vec<Kernel>, GenError> {
    build_with(body, opts, plan, (Search::LowerBound, Some(rule)), main)
}

/// Puts the frontier's [`frontier_scan::TILE_SQUARES`] among the plan's temporaries, before
/// `block_starts` where the plan has it (it stays last).
pub fn with_squares(plan: &mut Plan) {
    let mut temps = plan.temps.to_vec();
    let at = match temps.last() {
        Some(t) if t.name == BLOCK_STARTS => temps.len() - 1,
        _ => temps.len(),
    };
    temps.insert(at, frontier_scan::squares_temp());
    plan.temps = Cow::Owned(temps);
}

fn build_with(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    search: (Search, Option<(u64, u64)>),
    main: Kernel,
) -> Result<Vec<Kernel>, GenError> {
    let mut kernels = Vec::new();
    let at = if opts.tiles.is_some() {
        kernels.extend(frontier_scan::kernels(body, opts, plan)?);
        frontier_scan::KERNELS
    } else {
        0
    };
    if !strides(opts) {
        kernels.push(partition_kernel(body, opts, plan, at, search)?);
    }
    kernels.push(main);
    if body.reduce.is_some() {
        kernels.push(work_oriented::fixup::fixup_kernel(body, opts, plan, false)?);
    }
    Ok(kernels)
}

/// `items_per_thread × block` (u64): the atoms of one block.
pub fn chunk(b: &mut KernelBuilder, f: &Frame) -> Reg {
    match f.per_thread {
        Operand::Imm(n) => b.mov(Type::U64, Operand::Imm(n * f.block)),
        ref share => b.bin(BinOp::Mul, Type::U64, share.clone(), Operand::Imm(f.block)),
    }
}

/// The partition phase (B&B §2.4.4): thread `g` of the grid searches the tile offsets in global
/// memory for chunk boundary `g` and writes `block_starts[g]`, for `g` in `0..=blocks` (blocks
/// of one lane; every lane shares the partition). The grid is the main kernel's, which has at
/// least `blocks + 1` threads for any block of two or more threads.
fn partition_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    at: usize,
    (search, rule): (Search, Option<(u64, u64)>),
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(plan.kernels[at].entry.as_ref());
    let f = work_oriented::frame(&mut b, body, opts, plan, false)?;
    let starts = f.params.temps[temp_index(plan, BLOCK_STARTS)?];
    let w = f.w;
    let done = b.label();
    let g = boundary_thread(&mut b, &f, done);
    let chunk = chunk(&mut b, &f);
    let a = b.bin(BinOp::Mul, Type::U64, g, chunk);
    let a = b.bin(BinOp::Min, Type::U64, a, f.atoms);
    let a = narrow(&mut b, w, a);
    let lo = b.mov(w, Operand::Imm(0));
    let hi = narrow(&mut b, w, f.layout.tiles);
    let searcher = Searcher::new(&mut b, &f, plan, search, rule)?;
    let start = searcher.global(&mut b, &f, a, (lo, hi));
    let start = widen(&mut b, w, start);
    let front = b.setp(Cmp::Eq, Type::U64, g, Operand::Imm(0));
    let start = b.selp(Type::U64, Operand::Imm(0), start, front);
    let addr = b.elem_addr(starts, g, 8);
    b.st(Space::Global, Type::U64, addr, start);
    b.place(done);
    Ok(b.finish())
}

/// How a block boundary is searched in the tile offsets in global memory: always the same way,
/// or by a predicate measured on the device (interpolation when it holds: B&B §3.1.2's rule on the
/// frontier's mean and spread).
#[derive(Clone, Copy)]
pub enum Searcher {
    Fixed(Search),
    Measured(Reg),
}

impl Searcher {
    /// The first `i` in `lo..hi` with `offsets[i + 1] > a` (width `Frame::w`), searched in
    /// global memory ([`tiles_ending_by`]).
    pub fn global(self, b: &mut KernelBuilder, f: &Frame, a: Reg, (lo, hi): (Reg, Reg)) -> Reg {
        let w = f.w;
        let mut end = |b: &mut KernelBuilder, i: Reg| global_end(b, f, i);
        match self {
            Searcher::Fixed(search) => tiles_ending_by(b, w, search, a, (lo, hi), &mut end),
            Searcher::Measured(interpolates) => {
                let start = b.reg_for(w);
                let mut choice = b.if_begin(interpolates, false);
                let found = tiles_ending_by(b, w, Search::Interpolation, a, (lo, hi), &mut end);
                b.mov_to(w, start, found);
                b.if_else(&mut choice);
                let found = tiles_ending_by(b, w, Search::LowerBound, a, (lo, hi), &mut end);
                b.mov_to(w, start, found);
                b.if_end(choice);
                start
            }
        }
    }

    /// By the frontier's spread with B&B §3.1.2's `rule` (`(max_avg, max_std_dev)`, a plan
    /// with [`with_squares`]), or always with `search`.
    pub fn new(
        b: &mut KernelBuilder,
        f: &Frame,
        plan: &Plan,
        search: Search,
        rule: Option<(u64, u64)>,
    ) -> Result<Searcher, GenError> {
        Ok(match rule {
            Some(rule) => Searcher::Measured(spread_is_low(b, f, plan, rule)?),
            None => Searcher::Fixed(search),
        })
    }

    /// The searcher of a strided plan over a frontier: by the frontier's spread when the plan
    /// measures it ([`with_squares`], B&B §3.1.2's rule `rule`), else `search`.
    pub fn for_plan(
        b: &mut KernelBuilder,
        f: &Frame,
        plan: &Plan,
        search: Search,
        rule: (u64, u64),
    ) -> Result<Searcher, GenError> {
        let measured = frontier_scan::squares_slot(plan).map(|_| rule);
        Searcher::new(b, f, plan, search, measured)
    }
}

/// Whether the frontier's tile sizes satisfy B&B §3.1.2's rule for the interpolation search
/// (a predicate): `⌈atoms / len⌉ ≤ max_avg` and a variance `squares / len − mean²` of at most
/// `max_std_dev²`, from the frontier scan's total (`tile_offsets[len]`) and
/// [`frontier_scan::TILE_SQUARES`]. An empty frontier interpolates, as the host's rule does.
fn spread_is_low(
    b: &mut KernelBuilder,
    f: &Frame,
    plan: &Plan,
    (max_avg, max_std_dev): (u64, u64),
) -> Result<Reg, GenError> {
    let k = frontier_scan::squares_slot(plan).ok_or_else(|| {
        GenError::Unsupported("a measured partition needs the frontier's `tile_squares`".into())
    })?;
    let squares = b.ld(Space::Global, Type::U64, f.params.temps[k]);
    let len = b.bin(BinOp::Max, Type::U64, f.layout.tiles, Operand::Imm(1));
    let up = b.bin(BinOp::Add, Type::U64, f.atoms, len);
    let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
    let avg = b.bin(BinOp::Div, Type::U64, up, len);
    let small = b.setp(Cmp::Le, Type::U64, avg, Operand::Imm(max_avg as i64));
    let as_f64 = |b: &mut KernelBuilder, r: Reg| b.cvt(Rounding::Rn, Type::F64, Type::U64, r);
    let (n, sum, sq) = (as_f64(b, len), as_f64(b, f.atoms), as_f64(b, squares));
    let mean = b.bin(BinOp::Div, Type::F64, sum, n);
    let second = b.bin(BinOp::Div, Type::F64, sq, n);
    let mean_sq = b.bin(BinOp::Mul, Type::F64, mean, mean);
    let variance = b.bin(BinOp::Sub, Type::F64, second, mean_sq);
    let limit = (max_std_dev as f64).powi(2);
    let even = b.setp(Cmp::Le, Type::F64, variance, Operand::F64(limit.to_bits()));
    Ok(b.bin(BinOp::And, Type::Pred, small, even))
}

/// A block's tiles, `block_starts[c] .. block_starts[c + 1]` (`lo..hi`, width `Frame::w`), and
/// where their end offsets are read: staged in shared memory when they fit.
pub struct Staged {
    pub lo: Reg,
    pub hi: Reg,
    pub ends: TileEnds,
}

/// Stages the end offsets of the block's tiles in shared memory when they fit in
/// `Frame::capacity` entries (B&B §2.4.4: "all the threads of each block load the corresponding
/// chunks into the shared memory"), coalesced: consecutive threads load consecutive offsets.
/// Ends with a barrier.
pub fn stage(b: &mut KernelBuilder, f: &Frame) -> Staged {
    let starts = *f
        .params
        .temps
        .last()
        .expect("a two-phase plan ends with `block_starts`");
    let addr = b.elem_addr(starts, f.cta, 8);
    let s0 = b.ld(Space::Global, Type::U64, addr);
    let next = b.bin(BinOp::Add, Type::U64, addr, Operand::Imm(8));
    let s1 = b.ld(Space::Global, Type::U64, next);
    stage_range(b, f, (s0, s1))
}

/// The block's tiles staged in shared memory ([`stage_range`]): from `block_starts` ([`stage`]),
/// or in a strided main kernel ([`strides`]), which has no partition kernel, found by the block
/// itself with `searcher` ([`block_range`]). Ends with a barrier.
pub fn stage_block(b: &mut KernelBuilder, f: &Frame, searcher: Searcher) -> Staged {
    if f.stride.is_none() {
        return stage(b, f);
    }
    let range = block_range(b, f, searcher);
    stage_range(b, f, range)
}

/// The block's first tile and the tile after its last (u64 each, the same in every thread),
/// found by the block itself in global memory with `searcher`: two threads search at once, one
/// for each end of the block's atoms (thread 0 and the first thread of the second warp, or
/// thread 0 for both in a block of one warp), as the partition kernel's threads would for two
/// boundaries, and hand the tiles to the block through shared memory. Block 0 starts at tile 0,
/// so that it also finishes the empty tiles at the front. Declares 16 bytes of shared memory;
/// ends with a barrier.
pub fn block_range(b: &mut KernelBuilder, f: &Frame, searcher: Searcher) -> (Reg, Reg) {
    b.shared(BLOCK_RANGE, 8, 16);
    let slots = b.mov(Type::U64, Operand::Symbol(BLOCK_RANGE.into()));
    let chunk = chunk(b, f);
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, chunk);
    let first = b.bin(BinOp::Min, Type::U64, first, f.atoms);
    let past = b.bin(BinOp::Add, Type::U64, first, chunk);
    let past = b.bin(BinOp::Min, Type::U64, past, f.atoms);
    let second = if f.block >= 64 { 32 } else { 0 };
    for (thread, a, slot) in [(0, first, 0), (second, past, 8)] {
        let mine = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(thread));
        let scope = b.if_begin(mine, false);
        let a = narrow(b, f.w, a);
        let lo = b.mov(f.w, Operand::Imm(0));
        let hi = narrow(b, f.w, f.layout.tiles);
        let found = searcher.global(b, f, a, (lo, hi));
        let found = widen(b, f.w, found);
        let found = if slot == 0 {
            let front = b.setp(Cmp::Eq, Type::U64, f.cta, Operand::Imm(0));
            b.selp(Type::U64, Operand::Imm(0), found, front)
        } else {
            found
        };
        let addr = b.bin(BinOp::Add, Type::U64, slots, Operand::Imm(slot));
        b.st(Space::Shared, Type::U64, addr, found);
        b.if_end(scope);
    }
    b.emit(Op::BarSync);
    let s0 = b.ld(Space::Shared, Type::U64, slots);
    let end_slot = b.bin(BinOp::Add, Type::U64, slots, Operand::Imm(8));
    let s1 = b.ld(Space::Shared, Type::U64, end_slot);
    (s0, s1)
}

/// [`stage`] for the block's tiles `s0 .. s1` (u64, block-uniform), however the block found
/// them. Ends with a barrier.
pub fn stage_range(b: &mut KernelBuilder, f: &Frame, (s0, s1): (Reg, Reg)) -> Staged {
    let w = f.w;
    let stage = f.capacity as u32;
    b.shared(STAGED_ENDS, 8, stage * w.size());
    let count = b.bin(BinOp::Sub, Type::U64, s1, s0);
    let fits = b.setp(Cmp::Le, Type::U64, count, Operand::Imm(f.capacity));

    let base = b.mov(Type::U64, Operand::Symbol(STAGED_ENDS.into()));
    let scope = b.if_begin(fits, false);
    work_oriented::stage_tile_ends(b, f, base, (s0, count));
    b.if_end(scope);
    b.emit(Op::BarSync);
    let (lo, hi) = (narrow(b, w, s0), narrow(b, w, s1));
    Staged {
        lo,
        hi,
        ends: TileEnds::Staged {
            base,
            first: lo,
            fits,
        },
    }
}

/// The number of the block's tiles that end at or before atom `a` (width `Frame::w`, inside
/// the block's atoms), counted from tile 0: where a share starting or ending at `a` stands.
pub fn tiles_before(b: &mut KernelBuilder, f: &Frame, st: &Staged, search: Search, a: Reg) -> Reg {
    let mut end = |b: &mut KernelBuilder, i: Reg| work_oriented::tile_end(b, f, &st.ends, i);
    tiles_ending_by(b, f.w, search, a, (st.lo, st.hi), &mut end)
}

/// The expansion phase's search (B&B §2.4.4, §3.2): the block stages its tiles' end offsets
/// ([`stage`]), then each thread finds the tiles of its first and last atom there with `search`.
pub fn share(b: &mut KernelBuilder, f: &Frame, search: Search) -> Share {
    let st = stage_block(b, f, Searcher::Fixed(search));
    share_staged(b, f, &st, search)
}

/// The thread's share of [`share`], searched with `search` in the block's tiles `st`, however
/// they were staged.
pub fn share_staged(b: &mut KernelBuilder, f: &Frame, st: &Staged, search: Search) -> Share {
    let w = f.w;
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.block));
    let thread = b.bin(BinOp::Add, Type::U64, first, f.tid);
    let start = b.bin(BinOp::Mul, Type::U64, thread, f.per_thread.clone());
    let s = range_share(b, f, st, search, (start, f.per_thread.clone()), f.atoms);
    let front = b.setp(Cmp::Eq, Type::U64, thread, Operand::Imm(0));
    let zero = b.mov(w, Operand::Imm(0));
    let i0 = b.selp(w, zero, s.i0, front);
    Share { i0, ..s }
}

/// The share of the `len` atoms from `start` (u64), clipped to `limit` (u64, inside the
/// block's atoms), and the tiles where it starts and ends, found with `search` in the block's
/// staged offsets.
pub fn range_share(
    b: &mut KernelBuilder,
    f: &Frame,
    st: &Staged,
    search: Search,
    (start, len): (Reg, Operand),
    limit: Reg,
) -> Share {
    let w = f.w;
    let a0 = b.bin(BinOp::Min, Type::U64, start, limit);
    let stop = b.bin(BinOp::Add, Type::U64, a0, len.clone());
    let a1 = b.bin(BinOp::Min, Type::U64, stop, limit);
    let (a0, a1) = (narrow(b, w, a0), narrow(b, w, a1));
    let i0 = tiles_before(b, f, st, search, a0);
    // Shares are consecutive: this thread ends where the next one starts, and thread 0 finds
    // where the block's last thread ends (`start` and `len` are those of thread `tid`).
    let i1 = work_oriented::from_next_thread(b, f, i0, &mut |b| {
        let behind = b.bin(BinOp::Mul, Type::U64, f.tid, len.clone());
        let first = b.bin(BinOp::Sub, Type::U64, start, behind);
        let last_tid = b.mov(Type::U64, Operand::Imm(f.block - 1));
        let ahead = b.bin(BinOp::Mul, Type::U64, last_tid, len.clone());
        let last_start = b.bin(BinOp::Add, Type::U64, first, ahead);
        let a0 = b.bin(BinOp::Min, Type::U64, last_start, limit);
        let stop = b.bin(BinOp::Add, Type::U64, a0, len.clone());
        let a1 = b.bin(BinOp::Min, Type::U64, stop, limit);
        let a1 = narrow(b, w, a1);
        tiles_before(b, f, st, search, a1)
    });
    Share {
        i0,
        j0: a0,
        i1,
        j1: a1,
        ends: st.ends,
        block_atoms: None,
        values: None,
    }
}
