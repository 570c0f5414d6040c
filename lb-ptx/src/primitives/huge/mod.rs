//! The huge-tile split: tiles too large for one block are cut into fixed-size chunks that every
//! warp of a grid walks at once, then folded back per tile in a fixed order.
//!
//! Schedules that give a whole tile to one block (or to one warp or thread) have a cliff on a
//! tile set with one giant tile: that block walks the tile alone while the rest of the GPU idles
//! (issue 11: one row of millions of nonzeros among a million one-nonzero rows). The
//! work-oriented schedules have no such cliff because they split the work evenly whatever the
//! tile sizes (the thesis, §3.3.3); this primitive gives the
//! tile-oriented schedules the same even split for their largest tiles only, in the spirit of Li,
//! Wu & Becchi's consolidation (§2: the child grid is sized by the consolidated work, not by the
//! number of consolidated tiles). `binning`, `lrb`, the group family and `consolidate` use it;
//! their own kernels skip every tile of at least [`threshold`] atoms.
//!
//! Kernels (entries `{base}_huge_list`, `_huge_scan`, `_huge_walk`, `_huge_fixup`):
//! 1. **list** (grid [`first_grid`], one thread per tile position): appends every tile of at
//!    least [`threshold`] atoms to `huge_list` (an atomic cursor in `huge_count[0]`, so the list
//!    order depends on timing; nothing below depends on it). With the mid tier it also counts
//!    each segment's mid tiles, which a third kernel, **place**, lists in tile order after the
//!    scan (`huge/pieces.rs`).
//! 2. **scan** (one warp): `huge_starts[e]` = the chunks of list entries before `e`, a tile of
//!    `n` atoms being `⌈n / CHUNK⌉` chunks of [`CHUNK`] atoms (`CHUNK = 32 · CHUNK_ITEMS`).
//!    Without a frontier the list and the starts depend only on the tile set, so they are
//!    [`TempRole::Cached`] and these two kernels run only on the first launch over a tile set.
//! 3. **walk** (one warp per `CHUNK` atoms of the whole tile set, so the
//!    grid follows the work and never the tile count): warp `w` takes chunk × lane items
//!    `w, w + warps, …`, finds its list entry by a binary search of the starts, and its lanes
//!    stride over the chunk's atoms in order; a fixed butterfly combines them and lane 0 writes
//!    the chunk's partial.
//! 4. **fixup** (with `reduce` only): one warp per list entry × lane; lane `l` folds the chunk
//!    partials `l, l + 32, …` in chunk order, a butterfly combines the lanes, lane 0 stores the
//!    output.
//!
//! **Tracks.** The list and the scan run on track 0 before everything that reads their lists;
//! the huge tier's walk and fix-up on [`HUGE_TRACK`] and the mid tier's on [`MID_TRACK`], side
//! tracks of the launching stream (`KernelPlan::track`), listed before the schedule's own
//! kernel, so the three run side by side: they read and write disjoint tiles and temporaries.
//!
//! **With lanes** (SpMM), the lane-parallel kernels walk a tile's atoms in order, so the split
//! starts much lower, at [`LANE_THRESHOLD`] atoms, chunks are [`LANE_CHUNK`] atoms, and the walk
//! gives each block one chunk for up to 32 lane groups at once (grid: one block per `LANE_CHUNK`
//! atoms of the tile set): consecutive threads take consecutive lanes, so every read of a row of B is
//! coalesced and an atom's column and value are loaded once for all of a thread's lanes, where a
//! warp per (chunk, lane) read 32 rows of B for 32 values. The list, the scan and the fix-up are
//! the same kernels. Without this, a power-law row of a few thousand nonzeros was a serial chain
//! of thousands of steps for the few threads of its lanes.
//!
//! **The mid tier** (`huge/pieces.rs`, with lanes): a lane-parallel walk gives a tile of `n` atoms to
//! the few threads of its lanes, a chain of `n` dependent steps, so a power-law row of a hundred
//! atoms already keeps its threads busy long after the short rows around it are done (SpMM on
//! R-MAT and power-law graphs, where most atoms sit in such rows). Tiles of [`MID_THRESHOLD`] up
//! to [`MID_CEILING`] atoms are cut into pieces of [`PIECE`] atoms, and each piece is walked
//! like a short tile by the threads of its lanes: the rows that were the longest chains become
//! as many independent work items as they have pieces. A piece's partials go to `mid_partials`
//! and a fix-up folds each tile's pieces in piece order. The list and the scan count the mid
//! tier's tiles and pieces per segment of 32 tiles in the same kernels as the huge tier's work,
//! and the place kernel writes its list and piece starts in tile order, so that the pieces of
//! neighbouring rows are walked together (they often read the same rows of B). The mid tier
//! needs the lists cached (its one-warp scan runs once per tile set) and no frontier (whose
//! repeats could outgrow `mid_partials`); a plan without it leaves tiles below
//! [`LANE_THRESHOLD`] to the schedule's own kernel.
//!
//! Determinism: a chunk's bounds are fixed offsets inside its tile and every combination (a
//! lane's atoms in order, the butterflies, a lane's partials in chunk order) is a fixed tree of
//! the tile's size alone, never of the grid, the block, the list order or timing; no float
//! atomics. Two launches agree bitwise. Without `reduce` each atom's body runs exactly once per
//! list entry (once per frontier occurrence of the tile).
//!
//! Threshold: [`threshold`] = `HUGE_FACTOR · block · CHUNK_ITEMS` atoms (16 384 for 256
//! threads): a block walking such a tile keeps each thread busy
//! for `HUGE_FACTOR · CHUNK_ITEMS` = 64 atoms, four times one split chunk's per-lane share.
//! Below that, the three extra launches (scan, walk, fix-up; the list is cached) and the chunk
//! partials' round trip cost more than the block's walk; above it, one block would take at least
//! four chunks' time on its own while the split spreads the tile over `n / CHUNK` warps.
//! Every listed tile has at least `4 · block / 32 ≥ 4` chunks.
//!
//! Temporaries, sized from tiles and atoms alone: `huge_count` (2 words), `huge_list` (one tile
//! per tile), `huge_starts` (one per tile plus two) and `huge_partials`: one partial per chunk
//! and lane. Chunks are at most `1.25 · atoms / CHUNK` (a listed tile of `n ≥ 4 · CHUNK` atoms has
//! `⌈n / CHUNK⌉ ≤ 1.25 · n / CHUNK` chunks), and the plan's first kernel runs on the
//! [`first_grid`] (at least `⌈atoms / (block · CHUNK_ITEMS)⌉ × lanes` blocks), so a `PerBlock` temporary
//! of [`partials_per_block`] 8-byte partials per element holds them.

use std::borrow::Cow;

mod pieces;

