//! The schedule templates, one file each, the `Schedule` names the attribute accepts, and the
//! tile-set layout contract every template shares.
//!
//! A new schedule is one more file: a type implementing [`ScheduleTemplate`], one variant in
//! [`Schedule`], and one arm in [`Schedule::template`]. Templates reach the tile set only through
//! [`Layout`] (how many work items, which tile an item is, where a tile's atoms begin and end,
//! where its output goes), so every schedule agrees on those rules by construction.

mod binning;
pub mod consolidate;
mod dynamic_virtual_warps;
mod group_mapped;
mod lrb;
mod merge_path;
pub mod multi_phase;
mod nonzero_split;
pub mod partition;
mod thread_mapped;
mod two_phase;
mod work_oriented;

use std::borrow::Cow;

use crate::body::{Body, ParamKind, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{check_index, ptx_type, CsrRegs, KernelParams};
use crate::ir::{BinOp, Kernel, Label, Operand, Reg, Rounding, Space, Type};
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

/// A schedule template: the run-time plan, and the kernels that plan launches.
pub trait ScheduleTemplate {
    /// The plan for `body` under `opts`; its temporaries fix the kernels' trailing params.
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError>;

    /// Every plan of the schedule, in the order the runtime considers them (a schedule with
    /// variants, such as a 32-bit and a 64-bit one, returns several); each is built separately.
    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        Ok(vec![self.plan(body, opts)?])
    }

    /// The plan's kernels, in launch order, named as in `plan.kernels`.
    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError>;
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

/// One work item: a tile (by its position in the tile set) and, with `lanes`, a lane.
#[derive(Clone, Copy, Debug)]
pub struct WorkItem {
    /// Position in the tile set (`0..tiles`); equal to the tile without a frontier.
    pub position: Reg,
    /// The lane (u64), `None` without `lanes`.
    pub lane: Option<Reg>,
}

/// The tile-set layout contract, computed once at kernel entry.
///
/// - The tile set is seen through its *tile view* ([`KernelParams::csr`]): `csr.row_offsets` is
///   the tile-offset array and `csr.num_rows` the number of tiles, for every format: a CSR's rows
///   (`row_offsets`), a CSC's columns (`col_offsets`, `num_cols` tiles) and a COO's rows (the
///   row offsets its device type computes at upload from the sorted row indices). So a template
///   that reads tiles only through this struct supports every format.
/// - Tiles: every tile `0..csr.num_rows`, or with `Options::tiles = Some(p)` the entries of the
///   `&[u32]` parameter `p` (`tile = frontier[position] as u64`).
/// - Work items: `tiles × lanes`, item `i` is position `i / lanes`, lane `i % lanes` (so adjacent
///   threads take adjacent lanes of one tile); `lanes = 1` without `Options::lanes`.
/// - Atoms of a tile: `csr.row_offsets[tile] .. csr.row_offsets[tile + 1]`; the rank is
///   `atom - begin`.
/// - Output of a reducing body: `output[tile * lanes + lane]`.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The tile view of the tile-set parameter (see above).
    pub csr: CsrRegs,
    csr_param: usize,
    /// Frontier pointer and length.
    frontier: Option<(Reg, Reg)>,
    /// The lane count (u64), with `Options::lanes`.
    pub lanes: Option<Reg>,
    /// Number of tiles in the tile set (u64).
    pub tiles: Reg,
    /// Number of work items, `tiles × lanes` (u64).
    pub items: Reg,
}

