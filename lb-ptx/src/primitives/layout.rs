//! The tile-set layout contract every schedule shares: how many work items there are, which tile
//! an item is, where a tile's atoms begin and end, and where its output goes; and the lane
//! mapping, lanes as a second dimension of the grid with register blocking ([`LaneStride`]).

use crate::body::{Body, IndexRole, ParamKind, TileSetKind, Ty};
use crate::builder::{KernelBuilder, LoopScope};
use crate::codegen::{
    check_index, emit_body, load_offset, mem_type, narrow_half, offset_addr, widen_half,
    AtomContext, CsrRegs, KernelParams, ParamRegs,
};
use crate::ir::{Address, LdCache, Occupancy, Op};
use crate::ir::{BinOp, Cmp, Label, Operand, Reg, Rounding, Space, Type};
use crate::plan::OffsetWidth;
use crate::{GenError, Options};

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
///   `atom - begin`. The offsets are `u32` or `u64` as the plan says ([`Layout::offsets`]);
///   read them through [`Layout::atoms`] or [`crate::codegen::load_offset`].
/// - Output of a reducing body: `output[tile * lanes + lane]`.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The tile view of the tile-set parameter (see above).
    pub csr: CsrRegs,
    /// Frontier pointer and length, and its parameter.
    frontier: Option<(Reg, Reg, usize)>,
    /// The lane count (u64), with `Options::lanes`.
    pub lanes: Option<Reg>,
    /// Number of tiles in the tile set (u64).
    pub tiles: Reg,
    /// Number of work items, `tiles × lanes` (u64).
    pub items: Reg,
    /// The width of `csr.row_offsets` (the plan's, [`KernelParams::offsets`]).
    pub offsets: OffsetWidth,
    /// The lane count's scalar parameter (index into `Body::params`), with `Options::lanes`.
    pub lanes_param: Option<usize>,
}

impl Layout {
    pub fn new(
        b: &mut KernelBuilder,
        body: &Body,
        opts: &Options,
        params: &KernelParams,
    ) -> Result<Layout, GenError> {
        let csr = params.csr(body.tile_set())?;
        let frontier = match opts.tiles {
            Some(p) => match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::Slice { elem: Ty::U32, .. }) => {
                    let (ptr, len) = params.slice(p)?;
                    Some((ptr, len, p))
                }
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
        let tiles = frontier.map_or(csr.num_rows, |(_, len, _)| len);
        let items = match lanes {
            Some(l) => b.bin(BinOp::Mul, Type::U64, tiles, l),
            None => tiles,
        };
        Ok(Layout {
            csr,
            frontier,
            lanes,
            tiles,
            items,
            offsets: params.offsets,
            lanes_param: opts.lanes,
        })
    }

    /// Whether the tiles come from a frontier (then a tile's atoms are not the position's).
    pub fn has_frontier(&self) -> bool {
        self.frontier.is_some()
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

    /// The tile at `position` (`< tiles`). Under `checked`, a frontier entry that is not a tile
    /// of the tile set is recorded as an out-of-bounds value of the frontier parameter (the entry
    /// is what is wrong, not the tile set) and the item is skipped (branch to `skip`).
    pub fn tile(
        &self,
        b: &mut KernelBuilder,
        params: &KernelParams,
        position: Reg,
        checked: bool,
        skip: Label,
    ) -> Reg {
        let Some((ptr, _, frontier_param)) = self.frontier else {
            return position;
        };
        let addr = b.elem_addr(ptr, position, 4);
        let raw = b.ld(Space::Global, Type::U32, addr);
        let tile = b.cvt(Rounding::None, Type::U64, Type::U32, raw);
        if let Some(flag) = params.error_flag.filter(|_| checked) {
            check_index(b, flag, tile, self.csr.num_rows, frontier_param, skip);
        }
        tile
    }

    /// `(row_offsets[tile], row_offsets[tile + 1])`, u64, read at the plan's offset width through the read-only path.
    pub fn atoms(&self, b: &mut KernelBuilder, tile: Reg) -> (Reg, Reg) {
        let w = self.offsets;
        let addr = offset_addr(b, w, self.csr.row_offsets, tile);
        let begin = load_offset(b, w, addr);
        let next = b.bin(BinOp::Add, Type::U64, addr, Operand::Imm(w.bytes().into()));
        let end = load_offset(b, w, next);
        (begin, end)
    }

    /// `output[tile * lanes + lane] = value`, or with an epilogue ([`Body::epilogue`]) the
    /// epilogue of the tile, the lane, `value` and the output's old value: every schedule stores
    /// a tile's final value here and only here, once per (tile, lane) and after its fix-up, so
    /// the epilogue never sees a partial. Under `checked`, an index past the output's length
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
        // A half-precision output holds the reduced f32 rounded once, after the epilogue.
        let storage = body.out_storage.unwrap_or(value.1);
        let addr = b.elem_addr(out, index, storage.size());
        let stored = match body.epilogue_body() {
            Some(epilogue) => {
                let old = epilogue_reads_old(body).then(|| {
                    // The output is written in the kernel: not the read-only path.
                    let old = b.ld(Space::Global, mem_type(storage), addr);
                    if storage.is_half() {
                        widen_half(b, storage, old)
                    } else {
                        old
                    }
                });
                apply_epilogue(b, &epilogue, params, (tile, lane), (value.0, old), checked)?
            }
            None => value.0,
        };
        let stored = if storage.is_half() {
            narrow_half(b, storage, stored)
        } else {
            stored
        };
        b.st(Space::Global, mem_type(storage), addr, stored);
        store_mirrors(b, params, index, (&[stored], storage));
        b.place(done);
        Ok(())
    }
}

