//! Lowers the body IR (the work of one atom) into PTX inside a kernel that a schedule is building.
//!
//! Semantics follow a release build of the Rust function exactly, so that the GPU and the CPU
//! reference agree bit for bit:
//! - integer arithmetic wraps; shift amounts are masked to the type's width (`x << (n & 31)`);
//! - `as` casts: integer widening extends by the *source* signedness, narrowing truncates,
//!   int → float rounds to nearest (`cvt.rn`), float → int truncates and saturates with NaN → 0
//!   (`cvt.rzi`, which is exactly Rust's `as`), `f64 → f32` rounds to nearest;
//! - float `+ - * /` are written with `.rn`, so ptxas never contracts them into an FMA; only
//!   `mul_add` is fused;
//! - float `!=` is unordered (`setp.neu`, true for NaN); the other comparisons are ordered;
//! - `&&`/`||` and value-`if` branch, so the side not taken is never evaluated.
//!
//! What cannot match: integer `/` and `%` by zero (and `MIN / -1`) panic in Rust but there is no
//! trap to raise on the GPU, so the plain `div`/`rem` is emitted and its result is whatever the
//! hardware gives. Float `%` has no PTX instruction and is rejected.
//!
//! Under `checked`, every load, store and atomic of the body that the body's [`Guards`] select
//! (all of them, or those [`Proofs`] cannot show in bounds) compares its index with the array's
//! length first; out of range, it records the first offender in the plan's error flag and skips
//! the access (a load or atomic yields 0).

use crate::body::{
    ArrayRef, AtomicOp, BinaryOp, Block, Body, CsrField, Expr, ExprKind, Guards, IndexRole, Lit,
    Method, ParamKind, Proofs, Reduce, Stmt, TileSetKind, Ty, UnaryOp,
};
use crate::builder::KernelBuilder;
use crate::ir::{
    Address, AtomOp, BinOp, Cmp, Label, Op, Operand, Reg, RegClass, Rounding, ShflMode, Space,
    Special, Type, UnOp,
};
use crate::plan::{OffsetWidth, Plan, TempRole};
use crate::primitives::load;
use crate::GenError;
use std::cell::RefCell;

/// The PTX type that holds a body value in a register (a half type's value is its `f32`).
pub fn ptx_type(ty: Ty) -> Type {
    match ty {
        Ty::Bool => Type::Pred,
        Ty::F16 | Ty::Bf16 => Type::F32,
        Ty::I32 => Type::S32,
        Ty::U32 => Type::U32,
        Ty::I64 => Type::S64,
        Ty::U64 => Type::U64,
        Ty::F32 => Type::F32,
        Ty::F64 => Type::F64,
    }
}

/// The untyped type of the same width (bit operations, `mov` of bit patterns, `cas`).
fn bits_type(ty: Ty) -> Type {
    if ty.size() == 8 {
        Type::B64
    } else {
        Type::B32
    }
}

/// The type of a body value in device memory: `bool` is one byte, a half type two.
pub fn mem_type(ty: Ty) -> Type {
    match ty {
        Ty::Bool => Type::U8,
        Ty::F16 | Ty::Bf16 => Type::U16,
        _ => ptx_type(ty),
    }
}

/// The `f32` of the 16 bits `raw` (a `U16` load) of `storage`: exact either way. An f16 is
/// converted by `cvt.f32.f16`; a bf16 is the upper half of its f32, so a shift makes it (every
/// target has that, while `cvt.f32.bf16` needs sm_90 and a 16-bit register).
pub fn widen_half(b: &mut KernelBuilder, storage: Ty, raw: Reg) -> Reg {
    if storage == Ty::F16 {
        b.cvt(Rounding::None, Type::F32, Type::F16, raw)
    } else {
        let high = b.bin(BinOp::Shl, Type::B32, raw, Operand::Imm(16));
        b.mov(Type::F32, high)
    }
}

/// The 16 bits of `storage` that the `f32` `value` rounds to, nearest even, in a `B32` register
/// for a `U16` store. An f16 by `cvt.rn.f16.f32`. A bf16 by integer arithmetic, which every
/// target runs (`cvt.rn.bf16.f32` needs sm_80 and a 16-bit register): add `0x7fff` plus the
/// lowest kept bit and truncate, which rounds ties to even and overflows to infinity exactly
/// as IEEE does; a NaN keeps its upper bits and is made quiet, as `half::bf16::from_f32` does.
pub fn narrow_half(b: &mut KernelBuilder, storage: Ty, value: Reg) -> Reg {
    if storage == Ty::F16 {
        return b.cvt(Rounding::Rn, Type::F16, Type::F32, value);
    }
    let bits = b.mov(Type::B32, value);
    let upper = b.bin(BinOp::Shr, Type::U32, bits, Operand::Imm(16));
    let odd = b.bin(BinOp::And, Type::B32, upper, Operand::Imm(1));
    let bias = b.bin(BinOp::Add, Type::U32, odd, Operand::Imm(0x7fff));
    let sum = b.bin(BinOp::Add, Type::U32, bits, bias);
    let rounded = b.bin(BinOp::Shr, Type::U32, sum, Operand::Imm(16));
    let quiet = b.bin(BinOp::Or, Type::B32, upper, Operand::Imm(0x40));
    let nan = b.setp(Cmp::Neu, Type::F32, value, value);
    b.selp(Type::U32, quiet, rounded, nan)
}

/// The registers of a tile-set parameter, named as for a CSR (see [`TileSetKind`] for the ABI).
///
/// As loaded, `row_offsets` is the tile-offset array of every kind (CSC: `col_offsets`, COO: the
/// row offsets derived at upload) and `col_indices` the other index array (CSC: `row_indices`).
/// [`KernelParams::csr`] returns the *tile view*, where `num_rows` is also the tile count (a
/// CSC's `num_cols`, with `num_cols` its `num_rows`): what schedules use through `Layout`.
#[derive(Clone, Copy, Debug)]
pub struct CsrRegs {
    pub row_offsets: Reg,
    pub col_indices: Reg,
    pub values: Reg,
    pub num_rows: Reg,
    pub num_cols: Reg,
    pub nnz: Reg,
}

/// The registers a body parameter was loaded into.
#[derive(Clone, Copy, Debug)]
pub enum ParamRegs {
    /// `regs` as loaded (not the tile view); `row_indices` is the COO's extra array.
    TileSet {
        kind: TileSetKind,
        regs: CsrRegs,
        row_indices: Option<Reg>,
    },
    /// A `&mut Queue`: items pointer, counter pointer, capacity (u64 each).
    Queue {
        items: Reg,
        count: Reg,
        capacity: Reg,
    },
    Slice {
        ptr: Reg,
        len: Reg,
    },
    /// A `bool` scalar is already converted to a predicate.
    Scalar(Reg),
}

/// Every kernel parameter of a plan, loaded once at kernel entry (ABI in [`crate::plan`]).
#[derive(Clone, Debug)]
pub struct KernelParams {
    /// One entry per `Body::params`, same order.
    pub body: Vec<ParamRegs>,
    /// Output pointer and length (elements), when the body reduces.
    pub output: Option<(Reg, Reg)>,
    /// One pointer per plan temporary, in plan order.
    pub temps: Vec<Reg>,
    /// The pointer of the `ErrorFlag` temporary, if the plan has one.
    pub error_flag: Option<Reg>,
    /// The width of the tile offsets the kernel reads ([`Plan::offsets`]): the tile set's, and
    /// the frontier scan's. Read them through [`load_offset`].
    pub offsets: OffsetWidth,
    /// The output's mirrors: the address of a table of base addresses (u64) and their count.
    /// Every output element is stored at `base + index · size` for each base too (a launch on
    /// one part of a tile set split across GPUs stores its rows straight into every GPU's copy
    /// of the gathered result); a count of 0, what every launch but those passes, stores
    /// nothing more. Declared after the temporaries, by every kernel of every plan.
    pub mirrors: (Reg, Reg),
}

/// Loads the tile offset at `addr` from an array of `width`, as u64 (a 32-bit offset is
/// zero-extended). Every read of a tile-offset array goes through here or [`load_offset_as`].
pub fn load_offset(b: &mut KernelBuilder, width: OffsetWidth, addr: Reg) -> Reg {
    load_offset_as(b, width, Type::U64, addr)
}

/// Loads the tile offset at `addr` from an array of `width` into a register of type `ty`
/// (`U32` or `U64`): a 32-bit offset is loaded as it is stored and widened only for `U64`; a
/// 64-bit one is narrowed for `U32`.
pub fn load_offset_as(b: &mut KernelBuilder, width: OffsetWidth, ty: Type, addr: Reg) -> Reg {
    match (width, ty) {
        (OffsetWidth::U32, Type::U32) => b.ld_global(Type::U32, (addr, 0), OFFSETS.cache()),
        (OffsetWidth::U32, _) => {
            let raw = b.ld_global(Type::U32, (addr, 0), OFFSETS.cache());
            b.cvt(Rounding::None, Type::U64, Type::U32, raw)
        }
        (OffsetWidth::U64, Type::U32) => {
            let raw = b.ld_global(Type::U64, (addr, 0), OFFSETS.cache());
            b.cvt(Rounding::None, Type::U32, Type::U64, raw)
        }
        (OffsetWidth::U64, _) => b.ld_global(Type::U64, (addr, 0), OFFSETS.cache()),
    }
}

