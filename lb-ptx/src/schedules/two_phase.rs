//! `two_phase`: the two-phase search of Busato & Bombieri `seeds/000_441aa2418e6e0d1e.txt`
//! §2.4.4 (Davidson et al., Green et al., Baxter): a partition kernel searches the tile offsets
//! in global memory once per block for the block's first tile, then each block stages its
//! tiles' offsets in shared memory and each thread finds the tiles of its atoms there. Every
//! thread gets an even share of atoms; the walk, carry-out and deterministic fix-up are
//! `work_oriented`'s. Details in [`super::partition`].

use super::{Schedule, ScheduleTemplate};
use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::ir::Kernel;
use crate::plan::Plan;
use crate::primitives::partition::{self, Search};
use crate::primitives::work_oriented::{self, Frame, Share};
use crate::{GenError, Options};

/// The `two_phase` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct TwoPhase;

impl ScheduleTemplate for TwoPhase {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let mut plans = self.plans(body, opts)?;
        Ok(plans.remove(0))
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        partition::plans(body, opts, Schedule::TwoPhase.name(), &[("", None)], 0)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let main = work_oriented::main_kernel(body, opts, plan, false, share)?;
        partition::build(body, opts, plan, Search::LowerBound, main)
    }
}

fn share(b: &mut KernelBuilder, f: &Frame) -> Share {
    partition::share(b, f, Search::LowerBound)
}
