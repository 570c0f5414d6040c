//! Plans: what a schedule needs at run time, as plain data the macro writes out as `const`s.
//!
//! Every kernel of a plan takes the same `.param` list: the body's parameters (ABI in
//! [`crate::body::Param`]), then the output (pointer, length in elements) when the body reduces,
//! then one pointer per temporary, in plan order. The runtime builds that list once per launch.

use std::borrow::Cow;

/// The problem a launch solves, measured by the runtime from the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProblemSize {
    /// Active tiles (rows, or frontier entries).
    pub tiles: u64,
    /// Atoms of the whole tile set (nonzeros).
    pub atoms: u64,
    /// Lanes per atom (1 without `lanes`).
    pub lanes: u64,
}

/// What the runtime knows about the device when it sizes a grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    pub sm_count: u32,
    /// Blocks of this kernel that fit on one SM, from the driver's occupancy calculator (the
    /// simulator reports its own).
    pub blocks_per_sm: u32,
}

/// How many blocks a kernel is launched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// Enough threads for one work item (tile × lane) each, `per_thread` items per thread, but
    /// never more blocks than are resident at once: the kernel strides over the rest.
    /// At least one block, so an empty problem still launches validly.
    CoverItems { per_thread: u32 },
    /// Exactly this many blocks.
    Fixed(u32),
}

impl Grid {
    /// The number of blocks for `size` with `block` threads per block.
    pub fn blocks(&self, size: &ProblemSize, block: u32, limits: &DeviceLimits) -> u32 {
        match *self {
            Grid::CoverItems { per_thread } => {
                let items = size.tiles.saturating_mul(size.lanes.max(1));
                let per_block = u64::from(block) * u64::from(per_thread.max(1));
                let wanted = items.div_ceil(per_block).max(1);
                let resident = u64::from(limits.sm_count.max(1)) * u64::from(limits.blocks_per_sm.max(1));
                wanted.min(resident) as u32
            }
            Grid::Fixed(n) => n.max(1),
        }
    }
}

/// One kernel launch of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// The `.entry` name in the module.
    pub entry: Cow<'static, str>,
    /// Threads per block.
    pub block: u32,
    pub grid: Grid,
    /// Dynamic shared memory in bytes.
    pub dynamic_shared: u32,
}

/// How many elements a temporary holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TempCount {
    Fixed(u64),
    /// `per_tile` elements for every active tile (plus `extra`).
    PerTile { per_tile: u64, extra: u64 },
    /// One element per launched block (of the plan's first kernel), plus `extra`.
    PerBlock { extra: u64 },
}

/// What a temporary is for; the runtime reads some of them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TempRole {
    /// Scratch the kernels share (carry-outs, scans, queues of work).
    Scratch,
    /// Two u64 words, zeroed before the launch: word 0 is `1 + p` when parameter `p` of the
    /// body was indexed out of range under `checked`, word 1 the offending index. The runtime
    /// turns a nonzero word 0 into an error.
    ErrorFlag,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Temp {
    pub name: Cow<'static, str>,
    pub elem_bytes: u32,
    pub count: TempCount,
    /// Zero it before the first kernel.
    pub zero: bool,
    pub role: TempRole,
}

/// Everything one schedule needs at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The schedule's name as written in the attribute (`"thread_mapped"`).
    pub schedule: Cow<'static, str>,
    /// Kernels in launch order.
    pub kernels: Cow<'static, [KernelPlan]>,
    pub temps: Cow<'static, [Temp]>,
}
