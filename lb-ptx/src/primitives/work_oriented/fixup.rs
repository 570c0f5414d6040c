//! The grid-level fix-up of the work-oriented schedules (level 3 in [`super`]'s docs): the main
//! kernel's blocks leave one carry slot each (a key, the carry-out, a head), and the fix-up joins
//! each run of equal keys with the head of the block after it, in a fixed order.
//!
//! - **On a grid of at most `block` blocks** (in a strided frontier grid, at most `block`
//!   virtual blocks) the main kernel does it itself (`in_kernel`), with
//!   the threadfence-reduction pattern of the CUDA programming guide (§ "Memory Fence
//!   Functions": each block writes its partial result, fences, and counts itself finished with
//!   an atomic; the block that sees the last count reads every partial result). The last block
//!   to finish scans the slots, one thread each, and stores every run. A small problem is then
//!   one launch instead of three: an SpMV on a matrix of a thousand nonzeros took 10–11 µs with
//!   the two fix-up kernels and 7 µs without them on an H100 (docs/benchmarks.md, 2026-11-26).
//! - **On a larger grid** a fix-up kernel follows the main kernel (`fixup_kernel`, launched
//!   only then: `KernelPlan::min_grid`), and its own last block joins the runs that cross its
//!   blocks. Doing it all in the main kernel there too (groups of slots, each scanned by its
//!   last block, the groups joined by the last group) was measured and lost: every main block's
//!   release fence and count, and the last blocks' two scans, cost more than the launches they
//!   saved (stencil7-80^3, 1 430 blocks: 23 → 30 µs); the fix-up kernel has a few blocks only.
//!
//! Both give bitwise equal outputs for equal inputs: every combination follows a tree fixed by
//! the keys and the block size. The count of finished blocks (the main kernel's or the fix-up
//! kernel's, never both in one launch) is a [`TempRole::Counters`] word that the
//! last block puts back to zero.

use std::borrow::Cow;

use super::{
    blocks_per_lane, entry_from_back, frame, segmented_scan, temp_index, Frame, ScanBy,
    CARRY_HEADS, CARRY_KEYS, CARRY_VALUES, NO_CARRY,
};
use crate::body::{Body, Reduce, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity};
use crate::ir::{
    AtomOp, BinOp, Cmp, Kernel, Label, Op, Operand, Reg, Rounding, Space, Special, Type,
};
use crate::plan::{Plan, Temp, TempCount, TempRole};
use crate::{GenError, Options};

/// The count of finished blocks (one u64): of the main kernel on a grid of at most `block`
/// blocks, of the fix-up kernel, which runs only on larger ones.
const COUNTER: &str = "fixup_counter";
/// Per fix-up block, the last slot of the run that started in an earlier fix-up block and
/// ends in this one, or [`NO_CARRY`] (u64; a `PerBlock` temporary, more than the fix-up blocks).
const SPAN_ENDS: &str = "fixup_span_ends";
/// The fix-up block's span end while its threads look for it.
const SPAN: &str = "lb_fixup_span";
/// Thread 0's verdict (u32, 1 when the block finished last), for the whole block.
const LAST: &str = "lb_fixup_last";

/// The fix-up's temporaries beside the carry slots: the span ends and the counter.
pub(super) fn temps() -> [Temp; 2] {
    [
        Temp {
            name: Cow::Borrowed(SPAN_ENDS),
            elem_bytes: 8,
            count: TempCount::PerBlock { extra: 0 },
            zero: false,
            role: TempRole::Scratch,
        },
        Temp {
            name: Cow::Borrowed(COUNTER),
            elem_bytes: 8,
            count: TempCount::Fixed(1),
            zero: false,
            role: TempRole::Counters,
        },
    ]
}

/// The carry slots' temporaries.
struct Slots {
    keys: Reg,
    values: Reg,
    heads: Reg,
}

/// The smallest main grid (blocks) that the fix-up kernel runs for; below it the main kernel
/// joins the runs itself.
pub(super) fn kernels_from(block: u32) -> u32 {
    block + 1
}

