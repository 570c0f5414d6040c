//! `nonzero_split`: an even share of atoms per thread; a 1-D binary search of the tile end offsets
//! finds the tile of each thread's first and last atom.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.3 ("*non-zero splitting* ... considers the total
//! number of nonzero elements ... as the total work"; the table's "Work (number of nonzeros)
//! split equally to number of threads. 1-D binary search on row-offsets to find the active row
//! for any given nonzero/thread"; static, exact, flat).
//!
//! Thread `g` takes atoms `a0 = min(g × items, atoms) .. a1 = min(a0 + items, atoms)`. In
//! merge-path coordinates it starts after the tiles whose end is at most `a0` and stops after
//! those whose end is at most `a1`, so each tile end falls to exactly one thread; thread 0 starts
//! at tile 0 so that it also finishes the empty tiles at the front. Only atoms count as work, so
//! a long run of empty tiles is finished by one thread (what merge path balances and this does
//! not). The walk, carry-out and fix-up are [`super::work_oriented`]'s.

use super::{Schedule, ScheduleTemplate};
use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::ir::{BinOp, Cmp, Kernel, Operand, Reg, Type};
use crate::plan::Plan;
use crate::primitives::work_oriented::{
    self, global_end, narrow, select_to, Frame, Share, TileEnds,
};
use crate::{GenError, Options};

/// The `nonzero_split` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct NonzeroSplit;

impl ScheduleTemplate for NonzeroSplit {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let mut plans = self.plans(body, opts)?;
        Ok(plans.remove(0))
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        work_oriented::strided_plans(body, opts, Schedule::NonzeroSplit.name(), false)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        work_oriented::build(body, opts, plan, false, share)
    }
}

/// The number of tiles whose end offset is at most `a` (width `w`).
fn tiles_ending_by(b: &mut KernelBuilder, f: &Frame, tiles: Reg, a: Reg) -> Reg {
    let w = f.w;
    let lo = b.mov(w, Operand::Imm(0));
    let hi = b.mov(w, tiles);
    let search = b.loop_begin();
    let found = b.setp(Cmp::Ge, w, lo, hi);
    b.break_if(&search, found, false);
    let span = b.bin(BinOp::Sub, w, hi, lo);
    let half = b.bin(BinOp::Shr, w, span, Operand::Imm(1));
    let mid = b.bin(BinOp::Add, w, lo, half);
    let end = global_end(b, f, mid);
    let before = b.setp(Cmp::Le, w, end, a);
    let next = b.bin(BinOp::Add, w, mid, Operand::Imm(1));
    select_to(b, w, lo, next, lo, before);
    select_to(b, w, hi, hi, mid, before);
    b.loop_end(search);
    lo
}

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    let w = f.w;
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, Operand::Imm(f.block));
    let thread = b.bin(BinOp::Add, Type::U64, first, f.tid);
    let start = b.bin(BinOp::Mul, Type::U64, thread, f.per_thread.clone());
    let a0 = b.bin(BinOp::Min, Type::U64, start, f.atoms);
    let stop = b.bin(BinOp::Add, Type::U64, a0, f.per_thread.clone());
    let a1 = b.bin(BinOp::Min, Type::U64, stop, f.atoms);
    let (a0, a1) = (narrow(b, w, a0), narrow(b, w, a1));
    let tiles = narrow(b, w, f.layout.tiles);
    let after = tiles_ending_by(b, f, tiles, a0);
    // The next thread's search is this thread's end; thread 0 searches the block's end.
    let i1 = work_oriented::from_next_thread(b, f, after, &mut |b| {
        let past = b.bin(BinOp::Add, Type::U64, first, Operand::Imm(f.block));
        let start = b.bin(BinOp::Mul, Type::U64, past, f.per_thread.clone());
        let end = b.bin(BinOp::Min, Type::U64, start, f.atoms);
        let end = narrow(b, w, end);
        tiles_ending_by(b, f, tiles, end)
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