/// Tile offsets are never written while a kernel reads them (the tile set's, or a frontier scan's
/// written by an earlier kernel of the plan): the read-only path of [`load::Data`].
const OFFSETS: load::Data = load::Data::ReadOnly;

/// The address of entry `index` (u64) of a tile-offset array of `width`.
pub fn offset_addr(b: &mut KernelBuilder, width: OffsetWidth, base: Reg, index: Reg) -> Reg {
    b.elem_addr(base, index, width.bytes())
}

/// Declares and loads the `.param` slots of tile-set parameter `n` of `kind`, in the order of
/// the ABI of [`TileSetKind`].
fn declare_tile_set(b: &mut KernelBuilder, n: &str, kind: TileSetKind) -> ParamRegs {
    let (offsets, first, second) = match kind {
        TileSetKind::Csr => ("row_offsets", None, "col_indices"),
        TileSetKind::Csc => ("col_offsets", None, "row_indices"),
        TileSetKind::Coo => ("row_offsets", Some("row_indices"), "col_indices"),
        TileSetKind::Tiles => {
            let offsets = b.load_param(format!("{n}_tile_offsets"), Type::U64);
            let tiles = b.load_param(format!("{n}_num_tiles"), Type::U64);
            let atoms = b.load_param(format!("{n}_num_atoms"), Type::U64);
            // A `Tiles` has no per-atom arrays and no second dimension. The CSR view's registers
            // that it lacks alias its own and are never read: its body reads no per-atom field
            // (`field_array` refuses them), and schedules read only the offsets and the counts.
            return ParamRegs::TileSet {
                kind,
                regs: CsrRegs {
                    row_offsets: offsets,
                    col_indices: offsets,
                    values: offsets,
                    num_rows: tiles,
                    num_cols: tiles,
                    nnz: atoms,
                },
                row_indices: None,
            };
        }
    };
    let row_offsets = b.load_param(format!("{n}_{offsets}"), Type::U64);
    let row_indices = first.map(|f| b.load_param(format!("{n}_{f}"), Type::U64));
    ParamRegs::TileSet {
        kind,
        regs: CsrRegs {
            row_offsets,
            col_indices: b.load_param(format!("{n}_{second}"), Type::U64),
            values: b.load_param(format!("{n}_values"), Type::U64),
            num_rows: b.load_param(format!("{n}_num_rows"), Type::U64),
            num_cols: b.load_param(format!("{n}_num_cols"), Type::U64),
            nnz: b.load_param(format!("{n}_nnz"), Type::U64),
        },
        row_indices,
    }
}

pub(crate) fn is_ptx_ident(s: &str) -> bool {
    let mut chars = s.chars();
    let first_ok = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => true,
        Some('_') => s.len() > 1,
        _ => false,
    };
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl KernelParams {
    /// Declares the plan's `.param` list on `b` and loads every slot. Call first in a kernel.
    pub fn declare(
        b: &mut KernelBuilder,
        body: &Body,
        plan: &Plan,
    ) -> Result<KernelParams, GenError> {
        let temps = &plan.temps[..];
        let mut regs = Vec::with_capacity(body.params.len());
        for p in &body.params {
            if !is_ptx_ident(&p.name) {
                return Err(GenError::Unsupported(format!(
                    "parameter name `{}` cannot be used in PTX: use ASCII letters, digits and `_`",
                    p.name
                )));
            }
            let n = &p.name;
            regs.push(match p.kind {
                ParamKind::TileSet { kind, .. } => declare_tile_set(b, n, kind),
                ParamKind::Queue => ParamRegs::Queue {
                    items: b.load_param(format!("{n}_items"), Type::U64),
                    count: b.load_param(format!("{n}_count"), Type::U64),
                    capacity: b.load_param(format!("{n}_capacity"), Type::U64),
                },
                ParamKind::Slice { .. } => ParamRegs::Slice {
                    ptr: b.load_param(format!("{n}_ptr"), Type::U64),
                    len: b.load_param(format!("{n}_len"), Type::U64),
                },
                ParamKind::Scalar(Ty::Bool) => {
                    let raw = b.load_param(format!("{n}_val"), Type::U32);
                    ParamRegs::Scalar(b.setp(Cmp::Ne, Type::U32, raw, Operand::Imm(0)))
                }
                ParamKind::Scalar(ty) => {
                    ParamRegs::Scalar(b.load_param(format!("{n}_val"), ptx_type(ty)))
                }
            });
        }
        let output = body.reduce.map(|_| {
            (
                b.load_param("lb_out_ptr", Type::U64),
                b.load_param("lb_out_len", Type::U64),
            )
        });
        let mut temp_regs = Vec::with_capacity(temps.len());
        let mut error_flag = None;
        for t in temps {
            let r = b.load_param(format!("lb_tmp_{}", t.name), Type::U64);
            if t.role == TempRole::ErrorFlag {
                error_flag = Some(r);
            }
            temp_regs.push(r);
        }
        let mirrors = (
            b.load_param("lb_mirrors", Type::U64),
            b.load_param("lb_mirror_count", Type::U64),
        );
        let names: Vec<&str> = b.param_names().collect();
        if let Some(dup) = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
        {
            return Err(GenError::Unsupported(format!(
                "kernel parameter name `{}` would be declared twice: rename the Rust parameter",
                dup.1
            )));
        }
        Ok(KernelParams {
            body: regs,
            output,
            temps: temp_regs,
            error_flag,
            offsets: plan.offsets,
            mirrors,
        })
    }

    /// The tile view of tile-set parameter `p` (see [`CsrRegs`]): `row_offsets[t]..row_offsets[t +
    /// 1]` are tile `t`'s atoms and `num_rows` is the number of tiles, whatever the format.
    pub fn csr(&self, p: usize) -> Result<CsrRegs, GenError> {
        let (kind, regs, _) = self.tile_set(p)?;
        Ok(match kind {
            TileSetKind::Csr | TileSetKind::Coo | TileSetKind::Tiles => regs,
            TileSetKind::Csc => CsrRegs {
                num_rows: regs.num_cols,
                num_cols: regs.num_rows,
                ..regs
            },
        })
    }

    /// Tile-set parameter `p` as loaded: its kind, registers and the COO's `row_indices`.
    pub fn tile_set(&self, p: usize) -> Result<(TileSetKind, CsrRegs, Option<Reg>), GenError> {
        match self.body.get(p) {
            Some(ParamRegs::TileSet {
                kind,
                regs,
                row_indices,
            }) => Ok((*kind, *regs, *row_indices)),
            _ => Err(GenError::Unsupported(format!(
                "parameter {p} is not a tile set"
            ))),
        }
    }

    /// Items pointer, counter pointer and capacity of queue parameter `p`.
    pub fn queue(&self, p: usize) -> Result<(Reg, Reg, Reg), GenError> {
        match self.body.get(p) {
            Some(ParamRegs::Queue {
                items,
                count,
                capacity,
            }) => Ok((*items, *count, *capacity)),
            _ => Err(GenError::Unsupported(format!(
                "parameter {p} is not a queue"
            ))),
        }
    }

    /// The pointer and length of slice parameter `p`.
    pub fn slice(&self, p: usize) -> Result<(Reg, Reg), GenError> {
        match self.body.get(p) {
            Some(ParamRegs::Slice { ptr, len }) => Ok((*ptr, *len)),
            _ => Err(GenError::Unsupported(format!(
                "parameter {p} is not a slice"
            ))),
        }
    }

    /// The register of scalar parameter `p`.
    pub fn scalar(&self, p: usize) -> Result<Reg, GenError> {
        match self.body.get(p) {
            Some(ParamRegs::Scalar(r)) => Ok(*r),
            _ => Err(GenError::Unsupported(format!(
                "parameter {p} is not a scalar"
            ))),
        }
    }
}

/// The index registers (all u64) a schedule computed for the current atom; `None` for roles the
/// body does not take.
#[derive(Clone, Copy, Debug, Default)]
pub struct AtomContext {
    pub tile: Option<Reg>,
    pub atom: Option<Reg>,
    pub lane: Option<Reg>,
    pub rank: Option<Reg>,
    /// Addresses of `array[atom]` that the schedule's walk keeps current
    /// ([`crate::primitives::walker`]): the body loads through them instead of computing the
    /// address from the atom. Only for loads without a guard, which needs the index.
    pub atom_addrs: [Option<(ArrayRef, Reg)>; MAX_ATOM_ADDRS],
    /// The warp reads this atom together with 31 neighbours (a walk strided by at least the
    /// warp size), so every line of the atom arrays is used at once and may be streamed
    /// ([`load::Data::AtomStream`]). A thread that walks consecutive atoms itself needs the line
    /// to stay in L1 for its next atoms, so it reads them read-only but cached.
    pub coalesced: bool,
    /// The lane times 1, 2, 4 and 8 bytes (u64, by `log2` of the element size), computed once
    /// per tile by a walk over several lanes ([`crate::primitives::layout::LaneSet`]): a load
    /// `x[e + lane]` is then `&x[e]` (the same for every lane of the atom, so computed once for
    /// all of them) plus this offset.
    pub lane_scaled: [Option<Reg>; 4],
    /// `atom` as a u32 register, when the schedule's plan keeps atom indices in 32 bits: a load
    /// at the atom then takes its address in one `mul.wide.u32` from it instead of 64-bit
    /// shifts and adds (issue 11's index width: 32-bit address arithmetic where the tile set
    /// fits).
    pub atom32: Option<Reg>,
}

