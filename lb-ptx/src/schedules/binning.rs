//! `binning`: CTA+Warp+Scan (Merrill et al.), tiles binned by size inside each block batch.
//!
//! Busato & Bombieri `seeds/000_441aa2418e6e0d1e.txt` §2.3.2 ("CTA+Warp+Scan", strip-mined
//! gathering) and the thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.4 (Algorithm 4: block-sized,
//! warp-sized and thread-sized bins). The grid strides over *block batches* of `B` consecutive
//! tile positions (one slot per thread, `B` the block size); the batch loop depends only on the
//! block index, so every `bar.sync` is reached by the whole block. Each batch runs three phases:
//!
//! 1. **CTA** (tiles of at least `block_threshold` atoms): strip-mined gathering with voting in
//!    shared memory. Every candidate writes its thread index into one shared word; the thread
//!    whose write stuck wins, publishes its tile's atom range, and the whole block strides over
//!    it (thread `t` takes atoms `begin + t, begin + t + B, ..`). Repeats until no candidate is
//!    left (B&B §2.3.2 step 1).
//! 2. **Warp** (tiles of at least `warp_threshold` atoms, below the block threshold): the same
//!    gathering inside each warp, with a ballot instead of shared memory and no barrier; the
//!    lowest candidate lane wins (B&B §2.3.2 step 2).
//! 3. **Scan** (the rest): a block-wide prefix sum of their atom counts in shared memory; in
//!    round `k0` thread `t` takes flattened atom `k0 + t` and finds its slot by a binary search of
//!    the prefix sum (fine-grained, B&B §2.3.2 step 3).
//!
//! Thresholds: [`Binning::DEFAULT`] is the paper's, `block_threshold` = the block size (CTA_TH,
//! "work tiles that have a number of work items equal to or greater than the size of the GPU
//! block", thesis §3.3.4) and `warp_threshold` = 32 (WARP_TH, the warp size). Each is chosen, in
//! order of precedence, from `Options::tuning` (the attribute's `block_threshold` and
//! `warp_threshold` keys), then the template's own value ([`Binning::new`], for programs that
//! build the template directly), then the paper's default; the two are taken one by one, so
//! setting only one keeps the other's default.
//!
//! Determinism with `reduce`, no float atomics: a CTA tile is reduced by a fixed tree (each
//! thread's strided partial in atom order, a warp butterfly, then thread 0 folds the warps'
//! partials in warp order); a warp tile by each lane's strided partial and a butterfly; a scan
//! tile by its owner, which folds its atoms' contributions from shared memory in atom order, so
//! those results equal the sequential CPU loop bitwise. The order depends on the tile and the
//! block size only, never on timing, so two launches agree bitwise.
//!
//! Lanes are a loop around the three phases (the slots and the scan are shared by the lanes).
//!
//! Huge tiles (at least [`crate::primitives::huge::threshold`] atoms: `4 × block × 16`, or 256
//! with lanes) are treated as empty slots here and left to the huge-tile split, whose list and
//! scan run before this kernel (cached per tile set without a frontier) and whose chunked walk
//! and fix-up run after it: one block alone would walk such a tile while the rest of the grid
//! idles. Their results are bitwise reproducible too, in the split's chunked order.

use super::{entry_name, Schedule, ScheduleTemplate};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity, KernelParams};
use crate::ir::{
    Address, AtomOp, BinOp, Cmp, Kernel, LdCache, Op, Operand, Reg, RegClass, Rounding, ShflMode,
    Space, Special, Type, UnOp,
};
use crate::plan::{Grid, KernelPlan, Plan};
use crate::primitives::huge;
use crate::primitives::walker::Walker;
use crate::primitives::warp::{ballot, batch_slot, butterfly, shfl};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// The `binning` template and its thresholds; `Options::tuning` overrides both (see the module
/// docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binning {
    /// Tiles with at least this many atoms are gathered by the whole block; `None`: the block
    /// size (CTA_TH of B&B §2.3.2).
    pub block_threshold: Option<u64>,
    /// Tiles with at least this many atoms (and below the block threshold) are gathered by a
    /// warp (WARP_TH).
    pub warp_threshold: u64,
}

impl Binning {
    /// The paper's thresholds: the block size and the warp size.
    pub const DEFAULT: Binning = Binning {
        block_threshold: None,
        warp_threshold: 32,
    };

