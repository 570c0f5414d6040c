//! The split's mid tier, with lanes: tiles of [`MID_THRESHOLD`] up to [`super::MID_CEILING`] atoms
//! cut into pieces of [`PIECE`] atoms, each walked like a short tile by the threads of its lanes,
//! and folded back per tile in piece order (see the parent module's docs).
//!
//! Kernels (entries `{base}_mid_walk`, `_mid_fixup`), after the list and scan, which build the
//! mid list (`mid_list`, in `huge_count` word 2 its length), its piece starts (`mid_starts[e]`
//! = the pieces of the entries before `e`, the total after the last) and each piece's entry
//! (`mid_entries[p]`):
//! 1. **walk**: (piece, lane group) pairs on the grid of [`Layout::lane_stride_begin`], as the
//!    group family takes (tile, lane group) pairs: `W` threads side by side per piece, each
//!    owning `R` lanes ([`per_lane_blocking`]). A piece reads its entry from `mid_entries`,
//!    walks its atoms in order once for its `R` lanes ([`Walker::walk_lanes`]) and stores
//!    one partial per lane at `mid_partials[piece × lanes + lane]`; a tile of one piece (exactly
//!    [`PIECE`] atoms) stores its output instead.
//! 2. **fixup** (with `reduce`): (entry, lane group) pairs; each thread folds its lanes' partials
//!    over the entry's pieces in piece order and stores the tile's output (the epilogue, if any,
//!    sees only this final value).
//!
//! Determinism: a piece's atoms and the fold's order are fixed by the tile's size alone, so two
//! launches agree bitwise; no atomics touch a value.

use std::borrow::Cow;

use super::{MidTemps, Split, MID_COUNT, MID_FIXUP, MID_THRESHOLD, MID_TRACK, MID_WALK, PIECE};
use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity};
use crate::ir::{BinOp, Cmp, Operand, Reg, Rounding, ShflMode, Space, Type};
use crate::plan::{Grid, KernelPlan, TempCount};
use crate::primitives::layout::{per_lane_blocking, Blocking, LaneSet};
use crate::primitives::walker::Walker;
use crate::primitives::warp::shfl;
use crate::primitives::Layout;
use crate::{GenError, Options};

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
    let kernel = |suffix: &str, block: u32, grid: Grid| KernelPlan {
        entry: Cow::Owned(format!("{base}{suffix}")),
        block,
        grid,
        dynamic_shared: 0,
        min_tile_atoms: Some(MID_THRESHOLD),
        min_grid: None,
        track: MID_TRACK,
    };
    // One block per `2 · block` atoms: a group of `W` threads per piece leaves a block
    // `block / W ≥ 8` pieces at once (`W ≤ 32`), at most `block / 16` pieces per `2 · block`
    // atoms. The walk's lane registers cap it at 256 threads, as the huge tier's.
    let walk = Grid::PerAtoms {
        atoms: 2 * opts.block,
    };
    let mut out = vec![kernel(MID_WALK, opts.block.min(256), walk)];
    if body.reduce.is_some() {
        let fixup = Grid::CoverItems { per_thread: 1 };
        out.push(kernel(MID_FIXUP, opts.block, fixup));
    }
    out
}

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

