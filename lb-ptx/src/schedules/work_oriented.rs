//! What `merge_path` and `nonzero_split` share: their plans (one per index width), the kernel
//! frame, the per-thread walk over an even share of the work, the carry-out of a partial tile and
//! the deterministic fix-up kernel.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.3 (work-oriented scheduling: "each thread is
//! assigned a contiguous range of work items to process in a sequential loop", static and exact)
//! and Algorithm 3 (complete tiles reduced in registers and stored, the partial tile at the end of
//! a range written to `row_carry_out` / `value_carry_out`, then a fix-up step). The schedules
//! differ only in how a thread finds the two ends of its range; both describe a range by merge-path
//! coordinates `(i, j)`: `i` tiles finished before it, `j` atoms consumed before it.
//!
//! The walk from `(i0, j0)` to `(i1, j1)` consumes atom `j` while `j < end(i)`, otherwise finishes
//! tile `i` (§4.4.2.1: "complete" tiles, then the "partial" tile). Every tile is finished by
//! exactly one thread, empty tiles included, and that thread stores its own partial value with a
//! plain store, so the output need not be zeroed and every element is written once.
//!
//! Determinism: Algorithm 3's fix-up adds carry-outs with `+=` in thread order. Here each thread
//! writes one carry slot (output index and value, or an invalid key) with plain stores, and the
//! carry-outs of one output element sit in consecutive slots (threads follow the path in order).
//! The fix-up kernel gives each run of equal keys to its first slot, which combines the run left
//! to right and then the finishing thread's value: a fixed order and no atomics, so equal inputs
//! give bitwise equal outputs. A run is walked by one thread, so a tile spanning `s` shares costs
//! `s` serial steps in the fix-up.
//!
//! Lanes: each lane is an independent copy of the decomposition, `blocks_per_lane` consecutive
//! blocks each (the grid is `blocks_per_lane × lanes`, see [`Grid::CoverWork`]). Carry keys are
//! output indices `tile × lanes + lane`, so runs never join across lanes.

use std::borrow::Cow;

use super::{common_temps, Layout, Schedule};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{
    check_index, emit_body, ptx_type, reduce_combine, reduce_identity, AtomContext, KernelParams,
};
use crate::ir::{BinOp, Cmp, Kernel, Op, Operand, Reg, Rounding, Space, Special, Type};
use crate::plan::{Grid, KernelPlan, Plan, Temp, TempCount, TempRole};
use crate::{GenError, IndexWidth, Options};

/// The share of a thread when `Options::items_per_thread` is left at 1 (merge path: tiles plus
/// atoms; nonzero split: atoms), the same on every target for now. Seven keeps the walk and its
/// registers short while amortizing a thread's two searches over several items; it is a starting
/// point, not a tuned value.
pub const DEFAULT_ITEMS_PER_THREAD: u32 = 7;

/// The largest `tiles + atoms` the 32-bit variant handles: every index it keeps in 32 bits
/// (diagonals, tiles, atoms, tile offsets) is at most that sum.
pub const U32_INDEX_LIMIT: u64 = u32::MAX as u64;

const CARRY_KEYS: &str = "carry_keys";
const CARRY_VALUES: &str = "carry_values";
/// The key of a carry slot that carries nothing.
const NO_CARRY: i64 = -1;

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