/// Stores `values` (of `storage`) at elements `index`, `index + 1`, … of every mirror of the
/// output ([`KernelParams::mirrors`]); with no mirror, one test and a branch taken. Mirror bases
/// come from a table the launch passes and need no alignment beyond the element's, so adjacent
/// lanes stored as one vector in the output go one by one here.
fn store_mirrors(
    b: &mut KernelBuilder,
    params: &KernelParams,
    index: Reg,
    (values, storage): (&[Reg], Ty),
) {
    let (table, count) = params.mirrors;
    let none = b.setp(Cmp::Eq, Type::U64, count, Operand::Imm(0));
    let skip = b.if_begin(none, true);
    let m = b.mov(Type::U64, Operand::Imm(0));
    let each = b.loop_begin();
    let slot = b.elem_addr(table, m, 8);
    let base = b.ld_global(Type::U64, (slot, 0), LdCache::ReadOnly);
    let addr = b.elem_addr(base, index, storage.size());
    for (i, &v) in values.iter().enumerate() {
        let bytes = i as i64 * i64::from(storage.size());
        b.emit(Op::St {
            space: Space::Global,
            ty: mem_type(storage),
            addr: Address::Reg {
                base: addr,
                offset: bytes,
            },
            src: v.into(),
        });
    }
    b.bin_to(BinOp::Add, Type::U64, m, m, Operand::Imm(1));
    let more = b.setp(Cmp::Lt, Type::U64, m, count);
    b.break_if(&each, more, true);
    b.loop_end(each);
    b.if_end(skip);
}

/// Whether a thread stores its adjacent lanes' outputs with one vector store
/// ([`Layout::store_lanes`]): a reduction into 4-byte elements stored as reduced, without an
/// epilogue.
fn vector_output(body: &Body) -> bool {
    let four = matches!(body.reduce, Some((Ty::F32 | Ty::I32 | Ty::U32, _)));
    four && body.out_storage.is_none() && body.epilogue.is_none()
}

impl Layout {
    /// Stores the partials `accs` of the lanes of `set` for `tile`: one vector store with
    /// adjacent lanes where the output is stored as reduced in 4-byte elements (no epilogue, no
    /// half-precision storage) and nothing is tested (the kernel's test of
    /// [`Layout::adjacent_or_strided`] found the output aligned and the lane count a multiple of
    /// the lanes per thread), else [`Layout::store_output`] per lane below the lane count.
    pub fn store_lanes(
        &self,
        b: &mut KernelBuilder,
        (body, params): (&Body, &KernelParams),
        tile: Reg,
        (set, accs): (&LaneSet, &[Reg]),
        checked: bool,
    ) -> Result<(), GenError> {
        let Some((ty, _)) = body.reduce else {
            return Ok(());
        };
        let tested = checked && params.error_flag.is_some();
        if let (Some(_), Some((out, _)), Some(l), false, true) = (
            set.vector,
            params.output,
            self.lanes,
            tested,
            vector_output(body),
        ) {
            let row = b.bin(BinOp::Mul, Type::U64, tile, l);
            let index = b.bin(BinOp::Add, Type::U64, row, set.lanes[0]);
            let addr = b.elem_addr(out, index, 4);
            let srcs: Vec<Operand> = accs.iter().map(|&a| Operand::Reg(a)).collect();
            b.st_vec(Space::Global, mem_type(ty), (addr, 0), &srcs);
            store_mirrors(b, params, index, (accs, ty));
            return Ok(());
        }
        for (r, (&acc, valid)) in accs.iter().zip(&set.valid).enumerate() {
            let masked = valid.map(|v| b.if_begin(v, false));
            let lane = set.lane(b, r);
            self.store_output(b, body, params, (tile, Some(lane)), (acc, ty), checked)?;
            if let Some(scope) = masked {
                b.if_end(scope);
            }
        }
        Ok(())
    }
}

