//! The split's mid tier, with lanes: tiles of [`MID_THRESHOLD`] up to [`super::MID_CEILING`] atoms
//! cut into pieces of [`PIECE`] atoms, each walked like a short tile by the threads of its lanes,
//! and folded back per tile in piece order (see the parent module's docs).
//!
//! The mid list is built in tile order by three kernels that lead the plan (cached with the tile
//! set): the split's **list** kernel counts each segment of [`SEGMENT`] consecutive tiles' mid
//! tiles and pieces (a warp per segment, warp scans), the split's **scan** turns the counts
//! into each segment's first entry and piece and stores the totals, and **place**
//! (`{base}_mid_place`) writes each mid tile's entry: `mid_list[e]` its tile, `mid_starts[e]`
//! the pieces of the entries before `e` (the total after the last, `huge_count` word 2 the
//! length) and `mid_entries[p]` each piece's entry. Then:
//! 1. **walk**: (piece, lane group) pairs on the grid of [`Layout::lane_stride_begin`], as the
//!    group family takes (tile, lane group) pairs: `W` threads side by side per piece, each
//!    owning `R` lanes ([`per_lane_blocking`]). A piece reads its entry from `mid_entries`,
//!    walks its atoms in order once for its `R` lanes ([`Walker::walk_lanes`]) and stores
//!    one partial per lane at `mid_partials[piece × lanes + lane]`; a tile of one piece (at most
//!    [`PIECE`] atoms) stores its output instead. Up to [`PARTS_LANES`] lanes the walk is built
//!    in [`Parts`] (`{base}_mid_parts`): a warp takes one piece, `32 / W` sets of `W` threads
//!    each walk a part of its atoms, and the first part adds the others' partials; above, the
//!    whole piece per thread (`{base}_mid_walk`). The plan launches one of the two by the lane
//!    count.
//! 2. **fixup** (with `reduce`): (entry, lane group) pairs; each thread folds its lanes' partials
//!    over the entry's pieces in piece order and stores the tile's output (the epilogue, if any,
//!    sees only this final value).
//!
//! Determinism: a piece's atoms, its parts and the fold's order are fixed by the tile's size and
//! the lane blocking (see [`Parts`]), so two launches on the same buffers agree bitwise; no
//! atomics touch a value.

use std::borrow::Cow;

use super::{
    MidTemps, Split, MID_COUNT, MID_FIXUP, MID_PARTS, MID_THRESHOLD, MID_TRACK, MID_WALK, PIECE,
};
use crate::body::{Body, Reduce, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity};
use crate::ir::{BinOp, Cmp, Op, Operand, Reg, Rounding, ShflMode, Space, Special, Type};
use crate::plan::{Grid, KernelPlan, TempCount};
use crate::primitives::layout::{
    per_lane_blocking, Blocking, LaneSet, LANE_WALK_THREADS, SPLIT_LANE_BLOCKING,
};
use crate::primitives::walker::Walker;
use crate::primitives::warp::{grid_warps, shfl};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// Tiles per segment of the mid list's build: one warp's, so that a segment's entries and
/// pieces are counted and placed with warp scans alone.
pub const SEGMENT: u64 = 32;

/// The most pieces of one mid tile.
const MAX_PIECES: u64 = super::MID_CEILING.div_ceil(PIECE);

// A segment's mid tiles and their pieces each fit the 16 bits of [`Split::segment_scan`].
const _: () = assert!(SEGMENT * MAX_PIECES < 1 << 16);

/// Segments each lane of the scan takes per round (`32 · SCAN_RUN` a round).
const SCAN_RUN: u64 = 4;

/// Bytes of `mid_segments` (elements of one byte): per segment of [`SEGMENT`] tiles two u64,
/// `16 · ⌈tiles / 32⌉ ≤ tiles / 2 + 16` bytes, within one byte per tile plus 16.
pub fn segments_bytes() -> TempCount {
    TempCount::PerTile {
        per_tile: 1,
        extra: 16,
    }
}

/// Atoms per piece at the least: a tile of `n ≥ MID_THRESHOLD` atoms has at most
/// `n / ATOMS_PER_PIECE` pieces. Below `PIECE` atoms it is one piece and `n ≥ MID_THRESHOLD`;
/// from `PIECE` atoms on, `⌈n / PIECE⌉ ≤ 2n / PIECE`.
const ATOMS_PER_PIECE: u64 = if MID_THRESHOLD < PIECE / 2 {
    MID_THRESHOLD
} else {
    PIECE / 2
};

/// Partials per `mid_partials` element (one per block of the plan's first grid, which counts
/// `16 · block` tiles and atoms per block and lane): the pieces of all the mid tier's tiles are
/// at most `atoms / ATOMS_PER_PIECE`, so times the lanes at most `block · 16 / ATOMS_PER_PIECE`
/// per element.
pub fn partials_per_block(block: u32) -> u32 {
    let per_block_atoms = 16 * block;
    per_block_atoms.div_ceil(ATOMS_PER_PIECE as u32)
}

