//! The SIMT interpreter: a kernel is first resolved into a flat, label-free form with registers as
//! indices, then warps step over it with per-thread program counters.
//!
//! Registers of a warp live in one `Vec<u64>` laid out `[register][lane]`, every value stored as
//! its bits zero-extended (f32 via `to_bits`, predicates as 0/1). The special registers are extra
//! registers filled when the warp is created, so reading `%tid.x` costs what reading `%r1` does.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::memory::{load_le, store_le, Fault, Memory};
use super::{LaunchConfig, SimError, Stats};
use crate::ir::{
    Address, AtomOp, BinOp, Cmp, Instr, Kernel, Op, Operand, Reg, RegClass, Rounding, ShflMode,
    Space, Special, Type, UnOp, VoteMode,
};

/// Blocks resident at once; blocks are admitted in grid order as earlier ones finish.
const RESIDENT_BLOCKS: usize = 64;
/// Warp issues a warp may make before the scheduler moves to the next warp.
const QUANTUM: u32 = 32;

/// How many special registers each warp keeps after the declared ones.
const SPECIALS: usize = 6;

/// The order matches the values `Warp::new` fills in.
fn special_slot(s: Special) -> u32 {
    match s {
        Special::TidX => 0,
        Special::NtidX => 1,
        Special::CtaidX => 2,
        Special::NctaidX => 3,
        Special::LaneId => 4,
        Special::WarpId => 5,
    }
}

#[derive(Clone, Copy, Debug)]
enum Src {
    Reg(u32),
    Imm(u64),
}

/// Where a vector load or store goes: `n` elements of `size` bytes from `base + offset` on.
#[derive(Clone, Copy, Debug)]
struct VecAccess {
    shared: bool,
    size: u32,
    n: u32,
    base: Src,
    offset: u64,
}

impl VecAccess {
    /// The size of the whole vector, which its address must be a multiple of.
    fn bytes(self) -> u32 {
        self.n * self.size
    }
}

#[derive(Clone, Copy, Debug)]
enum POp {
    Mov {
        mask: u64,
        dst: u32,
        src: Src,
    },
    Bin {
        op: BinOp,
        ty: Type,
        dst: u32,
        a: Src,
        b: Src,
    },
    Un {
        op: UnOp,
        ty: Type,
        dst: u32,
        a: Src,
    },
    Fma {
        ty: Type,
        dst: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Mad {
        wide: bool,
        ty: Type,
        dst: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Type,
        dst: u32,
        a: Src,
        b: Src,
    },
    Selp {
        mask: u64,
        dst: u32,
        a: Src,
        b: Src,
        pred: u32,
    },
    Cvt {
        rounding: Rounding,
        dst_ty: Type,
        src_ty: Type,
        dst: u32,
        src: Src,
    },
    Ld {
        shared: bool,
        size: u32,
        dst: u32,
        base: Src,
        offset: u64,
    },
    St {
        shared: bool,
        size: u32,
        base: Src,
        offset: u64,
        src: Src,
    },
    /// `ld.vN`: the elements, in address order, into `dsts[..n]`.
    LdVec {
        access: VecAccess,
        dsts: [u32; 4],
    },
    /// `st.vN`: `srcs[..n]` to the elements, in address order.
    StVec {
        access: VecAccess,
        srcs: [Src; 4],
    },
    Atom {
        shared: bool,
        op: AtomOp,
        ty: Type,
        dst: u32,
        base: Src,
        offset: u64,
        b: Src,
        c: Src,
    },
    Bra {
        target: u32,
    },
    BarSync,
    Nop,
    Shfl {
        mode: ShflMode,
        dst: u32,
        dst_pred: Option<u32>,
        a: Src,
        b: Src,
        c: Src,
        mask: Src,
    },
    Vote {
        mode: VoteMode,
        dst: u32,
        a: Src,
        mask: Src,
    },
    ActiveMask {
        dst: u32,
    },
    /// `bar.warp.sync`: a collective that exchanges nothing.
    WarpSync {
        mask: Src,
    },
    Ret,
}

#[derive(Clone, Copy, Debug)]
struct PInstr {
    guard: Option<(u32, bool)>,
    op: POp,
}

/// A kernel resolved for one launch: labels to indices, registers to slots, params to values.
pub(crate) struct Prepared<'k> {
    kernel: &'k Kernel,
    code: Vec<PInstr>,
    /// The `kernel.body` index of each `code` entry, for messages.
    origin: Vec<usize>,
    nregs: usize,
    special_base: u32,
    /// `[start, end)` of each shared variable in the block's shared window.
    regions: Vec<(u64, u64)>,
    shared_bytes: usize,
}

fn width_mask(ty: Type) -> u64 {
    match ty {
        Type::Pred => 1,
        Type::U8 => 0xFF,
        Type::U16 | Type::F16 => 0xFFFF,
        Type::B32 | Type::U32 | Type::S32 | Type::F32 => 0xFFFF_FFFF,
        Type::B64 | Type::U64 | Type::S64 | Type::F64 => u64::MAX,
    }
}

fn is_64(ty: Type) -> bool {
    matches!(ty, Type::B64 | Type::U64 | Type::S64 | Type::F64)
}

impl<'k> Prepared<'k> {
    pub(crate) fn new(
        kernel: &'k Kernel,
        cfg: LaunchConfig,
        args: &[u64],
    ) -> Result<Prepared<'k>, SimError> {
        let mut class_base = [0u32; 5];
        let mut total = 0u32;
        for (i, &n) in kernel.reg_counts.iter().enumerate() {
            class_base[i] = total;
            total = total
                .checked_add(n)
                .filter(|&t| t <= crate::MAX_REGISTERS)
                .ok_or_else(|| {
                    SimError::Unsupported(format!(
                        "kernel `{}` declares more than {} registers",
                        kernel.name,
                        crate::MAX_REGISTERS
                    ))
                })?;
        }
        let special_base = total;
        let nregs = (total as usize) + SPECIALS;

        let mut regions = Vec::new();
        let mut names: HashMap<&str, u64> = HashMap::new();
        let mut end = 0u64;
        for s in kernel.shared.iter().filter(|s| s.bytes > 0) {
            let align = u64::from(s.align.max(1));
            let start = end.div_ceil(align) * align;
            end = start + u64::from(s.bytes);
            regions.push((start, end));
            names.insert(&s.name, start);
        }
        if let Some(max_align) = kernel
            .shared
            .iter()
            .filter(|s| s.bytes == 0)
            .map(|s| s.align.max(1))
            .max()
        {
            let align = u64::from(max_align);
            let start = end.div_ceil(align) * align;
            end = start + u64::from(cfg.dynamic_shared);
            regions.push((start, end));
            for s in kernel.shared.iter().filter(|s| s.bytes == 0) {
                names.insert(&s.name, start);
            }
        }
        if end > 1 << 24 {
            return Err(SimError::BadLaunch(format!(
                "{end} bytes of shared memory per block is too much"
            )));
        }

        let mut labels = HashMap::new();
        let mut count = 0u32;
        for i in &kernel.body {
            match i.op {
                Op::Label(l) => {
                    labels.insert(l.0, count);
                }
                _ => count += 1,
            }
        }