/// Adds `step` to the loop variable `at` (of type `ty`) and answers whether it is still below
/// `end`. The 32-bit form compares before adding (`step < end - at`), so that a sum past
/// `u32::MAX` cannot wrap back below `end`.
fn stride_on(b: &mut KernelBuilder, ty: Type, at: Reg, (step, end): (Reg, Reg)) -> Reg {
    if ty == Type::U64 {
        b.bin_to(BinOp::Add, ty, at, at, step);
        return b.setp(Cmp::Lt, ty, at, end);
    }
    let left = b.bin(BinOp::Sub, ty, end, at);
    let more = b.setp(Cmp::Lt, ty, step, left);
    b.bin_to(BinOp::Add, ty, at, at, step);
    more
}

/// Whether `body`'s epilogue reads the output's old value.
fn epilogue_reads_old(body: &Body) -> bool {
    body.epilogue.as_ref().is_some_and(|e| e.reads_old)
}

/// Emits `epilogue` ([`Body::epilogue_body`]) for the tile (and lane) with the reduced value and
/// the old output value as its two extra scalar parameters; returns the value to store. Its
/// accesses are tested as the body's are: under `checked`, those its guards do not prove.
fn apply_epilogue(
    b: &mut KernelBuilder,
    epilogue: &Body,
    params: &KernelParams,
    (tile, lane): (Reg, Option<Reg>),
    (value, old): (Reg, Option<Reg>),
    checked: bool,
) -> Result<Reg, GenError> {
    let mut params = params.clone();
    params.body.push(ParamRegs::Scalar(value));
    params.body.extend(old.map(ParamRegs::Scalar));
    let ctx = AtomContext {
        tile: Some(tile),
        lane,
        ..AtomContext::default()
    };
    let checked = checked && params.error_flag.is_some();
    emit_body(b, epilogue, &params, &ctx, checked)?.ok_or_else(|| {
        GenError::Unsupported("the epilogue must end in a value or `return` one".into())
    })
}

/// Lanes per thread (register blocking) of a walk over whole tiles for `lanes` lanes: 4 from 8
/// lanes, else 1.
///
/// A thread that owns R lanes of a tile evaluates the body for all R per atom, so the atom's
/// loads (column index, value) and the lane-invariant index arithmetic (`&b[col * k]`) are done
/// once for R lanes, and R gathers are in flight together: the register blocking of GE-SpMM
/// (Huang et al., SC'20), whose coarse-grained warp merging gives each thread several columns of
/// B for the same reason. With adjacent lanes ([`Blocking`]) a thread reads its R lanes of B's
/// row with one vector load, so at k = 8 two threads read the row's 32 bytes, one whole sector,
/// where eight threads did with scalar loads: a quarter of the instructions per atom for the
/// same sectors (H200, SpMM at k = 8, docs/benchmarks.md, forty-first session: `group_mapped(4)`
/// on road 61.1 → 38.0 µs, on the 7-point stencil 42.2 → 26.7, on `regular-250000x4` 21.1 →
/// 14.8; no member slower).
/// With strided lanes (`group + r × groups`, a lane count that is not a multiple of R) the
/// threads of a tile still read its row's sectors together. R stops at 4 because a thread holds
/// R partials and, in the multi-atom walks, several gathered values per lane. The huge-tile
/// split's tiers keep [`SPLIT_LANE_BLOCKING`].
pub fn lanes_per_thread(lanes: u64) -> u32 {
    LANE_BLOCKING
        .iter()
        .find(|&&(_, min, max)| lanes >= min && lanes < max)
        .map_or(1, |&(r, _, _)| r)
}