use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity, KernelParams};
use crate::ir::{BinOp, Cmp, Kernel, Op, Operand, Reg, Rounding, ShflMode, Space, Special, Type};
use crate::plan::{
    twin_base, FrontierGrid, Grid, KernelPlan, OffsetWidth, Plan, Select, Temp, TempCount, TempRole,
};
use crate::primitives::layout::{Blocking, SPLIT_LANE_BLOCKING};
use crate::primitives::walker::Walker;
use crate::primitives::warp::{butterfly, grid_warps, shfl};
use crate::primitives::Layout;
use crate::schedules::{common_temps, Schedule};
use crate::{GenError, Options};

/// Atoms per lane of one chunk: a chunk is `32 · CHUNK_ITEMS` atoms, walked by one warp.
pub const CHUNK_ITEMS: u64 = 16;
/// Atoms of one chunk.
pub const CHUNK: u64 = 32 * CHUNK_ITEMS;
/// A tile is split when one block would walk at least this many chunk shares per thread.
pub const HUGE_FACTOR: u64 = 4;

/// The side tracks ([`KernelPlan::track`]) of the two tiers' walks and fix-ups. Each tier
/// touches only its own tiles and temporaries (its list, made before by the list and scan on
/// track 0), so both run alongside the schedule's kernel for the short tiles (listed after
/// them, see [`plan_around`]) and alongside each other. Each of the three alone leaves most of
/// the GPU idle on a skewed tile set: SpMM at 32 lanes on an R-MAT graph (H100) took about
/// 40 µs in each at a quarter to a third of the SMs' throughput, one after the other.
pub const HUGE_TRACK: u8 = 1;
/// The mid tier's track.
pub const MID_TRACK: u8 = 2;

/// The entry suffixes of the split's kernels.
const LIST: &str = "_huge_list";
const SCAN: &str = "_huge_scan";
const WALK: &str = "_huge_walk";
const FIXUP: &str = "_huge_fixup";

const MID_PLACE: &str = "_mid_place";
const MID_WALK: &str = "_mid_walk";
const MID_PARTS: &str = "_mid_parts";
const MID_FIXUP: &str = "_mid_fixup";

const COUNT_TEMP: &str = "huge_count";
const LIST_TEMP: &str = "huge_list";
const STARTS_TEMP: &str = "huge_starts";
const PARTIALS_TEMP: &str = "huge_partials";
const MID_LIST_TEMP: &str = "mid_list";
const MID_STARTS_TEMP: &str = "mid_starts";
const MID_PARTIALS_TEMP: &str = "mid_partials";
const MID_ENTRIES_TEMP: &str = "mid_entries";
const MID_SEGMENTS_TEMP: &str = "mid_segments";

/// Words of `huge_count`: the huge list's length, the huge tier's chunk size, the mid list's
/// length.
const COUNT_WORDS: u64 = 3;
/// The word of `huge_count` that holds the mid list's length.
const MID_COUNT: i64 = 2;

/// With lanes, in a plan with the mid tier ([`mid_tier`]), tiles of at least this many atoms
/// (and below [`MID_CEILING`]) are cut into pieces of [`PIECE`] atoms; shorter ones stay the
/// schedule's. A power of two, so that `lrb`'s classes can stop at its bin.
pub const MID_THRESHOLD: u64 = 32;

/// Atoms of one piece of the mid tier: a chain short enough that the pieces of a long row finish
/// with the short rows around them, long enough that the piece's partial (one per lane) and its
/// fold cost little against its walk. Hand-written kernels of this shape (a piece per group of
/// threads over float lanes, each cut row added with atomics, SpMM on an H100) ran fastest at 32
/// atoms at k = 32 and 64 at k = 128; with lb's partials, their ordered fold and the ceiling
/// below, 128 was fastest on matrices whose atoms sit mostly in rows of 40 to 700 (H200, SpMM
/// k = 32 and 128; docs/spmm.md, "Pieces and the ceiling").
pub const PIECE: u64 = 128;

/// With the mid tier, tiles of at least this many atoms go to the huge tier (without it,
/// [`LANE_THRESHOLD`]): up to here a tile is at most eight pieces, all walked at once, whose fold
/// in piece order costs less than the huge tier's block per chunk (most of whose pieces idle on
/// a tile of a few hundred atoms), its tree and its chunk fix-up (docs/spmm.md, "Pieces and the
/// ceiling").
pub const MID_CEILING: u64 = 2 * CHUNK;

/// With lanes, tiles of at least this many atoms are split, whatever the block size.
///
/// The lane-parallel kernels (the group family, `lrb`'s thread and warp classes, `consolidate`)
/// give a tile's lanes to its threads and walk its atoms in order, so a tile of `n` atoms is a
/// chain of `n` dependent steps (a column load, then the gathers it addresses) however wide the
/// lanes are: at a few hundred nanoseconds of memory latency per two-atom step, 256 atoms are
/// already some 40 µs of one thread's time while the split's walk takes them in one block's
/// pass. Tiles of one chunk (`LANE_THRESHOLD..=CHUNK` atoms) need no partial: the walk stores
/// them.
pub const LANE_THRESHOLD: u64 = CHUNK / 2;

/// Atoms of one chunk with lanes, taken by one block (`Split::walk_lanes`).
///
/// A block's pieces walk `LANE_CHUNK / P` atoms each (64 at 32 lanes, 256 at 128), long enough to
/// amortize the block's tree of partials, short enough for a dependent chain of some tens of
/// steps; and the fix-up folds a tile's `n / LANE_CHUNK` chunk partials per lane with one warp
/// per lane, so a tile of millions of atoms leaves it a few dozen loads per thread.
pub const LANE_CHUNK: u64 = 4 * CHUNK;

/// Tiles with at least this many atoms are split, for blocks of `block` threads, with or without
/// lanes (see the module docs and [`LANE_THRESHOLD`]), in a plan without the mid tier.
pub fn threshold(block: u32, lanes: bool) -> u64 {
    if lanes {
        LANE_THRESHOLD
    } else {
        HUGE_FACTOR * u64::from(block) * CHUNK_ITEMS
    }
}

/// The least atoms of a tile that the huge tier takes: [`threshold`], or [`MID_CEILING`] in a
/// plan with the mid tier (`mid`, which has lanes).
pub fn huge_from(block: u32, lanes: bool, mid: bool) -> u64 {
    if mid {
        MID_CEILING
    } else {
        threshold(block, lanes)
    }
}

/// Whether a plan for `opts` has the mid tier: with lanes, without a frontier, and where the
/// split's list and scan lead the plan so that their results are cached with the tile set
/// (`cached`); see the module docs.
pub fn mid_tier(opts: &Options, cached: bool) -> bool {
    opts.lanes.is_some() && opts.tiles.is_none() && cached
}

/// Whether `plan` has the mid tier's kernels.
pub fn plan_has_mid(plan: &Plan) -> bool {
    plan.kernels
        .iter()
        .any(|k| twin_base(k.entry.as_ref()).ends_with(MID_WALK))
}

