//! `multi_phase`: Busato & Bombieri's Multi-Phase Mapping (`seeds/000_441aa2418e6e0d1e.txt` §3):
//! a hybrid partition (§3.1), then an iterated coalesced expansion (§3.2) with warp-synchronous
//! sections (§3.3.5) and an unrolled, coalesced pass over the atoms (§3.3.1).
//!
//! **Hybrid partitioning** (§3.1). The partition searches the tile offsets in global memory either
//! with the lower-bound-only binary search (§3.1.1) or with an interpolation search (§3.1.2), by
//! the tile set's statistics; the expansion always searches its staged offsets with the binary
//! search (§3.2: "each thread performs a binary search (optimized as in the partitioning phase
//! presented in Section 3.1.1) in such a local partition"): interpolation "runs if Std_Dev_WI_size ≤ Threshold_SD and
//! Average_WI_size ≤ Threshold_AVG", thresholds "heuristically set to Threshold_SD = 8 and
//! Threshold_AVG = 9". The runtime measures the mean and standard deviation of the tile sizes
//! when a tile set is uploaded, so both variants are generated as plans of one schedule and told
//! apart by [`Select::Spread`]: interpolation when the average (rounded up) is at most
//! [`THRESHOLD_AVG`] and the standard deviation at most [`THRESHOLD_SD`], binary otherwise.
//! The interpolation is exact and alternates with bisection ([`partition::tiles_ending_by`]).
//!
//! **Iterated search** (§3.2: "ChunkSize = BlockSize × K × IS"). The partition cuts the atoms
//! into chunks of `block × K × IS`, `K` = `items_per_thread` and `IS` = `iteration_factor`
//! ([`DEFAULT_ITERATION_FACTOR`]). A block stages its chunk's tile offsets in shared memory once
//! (coalesced, as in `two_phase`), then runs `IS` rounds of `block × K` atoms; in each, thread `t`
//! takes the `K` atoms from `t × K` and finds their tiles by one search of the staged offsets
//! ("each thread of a block performs IS binary searches on such an extended chunk").
//!
//! **Coalesced expansion** (§3.2), per round, in three sub-phases:
//! 1. *Writing*: each thread walks its `K` atoms and writes each one's tile position into its
//!    `K` slots of the round's buffer in shared memory (the paper writes registers and flushes
//!    them to shared memory; PTX cannot index registers, so the walk writes the slots itself).
//! 2. *Coalesced access*: lane `l` of a warp evaluates the body for slots `l, l + 32, …`
//!    (`K` steps, unrolled, §3.3.1), so the 32 lanes read 32 consecutive atoms' data in one
//!    transaction; a reducing body writes each atom's value back into its slot.
//! 3. A reducing body's thread walks its `K` atoms again, now reading their values from the
//!    slots in atom order, and reduces them exactly as `two_phase` does.
//!
//! The 32 threads of a warp own 32 × `K` consecutive atoms, so each warp works on its own part
//! of the buffer and only the warp synchronizes between the sub-phases (`bar.warp.sync`, §3.3.5:
//! "splitting the shared memory in chunks of the same size on which each warp can operate
//! independently"). The block synchronizes only to stage the offsets, in the neighbour exchange
//! that ends each thread's share, and to scan its carries (without a reduction, at the end of a
//! round instead: the next round's exchange must not overwrite a slot another warp still reads).
//!
//! **Determinism.** A thread still sums its atoms left to right in registers; the rounds of a
//! block are chained (`work_oriented::Chain`): a round's segmented scan starts from the carry of
//! the rounds before it, so the block writes one carry slot and the fix-up is `two_phase`'s. Equal
//! inputs give bitwise equal outputs; the order of the summation differs from `two_phase`'s only
//! in where thread shares begin.
//!
//! Of §3.3 the template also hoists the loop invariants (§3.3.2: the staged base, the block's
//! range and the warp's buffer are computed once). Not expressed: vectorized shared-memory
//! accesses (§3.3.4; a thread's slots start at any multiple of `K`, so they are not 16-byte
//! aligned) and global prefetching through registers beyond what the unrolled pass gives
//! (§3.3.3).