/// One plan per index width `opts.index` asks for, 32-bit first. `count_tiles`: whether a tile
/// counts as a work item (merge path) or only atoms do (nonzero split).
pub fn plans(
    body: &Body,
    opts: &Options,
    schedule: Schedule,
    count_tiles: bool,
) -> Result<Vec<Plan>, GenError> {
    if opts.tiles.is_some() {
        return Err(GenError::Unsupported(format!(
            "`{}` does not take `tiles` yet: a frontier makes its search space non-contiguous \
             (issue #5); use `thread_mapped` or a group-mapped schedule",
            schedule.name()
        )));
    }
    let per_thread = items_per_thread(opts);
    let widths: &[IndexWidth] = match opts.index {
        IndexWidth::U32 => &[IndexWidth::U32],
        IndexWidth::U64 => &[IndexWidth::U64],
        IndexWidth::Auto => &[IndexWidth::U32, IndexWidth::U64],
    };
    let grid = Grid::CoverWork {
        per_thread,
        count_tiles,
    };
    let mut temps = common_temps(opts);
    if let Some((ty, _)) = body.reduce {
        // One slot per thread, as one element per block: `PerBlock` follows the first kernel's
        // grid, so the temporaries always match the launch.
        temps.push(Temp {
            name: Cow::Borrowed(CARRY_KEYS),
            elem_bytes: 8 * opts.block,
            count: TempCount::PerBlock { extra: 0 },
            zero: false,
            role: TempRole::Scratch,
        });
        temps.push(Temp {
            name: Cow::Borrowed(CARRY_VALUES),
            elem_bytes: ty.size() * opts.block,
            count: TempCount::PerBlock { extra: 0 },
            zero: false,
            role: TempRole::Scratch,
        });
    }
    Ok(widths
        .iter()
        .map(|&w| {
            let (suffix, index_limit) = match w {
                IndexWidth::U32 => ("u32", Some(U32_INDEX_LIMIT)),
                _ => ("u64", None),
            };
            let main = format!("{}_{}_{suffix}", body.name, schedule.name());
            let mut kernels = vec![KernelPlan {
                entry: Cow::Owned(main.clone()),
                block: opts.block,
                grid,
                dynamic_shared: 0,
            }];
            if body.reduce.is_some() {
                kernels.push(KernelPlan {
                    entry: Cow::Owned(format!("{main}_fixup")),
                    block: opts.block,
                    grid,
                    dynamic_shared: 0,
                });
            }
            Plan {
                schedule: Cow::Borrowed(schedule.name()),
                kernels: Cow::Owned(kernels),
                temps: Cow::Owned(temps.clone()),
                index_limit,
                select: None,
            }
        })
        .collect())
}

/// What a kernel of a work-oriented plan knows before it looks for its share. All u64.
pub struct Frame {
    pub w: Type,
    pub layout: Layout,
    pub params: KernelParams,
    /// `row_offsets[tiles]`.
    pub atoms: Reg,
    /// `tiles + atoms` or `atoms`.
    pub work: Reg,
    /// Work items per block (an immediate's value).
    pub per_block: i64,
    pub per_thread: i64,
    pub block: i64,
    /// The block's index inside its lane's copy of the decomposition.
    pub cta: Reg,
    pub tid: Reg,
    /// The lane, with `Options::lanes`.
    pub lane: Option<Reg>,
}

/// A thread's range in merge-path coordinates (registers of width `Frame::w`), and where the walk
/// reads tile end offsets.
pub struct Share {
    pub i0: Reg,
    pub j0: Reg,
    pub i1: Reg,
    pub j1: Reg,
    pub ends: TileEnds,
}

/// Where `end(i) = row_offsets[i + 1]` is read during the walk.
pub enum TileEnds {
    /// From global memory.
    Global,
    /// From a shared array of width `Frame::w` holding the ends of tiles `first..`.
    Shared { base: Reg, first: Reg },
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

/// `row_offsets[i + 1]` in width `w`, for `i` of width `w`.
pub fn global_end(b: &mut KernelBuilder, frame: &Frame, i: Reg) -> Reg {
    let i64_ = widen(b, frame.w, i);
    let addr = b.elem_addr(frame.layout.csr.row_offsets, i64_, 8);
    let next = b.bin(BinOp::Add, Type::U64, addr, Operand::Imm(8));
    let end = b.ld(Space::Global, Type::U64, next);
    narrow(b, frame.w, end)
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
fn frame(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
) -> Result<Frame, GenError> {
    let params = KernelParams::declare(b, body, &plan.temps)?;
    let layout = Layout::new(b, body, opts, &params)?;
    let last = b.elem_addr(layout.csr.row_offsets, layout.tiles, 8);
    let atoms = b.ld(Space::Global, Type::U64, last);
    let work = if count_tiles {
        b.bin(BinOp::Add, Type::U64, layout.tiles, atoms)
    } else {
        atoms
    };
    let per_thread = i64::from(items_per_thread(opts));
    let block = i64::from(opts.block);
    let per_block = per_thread * block;
    let ctaid = b.special(Special::CtaidX);
    let ctaid = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let tid = b.special(Special::TidX);
    let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let (cta, lane) = match layout.lanes {
        Some(_) => {
            let up = b.bin(BinOp::Add, Type::U64, work, Operand::Imm(per_block - 1));
            let blocks = b.bin(BinOp::Div, Type::U64, up, Operand::Imm(per_block));
            let per_lane = b.bin(BinOp::Max, Type::U64, blocks, Operand::Imm(1));
            let lane = b.bin(BinOp::Div, Type::U64, ctaid, per_lane);
            let first = b.bin(BinOp::Mul, Type::U64, lane, per_lane);
            let cta = b.bin(BinOp::Sub, Type::U64, ctaid, first);
            (cta, Some(lane))
        }
        None => (ctaid, None),
    };
    Ok(Frame {
        w: plan_width(plan),
        layout,
        params,
        atoms,
        work,
        per_block,
        per_thread,
        block,
        cta,
        tid,
        lane,
    })
}

fn temp_index(plan: &Plan, name: &str) -> Result<usize, GenError> {
    plan.temps
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| GenError::Unsupported(format!("the plan lacks the `{name}` temporary")))
}

/// Builds the main kernel: the frame, the schedule's `share` search, the walk, the carry-out.
pub fn main_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
    share: fn(&mut KernelBuilder, &Frame) -> Share,
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(plan.kernels[0].entry.as_ref());
    let f = frame(&mut b, body, opts, plan, count_tiles)?;
    let s = share(&mut b, &f);
    let w = f.w;
    let checked = opts.checked;

