//! `consolidate` (grid level), `consolidate(block)` and `consolidate(warp)`: small tiles in place,
//! large tiles gathered into a consolidation buffer and processed by a child kernel.
//!
//! Li, Wu and Becchi, "Exploiting Dynamic Parallelism to Efficiently Support Irregular Nested
//! Loops on GPUs" (`seeds/004_3e27dba1a583670d.txt`), Fig. 1(d): a thread-mapped parent walks the
//! tiles below `lb_THRESH` itself and appends the others to a buffer (`buffer.add(i)`); a child
//! kernel (`child_kernel_cons(buffer)`) takes the whole buffer at once, so there is one nested
//! launch per consolidation scope instead of one per large tile (their Fig. 1(c)). §2 defines the
//! scopes: *warp-level* (the large tiles of one warp), *block-level* (of one block) and
//! *grid-level* (of the whole parent grid). The paper gives no value for `lb_THRESH`; the default
//! here, [`DEFAULT_THRESHOLD`] = 32 atoms, is the smallest tile that keeps every lane of the
//! child's one-warp-per-tile mapping busy. The threshold is chosen, in order of precedence, from
//! `Options::tuning.consolidate_threshold` (the attribute's `consolidate_threshold` key, for
//! every level), then the template's own ([`Consolidate::with_threshold`], for programs that
//! build the template directly; [`DEFAULT_THRESHOLD`] otherwise).
//!
//! One plan (the host fallback) and its device-launch twin are generated; the runtime picks per
//! launch:
//! - **Host fallback** (the plan): kernels `[parent, child]`. The child is launched by the host
//!   after the parent and reads the buffer's length from the counter the parent wrote; its grid
//!   follows the tile set's atoms (see "Huge tiles" below) and surplus warps exit. Runs everywhere,
//!   including the simulator. In this path the scopes differ only in how appends are
//!   aggregated: one atomic per warp (warp and grid level, warp-aggregated with a ballot) or per
//!   block (block level, through shared memory); the children of all scopes are the one host
//!   launch.
//! - **Device launch** (CUDA dynamic parallelism): the twin entries named by
//!   [`Plan::device_launch_entry`] (`…_dl`). The warp leader (warp level), thread 0 after a
//!   barrier (block level) or thread 0 of the last block to finish (grid level) launches the
//!   child over its scope's range of the buffer with `cudaGetParameterBuffer` /
//!   `cudaLaunchDevice`. If the device runtime refuses (no parameter buffer, launch error), the
//!   launching thread walks the range itself, so no tile is lost. The module then needs linking
//!   against libcudadevrt (see `lb-runtime`); `tests/consolidate.rs` links it with nvlink for
//!   sm_75/80/90 when `LB_CUDADEVRT` names the library.
//!
//! The counters (buffer length, finished blocks) are `TempRole::Counters`: the last block to
//! finish the kernel that last reads them (the device-launch parent, or the host-launched child)
//! leaves both zero, so a launch needs no memset before it.
//!
//! The buffer holds tile *positions* (one per tile, whatever the lane count): a large tile is
//! appended by its lane-0 item, and the child walks all its lanes.
//!
//! Child mapping: one warp per buffered tile; lane `l` takes atoms `begin + l, begin + l + 32, …`
//! in order, keeping a partial, and a fixed butterfly combines the 32 partials; lane 0 stores.
//! With `lanes`, the warp's threads take the tile's lanes instead (1, 2 or 4 each, picked in the
//! kernel by the lane count) and walk its atoms in order (`child_lanes`); the parent still
//! takes small tiles as (tile, lane) items.
//! Determinism: a tile's result depends only on the tile (small: the sequential loop, bitwise
//! the CPU reference; large: the fixed strided-then-butterfly order), never on which warp or
//! launch took it, so two launches agree bitwise. No float atomics.
//!
//! Huge tiles (at least [`crate::primitives::huge::threshold`] atoms) skip the buffer on the host
//! path: the parent leaves them to the huge-tile split, whose four kernels run after the child,
//! so no child warp walks a giant tile alone. The host-launched child's grid follows the work
//! (Li, Wu & Becchi §2 size the child by the consolidated work): one warp per `32 × 8` atoms of
//! the tile set, the upper bound of the buffered atoms the host knows before the parent has run,
//! instead of the parent's one-thread-per-tile grid. The parent runs on the split's first-kernel
//! grid (tiles plus atoms), which sizes the split's partials. The device-launch twins keep the
//! one-warp-per-tile children over the scope's range, huge tiles included (not split yet).

use std::borrow::Cow;

use super::{common_temps, Schedule, ScheduleTemplate};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{emit_body, reduce_combine, reduce_identity, AtomContext, KernelParams};
use crate::ir::{
    Address, AtomOp, BinOp, Cmp, DeviceFunc, Kernel, Label, LdCache, Op, Operand, Param,
    ParamDeclTy, Reg, RegClass, Rounding, ShflMode, Space, Special, Type, UnOp, VoteMode,
};
use crate::plan::{FrontierGrid, Grid, KernelPlan, OffsetWidth, Plan, Temp, TempCount, TempRole};
use crate::primitives::huge;
use crate::primitives::layout::{per_lane_blocking, Blocking, SPLIT_LANE_BLOCKING};
use crate::primitives::walker::tile_lanes;
use crate::primitives::warp::{butterfly, grid_warps, shfl};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// The scope whose large tiles share one buffer range and one child launch (paper §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Warp,
    Block,
    Grid,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Warp, Level::Block, Level::Grid];

    /// The schedule of this level.
    pub fn schedule(self) -> Schedule {
        match self {
            Level::Warp => Schedule::ConsolidateWarp,
            Level::Block => Schedule::ConsolidateBlock,
            Level::Grid => Schedule::Consolidate,
        }
    }

    /// The word in entry names (`spmv_consolidate_warp`).
    pub fn word(self) -> &'static str {
        match self {
            Level::Warp => "warp",
            Level::Block => "block",
            Level::Grid => "grid",
        }
    }
}

