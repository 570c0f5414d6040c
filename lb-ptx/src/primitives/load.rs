//! Loads of the tile set and of the body's inputs: the one place that decides a load's cache
//! policy and its address arithmetic.
//!
//! Cache policy ([`Data::cache`]): nothing a kernel reads from its tile set or from a `&[T]`
//! parameter is written while it runs (the macro hands out tile sets read-only, and Rust's
//! borrows keep a `&[T]` argument apart from every `&mut [T]` one), so those loads take the
//! non-coherent read-only path (`ld.global.nc`). The arrays read once per atom (column indices,
//! values: the bulk of an SpMV's bytes) are also streamed (`.cs`, evict-first in L1 and L2) when a
//! warp reads them coalesced, so that they do not push the gathered dense input out of the
//! caches; that is the cache trick of DASP (Lu and Liu, SC'23) in the form every target from
//! sm_75 has. A thread that walks its own consecutive atoms reads each line over several
//! iterations, and evict-first cost up to 1.4× on an H100 there (stencil SpMV, thread-mapped),
//! so those reads stay cached. Offsets are read by two neighbouring tiles, so they stay cached
//! normally.

use crate::body::{ArrayRef, Body, CsrField, ParamKind};
use crate::builder::KernelBuilder;
use crate::ir::{BinOp, LdCache, Operand, Reg, Type};

/// What a load reads, which decides its cache policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    /// A tile set's array at the atom being processed: read once, streamed.
    AtomStream,
    /// Anything else no thread writes during the kernel: tile offsets, a tile-set array at
    /// another index, a `&[T]` parameter.
    ReadOnly,
    /// A `&mut [T]` parameter: other threads may write it while the kernel runs.
    Mutable,
}

impl Data {
    /// What the body's `array[index]` reads; `at_atom` when the index is the atom itself and
    /// the warp reads 32 consecutive atoms together (see `AtomContext::coalesced`).
    pub fn of(body: &Body, array: ArrayRef, at_atom: bool) -> Data {
        match array {
            ArrayRef::Field(_, CsrField::RowOffsets | CsrField::ColOffsets) => Data::ReadOnly,
            ArrayRef::Field(..) if at_atom => Data::AtomStream,
            ArrayRef::Field(..) => Data::ReadOnly,
            ArrayRef::Param(p) => match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::Slice { mutable: false, .. }) => Data::ReadOnly,
                _ => Data::Mutable,
            },
        }
    }

    /// The cache qualifiers for this data.
    pub fn cache(self) -> LdCache {
        match self {
            Data::AtomStream => LdCache::Stream,
            Data::ReadOnly => LdCache::ReadOnly,
            Data::Mutable => LdCache::Default,
        }
    }
}

/// An element index: 64-bit, or a `u32` the address is widened from in one instruction.
#[derive(Clone, Copy, Debug)]
pub enum Index {
    U64(Reg),
    U32(Reg),
}

/// The address of element `index` of `elem_bytes` each from `base`: `shl` (or `mul`) and `add`
/// for a 64-bit index, `mul.wide.u32` and `add` for a 32-bit one.
pub fn elem_addr(b: &mut KernelBuilder, base: Reg, index: Index, elem_bytes: u32) -> Reg {
    match index {
        Index::U64(i) => b.elem_addr(base, i, elem_bytes),
        Index::U32(i) => {
            let offset = b.bin(
                BinOp::MulWide,
                Type::U32,
                i,
                Operand::Imm(elem_bytes.into()),
            );
            b.bin(BinOp::Add, Type::U64, base, offset)
        }
    }
}
