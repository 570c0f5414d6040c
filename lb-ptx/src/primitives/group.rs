//! The cooperative group walk behind `group_mapped(N)`, `warp_mapped` (N = 32), `block_mapped`
//! (N = block size) and `dynamic_virtual_warps`: one kernel builder for every group size.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.2 (Algorithm 2: a group takes an equal share of
//! tiles, builds the prefix sum of their atom counts, and every thread walks the group's atoms
//! with a stride of the group size, finding each atom's tile by a binary search in the prefix
//! sum), §4.4.2.2 (warp- and block-level: groups stride over their share; the hardware scheduler
//! balances across groups) and §4.4.2.3 (one template parameterised by the group size). Groups of
//! fewer than 32 threads are the virtual warps of Busato & Bombieri §2.2.2 and have their own
//! kernel (`virtual_warps`): one tile at a time per virtual warp, its lanes striding over the
//! tile's atoms, a butterfly on the warp's segment. The shape below is that of `N >= 32`.
//!
//! Shape of the kernel, for block size `B` and group size `N`:
//! - The grid strides over *block batches* of `B` consecutive tile positions; group `g` of the
//!   block takes positions `g·N .. g·N + N` of the batch, one per thread (its *slot*). The batch
//!   loop depends only on the block index, so every `bar.sync` below is reached by the whole
//!   block.
//! - The group's tiles are split by size, after CTA+Warp+Scan (Busato & Bombieri §2.3.2): big
//!   tiles are walked by many threads at once, small ones share rounds through a scan.
//!   - *Large* tiles (at least `min(N, 32)` atoms), one at a time in slot order: every thread of
//!     the shuffle group strides over the tile (thesis §4.4.2.2), keeps a partial, and one
//!     butterfly reduction per tile gives the total to the tile's owner. No per-atom search.
//!   - *Small* tiles (fewer atoms) follow Algorithm 2: the group scans their counts in 32 bits
//!     (their total is below `32 · 32`), and in round `k0` thread `r` takes flattened position
//!     `k0 + r`. The tile slot comes from a `log2 N`-step search over the prefix sums taken
//!     relative to `k0` and clipped to `0..=N` (lower bound only, every thread all steps: the
//!     optimized binary search of Busato & Bombieri §3.1.1), one 32-bit shuffle a step. With
//!     `reduce`, a segmented inclusive scan whose heads are the round-relative tile starts (no
//!     key shuffles) combines the round, and the owner of slot `j` (thread `j` of the group)
//!     folds the value at its tile's last position of the round into its accumulator.
//!   - For `N > 32` the shuffle groups are the warps, each over its own 32 slots; *huge* tiles
//!     (at least `N` atoms) are walked first by the whole group, striding by `N`, with one warp
//!     butterfly per warp and the warps' partials folded by the owner through shared memory (two
//!     barriers per huge tile, none per atom).
//! - After the walks the owner stores the tile's result (the identity for an empty tile).
//!
//! Collectives: inside a shuffle group everything goes through `shfl.sync`/`vote.sync` with the
//! group's own member mask and a sub-warp segment in the `c` operand, so several groups of one
//! warp never wait for each other and no shared memory is used for `N <= 32`. For `N > 32` a
//! static shared array sized from the plan's block holds the slots' atom ranges, the warps'
//! ballots of huge tiles and the warps' partials; the huge loop runs to the block's largest
//! count of huge tiles in a group so that every thread reaches every barrier.
//!
//! Determinism: every combination order is fixed by `N` and the tile set alone (not by the grid,
//! the block size for a fixed `N`, or timing): a thread's partial folds its atoms in increasing
//! order, butterflies are fixed trees over ranks, the owner folds warp partials in warp order and
//! round shares in round order, and no float atomics are used, so two launches agree bitwise. It
//! is not the sequential loop's order, so float sums may round differently from the CPU
//! reference; integer sums and min/max are exact.
//!
//! With lanes the group's threads split the tile's lanes instead of its atoms, as in GE-SpMM
//! (Huang et al., SC'20: a warp per row of A, its threads over the columns of B): up to N
//! threads side by side take a tile, each owning 1, 2 or 4 lanes (picked in the
//! kernel by the lane count) and walking the tile's atoms in order ([`own_tiles`]), so reads of
//! B's rows and writes of C's are coalesced and each atom's loads serve every lane of a thread.
//! The lanes give the group its parallelism, which the atoms gave without them; tiles of the
//! huge-tile split are still left to it. Atom and tile indices are 64-bit (`Options::index` is
//! not consulted); only the small-tile rounds run in 32 bits, which always suffices. The grid is
//! `Grid::CoverItems`.
//!
//! Huge tiles (at least [`crate::primitives::huge::threshold`] atoms, for every group size) are
//! empty, invalid slots here: the plan adds the huge-tile split's kernels around this one, and the
//! split walks them over the whole grid in chunks, folded back in a fixed order.

use std::borrow::Cow;

use crate::body::{Body, IndexRole, Reduce, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity, reduce_op, KernelParams};
use crate::ir::{
    AtomOp, BinOp, Cmp, Kernel, Op, Operand, Reg, RegClass, Rounding, ShflMode, Space, Special,
    Type, UnOp, VoteMode,
};
use crate::plan::{twin_base, Grid, KernelPlan, Plan, Select, Temp, TempCount, TempRole};
use crate::primitives::huge;
use crate::primitives::layout::{Layout, LANE_BLOCKING};
use crate::primitives::walker::{own_tiles, TileSource, Walker};
use crate::primitives::warp::batch_slot;
use crate::primitives::warp::{butterfly as warp_butterfly, butterfly_with};
use crate::primitives::work_oriented;
use crate::schedules::Schedule;
use crate::{GenError, Options};

/// The plan of a group size `n` under `schedule`, with kernel `entry`.
pub fn group_plan(
    body: &Body,
    opts: &Options,
    schedule: Schedule,
    n: u32,
    entry: String,
    select: Option<Select>,
) -> Result<Plan, GenError> {
    if n > opts.block {
        return Err(GenError::BadBlock {
            schedule: schedule.name(),
            block: opts.block,
            why: format!(
                "a group of {n} threads does not fit in a block of {}",
                opts.block
            ),
        });
    }
    // The virtual warps take a tile each (`virtual_warps`); with lanes the group walks (tile,
    // lane) items one thread each, and from 32 threads a group owns a tile per thread.
    let grid = if n < 32 && opts.lanes.is_none() {
        Grid::GroupPerItem { threads: n }
    } else {
        Grid::CoverItems { per_thread: 1 }
    };
    Ok(huge::plan_around(
        body,
        opts,
        schedule,
        (entry, grid),
        select,
    ))
}