/// Register-blocking variants: `(lanes per thread, min lanes, max lanes)` (`max` exclusive,
/// `u64::MAX` unbounded), covering `0..` once.
pub type BlockingTable = [(u32, u64, u64)];

/// The register blocking of the walks over whole tiles; see [`lanes_per_thread`].
pub const LANE_BLOCKING: [(u32, u64, u64); 2] = [(1, 0, 8), (4, 8, u64::MAX)];

/// The register blocking of the huge-tile split's tiers and of `consolidate`: 4 lanes per thread
/// from 32 lanes, 2 from 16, else 1, the largest R that keeps `⌈lanes / R⌉ ≥ 8` threads side by
/// side. Their parallelism is pieces (or buffered tiles) times those threads: with 2 threads a
/// piece at k = 8, the mid tier of `bimodal-120000` filled under a quarter of an H200 and took
/// 80.1 µs where 8 threads a piece took 61.8.
pub const SPLIT_LANE_BLOCKING: [(u32, u64, u64); 3] = [(1, 0, 16), (2, 16, 32), (4, 32, u64::MAX)];

/// Emits `code` once per register-blocking variant of [`LANE_BLOCKING`], each behind a test of
/// the lane count, so that one kernel runs the variant [`lanes_per_thread`] picks: for a plan
/// with several kernels, where one plan per variant would repeat every kernel. `lanes` is the
/// lane count (u64).
pub fn per_lane_blocking(
    b: &mut KernelBuilder,
    lanes: Reg,
    table: &BlockingTable,
    mut code: impl FnMut(&mut KernelBuilder, u32) -> Result<(), GenError>,
) -> Result<(), GenError> {
    let end = b.label();
    for &(r, min, _) in table.iter().rev() {
        let next = b.label();
        if min > 0 {
            let fewer = b.setp(Cmp::Lt, Type::U64, lanes, Operand::Imm(min as i64));
            b.bra_if(fewer, false, next);
        }
        code(b, r)?;
        b.bra(end);
        b.place(next);
    }
    b.place(end);
    Ok(())
}

/// How a thread owns its lanes of a tile: `per_thread` (R) of them, either strided by the lane
/// groups (`group + r × groups`: coalesced across threads for every lane count) or **adjacent**
/// (`group × R + r`), which one vector access reads and writes at once: `ld.global.nc.v4.f32`
/// for four lanes of a row of B where four scalar loads took four issue slots and four L1
/// requests. Adjacent lanes are only used where the kernel has tested that the lane count is a
/// multiple of R and that the arrays read with vector loads are aligned to their width
/// ([`Layout::per_lane_blocking_vec`]); there no lane is masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking {
    pub per_thread: u32,
    pub adjacent: bool,
}

impl Blocking {
    /// `r` strided lanes per thread.
    pub fn strided(r: u32) -> Blocking {
        Blocking {
            per_thread: r,
            adjacent: false,
        }
    }
}

impl Layout {
    /// [`per_lane_blocking`] with adjacent lanes where they pay: for a body whose walk reads
    /// lanes with vector loads ([`crate::codegen::vector_lane_params`]), each variant of two or
    /// four lanes per thread is emitted twice behind a uniform test, adjacent when the lane
    /// count is a multiple of R and every array read with vector loads (a parameter's base
    /// address) is aligned to R elements, strided otherwise. Other bodies get
    /// [`per_lane_blocking`]'s variants. Needs `lanes`.
    pub fn per_lane_blocking_vec(
        &self,
        b: &mut KernelBuilder,
        (body, params): (&Body, &KernelParams),
        table: &BlockingTable,
        mut code: impl FnMut(&mut KernelBuilder, Blocking) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let lanes = self.lanes.expect("lane blocking needs `lanes`");
        per_lane_blocking(b, lanes, table, |b, r| {
            self.adjacent_or_strided(b, (body, params), r, &mut code)
        })
    }

