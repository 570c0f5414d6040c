//! Atom walks: the body emitted for one atom, a thread's strided walk over a tile's atoms, and
//! the walk of a thread that owns whole tiles with several lanes each ([`own_tiles`]).
//!
//! The walk is where most of a kernel's instructions go, so it is written once, lean: the loop
//! is rotated (one test per atom, at the bottom), and the tile-set arrays the body reads at
//! `[atom]` are read through pointers that advance with the walk (strength reduction: one add per
//! array and atom instead of a shift and an add per load). The atom index itself is kept only
//! when the body uses it for something else, or under `checked`, whose guards compare it.

use crate::body::{ArrayRef, Body, ExprKind, Guards, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{
    array_info, emit_body, emit_body_lanes, reduce_combine, reduce_identity, AtomContext,
    KernelParams, LaneVector, MAX_ATOM_ADDRS,
};
use crate::ir::{BinOp, Cmp, Operand, Reg, Space, Type};
use crate::primitives::layout::{Blocking, LaneSet, Layout, LANE_WALK_THREADS};
use crate::{GenError, Options};

/// What an atom walk needs, per lane.
pub struct Walker<'a> {
    pub body: &'a Body,
    pub params: &'a KernelParams,
    pub checked: bool,
    pub lane: Option<Reg>,
}

/// One kept pointer: `array[atom]`'s address, the scaled first atom it started from, and the
/// element size.
struct Kept {
    array: ArrayRef,
    addr: Reg,
    offset: Reg,
    elem_bytes: u32,
}