/// Shared memory for `N > 32`, per thread: the slot's first atom, end atom and tile (u64 each);
/// per warp: the warp's partial of the current huge tile (up to 8 bytes) and its ballot of huge
/// tiles (u32).
const BEGIN: u32 = 0;
const END: u32 = 8;
const TILE: u32 = 16;
const PER_THREAD: u32 = 24;
const PER_WARP: u32 = 8 + 4;

/// Bytes of `lb_smem` for a block of `block` threads.
fn smem_bytes(block: u32) -> u32 {
    PER_THREAD * block + PER_WARP * (block / 32)
}

/// A group of at most a warp that talks through `shfl.sync` with its own member mask and a
/// sub-warp segment in the `c` operand, so several groups of one warp never wait for each other.
struct Group {
    n: u32,
    /// The group's member mask (`.b32`).
    mask: Operand,
    /// Rank in the group (`.u32`).
    r: Reg,
    /// The warp lane of the group's first thread (`.b32`), for groups narrower than a warp.
    first: Option<Reg>,
}

impl Group {
    /// `c` of `shfl.sync.up`: the segment mask of a group of `n` lanes, clamp 0.
    fn c_up(&self) -> Operand {
        Operand::Imm(i64::from(32 - self.n) << 8)
    }

    /// `c` of `shfl.sync.idx`: the segment mask, clamp 31; the source lane is group-relative.
    fn c_idx(&self) -> Operand {
        Operand::Imm((i64::from(32 - self.n) << 8) | 31)
    }

    /// One `shfl.sync` of a 32-bit register.
    fn shfl32(&self, b: &mut KernelBuilder, mode: ShflMode, x: Reg, src: Operand) -> Reg {
        let c = if mode == ShflMode::Up {
            self.c_up()
        } else {
            self.c_idx()
        };
        // `shfl.sync.b32` moves any 32-bit register, a float's too (PTX ISA): no bit casts.
        let dst = b.reg(x.class);
        b.emit(Op::Shfl {
            mode,
            dst,
            dst_pred: None,
            a: x.into(),
            b: src,
            c,
            mask: self.mask.clone(),
        });
        dst
    }

    /// A shuffle of a value of any width: 64-bit values move as two halves.
    fn shfl(&self, b: &mut KernelBuilder, mode: ShflMode, x: Reg, ty: Type, src: Operand) -> Reg {
        match ty.reg_class() {
            RegClass::B32 | RegClass::F32 => self.shfl32(b, mode, x, src),
            RegClass::B64 | RegClass::F64 => {
                let bits = if ty.reg_class() == RegClass::F64 {
                    b.mov(Type::B64, x)
                } else {
                    x
                };
                let lo = b.cvt(Rounding::None, Type::U32, Type::U64, bits);
                let hi64 = b.bin(BinOp::Shr, Type::U64, bits, Operand::Imm(32));
                let hi = b.cvt(Rounding::None, Type::U32, Type::U64, hi64);
                let lo2 = self.shfl32(b, mode, lo, src.clone());
                let hi2 = self.shfl32(b, mode, hi, src);
                let lo64 = b.cvt(Rounding::None, Type::U64, Type::U32, lo2);
                let hi64 = b.cvt(Rounding::None, Type::U64, Type::U32, hi2);
                let high = b.bin(BinOp::Shl, Type::B64, hi64, Operand::Imm(32));
                let joined = b.bin(BinOp::Or, Type::B64, high, lo64);
                if ty.reg_class() == RegClass::F64 {
                    b.mov(Type::F64, joined)
                } else {
                    joined
                }
            }
            RegClass::Pred => unreachable!("predicates are never shuffled"),
        }
    }

    /// Inclusive scan of `x` (type `ty`) over the group with `op`, in place; the earlier value is
    /// always the left operand.
    fn scan(&self, b: &mut KernelBuilder, x: Reg, ty: Type, op: BinOp) {
        let mut d = 1;
        while d < self.n {
            let has = b.setp(Cmp::Ge, Type::U32, self.r, Operand::Imm(d.into()));
            let y = self.shfl(b, ShflMode::Up, x, ty, Operand::Imm(d.into()));
            b.emit_guarded(
                has,
                false,
                Op::Bin {
                    op,
                    ty,
                    dst: x,
                    a: y.into(),
                    b: x.into(),
                },
            );
            d *= 2;
        }
    }
}

/// A 64-bit per-slot value split into halves once per batch, so that fetching it from another
/// slot needs no split per fetch.
#[derive(Clone, Copy)]
struct Split {
    lo: Reg,
    hi: Reg,
}

impl Group {
    fn split(&self, b: &mut KernelBuilder, x: Reg) -> Split {
        let lo = b.cvt(Rounding::None, Type::U32, Type::U64, x);
        let high = b.bin(BinOp::Shr, Type::U64, x, Operand::Imm(32));
        let hi = b.cvt(Rounding::None, Type::U32, Type::U64, high);
        Split { lo, hi }
    }

    /// The value of slot `src` (group-relative `.u32`) of a split 64-bit value. `narrow` (a
    /// group-uniform predicate) says every high half of the group is zero, and then the high
    /// half is not moved: below 2^32 atoms and tiles a fetch is one shuffle.
    fn fetch_split(&self, b: &mut KernelBuilder, x: Split, src: Reg, narrow: Reg) -> Reg {
        let lo = self.shfl32(b, ShflMode::Idx, x.lo, src.into());
        let v = b.cvt(Rounding::None, Type::U64, Type::U32, lo);
        let done = b.label();
        b.bra_if(narrow, false, done);
        let hi = self.shfl32(b, ShflMode::Idx, x.hi, src.into());
        let hi64 = b.cvt(Rounding::None, Type::U64, Type::U32, hi);
        let high = b.bin(BinOp::Shl, Type::B64, hi64, Operand::Imm(32));
        b.bin_to(BinOp::Or, Type::B64, v, high, v);
        b.place(done);
        v
    }
}

