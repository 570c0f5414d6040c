//! The tile-set layout contract every schedule shares: how many work items there are, which tile
//! an item is, where a tile's atoms begin and end, and where its output goes.

use crate::body::{Body, ParamKind, Ty};
use crate::builder::KernelBuilder;
use crate::codegen::{check_index, load_offset, offset_addr, ptx_type, CsrRegs, KernelParams};
use crate::ir::{BinOp, Label, Operand, Reg, Rounding, Space, Type};
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