/// The least atoms of a tile that the split takes (with the mid tier, `mid`, or without): the
/// schedule's own kernels skip every tile of at least this many atoms.
pub fn split_from(opts: &Options, mid: bool) -> u64 {
    if mid {
        MID_THRESHOLD
    } else {
        threshold(opts.block, opts.lanes.is_some())
    }
}

/// The grid of a plan's first kernel (the list's, or a schedule's own that comes first), which
/// sizes `huge_partials`: [`CHUNK_ITEMS`] tiles or atoms per thread, times lanes, so at least one
/// warp per chunk of atoms per lane and a grid that follows the tile count too.
pub fn first_grid() -> Grid {
    Grid::CoverWork {
        per_thread: CHUNK_ITEMS as u32,
        count_tiles: true,
        frontier: FrontierGrid::No,
    }
}

/// The walk's grid: one warp per chunk of the tile set's atoms, per lane (the split's chunks are
/// at most 1.25 times as many; the warps stride over them); with lanes, one block per
/// [`LANE_CHUNK`] atoms of the tile set, each taking a chunk for all its lanes and striding over
/// the rest ([`Split::walk_lanes`]).
fn walk_grid(lanes: bool) -> Grid {
    if lanes {
        Grid::PerAtoms {
            atoms: LANE_CHUNK as u32,
        }
    } else {
        Grid::CoverWork {
            per_thread: CHUNK_ITEMS as u32,
            count_tiles: false,
            frontier: FrontierGrid::No,
        }
    }
}

/// Partials per `huge_partials` element: `1.25 · block / 32` chunks per first-grid block,
/// rounded up (see the module docs). With lanes the chunks are [`LANE_CHUNK`] atoms and a tile of
/// one chunk has no partial, so a listed tile of `n > LANE_CHUNK` atoms has fewer than
/// `2n / LANE_CHUNK = n / (2 · CHUNK)` partials per lane: fewer than without lanes.
pub fn partials_per_block(block: u32) -> u32 {
    (5 * block).div_ceil(4 * 32)
}

/// The plan of a schedule whose one kernel `entry` (on `grid`, one that strides over the tiles)
/// leaves huge tiles to the split: the split's list and scan, the kernel, the split's walk and
/// fix-up, and their temporaries after the error flag.
pub fn plan_around(
    body: &Body,
    opts: &Options,
    schedule: Schedule,
    (entry, grid): (String, Grid),
    select: Option<Select>,
) -> Plan {
    let mid = mid_tier(opts, true);
    let mut kernels = front_kernels(&entry, opts, mid);
    let producers = kernels.len() as u32;
    // The tiers' kernels (side tracks) before the schedule's own, so that its kernel runs
    // alongside them rather than before them.
    kernels.extend(back_kernels(&entry, body, opts, mid));
    kernels.push(KernelPlan {
        entry: Cow::Owned(entry.clone()),
        block: opts.block,
        grid,
        dynamic_shared: 0,
        min_tile_atoms: None,
        min_grid: None,
        lanes: None,
        track: 0,
    });
    let mut temps = common_temps(opts);
    temps.extend(self::temps(opts, Some(producers), mid));
    Plan {
        schedule: Cow::Borrowed(schedule.name()),
        kernels: Cow::Owned(kernels),
        temps: Cow::Owned(temps),
        index_limit: None,
        offsets: OffsetWidth::U64,
        select,
    }
}

/// The kernels that come before the schedule's own: list and scan (the cache producers), for
/// both tiers with the mid tier (`mid`, [`mid_tier`]), which adds the kernel that places its
/// list in tile order.
pub fn front_kernels(base: &str, opts: &Options, mid: bool) -> Vec<KernelPlan> {
    let first = Some(split_from(opts, mid));
    let mut out = vec![
        kernel(
            format!("{base}{LIST}"),
            (opts.block, first_grid()),
            first,
            0,
        ),
        kernel(format!("{base}{SCAN}"), (32, Grid::Fixed(1)), first, 0),
    ];
    if mid {
        // A warp per segment of 32 tiles: the first grid, sized by atoms and lanes, would be
        // mostly warps with no segment.
        let place = (opts.block, Grid::PerTiles { tiles: opts.block });
        out.push(kernel(format!("{base}{MID_PLACE}"), place, first, 0));
    }
    out
}

/// The kernels after the schedule's own: the walk, and the fix-up when the body reduces; with
/// the mid tier (`mid`), its walk and fix-up too.
pub fn back_kernels(base: &str, body: &Body, opts: &Options, mid: bool) -> Vec<KernelPlan> {
    let mut out = huge_back_kernels(base, body, opts, mid);
    if mid {
        out.extend(pieces::kernels(base, body, opts));
    }
    out
}

/// The huge tier's walk and fix-up.
fn huge_back_kernels(base: &str, body: &Body, opts: &Options, mid: bool) -> Vec<KernelPlan> {
    let lanes = opts.lanes.is_some();
    let huge = Some(huge_from(opts.block, lanes, mid));
    // The lane walk holds R partials and the chunk's bounds on top of a lane walk's registers:
    // at most 256 threads per block leave it all 255 registers.
    let walk_block = if lanes {
        opts.block.min(256)
    } else {
        opts.block
    };
    let walk = (walk_block, walk_grid(lanes));
    let mut out = vec![kernel(format!("{base}{WALK}"), walk, huge, HUGE_TRACK)];
    if body.reduce.is_some() {
        let fixup = (opts.block, Grid::CoverItems { per_thread: 1 });
        out.push(kernel(format!("{base}{FIXUP}"), fixup, huge, HUGE_TRACK));
    }
    out
}

/// A kernel of the split on `track`, launched only when some tile is huge (`min_tile_atoms`).
fn kernel(
    entry: String,
    (block, grid): (u32, Grid),
    min_tile_atoms: Option<u64>,
    track: u8,
) -> KernelPlan {
    KernelPlan {
        entry: Cow::Owned(entry),
        block,
        grid,
        dynamic_shared: 0,
        min_tile_atoms,
        min_grid: None,
        lanes: None,
        track,
    }
}