        let mut code = Vec::with_capacity(count as usize);
        let mut origin = Vec::with_capacity(count as usize);
        for (idx, instr) in kernel.body.iter().enumerate() {
            if matches!(instr.op, Op::Label(_)) {
                continue;
            }
            let cx = Resolver {
                kernel,
                class_base,
                special_base,
                names: &names,
                labels: &labels,
                args,
                instr,
                idx,
            };
            code.push(cx.resolve()?);
            origin.push(idx);
        }
        Ok(Prepared {
            kernel,
            code,
            origin,
            nregs,
            special_base,
            regions,
            shared_bytes: end as usize,
        })
    }

    fn instr_text(&self, pc: u32) -> String {
        let idx = self.origin[pc as usize];
        format!(
            "{} (instruction {idx} of `{}`)",
            self.kernel.body[idx].to_string().trim(),
            self.kernel.name
        )
    }
}

struct Resolver<'a> {
    kernel: &'a Kernel,
    class_base: [u32; 5],
    special_base: u32,
    names: &'a HashMap<&'a str, u64>,
    labels: &'a HashMap<u32, u32>,
    args: &'a [u64],
    instr: &'a Instr,
    idx: usize,
}

impl Resolver<'_> {
    fn invalid(&self, why: impl std::fmt::Display) -> SimError {
        SimError::Invalid(format!(
            "kernel `{}`, instruction {} `{}`: {why}",
            self.kernel.name,
            self.idx,
            self.instr.to_string().trim()
        ))
    }

    fn reg(&self, r: Reg) -> Result<u32, SimError> {
        let n = self.kernel.reg_counts[r.class as usize];
        if r.index >= n {
            return Err(self.invalid(format_args!(
                "register {r} is not declared (`.reg {} %{}<{n}>`)",
                r.class.decl_type(),
                r.class.prefix()
            )));
        }
        Ok(self.class_base[r.class as usize] + r.index)
    }

    fn reg_of(&self, r: Reg, class: RegClass) -> Result<u32, SimError> {
        if r.class != class {
            return Err(self.invalid(format_args!(
                "{r} must be a `{}` register",
                class.decl_type()
            )));
        }
        self.reg(r)
    }

    /// An operand read as type `ty`: immediates are converted to `ty`'s bit pattern.
    fn src(&self, o: &Operand, ty: Type) -> Result<Src, SimError> {
        Ok(match o {
            Operand::Reg(r) => Src::Reg(self.reg(*r)?),
            Operand::Imm(v) => Src::Imm(match ty {
                Type::F32 => u64::from((*v as f32).to_bits()),
                Type::F64 => (*v as f64).to_bits(),
                _ => (*v as u64) & width_mask(ty),
            }),
            Operand::F32(bits) => Src::Imm(match ty {
                Type::F64 => f64::from(f32::from_bits(*bits)).to_bits(),
                _ => u64::from(*bits),
            }),
            Operand::F64(bits) => Src::Imm(match ty {
                Type::F32 => u64::from((f64::from_bits(*bits) as f32).to_bits()),
                _ => *bits,
            }),
            Operand::Special(s) => Src::Reg(self.special_base + special_slot(*s)),
            Operand::Symbol(name) => match self.names.get(name.as_str()) {
                Some(&addr) => Src::Imm(addr),
                None => {
                    return Err(self.invalid(format_args!(
                        "`{name}` is not a shared variable of the kernel"
                    )))
                }
            },
        })
    }

    fn mem_addr(&self, space: Space, addr: &Address) -> Result<(Src, u64), SimError> {
        match addr {
            Address::Reg { base, offset } => {
                Ok((Src::Reg(self.reg_of(*base, RegClass::B64)?), *offset as u64))
            }
            Address::Symbol { name, offset } if space == Space::Shared => {
                match self.names.get(name.as_str()) {
                    Some(&a) => Ok((Src::Imm(a), *offset as u64)),
                    None => Err(self.invalid(format_args!(
                        "`{name}` is not a shared variable of the kernel"
                    ))),
                }
            }
            Address::Symbol { name, .. } => Err(self.invalid(format_args!(
                "`[{name}]` names no {} variable",
                space.name()
            ))),
        }
    }

    /// The access of a vector load or store of `n` elements of `ty` at `addr`: a vector PTX has
    /// ([`Type::vector_fits`]), in global or shared memory.
    fn vec_access(
        &self,
        space: Space,
        ty: Type,
        n: usize,
        addr: &Address,
    ) -> Result<VecAccess, SimError> {
        if !ty.vector_fits(n) || space == Space::Param {
            return Err(self.unsupported());
        }
        let (base, offset) = self.mem_addr(space, addr)?;
        Ok(VecAccess {
            shared: space == Space::Shared,
            size: ty.size(),
            n: n as u32,
            base,
            offset,
        })
    }

    fn unsupported(&self) -> SimError {
        SimError::Unsupported(format!(
            "kernel `{}`, instruction {} `{}`: this type/operation combination",
            self.kernel.name,
            self.idx,
            self.instr.to_string().trim()
        ))
    }

    fn resolve(&self) -> Result<PInstr, SimError> {
        let guard = match self.instr.guard {
            Some(g) => Some((self.reg_of(g.pred, RegClass::Pred)?, g.negate)),
            None => None,
        };
        let op = match &self.instr.op {
            Op::Mov { ty, dst, src } => POp::Mov {
                mask: width_mask(*ty),
                dst: self.reg(*dst)?,
                src: self.src(src, *ty)?,
            },
            Op::Bin { op, ty, dst, a, b } => {
                let ok = match ty {
                    Type::F32 | Type::F64 => {
                        matches!(
                            op,
                            BinOp::Add
                                | BinOp::Sub
                                | BinOp::Mul
                                | BinOp::Div
                                | BinOp::Min
                                | BinOp::Max
                        )
                    }
                    Type::Pred => matches!(op, BinOp::And | BinOp::Or | BinOp::Xor),
                    Type::U8 | Type::U16 | Type::F16 => false,
                    _ => *op != BinOp::MulWide || !is_64(*ty),
                };
                if !ok {
                    return Err(self.unsupported());
                }
                let bty = if matches!(op, BinOp::Shl | BinOp::Shr) {
                    Type::U32
                } else {
                    *ty
                };
                POp::Bin {
                    op: *op,
                    ty: *ty,
                    dst: self.reg(*dst)?,
                    a: self.src(a, *ty)?,
                    b: self.src(b, bty)?,
                }
            }
            Op::Un { op, ty, dst, a } => {
                let ok = match ty {
                    Type::F32 => matches!(op, UnOp::Neg | UnOp::Abs | UnOp::Sqrt) || op.is_approx(),
                    Type::F64 => matches!(op, UnOp::Neg | UnOp::Abs | UnOp::Sqrt),
                    Type::Pred => *op == UnOp::Not,
                    Type::U8 | Type::U16 | Type::F16 => false,
                    _ => *op != UnOp::Sqrt && !op.is_approx(),
                };
                if !ok {
                    return Err(self.unsupported());
                }
                POp::Un {
                    op: *op,
                    ty: *ty,
                    dst: self.reg(*dst)?,
                    a: self.src(a, *ty)?,
                }
            }
            Op::Fma { ty, dst, a, b, c } => {
                if !ty.is_float() {
                    return Err(self.unsupported());
                }
                POp::Fma {
                    ty: *ty,
                    dst: self.reg(*dst)?,
                    a: self.src(a, *ty)?,
                    b: self.src(b, *ty)?,
                    c: self.src(c, *ty)?,
                }
            }
            Op::Mad {
                wide,
                ty,
                dst,
                a,
                b,
                c,
            } => {
                let sources_ok = matches!(ty, Type::U32 | Type::S32)
                    || (!*wide && matches!(ty, Type::U64 | Type::S64));
                if !sources_ok {
                    return Err(self.unsupported());
                }
                let sum_ty = match (*wide, *ty) {
                    (true, Type::S32) => Type::S64,
                    (true, _) => Type::U64,
                    (false, ty) => ty,
                };
                POp::Mad {
                    wide: *wide,
                    ty: *ty,
                    dst: self.reg(*dst)?,
                    a: self.src(a, *ty)?,
                    b: self.src(b, *ty)?,
                    c: self.src(c, sum_ty)?,
                }
            }
            Op::Setp { cmp, ty, dst, a, b } => {
                if *ty == Type::Pred {
                    return Err(self.unsupported());
                }
                POp::Setp {
                    cmp: *cmp,
                    ty: *ty,
                    dst: self.reg_of(*dst, RegClass::Pred)?,
                    a: self.src(a, *ty)?,
                    b: self.src(b, *ty)?,
                }
            }
            Op::Selp {
                ty,
                dst,
                a,
                b,
                pred,
            } => POp::Selp {
                mask: width_mask(*ty),
                dst: self.reg(*dst)?,
                a: self.src(a, *ty)?,
                b: self.src(b, *ty)?,
                pred: self.reg_of(*pred, RegClass::Pred)?,
            },
            Op::Cvt {
                rounding,
                dst_ty,
                src_ty,
                dst,
                src,
            } => {
                if *dst_ty == Type::Pred || *src_ty == Type::Pred {
                    return Err(self.unsupported());
                }
                // `.rmi`, `.rpi` and `.rni` round a float to an integer in the same type only.
                if matches!(rounding, Rounding::Rmi | Rounding::Rpi | Rounding::Rni)
                    && !(dst_ty == src_ty && dst_ty.is_float())
                {
                    return Err(self.unsupported());
                }
                POp::Cvt {
                    rounding: *rounding,
                    dst_ty: *dst_ty,
                    src_ty: *src_ty,
                    dst: self.reg(*dst)?,
                    src: self.src(src, *src_ty)?,
                }
            }
            Op::Ld {
                space: Space::Param,
                ty,
                dst,
                addr,
                ..
            } => {
                let Address::Symbol { name, offset: 0 } = addr else {
                    return Err(self.invalid("`ld.param` must read `[param_name]`"));
                };
                let Some(slot) = self.kernel.params.iter().position(|p| &p.name == name) else {
                    return Err(self.invalid(format_args!("no parameter named `{name}`")));
                };
                let value = self.args.get(slot).copied().unwrap_or(0) & width_mask(*ty);
                POp::Mov {
                    mask: u64::MAX,
                    dst: self.reg(*dst)?,
                    src: Src::Imm(value),
                }
            }
            Op::Ld {
                space,
                ty,
                dst,
                addr,
                ..
            } => {
                if *ty == Type::Pred {
                    return Err(self.unsupported());
                }
                let (base, offset) = self.mem_addr(*space, addr)?;
                POp::Ld {
                    shared: *space == Space::Shared,
                    size: ty.size(),
                    dst: self.reg(*dst)?,
                    base,
                    offset,
                }
            }
            Op::St {
                space: Space::Param,
                ..
            } => return Err(self.invalid("kernel parameters are read-only")),
            Op::St {
                space,
                ty,
                addr,
                src,
            } => {
                if *ty == Type::Pred {
                    return Err(self.unsupported());
                }
                let (base, offset) = self.mem_addr(*space, addr)?;
                POp::St {
                    shared: *space == Space::Shared,
                    size: ty.size(),
                    base,
                    offset,
                    src: self.src(src, *ty)?,
                }
            }
            Op::LdVec {
                space,
                ty,
                dsts,
                addr,
                ..
            } => {
                let access = self.vec_access(*space, *ty, dsts.len(), addr)?;
                let mut slots = [0; 4];
                for (slot, dst) in slots.iter_mut().zip(dsts) {
                    *slot = self.reg(*dst)?;
                }
                POp::LdVec {
                    access,
                    dsts: slots,
                }
            }
            Op::StVec {
                space,
                ty,
                addr,
                srcs,
            } => {
                let access = self.vec_access(*space, *ty, srcs.len(), addr)?;
                let mut slots = [Src::Imm(0); 4];
                for (slot, src) in slots.iter_mut().zip(srcs) {
                    *slot = self.src(src, *ty)?;
                }
                POp::StVec {
                    access,
                    srcs: slots,
                }
            }
            Op::Atom {
                space,
                op,
                ty,
                dst,
                addr,
                b,
                c,
            } => {
                let ok = *space != Space::Param
                    && match ty {
                        Type::F32 | Type::F64 => *op == AtomOp::Add,
                        Type::Pred | Type::U8 | Type::U16 | Type::F16 => false,
                        _ => true,
                    }
                    && (*op == AtomOp::Cas) == c.is_some();
                if !ok {
                    return Err(self.unsupported());
                }
                let (base, offset) = self.mem_addr(*space, addr)?;
                let c = match c {
                    Some(c) => self.src(c, *ty)?,
                    None => Src::Imm(0),
                };
                POp::Atom {
                    shared: *space == Space::Shared,
                    op: *op,
                    ty: *ty,
                    dst: self.reg(*dst)?,
                    base,
                    offset,
                    b: self.src(b, *ty)?,
                    c,
                }
            }
            Op::Bra { target } => match self.labels.get(&target.0) {
                Some(&t) => POp::Bra { target: t },
                None => return Err(self.invalid(format_args!("label {target} is not defined"))),
            },
            Op::Label(_) => POp::Nop,
            Op::BarSync => POp::BarSync,
            Op::MemBar | Op::Fence => POp::Nop,
            Op::Shfl {
                mode,
                dst,
                dst_pred,
                a,
                b,
                c,
                mask,
            } => POp::Shfl {
                mode: *mode,
                // Any 32-bit register: a float moves as its bits.
                dst: match dst.class {
                    RegClass::F32 => self.reg(*dst)?,
                    _ => self.reg_of(*dst, RegClass::B32)?,
                },
                dst_pred: match dst_pred {
                    Some(p) => Some(self.reg_of(*p, RegClass::Pred)?),
                    None => None,
                },
                a: self.src(a, Type::B32)?,
                b: self.src(b, Type::B32)?,
                c: self.src(c, Type::B32)?,
                mask: self.src(mask, Type::B32)?,
            },
            Op::Vote { mode, dst, a, mask } => {
                let class = if *mode == VoteMode::Ballot {
                    RegClass::B32
                } else {
                    RegClass::Pred
                };
                POp::Vote {
                    mode: *mode,
                    dst: self.reg_of(*dst, class)?,
                    a: self.src(a, Type::Pred)?,
                    mask: self.src(mask, Type::B32)?,
                }
            }
            Op::ActiveMask { dst } => POp::ActiveMask {
                dst: self.reg_of(*dst, RegClass::B32)?,
            },
            Op::WarpSync { mask } => POp::WarpSync {
                mask: self.src(mask, Type::B32)?,
            },
            Op::Ret => POp::Ret,
            // The simulator runs the host-launched fallback of a schedule instead.
            Op::ScopeBegin | Op::ScopeEnd | Op::ParamDecl { .. } | Op::Call { .. } => {
                return Err(SimError::Unsupported("device-side launch".into()))
            }
        };
        Ok(PInstr { guard, op })
    }
}