/// Tiles with at least this many atoms go to the child kernel (see the module docs).
pub const DEFAULT_THRESHOLD: u64 = 32;

/// Name of the temporary holding the buffer's length (word 0) and, for grid-level device
/// launches, the number of parent blocks that finished (word 1).
pub const COUNT_TEMP: &str = "consolidate_count";
/// Name of the consolidation buffer: u64 tile positions.
pub const BUFFER_TEMP: &str = "consolidate_buffer";

const WARP: u32 = 32;
/// The host-launched child's grid: one warp per `32 · CHILD_ITEMS` atoms of the tile set (per
/// lane), an upper bound of the buffered atoms that the host can size before the parent has run
/// (Li, Wu & Becchi §2 size the child by the consolidated work, not one thread block per tile).
/// A buffered tile has at least `threshold` atoms, so at the default threshold of 32 a warp
/// takes at most `CHILD_ITEMS` buffered tiles, and fewer when the buffered atoms are fewer than
/// the tile set's; surplus warps exit at once.
const CHILD_ITEMS: u32 = 8;
const CHILD_GRID: Grid = Grid::CoverWork {
    per_thread: CHILD_ITEMS,
    count_tiles: false,
    frontier: FrontierGrid::No,
};
/// Largest child grid a device-side launch asks for; the child's warps stride over the rest.
const MAX_CHILD_GRID: i64 = 65_535;

/// The `consolidate` template at one level and threshold; `Options::tuning` overrides the
/// threshold (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Consolidate {
    level: Level,
    threshold: u64,
}

static TEMPLATES: [Consolidate; 3] = [
    Consolidate::new(Level::Warp),
    Consolidate::new(Level::Block),
    Consolidate::new(Level::Grid),
];

/// The template of `consolidate` at `level` with the default threshold.
pub(super) fn template(level: Level) -> &'static Consolidate {
    match level {
        Level::Warp => &TEMPLATES[0],
        Level::Block => &TEMPLATES[1],
        Level::Grid => &TEMPLATES[2],
    }
}

/// `consolidate(warp)`, `consolidate(block)` and `consolidate(grid)` (the last is also plain
/// `consolidate`, the name [`Schedule::name`] gives it).
pub(super) fn from_name(name: &str) -> Option<Schedule> {
    let level = name.strip_prefix("consolidate(")?.strip_suffix(')')?;
    Level::ALL
        .into_iter()
        .find(|l| l.word() == level)
        .map(Level::schedule)
}

impl Consolidate {
    /// `level` with [`DEFAULT_THRESHOLD`].
    pub const fn new(level: Level) -> Consolidate {
        Consolidate {
            level,
            threshold: DEFAULT_THRESHOLD,
        }
    }

    /// `level` with tiles of at least `threshold` atoms consolidated (0: every tile).
    pub const fn with_threshold(level: Level, threshold: u64) -> Consolidate {
        Consolidate { level, threshold }
    }

    fn parent_entry(&self, body: &Body) -> String {
        format!("{}_consolidate_{}", body.name, self.level.word())
    }
}

impl ScheduleTemplate for Consolidate {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let parent = self.parent_entry(body);
        let mut temps = common_temps(opts);
        temps.push(Temp {
            name: Cow::Borrowed(COUNT_TEMP),
            elem_bytes: 8,
            count: TempCount::Fixed(2),
            zero: false,
            role: TempRole::Counters,
        });
        temps.push(Temp {
            name: Cow::Borrowed(BUFFER_TEMP),
            elem_bytes: 8,
            // One slot per tile; the extra one keeps the allocation non-empty without tiles.
            count: TempCount::PerTile {
                per_tile: 1,
                extra: 1,
            },
            zero: false,
            role: TempRole::Scratch,
        });
        // The huge-tile split's list is not cached: its kernels come after the parent, which
        // must lead the plan (its device-launch twin is named after the first entry).
        temps.extend(huge::temps(opts, None, false));
        let kernel = |entry: String, grid| KernelPlan {
            entry: Cow::Owned(entry),
            block: opts.block,
            grid,
            dynamic_shared: 0,
            min_tile_atoms: None,
            min_grid: None,
            lanes: None,
            track: 0,
        };
        // The parent runs on the split's first-kernel grid, which sizes its chunk partials.
        let mut kernels = vec![
            kernel(parent.clone(), huge::first_grid()),
            kernel(format!("{parent}_child"), CHILD_GRID),
        ];
        kernels.extend(huge::front_kernels(&parent, opts, false));
        kernels.extend(huge::back_kernels(&parent, body, opts, false));
        Ok(Plan {
            schedule: Cow::Borrowed(self.level.schedule().name()),
            kernels: Cow::Owned(kernels),
            temps: Cow::Owned(temps),
            index_limit: None,
            offsets: OffsetWidth::U64,
            select: None,
        })
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let [parent, child, split @ ..] = &plan.kernels[..] else {
            return Err(GenError::Unsupported(
                "a consolidate plan has a parent and a child kernel".into(),
            ));
        };
        let dl_parent = plan.device_launch_entry();
        let dl_child = format!("{}_dl", child.entry);
        // The device-launched child comes before its parent: PTX resolves the parent's
        // `mov.u64 %rd, child;` only against entries declared earlier.
        let mut out = vec![
            self.parent(body, opts, plan, &parent.entry, None)?,
            self.child(body, opts, plan, &child.entry, false)?,
            self.child(body, opts, plan, &dl_child, true)?,
            self.parent(body, opts, plan, &dl_parent, Some(&dl_child))?,
        ];
        for kp in split {
            let built = huge::build(body, opts, plan, kp).ok_or_else(|| {
                GenError::Unsupported(format!("`{}` is not a consolidate kernel", kp.entry))
            })?;
            out.push(built?);
        }
        Ok(out)
    }
}