/// Elements of `mid_entries`, one u32 per piece: the pieces are at most
/// `atoms / ATOMS_PER_PIECE`, whatever the lanes. An entry index fits in 32 bits: the mid list
/// holds at most `atoms / MID_THRESHOLD` entries, fewer than `2^32` for any tile set a device can
/// hold (`2^37` atoms would be a terabyte of column indices and values).
pub fn entries_count() -> TempCount {
    TempCount::PerAtoms {
        atoms: ATOMS_PER_PIECE,
        extra: 1,
    }
}

/// The mid tier's kernels: the walk, and the fix-up when the body reduces.
pub fn kernels(base: &str, body: &Body, opts: &Options) -> Vec<KernelPlan> {
    let kernel = |suffix: &str, block: u32, grid: Grid, lanes: Option<(u64, u64)>| KernelPlan {
        entry: Cow::Owned(format!("{base}{suffix}")),
        block,
        grid,
        dynamic_shared: 0,
        min_tile_atoms: Some(MID_THRESHOLD),
        min_grid: None,
        lanes,
        track: MID_TRACK,
    };
    // One block per `2 · block` atoms: a group of `W` threads per piece leaves a block
    // `block / W ≥ 8` pieces at once (`W ≤ 32`), at most `block / 16` pieces per `2 · block`
    // atoms.
    let walk = Grid::PerAtoms {
        atoms: 2 * opts.block,
    };
    let block = opts.block.min(MID_WALK_BLOCK);
    let parts = Some((0, PARTS_LANES));
    let whole = Some((PARTS_LANES + 1, u64::MAX));
    let mut out = vec![
        kernel(MID_PARTS, block, walk, parts),
        kernel(MID_WALK, block, walk, whole),
    ];
    if body.reduce.is_some() {
        let fixup = Grid::CoverItems { per_thread: 1 };
        out.push(kernel(MID_FIXUP, opts.block, fixup, None));
    }
    out
}

/// The mid walk's largest block: its lane registers cap it at 256 threads, as the huge tier's.
const MID_WALK_BLOCK: u32 = 256;

/// The most lanes for which a piece can be walked in [`Parts`] (`W = ⌈lanes / R⌉` a power of two
/// below 32 needs `lanes ≤ 64` with [`SPLIT_LANE_BLOCKING`]): up to this lane count the plan
/// launches the mid walk in parts (`_mid_parts`), above it the one without (`_mid_walk`).
const PARTS_LANES: u64 = 64;

/// The threads an SM a mid walk in parts asks for ([`Layout::aim_lane_walk_occupancy`]): five
/// blocks of 256, 48 registers. Its warp barriers need more registers than the walk without
/// them: at [`LANE_WALK_THREADS`] (40) ptxas spilled the loop's state on sm_80, and on an H200
/// five blocks ran as fast as six at k = 32 and faster at k = 8 (docs/spmm.md, "Pieces in
/// parts"). The walk without parts keeps six blocks, which were faster at k = 128.
const PARTS_WALK_THREADS: u32 = 1280;

/// A piece's tile and atoms, from [`Split::piece`].
struct Piece {
    tile: Reg,
    /// The tile's first atom (for the body's rank), the piece's atoms `from..to`.
    begin: Reg,
    from: Reg,
    to: Reg,
    /// The tile is this one piece: its result is the output, not a partial.
    whole: Reg,
}

/// The mid walk's shared array through which a warp's parts add their partials
/// ([`Parts::combine`]): a slot of the thread's lanes per thread.
const PARTS_SMEM: &str = "lb_parts";

/// How the threads of a warp share a piece of the mid walk. With `W` threads side by side over a
/// piece's lanes, a warp took `32 / W` pieces, and each of the `W` threads walked the piece's up
/// to [`PIECE`] atoms alone: at k = 32 (8 threads a piece) the walk was a chain of 32 trips per
/// thread, and the pieces of a `lognormal` graph filled an H200 about 1.2 times, so the second
/// wave left most of the GPU idle. Where `W` is a power of two below 32, a warp takes one piece
/// in `Q = 32 / W` parts of (nearly) equal atoms, each walked by `W` threads, and the first
/// part's threads add the others' partials ([`Parts::combine`]) before they store. The grid's
/// positions are (piece, part) pairs, piece-major, so the 32 threads of a piece are one whole
/// warp: they enter and leave the loop together, and its warp barriers take the full warp.
///
/// Determinism: the parts and the order of their sum are fixed by the piece and `W`, i.e. by
/// the tile's size, the lane count and the lanes per thread (which the kernel picks from the
/// lane count and the vector operands' alignment), so two launches on the same buffers agree
/// bitwise.
struct Parts {
    /// `log2 Q` (u32): 0 where `W` is no power of two below 32; `W = 32 >> log2 Q` otherwise,
    /// so that the walk holds one register for the parts.
    log: Reg,
}