const RUN: u8 = 0;
const DONE: u8 = 1;
const BAR: u8 = 2;
const COLL: u8 = 3;

struct Warp {
    regs: Vec<u64>,
    pc: [u32; 32],
    state: [u8; 32],
    coll_mask: [u32; 32],
    counts: [u64; 32],
    /// Lanes not yet exited (a partial warp's missing lanes are never live).
    live: u32,
    /// Lanes waiting at a collective.
    waiting: u32,
    first_tid: u32,
}

struct BlockCtx {
    id: u32,
    shared: Vec<u8>,
    live: u32,
    bar_waiting: u32,
    bar_pc: u32,
    bar_mixed: bool,
}

struct Block {
    warps: Vec<Warp>,
    ctx: BlockCtx,
}

struct Counters {
    instructions: u64,
    warp_issues: u64,
    active_lanes: u64,
    limit: u64,
}

#[inline(always)]
fn rd(regs: &[u64], s: Src, lane: usize) -> u64 {
    match s {
        Src::Reg(r) => regs[r as usize * 32 + lane],
        Src::Imm(v) => v,
    }
}

#[inline(always)]
fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

/// The GPU's arithmetic returns the canonical NaN, not the propagated payload that x86 gives.
fn canon32(r: f32) -> u64 {
    if r.is_nan() {
        0x7FFF_FFFF
    } else {
        u64::from(r.to_bits())
    }
}

