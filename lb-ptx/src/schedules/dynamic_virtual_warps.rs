//! `dynamic_virtual_warps`: virtual warps (`group_mapped(N)`, N <= 32) whose size is chosen per
//! launch from the tile set's average atoms per tile.
//!
//! Busato & Bombieri `seeds/000_441aa2418e6e0d1e.txt` §2.3.1 ("Dynamic Virtual Warps"): the
//! virtual warp size is "calculated and set at run time depending on the workload", chosen among
//! powers of two up to the warp size, with "too small sizes excluded a priori" (so 1 is not a
//! candidate); their measurements (§5, web-NotreDame) note that "the optimal virtual warp size is
//! proportional to the average of work-item sizes". The rule here: N is the smallest power of two
//! at least the average atoms per tile (rounded up), clamped to 2..=32. The dynamic-parallelism
//! half of their technique (child kernels for tiles above a threshold) is not part of this
//! schedule.
//!
//! Every candidate N is generated as its own kernel and plan; the plans share the schedule name
//! and carry [`Select::AvgAtomsPerTile`] ranges that cover `0..` exactly once, so the runtime
//! picks the one whose range holds [`Select::avg_atoms_per_tile`] of the launch.
//!
//! With a frontier (`tiles`) the host knows the frontier's length but not its atoms (they are on
//! the device), so the size cannot be picked there: the frontier's plan is one
//! ([`group::dynamic_plan`]), whose first kernel of its own sums the atoms of the frontier's tiles
//! and whose walk computes the frontier's mean and branches, uniformly over the grid, to the size
//! the same rule picks. The rule thus always sees the tiles actually launched.

use super::{with_offsets32_twins, Schedule, ScheduleTemplate};
use crate::body::Body;
use crate::ir::Kernel;
use crate::plan::{Plan, Select};
use crate::primitives::group::{self, build_group, group_plan};
use crate::{GenError, Options};

/// The `dynamic_virtual_warps` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct DynamicVirtualWarps;

/// `(N, min, max)`: N is picked for average atoms per tile in `min..max` (`u64::MAX`: no bound).
pub const VARIANTS: [(u32, u64, u64); 5] = [
    (2, 0, 3),
    (4, 3, 5),
    (8, 5, 9),
    (16, 9, 17),
    (32, 17, u64::MAX),
];

impl DynamicVirtualWarps {
    /// The virtual warp size the rule picks for an average of `avg` atoms per tile.
    pub fn size_for(avg: u64) -> u32 {
        VARIANTS
            .iter()
            .find(|&&(_, min, max)| avg >= min && (avg < max || max == u64::MAX))
            .map_or(32, |&(n, _, _)| n)
    }

    fn select(min: u64, max: u64) -> Select {
        Select::AvgAtomsPerTile { min, max }
    }
}

impl ScheduleTemplate for DynamicVirtualWarps {
    /// The first variant (N = 2, or with a frontier the one plan that picks on the device);
    /// [`ScheduleTemplate::plans`] lists them all.
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let mut plans = self.plans(body, opts)?;
        Ok(plans.remove(0))
    }

    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        if opts.tiles.is_some() {
            let entry = format!("{}_dynamic_virtual_warps", body.name);
            let schedule = Schedule::DynamicVirtualWarps;
            let plan = group::dynamic_plan(body, opts, schedule, &VARIANTS, entry)?;
            return Ok(with_offsets32_twins(vec![plan]));
        }
        let plans = VARIANTS
            .iter()
            .map(|&(n, min, max)| {
                let entry = format!("{}_dynamic_virtual_warps_{n}", body.name);
                let select = Some(Self::select(min, max));
                group_plan(body, opts, Schedule::DynamicVirtualWarps, n, entry, select)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(with_offsets32_twins(plans))
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        if opts.tiles.is_some() {
            return group::build_dynamic(body, opts, plan, &VARIANTS);
        }
        let n = VARIANTS
            .iter()
            .find(|&&(_, min, max)| plan.select == Some(Self::select(min, max)))
            .map(|&(n, _, _)| n)
            .ok_or_else(|| GenError::Unsupported("not a plan of `dynamic_virtual_warps`".into()))?;
        build_group(body, opts, plan, n)
    }
}