use super::{Schedule, ScheduleTemplate};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{emit_body, ptx_type, reduce_identity, AtomContext};
use crate::ir::{BinOp, Cmp, Kernel, Op, Operand, Reg, Space, Type};
use crate::plan::{Plan, Select};
use crate::primitives::partition::{self, Search, Searcher, Staged};
use crate::primitives::work_oriented::{
    self, atom_context, lane_index, narrow, widen, Carry, Chain, Frame, Share, TileAt, Walk,
};
use crate::{GenError, IndexWidth, Options};

/// The `multi_phase` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct MultiPhase;

/// B&B §3.1.2's `Threshold_AVG`: interpolation search up to this many atoms per tile.
pub const THRESHOLD_AVG: u64 = 9;

/// B&B §3.1.2's `Threshold_SD`: interpolation search only while the tiles' standard deviation
/// stays at or below this many atoms (beyond it, interpolation's probes degrade towards linear).
pub const THRESHOLD_SD: u64 = 8;

/// The iteration factor `IS` when the attribute leaves it out. B&B leave `IS` to tuning and
/// warn that registers grow with it; here it costs shared memory (the staged offsets of `IS`
/// rounds) and one block-wide carry scan per round, while the coalescing is complete at one
/// round. On an H200 (SpMV, `lb-bench --variants`, docs/benchmarks.md) two rounds were 1–5%
/// faster only on the road network and the stencil of the large corpus and 2–17% slower on the
/// others (8 M rows × 16: 1288 µs at `IS` = 1, 1432 at 2, 2697 at 4), so one round is the default.
pub const DEFAULT_ITERATION_FACTOR: u32 = 1;

/// The largest iteration factor the attribute accepts.
pub const MAX_ITERATION_FACTOR: u32 = 8;

/// The round buffer of the coalesced expansion.
const SLOTS: &str = "lb_expansion_slots";

/// The warp's lanes, for `bar.warp.sync`.
const FULL_WARP: i64 = 0xffff_ffff;

/// The variants: `(entry infix, search, rule)`; the two rules cover every tile set once.
const VARIANTS: [(&str, Search, Select); 2] = [
    (
        "interpolation",
        Search::Interpolation,
        Select::Spread {
            max_avg: THRESHOLD_AVG,
            max_std_dev: THRESHOLD_SD,
            low: true,
        },
    ),
    (
        "binary",
        Search::LowerBound,
        Select::Spread {
            max_avg: THRESHOLD_AVG,
            max_std_dev: THRESHOLD_SD,
            low: false,
        },
    ),
];

impl ScheduleTemplate for MultiPhase {
    /// The interpolation variant; [`ScheduleTemplate::plans`] lists both.
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let mut plans = self.plans(body, opts)?;
        Ok(plans.remove(0))
    }

    /// Over a frontier, one plan per index width, whose partition picks its search on the
    /// device ([`partition::build_measured`]): the host knows the tile set's statistics,
    /// not the frontier's.
    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        let variants = VARIANTS.map(|(name, _, select)| (name, Some(select)));
        let variants: &[(&str, Option<Select>)] = if opts.tiles.is_some() {
            &[("", None)]
        } else {
            &variants
        };
        let shape = Shape::of(body, opts)?;
        let mut plans = partition::plans(
            body,
            &shape.chunked(opts),
            Schedule::MultiPhase.name(),
            variants,
            shape.buffer_bytes(body, opts),
        )?;
        if opts.tiles.is_some() {
            for plan in &mut plans {
                partition::with_squares(plan);
            }
        }
        Ok(plans)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let search = match opts.tiles {
            Some(_) => None,
            None => Some(
                VARIANTS
                    .iter()
                    .find(|&&(_, _, select)| plan.select == Some(select))
                    .map(|&(_, search, _)| search)
                    .ok_or_else(|| GenError::Unsupported("not a plan of `multi_phase`".into()))?,
            ),
        };
        let shape = Shape::of(body, opts)?;
        let chunked = shape.chunked(opts);
        let main = expansion_kernel(body, opts, &chunked, plan, shape)?;
        match search {
            Some(search) => partition::build(body, &chunked, plan, search, main),
            None => {
                let rule = (THRESHOLD_AVG, THRESHOLD_SD);
                partition::build_measured(body, &chunked, plan, rule, main)
            }
        }
    }
}