/// Appends the fix-up of a grid of at most `block` blocks to a reducing main kernel, after
/// [`super::block_carry`] has written the block's slots; every thread of the block must reach
/// it. On a larger grid (and on a grid of one block, which stores every tile itself) it does
/// nothing.
pub(crate) fn in_kernel(
    b: &mut KernelBuilder,
    f: &Frame,
    plan: &Plan,
    body: &Body,
    checked: bool,
) -> Result<(), GenError> {
    let Some((ty, r)) = body.reduce else {
        return Ok(());
    };
    let temp = |name: &str| temp_index(plan, name).map(|k| f.params.temps[k]);
    let (keys, values, heads) = (temp(CARRY_KEYS)?, temp(CARRY_VALUES)?, temp(CARRY_HEADS)?);
    let counter = temp(COUNTER)?;
    let (t, size) = (ptx_type(ty), ty.size());
    let end = b.label();
    let nctaid = b.special(Special::NctaidX);
    let blocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    // A strided grid's blocks leave a slot per virtual block they took (see `strided_slots`).
    let slots = match f.stride {
        Some(stride) => stride.total,
        None => blocks,
    };
    let alone = b.setp(Cmp::Eq, Type::U64, slots, Operand::Imm(1));
    b.bra_if(alone, false, end);
    let large = b.setp(Cmp::Gt, Type::U64, slots, Operand::Imm(f.block));
    b.bra_if(large, false, end);
    let last = finished_last(b, f.tid, counter, blocks);
    b.bra_if(last, true, end);

    // One thread per slot: the slot's key and carry, and what ends a run there (the next key
    // and the next block's head), loaded together.
    let slot = f.tid;
    let valid = b.setp(Cmp::Lt, Type::U64, slot, slots);
    let key = b.mov(Type::U64, Operand::Imm(NO_CARRY));
    let next = b.mov(Type::U64, Operand::Imm(NO_CARRY));
    let acc = reduce_identity(b, ty, r)?;
    let head = reduce_identity(b, ty, r)?;
    let flag = b.mov(Type::U32, Operand::Imm(1));
    let key_addr = b.elem_addr(keys, slot, 8);
    let scope = b.if_begin(valid, false);
    b.ld_to(Space::Global, Type::U64, key, key_addr);
    let addr = b.elem_addr(values, slot, size);
    b.ld_to(Space::Global, t, acc, addr);
    segment_starts(b, (slot, key_addr, key), flag);
    let last_slot = b.bin(BinOp::Sub, Type::U64, slots, Operand::Imm(1));
    let before_last = b.setp(Cmp::Lt, Type::U64, slot, last_slot);
    let inner = b.if_begin(before_last, false);
    let next_addr = b.bin(BinOp::Add, Type::U64, key_addr, Operand::Imm(8));
    b.ld_to(Space::Global, Type::U64, next, next_addr);
    let next_slot = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(1));
    let head_addr = b.elem_addr(heads, next_slot, size);
    b.ld_to(Space::Global, t, head, head_addr);
    b.if_end(inner);
    b.if_end(scope);
    segmented_scan(b, f.block, f.tid, (ty, r), (acc, flag), ScanBy::Shuffles)?;

    // A run ends where the next key differs (the last slot carries nothing): its scan, then the
    // head of the block after it, which finished the tile.
    let differs = b.setp(Cmp::Ne, Type::U64, next, key);
    let carries = b.setp(Cmp::Ne, Type::U64, key, Operand::Imm(NO_CARRY));
    let ends = b.bin(BinOp::And, Type::Pred, differs, carries);
    let scope = b.if_begin(ends, false);
    reduce_combine(b, ty, r, acc, head)?;
    store_key(b, f, body, key, (acc, ty), checked)?;
    b.if_end(scope);
    b.place(end);
    Ok(())
}

/// Clears `flag` (u32, 1 before) when the slot before `slot` carries the same key: a segment of
/// the carries' scan starts at slot 0 and at each key change (equal keys are consecutive).
fn segment_starts(b: &mut KernelBuilder, (slot, key_addr, key): (Reg, Reg, Reg), flag: Reg) {
    let later = b.setp(Cmp::Ne, Type::U64, slot, Operand::Imm(0));
    let scope = b.if_begin(later, false);
    let prev_addr = b.bin(BinOp::Sub, Type::U64, key_addr, Operand::Imm(8));
    let prev = b.ld(Space::Global, Type::U64, prev_addr);
    let same = b.setp(Cmp::Eq, Type::U64, prev, key);
    b.emit(Op::Selp {
        ty: Type::U32,
        dst: flag,
        a: Operand::Imm(0),
        b: Operand::Imm(1),
        pred: same,
    });
    b.if_end(scope);
}

