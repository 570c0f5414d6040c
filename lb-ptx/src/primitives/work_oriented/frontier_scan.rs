//! With a frontier (`Options::tiles`), `merge_path` and `nonzero_split` decompose the atoms of the
//! frontier's tiles: three kernels first scan the tile sizes into `tile_offsets`
//! (`tile_offsets[i]` = atoms of frontier entries `0..i`, `frontier.len() + 1` entries), which
//! the work-oriented kernels then use in place of `row_offsets`.
//!
//! 1. `…_tile_sums`: block `c` of the chunks of `block` entries sums its entries' sizes into
//!    `chunk_sums[c]` (blocks stride over the chunks, so any grid works). The last block to
//!    finish (the threadfence-reduction pattern of [`super::fixup`]: a release fence and a count
//!    per block, the counter a [`TempRole::Counters`] word it puts back to zero) then scans
//!    `chunk_sums` in place, exclusive, `block` chunks at a time with a running total, and
//!    writes the total to `tile_offsets[len]`. Only the blocks that own a chunk count
//!    themselves (block 0 always), so a grid bounded by the whole graph's atoms does not queue
//!    a hundred thousand atomics on one word for a frontier of a few chunks.
//! 2. `…_tile_offsets`: each chunk scans its sizes again and adds its chunk's prefix.
//!
//! Scanning the chunk sums in the first kernel instead of a one-block kernel of their own saves a
//! launch per frontier step: 11–14% of the kernel time of a BFS on a road grid, whose steps are
//! short (docs/benchmarks.md, twenty-eighth session).
//!
//! All sums are integer additions, so the result is exact and the same on every run. Both
//! kernels take the main kernel's grid: the plan's first kernel fixes the size of the per-block
//! temporaries, which must be the main kernel's. A tile repeated in the frontier is reduced
//! once per entry, each entry storing the whole result to the same output element; for `sum`,
//! copies split differently across threads may round differently, and which copy lands last is
//! not specified (min and max are exact, so their copies agree).

use std::borrow::Cow;

use super::{fixup, temp_index};
use crate::body::Body;
use crate::builder::KernelBuilder;
use crate::codegen::KernelParams;
use crate::ir::{AtomOp, BinOp, Cmp, Kernel, Op, Operand, Reg, Rounding, Space, Special, Type};
use crate::plan::{Grid, KernelPlan, OffsetWidth, Plan, Temp, TempCount, TempRole};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// `tile_offsets`: `len + 1` entries of the plan's offset width ([`Plan::offsets`]).
pub const TILE_OFFSETS: &str = "tile_offsets";
/// `main_blocks`: one u64, the main kernel's blocks per lane, stored by the first kernel.
pub const MAIN_BLOCKS: &str = "main_blocks";
/// `tile_squares`: one u64, the sum over the frontier's entries of `min(size, SQUARE_CAP)²`,
/// when the plan asks for it ([`squares_temp`]): with `tile_offsets[len]` and `len`, the
/// spread of the frontier's tile sizes, which `multi_phase` reads to pick its partition search
/// on the device.
pub const TILE_SQUARES: &str = "tile_squares";
/// The largest size a tile counts with in [`TILE_SQUARES`]: `2^16`, so a square fits in 32 bits
/// and the sum in 64 for any frontier of fewer than `2^32` entries. A larger tile then counts
/// as this one, which lowers the spread it adds; with a mean of at most 9 atoms per tile that
/// lowers the standard deviation below 8 only for frontiers of tens of millions of entries.
pub const SQUARE_CAP: u64 = 1 << 16;
/// `chunk_sums`: u64, one per chunk of `block` entries (at most `len + 1`).
const CHUNK_SUMS: &str = "chunk_sums";
/// The count of the first kernel's blocks that finished their chunks (one u64, a
/// [`TempRole::Counters`] word).
const SCAN_COUNTER: &str = "scan_counter";
const SCAN: &str = "lb_offsets_scan";

