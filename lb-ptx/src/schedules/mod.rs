//! The schedule templates, one file each, and the `Schedule` names the attribute accepts.
//!
//! A new built-in schedule is its own file (a type implementing [`ScheduleTemplate`]), its
//! `mod` line, and one row of the `builtin_schedules!` table below: the row declares the
//! [`Schedule`] variant with its doc, its attribute name, its template and the list it joins
//! ([`Listed`]); [`Schedule::name`], [`Schedule::from_name`], [`Schedule::template`],
//! [`Schedule::ALL`] and [`Schedule::EXTRA`] all read that table, and no `match` elsewhere names
//! every schedule. Templates reach the tile set only through [`crate::primitives::Layout`] (how
//! many work items, which tile an item is, where a tile's atoms begin and end, where its output
//! goes), so every schedule agrees on those rules by construction, and share the rest of their
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

/// Which list a registered schedule joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listed {
    /// [`Schedule::ALL`]: generated for `"auto"` (and when no schedule is named), and tried by
    /// every test that loops over schedules.
    Auto,
    /// [`Schedule::EXTRA`]: accepted by name and tried by every test that loops over schedules
    /// ([`Schedule::every`]), but left out of `"auto"`, where every schedule costs compile time
    /// for every kernel.
    Extra,
    /// Accepted by name only (a variant of a listed schedule, tested by its own tests).
    ByName,
}

/// One row of the registry: a schedule, its attribute name, its template and its list.
#[derive(Clone, Copy)]
pub struct Registered {
    pub schedule: Schedule,
    pub name: &'static str,
    pub template: fn() -> &'static dyn ScheduleTemplate,
    pub listed: Listed,
}

/// Declares [`Schedule`] and [`REGISTRY`] from one table. A row `Variant => "name", template,
/// List;` (with its doc comment) declares a unit variant; a row `Variant(n) => ...` registers an
/// instance of the one parameterised family, `GroupMapped(u32)`, whose other sizes are
/// [`GROUP_SIZES`].
macro_rules! builtin_schedules {
    (@rows [$($variants:tt)*] [$($rows:tt)*]) => {
        /// A built-in schedule.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum Schedule {
            /// A group of N threads works together (thesis §3.3.2, §4.4.2.3); N is a power of
            /// two from 2 to the block size, listed in [`GROUP_SIZES`]. N < 32 are the virtual
            /// warps of Busato & Bombieri §2.2.2: N threads take one tile at a time, striding
            /// over its atoms.
            GroupMapped(u32),
            $($variants)*
        }

        /// Every registered schedule, in the order of the table: `"auto"`'s order is this order
        /// restricted to [`Listed::Auto`].
        pub const REGISTRY: &[Registered] = &[$($rows)*];
    };
    (@rows [$($v:tt)*] [$($r:tt)*]
        $variant:ident($n:literal) => $name:literal, $template:expr, $listed:ident;
        $($rest:tt)*
    ) => {
        builtin_schedules!(@rows [$($v)*] [$($r)* Registered {
            schedule: Schedule::$variant($n),
            name: $name,
            template: || $template,
            listed: Listed::$listed,
        },] $($rest)*);
    };
    (@rows [$($v:tt)*] [$($r:tt)*]
        $(#[$doc:meta])* $variant:ident => $name:literal, $template:expr, $listed:ident;
        $($rest:tt)*
    ) => {
        builtin_schedules!(@rows [$($v)* $(#[$doc])* $variant,] [$($r)* Registered {
            schedule: Schedule::$variant,
            name: $name,
            template: || $template,
            listed: Listed::$listed,
        },] $($rest)*);
    };
    ($($table:tt)*) => {
        builtin_schedules!(@rows [] [] $($table)*);
    };
}