/// Registers every kernel of the schedule shares.
struct Common {
    params: KernelParams,
    layout: Layout,
    count_ptr: Reg,
    buffer: Reg,
}

fn common(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    plan: &Plan,
) -> Result<Common, GenError> {
    let params = KernelParams::declare(b, body, plan)?;
    let layout = Layout::new(b, body, opts, &params)?;
    let temp = |name: &str| {
        plan.temps
            .iter()
            .position(|t| t.name == name)
            .map(|i| params.temps[i])
            .ok_or_else(|| GenError::Unsupported(format!("the plan has no `{name}` temporary")))
    };
    let count_ptr = temp(COUNT_TEMP)?;
    let buffer = temp(BUFFER_TEMP)?;
    Ok(Common {
        params,
        layout,
        count_ptr,
        buffer,
    })
}

/// The counters' reset (`TempRole::Counters`): after a barrier, thread 0 of each block counts
/// its block as finished in word 1; the last block to finish, when every append of the launch
/// is in word 0 and every block has read it, takes word 0 (`on_last` gets it) and leaves both
/// words zero for the next launch, which then needs no memset.
fn last_block_resets(
    b: &mut KernelBuilder,
    c: &Common,
    on_last: impl FnOnce(&mut KernelBuilder, Reg) -> Result<(), GenError>,
) -> Result<(), GenError> {
    let tid = b.special(Special::TidX);
    let nctaid = b.special(Special::NctaidX);
    let is_t0 = b.setp(Cmp::Eq, Type::U32, tid, Operand::Imm(0));
    b.emit(Op::BarSync);
    let t0 = b.if_begin(is_t0, false);
    b.emit(Op::MemBar);
    let one = b.mov(Type::U64, Operand::Imm(1));
    let finished = atomic(b, AtomOp::Add, Type::U64, c.count_ptr, 8, one);
    let blocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    let last = b.bin(BinOp::Sub, Type::U64, blocks, Operand::Imm(1));
    let is_last = b.setp(Cmp::Eq, Type::U64, finished, last);
    let last_scope = b.if_begin(is_last, false);
    b.emit(Op::MemBar);
    // Atomics: the other blocks' appends are in L2, not in this SM's L1.
    let zero = b.mov(Type::U64, Operand::Imm(0));
    let total = atomic(b, AtomOp::Exch, Type::B64, c.count_ptr, 0, zero);
    atomic(b, AtomOp::Exch, Type::B64, c.count_ptr, 8, zero);
    on_last(b, total)?;
    b.if_end(last_scope);
    b.if_end(t0);
    Ok(())
}

/// `atom.global.<op>.<ty> old, [base + offset], value`; returns `old`.
fn atomic(b: &mut KernelBuilder, op: AtomOp, ty: Type, base: Reg, offset: i64, value: Reg) -> Reg {
    b.atom_global(op, ty, (base, offset), value)
}

/// `lane` when the body or the layout has lanes (0 for a body that reads its lane without
/// `lanes`), else `None`.
fn lane_for_body(b: &mut KernelBuilder, body: &Body, lane: Option<Reg>) -> Option<Reg> {
    match lane {
        Some(l) => Some(l),
        None if body.roles.contains(&IndexRole::Lane) => Some(b.mov(Type::U64, Operand::Imm(0))),
        None => None,
    }
}

/// Walks the atoms `first, first + step, …` below `end` of `tile`, folding the body's
/// contributions into a fresh accumulator (returned) when it reduces.
#[allow(clippy::too_many_arguments)]
fn walk(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    c: &Common,
    tile: Reg,
    (begin, end): (Reg, Reg),
    first: Reg,
    step: i64,
    lane: Option<Reg>,
) -> Result<Option<Reg>, GenError> {
    let acc = body
        .reduce
        .map(|(ty, r)| reduce_identity(b, ty, r))
        .transpose()?;
    let lane = lane_for_body(b, body, lane);
    let atom = b.mov(Type::U64, first);
    let atoms = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, atom, end);
    b.break_if(&atoms, done, false);
    let rank = body
        .roles
        .contains(&IndexRole::Rank)
        .then(|| b.bin(BinOp::Sub, Type::U64, atom, begin));
    let ctx = AtomContext {
        tile: Some(tile),
        atom: Some(atom),
        lane,
        rank,
        ..AtomContext::default()
    };
    let contribution = emit_body(b, body, &c.params, &ctx, opts.checked)?;
    if let (Some(acc), Some(x), Some((ty, r))) = (acc, contribution, body.reduce) {
        reduce_combine(b, ty, r, acc, x)?;
    }
    b.bin_to(BinOp::Add, Type::U64, atom, atom, Operand::Imm(step));
    b.loop_end(atoms);
    Ok(acc)
}