/// The temporaries the scan needs, `tile_offsets` of width `offsets`, `main_blocks`, and the
/// first kernel's count of finished blocks.
pub fn temps(offsets: OffsetWidth) -> [Temp; 4] {
    let per_tile = TempCount::PerTile {
        per_tile: 1,
        extra: 1,
    };
    let scratch = TempRole::Scratch;
    [
        (TILE_OFFSETS, offsets.bytes(), per_tile, scratch),
        (CHUNK_SUMS, 8, per_tile, scratch),
        (MAIN_BLOCKS, 8, TempCount::Fixed(1), scratch),
        (SCAN_COUNTER, 8, TempCount::Fixed(1), TempRole::Counters),
    ]
    .map(|(name, elem_bytes, count, role)| Temp {
        name: Cow::Borrowed(name),
        elem_bytes,
        count,
        zero: false,
        role,
    })
}

/// The index of [`TILE_SQUARES`] among the plan's temporaries, when it has one.
pub fn squares_slot(plan: &Plan) -> Option<usize> {
    plan.temps.iter().position(|t| t.name == TILE_SQUARES)
}

/// [`TILE_SQUARES`], zeroed at every launch (the first kernel adds each block's part).
pub fn squares_temp() -> Temp {
    Temp {
        name: Cow::Borrowed(TILE_SQUARES),
        elem_bytes: 8,
        count: TempCount::Fixed(1),
        zero: true,
        role: TempRole::Scratch,
    }
}

/// The scan's two kernels for the main kernel `main` and its grid.
pub fn kernel_plans(main: &str, block: u32, grid: Grid) -> [KernelPlan; KERNELS] {
    [("tile_sums", grid), ("tile_offsets", grid)].map(|(suffix, grid)| KernelPlan {
        entry: Cow::Owned(format!("{main}_{suffix}")),
        block,
        grid,
        dynamic_shared: 0,
        min_tile_atoms: None,
        min_grid: None,
        lanes: None,
        track: 0,
    })
}

/// The number of kernels the scan puts before the plan's own.
pub const KERNELS: usize = 2;

/// The scan's kernels, named as in the plan's first [`KERNELS`] kernels.
pub fn kernels(body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
    Ok(vec![
        chunks_kernel(body, opts, plan, 0, false)?,
        chunks_kernel(body, opts, plan, 1, true)?,
    ])
}

/// Inclusive sum of the block's u64 `value`s, Hillis–Steele in shared memory; the block's total
/// is then at `scan[block - 1]`. Ends with a barrier, so the caller may read any entry; the
/// caller must pass another barrier before the next call writes the array again.
fn block_scan(b: &mut KernelBuilder, block: i64, tid: Reg, value: Reg) -> (Reg, Reg) {
    let base = b.mov(Type::U64, Operand::Symbol(SCAN.into()));
    let mine = b.elem_addr(base, tid, 8);
    let sum = b.mov(Type::U64, value);
    b.st(Space::Shared, Type::U64, mine, sum);
    b.emit(Op::BarSync);
    let other = b.reg_for(Type::U64);
    let mut d = 1;
    while d < block {
        let reads = b.setp(Cmp::Ge, Type::U64, tid, Operand::Imm(d));
        let scope = b.if_begin(reads, false);
        let addr = b.bin(BinOp::Sub, Type::U64, mine, Operand::Imm(8 * d));
        b.ld_to(Space::Shared, Type::U64, other, addr);
        b.if_end(scope);
        b.emit(Op::BarSync);
        let scope = b.if_begin(reads, false);
        b.bin_to(BinOp::Add, Type::U64, sum, sum, other);
        b.st(Space::Shared, Type::U64, mine, sum);
        b.if_end(scope);
        b.emit(Op::BarSync);
        d *= 2;
    }
    (sum, base)
}

/// `tile_offsets[i] = value` (u64 `i` and `value`) at the plan's offset width (a 32-bit plan
/// keeps the low half: its frontier's atoms fit in 32 bits).
fn store_offset(b: &mut KernelBuilder, width: OffsetWidth, base: Reg, i: Reg, value: Reg) {
    let addr = b.elem_addr(base, i, width.bytes());
    match width {
        OffsetWidth::U32 => {
            let low = b.cvt(Rounding::None, Type::U32, Type::U64, value);
            b.st(Space::Global, Type::U32, addr, low);
        }
        OffsetWidth::U64 => b.st(Space::Global, Type::U64, addr, value),
    }
}