impl Walker<'_> {
    /// Emits the body for `atom` of `tile` and returns its contribution.
    pub fn atom(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        atom: Reg,
        rank: Option<Reg>,
    ) -> Result<Option<Reg>, GenError> {
        let ctx = AtomContext {
            tile,
            atom: Some(atom),
            lane: self.lane,
            rank,
            ..AtomContext::default()
        };
        emit_body(b, self.body, self.params, &ctx, self.checked)
    }

    /// Walks atoms `begin + start, begin + start + stride, ..` below `end` of `tile` and returns
    /// the partial over them in that order (with `reduce`).
    pub fn stride(
        &self,
        b: &mut KernelBuilder,
        tile: impl Into<Option<Reg>>,
        (begin, end): (Reg, Reg),
        start: Reg,
        stride: u32,
    ) -> Result<Option<Reg>, GenError> {
        let tile = tile.into();
        let part = self
            .body
            .reduce
            .map(|(ty, red)| reduce_identity(b, ty, red))
            .transpose()?;
        let first = b.bin(BinOp::Add, Type::U64, begin, start);
        self.walk(b, tile, (begin, first, end), stride, |b, c| {
            if let (Some(part), Some(c), Some((ty, red))) = (part, c, self.body.reduce) {
                reduce_combine(b, ty, red, part, c)?;
            }
            Ok(())
        })?;
        Ok(part)
    }

    /// Emits the body for atoms `first, first + stride, ..` below `end` of `tile` (whose atoms
    /// begin at `begin`, for the rank), handing each contribution to `each` in atom order.
    /// `first` may be advanced in place: the caller must not read it afterwards.
    pub fn walk(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        range: (Reg, Reg, Reg),
        stride: u32,
        mut each: impl FnMut(&mut KernelBuilder, Option<Reg>) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        self.walk_lanes(b, tile, range, stride, None, |b, _, c| each(b, c))
    }

    /// [`Walker::walk`] for every lane of `lanes` (or for [`Walker::lane`] alone, as lane 0,
    /// with `None`): per atom, the body is emitted once per lane, one copy after the other, and
    /// `each` gets the lane's position in the set with its contribution. The copies share the
    /// atom's kept pointers, and their lane-invariant instructions (the atom's loads, `col * k`)
    /// are the same values, which [`crate::optimize`] computes once for all of them. A masked lane
    /// of a body with side effects is skipped with a branch; a pure body's is clamped in range by
    /// the [`LaneSet`], and its value reaches `each` to be dropped at the store.
    pub fn walk_lanes(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        (begin, first, end): (Reg, Reg, Reg),
        stride: u32,
        lanes: Option<&LaneSet>,
        mut each: impl FnMut(&mut KernelBuilder, usize, Option<Reg>) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let rank_wanted = self.body.roles.contains(&IndexRole::Rank);
        let kept = KeptAtoms::new(b, self.body, self.params, self.checked, first)?;
        let keep_atom = rank_wanted || kept.is_none();
        // The atom advances in place, so it must not be the rank's base.
        let first = if keep_atom && rank_wanted && first == begin {
            b.mov(Type::U64, first)
        } else {
            first
        };
        // Without the atom index the loop runs on the first pointer against its end.
        let bound = match &kept {
            Some(k) if !keep_atom => Some(k.bound(b, self.body, self.params, end)?),
            _ => None,
        };
        if let (1, Some(kept), Some(bound)) = (stride, &kept, bound) {
            return self.walk_pairs(b, tile, kept, bound, lanes, each);
        }
        let (done, top) = (b.label(), b.label());
        let empty = b.setp(Cmp::Ge, Type::U64, first, end);
        b.bra_if(empty, false, done);
        b.place(top);
        let ctx = AtomContext {
            tile,
            atom: keep_atom.then_some(first),
            lane: self.lane,
            rank: rank_wanted.then(|| b.bin(BinOp::Sub, Type::U64, first, begin)),
            atom_addrs: kept.as_ref().map(KeptAtoms::addrs).unwrap_or_default(),
            coalesced: stride >= 32,
            lane_scaled: [None; 4],
            atom32: None,
        };
        self.each_lane(b, &ctx, lanes, &mut each)?;
        if let Some(k) = &kept {
            k.advance(b, stride);
        }
        let more = match bound {
            Some((addr, stop)) => b.setp(Cmp::Lt, Type::U64, addr, stop),
            None => {
                let step = Operand::Imm(stride.into());
                b.bin_to(BinOp::Add, Type::U64, first, first, step);
                b.setp(Cmp::Lt, Type::U64, first, end)
            }
        };
        b.bra_if(more, false, top);
        b.place(done);
        Ok(())
    }

    /// The body for one atom (`ctx`) and every lane of `lanes`, each contribution handed to
    /// `each` (see [`Walker::walk_lanes`]).
    fn each_lane(
        &self,
        b: &mut KernelBuilder,
        ctx: &AtomContext,
        lanes: Option<&LaneSet>,
        each: &mut impl FnMut(&mut KernelBuilder, usize, Option<Reg>) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let Some(set) = lanes else {
            let c = emit_body(b, self.body, self.params, ctx, self.checked)?;
            return each(b, 0, c);
        };
        let pure = self.body.is_pure();
        let vector = set.vector.map(|v| LaneVector::new(v.width, v.lanes_param));
        let lanes = set.body.iter().zip(&set.valid).zip(&set.scaled);
        for (r, ((&lane, valid), &lane_scaled)) in lanes.enumerate() {
            let skip = match valid {
                Some(valid) if !pure => Some(b.if_begin(*valid, false)),
                _ => None,
            };
            let ctx = AtomContext {
                lane: Some(lane),
                lane_scaled,
                ..*ctx
            };
            let copy = vector.as_ref().map(|v| (v, r as u32));
            let c = emit_body_lanes(b, self.body, self.params, &ctx, self.checked, copy)?;
            each(b, r, c)?;
            if let Some(scope) = skip {
                b.if_end(scope);
            }
        }
        Ok(())
    }
}