    /// `code` for `r` lanes per thread, adjacent behind the kernel's test of
    /// [`Layout::per_lane_blocking_vec`] where the body reads lanes with vector loads and
    /// `r > 1`, with one lane per thread where that test fails; `r` strided lanes where the
    /// body has no vector path. Needs `lanes`.
    pub fn adjacent_or_strided(
        &self,
        b: &mut KernelBuilder,
        (body, params): (&Body, &KernelParams),
        r: u32,
        mut code: impl FnMut(&mut KernelBuilder, Blocking) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let (Some(lanes), Some(lanes_param)) = (self.lanes, self.lanes_param) else {
            return code(b, Blocking::strided(r));
        };
        let vector = crate::codegen::vector_lane_params(body, lanes_param);
        if r < 2 || vector.is_empty() {
            return code(b, Blocking::strided(r));
        }
        let whole = b.bin(BinOp::And, Type::B64, lanes, Operand::Imm(i64::from(r) - 1));
        let ok = b.setp(Cmp::Eq, Type::U64, whole, Operand::Imm(0));
        let mask = Operand::Imm(i64::from(4 * r) - 1);
        let mut bases = vector
            .into_iter()
            .map(|p| params.slice(p).map(|s| s.0))
            .collect::<Result<Vec<_>, _>>()?;
        bases.extend(params.output.filter(|_| vector_output(body)).map(|o| o.0));
        for base in bases {
            let low = b.bin(BinOp::And, Type::B64, base, mask.clone());
            let aligned = b.setp(Cmp::Eq, Type::U64, low, Operand::Imm(0));
            b.bin_to(BinOp::And, Type::Pred, ok, ok, aligned);
        }
        let mut scope = b.if_begin(ok, false);
        let adjacent = Blocking {
            per_thread: r,
            adjacent: true,
        };
        code(b, adjacent)?;
        b.if_else(&mut scope);
        // One lane a thread, not `r` strided ones: the walks stride over (position, lane group)
        // pairs on any grid, so the thread takes its `r` lanes one after another. `r` strided
        // lanes held their lanes, clamped lanes and scaled offsets through the walk (56
        // registers in the mid tier's walk on sm_90, where the adjacent walk needs 32), and
        // a kernel's registers are those of its largest path.
        code(b, Blocking::strided(1))?;
        b.if_end(scope);
        Ok(())
    }
}

/// A grid-stride loop over (tile position, lane group) pairs: the lane mapping of a schedule that
/// gives each tile to `W` threads side by side ([`Layout::lane_stride_begin`]), `W = groups`
/// (every lane group of a tile at once) or at most a cap (a group of N threads per tile, each
/// looping over lane groups `g, g + W, ..`), and never more than the grid has.
///
/// The thread's global index is split once, at entry, into a position and a lane group (one
/// division per thread, not per work item): `position = thread / W`, `group = thread % W`. Each
/// thread then keeps its group and strides over positions by `⌊threads / W⌋` (the last
/// `threads % W` threads idle).
///
/// With 32-bit tile offsets the loops' state is 32-bit (`index`): the positions are tiles or
/// pieces of a tile set whose tiles and atoms fit in 32 bits, and the runtime refuses a lane
/// count above `u32::MAX` over such a tile set, so every position, group, count and step fits.
/// Held through the walk, seven 64-bit values of state cost seven registers more than 32-bit
/// ones; the lane kernels' registers, not their instructions, bound how many warps an SM keeps
/// in flight, and so their speed (docs/spmm.md, "Registers and occupancy").
pub struct LaneStride {
    /// The tile position (u64), made at the head of each trip.
    pub position: Reg,
    /// The lane group (u64, `< groups`), made at the head of each trip.
    pub group: Reg,
    /// Lane groups per tile, `⌈lanes / R⌉` (u64).
    pub groups: Reg,
    /// Branch here to skip to the thread's next (position, group).
    pub next: Label,
    /// The width of the loops' state (u32 or u64) and the state below in it.
    index: Type,
    at: Reg,
    group_at: Reg,
    groups_at: Reg,
    count: Reg,
    width: Reg,
    first_group: Reg,
    step: Reg,
    positions: LoopScope,
    groups_loop: Label,
}

/// The threads a lane walk over a 32-bit tile set asks ptxas to fit on an SM
/// ([`Layout::aim_lane_walk_occupancy`]): six blocks of 256, a budget of 40 registers on
/// sm_80 and sm_90 (sm_75 holds at most 1 024 threads and keeps its own budget).
pub const LANE_WALK_THREADS: u32 = 1536;