/// Counts the block finished in the u64 at `counter` once every thread's writes are done, and
/// returns whether it was the last of `count` (a predicate, the same in every thread); the last
/// one resets the counter. Thread 0 fences before the count (a release: the block's writes,
/// ordered before it by the barrier, are visible before the count is) and the last one after it
/// (an acquire: the other blocks' writes are visible to the reads that follow the barrier).
pub(super) fn finished_last(b: &mut KernelBuilder, tid: Reg, counter: Reg, count: Reg) -> Reg {
    b.shared(LAST, 4, 4);
    let flag = b.mov(Type::U64, Operand::Symbol(LAST.into()));
    b.emit(Op::BarSync);
    let first = b.setp(Cmp::Eq, Type::U64, tid, Operand::Imm(0));
    let scope = b.if_begin(first, false);
    b.emit(Op::Fence);
    let old = b.atom_global(AtomOp::Add, Type::U64, (counter, 0), Operand::Imm(1));
    let before_last = b.bin(BinOp::Sub, Type::U64, count, Operand::Imm(1));
    let is_last = b.setp(Cmp::Eq, Type::U64, old, before_last);
    let inner = b.if_begin(is_last, false);
    b.st(Space::Global, Type::U64, counter, Operand::Imm(0));
    b.emit(Op::Fence);
    b.if_end(inner);
    let verdict = b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), is_last);
    b.st(Space::Shared, Type::U32, flag, verdict);
    b.if_end(scope);
    b.emit(Op::BarSync);
    let verdict = b.ld(Space::Shared, Type::U32, flag);
    b.setp(Cmp::Ne, Type::U32, verdict, Operand::Imm(0))
}

/// Stores the value of the run of `key` (a tile position, times the lanes plus the lane) to the
/// output, as [`super::block_carry`] stores a tile it finished.
fn store_key(
    b: &mut KernelBuilder,
    f: &Frame,
    body: &Body,
    key: Reg,
    value: (Reg, Ty),
    checked: bool,
) -> Result<(), GenError> {
    let skip = b.label();
    let (position, lane) = split_key(b, f, key);
    let tile = f.layout.tile(b, &f.params, position, checked, skip);
    f.layout
        .store_output(b, body, &f.params, (tile, lane), value, checked)?;
    b.place(skip);
    Ok(())
}

/// A key's tile position and lane.
fn split_key(b: &mut KernelBuilder, f: &Frame, key: Reg) -> (Reg, Option<Reg>) {
    match f.layout.lanes {
        Some(lanes) => {
            let position = b.bin(BinOp::Div, Type::U64, key, lanes);
            let whole = b.bin(BinOp::Mul, Type::U64, position, lanes);
            let lane = b.bin(BinOp::Sub, Type::U64, key, whole);
            (position, Some(lane))
        }
        None => (key, None),
    }
}