/// `@pred acc = acc op x`: a predicated fold instead of a branch around it.
fn fold_if(b: &mut KernelBuilder, pred: Reg, (ty, red): (Ty, Reduce), acc: Reg, x: Reg) {
    b.emit_guarded(
        pred,
        false,
        Op::Bin {
            op: reduce_op(red),
            ty: ptx_type(ty),
            dst: acc,
            a: acc.into(),
            b: x.into(),
        },
    );
}

/// The kernels of `plan` (made by [`group_plan`]) for group size `n`: the huge-tile split's and
/// the group walk.
pub fn build_group(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    n: u32,
) -> Result<Vec<Kernel>, GenError> {
    plan.kernels
        .iter()
        .map(|kp| {
            huge::build(body, opts, plan, kp)
                .unwrap_or_else(|| group_kernel(body, opts, plan, kp, n))
        })
        .collect()
}

/// The group walk of group size `n`; tiles of the huge-tile split are left to it.
fn group_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    kp: &KernelPlan,
    n: u32,
) -> Result<Kernel, GenError> {
    let block = kp.block;
    if n > block || !n.is_power_of_two() || n < 2 {
        return Err(GenError::BadBlock {
            schedule: Schedule::GroupMapped(n).name(),
            block,
            why: format!("a group of {n} threads does not fit in a block of {block}"),
        });
    }
    let mut b = KernelBuilder::new(kp.entry.as_ref());
    let params = KernelParams::declare(&mut b, body, plan)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;
    let split = huge::split_from(opts, huge::plan_has_mid(plan));
    group_body(&mut b, body, opts, (&params, &layout), (n, block, split))?;
    Ok(b.finish())
}

/// The walk of group size `n` in a kernel whose params and layout are declared: the lane walk
/// with `lanes`, the virtual warps for `n < 32`, the cooperative group walk otherwise. Tiles of
/// at least `split` atoms ([`huge::split_from`]) are left to the huge-tile split.
fn group_body(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    (params, layout): (&KernelParams, &Layout),
    (n, block, split_from): (u32, u32, u64),
) -> Result<(), GenError> {
    if layout.lanes.is_some() {
        let huge = Some(split_from);
        layout.per_lane_blocking_vec(b, (body, params), &LANE_BLOCKING, |b, r| {
            let source = TileSource::Layout;
            own_tiles(b, body, opts, (params, layout), source, (r, Some(n)), huge)
        })?;
        return Ok(());
    }
    if n < 32 {
        virtual_warps(b, body, opts, (params, layout), (n, split_from))?;
        return Ok(());
    }

    let tid = b.special(Special::TidX);
    // The shuffle group: the warp (a group of N > 32 threads is several warps).
    let r = b.bin(BinOp::And, Type::B32, tid, Operand::Imm(31));
    let g = Group {
        n: 32,
        mask: Operand::Imm(0xffff_ffff),
        r,
        first: None,
    };
    let wide = (n > 32).then(|| Wide::new(b, n, block, tid));
    let r64 = b.cvt(Rounding::None, Type::U64, Type::U32, r);
    let tid64 = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let ctaid = b.special(Special::CtaidX);
    let nctaid = b.special(Special::NctaidX);
    let bb = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let nblocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    let wants = |role| body.roles.contains(&role);

    // Block batches: the trip count depends on the block index only.
    let (batches, [tile, begin, size0, valid0]) =
        batch_slot(b, layout, params, opts.checked, (bb, tid64, block));
    // A tile of the huge-tile split is neither walked nor stored here: an empty, invalid slot.
    let split = huge::is_huge(b, size0, split_from);
    let size = b.selp(Type::U64, Operand::Imm(0), size0, split);
    let valid = b.selp(Type::U32, Operand::Imm(0), valid0, split);

    let slot = Slot { tile, begin, size };
    // A wide group keeps its huge tiles; its warps see only the rest.
    let huge = wide
        .as_ref()
        .map(|w| w.setup(b, &g, &slot, wants(IndexRole::Tile)));
    let rest = Slot {
        size: huge.as_ref().map_or(size, |h| h.rest),
        ..slot
    };
    let setup = shfl_setup(b, &g, &rest, wants);

    // Without `lanes`, a body that reads its lane sees lane 0.
    let lane = wants(IndexRole::Lane).then(|| b.mov(Type::U64, Operand::Imm(0)));
    let acc = body
        .reduce
        .map(|(ty, red)| reduce_identity(b, ty, red))
        .transpose()?;
    let walk = Walk {
        body,
        params,
        checked: opts.checked,
        lane,
        acc,
    };
    if let (Some(w), Some(h)) = (&wide, &huge) {
        w.huge_tiles(b, &g, &walk, h)?;
    }
    large_tiles(b, &g, &walk, &setup, r64)?;
    small_rounds(b, &g, &walk, &setup)?;

    if let (Some(acc), Some((ty, _))) = (acc, body.reduce) {
        let ok = b.setp(Cmp::Ne, Type::U32, valid, Operand::Imm(0));
        let store = b.if_begin(ok, false);
        layout.store_output(b, body, params, (tile, lane), (acc, ty), opts.checked)?;
        b.if_end(store);
    }
    b.bin_to(BinOp::Add, Type::U64, bb, bb, nblocks);
    b.loop_end(batches);
    Ok(())
}