/// The lanes a thread owns in one tile: `lanes[r] = group + r × groups`, or with adjacent lanes
/// ([`Blocking`]) `group × R + r`.
pub struct LaneSet {
    /// The lanes (u64) made before the walk: every one of strided lanes, whose body copies
    /// read them, but only the first of adjacent lanes, whose copies take the first one's vector
    /// load: the others are made where the stores need them ([`LaneSet::lane`]), so that they
    /// are not live across the walk (four 64-bit lanes held through the walk kept the mid
    /// tier's kernel at 48 registers).
    lanes: Vec<Reg>,
    /// The lanes the body is evaluated for (u64): `lanes[r]`, or for a body without side effects
    /// `min(lanes[r], lanes − 1)`, so that a masked lane computes in bounds without a branch and
    /// its value is dropped (the body's lane-invariant part stays one straight line, which
    /// [`crate::optimize`] evaluates once for all R).
    pub body: Vec<Reg>,
    /// `lanes[r] < lanes`, `None` where it always holds (r = 0).
    pub valid: Vec<Option<Reg>>,
    /// `body[r]` times 1, 2, 4 and 8 bytes ([`crate::codegen::AtomContext::lane_scaled`]): once
    /// per tile, so that the walk's loads at `e + lane` add one offset per lane (those the body
    /// does not read are removed as dead code).
    pub scaled: Vec<[Option<Reg>; 4]>,
    /// With adjacent lanes: the walk reads the lanes of a vector-read array with one vector
    /// load ([`crate::codegen::LaneVector`]).
    pub vector: Option<LaneVectorSpec>,
}

impl LaneSet {
    /// Lanes per thread (R).
    pub fn per_thread(&self) -> usize {
        self.valid.len()
    }

    /// Lane `r` (u64), for the output: for adjacent lanes `lanes[0] + r`, emitted here.
    pub fn lane(&self, b: &mut KernelBuilder, r: usize) -> Reg {
        match self.lanes.get(r) {
            Some(&lane) => lane,
            None => b.bin(BinOp::Add, Type::U64, self.lanes[0], Operand::Imm(r as i64)),
        }
    }
}

/// R adjacent lanes and the lane count's parameter, for [`crate::codegen::LaneVector`].
#[derive(Clone, Copy, Debug)]
pub struct LaneVectorSpec {
    pub width: u32,
    pub lanes_param: usize,
}

impl Layout {
    /// Opens the (position, lane group) loop of [`LaneStride`] over positions `0..positions`
    /// (u64) for `per_thread` lanes per thread and at most `cap` threads per tile. Needs `lanes`.
    pub fn lane_stride_begin(
        &self,
        b: &mut KernelBuilder,
        positions: Reg,
        (per_thread, cap): (u32, Option<u32>),
    ) -> LaneStride {
        debug_assert!(per_thread.is_power_of_two());
        let (thread, threads) = b.grid_thread();
        let groups = self.lane_groups(b, per_thread);
        let count = positions;
        let positions = LoopScope {
            head: b.label(),
            exit: b.label(),
        };
        let none = b.setp(Cmp::Eq, Type::U64, groups, Operand::Imm(0));
        b.break_if(&positions, none, false);
        let threads = self.lane_threads(b, (thread, threads), &positions);
        let wide = match cap {
            Some(n) => b.bin(BinOp::Min, Type::U64, groups, Operand::Imm(n.into())),
            None => groups,
        };
        let width = b.bin(BinOp::Min, Type::U64, wide, threads);
        let (step, position) = self.split_threads(b, (threads, thread), width);
        let whole = b.bin(BinOp::Mul, Type::U64, position, width);
        let first_group = b.bin(BinOp::Sub, Type::U64, thread, whole);
        // The last `threads % width` threads would repeat the first positions' groups.
        let used = b.bin(BinOp::Mul, Type::U64, step, width);
        let idle = b.setp(Cmp::Ge, Type::U64, thread, used);
        b.break_if(&positions, idle, false);
        let past = b.setp(Cmp::Ge, Type::U64, position, count);
        b.break_if(&positions, past, false);
        let state = [position, step, count, width, first_group, groups];
        let (index, [at, step, count, width, first_group, groups_at]) = match self.offsets {
            OffsetWidth::U64 => (Type::U64, state),
            OffsetWidth::U32 => {
                // Past the count the loop ends anyway: a step clamped to it fits in 32 bits.
                let clamped = b.bin(BinOp::Min, Type::U64, step, count);
                let state = [position, clamped, count, width, first_group, groups];
                (
                    Type::U32,
                    state.map(|r| b.cvt(Rounding::None, Type::U32, Type::U64, r)),
                )
            }
        };
        let widen = |b: &mut KernelBuilder, r: Reg| match index {
            Type::U32 => b.cvt(Rounding::None, Type::U64, Type::U32, r),
            _ => r,
        };
        b.place(positions.head);
        let position = widen(b, at);
        let group_at = b.mov(index, first_group);
        let groups_loop = b.label();
        b.place(groups_loop);
        let group = widen(b, group_at);
        LaneStride {
            position,
            group,
            groups,
            next: b.label(),
            index,
            at,
            group_at,
            groups_at,
            count,
            width,
            first_group,
            step,
            positions,
            groups_loop,
        }
    }

