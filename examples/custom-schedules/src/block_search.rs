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
//! fixed number of atoms (`items_per_thread × block`), so blocks balance too: two threads find the
//! block's first and end tile by binary searches of the offsets in global memory
//! (`partition::block_range`, which `two_phase` and `multi_phase` use over a frontier), the block
//! stages the end offsets of those tiles in shared memory (coalesced; when they do not fit, as
//! with a long run of empty tiles, the searches read global memory instead), and each thread
//! binary-searches the staged offsets for the tile of its first atom; the end of its share is the
//! next thread's search. Unlike `two_phase` (§2.4.4) outside a frontier, there is no partition
//! kernel: every block searches for its own boundaries. The walk, carry-out and deterministic fix-up are the
//! primitives layer's ([`lb::schedule::primitives::work_oriented`]).

use lb::schedule::builder::KernelBuilder;
use lb::schedule::ir::Kernel;
use lb::schedule::plan::Plan;
use lb::schedule::primitives::partition::{self, Search, Searcher, SHARED_LIMIT};
use lb::schedule::primitives::work_oriented::{self, Frame, Share};
use lb::schedule::{Body, GenError, Options, ScheduleTemplate};

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

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    let range = partition::block_range(b, f, Searcher::Fixed(Search::LowerBound));
    let staged = partition::stage_range(b, f, range);
    partition::share_staged(b, f, &staged, Search::LowerBound)
}