/// The split's temporaries. `producers`: how many leading kernels of the plan produce cached
/// temporaries, the list and scan among them (`None`: the list is not cached, because its
/// kernels do not lead the plan); the list is cached only without a frontier. `mid`: the mid
/// tier's too ([`mid_tier`]).
pub fn temps(opts: &Options, producers: Option<u32>, mid: bool) -> Vec<Temp> {
    let role = match (opts.tiles, producers) {
        (None, Some(producers)) => TempRole::Cached { producers },
        _ => TempRole::Scratch,
    };
    let temp = |name, elem_bytes, count, zero, role| Temp {
        name: Cow::Borrowed(name),
        elem_bytes,
        count,
        zero,
        role,
    };
    let per_tile = |extra| TempCount::PerTile { per_tile: 1, extra };
    let mut out = vec![
        temp(COUNT_TEMP, 8, TempCount::Fixed(COUNT_WORDS), true, role),
        temp(LIST_TEMP, 8, per_tile(1), false, role),
        temp(STARTS_TEMP, 16, per_tile(2), false, role),
        temp(
            PARTIALS_TEMP,
            8 * partials_per_block(opts.block),
            TempCount::PerBlock { extra: 1 },
            false,
            TempRole::Scratch,
        ),
    ];
    if mid {
        out.extend([
            temp(MID_LIST_TEMP, 8, per_tile(1), false, role),
            temp(MID_STARTS_TEMP, 8, per_tile(2), false, role),
            temp(
                MID_PARTIALS_TEMP,
                8 * pieces::partials_per_block(opts.block),
                TempCount::PerBlock { extra: 1 },
                false,
                TempRole::Scratch,
            ),
            temp(MID_ENTRIES_TEMP, 4, pieces::entries_count(), false, role),
            temp(MID_SEGMENTS_TEMP, 1, pieces::segments_bytes(), false, role),
        ]);
    }
    out
}

/// `size >= from` ([`split_from`], or [`threshold`]): the tile is the split's, and the
/// schedule's kernel skips it.
pub fn is_huge(b: &mut KernelBuilder, size: Reg, from: u64) -> Reg {
    b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(from as i64))
}

/// Builds `kp` if it is one of the split's kernels; `None` if it is the schedule's own.
pub fn build(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    kp: &KernelPlan,
) -> Option<Result<Kernel, GenError>> {
    let entry = twin_base(kp.entry.as_ref());
    let which = [
        LIST, SCAN, WALK, FIXUP, MID_PLACE, MID_WALK, MID_PARTS, MID_FIXUP,
    ]
    .into_iter()
    .find(|s| entry.ends_with(s))?;
    Some(build_one(body, opts, plan, kp, which))
}

fn build_one(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    kp: &KernelPlan,
    which: &str,
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(kp.entry.as_ref());
    let params = KernelParams::declare(&mut b, body, plan)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;
    let t = Temps::find(plan, &params)?;
    let s = Split {
        body,
        opts,
        params: &params,
        layout: &layout,
        t,
    };
    match which {
        LIST => s.list(&mut b),
        SCAN => s.scan(&mut b),
        MID_PLACE => s.mid_place(&mut b)?,
        WALK if layout.lanes.is_some() => s.walk_lanes(&mut b, kp.block)?,
        WALK => s.walk(&mut b)?,
        MID_WALK => s.mid_walk(&mut b, false)?,
        MID_PARTS => s.mid_walk(&mut b, true)?,
        MID_FIXUP => s.mid_fixup(&mut b)?,
        _ => s.fixup(&mut b)?,
    }
    Ok(b.finish())
}

/// The split's temporaries' pointers.
#[derive(Clone, Copy)]
struct Temps {
    count: Reg,
    list: Reg,
    starts: Reg,
    partials: Reg,
    /// The mid tier's, in a plan that has it.
    mid: Option<MidTemps>,
}

/// The mid tier's temporaries: its list of tiles, their first pieces (one u64 per entry, the
/// total after the last), the pieces' partials (one per piece and lane), each piece's entry
/// (a u32 per piece) and, per segment of [`pieces::SEGMENT`] tiles, its entries and pieces,
/// then the entries and pieces of the segments before it (two u64).
#[derive(Clone, Copy)]
struct MidTemps {
    list: Reg,
    starts: Reg,
    partials: Reg,
    entries: Reg,
    segments: Reg,
}

impl Temps {
    /// Word `k` of `huge_count`.
    fn count_at(&self, b: &mut KernelBuilder, k: i64) -> Reg {
        b.bin(BinOp::Add, Type::U64, self.count, Operand::Imm(8 * k))
    }

    /// `starts[2e + k]`: entry `e`'s first chunk (`k = 0`) or first partial (`k = 1`).
    fn start_at(&self, b: &mut KernelBuilder, e: Reg, k: i64) -> Reg {
        let at = b.elem_addr(self.starts, e, 16);
        b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8 * k))
    }

    fn find(plan: &Plan, params: &KernelParams) -> Result<Temps, GenError> {
        let temp = |name: &str| {
            plan.temps
                .iter()
                .position(|t| t.name == name)
                .map(|i| params.temps[i])
                .ok_or_else(|| GenError::Unsupported(format!("the plan has no `{name}` temporary")))
        };
        let mid = match plan.temps.iter().any(|t| t.name == MID_LIST_TEMP) {
            true => Some(MidTemps {
                list: temp(MID_LIST_TEMP)?,
                starts: temp(MID_STARTS_TEMP)?,
                partials: temp(MID_PARTIALS_TEMP)?,
                entries: temp(MID_ENTRIES_TEMP)?,
                segments: temp(MID_SEGMENTS_TEMP)?,
            }),
            false => None,
        };
        Ok(Temps {
            count: temp(COUNT_TEMP)?,
            list: temp(LIST_TEMP)?,
            starts: temp(STARTS_TEMP)?,
            partials: temp(PARTIALS_TEMP)?,
            mid,
        })
    }
}

/// One kernel of the split.
struct Split<'a> {
    body: &'a Body,
    opts: &'a Options,
    params: &'a KernelParams,
    layout: &'a Layout,
    t: Temps,
}

