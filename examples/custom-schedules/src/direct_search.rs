//! `direct_search`: an even share of atoms per thread; every thread finds the tiles at both ends
//! of its share by its own binary search of the tile offsets in global memory.
//!
//! Busato & Bombieri §2.4.1 ("Direct Search"): "given the exclusive prefix-sum array of the
//! work-unit addresses stored in global memory, each thread performs a binary search over the
//! array to find the corresponding work-item index". It balances threads, warps and blocks
//! exactly, at the cost of `#threads × binarysearch()` scattered global loads; the paper found
//! it "far worse than the other techniques" and left it out of its figures.
//!
//! The paper maps one work-unit (atom) per thread. Here a thread takes `items_per_thread` atoms
//! (`a0 .. a1`, as in every work-oriented schedule, so that a share amortizes its carry-out), and
//! the search is the paper's, done for the thread's first atom (`i0`, tiles ending at or before
//! `a0`) and again for the end of its share (`i1`, tiles ending at or before `a1`): each thread
//! searches on its own, with no shuffle, no shared memory and no barrier between the searches.
//! That independence is what sets it apart from `nonzero_split`, which takes its end from the
//! next thread's search. Thread 0 starts at tile 0 so that it also finishes the empty tiles at the
//! front. The walk, carry-out and deterministic fix-up are the primitives layer's
//! ([`lb::schedule::primitives::work_oriented`]).

use lb::schedule::builder::KernelBuilder;
use lb::schedule::ir::{BinOp, Cmp, Kernel, Operand, Type};
use lb::schedule::plan::Plan;
use lb::schedule::primitives::work_oriented::{self, narrow, Frame, Share, TileEnds};
use lb::schedule::{Body, GenError, Options, ScheduleTemplate};

work_oriented_schedule! {
    /// The `direct_search` schedule.
    DirectSearch => NAME = "direct_search"
}

impl ScheduleTemplate for DirectSearch {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        crate::first_plan(self.plans(body, opts)?)
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        work_oriented::plans(body, opts, NAME, false)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        work_oriented::build(body, opts, plan, false, share)
    }
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
    let after = crate::global_search(b, f, a0);
    let i1 = crate::global_search(b, f, a1);
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
