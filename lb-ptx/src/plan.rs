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
    /// Atoms of the tile set's longest tile (an upper bound on a frontier's): kernels that only
    /// work on larger tiles are not launched. `u64::MAX` when unknown.
    pub max_tile_atoms: u64,
    /// How the tile set stores its tile offsets on the device ([`OffsetWidth::for_tile_set`]);
    /// only a plan reading that width may run ([`Plan::offsets`]).
    pub offsets: OffsetWidth,
}

/// The width of a device tile set's tile offsets (`row_offsets`, `col_offsets`, a COO's derived
/// row offsets), and of the offsets a plan's kernels read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OffsetWidth {
    /// `u32` offsets: every offset, and every tile index plus one, fits in 32 bits.
    U32,
    /// `u64` offsets: any tile set.
    #[default]
    U64,
}

impl OffsetWidth {
    /// The largest `tiles + atoms` a tile set with 32-bit offsets may have: `u32::MAX`, the same
    /// bound as the work-oriented schedules' 32-bit index arithmetic
    /// (`index_limit = Some(u32::MAX)`), so a tile set stored with 32-bit offsets is always
    /// admitted by their 32-bit plans.
    pub const U32_LIMIT: u64 = u32::MAX as u64;

    /// The rule every device tile set follows: 32-bit offsets when `tiles + atoms <=`
    /// [`Self::U32_LIMIT`], 64-bit otherwise (`tiles`: the tile set's own tiles, not a
    /// frontier's).
    pub fn for_tile_set(tiles: u64, atoms: u64) -> OffsetWidth {
        if tiles.saturating_add(atoms) <= Self::U32_LIMIT {
            OffsetWidth::U32
        } else {
            OffsetWidth::U64
        }
    }

    /// Bytes per offset.
    pub fn bytes(self) -> u32 {
        match self {
            OffsetWidth::U32 => 4,
            OffsetWidth::U64 => 8,
        }
    }

    /// `"u32"` or `"u64"`.
    pub fn name(self) -> &'static str {
        match self {
            OffsetWidth::U32 => "u32",
            OffsetWidth::U64 => "u64",
        }
    }
}

/// What the runtime knows about the device when it sizes a grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    pub sm_count: u32,
    /// Blocks of this kernel that fit on one SM, from the driver's occupancy calculator (the
    /// simulator reports its own).
    pub blocks_per_sm: u32,
}

impl DeviceLimits {
    /// Blocks of the kernel resident at once on the whole device (at least one).
    pub fn resident_blocks(&self) -> u64 {
        u64::from(self.sm_count.max(1)) * u64::from(self.blocks_per_sm.max(1))
    }
}