/// How many `array[atom]` addresses a walk may keep (a tile set has at most three atom arrays).
pub const MAX_ATOM_ADDRS: usize = 3;

impl AtomContext {
    /// The kept address of `array[atom]`, if the walk keeps one.
    fn atom_addr(&self, array: ArrayRef) -> Option<Reg> {
        self.atom_addrs
            .iter()
            .flatten()
            .find(|(a, _)| *a == array)
            .map(|&(_, r)| r)
    }
}

/// Under `checked`: if `index >= len`, records `(1 + param, index)` in the error flag (only the
/// first offender wins the `cas`) and branches to `skip`; otherwise falls through.
pub fn check_index(
    b: &mut KernelBuilder,
    flag: Reg,
    index: Reg,
    len: Reg,
    param: usize,
    skip: Label,
) {
    let ok = b.label();
    let in_range = b.setp(Cmp::Lt, Type::U64, index, len);
    b.bra_if(in_range, false, ok);
    let zero = b.mov(Type::U64, Operand::Imm(0));
    let code = b.mov(Type::U64, Operand::Imm(param as i64 + 1));
    let old = b.reg(RegClass::B64);
    b.emit(Op::Atom {
        space: Space::Global,
        op: AtomOp::Cas,
        ty: Type::B64,
        dst: old,
        addr: Address::Reg {
            base: flag,
            offset: 0,
        },
        b: zero.into(),
        c: Some(code.into()),
    });
    let first = b.setp(Cmp::Eq, Type::U64, old, Operand::Imm(0));
    b.emit_guarded(
        first,
        false,
        Op::St {
            space: Space::Global,
            ty: Type::U64,
            addr: Address::Reg {
                base: flag,
                offset: 8,
            },
            src: index.into(),
        },
    );
    b.bra(skip);
    b.place(ok);
}

/// A fresh register holding the identity of `reduce` over `ty` (0, +inf / MAX, -inf / MIN).
pub fn reduce_identity(b: &mut KernelBuilder, ty: Ty, reduce: Reduce) -> Result<Reg, GenError> {
    let imm = match (ty, reduce) {
        (Ty::F32 | Ty::F16 | Ty::Bf16, Reduce::Sum) => Operand::F32(0f32.to_bits()),
        (Ty::F32 | Ty::F16 | Ty::Bf16, Reduce::Min) => Operand::F32(f32::INFINITY.to_bits()),
        (Ty::F32 | Ty::F16 | Ty::Bf16, Reduce::Max) => Operand::F32(f32::NEG_INFINITY.to_bits()),
        (Ty::F64, Reduce::Sum) => Operand::F64(0f64.to_bits()),
        (Ty::F64, Reduce::Min) => Operand::F64(f64::INFINITY.to_bits()),
        (Ty::F64, Reduce::Max) => Operand::F64(f64::NEG_INFINITY.to_bits()),
        (Ty::Bool, _) => {
            return Err(GenError::Unsupported(
                "`reduce` over `bool` is not supported".into(),
            ))
        }
        (_, Reduce::Sum) => Operand::Imm(0),
        (Ty::I32, Reduce::Min) => Operand::Imm(i32::MAX.into()),
        (Ty::I32, Reduce::Max) => Operand::Imm(i32::MIN.into()),
        (Ty::U32, Reduce::Min) => Operand::Imm(u32::MAX.into()),
        (Ty::I64, Reduce::Min) => Operand::Imm(i64::MAX),
        (Ty::I64, Reduce::Max) => Operand::Imm(i64::MIN),
        (Ty::U64, Reduce::Min) => Operand::Imm(-1),
        (Ty::U32 | Ty::U64, Reduce::Max) => Operand::Imm(0),
    };
    Ok(b.mov(ptx_type(ty), imm))
}

/// The instruction that combines two values of a `reduce`.
pub fn reduce_op(reduce: Reduce) -> BinOp {
    match reduce {
        Reduce::Sum => BinOp::Add,
        Reduce::Min => BinOp::Min,
        Reduce::Max => BinOp::Max,
    }
}

/// `acc = acc ⊕ x`, rounding like Rust's `acc += x` / `acc.min(x)` / `acc.max(x)`.
pub fn reduce_combine(
    b: &mut KernelBuilder,
    ty: Ty,
    reduce: Reduce,
    acc: Reg,
    x: Reg,
) -> Result<(), GenError> {
    if ty == Ty::Bool {
        return Err(GenError::Unsupported(
            "`reduce` over `bool` is not supported".into(),
        ));
    }
    b.bin_to(reduce_op(reduce), ptx_type(ty), acc, acc, x);
    Ok(())
}

/// Emits the body once at the current point. Returns the register holding the atom's
/// contribution when the body reduces; every `return` and the tail value land there.
pub fn emit_body(
    b: &mut KernelBuilder,
    body: &Body,
    params: &KernelParams,
    ctx: &AtomContext,
    checked: bool,
) -> Result<Option<Reg>, GenError> {
    emit_body_lanes(b, body, params, ctx, checked, None)
}

/// [`emit_body`] for copy `r` of an atom's adjacent lanes ([`LaneVector`]): a lane load that
/// copy 0 read with a vector load is the vector's element `r`.
pub fn emit_body_lanes(
    b: &mut KernelBuilder,
    body: &Body,
    params: &KernelParams,
    ctx: &AtomContext,
    checked: bool,
    vector: Option<(&LaneVector, u32)>,
) -> Result<Option<Reg>, GenError> {
    if checked && params.error_flag.is_none() {
        return Err(GenError::Unsupported(
            "`checked` needs the plan's error-flag temporary".into(),
        ));
    }
    let locals = body
        .locals
        .iter()
        .map(|&t| b.reg_for(ptx_type(t)))
        .collect();
    // Without `return`, the tail's register is the contribution: no copy into a shared one.
    let returns = has_return(&body.block);
    let ret = body
        .reduce
        .filter(|_| returns)
        .map(|(t, _)| (b.reg_for(ptx_type(t)), t));
    let end = b.label();
    let proofs = match body.guards {
        Guards::Every => None,
        Guards::Unproven { .. } => Some(body.proofs(body.guards)),
    };
    let mut lower = Lower {
        b,
        body,
        params,
        ctx,
        checked,
        proofs,
        locals,
        ret,
        end,
        loops: Vec::new(),
        vector,
    };
    let tail = lower.block(&body.block)?;
    if let (Some(v), Some((r, t))) = (tail, ret) {
        lower.b.mov_to(ptx_type(t), r, v);
    }
    lower.b.place(end);
    match (body.reduce, ret) {
        (None, _) => Ok(None),
        (Some(_), Some((r, _))) => Ok(Some(r)),
        (Some(_), None) => tail.map(Some).ok_or_else(|| {
            GenError::Unsupported("a reducing body must end in a value or `return` one".into())
        }),
    }
}

/// Whether a `return` statement appears anywhere in `block`.
fn has_return(block: &Block) -> bool {
    block.any(&mut |s| matches!(s, Stmt::Return(_)), &mut |_| false)
}

struct Lower<'a> {
    b: &'a mut KernelBuilder,
    body: &'a Body,
    params: &'a KernelParams,
    ctx: &'a AtomContext,
    checked: bool,
    /// Under [`Guards::Unproven`]: the accesses whose test the launch's host checks make
    /// redundant.
    proofs: Option<Proofs>,
    locals: Vec<Reg>,
    ret: Option<(Reg, Ty)>,
    end: Label,
    /// The loops around the statement being emitted, innermost last: where `continue` and
    /// `break` go.
    loops: Vec<(Label, Label)>,
    /// With adjacent lanes: the atom's shared vector loads and this copy's lane in them.
    vector: Option<(&'a LaneVector, u32)>,
}

/// The vector loads of one atom's adjacent lanes ([`crate::primitives::layout::Blocking`]): a
/// walk emits the body once per lane, and the first copy reads each lane load `x[i * lanes +
/// lane]` of a [`vector_lane_params`] array for all `width` lanes with one vector load, whose
/// elements the other copies take instead of loading again. Only for bodies without control
/// flow, so the first copy's loads run whenever the others' would.
pub struct LaneVector {
    /// Lanes per thread (2 or 4).
    pub width: u32,
    /// The lane count's scalar parameter (index into `Body::params`).
    pub lanes_param: usize,
    /// The loads of the first copy, by their index expression's address in the body.
    loaded: RefCell<Vec<(*const Expr, Vec<Reg>)>>,
}