/// One thread processes `(tile, lane)` alone, in atom order, and stores its result.
fn thread_tile(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    c: &Common,
    tile: Reg,
    range: (Reg, Reg),
    lane: Option<Reg>,
) -> Result<(), GenError> {
    let acc = walk(b, body, opts, c, tile, range, range.0, 1, lane)?;
    if let (Some(acc), Some((ty, _))) = (acc, body.reduce) {
        c.layout
            .store_output(b, body, &c.params, (tile, lane), (acc, ty), opts.checked)?;
    }
    Ok(())
}

/// The child's walk with lanes: one warp per buffered tile, its threads side by side over the
/// tile's lane groups (`g, g + 32, ..`, `per_thread` lanes each) instead of its atoms, each
/// walking the atoms in order for its lanes ([`tile_lanes`]): reads of B's rows are coalesced
/// and each atom's loads serve all of a thread's lanes (GE-SpMM's warp per row, Huang et al.,
/// SC'20). A tile's result is the sequential loop's per lane, whichever warp takes it.
fn child_lanes(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    c: &Common,
    (first, count): (Reg, Reg),
    per_thread: u32,
) -> Result<(), GenError> {
    let (warp, warps, laneid) = grid_warps(b);
    let lane64 = b.cvt(Rounding::None, Type::U64, Type::U32, laneid);
    let groups = c.layout.lane_groups(b, per_thread);
    let i = b.mov(Type::U64, warp);
    let tiles = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, i, count);
    b.break_if(&tiles, done, false);
    let next = b.label();
    let index = b.bin(BinOp::Add, Type::U64, first, i);
    let (tile, range) = buffered_tile(b, c, index, next);
    let group = b.mov(Type::U64, lane64);
    let own = b.loop_begin();
    let past = b.setp(Cmp::Ge, Type::U64, group, groups);
    b.break_if(&own, past, false);
    let set = c
        .layout
        .lane_set(b, body, (group, groups), Blocking::strided(per_thread));
    tile_lanes(b, body, opts, (&c.params, &c.layout), tile, range, &set)?;
    b.bin_to(
        BinOp::Add,
        Type::U64,
        group,
        group,
        Operand::Imm(WARP.into()),
    );
    b.loop_end(own);
    b.place(next);
    b.bin_to(BinOp::Add, Type::U64, i, i, warps);
    b.loop_end(tiles);
    Ok(())
}

/// Opens `for lane in 0..lanes` when the layout has lanes; `None` otherwise (one pass).
fn lanes_begin(b: &mut KernelBuilder, c: &Common) -> Option<(Reg, crate::builder::LoopScope)> {
    let lanes = c.layout.lanes?;
    let lane = b.mov(Type::U64, Operand::Imm(0));
    let scope = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, lane, lanes);
    b.break_if(&scope, done, false);
    Some((lane, scope))
}

fn lanes_end(b: &mut KernelBuilder, open: Option<(Reg, crate::builder::LoopScope)>) {
    if let Some((lane, scope)) = open {
        b.bin_to(BinOp::Add, Type::U64, lane, lane, Operand::Imm(1));
        b.loop_end(scope);
    }
}

/// The position stored at `buffer[index]`, its tile and atom range.
fn buffered_tile(b: &mut KernelBuilder, c: &Common, index: Reg, skip: Label) -> (Reg, (Reg, Reg)) {
    let addr = b.elem_addr(c.buffer, index, 8);
    let position = b.ld(Space::Global, Type::U64, addr);
    // The parent validated every buffered position under `checked` already.
    let tile = c.layout.tile(b, &c.params, position, false, skip);
    let range = c.layout.atoms(b, tile);
    (tile, range)
}