    let lane = match f.lane {
        Some(l) => Some(l),
        None if body.roles.contains(&IndexRole::Lane) => Some(b.mov(Type::U64, Operand::Imm(0))),
        None => None,
    };
    let wants_rank = body.roles.contains(&IndexRole::Rank);
    let acc = body
        .reduce
        .map(|(ty, r)| reduce_identity(&mut b, ty, r))
        .transpose()?;
    let i = b.mov(w, s.i0);
    let j = b.mov(w, s.j0);

    // Consumes atoms `j..limit` of tile `i` (u64 `tile`), combining into `acc`.
    let atoms_of = |b: &mut KernelBuilder, tile: Reg, limit: Reg| -> Result<(), GenError> {
        let begin = wants_rank.then(|| {
            let addr = b.elem_addr(f.layout.csr.row_offsets, tile, 8);
            b.ld(Space::Global, Type::U64, addr)
        });
        let atoms = b.loop_begin();
        let done = b.setp(Cmp::Ge, w, j, limit);
        b.break_if(&atoms, done, false);
        let atom = widen(b, w, j);
        let rank = begin.map(|begin| b.bin(BinOp::Sub, Type::U64, atom, begin));
        let ctx = AtomContext {
            tile: Some(tile),
            atom: Some(atom),
            lane,
            rank,
        };
        let x = emit_body(b, body, &f.params, &ctx, checked)?;
        if let (Some(acc), Some(x), Some((ty, r))) = (acc, x, body.reduce) {
            reduce_combine(b, ty, r, acc, x)?;
        }
        b.bin_to(BinOp::Add, w, j, j, Operand::Imm(1));
        b.loop_end(atoms);
        Ok(())
    };

    let tiles = b.loop_begin();
    let done = b.setp(Cmp::Ge, w, i, s.i1);
    b.break_if(&tiles, done, false);
    let end = match s.ends {
        TileEnds::Global => global_end(&mut b, &f, i),
        TileEnds::Shared { base, first } => {
            let k = b.bin(BinOp::Sub, w, i, first);
            let k = widen(&mut b, w, k);
            let addr = b.elem_addr(base, k, w.size());
            b.ld(Space::Shared, w, addr)
        }
    };
    let tile = widen(&mut b, w, i);
    atoms_of(&mut b, tile, end)?;
    if let (Some(acc), Some((ty, r))) = (acc, body.reduce) {
        f.layout
            .store_output(&mut b, body, &f.params, (tile, lane), (acc, ty), checked)?;
        let identity = reduce_identity(&mut b, ty, r)?;
        b.mov_to(ptx_type(ty), acc, identity);
    }
    b.bin_to(BinOp::Add, w, i, i, Operand::Imm(1));
    b.loop_end(tiles);

    // The partial tile: `i` may be `tiles` here, whose begin `row_offsets[tiles]` exists.
    let partial_from = body.reduce.map(|_| b.mov(w, j));
    let tile = widen(&mut b, w, i);
    atoms_of(&mut b, tile, s.j1)?;

    if let (Some(acc), Some(partial_from), Some((ty, _))) = (acc, partial_from, body.reduce) {
        let keys = f.params.temps[temp_index(plan, CARRY_KEYS)?];
        let values = f.params.temps[temp_index(plan, CARRY_VALUES)?];
        let key = match (f.layout.lanes, f.lane) {
            (Some(lanes), Some(l)) => {
                let row = b.bin(BinOp::Mul, Type::U64, tile, lanes);
                b.bin(BinOp::Add, Type::U64, row, l)
            }
            _ => tile,
        };
        let carried = b.setp(Cmp::Lt, w, partial_from, s.j1);
        let key = b.selp(Type::U64, key, Operand::Imm(NO_CARRY), carried);
        let ctaid = b.special(Special::CtaidX);
        let first = b.bin(BinOp::MulWide, Type::U32, ctaid, Operand::Imm(f.block));
        let slot = b.bin(BinOp::Add, Type::U64, first, f.tid);
        let addr = b.elem_addr(keys, slot, 8);
        b.st(Space::Global, Type::U64, addr, key);
        let addr = b.elem_addr(values, slot, ty.size());
        b.st(Space::Global, ptx_type(ty), addr, acc);
    }
    Ok(b.finish())
}