impl Parts {
    /// The parts for `groups` (u64) threads a piece.
    fn new(b: &mut KernelBuilder, groups: Reg) -> Parts {
        let below = b.bin(BinOp::Sub, Type::U64, groups, Operand::Imm(1));
        let common = b.bin(BinOp::And, Type::B64, groups, below);
        let power = b.setp(Cmp::Eq, Type::U64, common, Operand::Imm(0));
        // No power of two: a width that no part count fits.
        let width = b.selp(Type::U64, groups, Operand::Imm(64), power);
        let mut log = b.mov(Type::U32, Operand::Imm(0));
        for j in 1..=5 {
            let fits = b.setp(Cmp::Le, Type::U64, width, Operand::Imm(32 >> j));
            log = b.selp(Type::U32, Operand::Imm(j.into()), log, fits);
        }
        Parts { log }
    }

    /// The piece of position `position` (u64 each).
    fn piece(&self, b: &mut KernelBuilder, position: Reg) -> Reg {
        b.bin(BinOp::Shr, Type::U64, position, self.log)
    }

    /// The part of its piece that position `position` walks (u64 each).
    fn part(&self, b: &mut KernelBuilder, position: Reg) -> Reg {
        let one = b.mov(Type::U64, Operand::Imm(1));
        let count = b.bin(BinOp::Shl, Type::B64, one, self.log);
        let last = b.bin(BinOp::Sub, Type::U64, count, Operand::Imm(1));
        b.bin(BinOp::And, Type::B64, position, last)
    }

    /// Whether position `position` walks a part other than its piece's first (a predicate: its
    /// threads store nothing).
    fn rest(&self, b: &mut KernelBuilder, position: Reg) -> Reg {
        let part = self.part(b, position);
        b.setp(Cmp::Ne, Type::U64, part, Operand::Imm(0))
    }

    /// The atoms of position `position`'s part of its piece's atoms `from..to` (u64 each).
    fn range(&self, b: &mut KernelBuilder, position: Reg, (from, to): (Reg, Reg)) -> (Reg, Reg) {
        let part = self.part(b, position);
        let atoms = b.bin(BinOp::Sub, Type::U64, to, from);
        let bound = |b: &mut KernelBuilder, k: Reg| {
            let scaled = b.bin(BinOp::Mul, Type::U64, atoms, k);
            let skip = b.bin(BinOp::Shr, Type::U64, scaled, self.log);
            b.bin(BinOp::Add, Type::U64, from, skip)
        };
        let start = bound(b, part);
        let next = b.bin(BinOp::Add, Type::U64, part, Operand::Imm(1));
        let end = bound(b, next);
        (start, end)
    }

    /// Adds the parts' partials `accs` (one per lane of the thread) of the warp's piece, in part
    /// order, into the first part's threads, through [`PARTS_SMEM`]: each thread leaves its
    /// partials in its slot, and a thread of the first part reads those of the threads `W`,
    /// `2W`, .. above it, which hold the same lanes. Through shared memory rather than
    /// shuffles: ptxas cannot prove the warp converged after walks of different lengths, so each
    /// `shfl.sync` got a fallback call whose register convention spilled the walk's state at its
    /// budget on sm_80; `bar.warp.sync` needs no call. The second barrier keeps a thread's next
    /// piece from overwriting its slot before the first part has read it.
    fn combine(
        &self,
        b: &mut KernelBuilder,
        (position, block): (Reg, u32),
        accs: &[Reg],
        (ty, red): (Ty, Reduce),
    ) -> Result<(), GenError> {
        let done = b.label();
        let one = b.setp(Cmp::Eq, Type::U32, self.log, Operand::Imm(0));
        b.bra_if(one, false, done);
        let size = ty.size();
        let per_thread = accs.len() as u32 * size;
        b.shared(PARTS_SMEM, 8, block * per_thread);
        let base = b.mov(Type::U64, Operand::Symbol(PARTS_SMEM.into()));
        let tid = b.special(Special::TidX);
        let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let mine = b.bin(BinOp::Mul, Type::U64, tid, Operand::Imm(per_thread.into()));
        let mine = b.bin(BinOp::Add, Type::U64, base, mine);
        // Lane `r`'s value in the slot at `slot`.
        let lane_at = |b: &mut KernelBuilder, slot: Reg, r: usize| {
            let offset = Operand::Imm((r as u32 * size).into());
            b.bin(BinOp::Add, Type::U64, slot, offset)
        };
        for (r, &acc) in accs.iter().enumerate() {
            let at = lane_at(b, mine, r);
            b.st(Space::Shared, ptx_type(ty), at, acc);
        }
        let full = Operand::Imm(0xffff_ffff);
        b.emit(Op::WarpSync { mask: full.clone() });
        let rest = self.rest(b, position);
        let read = b.if_begin(rest, true);
        // The same lanes' slots of the parts above: `W = 32 >> log2 Q` threads apart, `Q - 1`
        // of them.
        let warp = b.mov(Type::U32, Operand::Imm(32 * i64::from(per_thread)));
        let stride = b.bin(BinOp::Shr, Type::U32, warp, self.log);
        let stride = b.cvt(Rounding::None, Type::U64, Type::U32, stride);
        let at = b.bin(BinOp::Add, Type::U64, mine, stride);
        let unit = b.mov(Type::U32, Operand::Imm(1));
        let parts = b.bin(BinOp::Shl, Type::B32, unit, self.log);
        let left = b.bin(BinOp::Sub, Type::U32, parts, Operand::Imm(1));
        let fold = b.loop_begin();
        let over = b.setp(Cmp::Eq, Type::U32, left, Operand::Imm(0));
        b.break_if(&fold, over, false);
        for (r, &acc) in accs.iter().enumerate() {
            let from = lane_at(b, at, r);
            let x = b.ld(Space::Shared, ptx_type(ty), from);
            reduce_combine(b, ty, red, acc, x)?;
        }
        b.bin_to(BinOp::Add, Type::U64, at, at, stride);
        b.bin_to(BinOp::Sub, Type::U32, left, left, Operand::Imm(1));
        b.loop_end(fold);
        b.if_end(read);
        b.emit(Op::WarpSync { mask: full });
        b.place(done);
        Ok(())
    }
}

