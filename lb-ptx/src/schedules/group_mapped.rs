//! `group_mapped(N)`, `warp_mapped` (N = 32) and `block_mapped` (N = block size): one template
//! for every group size.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.2 (Algorithm 2: a group takes an equal share of
//! tiles, builds the prefix sum of their atom counts, and every thread walks the group's atoms
//! with a stride of the group size, finding each atom's tile by a binary search in the prefix
//! sum), §4.4.2.2 (warp- and block-level: groups stride over their share; the hardware scheduler
//! balances across groups) and §4.4.2.3 (one template parameterised by the group size). Groups of
//! fewer than 32 threads are the virtual warps of Busato & Bombieri
//! (`seeds/000_441aa2418e6e0d1e.txt` §2.2.2): several groups share one warp.
//!
//! Shape of the kernel, for block size `B` and group size `N`:
//! - The grid strides over *block batches* of `B` consecutive tile positions; group `g` of the
//!   block takes positions `g·N .. g·N + N` of the batch, one per thread. The batch loop depends
//!   only on the block index, so every `bar.sync` below is reached by the whole block.
//! - Each thread loads its tile's atom range; the group scans the counts (inclusive prefix sum).
//! - Rounds: in round `k0` the group's threads take the group's flattened atoms `k0 .. k0 + N`,
//!   thread `r` atom `k0 + r`; a binary search over the prefix sum gives the tile slot `j`.
//! - With `reduce`, each round's contributions are combined by a segmented inclusive scan keyed
//!   by `j`; the owner of slot `j` (thread `j` of the group) takes the value at the last atom of
//!   its tile in the round and folds it into its accumulator, round after round. After the last
//!   round the owner stores the tile's result (the identity for an empty tile).
//!
//! Collectives: for `N <= 32` everything goes through `shfl.sync` with the group's own member
//! mask and a sub-warp segment in the `c` operand, so several groups of one warp never wait for
//! each other and no shared memory is used. For `N > 32` the prefix sum, the tile slots and the
//! round's contributions go through a static shared array sized from the plan's block, with
//! `bar.sync`; the round loop then runs to the largest group total of the block so that every
//! thread reaches every barrier.
//!
//! Determinism: the combination order is a fixed tree that depends only on `N` and the tile set
//! (not on the grid, the block size or timing), and no float atomics are used, so two launches
//! agree bitwise. It is not the sequential loop's order, so float sums may round differently
//! from the CPU reference; integer sums and min/max are exact.
//!
//! Lanes are a loop around the rounds (each lane repeats the rounds over the same prefix sum), so
//! any lane count works. Indices are 64-bit throughout (`Options::index` is not consulted). The
//! grid is `Grid::CoverItems`, which counts tile × lane items; with lanes that launches more
//! blocks than there are batches, and the extra blocks exit at once.

use std::borrow::Cow;