/// The virtual warps of Busato & Bombieri §2.2.2 (`n < 32`, without lanes): the grid's threads
/// form virtual warps of `n` consecutive lanes of one warp; virtual warp `v` takes tiles
/// `v, v + V, ..` (`V` virtual warps in the grid), one at a time, and its lane `r` walks the
/// tile's atoms `begin + r, begin + r + n, ..` (the paper's `VIRTUALWARP`: `INIT =
/// prefixsum[VW_INDEX] + LANE_OFFSET`, stepping by `|VirtualWarp|`). A butterfly over the
/// virtual warp's lanes (shuffles on its segment of the warp, with its own member mask) combines
/// the lanes' partials, and lane 0 stores the tile's value, the identity for an empty tile. The
/// loop over tiles is uniform inside a virtual warp, so virtual warps of one warp never wait for
/// each other. Tiles of the huge-tile split are skipped: the split's kernels walk and store them.
///
/// The grid is the plan's `GroupPerItem` one: a virtual warp per tile (the paper's
/// `#RequiredThreads = #workitems · |VirtualWarp|`) up to the resident blocks, past which each
/// virtual warp strides over several tiles.
fn virtual_warps(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    (params, layout): (&KernelParams, &Layout),
    (n, split_from): (u32, u64),
) -> Result<(), GenError> {
    let tid = b.special(Special::TidX);
    let r = b.bin(BinOp::And, Type::B32, tid, Operand::Imm((n - 1).into()));
    let first = b.bin(
        BinOp::And,
        Type::B32,
        tid,
        Operand::Imm((31 & !(n - 1)).into()),
    );
    let ones = b.mov(Type::B32, Operand::Imm((1i64 << n) - 1));
    let mask = b.bin(BinOp::Shl, Type::B32, ones, first).into();
    let g = Group {
        n,
        mask,
        r,
        first: Some(first),
    };
    let r64 = b.cvt(Rounding::None, Type::U64, Type::U32, r);
    let (thread, threads) = b.grid_thread();
    let shift = Operand::Imm(n.trailing_zeros().into());
    let vw = b.bin(BinOp::Shr, Type::U64, thread, shift.clone());
    let stride = b.bin(BinOp::Shr, Type::U64, threads, shift);
    let wants = |role| body.roles.contains(&role);
    // Without `lanes`, a body that reads its lane sees lane 0.
    let lane = wants(IndexRole::Lane).then(|| b.mov(Type::U64, Operand::Imm(0)));
    let walk = Walk {
        body,
        params,
        checked: opts.checked,
        lane,
        acc: None,
    };

    let tiles = b.loop_begin();
    let past = b.setp(Cmp::Ge, Type::U64, vw, layout.items);
    b.break_if(&tiles, past, false);
    let next = b.label();
    let tile = layout.tile(b, params, vw, opts.checked, next);
    let (begin, end) = layout.atoms(b, tile);
    let size = b.bin(BinOp::Sub, Type::U64, end, begin);
    let split = huge::is_huge(b, size, split_from);
    b.bra_if(split, false, next);
    let part = walk.stride(b, Some(tile), (begin, end), r64, n)?;
    if let (Some(part), Some((ty, red))) = (part, body.reduce) {
        butterfly(b, &g, part, (ty, red))?;
        let owner = b.setp(Cmp::Eq, Type::U32, g.r, Operand::Imm(0));
        let store = b.if_begin(owner, false);
        layout.store_output(b, body, params, (tile, lane), (part, ty), opts.checked)?;
        b.if_end(store);
    }
    b.place(next);
    b.bin_to(BinOp::Add, Type::U64, vw, vw, stride);
    b.loop_end(tiles);
    Ok(())
}

/// A thread's tile of the batch: the tile, its first atom and its atom count (u64 each; all
/// zero past the end of the tile set).
#[derive(Clone, Copy)]
struct Slot {
    tile: Reg,
    begin: Reg,
    size: Reg,
}

/// What every atom walk of a thread needs, per lane.
struct Walk<'a> {
    body: &'a Body,
    params: &'a KernelParams,
    checked: bool,
    lane: Option<Reg>,
    /// The accumulator of the thread's own tile slot, with `reduce`.
    acc: Option<Reg>,
}

impl Walk<'_> {
    fn wants(&self, role: IndexRole) -> bool {
        self.body.roles.contains(&role)
    }

    /// The shared walker of [`crate::primitives::walker`] for this lane.
    fn walker(&self) -> Walker<'_> {
        Walker {
            body: self.body,
            params: self.params,
            checked: self.checked,
            lane: self.lane,
        }
    }

    /// Emits the body for `atom` of `tile` (rank `atom - begin`) and returns its contribution.
    fn atom(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        atom: Reg,
        rank: Option<Reg>,
    ) -> Result<Option<Reg>, GenError> {
        self.walker().atom(b, tile, atom, rank)
    }

    /// Walks atoms `begin + start, begin + start + stride, ..` below `end` and returns the
    /// thread's partial over them in that order (with `reduce`).
    fn stride(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        range: (Reg, Reg),
        start: Reg,
        stride: u32,
    ) -> Result<Option<Reg>, GenError> {
        self.walker().stride(b, tile, range, start, stride)
    }
}

/// Butterfly reduction of `part` over the shuffle group: a fixed tree over the ranks; every
/// thread ends with the same bits because each step combines the same two values and the
/// operations commute.
fn butterfly(
    b: &mut KernelBuilder,
    g: &Group,
    part: Reg,
    reduce: (Ty, Reduce),
) -> Result<(), GenError> {
    butterfly_with(b, part, reduce, g.n, &mut |b, x, ty, d| {
        g.shfl(b, ShflMode::Bfly, x, ty, d)
    })
}

/// The shuffle path's per-batch state (`N <= 32`).
struct ShflSetup {
    /// Group-relative bit mask of the large tiles (at least `N` atoms).
    large: Reg,
    /// First atom, end atom and (when the body asks) tile of every slot, for the large tiles.
    begin: Split,
    end: Split,
    tile: Option<Split>,
    /// Every high half of the group's split values is zero (group-uniform predicate).
    narrow: Reg,
    /// Inclusive prefix sum of the small tiles' atom counts (large tiles count 0), and the
    /// group's total of small atoms (`.u32`: a small tile has fewer than `N <= 32` atoms, so the
    /// total is below `N * N`).
    incl: Reg,
    total: Reg,
    /// `begin - excl` per slot: flattened position `k` of slot `j` is atom `k + delta_j`.
    delta: Split,
    /// The exclusive prefix sum (`.u32`), when the body asks for ranks.
    excl: Option<Reg>,
}