/// A thread's items per round `K` and the rounds per block `IS`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    k: u32,
    rounds: u32,
}

impl Shape {
    /// `K` is `items_per_thread` and `IS` the attribute's `iteration_factor`. What the attribute
    /// leaves out is chosen to fit in a block's static shared memory: `IS` =
    /// [`DEFAULT_ITERATION_FACTOR`] or less, then `K` = the work-oriented default or less (a
    /// block of 512 threads holds `K` = 5 with 64-bit offsets). When nothing fits, the plans say
    /// what to change.
    fn of(body: &Body, opts: &Options) -> Result<Shape, GenError> {
        let rounds = match opts.tuning.iteration_factor {
            Some(n) if !(1..=MAX_ITERATION_FACTOR).contains(&n) => {
                return Err(GenError::Unsupported(format!(
                    "`iteration_factor` must be from 1 to {MAX_ITERATION_FACTOR}, not {n}"
                )))
            }
            Some(n) => n..=n,
            None => 1..=DEFAULT_ITERATION_FACTOR,
        };
        let items = work_oriented::items_per_thread(opts);
        // Shares of one item read as "unspecified" (`Options::items_per_thread`), so `K ≥ 2`.
        let ks = if opts.items_per_thread > 1 {
            items..=items
        } else {
            2..=items
        };
        let fits = |shape: &Shape| {
            let bytes = partition::plan_shared_bytes(
                body,
                &shape.chunked(opts),
                shape.buffer_bytes(body, opts),
            );
            bytes <= u64::from(partition::SHARED_LIMIT)
        };
        let widest = Shape {
            k: *ks.end(),
            rounds: *rounds.end(),
        };
        Ok(ks
            .rev()
            .flat_map(|k| rounds.clone().rev().map(move |rounds| Shape { k, rounds }))
            .find(fits)
            .unwrap_or(widest))
    }

    /// `opts` with a thread's share of a block's chunk, `K × IS` items, as the partition, the
    /// grid and the fix-up count them.
    fn chunked(self, opts: &Options) -> Options {
        Options {
            items_per_thread: self.k * self.rounds,
            ..opts.clone()
        }
    }

    /// The round buffer's bytes: `block × K` slots, each holding a tile position (of the widest
    /// index the plans use) and then, for a reducing body, the atom's value.
    fn buffer_bytes(self, body: &Body, opts: &Options) -> u64 {
        let position = if opts.index == IndexWidth::U32 { 4 } else { 8 };
        let value = body.reduce.map_or(0, |(ty, _)| ty.size());
        let slot = u64::from(position.max(value));
        u64::from(opts.block) * u64::from(self.k) * slot
    }
}