/// The fix-up of a grid of more than `block` blocks, a kernel of one thread per block slot of
/// the main kernel, in fix-up blocks of `block` slots:
///
/// - a segmented scan of the carries of each fix-up block, a new segment at each key change
///   ([`segmented_scan`]); the scans replace the carries. The last slot of a run that starts
///   inside the fix-up block combines its scan with the head of the block after the run (the
///   one that finished the tile) and stores the output;
/// - the last slot of a run that started in an earlier fix-up block (at most one per fix-up
///   block) is noted in `span_ends`, and the last fix-up block to finish (the count of
///   [`finished_last`]) finishes those runs, one thread each: the slot's scan combined with the
///   scans at the end of the earlier fix-up blocks the run covers, walking back one fix-up
///   block per step, then the head. Two kernels did this before, the second launched only when
///   some tile covered a block's share; one launch fewer saved its time on every tile set with
///   long tiles.
///
/// So a tile spanning `n` main blocks costs `log2(block)` scan steps plus `⌈n / block⌉` serial
/// steps, always in the same order.
pub(crate) fn fixup_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
) -> Result<Kernel, GenError> {
    let Some((ty, r)) = body.reduce else {
        return Err(GenError::Unsupported(
            "only a reducing body has a fix-up".into(),
        ));
    };
    let (t, size) = (ptx_type(ty), ty.size());
    let mut b = KernelBuilder::new(entry_from_back(plan, 0));
    let f = frame(&mut b, body, opts, plan, count_tiles)?;
    let temp = |name: &str| temp_index(plan, name).map(|k| f.params.temps[k]);
    let s = Slots {
        keys: temp(CARRY_KEYS)?,
        values: temp(CARRY_VALUES)?,
        heads: temp(CARRY_HEADS)?,
    };
    let (span_ends, counter) = (temp(SPAN_ENDS)?, temp(COUNTER)?);
    let done = b.label();

    let ctaid = b.special(Special::CtaidX);
    let start = b.bin(BinOp::MulWide, Type::U32, ctaid, Operand::Imm(f.block));
    let slot = b.bin(BinOp::Add, Type::U64, start, f.tid);
    let blocks = match f.blocks {
        Some(blocks) => blocks,
        None => blocks_per_lane(&mut b, f.work, f.capacity),
    };
    let slots = match f.layout.lanes {
        Some(lanes) => b.bin(BinOp::Mul, Type::U64, blocks, lanes),
        None => blocks,
    };
    if f.stride.is_some() {
        strided_slots(&mut b, f.block, slots, done);
    }
    let valid = b.setp(Cmp::Lt, Type::U64, slot, slots);
    let key = b.mov(Type::U64, Operand::Imm(NO_CARRY));
    let acc = reduce_identity(&mut b, ty, r)?;
    let key_addr = b.elem_addr(s.keys, slot, 8);
    let value_addr = b.elem_addr(s.values, slot, size);
    let scope = b.if_begin(valid, false);
    b.ld_to(Space::Global, Type::U64, key, key_addr);
    b.ld_to(Space::Global, t, acc, value_addr);
    b.if_end(scope);
    // A run's key, when valid, is finished by a later block of its lane: `slot + 1 < slots`.
    let carries = b.setp(Cmp::Ne, Type::U64, key, Operand::Imm(NO_CARRY));
    let ends = b.reg_for(Type::Pred);
    b.emit(Op::Mov {
        ty: Type::Pred,
        dst: ends,
        src: Operand::Imm(0),
    });
    let scope = b.if_begin(carries, false);
    let next = b.bin(BinOp::Add, Type::U64, key_addr, Operand::Imm(8));
    let following = b.ld(Space::Global, Type::U64, next);
    b.emit(Op::Setp {
        cmp: Cmp::Ne,
        ty: Type::U64,
        dst: ends,
        a: following.into(),
        b: key.into(),
    });
    b.if_end(scope);

    // A segment starts at slot 0 and at each key change.
    let flag = b.mov(Type::U32, Operand::Imm(1));
    let outer = b.if_begin(valid, false);
    segment_starts(&mut b, (slot, key_addr, key), flag);
    b.if_end(outer);
    // The fix-up block's span end, none until a thread finds it (the scan's barriers order
    // this store before that one).
    b.shared(SPAN, 8, 8);
    let span = b.mov(Type::U64, Operand::Symbol(SPAN.into()));
    let lead = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(0));
    b.st_if(lead, Space::Shared, Type::U64, span, Operand::Imm(NO_CARRY));
    segmented_scan(
        &mut b,
        f.block,
        f.tid,
        (ty, r),
        (acc, flag),
        ScanBy::Shuffles,
    )?;
    let scope = b.if_begin(valid, false);
    b.st(Space::Global, t, value_addr, acc);
    let inner = b.if_begin(ends, false);
    let inside = b.setp(Cmp::Ne, Type::U32, flag, Operand::Imm(0));
    let mut choice = b.if_begin(inside, false);
    let next_slot = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(1));
    let head = b.elem_addr(s.heads, next_slot, size);
    let head = b.ld(Space::Global, t, head);
    reduce_combine(&mut b, ty, r, acc, head)?;
    store_key(&mut b, &f, body, key, (acc, ty), opts.checked)?;
    b.if_else(&mut choice);
    b.st(Space::Shared, Type::U64, span, slot);
    b.if_end(choice);
    b.if_end(inner);
    b.if_end(scope);
    b.emit(Op::BarSync);
    let scope = b.if_begin(lead, false);
    let found = b.ld(Space::Shared, Type::U64, span);
    let ctaid = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let addr = b.elem_addr(span_ends, ctaid, 8);
    b.st(Space::Global, Type::U64, addr, found);
    b.if_end(scope);

    let nctaid = b.special(Special::NctaidX);
    let fixup_blocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    let last = finished_last(&mut b, f.tid, counter, fixup_blocks);
    b.bra_if(last, true, done);
    let c = b.mov(Type::U64, f.tid);
    let each = b.loop_begin();
    let past = b.setp(Cmp::Ge, Type::U64, c, fixup_blocks);
    b.break_if(&each, past, false);
    let addr = b.elem_addr(span_ends, c, 8);
    let end_slot = b.ld(Space::Global, Type::U64, addr);
    let some = b.setp(Cmp::Ne, Type::U64, end_slot, Operand::Imm(NO_CARRY));
    let scope = b.if_begin(some, false);
    let first = b.bin(BinOp::Mul, Type::U64, c, Operand::Imm(f.block));
    finish_span(
        &mut b,
        &f,
        body,
        &s,
        (ty, r),
        (end_slot, first),
        opts.checked,
    )?;
    b.if_end(scope);
    b.bin_to(BinOp::Add, Type::U64, c, c, Operand::Imm(f.block));
    b.loop_end(each);
    b.place(done);
    Ok(b.finish())
}