/// Splits the group's tiles into large ones (walked one at a time by the whole group) and small
/// ones (flattened and scanned), and prepares the slot values the walks fetch.
fn shfl_setup(
    b: &mut KernelBuilder,
    g: &Group,
    slot: &Slot,
    wants: impl Fn(IndexRole) -> bool,
) -> ShflSetup {
    let big = b.setp(Cmp::Ge, Type::U64, slot.size, Operand::Imm(g.n.into()));
    let votes = b.reg(RegClass::B32);
    b.emit(Op::Vote {
        mode: VoteMode::Ballot,
        dst: votes,
        a: big.into(),
        mask: g.mask.clone(),
    });
    // The ballot has warp lane bits; the group's start at its first lane. The mask keeps only
    // the group's bits whatever the other lanes voted.
    let large = match g.first {
        Some(first) => {
            let shifted = b.bin(BinOp::Shr, Type::B32, votes, first);
            b.bin(
                BinOp::And,
                Type::B32,
                shifted,
                Operand::Imm((1i64 << g.n) - 1),
            )
        }
        None => votes,
    };
    let size32 = b.cvt(Rounding::None, Type::U32, Type::U64, slot.size);
    let small = b.selp(Type::U32, Operand::Imm(0), size32, big);
    let incl = b.mov(Type::U32, small);
    g.scan(b, incl, Type::U32, BinOp::Add);
    let excl = b.bin(BinOp::Sub, Type::U32, incl, small);
    let total = g.shfl32(b, ShflMode::Idx, incl, Operand::Imm((g.n - 1).into()));
    let end = b.bin(BinOp::Add, Type::U64, slot.begin, slot.size);
    let excl64 = b.cvt(Rounding::None, Type::U64, Type::U32, excl);
    let delta = b.bin(BinOp::Sub, Type::U64, slot.begin, excl64);
    let begin = g.split(b, slot.begin);
    let end = g.split(b, end);
    let tile = wants(IndexRole::Tile).then(|| g.split(b, slot.tile));
    let delta = g.split(b, delta);
    let mut high = b.bin(BinOp::Or, Type::B32, begin.hi, end.hi);
    for x in tile.iter().chain([&delta]) {
        high = b.bin(BinOp::Or, Type::B32, high, x.hi);
    }
    let zero = b.setp(Cmp::Eq, Type::U32, high, Operand::Imm(0));
    let narrow = b.reg(RegClass::Pred);
    b.emit(Op::Vote {
        mode: VoteMode::All,
        dst: narrow,
        a: zero.into(),
        mask: g.mask.clone(),
    });
    ShflSetup {
        large,
        begin,
        end,
        tile,
        narrow,
        incl,
        total,
        delta,
        excl: wants(IndexRole::Rank).then_some(excl),
    }
}

/// Large tiles, one at a time in slot order: every thread of the group strides over the tile's
/// atoms (thesis §4.4.2.2: "each thread strides by the size of the warp or block"; the classic
/// virtual-warp mapping of Busato & Bombieri §2.2.2), keeping a partial of its own atoms; one
/// butterfly reduction per tile combines the partials and the tile's owner folds the total in.
/// A tile of at least `N` atoms keeps every thread busy, so no per-atom search is needed; the
/// split by tile size follows CTA+Warp+Scan (Busato & Bombieri §2.3.2: big items by the whole
/// group, small ones by the scan-based mapping).
fn large_tiles(
    b: &mut KernelBuilder,
    g: &Group,
    w: &Walk,
    s: &ShflSetup,
    r64: Reg,
) -> Result<(), GenError> {
    let pending = b.mov(Type::B32, s.large);
    let tiles = b.loop_begin();
    let none = b.setp(Cmp::Eq, Type::U32, pending, Operand::Imm(0));
    b.break_if(&tiles, none, false);
    let (j, _) = pop_lowest(b, pending);
    let begin = g.fetch_split(b, s.begin, j, s.narrow);
    let end = g.fetch_split(b, s.end, j, s.narrow);
    let tile = s.tile.map(|t| g.fetch_split(b, t, j, s.narrow));
    let part = w.stride(b, tile, (begin, end), r64, g.n)?;
    if let (Some(part), Some(acc), Some((ty, red))) = (part, w.acc, w.body.reduce) {
        butterfly(b, g, part, (ty, red))?;
        let mine = b.setp(Cmp::Eq, Type::U32, g.r, j);
        fold_if(b, mine, (ty, red), acc, part);
    }
    b.loop_end(tiles);
    Ok(())
}

/// Clears the lowest set bit of `pending` (`.b32`, nonzero); returns its position (`.u32`) and
/// the bit.
fn pop_lowest(b: &mut KernelBuilder, pending: Reg) -> (Reg, Reg) {
    let neg = b.un(UnOp::Neg, Type::S32, pending);
    let low = b.bin(BinOp::And, Type::B32, pending, neg);
    let lz = b.un(UnOp::Clz, Type::B32, low);
    let j = b.bin(BinOp::Sub, Type::U32, Operand::Imm(31), lz);
    b.bin_to(BinOp::Xor, Type::B32, pending, pending, low);
    (j, low)
}