impl Consolidate {
    /// The child: one warp per buffered tile. `device`: launched from the device over the range
    /// `lb_cons_first .. + lb_cons_count` of the buffer (two extra params); otherwise launched by
    /// the host over the whole buffer, whose length the parent left in the counter.
    fn child(
        &self,
        body: &Body,
        opts: &Options,
        plan: &Plan,
        entry: &str,
        device: bool,
    ) -> Result<Kernel, GenError> {
        let mut b = KernelBuilder::new(entry);
        let c = common(&mut b, body, opts, plan)?;
        let (first, count) = if device {
            (
                b.load_param("lb_cons_first", Type::U64),
                b.load_param("lb_cons_count", Type::U64),
            )
        } else {
            let count = b.ld(Space::Global, Type::U64, c.count_ptr);
            (b.mov(Type::U64, Operand::Imm(0)), count)
        };
        if let Some(lanes) = c.layout.lanes {
            per_lane_blocking(&mut b, lanes, &SPLIT_LANE_BLOCKING, |b, r| {
                child_lanes(b, body, opts, &c, (first, count), r)
            })?;
            if !device {
                last_block_resets(&mut b, &c, |_, _| Ok(()))?;
            }
            return Ok(b.finish());
        }
        let (warp, warps, laneid) = grid_warps(&mut b);
        let lane64 = b.cvt(Rounding::None, Type::U64, Type::U32, laneid);
        let is_first = b.setp(Cmp::Eq, Type::U32, laneid, Operand::Imm(0));

        // Warp-uniform loop: every lane of a warp takes the same buffered tile.
        let i = b.mov(Type::U64, warp);
        let tiles = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, i, count);
        b.break_if(&tiles, done, false);
        let next = b.label();
        let index = b.bin(BinOp::Add, Type::U64, first, i);
        let (tile, range) = buffered_tile(&mut b, &c, index, next);
        let lanes = lanes_begin(&mut b, &c);
        let lane = lanes.map(|(l, _)| l);
        let start = b.bin(BinOp::Add, Type::U64, range.0, lane64);
        let part = walk(
            &mut b,
            body,
            opts,
            &c,
            tile,
            range,
            start,
            i64::from(WARP),
            lane,
        )?;
        if let (Some(part), Some((ty, red))) = (part, body.reduce) {
            butterfly(&mut b, part, (ty, red))?;
            let store = b.if_begin(is_first, false);
            c.layout.store_output(
                &mut b,
                body,
                &c.params,
                (tile, lane),
                (part, ty),
                opts.checked,
            )?;
            b.if_end(store);
        }
        lanes_end(&mut b, lanes);
        b.place(next);
        b.bin_to(BinOp::Add, Type::U64, i, i, warps);
        b.loop_end(tiles);
        if !device {
            last_block_resets(&mut b, &c, |_, _| Ok(()))?;
        }
        Ok(b.finish())
    }

    /// The parent: a block-uniform loop over batches of `ntid` items (so barriers and full-warp
    /// collectives are reached by every thread); small tiles in place, large ones appended.
    /// `device_child`: the entry to launch from the device per scope; `None`: the host launches
    /// the child after this kernel.
    fn parent(
        &self,
        body: &Body,
        opts: &Options,
        plan: &Plan,
        entry: &str,
        device_child: Option<&str>,
    ) -> Result<Kernel, GenError> {
        let own_params = if device_child.is_some() {
            let mut probe = KernelBuilder::new(entry);
            KernelParams::declare(&mut probe, body, plan)?;
            probe.finish().params
        } else {
            Vec::new()
        };
        let mut b = KernelBuilder::new(entry);
        let c = common(&mut b, body, opts, plan)?;
        let tid = b.special(Special::TidX);
        let ntid = b.special(Special::NtidX);
        let ctaid = b.special(Special::CtaidX);
        let nctaid = b.special(Special::NctaidX);
        let laneid = b.special(Special::LaneId);
        let is_t0 = b.setp(Cmp::Eq, Type::U32, tid, Operand::Imm(0));
        let tid64 = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let batch = b.bin(BinOp::MulWide, Type::U32, ctaid, ntid);
        let stride = b.bin(BinOp::MulWide, Type::U32, nctaid, ntid);
        if self.level == Level::Block {
            // Word 0: the block's count of appends (u32); word 1: its range's start (u64).
            b.shared("lb_cons", 8, 16);
        }
        let launch = device_child.map(|child| Launch {
            child,
            params: &own_params,
            block: opts.block,
        });

        let regs = BatchRegs {
            batch,
            stride,
            tid64,
            laneid,
            is_t0,
        };
        match c.layout.lanes {
            Some(lanes) => per_lane_blocking(&mut b, lanes, &SPLIT_LANE_BLOCKING, |b, r| {
                self.batches(b, body, opts, &c, regs, (device_child, launch), Some(r))
            })?,
            None => self.batches(&mut b, body, opts, &c, regs, (device_child, launch), None)?,
        }

        match (self.level, launch) {
            // The last block to finish launches one child over the whole buffer.
            (Level::Grid, Some(launch)) => last_block_resets(&mut b, &c, |b, total| {
                let zero = b.mov(Type::U64, Operand::Imm(0));
                launch.emit(b, body, opts, &c, zero, total)
            })?,
            // The warps or blocks launched their own children; the host-launched child resets
            // the counters on the host path.
            (_, Some(_)) => last_block_resets(&mut b, &c, |_, _| Ok(()))?,
            (_, None) => {}
        }
        Ok(b.finish())
    }

    /// The parent's block-uniform loop over batches of `ntid` items: small tiles in place, large
    /// ones appended (by the item of lane or lane group 0). With `per_thread: None` an item is a
    /// tile (and a lane, with `lanes`); with `Some(R)` it is a tile and a lane group of R lanes
    /// ([`crate::primitives::layout::LaneSet`]), consecutive items taking consecutive lanes, and
    /// a small tile is walked once for its R lanes ([`tile_lanes`]).
    #[allow(clippy::too_many_arguments)]
    fn batches(
        &self,
        b: &mut KernelBuilder,
        body: &Body,
        opts: &Options,
        c: &Common,
        regs: BatchRegs,
        (device_child, launch): (Option<&str>, Option<Launch<'_>>),
        per_thread: Option<u32>,
    ) -> Result<(), GenError> {
        let BatchRegs {
            batch,
            stride,
            tid64,
            laneid,
            is_t0,
        } = regs;
        // With lanes, items are (tile, lane group) pairs: `per_thread` lanes per item.
        let blocking = per_thread.map(|r| {
            let groups = c.layout.lane_groups(b, r);
            let items = b.bin(BinOp::Mul, Type::U64, c.layout.tiles, groups);
            (r, groups, items)
        });
        let items = blocking.map_or(c.layout.items, |(_, _, items)| items);
        let batches = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, batch, items);
        b.break_if(&batches, done, false);
        let item = b.bin(BinOp::Add, Type::U64, batch, tid64);
        let position = b.reg(RegClass::B64);
        // `append` is false unless this item is the lane-0 item of a large tile.
        let append = b.setp(Cmp::Lt, Type::U64, item, Operand::Imm(0));
        let skip = b.label();
        let outside = b.setp(Cmp::Ge, Type::U64, item, items);
        b.bra_if(outside, false, skip);
        // The item's position and its lane (or lane group: `None` without lanes).
        let (at, lane) = match blocking {
            Some((_, groups, _)) => {
                let at = b.bin(BinOp::Div, Type::U64, item, groups);
                let whole = b.bin(BinOp::Mul, Type::U64, at, groups);
                (at, Some(b.bin(BinOp::Sub, Type::U64, item, whole)))
            }
            None => {
                let work = c.layout.work_item(b, item);
                (work.position, work.lane)
            }
        };
        b.mov_to(Type::U64, position, at);
        let tile = c.layout.tile(b, &c.params, at, opts.checked, skip);
        let range = c.layout.atoms(b, tile);
        let n = b.bin(BinOp::Sub, Type::U64, range.1, range.0);
        if device_child.is_none() {
            // The host path leaves huge tiles to the split that runs after the child. (The
            // device path has no such kernels: its children take every large tile.)
            let from = huge::threshold(opts.block, c.layout.lanes.is_some());
            let split = huge::is_huge(b, n, from);
            b.bra_if(split, false, skip);
        }
        let threshold = opts.tuning.consolidate_threshold.unwrap_or(self.threshold);
        b.emit(Op::Setp {
            cmp: Cmp::Ge,
            ty: Type::U64,
            dst: append,
            a: n.into(),
            b: Operand::Imm(threshold as i64),
        });
        let mut small = b.if_begin(append, true);
        match (blocking, lane) {
            (Some((r, groups, _)), Some(group)) => {
                let set = c
                    .layout
                    .lane_set(b, body, (group, groups), Blocking::strided(r));
                tile_lanes(b, body, opts, (&c.params, &c.layout), tile, range, &set)?;
            }
            _ => thread_tile(b, body, opts, c, tile, range, lane)?,
        }
        b.if_else(&mut small);
        if let Some(lane) = lane {
            // Only the lane-0 (group-0) item appends; the child walks every lane of the tile.
            let other = b.setp(Cmp::Ne, Type::U64, lane, Operand::Imm(0));
            b.emit_guarded(
                other,
                false,
                Op::Setp {
                    cmp: Cmp::Lt,
                    ty: Type::U64,
                    dst: append,
                    a: item.into(),
                    b: Operand::Imm(0),
                },
            );
        }
        b.if_end(small);
        b.place(skip);

        match self.level {
            Level::Warp | Level::Grid => {
                let level = self.level;
                let launch = launch.filter(|_| level == Level::Warp);
                warp_append(b, body, opts, c, (append, position, laneid), launch)?;
            }
            Level::Block => block_append(b, body, opts, c, (append, position, is_t0), launch)?,
        }
        b.bin_to(BinOp::Add, Type::U64, batch, batch, stride);
        b.loop_end(batches);
        Ok(())
    }
}