impl Walker<'_> {
    /// The walk of consecutive atoms through kept pointers, several atoms per trip: two, or four
    /// over adjacent lanes ([`LaneSet::vector`]), while that many are left, then the rest in
    /// halving runs (at most one pair and one atom after quads). Fewer of the loop's adds, tests
    /// and branches per atom, and several independent gathers in flight; the contributions still
    /// reach `each` in atom order. `addr` runs from the first atom's address to `stop`, the
    /// end's.
    ///
    /// Four per trip pays with vector lanes, where an atom's lanes are one load: hand-written
    /// SpMM kernels of pieces of 32 atoms ran 5–16% faster at four than at two on an H100
    /// (R-MAT and power-law graphs, k = 32 and 128). With scalar lanes four were slower (the
    /// registers of 4 × R gathers; docs/spmm.md).
    fn walk_pairs(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        kept: &KeptAtoms,
        (addr, stop): (Reg, Reg),
        lanes: Option<&LaneSet>,
        mut each: impl FnMut(&mut KernelBuilder, usize, Option<Reg>) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        let per_trip: u32 = if lanes.is_some_and(|l| l.vector.is_some()) {
            4
        } else {
            2
        };
        let step = i64::from(kept.kept[0].elem_bytes);
        // The address of the trip's last atom, were a whole trip left. Signed comparisons against
        // it: with an empty tile at address 0 it is below every address.
        let last = b.bin(
            BinOp::Sub,
            Type::U64,
            stop,
            Operand::Imm(step * i64::from(per_trip - 1)),
        );
        let (tail, done, top) = (b.label(), b.label(), b.label());
        let few = b.setp(Cmp::Ge, Type::S64, addr, last);
        b.bra_if(few, false, tail);
        b.place(top);
        self.run_of(b, tile, kept, per_trip, lanes, &mut each)?;
        kept.advance(b, per_trip);
        let more = b.setp(Cmp::Lt, Type::S64, addr, last);
        b.bra_if(more, false, top);
        b.place(tail);
        // Fewer than `per_trip` atoms are left: runs of halving length, each taken when that
        // many are left.
        let mut run = per_trip / 2;
        while run >= 1 {
            // The last run's skip is the walk's end.
            let skip = if run == 1 { done } else { b.label() };
            let need = if run == per_trip - 1 {
                last
            } else {
                b.bin(
                    BinOp::Sub,
                    Type::U64,
                    stop,
                    Operand::Imm(step * i64::from(run)),
                )
            };
            let short = b.setp(Cmp::Gt, Type::S64, addr, need);
            b.bra_if(short, false, skip);
            self.run_of(b, tile, kept, run, lanes, &mut each)?;
            if run > 1 {
                kept.advance(b, run);
                b.place(skip);
            }
            run /= 2;
        }
        b.place(done);
        Ok(())
    }

    /// The body for `run` consecutive atoms from the kept pointers, in atom order.
    fn run_of(
        &self,
        b: &mut KernelBuilder,
        tile: Option<Reg>,
        kept: &KeptAtoms,
        run: u32,
        lanes: Option<&LaneSet>,
        each: &mut impl FnMut(&mut KernelBuilder, usize, Option<Reg>) -> Result<(), GenError>,
    ) -> Result<(), GenError> {
        for k in 0..run {
            let ctx = AtomContext {
                tile,
                lane: self.lane,
                atom_addrs: if k == 0 {
                    kept.addrs()
                } else {
                    kept.addrs_at(b, k)
                },
                ..AtomContext::default()
            };
            self.each_lane(b, &ctx, lanes, each)?;
        }
        Ok(())
    }
}

/// Pointers to `array[atom]` for every tile-set array the body reads at exactly the atom, for a
/// walk whose atoms advance by a fixed stride (the body then needs no atom index at all).
pub struct KeptAtoms {
    kept: Vec<Kept>,
}