/// The atoms of frontier entry `i` (u64), 0 when `i >= len` or (under `checked`) when the entry
/// is not a row, which [`Layout::tile`] records.
fn tile_size(
    b: &mut KernelBuilder,
    layout: &Layout,
    params: &KernelParams,
    i: Reg,
    checked: bool,
) -> Reg {
    let size = b.mov(Type::U64, Operand::Imm(0));
    let skip = b.label();
    let past = b.setp(Cmp::Ge, Type::U64, i, layout.tiles);
    b.bra_if(past, false, skip);
    let tile = layout.tile(b, params, i, checked, skip);
    let (begin, end) = layout.atoms(b, tile);
    b.bin_to(BinOp::Sub, Type::U64, size, end, begin);
    b.place(skip);
    size
}

/// Kernel 1 (`offsets == false`): chunk sums, then their scan by the last block to finish;
/// kernel 2 (`offsets == true`): tile offsets.
fn chunks_kernel(
    body: &Body,
    opts: &Options,
    plan: &Plan,
    index: usize,
    offsets: bool,
) -> Result<Kernel, GenError> {
    let mut b = KernelBuilder::new(plan.kernels[index].entry.as_ref());
    let params = KernelParams::declare(&mut b, body, plan)?;
    let layout = Layout::new(&mut b, body, opts, &params)?;
    let sums = params.temps[temp_index(plan, CHUNK_SUMS)?];
    let out = params.temps[temp_index(plan, TILE_OFFSETS)?];
    let squares = squares_slot(plan).map(|k| params.temps[k]);
    let block = i64::from(opts.block);
    b.shared(SCAN, 8, opts.block * 8);
    let tid = b.special(Special::TidX);
    let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let ctaid = b.special(Special::CtaidX);
    let c = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
    let nctaid = b.special(Special::NctaidX);
    let stride = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
    let up = b.bin(BinOp::Add, Type::U64, layout.tiles, Operand::Imm(block - 1));
    let chunks = b.bin(BinOp::Div, Type::U64, up, Operand::Imm(block));
    if !offsets {
        store_main_blocks(&mut b, &layout, &params, plan, c, tid, stride)?;
    }

    let each = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, c, chunks);
    b.break_if(&each, done, false);
    let first = b.bin(BinOp::Mul, Type::U64, c, Operand::Imm(block));
    let i = b.bin(BinOp::Add, Type::U64, first, tid);
    let size = tile_size(&mut b, &layout, &params, i, opts.checked);
    let (sum, _) = block_scan(&mut b, block, tid, size);
    if offsets {
        let inside = b.setp(Cmp::Lt, Type::U64, i, layout.tiles);
        let scope = b.if_begin(inside, false);
        let addr = b.elem_addr(sums, c, 8);
        let prefix = b.ld(Space::Global, Type::U64, addr);
        let before = b.bin(BinOp::Sub, Type::U64, sum, size);
        let offset = b.bin(BinOp::Add, Type::U64, prefix, before);
        store_offset(&mut b, params.offsets, out, i, offset);
        b.if_end(scope);
    } else {
        // The first scan's barriers are behind every thread, and its result is in registers:
        // the second may write the shared array at once.
        let squared = squares.map(|total| {
            let capped = b.bin(BinOp::Min, Type::U64, size, Operand::Imm(SQUARE_CAP as i64));
            let square = b.bin(BinOp::Mul, Type::U64, capped, capped);
            (total, block_scan(&mut b, block, tid, square).0)
        });
        let last = b.setp(Cmp::Eq, Type::U64, tid, Operand::Imm(block - 1));
        let scope = b.if_begin(last, false);
        let addr = b.elem_addr(sums, c, 8);
        b.st(Space::Global, Type::U64, addr, sum);
        if let Some((total, part)) = squared {
            b.atom_global(AtomOp::Add, Type::U64, (total, 0), part);
        }
        b.if_end(scope);
    }
    b.emit(Op::BarSync);
    b.bin_to(BinOp::Add, Type::U64, c, c, stride);
    b.loop_end(each);
    if !offsets {
        let counter = params.temps[temp_index(plan, SCAN_COUNTER)?];
        let skip = b.label();
        // The blocks that own a chunk, at least block 0 (an empty frontier's total is 0).
        let owners = b.bin(BinOp::Min, Type::U64, stride, chunks);
        let owners = b.bin(BinOp::Max, Type::U64, owners, Operand::Imm(1));
        let ctaid = b.special(Special::CtaidX);
        let ctaid = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
        let idle = b.setp(Cmp::Ge, Type::U64, ctaid, owners);
        b.bra_if(idle, false, skip);
        let last = fixup::finished_last(&mut b, tid, counter, owners);
        b.bra_if(last, true, skip);
        scan_chunk_sums(&mut b, &layout, &params, (sums, out), block, tid, chunks);
        b.place(skip);
    }
    Ok(b.finish())
}