/// The registers of the parent's batch loop.
#[derive(Clone, Copy)]
struct BatchRegs {
    /// The batch's first item (u64, advanced in place).
    batch: Reg,
    /// Items per grid-wide batch step (u64).
    stride: Reg,
    tid64: Reg,
    laneid: Reg,
    is_t0: Reg,
}

/// Warp-aggregated append: one atomic per warp reserves the warp's range of the buffer. With
/// `launch`, the warp's lowest appending lane launches the child over that range.
fn warp_append(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    c: &Common,
    (append, position, laneid): (Reg, Reg, Reg),
    launch: Option<Launch<'_>>,
) -> Result<(), GenError> {
    let ballot = b.reg(RegClass::B32);
    b.emit(Op::Vote {
        mode: VoteMode::Ballot,
        dst: ballot,
        a: append.into(),
        mask: Operand::Imm(-1),
    });
    let none = b.setp(Cmp::Eq, Type::U32, ballot, Operand::Imm(0));
    let some = b.if_begin(none, true);
    let total = b.un(UnOp::Popc, Type::B32, ballot);
    // This lane's rank among the appending lanes, and the lowest appending lane (the leader).
    let bit = b.bin(BinOp::Shl, Type::B32, Operand::Imm(1), laneid);
    let below = b.bin(BinOp::Sub, Type::U32, bit, Operand::Imm(1));
    let before = b.bin(BinOp::And, Type::B32, ballot, below);
    let rank = b.un(UnOp::Popc, Type::B32, before);
    let neg = b.un(UnOp::Neg, Type::S32, ballot);
    let lowest = b.bin(BinOp::And, Type::B32, ballot, neg);
    let under = b.bin(BinOp::Sub, Type::U32, lowest, Operand::Imm(1));
    let leader = b.un(UnOp::Popc, Type::B32, under);
    let is_leader = b.setp(Cmp::Eq, Type::U32, laneid, leader);
    let total64 = b.cvt(Rounding::None, Type::U64, Type::U32, total);
    let start = b.mov(Type::U64, Operand::Imm(0));
    b.emit_guarded(
        is_leader,
        false,
        Op::Atom {
            space: Space::Global,
            op: AtomOp::Add,
            ty: Type::U64,
            dst: start,
            addr: Address::Reg {
                base: c.count_ptr,
                offset: 0,
            },
            b: total64.into(),
            c: None,
        },
    );
    let start = shfl(b, ShflMode::Idx, start, Type::U64, leader.into());
    store_slot(b, c, (append, position), start, rank);
    if let Some(launch) = launch {
        // Each appending lane publishes its slot device-wide, then the warp synchronizes, so
        // the child the leader launches sees every slot of the range.
        b.emit_guarded(append, false, Op::MemBar);
        let synced = b.reg(RegClass::Pred);
        b.emit(Op::Vote {
            mode: VoteMode::Any,
            dst: synced,
            a: append.into(),
            mask: Operand::Imm(-1),
        });
        let lead = b.if_begin(is_leader, false);
        launch.emit(b, body, opts, c, start, total64)?;
        b.if_end(lead);
    }
    b.if_end(some);
    Ok(())
}