impl Split<'_> {
    /// One thread per tile position: huge tiles are appended to the list; with the mid tier,
    /// [`Split::list_mid`].
    fn list(&self, b: &mut KernelBuilder) {
        if let Some(mid) = self.t.mid {
            return self.list_mid(b, mid);
        }
        let l = self.layout;
        let gs = b.grid_stride_begin(l.tiles);
        let tile = l.tile(b, self.params, gs.item, self.opts.checked, gs.next);
        let (begin, end) = l.atoms(b, tile);
        let size = b.bin(BinOp::Sub, Type::U64, end, begin);
        let lanes = self.layout.lanes.is_some();
        let from = threshold(self.opts.block, lanes);
        let huge = is_huge(b, size, from);
        let add = b.if_begin(huge, false);
        self.append(b, (self.t.count, self.t.list), tile);
        b.if_end(add);
        b.grid_stride_end(gs);
    }

    /// Appends `tile` to `list` at the next slot of the cursor at `cursor` (an atomic add, so
    /// the order depends on timing; nothing depends on the order).
    fn append(&self, b: &mut KernelBuilder, (cursor, list): (Reg, Reg), tile: Reg) {
        let one = b.mov(Type::U64, Operand::Imm(1));
        let slot = atom_add(b, cursor, one);
        let at = b.elem_addr(list, slot, 8);
        b.st(Space::Global, Type::U64, at, tile);
    }

    /// One warp: the chunk size, then per entry `e` its first chunk (`starts[2e]`) and first
    /// partial (`starts[2e + 1]`), and the totals at `e = E`.
    fn scan(&self, b: &mut KernelBuilder) {
        let lane = b.special(Special::LaneId);
        let lane64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane);
        let entries = b.ld(Space::Global, Type::U64, self.t.count);
        let chunk = self.chunk_size(b, lane64, entries);
        let lead = b.setp(Cmp::Eq, Type::U32, lane, Operand::Imm(0));
        let first = b.if_begin(lead, false);
        let at = self.t.count_at(b, 1);
        b.st(Space::Global, Type::U64, at, chunk);
        b.if_end(first);
        let runs = [0, 1].map(|_| b.mov(Type::U64, Operand::Imm(0)));
        let base = b.mov(Type::U64, Operand::Imm(0));
        let rounds = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U64, base, entries);
        b.break_if(&rounds, over, false);
        let e = b.bin(BinOp::Add, Type::U64, base, lane64);
        let inside = b.setp(Cmp::Lt, Type::U64, e, entries);
        let size = self.entry_size(b, e, inside);
        let up = b.bin(BinOp::Add, Type::U64, size, chunk);
        let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
        let chunks = b.bin(BinOp::Div, Type::U64, up, chunk);
        // A tile of one chunk is walked whole by one warp and needs no partial.
        let single = b.setp(Cmp::Le, Type::U64, chunks, Operand::Imm(1));
        let parts = b.selp(Type::U64, Operand::Imm(0), chunks, single);
        for (k, x) in [chunks, parts].into_iter().enumerate() {
            let incl = warp_scan(b, lane, x);
            let write = b.if_begin(inside, false);
            let excl = b.bin(BinOp::Sub, Type::U64, incl, x);
            let start = b.bin(BinOp::Add, Type::U64, runs[k], excl);
            let at = self.t.start_at(b, e, k as i64);
            b.st(Space::Global, Type::U64, at, start);
            b.if_end(write);
            let total = shfl(b, ShflMode::Idx, incl, Type::U64, Operand::Imm(31));
            b.bin_to(BinOp::Add, Type::U64, runs[k], runs[k], total);
        }
        b.bin_to(BinOp::Add, Type::U64, base, base, Operand::Imm(32));
        b.loop_end(rounds);
        let last = b.if_begin(lead, false);
        for (k, run) in runs.into_iter().enumerate() {
            let at = self.t.start_at(b, entries, k as i64);
            b.st(Space::Global, Type::U64, at, run);
        }
        b.if_end(last);
        if let Some(mid) = self.t.mid {
            self.scan_mid(b, (lane, lane64, lead), mid);
        }
    }

    /// Atoms of list entry `e` where `inside`, else 0.
    fn entry_size(&self, b: &mut KernelBuilder, e: Reg, inside: Reg) -> Reg {
        self.entry_size_in(b, self.t.list, e, inside)
    }

    /// Atoms of entry `e` of `list` where `inside`, else 0.
    fn entry_size_in(&self, b: &mut KernelBuilder, list: Reg, e: Reg, inside: Reg) -> Reg {
        let size = b.mov(Type::U64, Operand::Imm(0));
        let read = b.if_begin(inside, false);
        let at = b.elem_addr(list, e, 8);
        let tile = b.ld(Space::Global, Type::U64, at);
        let (begin, end) = self.layout.atoms(b, tile);
        b.bin_to(BinOp::Sub, Type::U64, size, end, begin);
        b.if_end(read);
        size
    }

    /// The chunk size, [`CHUNK`] unless the listed atoms `S` exceed the tile set's atoms `A`
    /// (a frontier that repeats huge tiles): then `CHUNK · ⌈2S / (tiles + A)⌉`, so that the
    /// partials (at most `2S / chunk`, counting only tiles of two chunks or more) still fit the
    /// `1.25 · (tiles + A) / CHUNK` of `huge_partials`. `S` is a sum of integers, so the size
    /// depends on the list's contents and not on its order.
    fn chunk_size(&self, b: &mut KernelBuilder, lane64: Reg, entries: Reg) -> Reg {
        let sum = b.mov(Type::U64, Operand::Imm(0));
        let e = b.mov(Type::U64, lane64);
        let sums = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U64, e, entries);
        b.break_if(&sums, over, false);
        let inside = b.setp(Cmp::Lt, Type::U64, e, entries);
        let size = self.entry_size(b, e, inside);
        b.bin_to(BinOp::Add, Type::U64, sum, sum, size);
        b.bin_to(BinOp::Add, Type::U64, e, e, Operand::Imm(32));
        b.loop_end(sums);
        let mut d = 1;
        while d < 32 {
            let y = shfl(b, ShflMode::Bfly, sum, Type::U64, Operand::Imm(d));
            b.bin_to(BinOp::Add, Type::U64, sum, sum, y);
            d *= 2;
        }
        let atoms = self.layout.csr.nnz;
        let room = b.bin(BinOp::Add, Type::U64, self.layout.tiles, atoms);
        let twice = b.bin(BinOp::Shl, Type::B64, sum, Operand::Imm(1));
        let up = b.bin(BinOp::Add, Type::U64, twice, room);
        let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
        let factor = b.bin(BinOp::Div, Type::U64, up, room);
        let fits = b.setp(Cmp::Le, Type::U64, sum, atoms);
        let factor = b.selp(Type::U64, Operand::Imm(1), factor, fits);
        let base = if self.layout.lanes.is_some() {
            LANE_CHUNK
        } else {
            CHUNK
        };
        b.bin(BinOp::Mul, Type::U64, factor, Operand::Imm(base as i64))
    }

    /// Splits `item` into (index, lane) with the layout's lanes (index = item without lanes).
    fn item_lane(&self, b: &mut KernelBuilder, item: Reg) -> (Reg, Option<Reg>) {
        let w = self.layout.work_item(b, item);
        (w.position, w.lane)
    }

    /// The lane register the body sees (0 when it reads a lane without `lanes`).
    fn body_lane(&self, b: &mut KernelBuilder, lane: Option<Reg>) -> Option<Reg> {
        match lane {
            Some(l) => Some(l),
            None if self.body.roles.contains(&crate::body::IndexRole::Lane) => {
                Some(b.mov(Type::U64, Operand::Imm(0)))
            }
            None => None,
        }
    }

    /// The list entry of `chunk`: the last `e < entries` with `starts[e] <= chunk`.
    fn entry_of(&self, b: &mut KernelBuilder, chunk: Reg, entries: Reg) -> Reg {
        let starts = |b: &mut KernelBuilder, e| self.t.start_at(b, e, 0);
        last_at_most(b, starts, chunk, entries)
    }
}