use super::{common_temps, Layout, Schedule, ScheduleTemplate, GROUP_SIZES};
use crate::body::{Body, IndexRole, Reduce, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{
    emit_body, ptx_type, reduce_combine, reduce_identity, AtomContext, KernelParams,
};
use crate::ir::{
    Address, BinOp, Cmp, Kernel, Op, Operand, Reg, RegClass, Rounding, ShflMode, Space, Special,
    Type,
};
use crate::plan::{Grid, KernelPlan, Plan, Select};
use crate::{GenError, Options};

/// The `group_mapped` template for one schedule name.
#[derive(Clone, Copy, Debug)]
pub struct GroupMapped {
    schedule: Schedule,
}

static FIXED: [GroupMapped; GROUP_SIZES.len()] = {
    let mut out = [GroupMapped {
        schedule: Schedule::GroupMapped(0),
    }; GROUP_SIZES.len()];
    let mut i = 0;
    while i < GROUP_SIZES.len() {
        out[i] = GroupMapped {
            schedule: Schedule::GroupMapped(GROUP_SIZES[i].0),
        };
        i += 1;
    }
    out
};

/// A group size outside [`GROUP_SIZES`]: planning it fails with a clear error.
static INVALID: GroupMapped = GroupMapped {
    schedule: Schedule::GroupMapped(0),
};

impl GroupMapped {
    pub const WARP: GroupMapped = GroupMapped {
        schedule: Schedule::WarpMapped,
    };
    pub const BLOCK: GroupMapped = GroupMapped {
        schedule: Schedule::BlockMapped,
    };

    /// The template of `group_mapped(n)`.
    pub fn fixed(n: u32) -> &'static GroupMapped {
        GROUP_SIZES
            .iter()
            .position(|&(size, _)| size == n)
            .map_or(&INVALID, |i| &FIXED[i])
    }

    fn group_size(&self, opts: &Options) -> Result<u32, GenError> {
        match self.schedule {
            Schedule::WarpMapped => Ok(32),
            Schedule::BlockMapped => Ok(opts.block),
            Schedule::GroupMapped(n) if GROUP_SIZES.iter().any(|&(s, _)| s == n) => Ok(n),
            _ => Err(GenError::Unsupported(
                "group_mapped(N) needs N a power of two from 2 to 1024".into(),
            )),
        }
    }

    fn entry(&self, body: &Body, n: u32) -> String {
        match self.schedule {
            Schedule::WarpMapped => format!("{}_warp_mapped", body.name),
            Schedule::BlockMapped => format!("{}_block_mapped", body.name),
            _ => format!("{}_group_mapped_{n}", body.name),
        }
    }
}

impl ScheduleTemplate for GroupMapped {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let n = self.group_size(opts)?;
        group_plan(opts, self.schedule, n, self.entry(body, n), None)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        Ok(vec![build_group(body, opts, plan, self.group_size(opts)?)?])
    }
}

/// Bytes of shared memory per thread for `N > 32`: prefix sum, exclusive prefix, first atom and
/// tile (u64 each), one contribution (up to 8 bytes) and one segment key (u32).
const SMEM_PER_THREAD: u32 = 8 * 5 + 4;
const INCL: u32 = 0;
const EXCL: u32 = 8;
const BEGIN: u32 = 16;
const TILE: u32 = 24;
const VAL: u32 = 32;
const KEY: u32 = 40;

/// The plan of a group size `n` under `schedule`, with kernel `entry`.
pub(super) fn group_plan(
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
    Ok(Plan {
        schedule: Cow::Borrowed(schedule.name()),
        kernels: Cow::Owned(vec![KernelPlan {
            entry: Cow::Owned(entry),
            block: opts.block,
            grid: Grid::CoverItems { per_thread: 1 },
            dynamic_shared: 0,
        }]),
        temps: Cow::Owned(common_temps(opts)),
        index_limit: None,
        select,
    })
}

/// How the group talks: shuffles inside a warp, or shared memory across warps.
#[derive(Clone)]
enum Comm {
    Shfl {
        /// The group's member mask (`.b32`).
        mask: Operand,
    },
    Smem {
        /// Shared address of the block's arrays (u64).
        base: Reg,
    },
}

struct Group {
    n: u32,
    comm: Comm,
    /// Rank in the group (`.u32`).
    r: Reg,
    /// Thread index of the group's first thread in the block (`.u32`).
    gbase: Reg,
    /// Block size.
    block: u32,
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

    /// The shared address of element `slot` (a `.u32` thread index of the block) of the array at
    /// byte offset `array` per thread.
    fn slot_addr(&self, b: &mut KernelBuilder, array: u32, slot: Reg) -> Reg {
        let Comm::Smem { base } = self.comm else {
            unreachable!("shared-memory slots exist only for groups wider than a warp")
        };
        let s64 = b.cvt(Rounding::None, Type::U64, Type::U32, slot);
        let width = if array == KEY { 4 } else { 8 };
        let off = b.bin(BinOp::Mul, Type::U64, s64, Operand::Imm(width));
        let start = b.bin(
            BinOp::Add,
            Type::U64,
            base,
            Operand::Imm(i64::from(array * self.block)),
        );
        b.bin(BinOp::Add, Type::U64, start, off)
    }