    /// `(threads / width, thread / width)` (u64). With 32-bit tile offsets by 32-bit divisions:
    /// a 64-bit division is a call to a subroutine whose register convention cost the mid tier's
    /// walk two registers on sm_90 (34 against 32) even on a branch never taken. The caller
    /// caps the grid at `u32::MAX` threads first ([`Layout::lane_threads`]).
    fn split_threads(
        &self,
        b: &mut KernelBuilder,
        (threads, thread): (Reg, Reg),
        width: Reg,
    ) -> (Reg, Reg) {
        if self.offsets == OffsetWidth::U64 {
            let step = b.bin(BinOp::Div, Type::U64, threads, width);
            let position = b.bin(BinOp::Div, Type::U64, thread, width);
            return (step, position);
        }
        let narrow = |b: &mut KernelBuilder, r: Reg| b.cvt(Rounding::None, Type::U32, Type::U64, r);
        let w = narrow(b, width);
        [threads, thread]
            .map(|n| {
                let n = narrow(b, n);
                let q = b.bin(BinOp::Div, Type::U32, n, w);
                b.cvt(Rounding::None, Type::U64, Type::U32, q)
            })
            .into()
    }

    /// The grid's threads for [`Layout::lane_stride_begin`]: all of them with 64-bit tile
    /// offsets; with 32-bit ones at most the whole warps below `u32::MAX`, the others idle (the
    /// loops stride, so fewer threads still cover every pair; no grid the runtime makes for such
    /// a tile set has more), so that every index of the loops fits in 32 bits. Whole warps keep
    /// every thread count a multiple of 32, on which the mid walk's parts rely (a piece's
    /// threads stay in one warp from one position to the next).
    fn lane_threads(
        &self,
        b: &mut KernelBuilder,
        (thread, threads): (Reg, Reg),
        exit: &LoopScope,
    ) -> Reg {
        if self.offsets == OffsetWidth::U64 {
            return threads;
        }
        let most = b.bin(
            BinOp::Min,
            Type::U64,
            threads,
            // The whole warps below 2^32.
            Operand::Imm(i64::from(!31u32)),
        );
        let spare = b.setp(Cmp::Ge, Type::U64, thread, most);
        b.break_if(exit, spare, false);
        most
    }

    /// Asks ptxas to fit `threads` threads of this lane walk on an SM ([`LANE_WALK_THREADS`] but
    /// for the split's mid walk in parts), for a body that reads its lanes as vectors
    /// ([`crate::codegen::vector_lane_params`]: a gather and a product, SpMM's shape) over 32-bit
    /// tile offsets, launched with `block` threads a block.
    /// Left to itself ptxas gave these kernels 32 registers on sm_80/90 and then kept one gather
    /// in flight per thread; with the budget of six blocks of 256 (40 registers) it keeps two,
    /// and with 48 (the 64-bit state's) five blocks fit. On an H200 the budget of 40 was fastest
    /// at k = 32 and 128 and tied 48 at k = 8 (docs/spmm.md, "Registers and occupancy"). Other
    /// bodies, `checked` kernels (a test and an error report per access), formats written
    /// outside lb and bodies that read the atom's rank (their own arrays' index math) and
    /// 64-bit plans, whose state needs more (at 40 the `checked` mid walk spilled 68 bytes and
    /// a SELL format's 24), are left to ptxas.
    pub fn aim_lane_walk_occupancy(
        &self,
        b: &mut KernelBuilder,
        (body, checked): (&Body, bool),
        (block, threads): (u32, u32),
    ) {
        let Some(p) = self.lanes_param else {
            return;
        };
        let built_in = matches!(
            body.params[body.tile_set()].kind,
            ParamKind::TileSet {
                kind: TileSetKind::Csr | TileSetKind::Csc | TileSetKind::Coo,
                ..
            }
        );
        if checked
            || !built_in
            || body.reads(IndexRole::Rank)
            || self.offsets != OffsetWidth::U32
            || crate::codegen::vector_lane_params(body, p).is_empty()
        {
            return;
        }
        b.set_occupancy(Occupancy {
            max_threads: block,
            min_blocks: (threads / block).max(1),
        });
    }