/// Block-aggregated append through shared memory: one atomic per block reserves the block's
/// range. With `launch`, thread 0 launches the child over it after a barrier.
fn block_append(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    c: &Common,
    (append, position, is_t0): (Reg, Reg, Reg),
    launch: Option<Launch<'_>>,
) -> Result<(), GenError> {
    let smem = b.mov(Type::U64, Operand::Symbol("lb_cons".into()));
    let shared = |offset| Address::Reg { base: smem, offset };
    let zero = b.mov(Type::U32, Operand::Imm(0));
    b.emit_guarded(
        is_t0,
        false,
        Op::St {
            space: Space::Shared,
            ty: Type::U32,
            addr: shared(0),
            src: zero.into(),
        },
    );
    b.emit(Op::BarSync);
    let local = b.mov(Type::U32, Operand::Imm(0));
    let one = b.mov(Type::U32, Operand::Imm(1));
    b.emit_guarded(
        append,
        false,
        Op::Atom {
            space: Space::Shared,
            op: AtomOp::Add,
            ty: Type::U32,
            dst: local,
            addr: shared(0),
            b: one.into(),
            c: None,
        },
    );
    b.emit(Op::BarSync);
    let total = b.reg(RegClass::B32);
    b.emit(Op::Ld {
        space: Space::Shared,
        ty: Type::U32,
        dst: total,
        addr: shared(0),
        cache: LdCache::Default,
    });
    let total64 = b.cvt(Rounding::None, Type::U64, Type::U32, total);
    let reserve = b.setp(Cmp::Ne, Type::U32, total, Operand::Imm(0));
    b.emit_guarded(
        is_t0,
        true,
        Op::Setp {
            cmp: Cmp::Lt,
            ty: Type::U32,
            dst: reserve,
            a: total.into(),
            b: Operand::Imm(0),
        },
    );
    let reserved = b.if_begin(reserve, false);
    let start = b.atom_global(AtomOp::Add, Type::U64, (c.count_ptr, 0), total64);
    b.emit(Op::St {
        space: Space::Shared,
        ty: Type::U64,
        addr: shared(8),
        src: start.into(),
    });
    b.if_end(reserved);
    b.emit(Op::BarSync);
    let start = b.reg(RegClass::B64);
    b.emit(Op::Ld {
        space: Space::Shared,
        ty: Type::U64,
        dst: start,
        addr: shared(8),
        cache: LdCache::Default,
    });
    store_slot(b, c, (append, position), start, local);
    if let Some(launch) = launch {
        // The barrier makes the block's slots visible to thread 0, and so to its child.
        b.emit(Op::BarSync);
        let lead = b.if_begin(reserve, false);
        launch.emit(b, body, opts, c, start, total64)?;
        b.if_end(lead);
    }
    // The next batch's first two barriers order its writes of the shared words after every
    // thread's reads above.
    Ok(())
}

/// Where `append` holds, stores `position` in buffer slot `start + index` (`index` a 32-bit
/// offset into the range the append reserved).
fn store_slot(
    b: &mut KernelBuilder,
    c: &Common,
    (append, position): (Reg, Reg),
    start: Reg,
    index: Reg,
) {
    let index64 = b.cvt(Rounding::None, Type::U64, Type::U32, index);
    let slot = b.bin(BinOp::Add, Type::U64, start, index64);
    let addr = b.elem_addr(c.buffer, slot, 8);
    b.st_if(append, Space::Global, Type::U64, addr, position);
}

/// A device-side launch of `child` (dynamic parallelism) from one thread.
#[derive(Clone, Copy)]
struct Launch<'a> {
    child: &'a str,
    /// The parent's own `.param` list: the child takes the same values, then its range.
    params: &'a [Param],
    block: u32,
}

/// A scalar `.param` variable of the current call scope.
fn param_var(b: &mut KernelBuilder, name: &str, ty: Type) {
    b.emit(Op::ParamDecl {
        name: name.into(),
        ty: ParamDeclTy::Scalar(ty),
    });
}

fn st_param(b: &mut KernelBuilder, name: &str, offset: i64, ty: Type, src: Reg) {
    b.emit(Op::St {
        space: Space::Param,
        ty,
        addr: Address::Symbol {
            name: name.into(),
            offset,
        },
        src: src.into(),
    });
}