/// The last `e < entries` (at least 0) whose start, the u64 at `start_at(e)`, is at most `x`: a
/// binary search of nondecreasing starts.
fn last_at_most(
    b: &mut KernelBuilder,
    start_at: impl Fn(&mut KernelBuilder, Reg) -> Reg,
    x: Reg,
    entries: Reg,
) -> Reg {
    let lo = b.mov(Type::U64, Operand::Imm(0));
    let hi = b.bin(BinOp::Sub, Type::U64, entries, Operand::Imm(1));
    let search = b.loop_begin();
    let found = b.setp(Cmp::Ge, Type::U64, lo, hi);
    b.break_if(&search, found, false);
    let sum = b.bin(BinOp::Add, Type::U64, lo, hi);
    let up = b.bin(BinOp::Add, Type::U64, sum, Operand::Imm(1));
    let mid = b.bin(BinOp::Shr, Type::U64, up, Operand::Imm(1));
    let at = start_at(b, mid);
    let s = b.ld(Space::Global, Type::U64, at);
    let le = b.setp(Cmp::Le, Type::U64, s, x);
    let below = b.bin(BinOp::Sub, Type::U64, mid, Operand::Imm(1));
    let lo2 = b.selp(Type::U64, mid, lo, le);
    let hi2 = b.selp(Type::U64, hi, below, le);
    b.mov_to(Type::U64, lo, lo2);
    b.mov_to(Type::U64, hi, hi2);
    b.loop_end(search);
    lo
}