    pub const fn new(block_threshold: u64, warp_threshold: u64) -> Binning {
        Binning {
            block_threshold: Some(block_threshold),
            warp_threshold,
        }
    }
}

/// Shared memory, in u64 elements per thread: the scan's inclusive prefix sum, `begin - excl`
/// per slot, the slot's tile, and one contribution per thread of a scan round.
const INCL: u32 = 0;
const DELTA: u32 = 1;
const TILE: u32 = 2;
const VALS: u32 = 3;
const PER_THREAD: u32 = 4;
/// After the per-thread arrays: one partial per warp, the CTA tile's begin, end and tile, and
/// the vote word.
fn smem_bytes(block: u32) -> u32 {
    8 * PER_THREAD * block + 8 * (block / 32) + 24 + 4
}

/// No candidate wrote the vote word.
const NONE: i64 = 0xffff_ffff;

impl ScheduleTemplate for Binning {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let entry = entry_name(body, Schedule::Binning);
        let grid = Grid::CoverItems { per_thread: 1 };
        Ok(huge::plan_around(
            body,
            opts,
            Schedule::Binning,
            (entry, grid),
            None,
        ))
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        plan.kernels
            .iter()
            .map(|kp| {
                huge::build(body, opts, plan, kp).unwrap_or_else(|| self.main(body, opts, plan, kp))
            })
            .collect()
    }
}