/// How many blocks a kernel is launched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// Enough threads for one work item (tile × lane) each, `per_thread` items per thread, but
    /// never more blocks than are resident at once: the kernel strides over the rest.
    /// At least one block, so an empty problem still launches validly.
    CoverItems { per_thread: u32 },
    /// `threads` threads per work item (tile × lane), never more blocks than are resident at
    /// once: for a kernel whose items each take a group of threads and stride over the rest
    /// (the virtual warps of `group_mapped(N)`, N < 32, whose paper asks `#RequiredThreads =
    /// #workitems · |VirtualWarp|`, Busato & Bombieri §2.2.2). One thread per tile left each
    /// virtual warp `N` tiles to walk one after the other on a tile set smaller than the
    /// resident threads, and the GPU mostly idle.
    GroupPerItem { threads: u32 },
    /// Exactly this many blocks.
    Fixed(u32),
    /// One thread per even share of the work, for the work-oriented schedules: work is
    /// `tiles + atoms` (`count_tiles`, merge path) or `atoms` (nonzero split), `per_thread` work
    /// items per thread, at least one block, times `lanes` (each lane is an independent copy of
    /// the decomposition). Never capped at the resident blocks: these kernels do not stride, and
    /// the kernels recompute the same count to find their share.
    ///
    /// `frontier`: whether the plan runs over a frontier, and how its grid follows it
    /// ([`FrontierGrid`]).
    CoverWork {
        per_thread: u32,
        count_tiles: bool,
        frontier: FrontierGrid,
    },
    /// One block per `atoms` atoms of the tile set, at least one, whatever the lanes, and with at
    /// most 32 lanes never more than one resident wave: for a kernel whose blocks each take a run
    /// of atoms for all lanes at once (the huge-tile split's walks with lanes) and stride over
    /// the rest.
    ///
    /// Their work is a device-side count (the split's lists), usually far below the tile set's
    /// atoms. Uncapped, most blocks found nothing to do, yet each paid its entry (two 64-bit
    /// divisions a thread) and held an SM slot: 72 000 of the mid walk's 86 000 warps on a
    /// 5.5 M-nonzero log-normal matrix at k = 32, where one wave made SpMM 3–23% faster at
    /// k = 8 and 32. With more lanes a piece takes up to a warp, the work fills much more of
    /// the grid, and the hardware dispatching the blocks in order keeps the walked pieces in a
    /// narrow window of rows, which a wave of blocks striding over them loses as they drift
    /// apart: on a 3 M-row banded matrix at k = 128 (B of 1.5 GB, neighbouring rows reading
    /// neighbouring rows of B) four striding waves took 7.1 ms where the uncapped grid took
    /// 5.2 (H200, docs/spmm.md).
    PerAtoms { atoms: u32 },
    /// One block per `tiles` tiles (tile positions: a frontier's length with a frontier), at
    /// least one, whatever the lanes: for a kernel whose warps each take a run of consecutive
    /// tiles (the mid tier's place kernel, a warp per 32) and stride over the rest.
    PerTiles { tiles: u32 },
}

/// How a work-oriented grid ([`Grid::CoverWork`]) follows a frontier, whose atoms are summed on
/// the device after the host has sized the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontierGrid {
    /// No frontier: the grid covers the tile set's atoms.
    No,
    /// The frontier's tiles hold at most `tiles × max_tile_atoms` atoms (more only when it
    /// repeats tiles), so the grid covers `min(atoms, tiles × max_tile_atoms)` atoms: a frontier
    /// of a few short tiles in a large graph launches a few blocks, not one per share of the
    /// graph's atoms. The kernels cannot recompute that bound (the longest tile is known only on
    /// the host); the plan's first kernel stores its block count for the others
    /// (`frontier_scan`), and a frontier with more atoms than the bound gives each thread a
    /// larger share. For plans whose main kernel takes one share per block and does not stride
    /// (`work_oriented::plans`, which user schedules build on).
    Bounded,
    /// The same bound, but never more blocks than are resident at once: the main kernel's blocks
    /// stride over the shares of the atoms the frontier really has, found by the device's scan
    /// of its tile sizes, each share the default size. On a graph with hubs the bound is the
    /// whole graph for nearly every frontier; this grid costs one resident wave however small
    /// the frontier is, and a large frontier keeps the default share per thread (a grid capped
    /// at a fixed size without striding lost up to 2× on frontiers of tens of millions of atoms,
    /// docs/benchmarks.md, issue 17's capped grids). A plan's per-block temporaries
    /// ([`TempCount::PerBlock`]) still count the blocks of the bound ([`Grid::uncapped`]): a
    /// reducing body keeps a carry per share it strides over, and the kernels never take more
    /// shares than that bound holds.
    Strided,
}

impl Grid {
    /// The grid before a strided frontier grid's cap at the resident blocks
    /// ([`FrontierGrid::Strided`] becomes [`FrontierGrid::Bounded`]); every other grid as it is.
    /// What [`TempCount::PerBlock`] and [`KernelPlan::min_grid`] count.
    pub fn uncapped(self) -> Grid {
        match self {
            Grid::CoverWork {
                per_thread,
                count_tiles,
                frontier: FrontierGrid::Strided,
            } => Grid::CoverWork {
                per_thread,
                count_tiles,
                frontier: FrontierGrid::Bounded,
            },
            other => other,
        }
    }