impl KeptAtoms {
    /// The pointers at atom `first` (u64), or `None` when the body needs the atom index for
    /// something else: another use, a rank, or the guards of `checked` under `Guards::Every`.
    pub fn new(
        b: &mut KernelBuilder,
        body: &Body,
        params: &KernelParams,
        checked: bool,
        first: Reg,
    ) -> Result<Option<KeptAtoms>, GenError> {
        let uses = AtomUses::of(body);
        // The kept arrays are the tile set's, read at the atom: only `Guards::Every` tests them.
        if (checked && body.guards == Guards::Every) || uses.elsewhere || uses.arrays.is_empty() {
            return Ok(None);
        }
        let mut kept: Vec<Kept> = Vec::with_capacity(uses.arrays.len());
        for array in uses.arrays {
            let info = array_info(body, params, array)?;
            let elem_bytes = info.elem.size();
            // Arrays of one element size share the scaled index.
            let offset = match kept.iter().find(|k| k.elem_bytes == elem_bytes) {
                Some(k) => k.offset,
                None => scaled(b, first, elem_bytes),
            };
            let addr = b.bin(BinOp::Add, Type::U64, info.base, offset);
            kept.push(Kept {
                array,
                addr,
                offset,
                elem_bytes,
            });
        }
        Ok(Some(KeptAtoms { kept }))
    }

    /// The addresses for [`AtomContext::atom_addrs`].
    pub fn addrs(&self) -> [Option<(ArrayRef, Reg)>; MAX_ATOM_ADDRS] {
        let mut out = [None; MAX_ATOM_ADDRS];
        for (slot, k) in out.iter_mut().zip(&self.kept) {
            *slot = Some((k.array, k.addr));
        }
        out
    }

    /// The addresses of the elements `ahead` atoms past the kept ones (each an add that
    /// [`crate::optimize`] folds into the load's offset).
    pub(crate) fn addrs_at(
        &self,
        b: &mut KernelBuilder,
        ahead: u32,
    ) -> [Option<(ArrayRef, Reg)>; MAX_ATOM_ADDRS] {
        let mut out = [None; MAX_ATOM_ADDRS];
        for (slot, k) in out.iter_mut().zip(&self.kept) {
            let next = Operand::Imm((k.elem_bytes * ahead).into());
            *slot = Some((k.array, b.bin(BinOp::Add, Type::U64, k.addr, next)));
        }
        out
    }

    /// Moves every pointer `stride` atoms on.
    pub fn advance(&self, b: &mut KernelBuilder, stride: u32) {
        for k in &self.kept {
            let step = i64::from(k.elem_bytes) * i64::from(stride);
            b.bin_to(BinOp::Add, Type::U64, k.addr, k.addr, Operand::Imm(step));
        }
    }

    /// The first pointer and its value at atom `end`: the walk's loop bound.
    fn bound(
        &self,
        b: &mut KernelBuilder,
        body: &Body,
        params: &KernelParams,
        end: Reg,
    ) -> Result<(Reg, Reg), GenError> {
        let k = &self.kept[0];
        let base = array_info(body, params, k.array)?.base;
        Ok((k.addr, b.elem_addr(base, end, k.elem_bytes)))
    }
}

/// `index * elem_bytes` (u64).
fn scaled(b: &mut KernelBuilder, index: Reg, elem_bytes: u32) -> Reg {
    if elem_bytes.is_power_of_two() {
        let shift = Operand::Imm(elem_bytes.trailing_zeros().into());
        b.bin(BinOp::Shl, Type::B64, index, shift)
    } else {
        b.bin(
            BinOp::Mul,
            Type::U64,
            index,
            Operand::Imm(elem_bytes.into()),
        )
    }
}

/// How a body uses the atom index: the tile-set arrays it reads at exactly `[atom]` (each
/// once, at most [`MAX_ATOM_ADDRS`]), and whether it uses the index anywhere else.
struct AtomUses {
    arrays: Vec<ArrayRef>,
    elsewhere: bool,
}