/// Small tiles, flattened (thesis §3.3.2, Algorithm 2): in round `k0` thread `r` takes position
/// `k0 + r` of the group's small atoms. Each round works in 32 bits: the prefix sums are taken
/// relative to `k0` and clipped to `0..=N` (so they fit whatever the totals), the tile slot is a
/// `log2 N`-step search over those with one 32-bit shuffle per step (the optimized binary search
/// of Busato & Bombieri §3.1.1: lower bound only, every thread all steps), and the segmented scan
/// tests "is the source still in my tile" against the round-relative start of the tile instead
/// of shuffling keys.
fn small_rounds(b: &mut KernelBuilder, g: &Group, w: &Walk, s: &ShflSetup) -> Result<(), GenError> {
    let n = g.n;
    let first = b.setp(Cmp::Eq, Type::U32, g.r, Operand::Imm(0));
    let k0 = b.mov(Type::U32, Operand::Imm(0));
    let rounds = b.loop_begin();
    let over = b.setp(Cmp::Ge, Type::U32, k0, s.total);
    b.break_if(&rounds, over, false);
    let k = b.bin(BinOp::Add, Type::U32, k0, g.r);
    let active = b.setp(Cmp::Lt, Type::U32, k, s.total);
    // rel_j = clamp(incl_j - k0, 0, N): the round position where slot j's atoms end.
    let top = b.bin(BinOp::Max, Type::U32, s.incl, k0);
    let shifted = b.bin(BinOp::Sub, Type::U32, top, k0);
    let rel = b.bin(BinOp::Min, Type::U32, shifted, Operand::Imm(n.into()));
    // j = how many slots end at or before position r.
    let j = b.mov(Type::U32, Operand::Imm(0));
    let mut step = n / 2;
    while step >= 1 {
        let probe = b.bin(BinOp::Add, Type::U32, j, Operand::Imm((step - 1).into()));
        let v = g.shfl32(b, ShflMode::Idx, rel, probe.into());
        let le = b.setp(Cmp::Le, Type::U32, v, g.r);
        b.emit_guarded(
            le,
            false,
            Op::Bin {
                op: BinOp::Add,
                ty: Type::U32,
                dst: j,
                a: j.into(),
                b: Operand::Imm(step.into()),
            },
        );
        step /= 2;
    }
    let delta = g.fetch_split(b, s.delta, j, s.narrow);
    let k64 = b.cvt(Rounding::None, Type::U64, Type::U32, k);
    let atom = b.bin(BinOp::Add, Type::U64, delta, k64);
    let tile = s.tile.map(|t| g.fetch_split(b, t, j, s.narrow));
    let rank = s.excl.map(|e| {
        let excl = g.shfl32(b, ShflMode::Idx, e, j.into());
        let rank = b.bin(BinOp::Sub, Type::U32, k, excl);
        b.cvt(Rounding::None, Type::U64, Type::U32, rank)
    });

    let x = w
        .body
        .reduce
        .map(|(ty, red)| reduce_identity(b, ty, red))
        .transpose()?;
    let run = b.if_begin(active, false);
    let c = w.atom(b, tile, atom, rank)?;
    if let (Some(x), Some(c), Some((ty, _))) = (x, c, w.body.reduce) {
        b.mov_to(ptx_type(ty), x, c);
    }
    b.if_end(run);

    if let (Some(x), Some(acc), Some((ty, red))) = (x, w.acc, w.body.reduce) {
        let pt = ptx_type(ty);
        // prev_j = rel_{j-1} (0 for slot 0): where slot j's atoms start in the round.
        let up = g.shfl32(b, ShflMode::Up, rel, Operand::Imm(1));
        let prev = b.selp(Type::U32, Operand::Imm(0), up, first);
        let start = g.shfl32(b, ShflMode::Idx, prev, j.into());
        let offset = b.bin(BinOp::Sub, Type::U32, g.r, start);
        // Segmented inclusive scan; the earlier value is always the left operand. Inactive
        // threads sit after every active one, so no active thread reads them.
        let mut d = 1;
        while d < n {
            let y = g.shfl(b, ShflMode::Up, x, pt, Operand::Imm(d.into()));
            let take = b.setp(Cmp::Ge, Type::U32, offset, Operand::Imm(d.into()));
            b.emit_guarded(
                take,
                false,
                Op::Bin {
                    op: reduce_op(red),
                    ty: pt,
                    dst: x,
                    a: y.into(),
                    b: x.into(),
                },
            );
            d *= 2;
        }
        // The owner's share of the round sits at its tile's last position in the round.
        let present = b.setp(Cmp::Gt, Type::U32, rel, prev);
        let last = b.bin(BinOp::Sub, Type::U32, rel, Operand::Imm(1));
        let got = g.shfl(b, ShflMode::Idx, x, pt, last.into());
        fold_if(b, present, (ty, red), acc, got);
    }
    b.bin_to(BinOp::Add, Type::U32, k0, k0, Operand::Imm(n.into()));
    b.loop_end(rounds);
    Ok(())
}

/// A group wider than a warp (`N > 32`). Its warps are shuffle groups of 32 that run the large
/// and small walks over their own 32 slots; tiles of at least `N` atoms ("huge") are walked by
/// the whole group, each thread striding by `N`, with one warp butterfly per warp and the warps'
/// partials combined through shared memory: the CTA level of CTA+Warp+Scan (Busato & Bombieri
/// §2.3.2), with shuffles inside warps and shared memory only across them.
struct Wide {
    n: u32,
    block: u32,
    /// Shared address of `lb_smem` (u64).
    base: Reg,
    /// Thread index in the block (`.u32`).
    tid: Reg,
    /// Rank in the wide group (`.u32` and u64).
    rank: Reg,
    rank64: Reg,
    /// Warp index in the block and the group's first warp (`.u32`).
    warp: Reg,
    warp0: Reg,
}

/// The wide group's per-batch state.
struct Huge {
    /// The block's largest count of huge tiles in one group: every thread runs that many huge
    /// rounds, for the barriers (`.u32`).
    limit: Reg,
    /// The slot's atom count with huge tiles counted as empty, for the warp walks (u64).
    rest: Reg,
}

impl Wide {
    fn new(b: &mut KernelBuilder, n: u32, block: u32, tid: Reg) -> Wide {
        b.shared("lb_smem", 8, smem_bytes(block));
        let base = b.mov(Type::U64, Operand::Symbol("lb_smem".into()));
        let rank = b.bin(BinOp::And, Type::B32, tid, Operand::Imm((n - 1).into()));
        let rank64 = b.cvt(Rounding::None, Type::U64, Type::U32, rank);
        let warp = b.bin(BinOp::Shr, Type::U32, tid, Operand::Imm(5));
        let gbase = b.bin(BinOp::Sub, Type::U32, tid, rank);
        let warp0 = b.bin(BinOp::Shr, Type::U32, gbase, Operand::Imm(5));
        Wide {
            n,
            block,
            base,
            tid,
            rank,
            rank64,
            warp,
            warp0,
        }
    }

    /// Address of element `index` (`.u32`) of a shared array of `width`-byte elements starting
    /// at byte `offset`.
    fn addr(&self, b: &mut KernelBuilder, offset: u32, index: Reg, width: u32) -> Reg {
        let i = b.cvt(Rounding::None, Type::U64, Type::U32, index);
        let off = b.bin(BinOp::Mul, Type::U64, i, Operand::Imm(width.into()));
        let start = b.bin(
            BinOp::Add,
            Type::U64,
            self.base,
            Operand::Imm(offset.into()),
        );
        b.bin(BinOp::Add, Type::U64, start, off)
    }

    /// Per-thread u64 array `array` (BEGIN, END, TILE) at thread `index`.
    fn slot_addr(&self, b: &mut KernelBuilder, array: u32, index: Reg) -> Reg {
        self.addr(b, array * self.block, index, 8)
    }