fn canon64(r: f64) -> u64 {
    if r.is_nan() {
        0x7FFF_FFFF_FFFF_FFFF
    } else {
        r.to_bits()
    }
}

fn fmin<T: PartialOrd + Copy>(x: T, y: T, x_nan: bool, y_nan: bool, x_neg: bool) -> T {
    if x_nan {
        y
    } else if y_nan || x < y || (x == y && x_neg) {
        x
    } else {
        y
    }
}

fn fmax<T: PartialOrd + Copy>(x: T, y: T, x_nan: bool, y_nan: bool, x_neg: bool) -> T {
    if x_nan {
        y
    } else if y_nan || x > y || (x == y && !x_neg) {
        x
    } else {
        y
    }
}

fn bin(op: BinOp, ty: Type, a: u64, b: u64) -> u64 {
    match ty {
        Type::F32 => {
            let (x, y) = (f32_of(a), f32_of(b));
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::Min => fmin(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
                _ => fmax(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
            };
            canon32(r)
        }
        Type::F64 => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::Min => fmin(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
                _ => fmax(x, y, x.is_nan(), y.is_nan(), x.is_sign_negative()),
            };
            canon64(r)
        }
        Type::Pred => {
            (match op {
                BinOp::And => a & b,
                BinOp::Or => a | b,
                _ => a ^ b,
            }) & 1
        }
        Type::B64 | Type::U64 | Type::S64 => {
            let signed = ty == Type::S64;
            let (sx, sy) = (a as i64, b as i64);
            let sh = b as u32;
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::MulWide => a.wrapping_mul(b),
                BinOp::MulHi if signed => ((i128::from(sx) * i128::from(sy)) >> 64) as u64,
                BinOp::MulHi => ((u128::from(a) * u128::from(b)) >> 64) as u64,
                BinOp::Div if b == 0 => u64::MAX,
                BinOp::Div if signed => sx.wrapping_div(sy) as u64,
                BinOp::Div => a / b,
                BinOp::Rem if b == 0 => a,
                BinOp::Rem if signed => sx.wrapping_rem(sy) as u64,
                BinOp::Rem => a % b,
                BinOp::Min if signed => sx.min(sy) as u64,
                BinOp::Min => a.min(b),
                BinOp::Max if signed => sx.max(sy) as u64,
                BinOp::Max => a.max(b),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                BinOp::Shl => a.checked_shl(sh).unwrap_or(0),
                BinOp::Shr if signed => (sx >> sh.min(63)) as u64,
                BinOp::Shr => a.checked_shr(sh).unwrap_or(0),
            }
        }
        _ => {
            let signed = ty == Type::S32;
            let (x, y) = (a as u32, b as u32);
            let (sx, sy) = (x as i32, y as i32);
            let r = match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                BinOp::MulWide if signed => return (i64::from(sx) * i64::from(sy)) as u64,
                BinOp::MulWide => return u64::from(x) * u64::from(y),
                BinOp::MulHi if signed => ((i64::from(sx) * i64::from(sy)) >> 32) as u32,
                BinOp::MulHi => ((u64::from(x) * u64::from(y)) >> 32) as u32,
                BinOp::Div if y == 0 => u32::MAX,
                BinOp::Div if signed => sx.wrapping_div(sy) as u32,
                BinOp::Div => x / y,
                BinOp::Rem if y == 0 => x,
                BinOp::Rem if signed => sx.wrapping_rem(sy) as u32,
                BinOp::Rem => x % y,
                BinOp::Min if signed => sx.min(sy) as u32,
                BinOp::Min => x.min(y),
                BinOp::Max if signed => sx.max(sy) as u32,
                BinOp::Max => x.max(y),
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
                BinOp::Shl => x.checked_shl(y).unwrap_or(0),
                BinOp::Shr if signed => (sx >> y.min(31)) as u32,
                BinOp::Shr => x.checked_shr(y).unwrap_or(0),
            };
            u64::from(r)
        }
    }
}

/// One-operand instructions. The `.approx.f32` instructions are modelled by the exact function
/// (rounded once to f32); the hardware's results differ from it within the error bounds the PTX
/// ISA documents for each (see docs/kernel-language.md), so the simulator is a little more
/// accurate than a GPU, never less.
fn un(op: UnOp, ty: Type, a: u64) -> u64 {
    match ty {
        Type::F32 => {
            let x = f32_of(a);
            match op {
                UnOp::Neg => u64::from((-x).to_bits()),
                UnOp::Abs => u64::from(x.abs().to_bits()),
                UnOp::Ex2 => canon32(x.exp2()),
                UnOp::Lg2 => canon32(x.log2()),
                UnOp::Sin => canon32(x.sin()),
                UnOp::Cos => canon32(x.cos()),
                UnOp::Tanh => canon32(x.tanh()),
                _ => canon32(x.sqrt()),
            }
        }
        Type::F64 => {
            let x = f64::from_bits(a);
            match op {
                UnOp::Neg => (-x).to_bits(),
                UnOp::Abs => x.abs().to_bits(),
                _ => canon64(x.sqrt()),
            }
        }
        Type::Pred => (a ^ 1) & 1,
        Type::B64 | Type::U64 | Type::S64 => match op {
            UnOp::Neg => a.wrapping_neg(),
            UnOp::Not => !a,
            UnOp::Abs => (a as i64).wrapping_abs() as u64,
            UnOp::Popc => u64::from(a.count_ones()),
            UnOp::Brev => a.reverse_bits(),
            _ => u64::from(a.leading_zeros()),
        },
        _ => {
            let x = a as u32;
            u64::from(match op {
                UnOp::Neg => x.wrapping_neg(),
                UnOp::Not => !x,
                UnOp::Abs => (x as i32).wrapping_abs() as u32,
                UnOp::Popc => x.count_ones(),
                UnOp::Brev => x.reverse_bits(),
                _ => x.leading_zeros(),
            })
        }
    }
}