impl Layout {
    pub fn new(
        b: &mut KernelBuilder,
        body: &Body,
        opts: &Options,
        params: &KernelParams,
    ) -> Result<Layout, GenError> {
        let csr_param = body.tile_set();
        let csr = params.csr(csr_param)?;
        let frontier = match opts.tiles {
            Some(p) => match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::Slice { elem: Ty::U32, .. }) => Some(params.slice(p)?),
                _ => {
                    return Err(GenError::Unsupported(
                        "`tiles` must name a `&[u32]` parameter".into(),
                    ))
                }
            },
            None => None,
        };
        let lanes = match opts.lanes {
            Some(p) => match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::Scalar(Ty::U64)) => Some(params.scalar(p)?),
                _ => {
                    return Err(GenError::Unsupported(
                        "`lanes` must name a `usize` parameter".into(),
                    ))
                }
            },
            None => None,
        };
        let tiles = frontier.map_or(csr.num_rows, |(_, len)| len);
        let items = match lanes {
            Some(l) => b.bin(BinOp::Mul, Type::U64, tiles, l),
            None => tiles,
        };
        Ok(Layout {
            csr,
            csr_param,
            frontier,
            lanes,
            tiles,
            items,
        })
    }

    /// Splits work item `item` (u64, `< items`) into its tile position and lane.
    pub fn work_item(&self, b: &mut KernelBuilder, item: Reg) -> WorkItem {
        match self.lanes {
            Some(l) => {
                let position = b.bin(BinOp::Div, Type::U64, item, l);
                let whole = b.bin(BinOp::Mul, Type::U64, position, l);
                let lane = b.bin(BinOp::Sub, Type::U64, item, whole);
                WorkItem {
                    position,
                    lane: Some(lane),
                }
            }
            None => WorkItem {
                position: item,
                lane: None,
            },
        }
    }

    /// The tile at `position` (`< tiles`). Under `checked`, a frontier entry that is not a row
    /// is recorded as an out-of-range index of the tile-set parameter and the item is skipped
    /// (branch to `skip`).
    pub fn tile(
        &self,
        b: &mut KernelBuilder,
        params: &KernelParams,
        position: Reg,
        checked: bool,
        skip: Label,
    ) -> Reg {
        let Some((ptr, _)) = self.frontier else {
            return position;
        };
        let addr = b.elem_addr(ptr, position, 4);
        let raw = b.ld(Space::Global, Type::U32, addr);
        let tile = b.cvt(Rounding::None, Type::U64, Type::U32, raw);
        if let Some(flag) = params.error_flag.filter(|_| checked) {
            check_index(b, flag, tile, self.csr.num_rows, self.csr_param, skip);
        }
        tile
    }

    /// `(row_offsets[tile], row_offsets[tile + 1])`.
    pub fn atoms(&self, b: &mut KernelBuilder, tile: Reg) -> (Reg, Reg) {
        let addr = b.elem_addr(self.csr.row_offsets, tile, 8);
        let begin = b.ld(Space::Global, Type::U64, addr);
        let next = b.bin(BinOp::Add, Type::U64, addr, Operand::Imm(8));
        let end = b.ld(Space::Global, Type::U64, next);
        (begin, end)
    }

    /// `output[tile * lanes + lane] = value`. Under `checked`, an index past the output's length
    /// is recorded as parameter `body.params.len()` (the output follows the body's parameters).
    pub fn store_output(
        &self,
        b: &mut KernelBuilder,
        body: &Body,
        params: &KernelParams,
        item: (Reg, Option<Reg>),
        value: (Reg, Ty),
        checked: bool,
    ) -> Result<(), GenError> {
        let Some((out, out_len)) = params.output else {
            return Err(GenError::Unsupported(
                "the body does not reduce, so it has no output".into(),
            ));
        };
        let (tile, lane) = item;
        let index = match (self.lanes, lane) {
            (Some(l), Some(lane)) => {
                let row = b.bin(BinOp::Mul, Type::U64, tile, l);
                b.bin(BinOp::Add, Type::U64, row, lane)
            }
            _ => tile,
        };
        let done = b.label();
        if let Some(flag) = params.error_flag.filter(|_| checked) {
            check_index(b, flag, index, out_len, body.params.len(), done);
        }
        let addr = b.elem_addr(out, index, value.1.size());
        b.st(Space::Global, ptx_type(value.1), addr, value.0);
        b.place(done);
        Ok(())
    }
}