impl Binning {
    /// The CTA+Warp+Scan kernel; tiles of the huge-tile split are left to it.
    fn main(
        &self,
        body: &Body,
        opts: &Options,
        plan: &Plan,
        kp: &KernelPlan,
    ) -> Result<Kernel, GenError> {
        let block = kp.block;
        let bthr = opts
            .tuning
            .block_threshold
            .or(self.block_threshold)
            .unwrap_or(block.into());
        let wthr = opts.tuning.warp_threshold.unwrap_or(self.warp_threshold);
        let mut b = KernelBuilder::new(kp.entry.as_ref());
        let params = KernelParams::declare(&mut b, body, plan)?;
        let layout = Layout::new(&mut b, body, opts, &params)?;
        let wants = |role| body.roles.contains(&role);
        let s = Smem::new(&mut b, block);
        let tid = b.special(Special::TidX);
        let tid64 = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let lane_w = b.bin(BinOp::And, Type::B32, tid, Operand::Imm(31));
        let lane_w64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane_w);
        let warp = b.bin(BinOp::Shr, Type::U32, tid, Operand::Imm(5));
        let ctaid = b.special(Special::CtaidX);
        let nctaid = b.special(Special::NctaidX);
        let bb = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
        let nblocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);

        let (batches, [tile, begin, size0, valid0]) =
            batch_slot(&mut b, &layout, &params, opts.checked, (bb, tid64, block));
        // A tile of the huge-tile split is neither walked nor stored here: an empty, invalid
        // slot.
        let from = huge::split_from(opts, huge::plan_has_mid(plan));
        let split = huge::is_huge(&mut b, size0, from);
        let size = b.selp(Type::U64, Operand::Imm(0), size0, split);
        let valid = b.selp(Type::U32, Operand::Imm(0), valid0, split);

        // Bins of the slot: huge (CTA), medium (warp), small (scan); invalid slots are small
        // and empty.
        let is_valid = b.setp(Cmp::Ne, Type::U32, valid, Operand::Imm(0));
        let ge_b = b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(bthr as i64));
        let huge = b.bin(BinOp::And, Type::Pred, ge_b, is_valid);
        let ge_w = b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(wthr as i64));
        let not_huge = b.un(UnOp::Not, Type::Pred, huge);
        let medium0 = b.bin(BinOp::And, Type::Pred, ge_w, not_huge);
        let medium = b.bin(BinOp::And, Type::Pred, medium0, is_valid);
        let gathered = b.bin(BinOp::Or, Type::Pred, huge, medium);
        let small = b.selp(Type::U64, Operand::Imm(0), size, gathered);
        let incl = s.scan(&mut b, tid, small, block);
        let excl = b.bin(BinOp::Sub, Type::U64, incl, small);
        let delta = b.bin(BinOp::Sub, Type::U64, begin, excl);
        let addr = s.slot(&mut b, DELTA, tid);
        b.st(Space::Shared, Type::U64, addr, delta);
        let addr = s.slot(&mut b, TILE, tid);
        b.st(Space::Shared, Type::U64, addr, tile);
        b.emit(Op::BarSync);
        let last = b.mov(Type::U32, Operand::Imm((block - 1).into()));
        let addr = s.slot(&mut b, INCL, last);
        let total = b.ld(Space::Shared, Type::U64, addr);

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
        let w = Walker {
            body,
            params: &params,
            checked: opts.checked,
            lane,
        };
        let slot = (tile, begin, size);

        // 1. CTA: strip-mined gathering, voting in shared memory.
        let cand = b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), huge);
        let votes = b.loop_begin();
        let lead = b.setp(Cmp::Eq, Type::U32, tid, Operand::Imm(0));
        let vote = s.vote(&mut b);
        b.st_if(lead, Space::Shared, Type::U32, vote, Operand::Imm(NONE));
        b.emit(Op::BarSync);
        let mine = b.setp(Cmp::Ne, Type::U32, cand, Operand::Imm(0));
        // An atomic min, not racing plain stores: the lowest candidate wins, every time, and
        // racecheck sees no conflicting writes.
        let previous = b.reg(RegClass::B32);
        b.emit_guarded(
            mine,
            false,
            Op::Atom {
                space: Space::Shared,
                op: AtomOp::Min,
                ty: Type::U32,
                dst: previous,
                addr: Address::Reg {
                    base: vote,
                    offset: 0,
                },
                b: tid.into(),
                c: None,
            },
        );
        b.emit(Op::BarSync);
        let winner = b.ld(Space::Shared, Type::U32, vote);
        let none = b.setp(Cmp::Eq, Type::U32, winner, Operand::Imm(NONE));
        b.break_if(&votes, none, false);
        let won = b.setp(Cmp::Eq, Type::U32, tid, winner);
        let publish = b.if_begin(won, false);
        let end = b.bin(BinOp::Add, Type::U64, begin, size);
        for (k, v) in [begin, end, tile].into_iter().enumerate() {
            let addr = s.cta(&mut b, k as u32);
            b.st(Space::Shared, Type::U64, addr, v);
        }
        b.mov_to(Type::U32, cand, Operand::Imm(0));
        b.if_end(publish);
        b.emit(Op::BarSync);
        let mut got = Vec::new();
        for k in 0..3 {
            let addr = s.cta(&mut b, k);
            got.push(b.ld(Space::Shared, Type::U64, addr));
        }
        let part = w.stride(&mut b, got[2], (got[0], got[1]), tid64, block)?;
        if let (Some(part), Some(red)) = (part, body.reduce) {
            butterfly(&mut b, part, red)?;
            let first = b.setp(Cmp::Eq, Type::U32, lane_w, Operand::Imm(0));
            let addr = s.part(&mut b, warp);
            b.st_if(first, Space::Shared, ptx_type(red.0), addr, part);
            b.emit(Op::BarSync);
            let fold = b.if_begin(lead, false);
            let total = reduce_identity(&mut b, red.0, red.1)?;
            for k in 0..block / 32 {
                let wk = b.mov(Type::U32, Operand::Imm(k.into()));
                let addr = s.part(&mut b, wk);
                let v = b.ld(Space::Shared, ptx_type(red.0), addr);
                reduce_combine(&mut b, red.0, red.1, total, v)?;
            }
            layout.store_output(
                &mut b,
                body,
                &params,
                (got[2], lane),
                (total, red.0),
                opts.checked,
            )?;
            b.if_end(fold);
        }
        // Every read of this round's vote, tile and partials is done before the next rewrites.
        b.emit(Op::BarSync);
        b.loop_end(votes);

        // 2. Warp: the same gathering per warp, by ballot.
        let acc = body
            .reduce
            .map(|(ty, red)| reduce_identity(&mut b, ty, red))
            .transpose()?;
        let pending = ballot(&mut b, medium);
        let warps = b.loop_begin();
        let empty = b.setp(Cmp::Eq, Type::U32, pending, Operand::Imm(0));
        b.break_if(&warps, empty, false);
        let neg = b.un(UnOp::Neg, Type::S32, pending);
        let low = b.bin(BinOp::And, Type::B32, pending, neg);
        let lz = b.un(UnOp::Clz, Type::B32, low);
        let j = b.bin(BinOp::Sub, Type::U32, Operand::Imm(31), lz);
        b.bin_to(BinOp::Xor, Type::B32, pending, pending, low);
        let wtile = shfl(&mut b, ShflMode::Idx, slot.0, Type::U64, j.into());
        let wbegin = shfl(&mut b, ShflMode::Idx, slot.1, Type::U64, j.into());
        let wsize = shfl(&mut b, ShflMode::Idx, slot.2, Type::U64, j.into());
        let wend = b.bin(BinOp::Add, Type::U64, wbegin, wsize);
        let part = w.stride(&mut b, wtile, (wbegin, wend), lane_w64, 32)?;
        if let (Some(part), Some(acc), Some(red)) = (part, acc, body.reduce) {
            butterfly(&mut b, part, red)?;
            let owner = b.setp(Cmp::Eq, Type::U32, lane_w, j);
            b.emit_guarded(
                owner,
                false,
                Op::Mov {
                    ty: ptx_type(red.0),
                    dst: acc,
                    src: part.into(),
                },
            );
        }
        b.loop_end(warps);

        // 3. Scan: the rest, flattened over the block in rounds of B atoms.
        let k0 = b.mov(Type::U64, Operand::Imm(0));
        let rounds = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, k0, total);
        b.break_if(&rounds, done, false);
        let k = b.bin(BinOp::Add, Type::U64, k0, tid64);
        let active = b.setp(Cmp::Lt, Type::U64, k, total);
        let run = b.if_begin(active, false);
        // j = how many slots end at or before k (upper bound over the inclusive sums).
        let j = b.mov(Type::U32, Operand::Imm(0));
        let mut step = block / 2;
        while step >= 1 {
            let probe = b.bin(BinOp::Add, Type::U32, j, Operand::Imm((step - 1).into()));
            let addr = s.slot(&mut b, INCL, probe);
            let v = b.ld(Space::Shared, Type::U64, addr);
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
        let addr = s.slot(&mut b, DELTA, j);
        let d = b.ld(Space::Shared, Type::U64, addr);
        let atom = b.bin(BinOp::Add, Type::U64, d, k);
        let stile = wants(IndexRole::Tile).then(|| {
            let addr = s.slot(&mut b, TILE, j);
            b.ld(Space::Shared, Type::U64, addr)
        });
        let rank = wants(IndexRole::Rank).then(|| {
            // excl_j = incl_{j-1}, 0 for slot 0.
            let prev = b.mov(Type::U64, Operand::Imm(0));
            let has = b.setp(Cmp::Ne, Type::U32, j, Operand::Imm(0));
            let jm = b.bin(BinOp::Sub, Type::U32, j, Operand::Imm(1));
            let addr = s.slot(&mut b, INCL, jm);
            b.emit_guarded(
                has,
                false,
                Op::Ld {
                    space: Space::Shared,
                    ty: Type::U64,
                    dst: prev,
                    addr: Address::Reg {
                        base: addr,
                        offset: 0,
                    },
                    cache: LdCache::Default,
                },
            );
            b.bin(BinOp::Sub, Type::U64, k, prev)
        });
        let c = w.atom(&mut b, stile, atom, rank)?;
        if let (Some(c), Some((ty, _))) = (c, body.reduce) {
            let addr = s.slot(&mut b, VALS, tid);
            b.st(Space::Shared, ptx_type(ty), addr, c);
        }
        b.if_end(run);
        if let (Some(acc), Some((ty, red))) = (acc, body.reduce) {
            b.emit(Op::BarSync);
            // The owner folds its atoms of this round in atom order: lo..hi of the round.
            let round_end = b.bin(BinOp::Add, Type::U64, k0, Operand::Imm(block.into()));
            let lo = b.bin(BinOp::Max, Type::U64, excl, k0);
            let hi = b.bin(BinOp::Min, Type::U64, incl, round_end);
            let p = b.mov(Type::U64, lo);
            let fold = b.loop_begin();
            let past = b.setp(Cmp::Ge, Type::U64, p, hi);
            b.break_if(&fold, past, false);
            let off = b.bin(BinOp::Sub, Type::U64, p, k0);
            let off32 = b.cvt(Rounding::None, Type::U32, Type::U64, off);
            let addr = s.slot(&mut b, VALS, off32);
            let v = b.ld(Space::Shared, ptx_type(ty), addr);
            reduce_combine(&mut b, ty, red, acc, v)?;
            b.bin_to(BinOp::Add, Type::U64, p, p, Operand::Imm(1));
            b.loop_end(fold);
            // The contributions are read before the next round rewrites them.
            b.emit(Op::BarSync);
        }
        b.bin_to(BinOp::Add, Type::U64, k0, k0, Operand::Imm(block.into()));
        b.loop_end(rounds);

        if let (Some(acc), Some((ty, _))) = (acc, body.reduce) {
            let own = b.bin(BinOp::And, Type::Pred, is_valid, not_huge);
            let store = b.if_begin(own, false);
            layout.store_output(&mut b, body, &params, (tile, lane), (acc, ty), opts.checked)?;
            b.if_end(store);
        }
        if let Some((l, scope)) = lane_loop {
            // The next lane's first vote rewrites the slot that slower warps may still be
            // reading to leave this lane's last vote (with no scan round, nothing else orders
            // them): racecheck saw that write-after-read on SpMM.
            b.emit(Op::BarSync);
            b.bin_to(BinOp::Add, Type::U64, l, l, Operand::Imm(1));
            b.loop_end(scope);
        }
        // The next batch rewrites the scan arrays only after every reader is done.
        b.emit(Op::BarSync);
        b.bin_to(BinOp::Add, Type::U64, bb, bb, nblocks);
        b.loop_end(batches);
        Ok(b.finish())
    }
}