impl Split<'_> {
    fn mid(&self) -> Result<MidTemps, GenError> {
        self.t
            .mid
            .ok_or_else(|| GenError::Unsupported("the plan has no mid-tier temporaries".into()))
    }

    /// Part of the scan kernel (one warp, `lane`, `lane64` and `lead` its lane, as u64, and
    /// lane 0): `mid_starts[e]`, the pieces of the mid entries before `e`, and the total after
    /// the last.
    pub(super) fn scan_mid(&self, b: &mut KernelBuilder, lanes: (Reg, Reg, Reg), mid: MidTemps) {
        let (lane, lane64, lead) = lanes;
        let at = self.t.count_at(b, MID_COUNT);
        let entries = b.ld(Space::Global, Type::U64, at);
        let run = b.mov(Type::U64, Operand::Imm(0));
        let base = b.mov(Type::U64, Operand::Imm(0));
        let rounds = b.loop_begin();
        let over = b.setp(Cmp::Ge, Type::U64, base, entries);
        b.break_if(&rounds, over, false);
        let e = b.bin(BinOp::Add, Type::U64, base, lane64);
        let inside = b.setp(Cmp::Lt, Type::U64, e, entries);
        let size = self.entry_size_in(b, mid.list, e, inside);
        let up = b.bin(BinOp::Add, Type::U64, size, Operand::Imm(PIECE as i64 - 1));
        let pieces = b.bin(
            BinOp::Shr,
            Type::U64,
            up,
            Operand::Imm(PIECE.trailing_zeros().into()),
        );
        let incl = super::warp_scan(b, lane, pieces);
        let write = b.if_begin(inside, false);
        let excl = b.bin(BinOp::Sub, Type::U64, incl, pieces);
        let start = b.bin(BinOp::Add, Type::U64, run, excl);
        let at = b.elem_addr(mid.starts, e, 8);
        b.st(Space::Global, Type::U64, at, start);
        Self::map_pieces(b, mid, e, (start, pieces));
        b.if_end(write);
        let total = shfl(b, ShflMode::Idx, incl, Type::U64, Operand::Imm(31));
        b.bin_to(BinOp::Add, Type::U64, run, run, total);
        b.bin_to(BinOp::Add, Type::U64, base, base, Operand::Imm(32));
        b.loop_end(rounds);
        let last = b.if_begin(lead, false);
        let at = b.elem_addr(mid.starts, entries, 8);
        b.st(Space::Global, Type::U64, at, run);
        b.if_end(last);
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
    pub(super) fn mid_walk(&self, b: &mut KernelBuilder) -> Result<(), GenError> {
        if self.layout.lanes.is_none() {
            return Err(GenError::Unsupported(
                "the split's mid tier needs lanes".into(),
            ));
        }
        let mid = self.mid()?;
        let body = (self.body, self.params);
        self.layout
            .per_lane_blocking_vec(b, body, |b, r| self.mid_walk_by(b, mid, r))
    }

    /// [`Split::mid_walk`] for `per_thread` lanes per thread.
    fn mid_walk_by(
        &self,
        b: &mut KernelBuilder,
        mid: MidTemps,
        blocking: Blocking,
    ) -> Result<(), GenError> {
        let l = self.layout;
        let (_, pieces) = self.mid_sizes(b, mid);
        let ls = l.lane_stride_begin(b, pieces, (blocking.per_thread, Some(32)));
        let p = ls.position;
        let piece = self.piece(b, mid, p);
        let set = l.lane_set(b, self.body, (ls.group, ls.groups), blocking);
        let accs = self.identities(b, &set)?;
        let w = Walker {
            body: self.body,
            params: self.params,
            checked: self.opts.checked,
            lane: None,
        };
        let range = (piece.begin, piece.from, piece.to);
        w.walk_lanes(b, Some(piece.tile), range, 1, Some(&set), |b, r, x| {
            if let (Some(&acc), Some(x), Some((ty, red))) = (accs.get(r), x, self.body.reduce) {
                reduce_combine(b, ty, red, acc, x)?;
            }
            Ok(())
        })?;
        if let Some((ty, _)) = self.body.reduce {
            let lanes_count = l.lanes.expect("checked by mid_walk");
            for ((&acc, &lane), valid) in accs.iter().zip(&set.lanes).zip(&set.valid) {
                let masked = valid.map(|v| b.if_begin(v, false));
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
        }
        Layout::lane_stride_end(b, ls);
        Ok(())
    }

    /// One accumulator per lane of `set`, at the reduction's identity (none without `reduce`).
    fn identities(&self, b: &mut KernelBuilder, set: &LaneSet) -> Result<Vec<Reg>, GenError> {
        match self.body.reduce {
            Some((ty, red)) => set
                .lanes
                .iter()
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
        per_lane_blocking(b, lanes, |b, r| self.mid_fixup_by(b, mid, r))
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
        let read: Vec<Reg> = set
            .lanes
            .iter()
            .map(|&lane| b.bin(BinOp::Min, Type::U64, lane, last))
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
        for ((&acc, &lane), valid) in accs.iter().zip(&set.lanes).zip(&set.valid) {
            let masked = valid.map(|v| b.if_begin(v, false));
            let out = (tile, Some(lane));
            l.store_output(b, self.body, self.params, out, (acc, ty), self.opts.checked)?;
            if let Some(scope) = masked {
                b.if_end(scope);
            }
        }
        Layout::lane_stride_end(b, ls);
        Ok(())
    }
}