impl Split<'_> {
    fn mid(&self) -> Result<MidTemps, GenError> {
        self.t
            .mid
            .ok_or_else(|| GenError::Unsupported("the plan has no mid-tier temporaries".into()))
    }

    /// The list kernel with the mid tier: warps over segments of [`SEGMENT`] consecutive
    /// tiles. Huge tiles are appended to the huge list (an atomic cursor, as without the mid
    /// tier); the last lane stores the segment's mid entries and pieces in `mid_segments`, which
    /// the scan turns into where the segment's entries and pieces begin.
    pub(super) fn list_mid(&self, b: &mut KernelBuilder, mid: MidTemps) {
        let huge_from = super::huge_from(self.opts.block, true, true);
        self.segments(b, |s, b, seg, (lane, tile, size)| {
            let huge = super::is_huge(b, size, huge_from);
            let add = b.if_begin(huge, false);
            s.append(b, (s.t.count, s.t.list), tile);
            b.if_end(add);
            let (_, _, (ones, sums)) = Self::segment_scan(b, lane, size);
            let last = b.setp(Cmp::Eq, Type::U32, lane, Operand::Imm(31));
            let store = b.if_begin(last, false);
            let at = b.elem_addr(mid.segments, seg, 16);
            b.st(Space::Global, Type::U64, at, ones);
            let at = b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8));
            b.st(Space::Global, Type::U64, at, sums);
            b.if_end(store);
        });
    }

    /// Part of the scan kernel (one warp, `lane`, `lane64` and `lead` its lane, as u64, and
    /// lane 0): each segment's entries and pieces in `mid_segments` become the entries and
    /// pieces of the segments before it; the total entries go to `huge_count` word 2 and the
    /// total pieces to `mid_starts[entries]`. Each lane takes [`SCAN_RUN`] consecutive segments
    /// a round, so a round reads one contiguous stretch and the rounds are few: segments are
    /// `tiles / 32`, thousands for a matrix of a few hundred thousand rows.
    pub(super) fn scan_mid(&self, b: &mut KernelBuilder, lanes: (Reg, Reg, Reg), mid: MidTemps) {
        let (lane, lane64, lead) = lanes;
        let segs = self.segment_count(b);
        let runs = [0, 1].map(|_| b.mov(Type::U64, Operand::Imm(0)));
        let base = b.mov(Type::U64, Operand::Imm(0));
        let first = b.bin(BinOp::Mul, Type::U64, lane64, Operand::Imm(SCAN_RUN as i64));
        let rounds = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U64, base, segs);
        b.break_if(&rounds, over, false);
        let mine = b.bin(BinOp::Add, Type::U64, base, first);
        let mut slots = Vec::new();
        let sums = [0, 1].map(|_| b.mov(Type::U64, Operand::Imm(0)));
        for j in 0..SCAN_RUN {
            let seg = b.bin(BinOp::Add, Type::U64, mine, Operand::Imm(j as i64));
            let inside = b.setp(Cmp::Lt, Type::U64, seg, segs);
            let at = b.elem_addr(mid.segments, seg, 16);
            let pair = [0, 1].map(|_| b.mov(Type::U64, Operand::Imm(0)));
            let read = b.if_begin(inside, false);
            for (k, &x) in pair.iter().enumerate() {
                let word = b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8 * k as i64));
                let v = b.ld(Space::Global, Type::U64, word);
                b.mov_to(Type::U64, x, v);
            }
            b.if_end(read);
            for (sum, x) in sums.iter().zip(pair) {
                b.bin_to(BinOp::Add, Type::U64, *sum, *sum, x);
            }
            slots.push((inside, at, pair));
        }
        // Where the lane's first segment begins: the runs so far and the lanes before it.
        let at_lane = [0, 1].map(|k| {
            let incl = super::warp_scan(b, lane, sums[k]);
            let before = b.bin(BinOp::Sub, Type::U64, incl, sums[k]);
            let total = shfl(b, ShflMode::Idx, incl, Type::U64, Operand::Imm(31));
            let from = b.bin(BinOp::Add, Type::U64, runs[k], before);
            b.bin_to(BinOp::Add, Type::U64, runs[k], runs[k], total);
            from
        });
        for (inside, at, pair) in slots {
            let write = b.if_begin(inside, false);
            for (k, (&from, x)) in at_lane.iter().zip(pair).enumerate() {
                let word = b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8 * k as i64));
                b.st(Space::Global, Type::U64, word, from);
                b.bin_to(BinOp::Add, Type::U64, from, from, x);
            }
            b.if_end(write);
        }
        b.bin_to(
            BinOp::Add,
            Type::U64,
            base,
            base,
            Operand::Imm(32 * SCAN_RUN as i64),
        );
        b.loop_end(rounds);
        let last = b.if_begin(lead, false);
        let at = self.t.count_at(b, MID_COUNT);
        b.st(Space::Global, Type::U64, at, runs[0]);
        let at = b.elem_addr(mid.starts, runs[0], 8);
        b.st(Space::Global, Type::U64, at, runs[1]);
        b.if_end(last);
    }

    /// The place kernel (after the scan): warps over the list kernel's segments again; each mid
    /// tile takes its slot in tile order, `mid_list[e] = tile`, `mid_starts[e]` its first
    /// piece, and its pieces' `mid_entries`. In tile order, pieces of neighbouring rows are
    /// walked together: on a banded matrix they read the same rows of B while those are in
    /// L2, where a list in the order of an atomic cursor spread them over the whole matrix
    /// (SpMM at k = 128 on such a matrix: a fifth of the mid walk's reads missed L2 before).
    pub(super) fn mid_place(&self, b: &mut KernelBuilder) -> Result<(), GenError> {
        let mid = self.mid()?;
        self.segments(b, |_, b, seg, (lane, tile, size)| {
            let (one, pieces, (ones, sums)) = Self::segment_scan(b, lane, size);
            let at = b.elem_addr(mid.segments, seg, 16);
            let entries_before = b.ld(Space::Global, Type::U64, at);
            let at = b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8));
            let pieces_before = b.ld(Space::Global, Type::U64, at);
            let listed = b.setp(Cmp::Ne, Type::U64, one, Operand::Imm(0));
            let place = b.if_begin(listed, false);
            let e = b.bin(BinOp::Add, Type::U64, entries_before, ones);
            let e = b.bin(BinOp::Sub, Type::U64, e, Operand::Imm(1));
            let start = b.bin(BinOp::Add, Type::U64, pieces_before, sums);
            let start = b.bin(BinOp::Sub, Type::U64, start, pieces);
            let at = b.elem_addr(mid.list, e, 8);
            b.st(Space::Global, Type::U64, at, tile);
            let at = b.elem_addr(mid.starts, e, 8);
            b.st(Space::Global, Type::U64, at, start);
            Self::map_pieces(b, mid, e, (start, pieces));
            b.if_end(place);
        });
        Ok(())
    }

    /// `⌈tiles / SEGMENT⌉`.
    fn segment_count(&self, b: &mut KernelBuilder) -> Reg {
        let up = b.bin(
            BinOp::Add,
            Type::U64,
            self.layout.tiles,
            Operand::Imm(SEGMENT as i64 - 1),
        );
        let shift = Operand::Imm(SEGMENT.trailing_zeros().into());
        b.bin(BinOp::Shr, Type::U64, up, shift)
    }

    /// A warp per segment of [`SEGMENT`] consecutive tiles, striding over the segments; `each`
    /// gets the segment, the lane (`.u32`), its tile and the tile's atoms (0 past the last
    /// tile). Every lane of a warp runs every step, so `each` may shuffle over the warp.
    fn segments(
        &self,
        b: &mut KernelBuilder,
        mut each: impl FnMut(&Self, &mut KernelBuilder, Reg, (Reg, Reg, Reg)),
    ) {
        let (warp, warps, lane) = grid_warps(b);
        let lane64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane);
        let segs = self.segment_count(b);
        let seg = b.mov(Type::U64, warp);
        let walk = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U64, seg, segs);
        b.break_if(&walk, over, false);
        let first = b.bin(
            BinOp::Shl,
            Type::B64,
            seg,
            Operand::Imm(SEGMENT.trailing_zeros().into()),
        );
        let tile = b.bin(BinOp::Add, Type::U64, first, lane64);
        let inside = b.setp(Cmp::Lt, Type::U64, tile, self.layout.tiles);
        let size = b.mov(Type::U64, Operand::Imm(0));
        let read = b.if_begin(inside, false);
        let (begin, end) = self.layout.atoms(b, tile);
        b.bin_to(BinOp::Sub, Type::U64, size, end, begin);
        b.if_end(read);
        each(self, b, seg, (lane, tile, size));
        b.bin_to(BinOp::Add, Type::U64, seg, seg, warps);
        b.loop_end(walk);
    }

    /// The lane's tile of `size` atoms in the mid tier ([`Self::mid_pieces`]: `one`, `pieces`,
    /// u64) and the inclusive warp scans of both over the segment (u64). A segment holds at most
    /// 32 mid tiles of at most [`MAX_PIECES`] pieces, so both counts fit 16 bits and one 32-bit
    /// scan of `pieces << 16 | one` does both.
    fn segment_scan(b: &mut KernelBuilder, lane: Reg, size: Reg) -> (Reg, Reg, (Reg, Reg)) {
        let (one, pieces) = Self::mid_pieces(b, size);
        let high = b.bin(BinOp::Shl, Type::B64, pieces, Operand::Imm(16));
        let packed = b.bin(BinOp::Or, Type::B64, high, one);
        let packed = b.cvt(Rounding::None, Type::U32, Type::U64, packed);
        let packed = super::warp_scan_of(b, lane, packed, Type::U32);
        let low = b.bin(BinOp::And, Type::B32, packed, Operand::Imm(0xFFFF));
        let ones = b.cvt(Rounding::None, Type::U64, Type::U32, low);
        let high = b.bin(BinOp::Shr, Type::U32, packed, Operand::Imm(16));
        let sums = b.cvt(Rounding::None, Type::U64, Type::U32, high);
        (one, pieces, (ones, sums))
    }

    /// A tile of `size` atoms in the mid tier (at least [`MID_THRESHOLD`], below the huge
    /// tier's [`super::MID_CEILING`]): `(1, its pieces)`, else `(0, 0)`.
    fn mid_pieces(b: &mut KernelBuilder, size: Reg) -> (Reg, Reg) {
        let from = b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(MID_THRESHOLD as i64));
        let below = b.setp(
            Cmp::Lt,
            Type::U64,
            size,
            Operand::Imm(super::MID_CEILING as i64),
        );
        let up = b.bin(BinOp::Add, Type::U64, size, Operand::Imm(PIECE as i64 - 1));
        let count = b.bin(
            BinOp::Shr,
            Type::U64,
            up,
            Operand::Imm(PIECE.trailing_zeros().into()),
        );
        let zero = Operand::Imm(0);
        let count = b.selp(Type::U64, count, zero.clone(), from);
        let pieces = b.selp(Type::U64, count, zero.clone(), below);
        let one = b.selp(Type::U64, Operand::Imm(1), zero.clone(), from);
        let one = b.selp(Type::U64, one, zero, below);
        (one, pieces)
    }

    /// `mid_entries[p] = e` for entry `e`'s pieces `start .. start + pieces` (part of the scan,
    /// so cached with the lists): a piece finds its entry with one load, where a binary search
    /// of the starts was a chain of `log2(entries)` dependent loads before the walk's own (some
    /// 14 of the 30 round trips to memory of a piece on an R-MAT graph of 2^18 rows).
    fn map_pieces(b: &mut KernelBuilder, mid: MidTemps, e: Reg, (start, pieces): (Reg, Reg)) {
        let entry = b.cvt(Rounding::None, Type::U32, Type::U64, e);
        let q = b.mov(Type::U64, Operand::Imm(0));
        let fill = b.loop_begin();
        let filled = b.setp(Cmp::Ge, Type::U64, q, pieces);
        b.break_if(&fill, filled, false);
        let p = b.bin(BinOp::Add, Type::U64, start, q);
        let at = b.elem_addr(mid.entries, p, 4);
        b.st(Space::Global, Type::U32, at, entry);
        b.bin_to(BinOp::Add, Type::U64, q, q, Operand::Imm(1));
        b.loop_end(fill);
    }

    /// The mid list's length and its total pieces.
    fn mid_sizes(&self, b: &mut KernelBuilder, mid: MidTemps) -> (Reg, Reg) {
        let at = self.t.count_at(b, MID_COUNT);
        let entries = b.ld(Space::Global, Type::U64, at);
        let at = b.elem_addr(mid.starts, entries, 8);
        let pieces = b.ld(Space::Global, Type::U64, at);
        (entries, pieces)
    }

    /// Entry `e`'s tile and first and next pieces' indices.
    fn mid_entry(&self, b: &mut KernelBuilder, mid: MidTemps, e: Reg) -> (Reg, Reg, Reg) {
        let at = b.elem_addr(mid.list, e, 8);
        let tile = b.ld(Space::Global, Type::U64, at);
        let at = b.elem_addr(mid.starts, e, 8);
        let first = b.ld(Space::Global, Type::U64, at);
        let next_at = b.bin(BinOp::Add, Type::U64, at, Operand::Imm(8));
        let next = b.ld(Space::Global, Type::U64, next_at);
        (tile, first, next)
    }

    /// Piece `p`: its entry's tile and its atoms.
    fn piece(&self, b: &mut KernelBuilder, mid: MidTemps, p: Reg) -> Piece {
        let at = b.elem_addr(mid.entries, p, 4);
        let e = b.ld(Space::Global, Type::U32, at);
        let e = b.cvt(Rounding::None, Type::U64, Type::U32, e);
        let (tile, first, next) = self.mid_entry(b, mid, e);
        let (begin, end) = self.layout.atoms(b, tile);
        let k = b.bin(BinOp::Sub, Type::U64, p, first);
        let skip = b.bin(
            BinOp::Shl,
            Type::B64,
            k,
            Operand::Imm(PIECE.trailing_zeros().into()),
        );
        let from = b.bin(BinOp::Add, Type::U64, begin, skip);
        let to = b.bin(BinOp::Add, Type::U64, from, Operand::Imm(PIECE as i64));
        let to = b.bin(BinOp::Min, Type::U64, to, end);
        let count = b.bin(BinOp::Sub, Type::U64, next, first);
        let whole = b.setp(Cmp::Eq, Type::U64, count, Operand::Imm(1));
        Piece {
            tile,
            begin,
            from,
            to,
            whole,
        }
    }

    /// The mid tier's walk (see the module docs).
    pub(super) fn mid_walk(&self, b: &mut KernelBuilder, in_parts: bool) -> Result<(), GenError> {
        if self.layout.lanes.is_none() {
            return Err(GenError::Unsupported(
                "the split's mid tier needs lanes".into(),
            ));
        }
        let mid = self.mid()?;
        let body = (self.body, self.params);
        self.layout
            .per_lane_blocking_vec(b, body, &SPLIT_LANE_BLOCKING, |b, r| {
                self.mid_walk_by(b, mid, (r, in_parts))
            })
    }

    /// [`Split::mid_walk`] for one lane blocking, in [`Parts`] or not.
    fn mid_walk_by(
        &self,
        b: &mut KernelBuilder,
        mid: MidTemps,
        (blocking, in_parts): (Blocking, bool),
    ) -> Result<(), GenError> {
        let l = self.layout;
        let who = (self.body, self.opts.checked);
        let block = self.opts.block.min(MID_WALK_BLOCK);
        let threads = if in_parts {
            PARTS_WALK_THREADS
        } else {
            LANE_WALK_THREADS
        };
        l.aim_lane_walk_occupancy(b, who, (block, threads));
        let (_, pieces) = self.mid_sizes(b, mid);
        let parts = in_parts.then(|| {
            let groups = l.lane_groups(b, blocking.per_thread);
            Parts::new(b, groups)
        });
        let positions = match &parts {
            Some(parts) => b.bin(BinOp::Shl, Type::B64, pieces, parts.log),
            None => pieces,
        };
        let ls = l.lane_stride_begin(b, positions, (blocking.per_thread, Some(32)));
        let p = match &parts {
            Some(parts) => parts.piece(b, ls.position),
            None => ls.position,
        };
        let piece = self.piece(b, mid, p);
        let (from, to) = match &parts {
            Some(parts) => parts.range(b, ls.position, (piece.from, piece.to)),
            None => (piece.from, piece.to),
        };
        let set = l.lane_set(b, self.body, (ls.group, ls.groups), blocking);
        let accs = self.identities(b, &set)?;
        let w = Walker {
            body: self.body,
            params: self.params,
            checked: self.opts.checked,
            lane: None,
        };
        let atoms = (piece.begin, from, to);
        w.walk_lanes(b, Some(piece.tile), atoms, 1, Some(&set), |b, r, x| {
            if let (Some(&acc), Some(x), Some((ty, red))) = (accs.get(r), x, self.body.reduce) {
                reduce_combine(b, ty, red, acc, x)?;
            }
            Ok(())
        })?;
        let Some(reduce) = self.body.reduce else {
            Layout::lane_stride_end(b, ls);
            return Ok(());
        };
        if let Some(parts) = &parts {
            parts.combine(b, (ls.position, block), &accs, reduce)?;
            let rest = parts.rest(b, ls.position);
            b.bra_if(rest, false, ls.next);
        }
        let (ty, lanes_count) = (reduce.0, l.lanes.expect("checked by mid_walk"));
        for (r, (&acc, valid)) in accs.iter().zip(&set.valid).enumerate() {
            let masked = valid.map(|v| b.if_begin(v, false));
            let lane = set.lane(b, r);
            let mut split = b.if_begin(piece.whole, true);
            let row = b.bin(BinOp::Mul, Type::U64, p, lanes_count);
            let slot = b.bin(BinOp::Add, Type::U64, row, lane);
            let at = b.elem_addr(mid.partials, slot, 8);
            b.st(Space::Global, ptx_type(ty), at, acc);
            b.if_else(&mut split);
            let out = (piece.tile, Some(lane));
            l.store_output(b, self.body, self.params, out, (acc, ty), self.opts.checked)?;
            b.if_end(split);
            if let Some(scope) = masked {
                b.if_end(scope);
            }
        }
        Layout::lane_stride_end(b, ls);
        Ok(())
    }

    /// One accumulator per lane of `set`, at the reduction's identity (none without `reduce`).
    fn identities(&self, b: &mut KernelBuilder, set: &LaneSet) -> Result<Vec<Reg>, GenError> {
        match self.body.reduce {
            Some((ty, red)) => (0..set.per_thread())
                .map(|_| reduce_identity(b, ty, red))
                .collect(),
            None => Ok(Vec::new()),
        }
    }

    /// The mid tier's fix-up (see the module docs).
    pub(super) fn mid_fixup(&self, b: &mut KernelBuilder) -> Result<(), GenError> {
        if self.body.reduce.is_none() {
            return Ok(());
        }
        let lanes = self
            .layout
            .lanes
            .ok_or_else(|| GenError::Unsupported("the split's mid tier needs lanes".into()))?;
        let mid = self.mid()?;
        per_lane_blocking(b, lanes, &SPLIT_LANE_BLOCKING, |b, r| {
            self.mid_fixup_by(b, mid, r)
        })
    }

    /// [`Split::mid_fixup`] for `per_thread` lanes per thread.
    fn mid_fixup_by(
        &self,
        b: &mut KernelBuilder,
        mid: MidTemps,
        per_thread: u32,
    ) -> Result<(), GenError> {
        let Some((ty, red)) = self.body.reduce else {
            return Ok(());
        };
        let l = self.layout;
        let lanes_count = l.lanes.expect("checked by mid_fixup");
        let (entries, _) = self.mid_sizes(b, mid);
        let ls = l.lane_stride_begin(b, entries, (per_thread, Some(32)));
        let (tile, first, next) = self.mid_entry(b, mid, ls.position);
        // A tile of one piece was stored by the walk.
        let count = b.bin(BinOp::Sub, Type::U64, next, first);
        let single = b.setp(Cmp::Le, Type::U64, count, Operand::Imm(1));
        b.bra_if(single, false, ls.next);
        let set = l.lane_set(
            b,
            self.body,
            (ls.group, ls.groups),
            Blocking::strided(per_thread),
        );
        let accs = self.identities(b, &set)?;
        // Masked lanes read their tile's last lane (in bounds) and store nothing.
        let last = b.bin(BinOp::Sub, Type::U64, lanes_count, Operand::Imm(1));
        let read: Vec<Reg> = (0..set.per_thread())
            .map(|r| {
                let lane = set.lane(b, r);
                b.bin(BinOp::Min, Type::U64, lane, last)
            })
            .collect();
        let p = b.mov(Type::U64, first);
        let folds = b.loop_begin();
        let past = b.setp(Cmp::Ge, Type::U64, p, next);
        b.break_if(&folds, past, false);
        let row = b.bin(BinOp::Mul, Type::U64, p, lanes_count);
        for (&acc, &lane) in accs.iter().zip(&read) {
            let slot = b.bin(BinOp::Add, Type::U64, row, lane);
            let at = b.elem_addr(mid.partials, slot, 8);
            let v = b.ld(Space::Global, ptx_type(ty), at);
            reduce_combine(b, ty, red, acc, v)?;
        }
        b.bin_to(BinOp::Add, Type::U64, p, p, Operand::Imm(1));
        b.loop_end(folds);
        for (r, (&acc, valid)) in accs.iter().zip(&set.valid).enumerate() {
            let masked = valid.map(|v| b.if_begin(v, false));
            let out = (tile, Some(set.lane(b, r)));
            l.store_output(b, self.body, self.params, out, (acc, ty), self.opts.checked)?;
            if let Some(scope) = masked {
                b.if_end(scope);
            }
        }
        Layout::lane_stride_end(b, ls);
        Ok(())
    }
}
