//! `block_search`: an even share of atoms per thread; each block finds its range of tiles, stages
//! their end offsets in shared memory, and every thread searches there for its share.
//!
//! Busato & Bombieri §2.4.3 ("Block Search", after Davidson et al.'s cooperative blocks): "each
//! block of threads loads a *maxi chunk* of prefix-sum elements from the global to the shared
//! memory", the chunk is "partitioned by considering the amount of work-units included and the
//! number of threads per block", and "each block thread performs only one binary search to find
//! the corresponding slot", in shared memory. The paper found it "far worse than the other
//! techniques" and left it out of its figures.
//!
//! The paper's maxi chunk is a fixed number of tiles per block, which balances the threads of a
//! block but not the blocks. Here, as in every work-oriented schedule, the block's chunk is a
//! fixed number of atoms (`items_per_thread × block`), so blocks balance too: thread 0 finds the
//! block's first and end tile by two binary searches of the offsets in global memory, the block
//! stages the end offsets of those tiles in shared memory (coalesced; when they do not fit, as
//! with a long run of empty tiles, the searches read global memory instead), and each thread
//! binary-searches the staged offsets for the tile of its first atom; the end of its share is the
//! next thread's search. Unlike `two_phase` (§2.4.4) there is no partition kernel: every block
//! searches for its own boundaries. The walk, carry-out and deterministic fix-up are the
//! primitives layer's ([`lb::schedule::primitives::work_oriented`]).

use lb::schedule::builder::KernelBuilder;
use lb::schedule::ir::{BinOp, Cmp, Kernel, Op, Operand, Reg, Space, Type};
use lb::schedule::plan::Plan;
use lb::schedule::primitives::partition::{self, tiles_ending_by, Search, SHARED_LIMIT};
use lb::schedule::primitives::work_oriented::{self, global_end, narrow, widen, Frame, Share};
use lb::schedule::{Body, GenError, Options, ScheduleTemplate};

/// The block's first and end tile (u64 each), passed from thread 0 to the block.
const BLOCK_RANGE: &str = "lb_block_range";

work_oriented_schedule! {
    /// The `block_search` schedule.
    BlockSearch => NAME = "block_search"
}

impl ScheduleTemplate for BlockSearch {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        crate::first_plan(self.plans(body, opts)?)
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        let bytes = partition::shared_bytes(body, opts, 16);
        if bytes > u64::from(SHARED_LIMIT) {
            return Err(GenError::BadBlock {
                schedule: NAME,
                block: opts.block,
                why: format!(
                    "a block stages `block × items_per_thread` tile offsets and scans its \
                     carries in shared memory ({bytes} bytes, over {SHARED_LIMIT}): use fewer \
                     threads or items per thread"
                ),
            });
        }
        work_oriented::plans(body, opts, NAME, false)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        work_oriented::build(body, opts, plan, false, share)
    }
}

/// The number of tiles whose end offset is at most atom `a` (u64), by a lower-bound binary
/// search of the offsets in global memory from tile `lo` (width `Frame::w`, at most the
/// answer); u64.
fn global_search(b: &mut KernelBuilder, f: &Frame, a: Reg, lo: Reg) -> Reg {
    let w = f.w;
    let a = narrow(b, w, a);
    let hi = narrow(b, w, f.layout.tiles);
    let mut end = |b: &mut KernelBuilder, i: Reg| global_end(b, f, i);
    let found = tiles_ending_by(b, w, Search::LowerBound, a, (lo, hi), &mut end);
    widen(b, w, found)
}

/// Thread 0 searches global memory for the block's tiles `s0 .. s1` (block 0 starts at tile 0,
/// so that it also finishes the empty tiles at the front; the search for `s1` starts at `s0`)
/// and hands them to the block through shared memory.
fn block_range(b: &mut KernelBuilder, f: &Frame) -> (Reg, Reg) {
    b.shared(BLOCK_RANGE, 8, 16);
    let slots = b.mov(Type::U64, Operand::Symbol(BLOCK_RANGE.into()));
    let lead = b.setp(Cmp::Eq, Type::U64, f.tid, Operand::Imm(0));
    let scope = b.if_begin(lead, false);
    let chunk = partition::chunk(b, f);
    let first = b.bin(BinOp::Mul, Type::U64, f.cta, chunk);
    let first = b.bin(BinOp::Min, Type::U64, first, f.atoms);
    let past = b.bin(BinOp::Add, Type::U64, first, chunk);
    let past = b.bin(BinOp::Min, Type::U64, past, f.atoms);
    let zero = b.mov(f.w, Operand::Imm(0));
    let after = global_search(b, f, first, zero);
    // The block's end is at or after its start: the second search starts there.
    let from = narrow(b, f.w, after);
    let s1 = global_search(b, f, past, from);
    let front = b.setp(Cmp::Eq, Type::U64, f.cta, Operand::Imm(0));
    let s0 = b.selp(Type::U64, Operand::Imm(0), after, front);
    b.st(Space::Shared, Type::U64, slots, s0);
    let end_slot = b.bin(BinOp::Add, Type::U64, slots, Operand::Imm(8));
    b.st(Space::Shared, Type::U64, end_slot, s1);
    b.if_end(scope);
    b.emit(Op::BarSync);
    let s0 = b.ld(Space::Shared, Type::U64, slots);
    let end_slot = b.bin(BinOp::Add, Type::U64, slots, Operand::Imm(8));
    let s1 = b.ld(Space::Shared, Type::U64, end_slot);
    (s0, s1)
}

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    let range = block_range(b, f);
    let staged = partition::stage_range(b, f, range);
    partition::share_staged(b, f, &staged, Search::LowerBound)
}