fn setp(cmp: Cmp, ty: Type, a: u64, b: u64) -> bool {
    fn ord<T: PartialOrd>(cmp: Cmp, x: T, y: T) -> bool {
        match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => matches!(x.partial_cmp(&y), Some(Ordering::Less | Ordering::Greater)),
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Neu => x != y,
        }
    }
    match ty {
        Type::F32 => ord(cmp, f32_of(a), f32_of(b)),
        Type::F64 => ord(cmp, f64::from_bits(a), f64::from_bits(b)),
        Type::S32 => ord(cmp, a as u32 as i32, b as u32 as i32),
        Type::S64 => ord(cmp, a as i64, b as i64),
        _ => ord(cmp, a, b),
    }
}

fn cvt(rounding: Rounding, dst_ty: Type, src_ty: Type, v: u64) -> u64 {
    // The only conversions of f16 lb emits: exact to f32, and from f32 to nearest even. The
    // `half` crate does both as IEEE 754 says, subnormals, infinities and NaN included.
    match (dst_ty, src_ty) {
        (Type::F32, Type::F16) => {
            return u64::from(half::f16::from_bits(v as u16).to_f32().to_bits());
        }
        (Type::F16, Type::F32) => return u64::from(half::f16::from_f32(f32_of(v)).to_bits()),
        _ => {}
    }
    if src_ty.is_float() {
        let x = if src_ty == Type::F32 {
            f64::from(f32_of(v))
        } else {
            f64::from_bits(v)
        };
        return match dst_ty {
            Type::F32 if src_ty == Type::F32 && integer_rounding(rounding) => {
                canon32(to_integer(rounding, x) as f32)
            }
            Type::F32 => canon32(x as f32),
            Type::F64 if integer_rounding(rounding) => canon64(to_integer(rounding, x)),
            Type::F64 => canon64(x),
            Type::U8 => u64::from(x as u8),
            Type::S32 => u64::from(x as i32 as u32),
            Type::S64 => x as i64 as u64,
            Type::B64 | Type::U64 => x as u64,
            _ => u64::from(x as u32),
        };
    }
    let signed = src_ty.is_signed();
    let wide: u64 = match src_ty {
        Type::U8 => v & 0xFF,
        Type::S32 => v as u32 as i32 as i64 as u64,
        Type::B64 | Type::U64 | Type::S64 => v,
        _ => v & 0xFFFF_FFFF,
    };
    match dst_ty {
        Type::F32 if signed => u64::from((wide as i64 as f32).to_bits()),
        Type::F32 => u64::from((wide as f32).to_bits()),
        Type::F64 if signed => (wide as i64 as f64).to_bits(),
        Type::F64 => (wide as f64).to_bits(),
        _ => wide & width_mask(dst_ty),
    }
}

/// Whether `rounding` rounds to an integer (`.rzi`, `.rmi`, `.rpi`, `.rni`).
fn integer_rounding(rounding: Rounding) -> bool {
    matches!(
        rounding,
        Rounding::Rzi | Rounding::Rmi | Rounding::Rpi | Rounding::Rni
    )
}

/// `x` rounded to an integer (in the same float type) by `cvt`'s integer rounding `rounding`.
fn to_integer(rounding: Rounding, x: f64) -> f64 {
    match rounding {
        Rounding::Rmi => x.floor(),
        Rounding::Rpi => x.ceil(),
        Rounding::Rni => x.round_ties_even(),
        _ => x.trunc(),
    }
}

fn atom_apply(op: AtomOp, ty: Type, old: u64, b: u64, c: u64) -> u64 {
    let m = width_mask(ty);
    match op {
        AtomOp::Add if ty == Type::F32 => canon32(f32_of(old) + f32_of(b)),
        AtomOp::Add if ty == Type::F64 => canon64(f64::from_bits(old) + f64::from_bits(b)),
        AtomOp::Add => old.wrapping_add(b) & m,
        AtomOp::Min | AtomOp::Max => {
            let less = match ty {
                Type::S32 => (b as u32 as i32) < (old as u32 as i32),
                Type::S64 => (b as i64) < (old as i64),
                _ => b < old,
            };
            if less == (op == AtomOp::Min) && b != old {
                b
            } else {
                old
            }
        }
        AtomOp::Exch => b,
        AtomOp::Cas => {
            if old == b {
                c
            } else {
                old
            }
        }
        AtomOp::And => old & b,
        AtomOp::Or => old | b,
    }
}

/// Where a lane is and what it wants, for error messages.
struct Who {
    block: u32,
    thread: u32,
}

fn fault_error(f: Fault, addr: u64, bytes: u32, who: Who, instr: String) -> SimError {
    let Who { block, thread } = who;
    match f {
        Fault::OutOfBounds => SimError::OutOfBounds {
            addr,
            bytes,
            block,
            thread,
            instr,
        },
        Fault::UseAfterFree => SimError::UseAfterFree {
            addr,
            bytes,
            block,
            thread,
            instr,
        },
        Fault::Misaligned => SimError::Misaligned {
            addr,
            bytes,
            block,
            thread,
            instr,
        },
    }
}

fn shared_locate(p: &Prepared, addr: u64, size: u32) -> Result<usize, Fault> {
    if addr & u64::from(size - 1) != 0 {
        return Err(Fault::Misaligned);
    }
    let end = addr
        .checked_add(u64::from(size))
        .ok_or(Fault::OutOfBounds)?;
    if p.regions.iter().any(|&(s, e)| addr >= s && end <= e) {
        Ok(addr as usize)
    } else {
        Err(Fault::OutOfBounds)
    }
}

/// The elements a vector load reads at `addr`, in address order: one access, so the whole vector
/// must lie in one allocation (or shared variable) and be aligned to its total size.
fn read_vec(
    p: &Prepared,
    shared: &[u8],
    mem: &Memory,
    a: VecAccess,
    addr: u64,
) -> Result<[u64; 4], Fault> {
    let mut values = [0; 4];
    let elements = &mut values[..a.n as usize];
    if a.shared {
        let o = shared_locate(p, addr, a.bytes())?;
        for (k, v) in elements.iter_mut().enumerate() {
            *v = load_le(&shared[o + k * a.size as usize..], a.size);
        }
    } else {
        mem.load_vec(addr, a.size, elements)?;
    }
    Ok(values)
}

/// Writes the elements of a vector store at `addr`, checked as in [`read_vec`] before anything
/// is written.
fn write_vec(
    p: &Prepared,
    shared: &mut [u8],
    mem: &mut Memory,
    a: VecAccess,
    addr: u64,
    values: &[u64],
) -> Result<(), Fault> {
    if a.shared {
        let o = shared_locate(p, addr, a.bytes())?;
        for (k, &v) in values.iter().enumerate() {
            store_le(&mut shared[o + k * a.size as usize..], a.size, v);
        }
        Ok(())
    } else {
        mem.store_vec(addr, a.size, values)
    }
}

impl Warp {
    fn new(p: &Prepared, cfg: LaunchConfig, block: u32, warp: u32) -> Warp {
        let first_tid = warp * 32;
        let n = (cfg.block - first_tid).min(32);
        let live = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        let mut regs = vec![0u64; p.nregs * 32];
        for lane in 0..32u32 {
            let vals: [u32; SPECIALS] = [first_tid + lane, cfg.block, block, cfg.grid, lane, warp];
            for (k, v) in vals.into_iter().enumerate() {
                regs[(p.special_base as usize + k) * 32 + lane as usize] = u64::from(v);
            }
        }
        let mut state = [DONE; 32];
        for s in state.iter_mut().take(n as usize) {
            *s = RUN;
        }
        Warp {
            regs,
            pc: [0; 32],
            state,
            coll_mask: [0; 32],
            counts: [0; 32],
            live,
            waiting: 0,
            first_tid,
        }
    }