    /// The slot `gbase + rel` (`rel` a group-relative `.u32`).
    fn group_slot(&self, b: &mut KernelBuilder, array: u32, rel: Reg) -> Reg {
        let slot = b.bin(BinOp::Add, Type::U32, self.gbase, rel);
        self.slot_addr(b, array, slot)
    }

    /// One `shfl.sync` of a 32-bit register.
    fn shfl32(&self, b: &mut KernelBuilder, mode: ShflMode, x: Reg, src: Operand) -> Reg {
        let Comm::Shfl { mask } = &self.comm else {
            unreachable!("shuffles are used only by groups of at most a warp")
        };
        let c = if mode == ShflMode::Up {
            self.c_up()
        } else {
            self.c_idx()
        };
        let dst = b.reg(RegClass::B32);
        b.emit(Op::Shfl {
            mode,
            dst,
            dst_pred: None,
            a: x.into(),
            b: src,
            c,
            mask: mask.clone(),
        });
        dst
    }

    /// A shuffle of a value of any width: 64-bit values move as two halves, floats as bits.
    fn shfl(&self, b: &mut KernelBuilder, mode: ShflMode, x: Reg, ty: Type, src: Operand) -> Reg {
        match ty.reg_class() {
            RegClass::B32 => self.shfl32(b, mode, x, src),
            RegClass::F32 => {
                let bits = b.mov(Type::B32, x);
                let got = self.shfl32(b, mode, bits, src);
                b.mov(Type::F32, got)
            }
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

    /// Inclusive scan of `x` (type `ty`) over the group with `op`, in place. With `key`, the
    /// scan is segmented: a value only combines with earlier values of the same key (keys are
    /// nondecreasing along the group). Earlier values are always the left operand. For shared
    /// memory, `array` is the per-thread slot array the scan runs in; the result is left there
    /// (and every thread has passed a barrier after the last write).
    fn scan(
        &self,
        b: &mut KernelBuilder,
        x: Reg,
        ty: Type,
        op: BinOp,
        key: Option<Reg>,
        array: u32,
    ) {
        let mut d = 1;
        let mine = match self.comm {
            Comm::Smem { .. } => {
                // Earlier readers of the shared arrays are done before anything is rewritten.
                b.emit(Op::BarSync);
                let tid = b.bin(BinOp::Add, Type::U32, self.gbase, self.r);
                let addr = self.slot_addr(b, array, tid);
                b.st(Space::Shared, ty, addr, x);
                if let Some(k) = key {
                    let ka = self.slot_addr(b, KEY, tid);
                    b.st(Space::Shared, Type::U32, ka, k);
                }
                Some((tid, addr))
            }
            Comm::Shfl { .. } => None,
        };
        while d < self.n {
            let has = b.setp(Cmp::Ge, Type::U32, self.r, Operand::Imm(d.into()));
            let (y, ky) = match mine {
                Some((tid, _)) => {
                    b.emit(Op::BarSync);
                    let y = b.reg_for(ty);
                    let src = b.bin(BinOp::Sub, Type::U32, tid, Operand::Imm(d.into()));
                    let ya = self.slot_addr(b, array, src);
                    b.emit_guarded(
                        has,
                        false,
                        Op::Ld {
                            space: Space::Shared,
                            ty,
                            dst: y,
                            addr: Address::Reg {
                                base: ya,
                                offset: 0,
                            },
                        },
                    );
                    let ky = key.map(|_| {
                        let ky = b.mov(Type::U32, Operand::Imm(-1));
                        let ka = self.slot_addr(b, KEY, src);
                        b.emit_guarded(
                            has,
                            false,
                            Op::Ld {
                                space: Space::Shared,
                                ty: Type::U32,
                                dst: ky,
                                addr: Address::Reg {
                                    base: ka,
                                    offset: 0,
                                },
                            },
                        );
                        ky
                    });
                    b.emit(Op::BarSync);
                    (y, ky)
                }
                None => {
                    let y = self.shfl(b, ShflMode::Up, x, ty, Operand::Imm(d.into()));
                    let ky = key.map(|k| self.shfl32(b, ShflMode::Up, k, Operand::Imm(d.into())));
                    (y, ky)
                }
            };
            let take = match (key, ky) {
                (Some(k), Some(ky)) => {
                    let same = b.setp(Cmp::Eq, Type::U32, ky, k);
                    b.bin(BinOp::And, Type::Pred, has, same)
                }
                _ => has,
            };
            b.emit_guarded(
                take,
                false,
                Op::Bin {
                    op,
                    ty,
                    dst: x,
                    a: y.into(),
                    b: x.into(),
                },
            );
            if let Some((_, addr)) = mine {
                b.emit_guarded(
                    take,
                    false,
                    Op::St {
                        space: Space::Shared,
                        ty,
                        addr: Address::Reg {
                            base: addr,
                            offset: 0,
                        },
                        src: x.into(),
                    },
                );
            }
            d *= 2;
        }
        if mine.is_some() {
            b.emit(Op::BarSync);
        }
    }

    /// The group's value of `x` (type `ty`) at group-relative slot `src` (`.u32`): a shuffle, or
    /// a load of the shared array `array` (which must hold `x` for every thread already).
    fn fetch(&self, b: &mut KernelBuilder, x: Reg, ty: Type, array: u32, src: Reg) -> Reg {
        match self.comm {
            Comm::Shfl { .. } => self.shfl(b, ShflMode::Idx, x, ty, src.into()),
            Comm::Smem { .. } => {
                let addr = self.group_slot(b, array, src);
                b.ld(Space::Shared, ty, addr)
            }
        }
    }
}

fn combine_op(reduce: Reduce) -> BinOp {
    match reduce {
        Reduce::Sum => BinOp::Add,
        Reduce::Min => BinOp::Min,
        Reduce::Max => BinOp::Max,
    }
}

/// The kernel of group size `n` for `plan`.
pub(super) fn build_group(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    n: u32,
) -> Result<Kernel, GenError> {
    let kp = &plan.kernels[0];
    let block = kp.block;
    if n > block || !n.is_power_of_two() || n < 2 {
        return Err(GenError::BadBlock {
            schedule: Schedule::GroupMapped(n).name(),
            block,
            why: format!("a group of {n} threads does not fit in a block of {block}"),
        });
    }
    let mut b = KernelBuilder::new(kp.entry.as_ref());
    let params = KernelParams::declare(&mut b, body, &plan.temps)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;

    let tid = b.special(Special::TidX);
    let r = b.bin(BinOp::And, Type::B32, tid, Operand::Imm((n - 1).into()));
    let gbase = b.bin(BinOp::Sub, Type::U32, tid, r);
    let comm = if n <= 32 {
        let mask = if n == 32 {
            Operand::Imm(0xffff_ffff)
        } else {
            let first = b.bin(
                BinOp::And,
                Type::B32,
                tid,
                Operand::Imm((31 & !(n - 1)).into()),
            );
            let ones = b.mov(Type::B32, Operand::Imm((1i64 << n) - 1));
            b.bin(BinOp::Shl, Type::B32, ones, first).into()
        };
        Comm::Shfl { mask }
    } else {
        b.shared("lb_smem", 8, SMEM_PER_THREAD * block);
        Comm::Smem {
            base: b.mov(Type::U64, Operand::Symbol("lb_smem".into())),
        }
    };
    let g = Group {
        n,
        comm,
        r,
        gbase,
        block,
    };
    let r64 = b.cvt(Rounding::None, Type::U64, Type::U32, r);
    let tid64 = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let ctaid = b.special(Special::CtaidX);
    let nctaid = b.special(Special::NctaidX);
    let bb = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let nblocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    let wants = |role| body.roles.contains(&role);

    // Block batches: the trip count depends on the block index only.
    let batches = b.loop_begin();
    let first_pos = b.bin(BinOp::Mul, Type::U64, bb, Operand::Imm(block.into()));
    let done = b.setp(Cmp::Ge, Type::U64, first_pos, layout.tiles);
    b.break_if(&batches, done, false);
    let pos = b.bin(BinOp::Add, Type::U64, first_pos, tid64);
    let tile = b.mov(Type::U64, Operand::Imm(0));
    let begin = b.mov(Type::U64, Operand::Imm(0));
    let size = b.mov(Type::U64, Operand::Imm(0));
    let valid = b.mov(Type::U32, Operand::Imm(0));
    let in_range = b.setp(Cmp::Lt, Type::U64, pos, layout.tiles);
    let skip = b.label();
    b.bra_if(in_range, true, skip);
    let t = layout.tile(&mut b, &params, pos, opts.checked, skip);
    b.mov_to(Type::U64, tile, t);
    let (bg, en) = layout.atoms(&mut b, tile);
    b.mov_to(Type::U64, begin, bg);
    b.bin_to(BinOp::Sub, Type::U64, size, en, bg);
    b.mov_to(Type::U32, valid, Operand::Imm(1));
    b.place(skip);

    // Inclusive prefix sum of the group's atom counts.
    let incl = b.mov(Type::U64, size);
    g.scan(&mut b, incl, Type::U64, BinOp::Add, None, INCL);
    let excl = b.bin(BinOp::Sub, Type::U64, incl, size);
    let last = b.mov(Type::U32, Operand::Imm((n - 1).into()));
    let (total, limit) = match g.comm {
        Comm::Shfl { .. } => {
            let total = g.fetch(&mut b, incl, Type::U64, INCL, last);
            (total, total)
        }
        Comm::Smem { .. } => {
            for (array, v) in [(EXCL, excl), (BEGIN, begin), (TILE, tile)] {
                let me = b.bin(BinOp::Add, Type::U32, gbase, r);
                let addr = g.slot_addr(&mut b, array, me);
                b.st(Space::Shared, Type::U64, addr, v);
            }
            b.emit(Op::BarSync);
            let total = g.fetch(&mut b, incl, Type::U64, INCL, last);
            // Every thread runs the rounds of the block's largest group, for the barriers.
            let limit = b.mov(Type::U64, Operand::Imm(0));
            for group in 0..block / n {
                let slot = b.mov(Type::U32, Operand::Imm((group * n + n - 1).into()));
                let addr = g.slot_addr(&mut b, INCL, slot);
                let t = b.ld(Space::Shared, Type::U64, addr);
                b.bin_to(BinOp::Max, Type::U64, limit, limit, t);
            }
            (total, limit)
        }
    };

    let lane_loop = layout.lanes.map(|count| {
        let lane = b.mov(Type::U64, Operand::Imm(0));
        let scope = b.loop_begin();
        let end = b.setp(Cmp::Ge, Type::U64, lane, count);
        b.break_if(&scope, end, false);
        (lane, scope)
    });
    let lane = match lane_loop {
        Some((l, _)) => Some(l),
        None if wants(IndexRole::Lane) => Some(b.mov(Type::U64, Operand::Imm(0))),
        None => None,
    };
    let reduce = body.reduce;
    let acc = reduce
        .map(|(ty, red)| reduce_identity(&mut b, ty, red))
        .transpose()?;

    let k0 = b.mov(Type::U64, Operand::Imm(0));
    let rounds = b.loop_begin();
    let over = b.setp(Cmp::Ge, Type::U64, k0, limit);
    b.break_if(&rounds, over, false);
    let k = b.bin(BinOp::Add, Type::U64, k0, r64);
    let active = b.setp(Cmp::Lt, Type::U64, k, total);

    // Binary search: j = how many prefix sums are <= k (the tile slot of atom k).
    let j = b.mov(Type::U32, Operand::Imm(0));
    let mut step = n / 2;
    while step >= 1 {
        let probe = b.bin(BinOp::Add, Type::U32, j, Operand::Imm((step - 1).into()));
        let v = g.fetch(&mut b, incl, Type::U64, INCL, probe);
        let le = b.setp(Cmp::Le, Type::U64, v, k);
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
    let excl_j = g.fetch(&mut b, excl, Type::U64, EXCL, j);
    let begin_j = g.fetch(&mut b, begin, Type::U64, BEGIN, j);
    let tile_j = wants(IndexRole::Tile).then(|| g.fetch(&mut b, tile, Type::U64, TILE, j));
    let rank = b.bin(BinOp::Sub, Type::U64, k, excl_j);
    let atom = b.bin(BinOp::Add, Type::U64, begin_j, rank);

    let x = reduce
        .map(|(ty, red)| reduce_identity(&mut b, ty, red))
        .transpose()?;
    let run = b.if_begin(active, false);
    let ctx = AtomContext {
        tile: tile_j,
        atom: Some(atom),
        lane,
        rank: wants(IndexRole::Rank).then_some(rank),
    };
    let contribution = emit_body(&mut b, body, &params, &ctx, opts.checked)?;
    if let (Some(x), Some(c), Some((ty, _))) = (x, contribution, reduce) {
        b.mov_to(ptx_type(ty), x, c);
    }
    b.if_end(run);

    if let (Some(x), Some(acc), Some((ty, red))) = (x, acc, reduce) {
        fold_round(
            &mut b,
            &g,
            (x, ty, red),
            acc,
            j,
            active,
            (k0, incl, excl, size),
        )?;
    }
    b.bin_to(BinOp::Add, Type::U64, k0, k0, Operand::Imm(n.into()));
    b.loop_end(rounds);

    if let (Some(acc), Some((ty, _))) = (acc, reduce) {
        let ok = b.setp(Cmp::Ne, Type::U32, valid, Operand::Imm(0));
        let store = b.if_begin(ok, false);
        layout.store_output(&mut b, body, &params, (tile, lane), (acc, ty), opts.checked)?;
        b.if_end(store);
    }
    if let Some((l, scope)) = lane_loop {
        b.bin_to(BinOp::Add, Type::U64, l, l, Operand::Imm(1));
        b.loop_end(scope);
    }
    b.bin_to(BinOp::Add, Type::U64, bb, bb, nblocks);
    b.loop_end(batches);
    Ok(b.finish())
}

/// Combines one round's contributions `x` per tile slot and folds each slot's share into its
/// owner's accumulator `acc` (thread `j` of the group owns slot `j`).
fn fold_round(
    b: &mut KernelBuilder,
    g: &Group,
    (x, ty, red): (Reg, Ty, Reduce),
    acc: Reg,
    j: Reg,
    active: Reg,
    (k0, incl, excl, size): (Reg, Reg, Reg, Reg),
) -> Result<(), GenError> {
    let pt = ptx_type(ty);
    // Inactive threads get a key no slot has, so they never join a segment.
    let key = b.selp(Type::U32, j, Operand::Imm(g.n.into()), active);
    g.scan(b, x, pt, combine_op(red), Some(key), VAL);
    // The owner's tile is in this round when its atoms meet k0 .. k0 + n; its share sits at the
    // round's last atom of the tile.
    let hi = b.bin(BinOp::Add, Type::U64, k0, Operand::Imm(g.n.into()));
    let nonempty = b.setp(Cmp::Ne, Type::U64, size, Operand::Imm(0));
    let starts = b.setp(Cmp::Lt, Type::U64, excl, hi);
    let ends = b.setp(Cmp::Gt, Type::U64, incl, k0);
    let both = b.bin(BinOp::And, Type::Pred, starts, ends);
    let present = b.bin(BinOp::And, Type::Pred, nonempty, both);
    let end = b.bin(BinOp::Min, Type::U64, incl, hi);
    let at = b.bin(BinOp::Sub, Type::U64, end, k0);
    let at32 = b.cvt(Rounding::None, Type::U32, Type::U64, at);
    let last = b.bin(BinOp::Sub, Type::U32, at32, Operand::Imm(1));
    let src = b.selp(Type::U32, last, g.r, present);
    let got = g.fetch(b, x, pt, VAL, src);
    let fold = b.if_begin(present, false);
    reduce_combine(b, ty, red, acc, got)?;
    b.if_end(fold);
    Ok(())
}