    /// Lane groups per tile for `per_thread` lanes per thread, `⌈lanes / per_thread⌉` (u64; a
    /// power of two `per_thread`). Needs `lanes`.
    pub fn lane_groups(&self, b: &mut KernelBuilder, per_thread: u32) -> Reg {
        let lanes = self.lanes.expect("lane groups need `lanes`");
        match per_thread {
            1 => lanes,
            r => {
                let up = b.bin(BinOp::Add, Type::U64, lanes, Operand::Imm(i64::from(r) - 1));
                let shift = Operand::Imm(r.trailing_zeros().into());
                b.bin(BinOp::Shr, Type::U64, up, shift)
            }
        }
    }

    /// Closes [`Layout::lane_stride_begin`]'s loops.
    pub fn lane_stride_end(b: &mut KernelBuilder, ls: LaneStride) {
        let ty = ls.index;
        b.place(ls.next);
        let more = stride_on(b, ty, ls.group_at, (ls.width, ls.groups_at));
        b.bra_if(more, false, ls.groups_loop);
        let more = stride_on(b, ty, ls.at, (ls.step, ls.count));
        b.mov_to(ty, ls.group_at, ls.first_group);
        b.bra_if(more, false, ls.positions.head);
        b.place(ls.positions.exit);
    }

    /// The lanes of lane group `group` for `blocking` (see [`LaneSet`]). Needs `lanes`.
    pub fn lane_set(
        &self,
        b: &mut KernelBuilder,
        body: &Body,
        (group, groups): (Reg, Reg),
        blocking: Blocking,
    ) -> LaneSet {
        let per_thread = blocking.per_thread;
        if let (true, Some(p)) = (blocking.adjacent, self.lanes_param) {
            return adjacent_lanes(b, group, (per_thread, p));
        }
        let count = self.lanes.expect("a lane set needs `lanes`");
        let last = (per_thread > 1 && body.is_pure())
            .then(|| b.bin(BinOp::Sub, Type::U64, count, Operand::Imm(1)));
        let mut set = LaneSet {
            lanes: vec![group],
            body: vec![group],
            valid: vec![None],
            scaled: Vec::new(),
            vector: None,
        };
        for _ in 1..per_thread {
            let prev = *set.lanes.last().expect("lane 0 is there");
            let lane = b.bin(BinOp::Add, Type::U64, prev, groups);
            let valid = b.setp(Cmp::Lt, Type::U64, lane, count);
            set.lanes.push(lane);
            set.body.push(match last {
                Some(last) => b.bin(BinOp::Min, Type::U64, lane, last),
                None => lane,
            });
            set.valid.push(Some(valid));
        }
        set.scaled = scaled_lanes(b, &set.body);
        set
    }
}

/// Adjacent lanes `group × r + i` for `i < r` ([`Blocking`]): every one below the lane count
/// (the kernel tested that the count is a multiple of `r`), so none is masked. `lanes_param`:
/// the lane count's scalar parameter.
fn adjacent_lanes(b: &mut KernelBuilder, group: Reg, (r, lanes_param): (u32, usize)) -> LaneSet {
    let shift = Operand::Imm(r.trailing_zeros().into());
    let first = b.bin(BinOp::Shl, Type::B64, group, shift);
    let lanes: Vec<Reg> = (0..r)
        .map(|i| match i {
            0 => first,
            i => b.bin(BinOp::Add, Type::U64, first, Operand::Imm(i.into())),
        })
        .collect();
    LaneSet {
        scaled: scaled_lanes(b, &lanes),
        valid: vec![None; lanes.len()],
        lanes: vec![first],
        body: lanes,
        vector: Some(LaneVectorSpec {
            width: r,
            lanes_param,
        }),
    }
}

/// Each lane times 1, 2, 4 and 8 bytes ([`LaneSet::scaled`]).
fn scaled_lanes(b: &mut KernelBuilder, lanes: &[Reg]) -> Vec<[Option<Reg>; 4]> {
    lanes
        .iter()
        .map(|&lane| {
            let mut scaled = [None; 4];
            for (shift, slot) in scaled.iter_mut().enumerate() {
                let by = Operand::Imm(shift as i64);
                *slot = Some(b.bin(BinOp::Shl, Type::B64, lane, by));
            }
            scaled
        })
        .collect()
}