/// The static shared array `lb_smem` of a block of `block` threads.
struct Smem {
    block: u32,
    base: Reg,
}

impl Smem {
    fn new(b: &mut KernelBuilder, block: u32) -> Smem {
        b.shared("lb_smem", 8, smem_bytes(block));
        let base = b.mov(Type::U64, Operand::Symbol("lb_smem".into()));
        Smem { block, base }
    }

    fn at(&self, b: &mut KernelBuilder, offset: u32, index: Reg) -> Reg {
        let i = b.cvt(Rounding::None, Type::U64, Type::U32, index);
        let off = b.bin(BinOp::Shl, Type::B64, i, Operand::Imm(3));
        let start = b.bin(
            BinOp::Add,
            Type::U64,
            self.base,
            Operand::Imm(offset.into()),
        );
        b.bin(BinOp::Add, Type::U64, start, off)
    }

    /// Element `index` (`.u32`) of per-thread array `array`.
    fn slot(&self, b: &mut KernelBuilder, array: u32, index: Reg) -> Reg {
        self.at(b, 8 * array * self.block, index)
    }

    /// The partial of warp `warp` (`.u32`).
    fn part(&self, b: &mut KernelBuilder, warp: Reg) -> Reg {
        self.at(b, 8 * PER_THREAD * self.block, warp)
    }