impl AtomUses {
    fn of(body: &Body) -> AtomUses {
        let mut arrays: Vec<ArrayRef> = Vec::new();
        // Uses of the atom index, and those that are the whole index of a kept array's load.
        let (mut uses, mut kept) = (0, 0);
        body.block.any(&mut |_| false, &mut |e| {
            match &e.kind {
                ExprKind::Index(IndexRole::Atom) => uses += 1,
                ExprKind::Load {
                    array: array @ ArrayRef::Field(..),
                    index,
                } if matches!(index.kind, ExprKind::Index(IndexRole::Atom)) => {
                    if !arrays.contains(array) && arrays.len() < MAX_ATOM_ADDRS {
                        arrays.push(*array);
                    }
                    if arrays.contains(array) {
                        kept += 1;
                    }
                }
                _ => {}
            }
            false
        });
        AtomUses {
            arrays,
            elsewhere: uses > kept,
        }
    }
}

/// Where [`own_tiles`] finds its tiles.
#[derive(Clone, Copy, Debug)]
pub enum TileSource {
    /// The layout's tiles ([`Layout::tile`]: every tile, or the frontier's).
    Layout,
    /// Tiles `list[from + p]` for positions `p < count` of a `u64` list (a binning pass's
    /// reordered tiles).
    List { list: Reg, from: Reg, count: Reg },
}

/// Every thread takes whole tiles with `per_thread` lanes each, on the grid of (tile, lane group)
/// pairs of [`crate::primitives::layout::LaneStride`] with at most `cap` threads per tile: it
/// walks the tile's atoms once, in order, for all its lanes ([`Walker::walk_lanes`]), keeps one
/// partial per lane, and stores the lanes below the lane count. Tiles of at least `skip_from`
/// atoms are left alone (another kernel of the plan takes them). Needs `lanes`.
pub fn own_tiles(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    (params, layout): (&KernelParams, &Layout),
    source: TileSource,
    (blocking, cap): (Blocking, Option<u32>),
    skip_from: Option<u64>,
) -> Result<(), GenError> {
    let positions = match source {
        TileSource::Layout => layout.tiles,
        TileSource::List { count, .. } => count,
    };
    layout.aim_lane_walk_occupancy(b, (body, opts.checked), (opts.block, LANE_WALK_THREADS));
    let ls = layout.lane_stride_begin(b, positions, (blocking.per_thread, cap));
    let tile = match source {
        TileSource::Layout => layout.tile(b, params, ls.position, opts.checked, ls.next),
        TileSource::List { list, from, .. } => {
            let at = b.bin(BinOp::Add, Type::U64, from, ls.position);
            let addr = b.elem_addr(list, at, 8);
            b.ld(Space::Global, Type::U64, addr)
        }
    };
    let (begin, end) = layout.atoms(b, tile);
    if let Some(limit) = skip_from {
        let size = b.bin(BinOp::Sub, Type::U64, end, begin);
        let large = b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(limit as i64));
        b.bra_if(large, false, ls.next);
    }
    let set = layout.lane_set(b, body, (ls.group, ls.groups), blocking);
    tile_lanes(b, body, opts, (params, layout), tile, (begin, end), &set)?;
    Layout::lane_stride_end(b, ls);
    Ok(())
}

/// One thread's work on `tile` (atoms `begin..end`) for the lanes of `set`: the atoms walked once,
/// in order, for every lane, one partial per lane, each stored when its lane is below the lane
/// count.
pub fn tile_lanes(
    b: &mut KernelBuilder,
    body: &Body,
    opts: &Options,
    (params, layout): (&KernelParams, &Layout),
    tile: Reg,
    (begin, end): (Reg, Reg),
    set: &LaneSet,
) -> Result<(), GenError> {
    let accs = match body.reduce {
        Some((ty, r)) => (0..set.per_thread())
            .map(|_| reduce_identity(b, ty, r))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let walker = Walker {
        body,
        params,
        checked: opts.checked,
        lane: None,
    };
    let range = (begin, begin, end);
    walker.walk_lanes(b, Some(tile), range, 1, Some(set), |b, r, x| {
        if let (Some(&acc), Some(x), Some((ty, red))) = (accs.get(r), x, body.reduce) {
            reduce_combine(b, ty, red, acc, x)?;
        }
        Ok(())
    })?;
    layout.store_lanes(b, (body, params), tile, (set, &accs), opts.checked)
}
