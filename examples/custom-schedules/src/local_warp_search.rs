//! `local_warp_search`: an even share of atoms per thread; each warp holds a window of 32 tile
//! end offsets in registers, one per lane, and its threads find their tiles by a binary search of
//! the window through warp shuffles.
//!
//! Busato & Bombieri §2.4.2 ("Local Warp Search"): a warp loads chunks of 32 prefix-sum
//! elements "through a coalesced memory access", then "each thread of the warp performs a
//! lightweight binary search (i.e., maximum log2(WarpSize) steps)" over the chunk, repeated
//! "until all work-units are processed". The paper names two versions, the chunk in shared
//! memory and the one "improved by exploiting data locality in registers", where "each warp
//! thread stores the workload offsets in the own registers and then performs a binary search by
//! using ... warp-shuffle instructions". This schedule is the register version only: it needs no
//! shared memory and no barrier for the search, and a shuffle costs what a shared load does, so a
//! second plan would double the compile time for no expected gain. The paper found local warp
//! search balanced inside a warp but not across warps, and three times slower than its
//! multi-phase mapping on web-NotreDame.
//!
//! Work-oriented, like every search here: thread `g` takes atoms `a0 .. a1` (`items_per_thread`
//! of them), so warps are balanced too. The warp's lane 0 finds the warp's first tile by one
//! binary search of the offsets in global memory (the paper's warps take fixed chunks of tiles
//! and need none). The window then holds the ends of the 32 tiles from there, lane `l` loading
//! tile `base + l` (coalesced; past the last tile, a value above every atom). Each thread counts
//! the window's ends at or below `a0` in five shuffle steps plus one: fewer than 32 means its
//! first tile is in the window; otherwise the warp slides the window 32 tiles on and every thread
//! still unresolved searches again, until a vote finds the whole warp resolved. A run of empty
//! tiles inside one warp's atoms therefore costs a window per 32 tiles. The end of a thread's
//! share is the next thread's search; the walk, carry-out and deterministic fix-up are the
//! primitives layer's ([`lb::schedule::primitives::work_oriented`]).

use lb::schedule::builder::KernelBuilder;
use lb::schedule::ir::{
    BinOp, Cmp, Kernel, Op, Operand, Reg, RegClass, Rounding, ShflMode, Type, VoteMode,
};
use lb::schedule::plan::Plan;
use lb::schedule::primitives::warp::shfl;
use lb::schedule::primitives::work_oriented::{
    self, global_end, narrow, select_to, Frame, Share, TileEnds,
};
use lb::schedule::{Body, GenError, Options, ScheduleTemplate};

/// The window: one tile end per lane of a warp.
const WINDOW: i64 = 32;

work_oriented_schedule! {
    /// The `local_warp_search` schedule.
    LocalWarpSearch => NAME = "local_warp_search"
}

impl ScheduleTemplate for LocalWarpSearch {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        crate::first_plan(self.plans(body, opts)?)
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        if !opts.block.is_multiple_of(32) {
            return Err(GenError::BadBlock {
                schedule: NAME,
                block: opts.block,
                why: "every warp searches a window of 32 tile offsets, so the block must be \
                      whole warps"
                    .into(),
            });
        }
        work_oriented::plans(body, opts, NAME, false)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        work_oriented::build(body, opts, plan, false, share)
    }
}

/// The first atom (width `Frame::w`) of the share of thread `thread` (u64).
fn first_atom(b: &mut KernelBuilder, f: &Frame, thread: Reg) -> Reg {
    let start = b.bin(BinOp::Mul, Type::U64, thread, f.per_thread.clone());
    let a = b.bin(BinOp::Min, Type::U64, start, f.atoms);
    narrow(b, f.w, a)
}

/// How many of the window's ends (lane `l` holding `e`, sorted across the lanes) are at most
/// `a`, `0..=32` (`.u32`): a branch-free binary search over the lanes, every lane its own.
fn count_in_window(b: &mut KernelBuilder, w: Type, e: Reg, a: Reg) -> Reg {
    let pos = b.mov(Type::U32, Operand::Imm(0));
    // Steps 16, 8, 4, 2, 1 count the ends at most `a` among the first 31; the last step adds
    // the 32nd.
    for step in [16, 8, 4, 2, 1, 0] {
        let probe = if step > 1 {
            b.bin(BinOp::Add, Type::U32, pos, Operand::Imm(step - 1))
        } else {
            pos
        };
        let v = shfl(b, ShflMode::Idx, e, w, Operand::Reg(probe));
        let le = b.setp(Cmp::Le, w, v, a);
        let next = b.bin(BinOp::Add, Type::U32, pos, Operand::Imm(step.max(1)));
        select_to(b, Type::U32, pos, next, pos, le);
    }
    pos
}