    /// Word `k` of the CTA tile: 0 begin, 1 end, 2 tile.
    fn cta(&self, b: &mut KernelBuilder, k: u32) -> Reg {
        let off = 8 * PER_THREAD * self.block + 8 * (self.block / 32) + 8 * k;
        b.bin(BinOp::Add, Type::U64, self.base, Operand::Imm(off.into()))
    }

    fn vote(&self, b: &mut KernelBuilder) -> Reg {
        self.cta(b, 3)
    }

    /// Block-wide inclusive sum of `x` (u64) in the `INCL` array (Hillis–Steele, two barriers a
    /// step); returns this thread's value and leaves the array complete.
    fn scan(&self, b: &mut KernelBuilder, tid: Reg, x: Reg, block: u32) -> Reg {
        let incl = b.mov(Type::U64, x);
        let mine = self.slot(b, INCL, tid);
        // The previous batch's readers are done before the first write.
        b.emit(Op::BarSync);
        b.st(Space::Shared, Type::U64, mine, incl);
        let mut d = 1;
        while d < block {
            b.emit(Op::BarSync);
            let has = b.setp(Cmp::Ge, Type::U32, tid, Operand::Imm(d.into()));
            let other = b.bin(BinOp::Sub, Type::U32, tid, Operand::Imm(d.into()));
            let addr = self.slot(b, INCL, other);
            let v = b.mov(Type::U64, Operand::Imm(0));
            b.emit_guarded(
                has,
                false,
                Op::Ld {
                    space: Space::Shared,
                    ty: Type::U64,
                    dst: v,
                    addr: Address::Reg {
                        base: addr,
                        offset: 0,
                    },
                    cache: LdCache::Default,
                },
            );
            b.emit(Op::BarSync);
            b.bin_to(BinOp::Add, Type::U64, incl, v, incl);
            b.st(Space::Shared, Type::U64, mine, incl);
            d *= 2;
        }
        incl
    }
}