/// The fix-up kernel: one thread per carry slot; the first slot of each run of equal keys combines
/// the run in slot order, then the value the finishing thread stored, and stores the result.
pub fn fixup_kernel(body: &Body, opts: &Options, plan: &Plan) -> Result<Kernel, GenError> {
    let Some((ty, r)) = body.reduce else {
        return Err(GenError::Unsupported(
            "only a reducing body has a fix-up".into(),
        ));
    };
    let t = ptx_type(ty);
    let mut b = KernelBuilder::new(plan.kernels[1].entry.as_ref());
    let params = KernelParams::declare(&mut b, body, &plan.temps)?;
    let keys = params.temps[temp_index(plan, CARRY_KEYS)?];
    let values = params.temps[temp_index(plan, CARRY_VALUES)?];
    let Some((out, out_len)) = params.output else {
        return Err(GenError::Unsupported(
            "a reducing body has an output".into(),
        ));
    };
    let done = b.label();

    let tid = b.special(Special::TidX);
    let ntid = b.special(Special::NtidX);
    let ctaid = b.special(Special::CtaidX);
    let nctaid = b.special(Special::NctaidX);
    let first = b.bin(BinOp::MulWide, Type::U32, ctaid, ntid);
    let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let slot = b.bin(BinOp::Add, Type::U64, first, tid);
    let slots = b.bin(BinOp::MulWide, Type::U32, nctaid, ntid);

    let addr = b.elem_addr(keys, slot, 8);
    let key = b.ld(Space::Global, Type::U64, addr);
    let none = b.setp(Cmp::Eq, Type::U64, key, Operand::Imm(NO_CARRY));
    b.bra_if(none, false, done);
    let at_start = b.setp(Cmp::Eq, Type::U64, slot, Operand::Imm(0));
    let head = b.if_begin(at_start, true);
    let prev_addr = b.bin(BinOp::Sub, Type::U64, addr, Operand::Imm(8));
    let prev = b.ld(Space::Global, Type::U64, prev_addr);
    let same = b.setp(Cmp::Eq, Type::U64, prev, key);
    b.bra_if(same, false, done);
    b.if_end(head);

    let vaddr = b.elem_addr(values, slot, ty.size());
    let acc = b.ld(Space::Global, t, vaddr);
    let k = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(1));
    let run = b.loop_begin();
    let past = b.setp(Cmp::Ge, Type::U64, k, slots);
    b.break_if(&run, past, false);
    let kaddr = b.elem_addr(keys, k, 8);
    let next = b.ld(Space::Global, Type::U64, kaddr);
    let other = b.setp(Cmp::Ne, Type::U64, next, key);
    b.break_if(&run, other, false);
    let vaddr = b.elem_addr(values, k, ty.size());
    let x = b.ld(Space::Global, t, vaddr);
    reduce_combine(&mut b, ty, r, acc, x)?;
    b.bin_to(BinOp::Add, Type::U64, k, k, Operand::Imm(1));
    b.loop_end(run);

    if let Some(flag) = params.error_flag.filter(|_| opts.checked) {
        check_index(&mut b, flag, key, out_len, body.params.len(), done);
    }
    let oaddr = b.elem_addr(out, key, ty.size());
    let own = b.ld(Space::Global, t, oaddr);
    reduce_combine(&mut b, ty, r, acc, own)?;
    b.st(Space::Global, t, oaddr, acc);
    b.place(done);
    Ok(b.finish())
}

/// The kernels of a work-oriented plan: the main kernel, and the fix-up when the body reduces.
pub fn build(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    count_tiles: bool,
    share: fn(&mut KernelBuilder, &Frame) -> Share,
) -> Result<Vec<Kernel>, GenError> {
    let mut kernels = vec![main_kernel(body, opts, plan, count_tiles, share)?];
    if body.reduce.is_some() {
        kernels.push(fixup_kernel(body, opts, plan)?);
    }
    Ok(kernels)
}