impl LaneVector {
    pub fn new(width: u32, lanes_param: usize) -> LaneVector {
        LaneVector {
            width,
            lanes_param,
            loaded: RefCell::new(Vec::new()),
        }
    }

    fn get(&self, index: &Expr) -> Option<Vec<Reg>> {
        let key: *const Expr = index;
        self.loaded
            .borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, regs)| regs.clone())
    }
}

/// The slice parameters a walk over adjacent lanes reads with vector loads: those the body
/// indexes as `x[i * lanes + lane]` (either order of the sum and of the product, `lanes` the
/// scalar parameter `lanes_param`) with 4-byte elements, in a body without side effects or
/// control flow (see [`LaneVector`]). `i * lanes` is a multiple of the lane count, so with a
/// lane count that is a multiple of R and an R-element-aligned base such a load of R adjacent
/// lanes is aligned to its width.
pub fn vector_lane_params(body: &Body, lanes_param: usize) -> Vec<usize> {
    if !body.is_pure() || has_control_flow(body) {
        return Vec::new();
    }
    let mut out = Vec::new();
    body.block.any(&mut |_| false, &mut |e| {
        if let ExprKind::Load {
            array: ArrayRef::Param(p),
            index,
        } = &e.kind
        {
            let four = matches!(slice_elem(body, *p), Some(Ty::F32 | Ty::I32 | Ty::U32));
            if four && lane_row(index, lanes_param).is_some() && !out.contains(p) {
                out.push(*p);
            }
        }
        false
    });
    out
}

/// The element type of slice parameter `p`.
fn slice_elem(body: &Body, p: usize) -> Option<Ty> {
    match body.params.get(p).map(|p| &p.kind) {
        Some(ParamKind::Slice { elem, .. }) => Some(*elem),
        _ => None,
    }
}

/// For an index `rest + lane` (either order): `rest`.
fn plus_lane(index: &Expr) -> Option<&Expr> {
    let ExprKind::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = &index.kind
    else {
        return None;
    };
    let is_lane = |e: &Expr| matches!(e.kind, ExprKind::Index(IndexRole::Lane));
    match (is_lane(lhs), is_lane(rhs)) {
        (_, true) => Some(lhs.as_ref()),
        (true, false) => Some(rhs.as_ref()),
        _ => None,
    }
}

/// For an index `i * lanes + lane` (either order of the sum and of the product, `lanes` the
/// scalar parameter `lanes_param`): `i * lanes`.
fn lane_row(index: &Expr, lanes_param: usize) -> Option<&Expr> {
    let row = plus_lane(index)?;
    let ExprKind::Binary {
        op: BinaryOp::Mul,
        lhs,
        rhs,
    } = &row.kind
    else {
        return None;
    };
    let is_lanes = |e: &Expr| matches!(e.kind, ExprKind::Scalar(p) if p == lanes_param);
    (is_lanes(lhs) || is_lanes(rhs)).then_some(row)
}

/// Whether evaluating `body` may skip or repeat part of it: a branch, a loop, a short-circuit
/// operator, or a `return` before the end.
fn has_control_flow(body: &Body) -> bool {
    let stmts = &body.block.stmts;
    let early_return = stmts
        .iter()
        .take(stmts.len().saturating_sub(1))
        .any(|s| matches!(s, Stmt::Return(_)));
    early_return
        || body.block.any(
            &mut |s| {
                matches!(
                    s,
                    Stmt::If { .. }
                        | Stmt::For { .. }
                        | Stmt::Loop { .. }
                        | Stmt::Break(_)
                        | Stmt::Continue(_)
                )
            },
            &mut |e| match &e.kind {
                ExprKind::If { .. } => true,
                ExprKind::Binary { op, .. } => matches!(op, BinaryOp::And | BinaryOp::Or),
                ExprKind::Block(block) => {
                    block.any(&mut |s| matches!(s, Stmt::Return(_)), &mut |_| false)
                }
                _ => false,
            },
        )
}

/// Whether evaluating `e` may assign a local (only a value-`if` or a block holds statements). When a later
/// operand may, an earlier operand that is a local's register must be copied first, because Rust
/// has already read it.
fn may_assign(e: &Expr) -> bool {
    e.any(&mut |_| false, &mut |e| {
        matches!(e.kind, ExprKind::If { .. } | ExprKind::Block(_))
    })
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, GenError> {
    Err(GenError::Unsupported(what.into()))
}

/// The base register, element type and parameter of an array the body indexes.
pub fn array_info(
    body: &Body,
    params: &KernelParams,
    array: ArrayRef,
) -> Result<ArrayInfo, GenError> {
    match array {
        ArrayRef::Param(p) => {
            let elem = match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::Slice { elem, .. }) => *elem,
                _ => return unsupported(format!("parameter {p} is not a slice")),
            };
            Ok(ArrayInfo {
                base: params.slice(p)?.0,
                elem,
                param: p,
                offsets32: false,
            })
        }
        ArrayRef::Field(p, field) => {
            let value = match body.params.get(p).map(|p| &p.kind) {
                Some(ParamKind::TileSet { value, .. }) => *value,
                _ => return unsupported(format!("parameter {p} is not a tile set")),
            };
            let (kind, regs, row_indices) = params.tile_set(p)?;
            let (base, elem) = match (kind, field) {
                (TileSetKind::Csr | TileSetKind::Tiles, CsrField::RowOffsets)
                | (TileSetKind::Csc, CsrField::ColOffsets) => (regs.row_offsets, Ty::U64),
                (TileSetKind::Csr | TileSetKind::Coo, CsrField::ColIndices)
                | (TileSetKind::Csc, CsrField::RowIndices) => (regs.col_indices, Ty::U32),
                (TileSetKind::Coo, CsrField::RowIndices) => match row_indices {
                    Some(r) => (r, Ty::U32),
                    None => return unsupported("a `Coo` parameter without `row_indices`"),
                },
                (TileSetKind::Tiles, _) => {
                    return unsupported(format!("a `Tiles` tile set has no field `{field:?}`"))
                }
                (_, CsrField::Values) => (regs.values, value),
                (_, CsrField::NumRows | CsrField::NumCols) => {
                    return unsupported(format!("`{field:?}` is a scalar field, not an array"))
                }
                _ => {
                    return unsupported(format!(
                        "a `{}` tile set has no field `{field:?}`",
                        kind.name()
                    ))
                }
            };
            let offsets32 = matches!(field, CsrField::RowOffsets | CsrField::ColOffsets)
                && params.offsets == OffsetWidth::U32;
            Ok(ArrayInfo {
                base,
                elem,
                param: p,
                offsets32,
            })
        }
    }
}

/// Where an array lives and what it holds.
pub struct ArrayInfo {
    pub base: Reg,
    pub elem: Ty,
    /// The body parameter it belongs to.
    pub param: usize,
    /// A tile-offset field (`u64` to the body) stored with 32-bit offsets.
    pub offsets32: bool,
}