/// The main kernel of a multi-phase plan (module docs): stage the chunk's offsets, then per
/// round search, write the tile positions, evaluate coalesced, and for a reducing body walk the
/// values and scan the carries, chained over the rounds.
fn expansion_kernel(
    body: &Body,
    opts: &Options,
    chunked: &Options,
    plan: &Plan,
    shape: Shape,
) -> Result<Kernel, GenError> {
    let back = usize::from(body.reduce.is_some());
    let mut b = KernelBuilder::new(work_oriented::entry_from_back(plan, back));
    let f = work_oriented::frame(&mut b, body, chunked, plan, false)?;
    // A strided plan over a frontier has no partition kernel: each virtual block finds its
    // tiles itself, by the search the frontier's spread picks (B&B §3.1.2).
    let searcher = match f.stride {
        Some(_) => {
            let rule = (THRESHOLD_AVG, THRESHOLD_SD);
            Searcher::for_plan(&mut b, &f, plan, Search::LowerBound, rule)?
        }
        None => Searcher::Fixed(Search::LowerBound),
    };
    let strides = f.stride.map(|stride| (stride, stride.begin(&mut b, &f)));
    let st = partition::stage_block(&mut b, &f, searcher);
    let lane = lane_index(&mut b, body, &f);
    let wants_rank = body.roles.contains(&IndexRole::Rank);
    let checked = opts.checked;
    let w = f.w;
    let k = i64::from(shape.k);
    let round = k * f.block;

    let position_bytes = w.size();
    let value_bytes = body.reduce.map_or(0, |(ty, _)| ty.size());
    let slot = position_bytes.max(value_bytes);
    b.shared(SLOTS, 8, (round as u32) * slot);
    let warp = b.bin(BinOp::Shr, Type::U64, f.tid, Operand::Imm(5));
    let lane_id = b.bin(BinOp::And, Type::B64, f.tid, Operand::Imm(31));
    let slots = b.mov(Type::U64, Operand::Symbol(SLOTS.into()));
    let warp_slots = b.bin(BinOp::Mul, Type::U64, warp, Operand::Imm(32 * k));
    let warp_buffer = b.elem_addr(slots, warp_slots, slot);

    // The block's chunk, `block_first..block_end` (u64).
    let chunk = match f.per_thread {
        Operand::Imm(n) => b.mov(Type::U64, Operand::Imm(n * f.block)),
        ref share => b.bin(BinOp::Mul, Type::U64, share.clone(), Operand::Imm(f.block)),
    };
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, chunk);
    let block_first = b.bin(BinOp::Min, Type::U64, first, f.atoms);
    let stop = b.bin(BinOp::Add, Type::U64, block_first, chunk);
    let block_end = b.bin(BinOp::Min, Type::U64, stop, f.atoms);
    let my_first = b.bin(BinOp::Mul, Type::U64, f.tid, Operand::Imm(k));
    let lane_front = b.setp(Cmp::Eq, Type::U64, f.cta, Operand::Imm(0));
    let thread_front = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(0));
    let front = b.bin(BinOp::And, Type::Pred, lane_front, thread_front);

    let chain = match body.reduce {
        Some((ty, r)) => Some(Chain {
            carry: reduce_identity(&mut b, ty, r)?,
            closed: b.mov(Type::U32, Operand::Imm(0)),
            last: b.reg_for(Type::Pred),
        }),
        None => None,
    };
    let round_first = b.mov(Type::U64, block_first);
    // At least one round, so that a block without atoms still finishes its empty tiles.
    let rounds = b.loop_begin();
    let next = b.bin(BinOp::Add, Type::U64, round_first, Operand::Imm(round));
    let round_end = b.bin(BinOp::Min, Type::U64, next, block_end);
    let last = match &chain {
        Some(chain) => chain.last,
        None => b.reg_for(Type::Pred),
    };
    b.emit(Op::Setp {
        cmp: Cmp::Ge,
        ty: Type::U64,
        dst: last,
        a: next.into(),
        b: block_end.into(),
    });

    // §3.2: the expansion searches its staged offsets with the optimized binary search,
    // whichever search the partition used.
    let s = piece(&mut b, &f, &st, (round_first, round_end), (my_first, k));
    let front_here = b.setp(Cmp::Eq, Type::U64, round_first, block_first);
    let front_here = b.bin(BinOp::And, Type::Pred, front_here, front);
    let zero = b.mov(w, Operand::Imm(0));
    let s = Share {
        i0: b.selp(w, zero, s.i0, front_here),
        ..s
    };
    let warp_first = b.bin(BinOp::Add, Type::U64, round_first, warp_slots);
    let slot_of = |b: &mut KernelBuilder, j: Reg| {
        let j = widen(b, w, j);
        let index = b.bin(BinOp::Sub, Type::U64, j, warp_first);
        b.elem_addr(warp_buffer, index, slot)
    };

    // 1. Each thread writes the tile position of each of its atoms into its slots.
    let positions = Walk {
        reduce: None,
        locate: false,
        wants_begin: false,
        gather: None,
    };
    let mut write = |b: &mut KernelBuilder, at: &TileAt, j: Reg| {
        let addr = slot_of(b, j);
        let position = narrow(b, w, at.tile);
        b.st(Space::Shared, w, addr, position);
        Ok(None)
    };
    positions.run(&mut b, &f, body, &s, lane, checked, &mut write)?;
    b.emit(Op::WarpSync {
        mask: Operand::Imm(FULL_WARP),
    });

    // 2. The warp evaluates its atoms coalesced: lane `l` takes slots `l, l + 32, …`.
    for step in 0..k {
        let index = b.bin(BinOp::Add, Type::U64, lane_id, Operand::Imm(32 * step));
        let j = b.bin(BinOp::Add, Type::U64, warp_first, index);
        let inside = b.setp(Cmp::Lt, Type::U64, j, round_end);
        let scope = b.if_begin(inside, false);
        let addr = b.elem_addr(warp_buffer, index, slot);
        let position = b.ld(Space::Shared, w, addr);
        let position = widen(&mut b, w, position);
        let at = work_oriented::tile_at(&mut b, &f, position, wants_rank, checked);
        let j = narrow(&mut b, w, j);
        // Lane `l` takes atoms `l, l + 32, ..` of the warp's run: coalesced.
        let ctx = AtomContext {
            coalesced: true,
            ..atom_context(&mut b, &f, &at, j, lane, wants_rank)
        };
        let x = emit_body(&mut b, body, &f.params, &ctx, checked)?;
        if let (Some(x), Some((ty, _))) = (x, body.reduce) {
            b.st(Space::Shared, ptx_type(ty), addr, x);
        }
        b.if_end(scope);
    }
    b.emit(Op::WarpSync {
        mask: Operand::Imm(FULL_WARP),
    });

    // 3. A reducing body walks its atoms' values in order and scans the block's carries.
    if let (Some(reduce), Some(chain)) = (body.reduce, &chain) {
        let (ty, _) = reduce;
        let values = Walk {
            reduce: body.reduce,
            locate: true,
            wants_begin: false,
            gather: None,
        };
        let mut read = |b: &mut KernelBuilder, _: &TileAt, j: Reg| {
            let addr = slot_of(b, j);
            Ok(Some(b.ld(Space::Shared, ptx_type(ty), addr)))
        };
        let left = values
            .run(&mut b, &f, body, &s, lane, checked, &mut read)?
            .ok_or_else(|| GenError::Unsupported("a reducing walk returns its values".into()))?;
        let carry = Carry {
            share: &s,
            values: left,
            reduce,
            lane,
            chain: Some(chain),
            gather: None,
        };
        work_oriented::block_carry(&mut b, &f, plan, body, carry, checked)?;
    }
    b.break_if(&rounds, last, false);
    if body.reduce.is_none() {
        // The next round's writes must not overtake this round's reads: of the warp's slots,
        // and of the neighbour exchange of `partition::range_share`, where the first lane of
        // the next warp overwrites the slot that this warp's last lane reads. A reducing body's
        // carry scan already puts a block barrier between them.
        b.emit(Op::BarSync);
    }
    b.mov_to(Type::U64, round_first, next);
    b.loop_end(rounds);
    match strides {
        Some((stride, scope)) => {
            stride.end(&mut b, scope);
            // Every virtual block's carry is written once the blocks have left their rounds.
            work_oriented::fixup::in_kernel(&mut b, &f, plan, body, checked)?;
        }
        None => work_oriented::fixup::in_kernel(&mut b, &f, plan, body, checked)?,
    }
    Ok(b.finish())
}

/// A thread's share of one round: the `K` atoms from `round_first + my_first`, clipped to the
/// round, and the tiles they start and end in, found by binary search in the staged offsets.
fn piece(
    b: &mut KernelBuilder,
    f: &Frame,
    st: &Staged,
    (round_first, round_end): (Reg, Reg),
    (my_first, k): (Reg, i64),
) -> Share {
    let start = b.bin(BinOp::Add, Type::U64, round_first, my_first);
    let len = Operand::Imm(k);
    partition::range_share(b, f, st, Search::LowerBound, (start, len), round_end)
}
