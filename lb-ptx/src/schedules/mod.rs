//! The schedule templates, one file each, and the `Schedule` names the attribute accepts.
//!
//! A new schedule is one more file: a type implementing [`ScheduleTemplate`], one variant in
//! [`Schedule`], and one arm in [`Schedule::template`]. Templates reach the tile set only through
//! [`crate::primitives::Layout`] (how many work items, which tile an item is, where a tile's atoms begin and end,
//! where its output goes), so every schedule agrees on those rules by construction, and share the rest of their
//! machinery through [`crate::primitives`]; a schedule file never imports another.

mod binning;
pub mod consolidate;
mod dynamic_virtual_warps;
mod group_mapped;
mod lrb;
mod merge_path;
pub mod multi_phase;
mod nonzero_split;
mod thread_mapped;
mod two_phase;

use std::borrow::Cow;

use crate::body::Body;
use crate::ir::Kernel;
use crate::plan::{Plan, Temp, TempCount, TempRole};
use crate::{GenError, Options};

pub use binning::Binning;
pub use consolidate::{Consolidate, Level as ConsolidateLevel};
pub use dynamic_virtual_warps::DynamicVirtualWarps;
pub use group_mapped::GroupMapped;
pub use lrb::Lrb;
pub use merge_path::MergePath;
pub use multi_phase::MultiPhase;
pub use nonzero_split::NonzeroSplit;
pub use thread_mapped::ThreadMapped;
pub use two_phase::TwoPhase;

/// A built-in schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One tile per thread, grid-stride (thesis §3.3.1).
    ThreadMapped,
    /// A group of N threads shares a batch of N tiles (thesis §3.3.2, §4.4.2.3); N is a power of
    /// two from 2 to the block size, listed in [`GROUP_SIZES`]. N < 32 are the virtual warps
    /// (Busato & Bombieri §2.2.2).
    GroupMapped(u32),
    /// `group_mapped` with N = 32 (thesis §4.4.2.2).
    WarpMapped,
    /// `group_mapped` with N = the block size (thesis §4.4.2.2).
    BlockMapped,
    /// Virtual warps whose size is picked per launch from the average atoms per tile (Busato &
    /// Bombieri §2.3.1): one plan per size, told apart by `Plan::select`.
    DynamicVirtualWarps,
    /// An even share of `tiles + atoms` per thread by a diagonal search of the merge path, partial
    /// tiles carried out and fixed up deterministically (thesis §3.3.3, §4.4.2.1).
    MergePath,
    /// An even share of atoms per thread by a binary search of the tile offsets, with the same
    /// carry-out and fix-up (thesis §3.3.3).
    NonzeroSplit,
    /// Small tiles thread-mapped in place, large ones gathered per grid into a consolidation
    /// buffer for one child kernel (Li, Wu & Becchi, Fig. 1(d) and §2): launched from the device
    /// where the device runtime links, by the host after the parent otherwise.
    Consolidate,
    /// `consolidate` with one buffer range and child launch per block.
    ConsolidateBlock,
    /// `consolidate` with one buffer range and child launch per warp.
    ConsolidateWarp,
    /// An even share of atoms per thread by a two-phase search: one search per block in global
    /// memory for the block's first tile, then each thread's in the block's offsets staged in
    /// shared memory (Busato & Bombieri §2.4.4), with the work-oriented carry-out and fix-up.
    TwoPhase,
    /// `two_phase` with Busato & Bombieri's hybrid partitioning (§3.1): interpolation or
    /// lower-bound binary search, one plan each, picked at launch by `Plan::select`.
    MultiPhase,
    /// CTA+Warp+Scan: tiles binned by size inside each block batch and gathered by the block, a
    /// warp, or a block-wide scan (Busato & Bombieri §2.3.2; thesis §3.3.4, Algorithm 4).
    Binning,
    /// Logarithmic radix binning: tiles counted and reordered by ⌊log2 atoms⌋, then processed
    /// by a thread, a warp or a block per tile by bin (thesis §3.3.4).
    Lrb,
}

/// The group sizes `group_mapped(N)` accepts, with their attribute names (a table, because
/// [`Schedule::name`] returns `&'static str`).
pub const GROUP_SIZES: [(u32, &str); 10] = [
    (2, "group_mapped(2)"),
    (4, "group_mapped(4)"),
    (8, "group_mapped(8)"),
    (16, "group_mapped(16)"),
    (32, "group_mapped(32)"),
    (64, "group_mapped(64)"),
    (128, "group_mapped(128)"),
    (256, "group_mapped(256)"),
    (512, "group_mapped(512)"),
    (1024, "group_mapped(1024)"),
];

