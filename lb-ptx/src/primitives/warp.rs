//! Warp collectives on a value of any body type (ballot, shuffle, butterfly reduction) and the
//! block-batch slot loader that the block-cooperative schedules share.

use crate::body::{Reduce, Ty};
use crate::builder::{KernelBuilder, LoopScope};
use crate::codegen::{ptx_type, reduce_combine, KernelParams};
use crate::ir::{
    BinOp, Cmp, Op, Operand, Reg, RegClass, Rounding, ShflMode, Special, Type, VoteMode,
};
use crate::primitives::layout::Layout;
use crate::GenError;

/// Full-warp ballot of `pred`.
pub fn ballot(b: &mut KernelBuilder, pred: Reg) -> Reg {
    let votes = b.reg(RegClass::B32);
    b.emit(Op::Vote {
        mode: VoteMode::Ballot,
        dst: votes,
        a: pred.into(),
        mask: Operand::Imm(0xffff_ffff),
    });
    votes
}

fn shfl32(b: &mut KernelBuilder, mode: ShflMode, x: Reg, src: Operand) -> Reg {
    // The clamp operand: lane 0 bounds `up`; lane 31 bounds the other modes (PTX ISA shfl.sync).
    let c = if mode == ShflMode::Up { 0 } else { 31 };
    // `shfl.sync.b32` moves any 32-bit register, a float's too (PTX ISA): no bit casts.
    let dst = b.reg(x.class);
    b.emit(Op::Shfl {
        mode,
        dst,
        dst_pred: None,
        a: x.into(),
        b: src,
        c: Operand::Imm(c),
        mask: Operand::Imm(0xffff_ffff),
    });
    dst
}

/// A full-warp shuffle of a value of any width: 64-bit values move as two halves.
pub fn shfl(b: &mut KernelBuilder, mode: ShflMode, x: Reg, ty: Type, src: Operand) -> Reg {
    match ty.reg_class() {
        RegClass::B32 | RegClass::F32 => shfl32(b, mode, x, src),
        RegClass::B64 | RegClass::F64 => {
            let float = ty.reg_class() == RegClass::F64;
            let bits = if float { b.mov(Type::B64, x) } else { x };
            let lo = b.cvt(Rounding::None, Type::U32, Type::U64, bits);
            let hi64 = b.bin(BinOp::Shr, Type::U64, bits, Operand::Imm(32));
            let hi = b.cvt(Rounding::None, Type::U32, Type::U64, hi64);
            let lo2 = shfl32(b, mode, lo, src.clone());
            let hi2 = shfl32(b, mode, hi, src);
            let lo64 = b.cvt(Rounding::None, Type::U64, Type::U32, lo2);
            let hi64 = b.cvt(Rounding::None, Type::U64, Type::U32, hi2);
            let high = b.bin(BinOp::Shl, Type::B64, hi64, Operand::Imm(32));
            let joined = b.bin(BinOp::Or, Type::B64, high, lo64);
            if float {
                b.mov(Type::F64, joined)
            } else {
                joined
            }
        }
        RegClass::Pred => unreachable!("predicates are never shuffled"),
    }
}

/// Full-warp butterfly of `part`: a fixed tree over the lanes, every lane ends with the total.
pub fn butterfly(b: &mut KernelBuilder, part: Reg, reduce: (Ty, Reduce)) -> Result<(), GenError> {
    butterfly_with(b, part, reduce, 32, &mut |b, x, ty, d| {
        shfl(b, ShflMode::Bfly, x, ty, d)
    })
}

/// A butterfly over `width` lanes (a power of two up to 32) with the given `shfl(x, type,
/// distance)`: a fixed tree over the lanes' ranks, so every lane ends with the same bits (each
/// step combines the same two values and the operations commute). The group walk passes its
/// sub-warp shuffle here.
pub fn butterfly_with(
    b: &mut KernelBuilder,
    part: Reg,
    (ty, red): (Ty, Reduce),
    width: u32,
    shfl: &mut dyn FnMut(&mut KernelBuilder, Reg, Type, Operand) -> Reg,
) -> Result<(), GenError> {
    let mut d = 1;
    while d < width {
        let other = shfl(b, part, ptx_type(ty), Operand::Imm(d.into()));
        reduce_combine(b, ty, red, part, other)?;
        d *= 2;
    }
    Ok(())
}

/// Opens the grid-stride loop over block batches (batch `bb` starts at tile `bb * block`; the
/// loop is left once that is past the tile count) and loads thread `tid64`'s slot of the batch:
/// returns the loop and `[tile, begin, size, valid]`, where `valid` is 1 for a slot that holds a
/// tile and the others are its tile index, first atom and atom count (all zero otherwise).
pub fn batch_slot(
    b: &mut KernelBuilder,
    layout: &Layout,
    params: &KernelParams,
    checked: bool,
    (bb, tid64, block): (Reg, Reg, u32),
) -> (LoopScope, [Reg; 4]) {
    let batches = b.loop_begin();
    let first_pos = b.bin(BinOp::Mul, Type::U64, bb, Operand::Imm(block.into()));
    let over = b.setp(Cmp::Ge, Type::U64, first_pos, layout.tiles);
    b.break_if(&batches, over, false);
    let pos = b.bin(BinOp::Add, Type::U64, first_pos, tid64);
    let tile = b.mov(Type::U64, Operand::Imm(0));
    let begin = b.mov(Type::U64, Operand::Imm(0));
    let size = b.mov(Type::U64, Operand::Imm(0));
    let valid = b.mov(Type::U32, Operand::Imm(0));
    let in_range = b.setp(Cmp::Lt, Type::U64, pos, layout.tiles);
    let skip = b.label();
    b.bra_if(in_range, true, skip);
    let t = layout.tile(b, params, pos, checked, skip);
    b.mov_to(Type::U64, tile, t);
    let (bg, en) = layout.atoms(b, tile);
    b.mov_to(Type::U64, begin, bg);
    b.bin_to(BinOp::Sub, Type::U64, size, en, bg);
    b.mov_to(Type::U32, valid, Operand::Imm(1));
    b.place(skip);
    (batches, [tile, begin, size, valid])
}

/// The warp's index in the grid, the grid's warp count (u64 both) and the lane (`%laneid`,
/// `.u32`): for kernels that map one item to a warp.
pub fn grid_warps(b: &mut KernelBuilder) -> (Reg, Reg, Reg) {
    let (thread, threads) = b.grid_thread();
    let warp = b.bin(BinOp::Shr, Type::U64, thread, Operand::Imm(5));
    let warps = b.bin(BinOp::Shr, Type::U64, threads, Operand::Imm(5));
    let lane = b.special(Special::LaneId);
    (warp, warps, lane)
}