    /// The per-warp partials.
    fn part_addr(&self, b: &mut KernelBuilder, warp: Reg) -> Reg {
        self.addr(b, PER_THREAD * self.block, warp, 8)
    }

    /// The per-warp ballots of huge tiles.
    fn mask_addr(&self, b: &mut KernelBuilder, warp: Reg) -> Reg {
        self.addr(b, PER_THREAD * self.block + 8 * (self.block / 32), warp, 4)
    }

    fn warps(&self) -> u32 {
        self.n / 32
    }

    /// Publishes the slots and the warps' ballots of huge tiles, and counts the huge rounds.
    fn setup(&self, b: &mut KernelBuilder, g: &Group, slot: &Slot, tile: bool) -> Huge {
        let huge = b.setp(Cmp::Ge, Type::U64, slot.size, Operand::Imm(self.n.into()));
        let votes = b.reg(RegClass::B32);
        b.emit(Op::Vote {
            mode: VoteMode::Ballot,
            dst: votes,
            a: huge.into(),
            mask: g.mask.clone(),
        });
        // Earlier readers of the shared arrays (the last batch) are done before any rewrite.
        b.emit(Op::BarSync);
        let end = b.bin(BinOp::Add, Type::U64, slot.begin, slot.size);
        let mut arrays = vec![(BEGIN, slot.begin), (END, end)];
        if tile {
            arrays.push((TILE, slot.tile));
        }
        for (array, v) in arrays {
            let addr = self.slot_addr(b, array, self.tid);
            b.st(Space::Shared, Type::U64, addr, v);
        }
        let lead = b.setp(Cmp::Eq, Type::U32, g.r, Operand::Imm(0));
        let addr = self.mask_addr(b, self.warp);
        b.st_if(lead, Space::Shared, Type::B32, addr, votes);
        b.emit(Op::BarSync);
        let limit = b.mov(Type::U32, Operand::Imm(0));
        for group in 0..self.block / self.n {
            let count = b.mov(Type::U32, Operand::Imm(0));
            for w in 0..self.warps() {
                let idx = b.mov(Type::U32, Operand::Imm((group * self.warps() + w).into()));
                let addr = self.mask_addr(b, idx);
                let m = b.ld(Space::Shared, Type::B32, addr);
                let c = b.un(UnOp::Popc, Type::B32, m);
                b.bin_to(BinOp::Add, Type::U32, count, count, c);
            }
            b.bin_to(BinOp::Max, Type::U32, limit, limit, count);
        }
        let rest = b.selp(Type::U64, Operand::Imm(0), slot.size, huge);
        Huge { limit, rest }
    }

    /// The group's huge tiles in slot order, one per round; the block runs `limit` rounds.
    fn huge_tiles(
        &self,
        b: &mut KernelBuilder,
        g: &Group,
        w: &Walk,
        h: &Huge,
    ) -> Result<(), GenError> {
        let last_warp = self.warps() - 1;
        let at = b.mov(Type::U32, Operand::Imm(0));
        let addr = self.mask_addr(b, self.warp0);
        let pending = b.ld(Space::Shared, Type::B32, addr);
        let round = b.mov(Type::U32, Operand::Imm(0));
        let rounds = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U32, round, h.limit);
        b.break_if(&rounds, over, false);
        // Move to the next warp of the group with huge tiles left (group-uniform, no barrier).
        let seek = b.loop_begin();
        let has = b.setp(Cmp::Ne, Type::U32, pending, Operand::Imm(0));
        let end = b.setp(Cmp::Ge, Type::U32, at, Operand::Imm(last_warp.into()));
        let stop = b.bin(BinOp::Or, Type::Pred, has, end);
        b.break_if(&seek, stop, false);
        b.bin_to(BinOp::Add, Type::U32, at, at, Operand::Imm(1));
        let w_at = b.bin(BinOp::Add, Type::U32, self.warp0, at);
        let addr = self.mask_addr(b, w_at);
        b.ld_to(Space::Shared, Type::B32, pending, addr);
        b.loop_end(seek);
        let has = b.setp(Cmp::Ne, Type::U32, pending, Operand::Imm(0));
        let begin = b.mov(Type::U64, Operand::Imm(0));
        let end = b.mov(Type::U64, Operand::Imm(0));
        let tile = w
            .wants(IndexRole::Tile)
            .then(|| b.mov(Type::U64, Operand::Imm(0)));
        let j = b.mov(Type::U32, Operand::Imm(0));
        let found = b.if_begin(has, false);
        let (bit, _) = pop_lowest(b, pending);
        let base = b.bin(BinOp::Shl, Type::B32, at, Operand::Imm(5));
        b.bin_to(BinOp::Add, Type::U32, j, base, bit);
        let gbase = b.bin(BinOp::Sub, Type::U32, self.tid, self.rank);
        let slot = b.bin(BinOp::Add, Type::U32, gbase, j);
        for (array, dst) in [(BEGIN, Some(begin)), (END, Some(end)), (TILE, tile)] {
            if let Some(dst) = dst {
                let addr = self.slot_addr(b, array, slot);
                b.ld_to(Space::Shared, Type::U64, dst, addr);
            }
        }
        b.if_end(found);
        let part = w.stride(b, tile, (begin, end), self.rank64, self.n)?;
        if let (Some(part), Some(acc), Some((ty, red))) = (part, w.acc, w.body.reduce) {
            let pt = ptx_type(ty);
            butterfly(b, g, part, (ty, red))?;
            let lead = b.setp(Cmp::Eq, Type::U32, g.r, Operand::Imm(0));
            let addr = self.part_addr(b, self.warp);
            b.st_if(lead, Space::Shared, pt, addr, part);
            b.emit(Op::BarSync);
            // The owner folds the warps' partials in warp order.
            let own = b.setp(Cmp::Eq, Type::U32, self.rank, j);
            let mine = b.bin(BinOp::And, Type::Pred, own, has);
            let fold = b.if_begin(mine, false);
            for k in 0..self.warps() {
                let wk = b.bin(BinOp::Add, Type::U32, self.warp0, Operand::Imm(k.into()));
                let addr = self.part_addr(b, wk);
                let v = b.ld(Space::Shared, pt, addr);
                reduce_combine(b, ty, red, acc, v)?;
            }
            b.if_end(fold);
            // The partials are read before the next round rewrites them.
            b.emit(Op::BarSync);
        }
        b.bin_to(BinOp::Add, Type::U32, round, round, Operand::Imm(1));
        b.loop_end(rounds);
        Ok(())
    }
}