    fn who(&self, ctx: &BlockCtx, lane: usize) -> Who {
        Who {
            block: ctx.id,
            thread: self.first_tid + lane as u32,
        }
    }

    fn issue(&mut self, mask: u32, c: &mut Counters) -> Result<(), SimError> {
        let n = u64::from(mask.count_ones());
        c.warp_issues += 1;
        c.active_lanes += n;
        c.instructions += n;
        for l in lanes(mask) {
            self.counts[l] += 1;
        }
        if c.instructions > c.limit {
            return Err(SimError::StepLimit(c.limit));
        }
        Ok(())
    }

    fn exit(&mut self, lane: usize, ctx: &mut BlockCtx) {
        self.state[lane] = DONE;
        self.live &= !(1 << lane);
        ctx.live -= 1;
    }

    /// Runs a collective whose every live member has arrived; returns whether one ran.
    fn try_collective(&mut self, p: &Prepared, c: &mut Counters) -> Result<bool, SimError> {
        let mut pending = self.waiting;
        while pending != 0 {
            let pc = self.pc[pending.trailing_zeros() as usize];
            let group = lanes(pending)
                .filter(|&l| self.pc[l] == pc)
                .fold(0u32, |m, l| m | 1 << l);
            pending &= !group;
            let need = lanes(group).fold(0u32, |m, l| m | self.coll_mask[l]) & self.live;
            if need & !group != 0 {
                continue;
            }
            self.fire(p, pc, group);
            self.waiting &= !group;
            for l in lanes(group) {
                self.state[l] = RUN;
                self.pc[l] = pc + 1;
            }
            self.issue(group, c)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn fire(&mut self, p: &Prepared, pc: u32, group: u32) {
        match p.code[pc as usize].op {
            POp::Shfl {
                mode,
                dst,
                dst_pred,
                a,
                b,
                c,
                ..
            } => {
                let mut vals = [0u64; 32];
                for (l, v) in vals.iter_mut().enumerate() {
                    *v = rd(&self.regs, a, l);
                }
                for l in lanes(group) {
                    let bval = (rd(&self.regs, b, l) & 0x1f) as i32;
                    let cv = rd(&self.regs, c, l) as u32;
                    let clamp = (cv & 0x1f) as i32;
                    let seg = ((cv >> 8) & 0x1f) as i32;
                    let lane = l as i32;
                    let max_lane = (lane & seg) | (clamp & !seg);
                    let min_lane = lane & seg;
                    let (j, ok) = match mode {
                        ShflMode::Up => (lane - bval, lane - bval >= max_lane),
                        ShflMode::Down => (lane + bval, lane + bval <= max_lane),
                        ShflMode::Bfly => (lane ^ bval, (lane ^ bval) <= max_lane),
                        ShflMode::Idx => {
                            let j = min_lane | (bval & !seg);
                            (j, j <= max_lane)
                        }
                    };
                    let src = if ok { j as usize } else { l };
                    self.regs[dst as usize * 32 + l] = vals[src];
                    if let Some(pr) = dst_pred {
                        self.regs[pr as usize * 32 + l] = u64::from(ok);
                    }
                }
            }
            POp::Vote { mode, dst, a, .. } => {
                // Lanes of several sub-warp groups can arrive at one vote together; each lane
                // votes only among the lanes of its own member mask, as on the GPU.
                let pred = lanes(group)
                    .filter(|&l| rd(&self.regs, a, l) & 1 != 0)
                    .fold(0u32, |m, l| m | 1 << l);
                for l in lanes(group) {
                    let members = group & self.coll_mask[l];
                    let ballot = pred & members;
                    let v = match mode {
                        VoteMode::All => u64::from(ballot == members),
                        VoteMode::Any => u64::from(ballot != 0),
                        VoteMode::Ballot => u64::from(ballot),
                    };
                    self.regs[dst as usize * 32 + l] = v;
                }
            }
            _ => {}
        }
    }

    /// One warp issue; returns whether anything changed.
    fn step(
        &mut self,
        p: &Prepared,
        ctx: &mut BlockCtx,
        mem: &mut Memory,
        c: &mut Counters,
    ) -> Result<bool, SimError> {
        if self.waiting != 0 && self.try_collective(p, c)? {
            return Ok(true);
        }
        let mut pc = u32::MAX;
        for l in 0..32 {
            if self.state[l] == RUN && self.pc[l] < pc {
                pc = self.pc[l];
            }
        }
        if pc == u32::MAX {
            return Ok(false);
        }
        let mut mask = 0u32;
        for l in 0..32 {
            if self.state[l] == RUN && self.pc[l] == pc {
                mask |= 1 << l;
            }
        }
        let Some(instr) = p.code.get(pc as usize) else {
            for l in lanes(mask) {
                self.exit(l, ctx);
            }
            return Ok(true);
        };
        let exec = match instr.guard {
            None => mask,
            Some((g, neg)) => {
                let base = g as usize * 32;
                lanes(mask)
                    .filter(|&l| (self.regs[base + l] != 0) != neg)
                    .fold(0u32, |m, l| m | 1 << l)
            }
        };
        let skipped = mask & !exec;
        let regs = &mut self.regs;
        let next = pc + 1;
        match instr.op {
            POp::Mov { mask: m, dst, src } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] = rd(regs, src, l) & m;
                }
            }
            POp::Bin { op, ty, dst, a, b } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] = bin(op, ty, rd(regs, a, l), rd(regs, b, l));
                }
            }
            POp::Un { op, ty, dst, a } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] = un(op, ty, rd(regs, a, l));
                }
            }
            POp::Fma {
                ty,
                dst,
                a,
                b,
                c: cc,
            } => {
                for l in lanes(exec) {
                    let (x, y, z) = (rd(regs, a, l), rd(regs, b, l), rd(regs, cc, l));
                    regs[dst as usize * 32 + l] = if ty == Type::F32 {
                        canon32(f32_of(x).mul_add(f32_of(y), f32_of(z)))
                    } else {
                        canon64(f64::from_bits(x).mul_add(f64::from_bits(y), f64::from_bits(z)))
                    };
                }
            }
            POp::Mad {
                wide,
                ty,
                dst,
                a,
                b,
                c: cc,
            } => {
                let (op, sum_ty) = if wide {
                    (BinOp::MulWide, Type::U64)
                } else {
                    (BinOp::Mul, ty)
                };
                for l in lanes(exec) {
                    let product = bin(op, ty, rd(regs, a, l), rd(regs, b, l));
                    regs[dst as usize * 32 + l] = bin(BinOp::Add, sum_ty, product, rd(regs, cc, l));
                }
            }
            POp::Setp { cmp, ty, dst, a, b } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] =
                        u64::from(setp(cmp, ty, rd(regs, a, l), rd(regs, b, l)));
                }
            }
            POp::Selp {
                mask: m,
                dst,
                a,
                b,
                pred,
            } => {
                for l in lanes(exec) {
                    let v = if regs[pred as usize * 32 + l] != 0 {
                        rd(regs, a, l)
                    } else {
                        rd(regs, b, l)
                    };
                    regs[dst as usize * 32 + l] = v & m;
                }
            }
            POp::Cvt {
                rounding,
                dst_ty,
                src_ty,
                dst,
                src,
            } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] = cvt(rounding, dst_ty, src_ty, rd(regs, src, l));
                }
            }
            POp::Ld {
                shared,
                size,
                dst,
                base,
                offset,
            } => {
                for l in lanes(exec) {
                    let addr = rd(regs, base, l).wrapping_add(offset);
                    let v = if shared {
                        shared_locate(p, addr, size).map(|o| load_le(&ctx.shared[o..], size))
                    } else {
                        mem.load(addr, size)
                    };
                    match v {
                        Ok(v) => regs[dst as usize * 32 + l] = v,
                        Err(f) => {
                            let who = Who {
                                block: ctx.id,
                                thread: self.first_tid + l as u32,
                            };
                            return Err(fault_error(f, addr, size, who, p.instr_text(pc)));
                        }
                    }
                }
            }
            POp::St {
                shared,
                size,
                base,
                offset,
                src,
            } => {
                for l in lanes(exec) {
                    let addr = rd(regs, base, l).wrapping_add(offset);
                    let v = rd(regs, src, l);
                    let r = if shared {
                        shared_locate(p, addr, size)
                            .map(|o| store_le(&mut ctx.shared[o..], size, v))
                    } else {
                        mem.store(addr, size, v)
                    };
                    if let Err(f) = r {
                        let who = Who {
                            block: ctx.id,
                            thread: self.first_tid + l as u32,
                        };
                        return Err(fault_error(f, addr, size, who, p.instr_text(pc)));
                    }
                }
            }
            POp::LdVec { access: a, dsts } => {
                for l in lanes(exec) {
                    let addr = rd(regs, a.base, l).wrapping_add(a.offset);
                    match read_vec(p, &ctx.shared, mem, a, addr) {
                        Ok(values) => {
                            for (&d, v) in dsts[..a.n as usize].iter().zip(values) {
                                regs[d as usize * 32 + l] = v;
                            }
                        }
                        Err(f) => {
                            let who = Who {
                                block: ctx.id,
                                thread: self.first_tid + l as u32,
                            };
                            return Err(fault_error(f, addr, a.bytes(), who, p.instr_text(pc)));
                        }
                    }
                }
            }
            POp::StVec { access: a, srcs } => {
                for l in lanes(exec) {
                    let addr = rd(regs, a.base, l).wrapping_add(a.offset);
                    let values = srcs.map(|s| rd(regs, s, l));
                    let values = &values[..a.n as usize];
                    if let Err(f) = write_vec(p, &mut ctx.shared, mem, a, addr, values) {
                        let who = Who {
                            block: ctx.id,
                            thread: self.first_tid + l as u32,
                        };
                        return Err(fault_error(f, addr, a.bytes(), who, p.instr_text(pc)));
                    }
                }
            }
            POp::Atom {
                shared,
                op,
                ty,
                dst,
                base,
                offset,
                b,
                c: cc,
            } => {
                let size = ty.size();
                for l in lanes(exec) {
                    let addr = rd(regs, base, l).wrapping_add(offset);
                    let (bv, cv) = (rd(regs, b, l), rd(regs, cc, l));
                    let r = if shared {
                        shared_locate(p, addr, size).map(|o| {
                            let old = load_le(&ctx.shared[o..], size);
                            store_le(&mut ctx.shared[o..], size, atom_apply(op, ty, old, bv, cv));
                            old
                        })
                    } else {
                        mem.load(addr, size).and_then(|old| {
                            mem.store(addr, size, atom_apply(op, ty, old, bv, cv))?;
                            Ok(old)
                        })
                    };
                    match r {
                        Ok(old) => regs[dst as usize * 32 + l] = old,
                        Err(f) => {
                            let who = Who {
                                block: ctx.id,
                                thread: self.first_tid + l as u32,
                            };
                            return Err(fault_error(f, addr, size, who, p.instr_text(pc)));
                        }
                    }
                }
            }
            POp::Bra { target } => {
                for l in lanes(exec) {
                    self.pc[l] = target;
                }
                for l in lanes(skipped) {
                    self.pc[l] = next;
                }
                self.issue(mask, c)?;
                return Ok(true);
            }
            POp::Nop => {}
            // The lanes stepped together at this pc are the ones a GPU runs converged here.
            POp::ActiveMask { dst } => {
                for l in lanes(exec) {
                    regs[dst as usize * 32 + l] = u64::from(exec);
                }
            }
            POp::Ret => {
                for l in lanes(exec) {
                    self.exit(l, ctx);
                }
            }
            POp::BarSync => {
                for l in lanes(exec) {
                    self.state[l] = BAR;
                    if ctx.bar_waiting == 0 {
                        ctx.bar_pc = pc;
                    } else if ctx.bar_pc != pc {
                        ctx.bar_mixed = true;
                    }
                    ctx.bar_waiting += 1;
                }
            }
            POp::Shfl { mask: mk, .. }
            | POp::Vote { mask: mk, .. }
            | POp::WarpSync { mask: mk } => {
                for l in lanes(exec) {
                    let m = rd(regs, mk, l) as u32;
                    if m & (1 << l) == 0 {
                        let who = self.who(ctx, l);
                        return Err(SimError::Invalid(format!(
                            "block {} thread {} executes `{}` with membermask {m:#010x} that does not name its lane {l}",
                            who.block,
                            who.thread,
                            p.instr_text(pc)
                        )));
                    }
                    self.coll_mask[l] = m;
                    self.state[l] = COLL;
                }
                self.waiting |= exec;
                for l in lanes(skipped) {
                    self.pc[l] = next;
                }
                if skipped != 0 {
                    self.issue(skipped, c)?;
                }
                if self.waiting != 0 {
                    self.try_collective(p, c)?;
                }
                return Ok(true);
            }
        }
        for l in lanes(mask) {
            if self.state[l] == RUN {
                self.pc[l] = next;
            }
        }
        self.issue(mask, c)?;
        Ok(true)
    }
}