    /// The number of blocks for `size` with `block` threads per block.
    pub fn blocks(&self, size: &ProblemSize, block: u32, limits: &DeviceLimits) -> u32 {
        match *self {
            Grid::CoverItems { per_thread } => {
                let items = size.tiles.saturating_mul(size.lanes.max(1));
                let per_block = u64::from(block) * u64::from(per_thread.max(1));
                let wanted = items.div_ceil(per_block).max(1);
                wanted.min(limits.resident_blocks()) as u32
            }
            Grid::GroupPerItem { threads } => {
                let items = size.tiles.saturating_mul(size.lanes.max(1));
                let wanted = items
                    .saturating_mul(u64::from(threads.max(1)))
                    .div_ceil(u64::from(block.max(1)))
                    .max(1);
                wanted.min(limits.resident_blocks()) as u32
            }
            Grid::Fixed(n) => n.max(1),
            Grid::CoverWork {
                per_thread,
                count_tiles,
                frontier,
            } => {
                let atoms = match frontier {
                    FrontierGrid::No => size.atoms,
                    FrontierGrid::Bounded | FrontierGrid::Strided => size
                        .atoms
                        .min(size.tiles.saturating_mul(size.max_tile_atoms)),
                };
                let work = if count_tiles {
                    size.tiles.saturating_add(atoms)
                } else {
                    atoms
                };
                let per_block = u64::from(block) * u64::from(per_thread.max(1));
                let mut per_lane = work.div_ceil(per_block).max(1);
                if frontier == FrontierGrid::Strided {
                    per_lane = per_lane.min(limits.resident_blocks());
                }
                per_lane
                    .saturating_mul(size.lanes.max(1))
                    .min(u64::from(u32::MAX)) as u32
            }
            Grid::PerAtoms { atoms } => {
                let cap = if size.lanes <= 32 {
                    limits.resident_blocks()
                } else {
                    u64::MAX
                };
                size.atoms
                    .div_ceil(u64::from(atoms.max(1)))
                    .min(cap)
                    .clamp(1, u64::from(u32::MAX)) as u32
            }
            Grid::PerTiles { tiles } => size
                .tiles
                .div_ceil(u64::from(tiles.max(1)))
                .clamp(1, u64::from(u32::MAX)) as u32,
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
    /// The kernel does work only for tiles of at least this many atoms, so the runtime skips it
    /// when [`ProblemSize::max_tile_atoms`] is smaller (the huge-tile split's kernels). `None`:
    /// always launched.
    pub min_tile_atoms: Option<u64>,
    /// The kernel runs only when the plan's first kernel has at least this many blocks, counted
    /// before a strided grid's cap ([`Grid::uncapped`]): the work-oriented fix-up kernel, whose
    /// work the main kernel does itself on a smaller grid. `None`: always launched.
    pub min_grid: Option<u32>,
    /// The kernel runs only when the lane count ([`ProblemSize::lanes`]) lies in `min..=max`
    /// (two builds of the split's mid walk, for few lanes and for many). `None`: for every
    /// lane count.
    pub lanes: Option<(u64, u64)>,
    /// The track the kernel is enqueued on. Track 0 is the launching stream. A kernel on a side
    /// track `n > 0` starts after every track-0 kernel listed before it and runs alongside the
    /// track-0 kernels listed after it; the kernels of one track run in their listed order, and
    /// the plan ends when every track has ended. Side tracks let independent passes over
    /// disjoint tiles (the huge-tile split's tiers beside the schedule's own kernel) share the
    /// GPU where each alone would leave most of it idle. On the simulator every kernel runs in
    /// listed order.
    pub track: u8,
}

impl KernelPlan {
    /// Whether the kernel has work for a problem of `size` whose first kernel has `first_grid`
    /// blocks before any cap ([`Grid::uncapped`]).
    pub fn needed(&self, size: &ProblemSize, first_grid: u32) -> bool {
        self.min_tile_atoms.is_none_or(|m| size.max_tile_atoms >= m)
            && self.min_grid.is_none_or(|g| first_grid >= g)
            && self
                .lanes
                .is_none_or(|(min, max)| (min..=max).contains(&size.lanes))
    }
}

/// How many elements a temporary holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TempCount {
    Fixed(u64),
    /// `per_tile` elements for every active tile (plus `extra`).
    PerTile {
        per_tile: u64,
        extra: u64,
    },
    /// One element per block of the plan's first kernel, plus `extra`; for a strided frontier
    /// grid, per block of its bound ([`Grid::uncapped`]).
    PerBlock {
        extra: u64,
    },
    /// One element per `atoms` atoms of the tile set (rounded up), plus `extra`: what depends on
    /// the atoms but not on the lanes (the split's mid-tier pieces).
    PerAtoms {
        atoms: u64,
        extra: u64,
    },
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
    /// Counters that the plan's kernels leave zero when they finish (the last block to finish
    /// resets them), so they need no zeroing per launch: at most [`Temp::COUNTERS_BYTES`],
    /// kept in the workspace's flag region, which no scratch temporary shares, zeroed when the
    /// workspace is made. A memset per launch is a driver call, as dear on the host as a
    /// kernel launch; a launch with nothing else to zero then costs one call.
    Counters,
    /// Depends only on the tile set (a reorder of its tiles, say) and is written only by the
    /// plan's first `producers` kernels. The runtime keeps it with the device tile set after the
    /// first launch and skips those kernels on later launches over the same tile set; never used
    /// with a frontier, whose contents change between launches.
    Cached { producers: u32 },
}

impl Plan {
    /// How many leading kernels only produce [`TempRole::Cached`] temporaries (0 when the plan
    /// caches nothing).
    pub fn cache_producers(&self) -> usize {
        self.temps
            .iter()
            .filter_map(|t| match t.role {
                TempRole::Cached { producers } => Some(producers as usize),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
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

impl Temp {
    /// The most bytes of [`TempRole::Counters`] a plan may have: they share the workspace's flag
    /// region (256 bytes) with the error flag, from byte [`Temp::COUNTERS_OFFSET`].
    pub const COUNTERS_BYTES: u64 = 128;
    /// Where the counters start in the flag region.
    pub const COUNTERS_OFFSET: u64 = 128;
}

/// Everything one schedule needs at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The schedule's name as written in the attribute (`"thread_mapped"`).
    pub schedule: Cow<'static, str>,
    /// Kernels in launch order.
    pub kernels: Cow<'static, [KernelPlan]>,
    pub temps: Cow<'static, [Temp]>,
    /// The largest `tiles + atoms` this plan's index arithmetic supports; `None`: unlimited.
    /// A schedule may emit a 32-bit plan (limited) before a 64-bit one (unlimited) under the same
    /// `schedule` name; the runtime takes the first plan whose limit admits the problem.
    pub index_limit: Option<u64>,
    /// When several plans share one `schedule` name because the schedule picks a variant per
    /// launch: the rule under which the runtime picks this one. `None`: the plan is not chosen
    /// by problem shape.
    pub select: Option<Select>,
    /// The width of the tile offsets its kernels read (the tile set's, and a frontier scan's).
    /// Every schedule has plans for both widths; the runtime runs only a plan whose width is the
    /// device tile set's ([`ProblemSize::offsets`]) and refuses any other.
    pub offsets: OffsetWidth,
}

/// What [`Plan::offsets32_twin`] appends to every entry.
pub const OFFSETS32_SUFFIX: &str = "_u32";

/// The registers per thread a kernel launched with `block` threads may use, when that is below
/// the 255 a thread may have at most: every GPU lb targets (sm_75 to sm_90) gives a block at most
/// 64 K registers.
pub fn register_cap(block: u32) -> Option<u32> {
    let cap = (1u32 << 16) / block.max(1);
    (cap < 255).then_some(cap)
}

/// The entry a kernel of a 64-bit-offsets plan has, for an entry of either twin: what a template
/// that recognises its kernels by name compares.
pub fn twin_base(entry: &str) -> &str {
    entry.strip_suffix(OFFSETS32_SUFFIX).unwrap_or(entry)
}

impl Plan {
    /// The 32-bit-offsets twin of a plan that reads 64-bit offsets: the same kernels and
    /// temporaries, every entry suffixed `_u32`. What a schedule without index-width variants
    /// lists after its own plans ([`crate::ScheduleTemplate::plans`]); the template builds it
    /// like any plan, reading [`Plan::offsets`].
    pub fn offsets32_twin(&self) -> Plan {
        let kernels = self
            .kernels
            .iter()
            .map(|k| KernelPlan {
                entry: Cow::Owned(format!("{}{OFFSETS32_SUFFIX}", k.entry)),
                ..k.clone()
            })
            .collect::<Vec<_>>();
        Plan {
            kernels: Cow::Owned(kernels),
            offsets: OffsetWidth::U32,
            ..self.clone()
        }
    }

    /// The entry of this plan's *device-launch twin*: a kernel that does the work of the whole
    /// plan alone, launching its child grids from the device (CUDA dynamic parallelism), launched
    /// with the first kernel's block and grid. A schedule that has one puts it in the same
    /// module under this name (the first entry plus `_dl`); the runtime runs it instead of
    /// `kernels` where the module links against the device runtime, and `kernels` (the host
    /// fallback) everywhere else, the simulator included. Plans without a twin have no such
    /// entry in the module.
    pub fn device_launch_entry(&self) -> String {
        let first = self.kernels.first().map_or("", |k| k.entry.as_ref());
        format!("{first}_dl")
    }
}

/// A launch-time rule for picking one plan among several of the same schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// Picked when `min <= avg < max`, with `avg` = [`Select::avg_atoms_per_tile`]; `max ==
    /// u64::MAX` means no upper bound. The variants of one schedule cover `0..` without gaps or
    /// overlaps, so exactly one matches.
    AvgAtomsPerTile { min: u64, max: u64 },
    /// Picked when the average atoms per tile is at most `max_avg` and their standard deviation
    /// at most `max_std_dev` (`low: true`), or exactly when that does not hold (`low: false`):
    /// a pair of plans with the same thresholds and opposite `low` covers every tile set once.
    Spread {
        max_avg: u64,
        max_std_dev: u64,
        low: bool,
    },
    /// Picked when `min <= lanes < max` ([`ProblemSize::lanes`]); `max == u64::MAX` means no
    /// upper bound. The register-blocking variants of one schedule cover `0..` once.
    Lanes { min: u64, max: u64 },
}

impl Select {
    /// The average atoms per active tile, rounded up; 0 without tiles.
    pub fn avg_atoms_per_tile(size: &ProblemSize) -> u64 {
        if size.tiles == 0 {
            0
        } else {
            size.atoms.div_ceil(size.tiles)
        }
    }

    /// Whether this rule picks its plan for `size`, whose tiles' atom counts have standard
    /// deviation `std_dev` (the runtime measures it when a tile set is uploaded).
    pub fn matches(&self, size: &ProblemSize, std_dev: f64) -> bool {
        match *self {
            Select::AvgAtomsPerTile { min, max } => {
                let avg = Self::avg_atoms_per_tile(size);
                avg >= min && (avg < max || max == u64::MAX)
            }
            Select::Spread {
                max_avg,
                max_std_dev,
                low,
            } => {
                let within =
                    Self::avg_atoms_per_tile(size) <= max_avg && std_dev <= max_std_dev as f64;
                within == low
            }
            Select::Lanes { min, max } => {
                size.lanes >= min && (size.lanes < max || max == u64::MAX)
            }
        }
    }
}
