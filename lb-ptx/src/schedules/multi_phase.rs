//! `multi_phase`: Busato & Bombieri's Multi-Phase Mapping (`seeds/000_441aa2418e6e0d1e.txt` §3),
//! the two-phase structure of [`super::partition`] with its *hybrid partitioning* (§3.1): the
//! partition and the expansion search the tile offsets either with the lower-bound-only binary
//! search (§3.1.1) or with an interpolation search (§3.1.2), by the tile set's statistics.
//!
//! §3.1.2: interpolation "runs if Std_Dev_WI_size ≤ Threshold_SD and Average_WI_size ≤
//! Threshold_AVG", thresholds "heuristically set to Threshold_SD = 8 and Threshold_AVG = 9".
//! The statistics are known on the host at launch (the runtime measures the mean and standard
//! deviation of the tile sizes when a tile set is uploaded), so both variants are generated as
//! plans of one schedule and told apart by [`Select::Spread`]: interpolation when the average
//! (rounded up) is at most [`THRESHOLD_AVG`] and the standard deviation at most
//! [`THRESHOLD_SD`], binary otherwise. The spread matters: on a power-law matrix with a mean of
//! 8 atoms per tile, interpolation search took 107 ms on an H200 where binary search takes
//! under 1 ms.
//!
//! §3.3, what the template expresses: the staging of a block's offsets is coalesced (consecutive
//! threads, consecutive offsets) and the search's loop invariants (the staged base, the block's
//! range, the slope's operands) are hoisted (§3.3.2). Not here: the coalesced expansion through
//! registers and shared memory and the iterated search (§3.2, factor `IS`), whose
//! strided atom-to-thread mapping does not give a thread the contiguous share the
//! deterministic carry-out needs; the unrolling, vectorized shared accesses and warp-synchronous
//! sections that serve them (§3.3.1, §3.3.4, §3.3.5).

use super::partition::{self, Search};
use super::work_oriented::{Frame, Share};
use super::{Schedule, ScheduleTemplate};
use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::ir::Kernel;
use crate::plan::{Plan, Select};
use crate::{GenError, Options};

/// The `multi_phase` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct MultiPhase;

/// B&B §3.1.2's `Threshold_AVG`: interpolation search up to this many atoms per tile.
pub const THRESHOLD_AVG: u64 = 9;

/// B&B §3.1.2's `Threshold_SD`: interpolation search only while the tiles' standard deviation
/// stays at or below this many atoms (beyond it, interpolation's probes degrade towards linear).
pub const THRESHOLD_SD: u64 = 8;

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

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        let variants = VARIANTS.map(|(name, _, select)| (name, Some(select)));
        partition::plans(body, opts, Schedule::MultiPhase, &variants)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let search = VARIANTS
            .iter()
            .find(|&&(_, _, select)| plan.select == Some(select))
            .map(|&(_, search, _)| search)
            .ok_or_else(|| GenError::Unsupported("not a plan of `multi_phase`".into()))?;
        let share = match search {
            Search::LowerBound => binary_share,
            Search::Interpolation => interpolation_share,
        };
        partition::build(body, opts, plan, search, share)
    }
}

fn binary_share(b: &mut KernelBuilder, f: &Frame) -> Share {
    partition::share(b, f, Search::LowerBound)
}

fn interpolation_share(b: &mut KernelBuilder, f: &Frame) -> Share {
    partition::share(b, f, Search::Interpolation)
}