impl Split<'_> {
    /// One warp per chunk × lane item: the chunk's atoms strided over the warp's lanes; lane 0
    /// writes the chunk's partial, or the output when the chunk is the whole tile.
    fn walk(&self, b: &mut KernelBuilder) -> Result<(), GenError> {
        let (warp, warps, lane_w) = grid_warps(b);
        let lane_w64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane_w);
        let first = b.setp(Cmp::Eq, Type::U32, lane_w, Operand::Imm(0));
        let entries = b.ld(Space::Global, Type::U64, self.t.count);
        let at = self.t.count_at(b, 1);
        let size = b.ld(Space::Global, Type::U64, at);
        let at = self.t.start_at(b, entries, 0);
        let chunks = b.ld(Space::Global, Type::U64, at);
        let items = match self.layout.lanes {
            Some(l) => b.bin(BinOp::Mul, Type::U64, chunks, l),
            None => chunks,
        };
        let item = b.mov(Type::U64, warp);
        let scope = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, item, items);
        b.break_if(&scope, done, false);
        let (chunk, lane) = self.item_lane(b, item);
        let c = self.chunk(b, chunk, (entries, size));
        let start = b.bin(BinOp::Add, Type::U64, c.offset, lane_w64);
        let lane = self.body_lane(b, lane);
        let w = Walker {
            body: self.body,
            params: self.params,
            checked: self.opts.checked,
            lane,
        };
        // `begin` is the tile's, so the body's rank is the atom's rank in its tile.
        let part = w.stride(b, c.tile, (c.begin, c.stop), start, 32)?;
        if let (Some(part), Some((ty, red))) = (part, self.body.reduce) {
            butterfly(b, part, (ty, red))?;
            let store = b.if_begin(first, false);
            self.store_chunk(b, &c, lane, (part, ty))?;
            b.if_end(store);
        }
        b.bin_to(BinOp::Add, Type::U64, item, item, warps);
        b.loop_end(scope);
        Ok(())
    }

    /// With lanes: one block per (chunk, lane pass) item, which takes the chunk's atoms for up
    /// to 32 lane groups of `R` lanes at once (`R` by the lane count, [`per_lane_blocking`]).
    ///
    /// The block's threads are `W = min(groups, 32)` lane groups side by side (consecutive
    /// threads, consecutive lanes: B's rows are read and C's written coalesced) times
    /// `P = ⌊block / W⌋` pieces of the chunk, each `⌈chunk / P⌉` atoms walked in order once for
    /// the thread's `R` lanes ([`Walker::walk_lanes`]: one column and value load per atom for
    /// `R` lanes). The pieces' partials meet in shared memory along a fixed binary tree over the
    /// piece index; piece 0 stores the chunk's partial per lane, or the output when the chunk
    /// is the whole tile. The tree and the pieces depend on the chunk size, `W` and the block
    /// only, never on the grid or timing, so two launches agree bitwise. Without lanes a warp
    /// takes one (chunk, lane) and its threads stride over the atoms, so each gather of B is a
    /// different row: 32 sectors for one lane's 32 values.
    fn walk_lanes(&self, b: &mut KernelBuilder, block: u32) -> Result<(), GenError> {
        if self.body.reduce.is_some() {
            let most = SPLIT_LANE_BLOCKING.iter().map(|l| l.0).max().unwrap_or(1);
            b.shared("lb_smem", 8, 8 * most * block);
        }
        let body = (self.body, self.params);
        self.layout
            .per_lane_blocking_vec(b, body, &SPLIT_LANE_BLOCKING, |b, r| {
                self.walk_lanes_by(b, block, r)
            })
    }

    /// [`Split::walk_lanes`] for `per_thread` lanes per thread.
    fn walk_lanes_by(
        &self,
        b: &mut KernelBuilder,
        block: u32,
        blocking: Blocking,
    ) -> Result<(), GenError> {
        let per_thread = blocking.per_thread;
        let l = self.layout;
        let tid = b.special(Special::TidX);
        let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let ctaid = b.special(Special::CtaidX);
        let nctaid = b.special(Special::NctaidX);
        let item = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
        let blocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
        let groups = l.lane_groups(b, per_thread);
        let width = b.bin(BinOp::Min, Type::U64, groups, Operand::Imm(32));
        let width = b.bin(BinOp::Max, Type::U64, width, Operand::Imm(1));
        let pieces = b.bin(BinOp::Div, Type::U64, Operand::Imm(block.into()), width);
        let piece = b.bin(BinOp::Div, Type::U64, tid, width);
        let whole_rows = b.bin(BinOp::Mul, Type::U64, piece, width);
        let column = b.bin(BinOp::Sub, Type::U64, tid, whole_rows);
        let up = b.bin(BinOp::Add, Type::U64, groups, width);
        let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
        let passes = b.bin(BinOp::Div, Type::U64, up, width);
        let entries = b.ld(Space::Global, Type::U64, self.t.count);
        let at = self.t.count_at(b, 1);
        let size = b.ld(Space::Global, Type::U64, at);
        let at = self.t.start_at(b, entries, 0);
        let chunks = b.ld(Space::Global, Type::U64, at);
        let items = b.bin(BinOp::Mul, Type::U64, chunks, passes);
        let in_block = b.setp(Cmp::Lt, Type::U64, piece, pieces);
        let last_group = b.bin(BinOp::Sub, Type::U64, groups, Operand::Imm(1));
        // The item loop is block-uniform (the block index and the item count), as the barriers
        // of the tree need.
        let scope = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, item, items);
        b.break_if(&scope, done, false);
        let chunk = b.bin(BinOp::Div, Type::U64, item, passes);
        let pass_rows = b.bin(BinOp::Mul, Type::U64, chunk, passes);
        let pass = b.bin(BinOp::Sub, Type::U64, item, pass_rows);
        let c = self.chunk(b, chunk, (entries, size));
        let pass_first = b.bin(BinOp::Mul, Type::U64, pass, width);
        let group = b.bin(BinOp::Add, Type::U64, pass_first, column);
        let has_group = b.setp(Cmp::Lt, Type::U64, group, groups);
        let active = b.bin(BinOp::And, Type::Pred, has_group, in_block);
        let (from, to) = piece_range(b, &c, (piece, pieces), active);
        let group = b.bin(BinOp::Min, Type::U64, group, last_group);
        let set = l.lane_set(b, self.body, (group, groups), blocking);
        let accs = match self.body.reduce {
            Some((ty, red)) => (0..set.per_thread())
                .map(|_| reduce_identity(b, ty, red))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let w = Walker {
            body: self.body,
            params: self.params,
            checked: self.opts.checked,
            lane: None,
        };
        w.walk_lanes(
            b,
            Some(c.tile),
            (c.begin, from, to),
            1,
            Some(&set),
            |b, r, x| {
                if let (Some(&acc), Some(x), Some((ty, red))) = (accs.get(r), x, self.body.reduce) {
                    reduce_combine(b, ty, red, acc, x)?;
                }
                Ok(())
            },
        )?;
        if let Some((ty, red)) = self.body.reduce {
            self.pieces_tree(b, (tid, piece, pieces, width), &accs, (ty, red), block)?;
            let lead = b.setp(Cmp::Eq, Type::U64, piece, Operand::Imm(0));
            let lead = b.bin(BinOp::And, Type::Pred, lead, has_group);
            let store = b.if_begin(lead, false);
            for (r, (&acc, valid)) in accs.iter().zip(&set.valid).enumerate() {
                let masked = valid.map(|v| b.if_begin(v, false));
                let lane = set.lane(b, r);
                self.store_chunk(b, &c, Some(lane), (acc, ty))?;
                if let Some(scope) = masked {
                    b.if_end(scope);
                }
            }
            b.if_end(store);
        }
        b.bin_to(BinOp::Add, Type::U64, item, item, blocks);
        b.loop_end(scope);
        Ok(())
    }

    /// Folds the pieces' partials `accs` into piece 0's, in place, through `lb_smem`: at step
    /// `d = 1, 2, 4, ..`, piece `p` with `p % 2d = 0` and `p + d < pieces` takes piece `p + d`'s
    /// (slot `thread · R + r`, the thread `d · width` further on). A fixed tree over the piece
    /// index; `⌈log2(pieces)⌉` steps, each closed by a barrier (also the one that lets the next
    /// item reuse the slots).
    fn pieces_tree(
        &self,
        b: &mut KernelBuilder,
        (tid, piece, pieces, width): (Reg, Reg, Reg, Reg),
        accs: &[Reg],
        (ty, red): (crate::body::Ty, crate::body::Reduce),
        block: u32,
    ) -> Result<(), GenError> {
        let pt = ptx_type(ty);
        let per = accs.len() as u32;
        let smem = b.mov(Type::U64, Operand::Symbol("lb_smem".into()));
        let mine = b.bin(BinOp::Mul, Type::U64, tid, Operand::Imm(per.into()));
        let mine = b.elem_addr(smem, mine, 8);
        let store = |b: &mut KernelBuilder| {
            for (r, &acc) in accs.iter().enumerate() {
                let at = b.bin(BinOp::Add, Type::U64, mine, Operand::Imm(8 * r as i64));
                b.st(Space::Shared, pt, at, acc);
            }
        };
        store(b);
        b.emit(Op::BarSync);
        let folded = b.label();
        let mut d = 1u32;
        while d < block {
            // `pieces` is the same for the whole block, so this exit is too.
            let over = b.setp(Cmp::Le, Type::U64, pieces, Operand::Imm(d.into()));
            b.bra_if(over, false, folded);
            let twice = b.bin(
                BinOp::And,
                Type::B64,
                piece,
                Operand::Imm((2 * d - 1).into()),
            );
            let even = b.setp(Cmp::Eq, Type::U64, twice, Operand::Imm(0));
            let partner = b.bin(BinOp::Add, Type::U64, piece, Operand::Imm(d.into()));
            let there = b.setp(Cmp::Lt, Type::U64, partner, pieces);
            let takes = b.bin(BinOp::And, Type::Pred, even, there);
            let step = b.if_begin(takes, false);
            let away = b.bin(BinOp::Mul, Type::U64, width, Operand::Imm((d * per).into()));
            let theirs = b.elem_addr(mine, away, 8);
            for (r, &acc) in accs.iter().enumerate() {
                let at = b.bin(BinOp::Add, Type::U64, theirs, Operand::Imm(8 * r as i64));
                let x = b.ld(Space::Shared, pt, at);
                reduce_combine(b, ty, red, acc, x)?;
            }
            store(b);
            b.if_end(step);
            b.emit(Op::BarSync);
            d *= 2;
        }
        b.place(folded);
        Ok(())
    }

    /// Split chunk `chunk`: its list entry's tile and that tile's atoms, the chunk's atoms
    /// `first..stop` (`size` atoms at offset `size × k` in the tile, `k` the chunk's rank in the
    /// tile), and where its result goes.
    fn chunk(&self, b: &mut KernelBuilder, chunk: Reg, (entries, size): (Reg, Reg)) -> Chunk {
        let e = self.entry_of(b, chunk, entries);
        let at = b.elem_addr(self.t.list, e, 8);
        let tile = b.ld(Space::Global, Type::U64, at);
        let (begin, end) = self.layout.atoms(b, tile);
        let at = self.t.start_at(b, e, 0);
        let first_chunk = b.ld(Space::Global, Type::U64, at);
        let at = self.t.start_at(b, e, 1);
        let first_part = b.ld(Space::Global, Type::U64, at);
        let next = self.t.start_at(b, e, 3);
        let next_part = b.ld(Space::Global, Type::U64, next);
        let k = b.bin(BinOp::Sub, Type::U64, chunk, first_chunk);
        let offset = b.bin(BinOp::Mul, Type::U64, k, size);
        let first = b.bin(BinOp::Add, Type::U64, begin, offset);
        let stop = b.bin(BinOp::Add, Type::U64, first, size);
        let stop = b.bin(BinOp::Min, Type::U64, stop, end);
        Chunk {
            tile,
            begin,
            offset,
            first,
            stop,
            whole: b.setp(Cmp::Eq, Type::U64, first_part, next_part),
            partial: b.bin(BinOp::Add, Type::U64, first_part, k),
        }
    }

    /// Stores a chunk's result `value` for `lane`: its partial, or the tile's output when the
    /// chunk is the whole tile (a tile of one chunk has no partial).
    fn store_chunk(
        &self,
        b: &mut KernelBuilder,
        c: &Chunk,
        lane: Option<Reg>,
        (value, ty): (Reg, crate::body::Ty),
    ) -> Result<(), GenError> {
        let mut split = b.if_begin(c.whole, true);
        let slot = self.slot(b, c.partial, lane);
        let at = b.elem_addr(self.t.partials, slot, 8);
        b.st(Space::Global, ptx_type(ty), at, value);
        b.if_else(&mut split);
        let out = (c.tile, lane);
        let checked = self.opts.checked;
        self.layout
            .store_output(b, self.body, self.params, out, (value, ty), checked)?;
        b.if_end(split);
        Ok(())
    }

    /// The partial slot of partial `p` and `lane`: `p × lanes + lane`.
    fn slot(&self, b: &mut KernelBuilder, p: Reg, lane: Option<Reg>) -> Reg {
        match (self.layout.lanes, lane) {
            (Some(l), Some(lane)) => {
                let row = b.bin(BinOp::Mul, Type::U64, p, l);
                b.bin(BinOp::Add, Type::U64, row, lane)
            }
            _ => p,
        }
    }

    /// One warp per list entry × lane: the entry's chunk partials folded in a fixed order, the
    /// tile's output stored by lane 0.
    fn fixup(&self, b: &mut KernelBuilder) -> Result<(), GenError> {
        let Some((ty, red)) = self.body.reduce else {
            return Ok(());
        };
        let pt = ptx_type(ty);
        let (warp, warps, lane_w) = grid_warps(b);
        let lane_w64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane_w);
        let first = b.setp(Cmp::Eq, Type::U32, lane_w, Operand::Imm(0));
        let entries = b.ld(Space::Global, Type::U64, self.t.count);
        let items = match self.layout.lanes {
            Some(l) => b.bin(BinOp::Mul, Type::U64, entries, l),
            None => entries,
        };
        let item = b.mov(Type::U64, warp);
        let scope = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, item, items);
        b.break_if(&scope, done, false);
        let (e, lane) = self.item_lane(b, item);
        let at = b.elem_addr(self.t.list, e, 8);
        let tile = b.ld(Space::Global, Type::U64, at);
        let at = self.t.start_at(b, e, 1);
        let c0 = b.ld(Space::Global, Type::U64, at);
        let next = self.t.start_at(b, e, 3);
        let c1 = b.ld(Space::Global, Type::U64, next);
        // A tile walked whole (no partials) was stored by the walk.
        let whole = b.setp(Cmp::Eq, Type::U64, c0, c1);
        let skip = b.label();
        b.bra_if(whole, false, skip);
        let acc = reduce_identity(b, ty, red)?;
        let c = b.bin(BinOp::Add, Type::U64, c0, lane_w64);
        let folds = b.loop_begin();
        let past = b.setp(Cmp::Ge, Type::U64, c, c1);
        b.break_if(&folds, past, false);
        let slot = self.slot(b, c, lane);
        let at = b.elem_addr(self.t.partials, slot, 8);
        let v = b.ld(Space::Global, pt, at);
        reduce_combine(b, ty, red, acc, v)?;
        b.bin_to(BinOp::Add, Type::U64, c, c, Operand::Imm(32));
        b.loop_end(folds);
        butterfly(b, acc, (ty, red))?;
        let store = b.if_begin(first, false);
        self.layout.store_output(
            b,
            self.body,
            self.params,
            (tile, lane),
            (acc, ty),
            self.opts.checked,
        )?;
        b.if_end(store);
        b.place(skip);
        b.bin_to(BinOp::Add, Type::U64, item, item, warps);
        b.loop_end(scope);
        Ok(())
    }
}