impl Block {
    fn new(p: &Prepared, cfg: LaunchConfig, id: u32) -> Block {
        let nwarps = cfg.block.div_ceil(32);
        Block {
            warps: (0..nwarps).map(|w| Warp::new(p, cfg, id, w)).collect(),
            ctx: BlockCtx {
                id,
                shared: vec![0; p.shared_bytes],
                live: cfg.block,
                bar_waiting: 0,
                bar_pc: 0,
                bar_mixed: false,
            },
        }
    }

    /// Releases the barrier once every live thread waits at it; returns whether it released.
    fn barrier(&mut self, p: &Prepared) -> Result<bool, SimError> {
        let ctx = &mut self.ctx;
        if ctx.bar_waiting == 0 || ctx.bar_waiting < ctx.live {
            return Ok(false);
        }
        if ctx.bar_mixed {
            let mut where_ = Vec::new();
            for w in &self.warps {
                for l in lanes(w.live) {
                    if w.state[l] == BAR {
                        where_.push((w.pc[l], w.first_tid + l as u32));
                    }
                }
            }
            return Err(SimError::Deadlock(format!(
                "block {}: threads wait at different `bar.sync` instructions (undefined in CUDA): {}",
                ctx.id,
                describe_groups(p, where_)
            )));
        }
        for w in &mut self.warps {
            for l in 0..32 {
                if w.state[l] == BAR {
                    w.state[l] = RUN;
                    w.pc[l] += 1;
                }
            }
        }
        ctx.bar_waiting = 0;
        Ok(true)
    }