impl Launch<'_> {
    /// Launches the child over `count` buffered tiles from `first` (u64 registers); with no
    /// tiles nothing is launched. If the device runtime gives no parameter buffer or refuses the
    /// launch, this thread walks the range itself, so the result is the same either way.
    fn emit(
        &self,
        b: &mut KernelBuilder,
        body: &Body,
        opts: &Options,
        c: &Common,
        first: Reg,
        count: Reg,
    ) -> Result<(), GenError> {
        let empty = b.setp(Cmp::Eq, Type::U64, count, Operand::Imm(0));
        let done = b.label();
        b.bra_if(empty, false, done);

        // The child's parameter buffer: the parent's params at their natural alignment, then
        // `lb_cons_first` and `lb_cons_count`, as in the child's `.param` list.
        let mut layout = Vec::with_capacity(self.params.len());
        let mut size = 0i64;
        for p in self.params {
            let bytes = i64::from(p.ty.size());
            size = (size + bytes - 1) / bytes * bytes;
            layout.push((p, size));
            size += bytes;
        }
        let range_at = (size + 7) / 8 * 8;
        size = range_at + 16;

        let align = b.mov(Type::U64, Operand::Imm(8));
        let bytes = b.mov(Type::U64, Operand::Imm(size));
        let buffer = b.reg(RegClass::B64);
        b.emit(Op::ScopeBegin);
        param_var(b, "lb_pb_align", Type::B64);
        param_var(b, "lb_pb_size", Type::B64);
        param_var(b, "lb_pb_ret", Type::B64);
        st_param(b, "lb_pb_align", 0, Type::B64, align);
        st_param(b, "lb_pb_size", 0, Type::B64, bytes);
        b.emit(Op::Call {
            ret: Some("lb_pb_ret".into()),
            func: DeviceFunc::GetParameterBuffer,
            args: vec!["lb_pb_align".into(), "lb_pb_size".into()],
        });
        b.emit(Op::Ld {
            space: Space::Param,
            ty: Type::B64,
            dst: buffer,
            addr: Address::Symbol {
                name: "lb_pb_ret".into(),
                offset: 0,
            },
            cache: LdCache::Default,
        });
        b.emit(Op::ScopeEnd);
        let walk_here = b.label();
        let no_buffer = b.setp(Cmp::Eq, Type::U64, buffer, Operand::Imm(0));
        b.bra_if(no_buffer, false, walk_here);

        for (p, offset) in layout {
            let v = b.reg_for(p.ty);
            b.emit(Op::Ld {
                space: Space::Param,
                ty: p.ty,
                dst: v,
                addr: Address::Symbol {
                    name: p.name.clone(),
                    offset: 0,
                },
                cache: LdCache::Default,
            });
            b.emit(Op::St {
                space: Space::Global,
                ty: p.ty,
                addr: Address::Reg {
                    base: buffer,
                    offset,
                },
                src: v.into(),
            });
        }
        for (value, offset) in [(first, range_at), (count, range_at + 8)] {
            b.emit(Op::St {
                space: Space::Global,
                ty: Type::U64,
                addr: Address::Reg {
                    base: buffer,
                    offset,
                },
                src: value.into(),
            });
        }

        // One warp per tile, at most MAX_CHILD_GRID blocks: the child's warps stride.
        let per_block = i64::from(self.block / WARP);
        let wanted = b.bin(BinOp::Add, Type::U64, count, Operand::Imm(per_block - 1));
        let blocks = b.bin(BinOp::Div, Type::U64, wanted, Operand::Imm(per_block));
        let blocks = b.bin(BinOp::Min, Type::U64, blocks, Operand::Imm(MAX_CHILD_GRID));
        let grid = b.cvt(Rounding::None, Type::U32, Type::U64, blocks);
        let block = b.mov(Type::U32, Operand::Imm(self.block.into()));
        let one = b.mov(Type::U32, Operand::Imm(1));
        let zero32 = b.mov(Type::U32, Operand::Imm(0));
        let stream = b.mov(Type::U64, Operand::Imm(0));
        let func = b.mov(Type::U64, Operand::Symbol(self.child.into()));
        let status = b.reg(RegClass::B32);
        b.emit(Op::ScopeBegin);
        param_var(b, "lb_dl_func", Type::B64);
        param_var(b, "lb_dl_buffer", Type::B64);
        for dim in ["lb_dl_grid", "lb_dl_block"] {
            b.emit(Op::ParamDecl {
                name: dim.into(),
                ty: ParamDeclTy::Bytes { align: 4, len: 12 },
            });
        }
        param_var(b, "lb_dl_shared", Type::B32);
        param_var(b, "lb_dl_stream", Type::B64);
        param_var(b, "lb_dl_ret", Type::B32);
        st_param(b, "lb_dl_func", 0, Type::B64, func);
        st_param(b, "lb_dl_buffer", 0, Type::B64, buffer);
        for (dim, x) in [("lb_dl_grid", grid), ("lb_dl_block", block)] {
            st_param(b, dim, 0, Type::B32, x);
            st_param(b, dim, 4, Type::B32, one);
            st_param(b, dim, 8, Type::B32, one);
        }
        st_param(b, "lb_dl_shared", 0, Type::B32, zero32);
        st_param(b, "lb_dl_stream", 0, Type::B64, stream);
        b.emit(Op::Call {
            ret: Some("lb_dl_ret".into()),
            func: DeviceFunc::LaunchDevice,
            args: [
                "lb_dl_func",
                "lb_dl_buffer",
                "lb_dl_grid",
                "lb_dl_block",
                "lb_dl_shared",
                "lb_dl_stream",
            ]
            .map(String::from)
            .to_vec(),
        });
        b.emit(Op::Ld {
            space: Space::Param,
            ty: Type::B32,
            dst: status,
            addr: Address::Symbol {
                name: "lb_dl_ret".into(),
                offset: 0,
            },
            cache: LdCache::Default,
        });
        b.emit(Op::ScopeEnd);
        let launched = b.setp(Cmp::Eq, Type::U32, status, Operand::Imm(0));
        b.bra_if(launched, false, done);

        // The device runtime refused: walk the range in this thread, every lane of every tile.
        b.place(walk_here);
        let i = b.mov(Type::U64, Operand::Imm(0));
        let tiles = b.loop_begin();
        let end = b.setp(Cmp::Ge, Type::U64, i, count);
        b.break_if(&tiles, end, false);
        let next = b.label();
        let index = b.bin(BinOp::Add, Type::U64, first, i);
        let (tile, range) = buffered_tile(b, c, index, next);
        let lanes = lanes_begin(b, c);
        thread_tile(b, body, opts, c, tile, range, lanes.map(|(l, _)| l))?;
        lanes_end(b, lanes);
        b.place(next);
        b.bin_to(BinOp::Add, Type::U64, i, i, Operand::Imm(1));
        b.loop_end(tiles);
        b.place(done);
        Ok(())
    }
}