/// One chunk of the split, from [`Split::chunk`].
struct Chunk {
    /// The tile, and its first atom (for the body's rank).
    tile: Reg,
    begin: Reg,
    /// The chunk's first atom, `begin + offset`, and its atoms `first..stop`.
    offset: Reg,
    first: Reg,
    stop: Reg,
    /// The chunk is the whole tile: its result is the output, not a partial.
    whole: Reg,
    /// The chunk's partial index.
    partial: Reg,
}

/// Piece `piece` of `pieces` of chunk `c`, `⌈len / pieces⌉` atoms each (the chunk's own length,
/// so a short tile of one chunk still spreads over the block); empty where not `active` (a thread
/// past the block's pieces or the lane groups).
fn piece_range(
    b: &mut KernelBuilder,
    c: &Chunk,
    (piece, pieces): (Reg, Reg),
    active: Reg,
) -> (Reg, Reg) {
    let len = b.bin(BinOp::Sub, Type::U64, c.stop, c.first);
    let up = b.bin(BinOp::Add, Type::U64, len, pieces);
    let up = b.bin(BinOp::Sub, Type::U64, up, Operand::Imm(1));
    let per_piece = b.bin(BinOp::Div, Type::U64, up, pieces);
    let skip = b.bin(BinOp::Mul, Type::U64, piece, per_piece);
    let from = b.bin(BinOp::Add, Type::U64, c.first, skip);
    let from = b.bin(BinOp::Min, Type::U64, from, c.stop);
    let to = b.bin(BinOp::Add, Type::U64, from, per_piece);
    let to = b.bin(BinOp::Min, Type::U64, to, c.stop);
    (from, b.selp(Type::U64, to, from, active))
}

/// Inclusive scan of `x` (u64) over the warp (Hillis–Steele over shuffles); `lane` is `%laneid`.
fn warp_scan(b: &mut KernelBuilder, lane: Reg, x: Reg) -> Reg {
    warp_scan_of(b, lane, x, Type::U64)
}

/// [`warp_scan`] of an integer `x` of type `ty` (`.u32` or `.u64`).
fn warp_scan_of(b: &mut KernelBuilder, lane: Reg, x: Reg, ty: Type) -> Reg {
    let incl = b.mov(ty, x);
    let mut d = 1;
    while d < 32 {
        let y = shfl(b, ShflMode::Up, incl, ty, Operand::Imm(d));
        let has = b.setp(Cmp::Ge, Type::U32, lane, Operand::Imm(d));
        let sum = b.bin(BinOp::Add, ty, incl, y);
        let keep = b.selp(ty, sum, incl, has);
        b.mov_to(ty, incl, keep);
        d *= 2;
    }
    incl
}

/// `atom.global.add.u64 old, [addr], x`; returns `old`.
fn atom_add(b: &mut KernelBuilder, addr: Reg, x: Reg) -> Reg {
    b.atom_global(crate::ir::AtomOp::Add, Type::U64, (addr, 0), x)
}