/// Thread 0 of block 0 stores `main_blocks`: the grid's blocks over the lanes. This kernel's
/// grid is the main kernel's, sized on the host from a bound of the frontier's atoms that the
/// device cannot recompute ([`Grid::CoverWork`]'s `frontier`); every later kernel reads it.
fn store_main_blocks(
    b: &mut KernelBuilder,
    layout: &Layout,
    params: &KernelParams,
    plan: &Plan,
    ctaid: Reg,
    tid: Reg,
    grid: Reg,
) -> Result<(), GenError> {
    let slot = params.temps[temp_index(plan, MAIN_BLOCKS)?];
    let first = b.bin(BinOp::Or, Type::B64, tid, ctaid);
    let first = b.setp(Cmp::Eq, Type::U64, first, Operand::Imm(0));
    let scope = b.if_begin(first, false);
    let blocks = match layout.lanes {
        Some(lanes) => {
            let lanes = b.bin(BinOp::Max, Type::U64, lanes, Operand::Imm(1));
            b.bin(BinOp::Div, Type::U64, grid, lanes)
        }
        None => grid,
    };
    b.st(Space::Global, Type::U64, slot, blocks);
    b.if_end(scope);
    Ok(())
}

/// The last block of kernel 1 scans the chunk sums in place (exclusive), `block` at a time, and
/// writes the frontier's total atoms to `tile_offsets[len]`.
fn scan_chunk_sums(
    b: &mut KernelBuilder,
    layout: &Layout,
    params: &KernelParams,
    (sums, out): (Reg, Reg),
    block: i64,
    tid: Reg,
    chunks: Reg,
) {
    let total = b.mov(Type::U64, Operand::Imm(0));
    let base = b.mov(Type::U64, Operand::Imm(0));

    let each = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, base, chunks);
    b.break_if(&each, done, false);
    let k = b.bin(BinOp::Add, Type::U64, base, tid);
    let inside = b.setp(Cmp::Lt, Type::U64, k, chunks);
    let addr = b.elem_addr(sums, k, 8);
    let value = b.mov(Type::U64, Operand::Imm(0));
    let scope = b.if_begin(inside, false);
    b.ld_to(Space::Global, Type::U64, value, addr);
    b.if_end(scope);
    let (sum, scan) = block_scan(b, block, tid, value);
    let scope = b.if_begin(inside, false);
    let before = b.bin(BinOp::Sub, Type::U64, sum, value);
    let prefix = b.bin(BinOp::Add, Type::U64, total, before);
    b.st(Space::Global, Type::U64, addr, prefix);
    b.if_end(scope);
    let last = b.bin(BinOp::Add, Type::U64, scan, Operand::Imm(8 * (block - 1)));
    let chunk_total = b.ld(Space::Shared, Type::U64, last);
    b.bin_to(BinOp::Add, Type::U64, total, total, chunk_total);
    b.emit(Op::BarSync);
    b.bin_to(BinOp::Add, Type::U64, base, base, Operand::Imm(block));
    b.loop_end(each);

    let first = b.setp(Cmp::Eq, Type::U64, tid, Operand::Imm(0));
    let scope = b.if_begin(first, false);
    store_offset(b, params.offsets, out, layout.tiles, total);
    b.if_end(scope);
}