/// The number of tiles that end at or before the thread's first atom `a0` (width `Frame::w`),
/// found in the warp's sliding window. Every lane of the warp runs it (the loop is warp-uniform).
fn window_search(b: &mut KernelBuilder, f: &Frame, (lane, thread): (Reg, Reg), a0: Reg) -> Reg {
    let w = f.w;
    // Lane 0 searches global memory for the warp's first tile; the warp shares it.
    let warp_thread = b.bin(BinOp::Sub, Type::U64, thread, lane);
    let lead = b.setp(Cmp::Eq, Type::U64, lane, Operand::Imm(0));
    let base = b.mov(w, Operand::Imm(0));
    let scope = b.if_begin(lead, false);
    let aw = first_atom(b, f, warp_thread);
    let found = crate::global_search(b, f, aw);
    b.mov_to(w, base, found);
    b.if_end(scope);
    let base = shfl(b, ShflMode::Idx, base, w, Operand::Imm(0));

    let tiles = narrow(b, w, f.layout.tiles);
    let atoms = narrow(b, w, f.atoms);
    // Above every atom, and it fits: a 32-bit plan has `tiles + atoms` in 32 bits, and without
    // tiles there are no atoms.
    let beyond = b.bin(BinOp::Add, w, atoms, Operand::Imm(1));
    let lane_w = narrow(b, w, lane);
    let count = b.mov(w, Operand::Imm(0));
    let open = b.mov(Type::U32, Operand::Imm(1));
    let windows = b.loop_begin();
    let tile = b.bin(BinOp::Add, w, base, lane_w);
    let e = b.mov(w, beyond);
    let inside = b.setp(Cmp::Lt, w, tile, tiles);
    let load = b.if_begin(inside, false);
    let end = global_end(b, f, tile);
    b.mov_to(w, e, end);
    b.if_end(load);
    let pos = count_in_window(b, w, e, a0);
    let within = b.setp(Cmp::Lt, Type::U32, pos, Operand::Imm(WINDOW));
    let pending = b.setp(Cmp::Ne, Type::U32, open, Operand::Imm(0));
    let lands = b.bin(BinOp::And, Type::Pred, within, pending);
    let pos_w = if w == Type::U32 {
        pos
    } else {
        b.cvt(Rounding::None, Type::U64, Type::U32, pos)
    };
    let at = b.bin(BinOp::Add, w, base, pos_w);
    select_to(b, w, count, at, count, lands);
    b.emit_guarded(
        lands,
        false,
        Op::Mov {
            ty: Type::U32,
            dst: open,
            src: Operand::Imm(0),
        },
    );
    let closed = b.setp(Cmp::Eq, Type::U32, open, Operand::Imm(0));
    let all = b.reg(RegClass::Pred);
    b.emit(Op::Vote {
        mode: VoteMode::All,
        dst: all,
        a: closed.into(),
        mask: Operand::Imm(0xffff_ffff),
    });
    b.break_if(&windows, all, false);
    b.bin_to(BinOp::Add, w, base, base, Operand::Imm(WINDOW));
    b.loop_end(windows);
    count
}

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    let w = f.w;
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.block));
    let thread = b.bin(BinOp::Add, Type::U64, first, f.tid);
    let lane = b.bin(BinOp::And, Type::B64, f.tid, Operand::Imm(31));
    let a0 = first_atom(b, f, thread);
    let stop = b.bin(BinOp::Add, Type::U64, thread, Operand::Imm(1));
    let a1 = first_atom(b, f, stop);
    let after = window_search(b, f, (lane, thread), a0);
    // The next thread's search is this thread's end; thread 0 searches the block's end.
    let i1 = work_oriented::from_next_thread(b, f, after, &mut |b| {
        let past = b.bin(BinOp::Add, Type::U64, first, Operand::Imm(f.block));
        let end = first_atom(b, f, past);
        crate::global_search(b, f, end)
    });
    let front = b.setp(Cmp::Eq, Type::U64, thread, Operand::Imm(0));
    let zero = b.mov(w, Operand::Imm(0));
    let i0 = b.selp(w, zero, after, front);
    Share {
        i0,
        j0: a0,
        i1,
        j1: a1,
        ends: TileEnds::Global,
        block_atoms: None,
        values: None,
    }
}