impl Lower<'_> {
    fn block(&mut self, block: &Block) -> Result<Option<Reg>, GenError> {
        for s in &block.stmts {
            self.stmt(s)?;
        }
        block.value.as_deref().map(|v| self.expr(v)).transpose()
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), GenError> {
        match s {
            Stmt::Assign { local, value } => {
                let v = self.expr(value)?;
                let dst = self.locals[*local];
                if v != dst {
                    self.b.mov_to(ptx_type(self.body.locals[*local]), dst, v);
                }
            }
            Stmt::Store {
                array,
                index,
                value,
            } => {
                let v = self.expr(value)?;
                let v = self.keep(v, value.ty, index);
                let i = self.expr(index)?;
                let info = self.array(*array)?;
                if info.offsets32 {
                    return unsupported("a tile set's offsets are read-only");
                }
                let guarded = self.guarded(*array, index);
                let skip = self.guard(guarded, *array, &info, i)?;
                let addr = self.b.elem_addr(info.base, i, info.elem.size());
                let src = if info.elem == Ty::Bool {
                    self.b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), v)
                } else if info.elem.is_half() {
                    narrow_half(self.b, info.elem, v)
                } else {
                    v
                };
                self.b.st(Space::Global, mem_type(info.elem), addr, src);
                if let Some(l) = skip {
                    self.b.place(l);
                }
            }
            Stmt::Expr(e) => {
                self.expr(e)?;
            }
            Stmt::If { cond, then, els } => {
                let p = self.expr(cond)?;
                let mut scope = self.b.if_begin(p, false);
                self.block(then)?;
                if !els.stmts.is_empty() || els.value.is_some() {
                    self.b.if_else(&mut scope);
                    self.block(els)?;
                }
                self.b.if_end(scope);
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let ty = self.body.locals[*var];
                if !ty.is_int() {
                    return unsupported("`for` loops must range over integers");
                }
                let t = ptx_type(ty);
                let s = self.expr(start)?;
                let counter = self.b.mov(t, s);
                let e = self.expr(end)?;
                let end_r = self.b.mov(t, e);
                let scope = self.b.loop_begin();
                let done = self.b.setp(Cmp::Ge, t, counter, end_r);
                self.b.break_if(&scope, done, false);
                self.b.mov_to(t, self.locals[*var], counter);
                // A label for `continue` only when there is one: kernels without keep their
                // label numbering.
                let continues = body.any(&mut |s| matches!(s, Stmt::Continue(_)), &mut |_| false);
                let next = if continues {
                    self.b.label()
                } else {
                    scope.exit
                };
                self.loops.push((next, scope.exit));
                self.block(body)?;
                self.loops.pop();
                if continues {
                    self.b.place(next);
                }
                self.b
                    .bin_to(BinOp::Add, t, counter, counter, Operand::Imm(1));
                self.b.loop_end(scope);
            }
            Stmt::Loop { body } => {
                let scope = self.b.loop_begin();
                self.loops.push((scope.head, scope.exit));
                self.block(body)?;
                self.loops.pop();
                self.b.loop_end(scope);
            }
            Stmt::Break(n) | Stmt::Continue(n) => {
                let Some(&(next, exit)) = self
                    .loops
                    .len()
                    .checked_sub(*n as usize + 1)
                    .and_then(|i| self.loops.get(i))
                else {
                    return unsupported(format!(
                        "`break` or `continue` {n} loops out of {}",
                        self.loops.len()
                    ));
                };
                let target = if matches!(s, Stmt::Break(_)) {
                    exit
                } else {
                    next
                };
                self.b.bra(target);
            }
            Stmt::Return(value) => {
                if let (Some(v), Some((r, t))) = (value, self.ret) {
                    let v = self.expr(v)?;
                    self.b.mov_to(ptx_type(t), r, v);
                }
                self.b.bra(self.end);
            }
            Stmt::Push { queue, value } => {
                if value.ty != Ty::U32 {
                    return unsupported("a queue holds `u32` values");
                }
                let v = self.expr(value)?;
                self.push(*queue, v)?;
            }
        }
        Ok(())
    }

    /// A warp-aggregated push: the lanes pushing together (`activemask`, so a push inside an `if`
    /// or a loop is fine) claim their slots with one `atom.add` by the highest lane, which
    /// shuffles the base to the others; each lane writes `base + rank`, its rank being the number
    /// of pushing lanes below it. A slot at or past the capacity is not written, but the counter
    /// still counts it, so the host can report the overflow with the number of slots needed.
    fn push(&mut self, queue: usize, v: Reg) -> Result<(), GenError> {
        let (items, count, capacity) = self.params.queue(queue)?;
        let b = &mut *self.b;
        let mask = b.reg(RegClass::B32);
        b.emit(Op::ActiveMask { dst: mask });
        let lane = b.special(Special::LaneId);
        let n = b.un(UnOp::Popc, Type::B32, mask);
        let high = b.un(UnOp::Clz, Type::B32, mask);
        let leader = b.bin(BinOp::Sub, Type::U32, Operand::Imm(31), high);
        let one = b.mov(Type::B32, Operand::Imm(1));
        let below = b.bin(BinOp::Shl, Type::B32, one, lane);
        let below = b.bin(BinOp::Sub, Type::U32, below, Operand::Imm(1));
        let under = b.bin(BinOp::And, Type::B32, mask, below);
        let rank = b.un(UnOp::Popc, Type::B32, under);
        let base = b.mov(Type::U64, Operand::Imm(0));
        let is_leader = b.setp(Cmp::Eq, Type::U32, lane, leader);
        let n64 = b.cvt(Rounding::None, Type::U64, Type::U32, n);
        b.emit_guarded(
            is_leader,
            false,
            Op::Atom {
                space: Space::Global,
                op: AtomOp::Add,
                ty: Type::U64,
                dst: base,
                addr: Address::Reg {
                    base: count,
                    offset: 0,
                },
                b: n64.into(),
                c: None,
            },
        );
        // `shfl` moves 32 bits: the base travels as two halves.
        let lo = b.cvt(Rounding::None, Type::U32, Type::U64, base);
        let hi64 = b.bin(BinOp::Shr, Type::U64, base, Operand::Imm(32));
        let hi = b.cvt(Rounding::None, Type::U32, Type::U64, hi64);
        let mut halves = [lo, hi];
        for half in &mut halves {
            let dst = b.reg(RegClass::B32);
            b.emit(Op::Shfl {
                mode: ShflMode::Idx,
                dst,
                dst_pred: None,
                a: (*half).into(),
                b: leader.into(),
                c: Operand::Imm(0x1f),
                mask: mask.into(),
            });
            *half = dst;
        }
        let lo = b.cvt(Rounding::None, Type::U64, Type::U32, halves[0]);
        let hi = b.cvt(Rounding::None, Type::U64, Type::U32, halves[1]);
        let hi = b.bin(BinOp::Shl, Type::B64, hi, Operand::Imm(32));
        let base = b.bin(BinOp::Or, Type::B64, hi, lo);
        let rank64 = b.cvt(Rounding::None, Type::U64, Type::U32, rank);
        let slot = b.bin(BinOp::Add, Type::U64, base, rank64);
        let fits = b.setp(Cmp::Lt, Type::U64, slot, capacity);
        let addr = b.elem_addr(items, slot, 4);
        b.emit_guarded(
            fits,
            false,
            Op::St {
                space: Space::Global,
                ty: Type::U32,
                addr: Address::Reg {
                    base: addr,
                    offset: 0,
                },
                src: v.into(),
            },
        );
        Ok(())
    }

    /// Copies `r` when evaluating `later` could overwrite it (see [`may_assign`]).
    fn keep(&mut self, r: Reg, ty: Ty, later: &Expr) -> Reg {
        if may_assign(later) && self.locals.contains(&r) {
            self.b.mov(ptx_type(ty), r)
        } else {
            r
        }
    }

    fn expr(&mut self, e: &Expr) -> Result<Reg, GenError> {
        match &e.kind {
            ExprKind::Lit(lit) => Ok(self.lit(*lit, e.ty)),
            ExprKind::Local(id) => Ok(self.locals[*id]),
            ExprKind::Index(role) => {
                let r = match role {
                    IndexRole::Tile => self.ctx.tile,
                    IndexRole::Atom => self.ctx.atom,
                    IndexRole::Lane => self.ctx.lane,
                    IndexRole::Rank => self.ctx.rank,
                };
                r.ok_or_else(|| {
                    GenError::Unsupported(format!(
                        "the schedule does not provide the {role:?} index"
                    ))
                })
            }
            ExprKind::Scalar(p) => self.params.scalar(*p),
            ExprKind::Load { array, index } => self.load(*array, index),
            ExprKind::Len(array) | ExprKind::TileSetScalar(array) => self.len(*array),
            ExprKind::Unary { op, arg } => {
                let a = self.expr(arg)?;
                self.unary(*op, arg.ty, a)
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
            ExprKind::Cast { arg } => {
                let a = self.expr(arg)?;
                self.cast(a, arg.ty, e.ty)
            }
            ExprKind::Method { method, args } => self.method(*method, e.ty, args),
            ExprKind::Atomic {
                op,
                array,
                index,
                args,
            } => self.atomic(*op, *array, index, args),
            ExprKind::If { cond, then, els } => {
                let p = self.expr(cond)?;
                let t = ptx_type(e.ty);
                let res = self.b.reg_for(t);
                let mut scope = self.b.if_begin(p, false);
                if let Some(v) = self.block(then)? {
                    self.b.mov_to(t, res, v);
                }
                self.b.if_else(&mut scope);
                if let Some(v) = self.block(els)? {
                    self.b.mov_to(t, res, v);
                }
                self.b.if_end(scope);
                Ok(res)
            }
            ExprKind::Block(block) => match self.block(block)? {
                Some(v) => Ok(v),
                None => unsupported("a block used as a value has no value"),
            },
        }
    }

    fn lit(&mut self, lit: Lit, ty: Ty) -> Reg {
        let t = ptx_type(ty);
        let imm = match (lit, ty) {
            (Lit::Bool(v), _) => {
                let r = self.b.mov(Type::U32, Operand::Imm(v.into()));
                return self.b.setp(Cmp::Ne, Type::U32, r, Operand::Imm(0));
            }
            (Lit::Int(v), Ty::F32) => Operand::F32((v as f32).to_bits()),
            (Lit::Int(v), Ty::F64) => Operand::F64((v as f64).to_bits()),
            (Lit::Float(v), Ty::F32) => Operand::F32((v as f32).to_bits()),
            (Lit::Float(v), _) => Operand::F64(v.to_bits()),
            (Lit::Int(v), Ty::I32) => Operand::Imm((v as i32).into()),
            (Lit::Int(v), Ty::U32) => Operand::Imm((v as u32).into()),
            (Lit::Int(v), _) => Operand::Imm(v as i64),
        };
        self.b.mov(t, imm)
    }

    fn array(&self, array: ArrayRef) -> Result<ArrayInfo, GenError> {
        array_info(self.body, self.params, array)
    }

    /// `len()` of an array, or a CSR scalar field.
    fn len(&mut self, array: ArrayRef) -> Result<Reg, GenError> {
        match array {
            ArrayRef::Param(p) => Ok(self.params.slice(p)?.1),
            ArrayRef::Field(p, field) => {
                let (_, regs, _) = self.params.tile_set(p)?;
                Ok(match field {
                    CsrField::RowOffsets => {
                        self.b
                            .bin(BinOp::Add, Type::U64, regs.num_rows, Operand::Imm(1))
                    }
                    CsrField::ColOffsets => {
                        self.b
                            .bin(BinOp::Add, Type::U64, regs.num_cols, Operand::Imm(1))
                    }
                    CsrField::ColIndices | CsrField::RowIndices | CsrField::Values => regs.nnz,
                    CsrField::NumRows => regs.num_rows,
                    CsrField::NumCols => regs.num_cols,
                })
            }
        }
    }

    /// Whether `array[index]` is tested: under `checked`, unless it is proven in bounds.
    fn guarded(&self, array: ArrayRef, index: &Expr) -> bool {
        self.checked && !self.proofs.as_ref().is_some_and(|p| p.proven(array, index))
    }

    /// When `guarded`, emits the bounds check and returns the label to place after the access.
    fn guard(
        &mut self,
        guarded: bool,
        array: ArrayRef,
        info: &ArrayInfo,
        index: Reg,
    ) -> Result<Option<Label>, GenError> {
        let Some(flag) = self.params.error_flag.filter(|_| guarded) else {
            return Ok(None);
        };
        let len = self.len(array)?;
        let skip = self.b.label();
        check_index(self.b, flag, index, len, info.param, skip);
        Ok(Some(skip))
    }

    /// `array[index]`, through the walk's kept address when the index is the atom, with the
    /// cache policy of [`load::Data::of`].
    fn load(&mut self, array: ArrayRef, index: &Expr) -> Result<Reg, GenError> {
        let info = self.array(array)?;
        let guarded = self.guarded(array, index);
        if let Some(r) = self.vector_load(array, &info, index, guarded)? {
            return Ok(r);
        }
        if info.offsets32 {
            let i = self.expr(index)?;
            return self.load_offset32(guarded, array, &info, i);
        }
        let mt = mem_type(info.elem);
        let dst = self.b.reg_for(mt);
        let at_atom = matches!(index.kind, ExprKind::Index(IndexRole::Atom));
        let cache = load::Data::of(self.body, array, at_atom && self.ctx.coalesced).cache();
        let kept = self.ctx.atom_addr(array).filter(|_| at_atom && !guarded);
        let (addr, skip) = match kept {
            Some(addr) => (addr, None),
            None if !guarded && self.lane_offset(index, info.elem).is_some() => {
                let (rest, offset) = self.lane_offset(index, info.elem).expect("just matched");
                let i = self.index(false, rest)?;
                let row = load::elem_addr(self.b, info.base, i, info.elem.size());
                (self.b.bin(BinOp::Add, Type::U64, row, offset), None)
            }
            None => {
                if guarded {
                    let zero = if info.elem.is_float() {
                        self.zero_float(info.elem)
                    } else {
                        Operand::Imm(0)
                    };
                    let zt = if matches!(mt, Type::U8 | Type::U16) {
                        Type::U32
                    } else {
                        mt
                    };
                    self.b.mov_to(zt, dst, zero);
                }
                let i = self.index(guarded, index)?;
                let skip = match i {
                    load::Index::U64(i) => self.guard(guarded, array, &info, i)?,
                    load::Index::U32(_) => None,
                };
                (
                    load::elem_addr(self.b, info.base, i, info.elem.size()),
                    skip,
                )
            }
        };
        self.b.ld_global_to(mt, dst, (addr, 0), cache);
        if let Some(l) = skip {
            self.b.place(l);
        }
        if info.elem == Ty::Bool {
            return Ok(self.b.setp(Cmp::Ne, Type::U32, dst, Operand::Imm(0)));
        }
        if info.elem.is_half() {
            return Ok(widen_half(self.b, info.elem, dst));
        }
        Ok(dst)
    }

    /// With adjacent lanes ([`LaneVector`]): copy 0 reads a lane load of a vector-read array
    /// (`x[i * lanes + lane]`, not tested) for every lane with one vector load at `&x[i * lanes]`
    /// plus its lane's offset, and the other copies take their element. `None`: a plain load.
    fn vector_load(
        &mut self,
        array: ArrayRef,
        info: &ArrayInfo,
        index: &Expr,
        guarded: bool,
    ) -> Result<Option<Reg>, GenError> {
        let Some((v, r)) = self.vector else {
            return Ok(None);
        };
        if let Some(regs) = v.get(index) {
            return Ok(regs.get(r as usize).copied());
        }
        let ArrayRef::Param(p) = array else {
            return Ok(None);
        };
        let row = lane_row(index, v.lanes_param);
        let vectorized = vector_lane_params(self.body, v.lanes_param).contains(&p);
        let (Some(row), true, 0, false) = (row, vectorized, r, guarded) else {
            return Ok(None);
        };
        let Some(first_lane) = self.ctx.lane_scaled[2] else {
            return Ok(None);
        };
        let i = self.index(false, row)?;
        let row = load::elem_addr(self.b, info.base, i, 4);
        let addr = self.b.bin(BinOp::Add, Type::U64, row, first_lane);
        let cache = load::Data::of(self.body, array, false).cache();
        let mt = mem_type(info.elem);
        let regs: Vec<Reg> = (0..v.width).map(|_| self.b.reg_for(mt)).collect();
        self.b.ld_global_vec(mt, &regs, (addr, 0), cache);
        let key: *const Expr = index;
        v.loaded.borrow_mut().push((key, regs.clone()));
        Ok(Some(regs[0]))
    }

    /// For an index `rest + lane` (either order) and a walk that scaled its lane for `elem`'s
    /// size: `rest` and the scaled lane.
    fn lane_offset<'e>(&self, index: &'e Expr, elem: Ty) -> Option<(&'e Expr, Reg)> {
        let offset = self.ctx.lane_scaled[elem.size().trailing_zeros() as usize]?;
        plus_lane(index).map(|rest| (rest, offset))
    }

    /// An index, kept as the `u32` it was cast from when nothing needs the 64-bit value (no
    /// bounds check): the address is then one `mul.wide.u32` from it.
    fn index(&mut self, guarded: bool, index: &Expr) -> Result<load::Index, GenError> {
        if let (ExprKind::Index(IndexRole::Atom), Some(atom), false) =
            (&index.kind, self.ctx.atom32, guarded)
        {
            return Ok(load::Index::U32(atom));
        }
        if let ExprKind::Cast { arg } = &index.kind {
            if !guarded && arg.ty == Ty::U32 && index.ty == Ty::U64 {
                return Ok(load::Index::U32(self.expr(arg)?));
            }
        }
        Ok(load::Index::U64(self.expr(index)?))
    }

    /// A body's read of a tile-offset field stored with 32-bit offsets: a 4-byte load,
    /// zero-extended to the field's `u64`.
    fn load_offset32(
        &mut self,
        guarded: bool,
        array: ArrayRef,
        info: &ArrayInfo,
        index: Reg,
    ) -> Result<Reg, GenError> {
        let dst = self.b.reg_for(Type::U64);
        if guarded {
            self.b.mov_to(Type::U64, dst, Operand::Imm(0));
        }
        let skip = self.guard(guarded, array, info, index)?;
        let addr = offset_addr(self.b, OffsetWidth::U32, info.base, index);
        let value = load_offset(self.b, OffsetWidth::U32, addr);
        self.b.mov_to(Type::U64, dst, value);
        if let Some(l) = skip {
            self.b.place(l);
        }
        Ok(dst)
    }

    fn zero_float(&self, ty: Ty) -> Operand {
        if ty == Ty::F32 {
            Operand::F32(0)
        } else {
            Operand::F64(0)
        }
    }

    fn unary(&mut self, op: UnaryOp, ty: Ty, a: Reg) -> Result<Reg, GenError> {
        Ok(match (op, ty) {
            (UnaryOp::Not, Ty::Bool) => self.b.un(UnOp::Not, Type::Pred, a),
            (UnaryOp::Not, _) if ty.is_int() => self.b.un(UnOp::Not, bits_type(ty), a),
            (UnaryOp::Neg, Ty::I32 | Ty::U32) => self.b.un(UnOp::Neg, Type::S32, a),
            (UnaryOp::Neg, Ty::I64 | Ty::U64) => self.b.un(UnOp::Neg, Type::S64, a),
            (UnaryOp::Neg, Ty::F32 | Ty::F64) => self.b.un(UnOp::Neg, ptx_type(ty), a),
            _ => return unsupported(format!("`{op:?}` on `{}`", ty.rust_name())),
        })
    }

    fn binary(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr) -> Result<Reg, GenError> {
        let ty = lhs.ty;
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let l = self.expr(lhs)?;
            let res = self.b.mov(Type::Pred, l);
            let skip = self.b.label();
            self.b.bra_if(res, op == BinaryOp::And, skip);
            let r = self.expr(rhs)?;
            self.b.mov_to(Type::Pred, res, r);
            self.b.place(skip);
            return Ok(res);
        }
        let l = self.expr(lhs)?;
        let l = self.keep(l, ty, rhs);
        let r = self.expr(rhs)?;
        let t = ptx_type(ty);
        let arith = |op| -> Result<BinOp, GenError> {
            if ty == Ty::Bool {
                return unsupported(format!("`{op:?}` on `bool`"));
            }
            Ok(op)
        };
        let cmp = |c: Cmp| {
            if ty.is_float() && c == Cmp::Ne {
                Cmp::Neu
            } else {
                c
            }
        };
        Ok(match op {
            BinaryOp::Add => self.b.bin(arith(BinOp::Add)?, t, l, r),
            BinaryOp::Sub => self.b.bin(arith(BinOp::Sub)?, t, l, r),
            BinaryOp::Mul => self.b.bin(arith(BinOp::Mul)?, t, l, r),
            BinaryOp::Div => self.b.bin(arith(BinOp::Div)?, t, l, r),
            BinaryOp::Rem if ty.is_float() => {
                return unsupported("float `%` has no PTX instruction")
            }
            BinaryOp::Rem => self.b.bin(arith(BinOp::Rem)?, t, l, r),
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                if ty.is_float() {
                    return unsupported(format!("`{op:?}` on floats"));
                }
                let bop = match op {
                    BinaryOp::BitAnd => BinOp::And,
                    BinaryOp::BitOr => BinOp::Or,
                    _ => BinOp::Xor,
                };
                let bt = if ty == Ty::Bool {
                    Type::Pred
                } else {
                    bits_type(ty)
                };
                self.b.bin(bop, bt, l, r)
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                if !ty.is_int() || !rhs.ty.is_int() {
                    return unsupported("shifts need integer operands");
                }
                let amount = self.shift_amount(r, rhs.ty, ty.size() * 8);
                if op == BinaryOp::Shl {
                    self.b.bin(BinOp::Shl, bits_type(ty), l, amount)
                } else {
                    self.b.bin(BinOp::Shr, t, l, amount)
                }
            }
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => {
                let c = match op {
                    BinaryOp::Eq => Cmp::Eq,
                    BinaryOp::Ne => Cmp::Ne,
                    BinaryOp::Lt => Cmp::Lt,
                    BinaryOp::Le => Cmp::Le,
                    BinaryOp::Gt => Cmp::Gt,
                    _ => Cmp::Ge,
                };
                if ty == Ty::Bool {
                    let lu = self.b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), l);
                    let ru = self.b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), r);
                    self.b.setp(c, Type::U32, lu, ru)
                } else {
                    self.b.setp(cmp(c), t, l, r)
                }
            }
            BinaryOp::And | BinaryOp::Or => {
                unreachable!("short-circuit operators are handled above")
            }
        })
    }

    /// The shift amount as a `.u32` masked to `bits - 1`, like Rust's release-mode shifts.
    fn shift_amount(&mut self, r: Reg, ty: Ty, bits: u32) -> Reg {
        let r32 = if ty.size() == 8 {
            self.b.cvt(Rounding::None, Type::U32, Type::U64, r)
        } else {
            r
        };
        self.b
            .bin(BinOp::And, Type::B32, r32, Operand::Imm((bits - 1).into()))
    }

    fn cast(&mut self, a: Reg, from: Ty, to: Ty) -> Result<Reg, GenError> {
        let (ft, tt) = (ptx_type(from), ptx_type(to));
        Ok(match (from, to) {
            _ if from == to => a,
            (Ty::Bool, _) if to.is_int() => self.b.selp(tt, Operand::Imm(1), Operand::Imm(0), a),
            _ if from.is_int() && to.is_int() => {
                if from.size() == to.size() {
                    a
                } else {
                    self.b.cvt(Rounding::None, tt, ft, a)
                }
            }
            _ if from.is_int() && to.is_float() => self.b.cvt(Rounding::Rn, tt, ft, a),
            _ if from.is_float() && to.is_int() => self.b.cvt(Rounding::Rzi, tt, ft, a),
            (Ty::F32, Ty::F64) => self.b.cvt(Rounding::None, tt, ft, a),
            (Ty::F64, Ty::F32) => self.b.cvt(Rounding::Rn, tt, ft, a),
            _ => {
                return unsupported(format!(
                    "cast from `{}` to `{}`",
                    from.rust_name(),
                    to.rust_name()
                ))
            }
        })
    }

    fn args(&mut self, args: &[Expr]) -> Result<Vec<Reg>, GenError> {
        let mut regs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let r = self.expr(a)?;
            let r = match args[i + 1..].iter().find(|later| may_assign(later)) {
                Some(later) => self.keep(r, a.ty, later),
                None => r,
            };
            regs.push(r);
        }
        Ok(regs)
    }

    fn method(&mut self, method: Method, ty: Ty, args: &[Expr]) -> Result<Reg, GenError> {
        let want = method.arity();
        if args.len() != want {
            return unsupported(format!("`{method:?}` takes {want} operands"));
        }
        let a = self.args(args)?;
        let t = ptx_type(ty);
        // The receiver's type: the counting methods return a `u32` of any integer.
        let rty = args[0].ty;
        Ok(match method {
            Method::Min | Method::Max if ty != Ty::Bool => {
                let op = if method == Method::Min {
                    BinOp::Min
                } else {
                    BinOp::Max
                };
                self.b.bin(op, t, a[0], a[1])
            }
            Method::Abs if matches!(ty, Ty::I32 | Ty::I64 | Ty::F32 | Ty::F64) => {
                self.b.un(UnOp::Abs, t, a[0])
            }
            Method::Sqrt if ty.is_float() => self.b.un(UnOp::Sqrt, t, a[0]),
            Method::MulAdd if ty.is_float() => {
                let dst = self.b.reg_for(t);
                self.b.emit(Op::Fma {
                    ty: t,
                    dst,
                    a: a[0].into(),
                    b: a[1].into(),
                    c: a[2].into(),
                });
                dst
            }
            Method::Clamp if ty != Ty::Bool => {
                // Rust's order: below `lo` first, then above `hi`; a NaN fails both tests.
                let below = self.b.setp(Cmp::Lt, t, a[0], a[1]);
                let r = self.b.selp(t, a[1], a[0], below);
                let above = self.b.setp(Cmp::Gt, t, r, a[2]);
                self.b.selp(t, a[2], r, above)
            }
            Method::Floor if ty.is_float() => self.b.cvt(Rounding::Rmi, t, t, a[0]),
            Method::Ceil if ty.is_float() => self.b.cvt(Rounding::Rpi, t, t, a[0]),
            Method::Trunc if ty.is_float() => self.b.cvt(Rounding::Rzi, t, t, a[0]),
            Method::Round if ty.is_float() => self.round(ty, a[0]),
            Method::Powi if ty.is_float() => self.power(ty, a[0], a[1], Ty::I32),
            Method::Pow if ty.is_int() => self.power(ty, a[0], a[1], Ty::U32),
            Method::LeadingZeros if rty.is_int() => self.b.un(UnOp::Clz, bits_type(rty), a[0]),
            Method::TrailingZeros if rty.is_int() => {
                let reversed = self.b.un(UnOp::Brev, bits_type(rty), a[0]);
                self.b.un(UnOp::Clz, bits_type(rty), reversed)
            }
            Method::CountOnes if rty.is_int() => self.b.un(UnOp::Popc, bits_type(rty), a[0]),
            m if m.is_transcendental() && ty == Ty::F32 => self.transcendental(m, a[0], a.get(1)),
            m if m.is_transcendental() && ty == Ty::F64 => {
                crate::math64::call(self.b, m, a[0], a.get(1).copied())
            }
            _ => return unsupported(format!("`{method:?}` on `{}`", ty.rust_name())),
        })
    }

    /// `exp`, `ln`, `powf` and the others in `f32`, on the hardware approximations: `exp(x)` is
    /// `ex2(x · log2 e)`, `ln(x)` is `lg2(x) · ln 2`, `powf(x, y)` is `ex2(y · lg2(x))` with
    /// Rust's `x⁰ = 1` and `1ʸ = 1` (which the approximation would turn into NaN for an
    /// infinite or NaN operand).
    fn transcendental(&mut self, m: Method, x: Reg, y: Option<&Reg>) -> Reg {
        let f = Type::F32;
        let log2_e = Operand::F32(std::f32::consts::LOG2_E.to_bits());
        let ln_2 = Operand::F32(std::f32::consts::LN_2.to_bits());
        match (m, y) {
            (Method::Exp, _) => {
                let t = self.b.bin(BinOp::Mul, f, x, log2_e);
                self.b.un(UnOp::Ex2, f, t)
            }
            (Method::Exp2, _) => self.b.un(UnOp::Ex2, f, x),
            (Method::Ln, _) => {
                let l = self.b.un(UnOp::Lg2, f, x);
                self.b.bin(BinOp::Mul, f, l, ln_2)
            }
            (Method::Log2, _) => self.b.un(UnOp::Lg2, f, x),
            (Method::Sin, _) => self.b.un(UnOp::Sin, f, x),
            (Method::Cos, _) => self.b.un(UnOp::Cos, f, x),
            (Method::Powf, Some(&y)) => {
                let l = self.b.un(UnOp::Lg2, f, x);
                let t = self.b.bin(BinOp::Mul, f, y, l);
                let p = self.b.un(UnOp::Ex2, f, t);
                let one = Operand::F32(1.0f32.to_bits());
                let zero_exp = self.b.setp(Cmp::Eq, f, y, Operand::F32(0));
                let one_base = self.b.setp(Cmp::Eq, f, x, one.clone());
                let p = self.b.selp(f, one.clone(), p, zero_exp);
                self.b.selp(f, one, p, one_base)
            }
            _ => self.b.un(UnOp::Tanh, f, x),
        }
    }

    /// Rust's `round`: half away from zero (`cvt.rni` would round half to even). `x - trunc(x)`
    /// is exact, so a fraction of at least one half moves the truncation one away from zero; the
    /// sign of zero is kept (`(-0.3f32).round()` is `-0.0`) by subtracting for a negative `x`.
    fn round(&mut self, ty: Ty, x: Reg) -> Reg {
        let t = ptx_type(ty);
        let (half, one, zero) = match ty {
            Ty::F32 => (
                Operand::F32(0.5f32.to_bits()),
                Operand::F32(1.0f32.to_bits()),
                Operand::F32(0),
            ),
            _ => (
                Operand::F64(0.5f64.to_bits()),
                Operand::F64(1.0f64.to_bits()),
                Operand::F64(0),
            ),
        };
        let r = self.b.cvt(Rounding::Rzi, t, t, x);
        let frac = self.b.bin(BinOp::Sub, t, x, r);
        let frac = self.b.un(UnOp::Abs, t, frac);
        let up = self.b.setp(Cmp::Ge, t, frac, half);
        let step = self.b.selp(t, one, zero.clone(), up);
        let negative = self.b.setp(Cmp::Lt, t, x, zero);
        let away = self.b.bin(BinOp::Add, t, r, step);
        let down = self.b.bin(BinOp::Sub, t, r, step);
        self.b.selp(t, down, away, negative)
    }

    /// `x.powi(n)` (float `x`, `n: i32`) or `x.pow(e)` (integer `x`, `e: u32`, wrapping) by
    /// repeated squaring, in the order of LLVM's `powi` (compiler-rt's `__powisf2`): a negative
    /// `n` takes the reciprocal of `x^|n|` at the end.
    fn power(&mut self, ty: Ty, x: Reg, n: Reg, exp_ty: Ty) -> Reg {
        let t = ptx_type(ty);
        let u = Type::U32;
        let e = if exp_ty == Ty::I32 {
            self.b.un(UnOp::Abs, Type::S32, n)
        } else {
            n
        };
        let e = self.b.mov(u, e);
        let base = self.b.mov(t, x);
        let one = match ty {
            Ty::F32 => Operand::F32(1.0f32.to_bits()),
            Ty::F64 => Operand::F64(1.0f64.to_bits()),
            _ => Operand::Imm(1),
        };
        let acc = self.b.mov(t, one.clone());
        let scope = self.b.loop_begin();
        let odd_bit = self.b.bin(BinOp::And, Type::B32, e, Operand::Imm(1));
        let odd = self.b.setp(Cmp::Ne, u, odd_bit, Operand::Imm(0));
        let skip = self.b.label();
        self.b.bra_if(odd, true, skip);
        self.b.bin_to(BinOp::Mul, t, acc, acc, base);
        self.b.place(skip);
        self.b.bin_to(BinOp::Shr, u, e, e, Operand::Imm(1));
        let done = self.b.setp(Cmp::Eq, u, e, Operand::Imm(0));
        self.b.break_if(&scope, done, false);
        self.b.bin_to(BinOp::Mul, t, base, base, base);
        self.b.loop_end(scope);
        if exp_ty != Ty::I32 {
            return acc;
        }
        let negative = self.b.setp(Cmp::Lt, Type::S32, n, Operand::Imm(0));
        let inverse = self.b.bin(BinOp::Div, t, one, acc);
        self.b.selp(t, inverse, acc, negative)
    }

    /// Reinterprets a float register as its bit pattern (integers are returned as they are).
    fn bits_of(&mut self, r: Reg, ty: Ty) -> Reg {
        if ty.is_float() {
            self.b.mov(bits_type(ty), r)
        } else {
            r
        }
    }

    fn atomic(
        &mut self,
        op: AtomicOp,
        array: ArrayRef,
        index: &Expr,
        args: &[Expr],
    ) -> Result<Reg, GenError> {
        let i = self.expr(index)?;
        let i = match args.iter().find(|a| may_assign(a)) {
            Some(later) => self.keep(i, Ty::U64, later),
            None => i,
        };
        let a = self.args(args)?;
        let info = self.array(array)?;
        if info.offsets32 {
            return unsupported("a tile set's offsets are read-only");
        }
        let ty = info.elem;
        if ty.is_half() {
            return unsupported(format!(
                "atomics on `{}` elements: the hardware has no 16-bit float atomics on every \
                 target; keep the array in `f32`",
                ty.rust_name()
            ));
        }
        let want = if op == AtomicOp::Cas { 2 } else { 1 };
        if a.len() != want {
            return unsupported(format!("atomic `{op:?}` takes {want} value operands"));
        }
        if ty == Ty::Bool {
            return unsupported("atomics on `bool` are not supported");
        }
        let t = ptx_type(ty);
        let dst = self.b.reg_for(t);
        let guarded = self.guarded(array, index);
        if guarded {
            let zero = if ty.is_float() {
                self.zero_float(ty)
            } else {
                Operand::Imm(0)
            };
            self.b.mov_to(t, dst, zero);
        }
        let skip = self.guard(guarded, array, &info, i)?;
        let addr = self.b.elem_addr(info.base, i, ty.size());
        let native = |op: AtomOp, ty: Type| (op, ty, None);
        let (aop, aty, c) = match op {
            AtomicOp::Add if ty.is_float() || matches!(ty, Ty::I32 | Ty::U32) => {
                native(AtomOp::Add, t)
            }
            AtomicOp::Add => native(AtomOp::Add, Type::U64),
            AtomicOp::Min | AtomicOp::Max if ty.is_float() => {
                self.float_min_max(op == AtomicOp::Min, ty, dst, addr, a[0]);
                if let Some(l) = skip {
                    self.b.place(l);
                }
                return Ok(dst);
            }
            AtomicOp::Min => native(AtomOp::Min, t),
            AtomicOp::Max => native(AtomOp::Max, t),
            AtomicOp::Exch | AtomicOp::Cas => {
                let aop = if op == AtomicOp::Exch {
                    AtomOp::Exch
                } else {
                    AtomOp::Cas
                };
                let bits = self.bits_of(a[0], ty);
                let c = if op == AtomicOp::Cas {
                    Some(Operand::from(self.bits_of(a[1], ty)))
                } else {
                    None
                };
                let old = if ty.is_float() {
                    self.b.reg_for(bits_type(ty))
                } else {
                    dst
                };
                self.b.emit(Op::Atom {
                    space: Space::Global,
                    op: aop,
                    ty: bits_type(ty),
                    dst: old,
                    addr: Address::Reg {
                        base: addr,
                        offset: 0,
                    },
                    b: bits.into(),
                    c,
                });
                if old != dst {
                    self.b.mov_to(bits_type(ty), dst, old);
                }
                if let Some(l) = skip {
                    self.b.place(l);
                }
                return Ok(dst);
            }
        };
        self.b.emit(Op::Atom {
            space: Space::Global,
            op: aop,
            ty: aty,
            dst,
            addr: Address::Reg {
                base: addr,
                offset: 0,
            },
            b: a[0].into(),
            c,
        });
        if let Some(l) = skip {
            self.b.place(l);
        }
        Ok(dst)
    }

    /// Float atomic min/max as a `cas` loop on the bit pattern: the new value is computed with
    /// `min`/`max` on the floats (Rust's NaN-ignoring `f32::min`), so negative values and ±0 are
    /// right, which integer min/max on the bits would not be. `dst` receives the old value.
    fn float_min_max(&mut self, min: bool, ty: Ty, dst: Reg, addr: Reg, v: Reg) {
        let (t, bt) = (ptx_type(ty), bits_type(ty));
        let expected = self.b.ld(Space::Global, bt, addr);
        let head = self.b.label();
        self.b.place(head);
        let cur = self.b.reg_for(t);
        self.b.mov_to(bt, cur, expected);
        let op = if min { BinOp::Min } else { BinOp::Max };
        let newf = self.b.bin(op, t, cur, v);
        let new_bits = self.b.mov(bt, newf);
        let seen = self.b.reg_for(bt);
        self.b.emit(Op::Atom {
            space: Space::Global,
            op: AtomOp::Cas,
            ty: bt,
            dst: seen,
            addr: Address::Reg {
                base: addr,
                offset: 0,
            },
            b: expected.into(),
            c: Some(new_bits.into()),
        });
        let raced = self.b.setp(Cmp::Ne, bt, seen, expected);
        self.b.mov_to(bt, expected, seen);
        self.b.bra_if(raced, false, head);
        self.b.mov_to(bt, dst, expected);
    }
}