/// The entry suffix of [`dynamic_plan`]'s kernel that sums the frontier's atoms.
const FRONTIER_ATOMS: &str = "_frontier_atoms";
/// The temporary that kernel sums into (one u64, zeroed before the launch).
const FRONTIER_ATOMS_TEMP: &str = "frontier_atoms";

/// The plan of a group size picked on the device among `sizes` (`(n, min, max)`: `n` for a mean
/// of `min..max` atoms per tile, `max == u64::MAX` unbounded), for a launch over a frontier,
/// whose atoms the host does not know: [`group_plan`]'s, with a kernel before the group walk
/// that sums the atoms of the frontier's tiles, from which the walk computes the frontier's mean
/// and takes the size whose range holds it. The host's pick by `Plan::select` cannot do that:
/// it sees the frontier's length but only the whole tile set's atoms.
pub fn dynamic_plan(
    body: &Body,
    opts: &Options,
    schedule: Schedule,
    sizes: &[(u32, u64, u64)],
    entry: String,
) -> Result<Plan, GenError> {
    let largest = sizes.iter().map(|&(n, _, _)| n).max().unwrap_or(2);
    let mut plan = group_plan(body, opts, schedule, largest, entry.clone(), None)?;
    let mut kernels = plan.kernels.to_vec();
    let main = kernels
        .iter()
        .position(|k| k.entry == entry)
        .ok_or_else(|| GenError::Unsupported("the group plan lacks its walk".into()))?;
    kernels.insert(
        main,
        KernelPlan {
            entry: Cow::Owned(format!("{entry}{FRONTIER_ATOMS}")),
            block: opts.block,
            grid: Grid::CoverItems { per_thread: 1 },
            dynamic_shared: 0,
            min_tile_atoms: None,
            min_grid: None,
            lanes: None,
            track: 0,
        },
    );
    let mut temps = plan.temps.to_vec();
    temps.push(Temp {
        name: Cow::Borrowed(FRONTIER_ATOMS_TEMP),
        elem_bytes: 8,
        count: TempCount::Fixed(1),
        zero: true,
        role: TempRole::Scratch,
    });
    plan.kernels = Cow::Owned(kernels);
    plan.temps = Cow::Owned(temps);
    Ok(plan)
}

/// The kernels of a [`dynamic_plan`]: the huge-tile split's, the frontier's atom sum, and the
/// walk that picks its group size among `sizes` on the device.
pub fn build_dynamic(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    sizes: &[(u32, u64, u64)],
) -> Result<Vec<Kernel>, GenError> {
    plan.kernels
        .iter()
        .map(|kp| {
            huge::build(body, opts, plan, kp).unwrap_or_else(|| {
                if twin_base(&kp.entry).ends_with(FRONTIER_ATOMS) {
                    frontier_atoms_kernel(body, opts, plan, kp)
                } else {
                    dynamic_kernel(body, opts, plan, kp, sizes)
                }
            })
        })
        .collect()
}

/// Sums the atoms of the frontier's tiles into the zeroed `frontier_atoms`: every thread its
/// grid-stride share of positions, a warp butterfly, one atomic add per warp (an integer sum, so
/// the order does not matter).
fn frontier_atoms_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    kp: &KernelPlan,
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(kp.entry.as_ref());
    let params = KernelParams::declare(&mut b, body, plan)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;
    let total = params.temps[work_oriented::temp_index(plan, FRONTIER_ATOMS_TEMP)?];
    let sum = b.mov(Type::U64, Operand::Imm(0));
    let gs = b.grid_stride_begin(layout.items);
    let work = layout.work_item(&mut b, gs.item);
    let tile = layout.tile(&mut b, &params, work.position, opts.checked, gs.next);
    let (begin, end) = layout.atoms(&mut b, tile);
    let size = b.bin(BinOp::Sub, Type::U64, end, begin);
    b.bin_to(BinOp::Add, Type::U64, sum, sum, size);
    b.grid_stride_end(gs);
    warp_butterfly(&mut b, sum, (Ty::U64, Reduce::Sum))?;
    let tid = b.special(Special::TidX);
    let lane = b.bin(BinOp::And, Type::B32, tid, Operand::Imm(31));
    let lead = b.setp(Cmp::Eq, Type::U32, lane, Operand::Imm(0));
    let scope = b.if_begin(lead, false);
    b.atom_global(AtomOp::Add, Type::U64, (total, 0), sum);
    b.if_end(scope);
    Ok(b.finish())
}

/// The walk of a [`dynamic_plan`]: the frontier's mean atoms per tile, `⌈frontier_atoms /
/// items⌉` (0 without items), is the same for every thread, so the branch to the size whose
/// range holds it is uniform over the grid and every size's walk is in the kernel.
fn dynamic_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    kp: &KernelPlan,
    sizes: &[(u32, u64, u64)],
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(kp.entry.as_ref());
    let params = KernelParams::declare(&mut b, body, plan)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;
    let total = params.temps[work_oriented::temp_index(plan, FRONTIER_ATOMS_TEMP)?];
    let atoms = b.ld(Space::Global, Type::U64, total);
    let items = b.bin(BinOp::Max, Type::U64, layout.items, Operand::Imm(1));
    let up = b.bin(BinOp::Add, Type::U64, atoms, items);
    let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
    let mean = b.bin(BinOp::Div, Type::U64, up, items);
    for &(n, min, max) in sizes {
        let above = b.setp(Cmp::Ge, Type::U64, mean, Operand::Imm(min as i64));
        let pick = if max == u64::MAX {
            above
        } else {
            let below = b.setp(Cmp::Lt, Type::U64, mean, Operand::Imm(max as i64));
            b.bin(BinOp::And, Type::Pred, above, below)
        };
        let scope = b.if_begin(pick, false);
        let split = huge::split_from(opts, huge::plan_has_mid(plan));
        group_body(&mut b, body, opts, (&params, &layout), (n, kp.block, split))?;
        b.if_end(scope);
    }
    Ok(b.finish())
}
