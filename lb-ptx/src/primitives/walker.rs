//! Atom walks: the body emitted for one atom, and a thread's strided walk over a tile's atoms.

use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{emit_body, reduce_combine, reduce_identity, AtomContext, KernelParams};
use crate::ir::{BinOp, Cmp, Operand, Reg, Type};
use crate::GenError;

/// What an atom walk needs, per lane.
pub struct Walker<'a> {
    pub body: &'a Body,
    pub params: &'a KernelParams,
    pub checked: bool,
    pub lane: Option<Reg>,
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
        };
        emit_body(b, self.body, self.params, &ctx, self.checked)
    }

    /// Walks atoms `begin + start, begin + start + stride, ..` below `end` of `tile` and returns
    /// the partial over them in that order (with `reduce`).
    pub fn stride(
        &self,
        b: &mut KernelBuilder,
        tile: Reg,
        (begin, end): (Reg, Reg),
        start: Reg,
        stride: u32,
    ) -> Result<Option<Reg>, GenError> {
        let part = self
            .body
            .reduce
            .map(|(ty, red)| reduce_identity(b, ty, red))
            .transpose()?;
        let atom = b.bin(BinOp::Add, Type::U64, begin, start);
        let atoms = b.loop_begin();
        let past = b.setp(Cmp::Ge, Type::U64, atom, end);
        b.break_if(&atoms, past, false);
        let rank = self
            .body
            .roles
            .contains(&IndexRole::Rank)
            .then(|| b.bin(BinOp::Sub, Type::U64, atom, begin));
        let c = self.atom(b, Some(tile), atom, rank)?;
        if let (Some(part), Some(c), Some((ty, red))) = (part, c, self.body.reduce) {
            reduce_combine(b, ty, red, part, c)?;
        }
        b.bin_to(
            BinOp::Add,
            Type::U64,
            atom,
            atom,
            Operand::Imm(stride.into()),
        );
        b.loop_end(atoms);
        Ok(part)
    }
}