impl Schedule {
    /// Every built-in schedule, in the order `"auto"` expands to.
    pub const ALL: &'static [Schedule] = &[
        Schedule::ThreadMapped,
        Schedule::WarpMapped,
        Schedule::BlockMapped,
        Schedule::GroupMapped(4),
        Schedule::GroupMapped(8),
        Schedule::DynamicVirtualWarps,
        Schedule::MergePath,
        Schedule::NonzeroSplit,
        Schedule::Consolidate,
        Schedule::TwoPhase,
        Schedule::MultiPhase,
        Schedule::Binning,
        Schedule::Lrb,
    ];

    /// The name written in the attribute and in plans.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::ThreadMapped => "thread_mapped",
            Schedule::GroupMapped(n) => GROUP_SIZES
                .iter()
                .find(|&&(size, _)| size == n)
                .map_or("group_mapped(?)", |&(_, name)| name),
            Schedule::WarpMapped => "warp_mapped",
            Schedule::BlockMapped => "block_mapped",
            Schedule::DynamicVirtualWarps => "dynamic_virtual_warps",
            Schedule::MergePath => "merge_path",
            Schedule::NonzeroSplit => "nonzero_split",
            Schedule::Consolidate => "consolidate",
            Schedule::ConsolidateBlock => "consolidate(block)",
            Schedule::ConsolidateWarp => "consolidate(warp)",
            Schedule::TwoPhase => "two_phase",
            Schedule::MultiPhase => "multi_phase",
            Schedule::Binning => "binning",
            Schedule::Lrb => "lrb",
        }
    }

    pub fn from_name(name: &str) -> Option<Schedule> {
        Self::ALL
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .or_else(|| {
                GROUP_SIZES
                    .iter()
                    .find(|&&(_, n)| n == name)
                    .map(|&(size, _)| Schedule::GroupMapped(size))
            })
            .or_else(|| consolidate::from_name(name))
    }

    /// The template that plans and builds this schedule.
    pub fn template(self) -> &'static dyn ScheduleTemplate {
        match self {
            Schedule::ThreadMapped => &ThreadMapped,
            Schedule::GroupMapped(n) => GroupMapped::fixed(n),
            Schedule::WarpMapped => &GroupMapped::WARP,
            Schedule::BlockMapped => &GroupMapped::BLOCK,
            Schedule::DynamicVirtualWarps => &DynamicVirtualWarps,
            Schedule::MergePath => &MergePath,
            Schedule::NonzeroSplit => &NonzeroSplit,
            Schedule::Consolidate => consolidate::template(ConsolidateLevel::Grid),
            Schedule::ConsolidateBlock => consolidate::template(ConsolidateLevel::Block),
            Schedule::ConsolidateWarp => consolidate::template(ConsolidateLevel::Warp),
            Schedule::TwoPhase => &TwoPhase,
            Schedule::MultiPhase => &MultiPhase,
            Schedule::Binning => &Binning::DEFAULT,
            Schedule::Lrb => &Lrb,
        }
    }
}

/// The attribute's spelling, with the group size written out even for a size no template has
/// (which [`Schedule::name`], a `&'static str`, can only show as `group_mapped(?)`): what error
/// messages print.
impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schedule::GroupMapped(n) => write!(f, "group_mapped({n})"),
            other => f.write_str(other.name()),
        }
    }
}

/// A schedule template: the run-time plan, and the kernels that plan launches.
pub trait ScheduleTemplate {
    /// The plan for `body` under `opts`; its temporaries fix the kernels' trailing params.
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError>;

    /// Every plan of the schedule, in the order the runtime considers them (a schedule with
    /// variants, such as a 32-bit and a 64-bit one, returns several); each is built separately.
    /// Every schedule has plans for both [`crate::plan::OffsetWidth`]s: by default `plan` (64-bit
    /// offsets) and its [`Plan::offsets32_twin`].
    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        Ok(with_offsets32_twins(vec![self.plan(body, opts)?]))
    }

    /// The plan's kernels, in launch order, named as in `plan.kernels`.
    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError>;

    /// The plan's kernels as [`crate::generate`] emits them: [`Self::build`]'s, through the IR
    /// passes of [`crate::optimize`].
    fn kernels(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let mut kernels = self.build(body, opts, plan)?;
        for k in &mut kernels {
            crate::optimize::kernel(k, opts.fma);
            let block = plan
                .kernels
                .iter()
                .find(|p| p.entry == k.name)
                .map(|p| p.block);
            k.max_registers = block.and_then(crate::plan::register_cap);
        }
        Ok(kernels)
    }
}

/// `plans` (reading 64-bit offsets) followed by their [`Plan::offsets32_twin`]s, in the same
/// order: the plan list of a schedule without index-width variants.
pub fn with_offsets32_twins(plans: Vec<Plan>) -> Vec<Plan> {
    let twins: Vec<Plan> = plans.iter().map(Plan::offsets32_twin).collect();
    plans.into_iter().chain(twins).collect()
}

/// The `.entry` name of a schedule's (first) kernel: `{body}_{schedule}`.
pub fn entry_name(body: &Body, schedule: Schedule) -> String {
    format!("{}_{}", body.name, schedule.name())
}

/// The temporaries every plan starts with: the error flag, only under `checked`.
pub fn common_temps(opts: &Options) -> Vec<Temp> {
    if !opts.checked {
        return Vec::new();
    }
    vec![Temp {
        name: Cow::Borrowed("error_flag"),
        elem_bytes: 8,
        count: TempCount::Fixed(2),
        zero: true,
        role: TempRole::ErrorFlag,
    }]
}