/// The fix-up kernel of a strided frontier grid ([`crate::plan::FrontierGrid::Strided`]) leaves
/// at once (to `done`) when the main kernel's blocks took at most `block` virtual blocks over
/// all lanes (`slots`): the main kernel then joined the runs itself ([`in_kernel`]). The host
/// launches the fix-up whenever the grid's bound has more than `block` blocks, since it cannot
/// count the virtual blocks a frontier needs; the two tests agree because that bound is never
/// below the slots. The branch is uniform over the grid.
fn strided_slots(b: &mut KernelBuilder, block: i64, slots: Reg, done: Label) {
    let few = b.setp(Cmp::Le, Type::U64, slots, Operand::Imm(block));
    b.bra_if(few, false, done);
}

/// Finishes the run that ends at `slot` and started before `first`, the first slot of its
/// fix-up block: the slot's scan, then the scans at the end of the earlier fix-up blocks the
/// run covers, one fix-up block per step, then the head of the block after the run.
fn finish_span(
    b: &mut KernelBuilder,
    f: &Frame,
    body: &Body,
    s: &Slots,
    (ty, r): (Ty, Reduce),
    (slot, first): (Reg, Reg),
    checked: bool,
) -> Result<(), GenError> {
    let (t, size) = (ptx_type(ty), ty.size());
    let addr = b.elem_addr(s.keys, slot, 8);
    let key = b.ld(Space::Global, Type::U64, addr);
    let addr = b.elem_addr(s.values, slot, size);
    let acc = b.ld(Space::Global, t, addr);
    let p_last = b.bin(BinOp::Sub, Type::U64, first, Operand::Imm(1));
    let walk = b.loop_begin();
    let addr = b.elem_addr(s.values, p_last, size);
    let x = b.ld(Space::Global, t, addr);
    reduce_combine(b, ty, r, acc, x)?;
    let p_start = b.bin(BinOp::Sub, Type::U64, p_last, Operand::Imm(f.block - 1));
    let at_start = b.setp(Cmp::Eq, Type::U64, p_start, Operand::Imm(0));
    b.break_if(&walk, at_start, false);
    let addr = b.elem_addr(s.keys, p_start, 8);
    let addr = b.bin(BinOp::Sub, Type::U64, addr, Operand::Imm(8));
    let before = b.ld(Space::Global, Type::U64, addr);
    let other = b.setp(Cmp::Ne, Type::U64, before, key);
    b.break_if(&walk, other, false);
    b.bin_to(BinOp::Sub, Type::U64, p_last, p_start, Operand::Imm(1));
    b.loop_end(walk);
    let next_slot = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(1));
    let addr = b.elem_addr(s.heads, next_slot, size);
    let head = b.ld(Space::Global, t, addr);
    reduce_combine(b, ty, r, acc, head)?;
    store_key(b, f, body, key, (acc, ty), checked)
}