    fn done(&self) -> bool {
        self.ctx.live == 0
    }
}

/// `(pc, thread)` pairs as "threads 0-15 at `instr`; ..." with thread ranges.
fn describe_groups(p: &Prepared, mut items: Vec<(u32, u32)>) -> String {
    items.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let pc = items[i].0;
        let mut ranges = Vec::new();
        while i < items.len() && items[i].0 == pc {
            let start = items[i].1;
            let mut end = start;
            while i + 1 < items.len() && items[i + 1].0 == pc && items[i + 1].1 == end + 1 {
                i += 1;
                end += 1;
            }
            i += 1;
            ranges.push(if start == end {
                format!("{start}")
            } else {
                format!("{start}-{end}")
            });
        }
        out.push(format!(
            "threads {} at `{}`",
            ranges.join(","),
            p.instr_text(pc)
        ));
    }
    out.join("; ")
}

fn deadlock_report(p: &Prepared, blocks: &[Block]) -> SimError {
    let mut parts = Vec::new();
    for b in blocks.iter().filter(|b| !b.done()) {
        let mut items = Vec::new();
        for w in &b.warps {
            for l in lanes(w.live) {
                items.push((w.pc[l], w.first_tid + l as u32));
            }
        }
        parts.push(format!("block {}: {}", b.ctx.id, describe_groups(p, items)));
    }
    SimError::Deadlock(format!(
        "no thread can make progress (waiting at `bar.sync` for threads that never arrive, or at \
         `shfl.sync`/`vote.sync` for lanes of the membermask that never arrive): {}",
        parts.join(" | ")
    ))
}

pub(crate) fn run(
    p: &Prepared,
    cfg: LaunchConfig,
    mem: &mut Memory,
    limit: u64,
) -> Result<Stats, SimError> {
    let threads = u64::from(cfg.grid) * u64::from(cfg.block);
    let mut per_thread = vec![0u64; threads as usize];
    let mut c = Counters {
        instructions: 0,
        warp_issues: 0,
        active_lanes: 0,
        limit,
    };
    let mut resident: Vec<Block> = Vec::new();
    let mut next = 0u32;
    loop {
        while next < cfg.grid && resident.len() < RESIDENT_BLOCKS {
            resident.push(Block::new(p, cfg, next));
            next += 1;
        }
        if resident.is_empty() {
            break;
        }
        let mut progress = false;
        for b in resident.iter_mut() {
            for wi in 0..b.warps.len() {
                let w = &mut b.warps[wi];
                for _ in 0..QUANTUM {
                    if w.live == 0 || !w.step(p, &mut b.ctx, mem, &mut c)? {
                        break;
                    }
                    progress = true;
                }
                if b.ctx.bar_waiting != 0 && b.barrier(p)? {
                    progress = true;
                }
            }
        }
        let before = resident.len();
        resident.retain(|b| {
            if !b.done() {
                return true;
            }
            let base = u64::from(b.ctx.id) * u64::from(cfg.block);
            for w in &b.warps {
                for l in 0..32 {
                    let t = u64::from(w.first_tid) + l as u64;
                    if t < u64::from(cfg.block) {
                        per_thread[(base + t) as usize] = w.counts[l];
                    }
                }
            }
            false
        });
        if !progress && resident.len() == before {
            return Err(deadlock_report(p, &resident));
        }
    }
    Ok(Stats {
        threads,
        instructions: c.instructions,
        per_thread_instructions: per_thread,
        warp_issues: c.warp_issues,
        active_lanes: c.active_lanes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_roundings_bit_reversal_and_approximations() {
        let f = |v: f32| u64::from(v.to_bits());
        let back = |b: u64| f32::from_bits(b as u32);
        for (r, x, want) in [
            (Rounding::Rmi, -1.5f32, -2.0f32),
            (Rounding::Rpi, -1.5, -1.0),
            (Rounding::Rzi, -1.5, -1.0),
            (Rounding::Rni, 2.5, 2.0),
            (Rounding::Rni, -3.5, -4.0),
            (Rounding::Rmi, 1e30, 1e30),
        ] {
            assert_eq!(back(cvt(r, Type::F32, Type::F32, f(x))), want, "{r:?} {x}");
        }
        let d = |v: f64| v.to_bits();
        assert_eq!(cvt(Rounding::Rpi, Type::F64, Type::F64, d(0.25)), d(1.0));
        assert_eq!(un(UnOp::Brev, Type::B32, 1), 0x8000_0000);
        assert_eq!(un(UnOp::Brev, Type::B64, 2), 1 << 62);
        assert_eq!(back(un(UnOp::Ex2, Type::F32, f(3.0))), 8.0);
        assert_eq!(back(un(UnOp::Lg2, Type::F32, f(0.25))), -2.0);
        assert_eq!(back(un(UnOp::Tanh, Type::F32, f(0.0))), 0.0);
        assert_eq!(back(un(UnOp::Cos, Type::F32, f(0.0))), 1.0);
    }

    #[test]
    fn shifts_clamp_and_division_by_zero_is_defined() {
        assert_eq!(bin(BinOp::Shl, Type::B32, 1, 32), 0);
        assert_eq!(bin(BinOp::Shr, Type::S32, 0x8000_0000, 100), 0xFFFF_FFFF);
        assert_eq!(bin(BinOp::Shr, Type::U64, u64::MAX, 64), 0);
        assert_eq!(bin(BinOp::Shr, Type::S64, 1 << 63, 0xFFFF_FFFF), u64::MAX);
        assert_eq!(bin(BinOp::Div, Type::U32, 5, 0), 0xFFFF_FFFF);
        assert_eq!(bin(BinOp::Div, Type::S64, 5, 0), u64::MAX);
        assert_eq!(bin(BinOp::Rem, Type::S32, 5, 0), 5);
    }

    #[test]
    fn conversions_saturate_and_extend() {
        let f = |v: f32| u64::from(v.to_bits());
        assert_eq!(
            cvt(Rounding::Rzi, Type::S32, Type::F32, f(-1e20)),
            0x8000_0000
        );
        assert_eq!(cvt(Rounding::Rzi, Type::U64, Type::F32, f(-3.5)), 0);
        assert_eq!(cvt(Rounding::Rzi, Type::S64, Type::F32, f(f32::NAN)), 0);
        assert_eq!(
            cvt(Rounding::None, Type::S64, Type::S32, 0xFFFF_FFFE),
            (-2i64) as u64
        );
        assert_eq!(
            cvt(Rounding::None, Type::U64, Type::U32, 0xFFFF_FFFE),
            0xFFFF_FFFE
        );
        assert_eq!(
            cvt(Rounding::None, Type::U32, Type::U64, 0x1_2345_6789),
            0x2345_6789
        );
        assert_eq!(
            cvt(Rounding::Rn, Type::F32, Type::U64, u64::MAX),
            f(1.8446744e19)
        );
    }

    #[test]
    fn float_comparisons_follow_ptx_ordering() {
        let nan = u64::from(f32::NAN.to_bits());
        let one = u64::from(1f32.to_bits());
        assert!(!setp(Cmp::Ne, Type::F32, nan, one));
        assert!(setp(Cmp::Neu, Type::F32, nan, one));
        assert!(!setp(Cmp::Ge, Type::F32, nan, nan));
        assert!(setp(Cmp::Lt, Type::S32, 0xFFFF_FFFF, 0));
        assert!(!setp(Cmp::Lt, Type::U32, 0xFFFF_FFFF, 0));
    }
}