builtin_schedules! {
    /// One tile per thread, grid-stride (thesis §3.3.1).
    ThreadMapped => "thread_mapped", &ThreadMapped, Auto;
    /// `group_mapped` with N = 32 (thesis §4.4.2.2).
    WarpMapped => "warp_mapped", &GroupMapped::WARP, Auto;
    /// `group_mapped` with N = the block size (thesis §4.4.2.2).
    BlockMapped => "block_mapped", &GroupMapped::BLOCK, Auto;
    GroupMapped(4) => "group_mapped(4)", GroupMapped::fixed(4), Auto;
    GroupMapped(8) => "group_mapped(8)", GroupMapped::fixed(8), Auto;
    /// Virtual warps whose size is picked per launch from the average atoms per tile (Busato &
    /// Bombieri §2.3.1): one plan per size, told apart by `Plan::select`.
    DynamicVirtualWarps => "dynamic_virtual_warps", &DynamicVirtualWarps, Auto;
    /// An even share of `tiles + atoms` per thread by a diagonal search of the merge path, partial
    /// tiles carried out and fixed up deterministically (thesis §3.3.3, §4.4.2.1).
    MergePath => "merge_path", &MergePath, Auto;
    /// An even share of atoms per thread by a binary search of the tile offsets, with the same
    /// carry-out and fix-up (thesis §3.3.3).
    NonzeroSplit => "nonzero_split", &NonzeroSplit, Auto;
    /// Small tiles thread-mapped in place, large ones gathered per grid into a consolidation
    /// buffer for one child kernel (Li, Wu & Becchi, Fig. 1(d) and §2): launched from the device
    /// where the device runtime links, by the host after the parent otherwise.
    Consolidate => "consolidate", consolidate::template(ConsolidateLevel::Grid), Auto;
    /// An even share of atoms per thread by a two-phase search: one search per block in global
    /// memory for the block's first tile, then each thread's in the block's offsets staged in
    /// shared memory (Busato & Bombieri §2.4.4), with the work-oriented carry-out and fix-up.
    TwoPhase => "two_phase", &TwoPhase, Auto;
    /// `two_phase` with Busato & Bombieri's hybrid partitioning (§3.1): interpolation or
    /// lower-bound binary search, one plan each, picked at launch by `Plan::select`.
    MultiPhase => "multi_phase", &MultiPhase, Auto;
    /// CTA+Warp+Scan: tiles binned by size inside each block batch and gathered by the block, a
    /// warp, or a block-wide scan (Busato & Bombieri §2.3.2; thesis §3.3.4, Algorithm 4).
    Binning => "binning", &Binning::DEFAULT, Auto;
    /// Logarithmic radix binning: tiles counted and reordered by ⌊log2 atoms⌋, then processed
    /// by a thread, a warp or a block per tile by bin (thesis §3.3.4).
    Lrb => "lrb", &Lrb, Auto;
    /// `consolidate` with one buffer range and child launch per block.
    ConsolidateBlock => "consolidate(block)", consolidate::template(ConsolidateLevel::Block), ByName;
    /// `consolidate` with one buffer range and child launch per warp.
    ConsolidateWarp => "consolidate(warp)", consolidate::template(ConsolidateLevel::Warp), ByName;
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

/// How many rows of [`REGISTRY`] are listed as `listed`.
const fn count(listed: Listed) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < REGISTRY.len() {
        if REGISTRY[i].listed as u8 == listed as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The schedules of [`REGISTRY`] listed as `listed`, in table order (`N` is their count).
const fn listed<const N: usize>(listed: Listed) -> [Schedule; N] {
    let mut out = [Schedule::ThreadMapped; N];
    let mut n = 0;
    let mut i = 0;
    while i < REGISTRY.len() {
        if REGISTRY[i].listed as u8 == listed as u8 {
            out[n] = REGISTRY[i].schedule;
            n += 1;
        }
        i += 1;
    }
    out
}

const AUTO: [Schedule; count(Listed::Auto)] = listed(Listed::Auto);
const EXTRA: [Schedule; count(Listed::Extra)] = listed(Listed::Extra);

impl Schedule {
    /// Every schedule `"auto"` generates, in the order it expands to.
    pub const ALL: &'static [Schedule] = &AUTO;

    /// The schedules accepted by name and covered by every test that loops over schedules, but
    /// left out of `"auto"` ([`Listed::Extra`]).
    pub const EXTRA: &'static [Schedule] = &EXTRA;

    /// [`Schedule::ALL`] then [`Schedule::EXTRA`]: what a test that loops over schedules tries.
    pub fn every() -> impl Iterator<Item = Schedule> {
        Self::ALL.iter().chain(Self::EXTRA).copied()
    }

    fn registered(self) -> Option<&'static Registered> {
        REGISTRY.iter().find(|r| r.schedule == self)
    }

    /// The name written in the attribute and in plans.
    pub fn name(self) -> &'static str {
        if let Some(r) = self.registered() {
            return r.name;
        }
        match self {
            Schedule::GroupMapped(n) => GROUP_SIZES
                .iter()
                .find(|&&(size, _)| size == n)
                .map_or("group_mapped(?)", |&(_, name)| name),
            other => unreachable!("{other:?} is declared by the registry, so it has a row"),
        }
    }

    pub fn from_name(name: &str) -> Option<Schedule> {
        REGISTRY
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.schedule)
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
        match (self.registered(), self) {
            (Some(r), _) => (r.template)(),
            (None, Schedule::GroupMapped(n)) => GroupMapped::fixed(n),
            (None, other) => unreachable!("{other:?} is declared by the registry, so it has a row"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_derives_names_lists_and_templates() {
        for r in REGISTRY {
            assert_eq!(r.schedule.name(), r.name);
            assert_eq!(Schedule::from_name(r.name), Some(r.schedule), "{}", r.name);
        }
        let mut names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len(), "names are unique");
        for (n, name) in GROUP_SIZES {
            assert_eq!(Schedule::GroupMapped(n).name(), name);
            assert_eq!(Schedule::from_name(name), Some(Schedule::GroupMapped(n)));
        }
        // `"auto"`'s contents and order are public behaviour: generated modules, the heuristic's
        // fallback (`ALL[0]`) and tuning files depend on them.
        let auto: Vec<&str> = Schedule::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            auto,
            [
                "thread_mapped",
                "warp_mapped",
                "block_mapped",
                "group_mapped(4)",
                "group_mapped(8)",
                "dynamic_virtual_warps",
                "merge_path",
                "nonzero_split",
                "consolidate",
                "two_phase",
                "multi_phase",
                "binning",
                "lrb",
            ]
        );
        // Busato & Bombieri's direct, local-warp and block searches are written outside lb, in
        // `examples/custom-schedules`, against the public schedule API.
        assert_eq!(Schedule::EXTRA, []);
        assert_eq!(
            Schedule::every().count(),
            Schedule::ALL.len() + Schedule::EXTRA.len()
        );
        for name in [
            "consolidate(grid)",
            "consolidate(block)",
            "consolidate(warp)",
        ] {
            assert!(Schedule::from_name(name).is_some(), "{name}");
        }
    }
}
