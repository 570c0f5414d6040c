//! Typed PTX IR: registers by class, operands, instructions, kernels and modules; `Display` is the emitter.
//!
//! The IR covers exactly the PTX subset that lb generates, and nothing else. The simulator's parser
//! (`crate::sim::parse`) reads the text written here back into the same types, so a round trip
//! `Module -> text -> Module` is the identity and the simulator runs what the GPU runs.
//!
//! Emission is deterministic: no hash maps, registers and labels numbered in creation order.

use std::fmt;

/// Register classes, one PTX `.reg` declaration each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegClass {
    /// `.pred %p<n>`
    Pred,
    /// `.b32 %r<n>`: every 32-bit integer type.
    B32,
    /// `.b64 %rd<n>`: every 64-bit integer type and addresses.
    B64,
    /// `.f32 %f<n>`
    F32,
    /// `.f64 %fd<n>`
    F64,
}

impl RegClass {
    pub const ALL: [RegClass; 5] = [
        RegClass::Pred,
        RegClass::B32,
        RegClass::B64,
        RegClass::F32,
        RegClass::F64,
    ];

    /// The register name prefix, without `%`.
    pub fn prefix(self) -> &'static str {
        match self {
            RegClass::Pred => "p",
            RegClass::B32 => "r",
            RegClass::B64 => "rd",
            RegClass::F32 => "f",
            RegClass::F64 => "fd",
        }
    }

    /// The type written in the `.reg` declaration.
    pub fn decl_type(self) -> &'static str {
        match self {
            RegClass::Pred => ".pred",
            RegClass::B32 => ".b32",
            RegClass::B64 => ".b64",
            RegClass::F32 => ".f32",
            RegClass::F64 => ".f64",
        }
    }
}

/// A virtual register: `%r7` is `Reg { class: B32, index: 7 }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg {
    pub class: RegClass,
    pub index: u32,
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}{}", self.class.prefix(), self.index)
    }
}

/// Instruction types (the `.u32` in `add.u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Pred,
    B32,
    B64,
    U8,
    /// A 16-bit element in memory (`ld`/`st` of f16 and bf16), widened into a `B32` register.
    U16,
    U32,
    S32,
    U64,
    S64,
    F32,
    F64,
    /// IEEE binary16, only as a `cvt` operand type, held in the low half of a `B32` register.
    F16,
}

impl Type {
    pub fn suffix(self) -> &'static str {
        match self {
            Type::Pred => ".pred",
            Type::B32 => ".b32",
            Type::B64 => ".b64",
            Type::U8 => ".u8",
            Type::U16 => ".u16",
            Type::U32 => ".u32",
            Type::S32 => ".s32",
            Type::U64 => ".u64",
            Type::S64 => ".s64",
            Type::F32 => ".f32",
            Type::F64 => ".f64",
            Type::F16 => ".f16",
        }
    }

    pub fn from_suffix(s: &str) -> Option<Type> {
        Some(match s {
            "pred" => Type::Pred,
            "b32" => Type::B32,
            "b64" => Type::B64,
            "u8" => Type::U8,
            "u16" => Type::U16,
            "f16" => Type::F16,
            "u32" => Type::U32,
            "s32" => Type::S32,
            "u64" => Type::U64,
            "s64" => Type::S64,
            "f32" => Type::F32,
            "f64" => Type::F64,
            _ => return None,
        })
    }

    /// Size in bytes of a value of this type in memory.
    pub fn size(self) -> u32 {
        match self {
            Type::Pred | Type::U8 => 1,
            Type::U16 | Type::F16 => 2,
            Type::B32 | Type::U32 | Type::S32 | Type::F32 => 4,
            Type::B64 | Type::U64 | Type::S64 | Type::F64 => 8,
        }
    }

    /// The register class that holds a value of this type (`U8`, `U16` and `F16` are widened
    /// into a `B32`).
    pub fn reg_class(self) -> RegClass {
        match self {
            Type::Pred => RegClass::Pred,
            Type::B32 | Type::U8 | Type::U16 | Type::F16 | Type::U32 | Type::S32 => RegClass::B32,
            Type::B64 | Type::U64 | Type::S64 => RegClass::B64,
            Type::F32 => RegClass::F32,
            Type::F64 => RegClass::F64,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Type::F32 | Type::F64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Type::S32 | Type::S64)
    }

    /// Whether `n` elements of this type make a vector that one `ld.vN`/`st.vN` moves
    /// ([`Op::LdVec`], [`Op::StVec`]): 2 or 4 elements of 32 bits, or 2 of 64 bits (PTX ISA,
    /// `ld`: `.v2` and `.v4`), so at most 16 bytes, the widest access every target has.
    pub fn vector_fits(self, n: usize) -> bool {
        let element = matches!(
            self,
            Type::B32
                | Type::U32
                | Type::S32
                | Type::F32
                | Type::B64
                | Type::U64
                | Type::S64
                | Type::F64
        );
        element && matches!(n, 2 | 4) && n as u32 * self.size() <= 16
    }
}

/// Special registers read with `mov`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    TidX,
    NtidX,
    CtaidX,
    NctaidX,
    LaneId,
    WarpId,
}

impl Special {
    pub fn name(self) -> &'static str {
        match self {
            Special::TidX => "%tid.x",
            Special::NtidX => "%ntid.x",
            Special::CtaidX => "%ctaid.x",
            Special::NctaidX => "%nctaid.x",
            Special::LaneId => "%laneid",
            Special::WarpId => "%warpid",
        }
    }
}

/// A source operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(Reg),
    /// An integer immediate, written in decimal (negative allowed).
    Imm(i64),
    /// An f32 immediate, written as `0fXXXXXXXX` (exact bits).
    F32(u32),
    /// An f64 immediate, written as `0dXXXXXXXXXXXXXXXX` (exact bits).
    F64(u64),
    Special(Special),
    /// The address of a module-level or kernel-level `.shared` variable (`mov.u64 %rd1, smem;`).
    Symbol(String),
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Self {
        Operand::Reg(r)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => write!(f, "{r}"),
            Operand::Imm(v) => write!(f, "{v}"),
            Operand::F32(bits) => write!(f, "0f{bits:08X}"),
            Operand::F64(bits) => write!(f, "0d{bits:016X}"),
            Operand::Special(s) => f.write_str(s.name()),
            Operand::Symbol(s) => f.write_str(s),
        }
    }
}

/// State spaces for loads, stores and atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    Param,
}

impl Space {
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => ".global",
            Space::Shared => ".shared",
            Space::Param => ".param",
        }
    }
}

/// The cache policy of a load from global memory (PTX ISA, `ld`: cache operators and `.nc`).
///
/// The policy is a promise about the data, so the layer that knows the data picks it
/// (`crate::primitives::load`): what no thread of the kernel writes may take the non-coherent
/// read-only path, and what is read once per atom is streamed so that it does not evict what is
/// read again (the gathered dense input). The eviction-priority qualifiers of newer targets
/// (`.L2::evict_first` on 256-bit loads, `createpolicy`) are not used: `.cs` says the same on
/// every target from sm_75.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LdCache {
    /// `ld.global`: coherent, cached at every level.
    #[default]
    Default,
    /// `ld.global.nc`: the non-coherent read-only path, for data no thread writes while the
    /// kernel runs.
    ReadOnly,
    /// `ld.global.cs.nc`: read-only and streamed (evict-first in L1 and L2), for data each
    /// thread block reads once.
    Stream,
}

impl LdCache {
    /// The qualifiers between the state space and the type.
    pub fn name(self) -> &'static str {
        match self {
            LdCache::Default => "",
            LdCache::ReadOnly => ".nc",
            LdCache::Stream => ".cs.nc",
        }
    }
}

/// A memory address: `[base+offset]`, or `[param_name]` for kernel parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Address {
    Reg {
        base: Reg,
        offset: i64,
    },
    /// A named symbol (kernel parameter or shared variable) plus offset.
    Symbol {
        name: String,
        offset: i64,
    },
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (base, offset) = match self {
            Address::Reg { base, offset } => (base.to_string(), *offset),
            Address::Symbol { name, offset } => (name.clone(), *offset),
        };
        match offset {
            0 => write!(f, "[{base}]"),
            o if o > 0 => write!(f, "[{base}+{o}]"),
            o => write!(f, "[{base}+{o}]"),
        }
    }
}

/// Two-operand arithmetic and logic. Float `Add`/`Sub`/`Mul`/`Div` are emitted with `.rn` so that
/// ptxas never contracts them into an FMA on its own: the one contraction lb makes, a product
/// summed once, is an explicit `fma` written by `crate::optimize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    /// `mul.lo` for integers, `mul.rn` for floats.
    Mul,
    /// `mul.wide.u32` / `mul.wide.s32`: 32×32 → 64 bits; `ty` is the source type.
    MulWide,
    /// `mul.hi` for integers.
    MulHi,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

impl BinOp {
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::MulWide => "mul.wide",
            BinOp::MulHi => "mul.hi",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
        }
    }
}

/// One-operand arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Not,
    Abs,
    /// `sqrt.rn` (IEEE, like Rust's `sqrt`).
    Sqrt,
    /// `popc.b32`/`popc.b64` (result is always `.u32`).
    Popc,
    /// `clz.b32`/`clz.b64` (result is always `.u32`).
    Clz,
    /// `brev.b32`/`brev.b64`: the bits in reverse order.
    Brev,
    /// `ex2.approx.f32`: 2^a, approximated (PTX ISA, `ex2`: at most 2 ulp off).
    Ex2,
    /// `lg2.approx.f32`: log2(a), approximated (PTX ISA, `lg2`: absolute error at most 2^-22).
    Lg2,
    /// `sin.approx.f32` (PTX ISA, `sin`: absolute error at most 2^-20.5 in -100π..100π).
    Sin,
    /// `cos.approx.f32` (PTX ISA, `cos`: absolute error at most 2^-20.5 in -100π..100π).
    Cos,
    /// `tanh.approx.f32`, sm_75 and newer (PTX ISA, `tanh`: relative error at most 2^-11).
    Tanh,
}

impl UnOp {
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::Abs => "abs",
            UnOp::Sqrt => "sqrt",
            UnOp::Popc => "popc",
            UnOp::Clz => "clz",
            UnOp::Brev => "brev",
            UnOp::Ex2 => "ex2",
            UnOp::Lg2 => "lg2",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Tanh => "tanh",
        }
    }

    /// The hardware approximations (`.approx.f32` only).
    pub fn is_approx(self) -> bool {
        matches!(
            self,
            UnOp::Ex2 | UnOp::Lg2 | UnOp::Sin | UnOp::Cos | UnOp::Tanh
        )
    }
}

/// Comparison operators of `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Unordered not-equal, for floats: true if either is NaN (Rust's `!=`).
    Neu,
}

impl Cmp {
    pub fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Neu => "neu",
        }
    }
}

/// Atomic read-modify-write operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    Exch,
    /// Compare-and-swap: `atom.cas.b32 d, [a], compare, new`.
    Cas,
    And,
    Or,
}

impl AtomOp {
    pub fn name(self) -> &'static str {
        match self {
            AtomOp::Add => "add",
            AtomOp::Min => "min",
            AtomOp::Max => "max",
            AtomOp::Exch => "exch",
            AtomOp::Cas => "cas",
            AtomOp::And => "and",
            AtomOp::Or => "or",
        }
    }
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

impl ShflMode {
    pub fn name(self) -> &'static str {
        match self {
            ShflMode::Up => "up",
            ShflMode::Down => "down",
            ShflMode::Bfly => "bfly",
            ShflMode::Idx => "idx",
        }
    }
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoteMode {
    /// `vote.sync.all.pred`
    All,
    /// `vote.sync.any.pred`
    Any,
    /// `vote.sync.ballot.b32` (destination is a `B32` register).
    Ballot,
}

impl VoteMode {
    pub fn name(self) -> &'static str {
        match self {
            VoteMode::All => "all",
            VoteMode::Any => "any",
            VoteMode::Ballot => "ballot",
        }
    }
}

/// Rounding modes of `cvt`. `None` is written for integer widening/narrowing and `f32 -> f64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    None,
    /// `.rn`: round to nearest even (int -> float, f64 -> f32).
    Rn,
    /// `.rzi`: round toward zero to an integer, saturating (float -> int, Rust's `as`).
    Rzi,
    /// `.rmi`: round toward -inf to an integer (`floor`, float -> same float).
    Rmi,
    /// `.rpi`: round toward +inf to an integer (`ceil`, float -> same float).
    Rpi,
    /// `.rni`: round to the nearest integer, ties to even (float -> same float).
    Rni,
}

impl Rounding {
    pub fn name(self) -> &'static str {
        match self {
            Rounding::None => "",
            Rounding::Rn => ".rn",
            Rounding::Rzi => ".rzi",
            Rounding::Rmi => ".rmi",
            Rounding::Rpi => ".rpi",
            Rounding::Rni => ".rni",
        }
    }
}

/// An instruction guard: `@%p1` or `@!%p1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    pub pred: Reg,
    pub negate: bool,
}

/// A label inside a kernel, written `L{n}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(pub u32);

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{}", self.0)
    }
}

/// One PTX instruction. Text forms (with `T` the type suffix):
///
/// | variant | text |
/// | --- | --- |
/// | `Mov` | `mov.T d, a;` |
/// | `Bin` | `add.T d, a, b;` (`.rn` after the op for float add/sub/mul/div; `.lo` for int mul; `mul.wide.T`, `mul.hi.T`) |
/// | `Un` | `neg.T d, a;` (`sqrt.rn.T`; `ex2.approx.f32` and the other approximations; `popc.T`/`clz.T` with a `B32` destination) |
/// | `Fma` | `fma.rn.T d, a, b, c;` |
/// | `Mad` | `mad.lo.T d, a, b, c;` / `mad.wide.T d, a, b, c;` (integers) |
/// | `Setp` | `setp.CMP.T p, a, b;` |
/// | `Selp` | `selp.T d, a, b, p;` |
/// | `Cvt` | `cvt{.rn,.rzi,.rmi,.rpi,.rni}.DT.ST d, a;` |
/// | `Ld` | `ld.SPACE{.nc,.cs.nc}.T d, [addr];` |
/// | `St` | `st.SPACE.T [addr], a;` |
/// | `LdVec` | `ld.SPACE{.nc,.cs.nc}.vN.T {d0, d1, d2, d3}, [addr];` |
/// | `StVec` | `st.SPACE.vN.T [addr], {a0, a1};` |
/// | `Atom` | `atom.SPACE.OP.T d, [addr], b;` and `atom.SPACE.cas.T d, [addr], b, c;` |
/// | `Bra` | `bra L3;` (with a guard: `@%p1 bra L3;`) |
/// | `Label` | `L3:` |
/// | `BarSync` | `bar.sync 0;` |
/// | `MemBar` | `membar.gl;` |
/// | `Fence` | `fence.acq_rel.gpu;` |
/// | `WarpSync` | `bar.warp.sync mask;` |
/// | `Shfl` | `shfl.sync.MODE.b32 d, a, b, c, mask;` (optionally `d|p`) |
/// | `Vote` | `vote.sync.MODE.pred d, a, mask;` / `vote.sync.ballot.b32 d, a, mask;` |
/// | `ActiveMask` | `activemask.b32 d;` |
/// | `Ret` | `ret;` |
/// | `ScopeBegin`, `ScopeEnd` | `{`, `}` |
/// | `ParamDecl` | `.param .b64 lb_p0;` / `.param .align 4 .b8 lb_p2[12];` |
/// | `Call` | `call.uni (lb_p9), cudaLaunchDevice, (lb_p0, lb_p1);` |
///
/// Any instruction may carry a guard, written before it: `@%p1 st.global.f32 [%rd4], %f2;`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Mov {
        ty: Type,
        dst: Reg,
        src: Operand,
    },
    Bin {
        op: BinOp,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    Un {
        op: UnOp,
        ty: Type,
        dst: Reg,
        a: Operand,
    },
    Fma {
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    /// An integer product added to `c` in one instruction: `mad.lo` in `ty`, or `mad.wide`
    /// (`ty` the 32-bit source type; `c` and `dst` 64-bit, as for [`BinOp::MulWide`]).
    Mad {
        wide: bool,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    Setp {
        cmp: Cmp,
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
    },
    Selp {
        ty: Type,
        dst: Reg,
        a: Operand,
        b: Operand,
        pred: Reg,
    },
    Cvt {
        rounding: Rounding,
        dst_ty: Type,
        src_ty: Type,
        dst: Reg,
        src: Operand,
    },
    Ld {
        space: Space,
        ty: Type,
        dst: Reg,
        addr: Address,
        /// Cache policy; anything but [`LdCache::Default`] only in the global space.
        cache: LdCache,
    },
    St {
        space: Space,
        ty: Type,
        addr: Address,
        src: Operand,
    },
    /// A load of `dsts.len()` consecutive elements in one access, `dsts[0]` from the lowest
    /// address; [`Type::vector_fits`] says which counts and types exist. The address must be
    /// aligned to the vector's whole size (16 bytes for four `f32`), or the access faults.
    LdVec {
        space: Space,
        ty: Type,
        dsts: Vec<Reg>,
        addr: Address,
        /// Cache policy, as for [`Op::Ld`].
        cache: LdCache,
    },
    /// A store of `srcs.len()` consecutive elements in one access, aligned as for
    /// [`Op::LdVec`].
    StVec {
        space: Space,
        ty: Type,
        addr: Address,
        srcs: Vec<Operand>,
    },
    Atom {
        space: Space,
        op: AtomOp,
        ty: Type,
        dst: Reg,
        addr: Address,
        b: Operand,
        /// The new value of `cas`; `None` for every other op.
        c: Option<Operand>,
    },
    Bra {
        target: Label,
    },
    Label(Label),
    BarSync,
    MemBar,
    /// A release and acquire fence at GPU scope: before an atomic, it makes the thread's earlier
    /// writes (and, after a barrier, its block's) visible before the atomic is; after an atomic
    /// that saw other blocks' counts, it makes their writes visible to the reads that follow.
    /// Lighter than `membar.gl` (a sequentially consistent fence), which orders more than these
    /// release/acquire patterns need.
    Fence,
    /// Waits for the lanes of `mask` and orders their memory accesses: what makes shared memory
    /// written by one lane safe to read by another of the same warp under independent thread
    /// scheduling (sm_70 and newer).
    WarpSync {
        mask: Operand,
    },
    Shfl {
        mode: ShflMode,
        dst: Reg,
        /// The predicate output (`d|p`): true when the source lane was in range.
        dst_pred: Option<Reg>,
        a: Operand,
        b: Operand,
        c: Operand,
        mask: Operand,
    },
    Vote {
        mode: VoteMode,
        dst: Reg,
        a: Operand,
        mask: Operand,
    },
    /// The lanes of the warp executing this instruction together (a `B32` destination): the
    /// member mask for collectives in divergent code, such as a queue push inside an `if`.
    ActiveMask {
        dst: Reg,
    },
    Ret,
    /// `{`: opens a scope for the `.param` variables of one call (device-side launches only).
    ScopeBegin,
    /// `}`: closes the scope opened by [`Op::ScopeBegin`].
    ScopeEnd,
    /// `.param .b64 name;` or `.param .align A .b8 name[N];`: an argument or return slot of a call.
    ParamDecl {
        name: String,
        ty: ParamDeclTy,
    },
    /// `call.uni (ret), func, (a, b, ...);`: a call of a device-runtime function whose arguments
    /// and return value travel through `.param` variables of the enclosing scope.
    Call {
        ret: Option<String>,
        func: DeviceFunc,
        args: Vec<String>,
    },
}

/// The type of a `.param` variable declared in a body ([`Op::ParamDecl`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamDeclTy {
    /// `.param .T name;`
    Scalar(Type),
    /// `.param .align A .b8 name[N];` (a `dim3` is 12 bytes aligned to 4).
    Bytes { align: u32, len: u32 },
}

/// The functions of the CUDA device runtime (libcudadevrt) that lb calls, for device-side
/// launches (dynamic parallelism). Their PTX prototypes are the ones the CUDA C++ Programming
/// Guide documents for PTX-level launches ("Device-side Launch from PTX", `.address_size 64`);
/// [`Module`]'s `Display` declares the ones its kernels call, so a module without device
/// launches stays free of `.extern` declarations and loads without linking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceFunc {
    /// `cudaGetParameterBuffer(alignment: u64, size: u64) -> *mut u8`: the parameter buffer of
    /// the next launch, or null when the launch pool is exhausted.
    GetParameterBuffer,
    /// `cudaLaunchDevice(func, parameterBuffer, gridDimension: dim3, blockDimension: dim3,
    /// sharedMemSize: u32, stream: u64) -> cudaError_t`.
    LaunchDevice,
}

impl DeviceFunc {
    pub const ALL: [DeviceFunc; 2] = [DeviceFunc::GetParameterBuffer, DeviceFunc::LaunchDevice];

    pub fn name(self) -> &'static str {
        match self {
            DeviceFunc::GetParameterBuffer => "cudaGetParameterBuffer",
            DeviceFunc::LaunchDevice => "cudaLaunchDevice",
        }
    }

    pub fn from_name(name: &str) -> Option<DeviceFunc> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The module-level `.extern .func` declaration.
    pub fn prototype(self) -> &'static str {
        match self {
            DeviceFunc::GetParameterBuffer => {
                ".extern .func (.param .b64 func_retval0) cudaGetParameterBuffer\n(\n\t.param .b64 alignment,\n\t.param .b64 size\n)\n;"
            }
            DeviceFunc::LaunchDevice => {
                ".extern .func (.param .b32 func_retval0) cudaLaunchDevice\n(\n\t.param .b64 func,\n\t.param .b64 parameterBuffer,\n\t.param .align 4 .b8 gridDimension[12],\n\t.param .align 4 .b8 blockDimension[12],\n\t.param .b32 sharedMemSize,\n\t.param .b64 stream\n)\n;"
            }
        }
    }
}

/// An instruction with an optional guard.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    pub guard: Option<Guard>,
    pub op: Op,
}

impl From<Op> for Instr {
    fn from(op: Op) -> Self {
        Instr { guard: None, op }
    }
}

/// A kernel parameter: `.param .u64 name`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: Type,
}

/// A `.shared` array declared inside a kernel: `.shared .align A .b8 name[bytes];`.
/// `bytes == 0` declares the dynamic shared memory: `.extern .shared .align A .b8 name[];`.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedDecl {
    pub name: String,
    pub align: u32,
    pub bytes: u32,
}

/// One `.visible .entry`.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub shared: Vec<SharedDecl>,
    /// How many registers of each class are used (`%r0 .. %r{n-1}`), in `RegClass::ALL` order.
    pub reg_counts: [u32; 5],
    pub body: Vec<Instr>,
    /// The most registers a thread may use (`.maxnreg`), for blocks so large that the register
    /// file (64 K per block) cannot give each thread the 255 ptxas may otherwise take: ptxas then
    /// spills rather than build a kernel that fails to launch. (`.maxntid` would say the same
    /// but lets ptxas aim at a full SM and cap far lower, spilling kernels that fit.)
    pub max_registers: Option<u32>,
    /// `.maxntid` and `.minnctapersm`: the kernel is never launched with more threads a block
    /// than [`Occupancy::max_threads`], and ptxas should fit [`Occupancy::min_blocks`] such
    /// blocks on an SM, which sets its register budget on each target (docs/spmm.md,
    /// "Registers and occupancy").
    pub occupancy: Option<Occupancy>,
}

/// A kernel's occupancy directives ([`Kernel::occupancy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    pub max_threads: u32,
    pub min_blocks: u32,
}

/// A PTX module: header plus kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// PTX ISA version, e.g. `(7, 8)`.
    pub version: (u32, u32),
    /// Target, e.g. `sm_75`.
    pub target: String,
    pub kernels: Vec<Kernel>,
}

impl Module {
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The device-runtime functions the kernels call, in [`DeviceFunc::ALL`] order.
    pub fn device_funcs(&self) -> Vec<DeviceFunc> {
        DeviceFunc::ALL
            .into_iter()
            .filter(|&f| self.kernels.iter().any(|k| k.calls(f)))
            .collect()
    }

    /// The module without the kernels that launch from the device: what a driver without the
    /// device runtime (libcudadevrt) can load with no link step.
    pub fn without_device_launches(&self) -> Module {
        Module {
            version: self.version,
            target: self.target.clone(),
            kernels: self
                .kernels
                .iter()
                .filter(|k| !DeviceFunc::ALL.into_iter().any(|f| k.calls(f)))
                .cloned()
                .collect(),
        }
    }
}

impl Kernel {
    /// Whether the body calls `func`.
    pub fn calls(&self, func: DeviceFunc) -> bool {
        self.body
            .iter()
            .any(|i| matches!(&i.op, Op::Call { func: f, .. } if *f == func))
    }
}

/// The elements of a vector operand, braced: `{%f1, %f2, %f3, %f4}`.
struct Braced<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Braced<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("}")
    }
}

fn float_rn(op: BinOp, ty: Type) -> &'static str {
    if ty.is_float() && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div) {
        ".rn"
    } else if !ty.is_float() && op == BinOp::Mul {
        ".lo"
    } else {
        ""
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Mov { ty, dst, src } => write!(f, "mov{} {dst}, {src};", ty.suffix()),
            Op::Bin { op, ty, dst, a, b } => write!(
                f,
                "{}{}{} {dst}, {a}, {b};",
                op.name(),
                float_rn(*op, *ty),
                ty.suffix()
            ),
            Op::Un { op, ty, dst, a } => {
                let rn = match op {
                    UnOp::Sqrt => ".rn",
                    op if op.is_approx() => ".approx",
                    _ => "",
                };
                write!(f, "{}{rn}{} {dst}, {a};", op.name(), ty.suffix())
            }
            Op::Fma { ty, dst, a, b, c } => {
                write!(f, "fma.rn{} {dst}, {a}, {b}, {c};", ty.suffix())
            }
            Op::Mad {
                wide,
                ty,
                dst,
                a,
                b,
                c,
            } => {
                let half = if *wide { "wide" } else { "lo" };
                write!(f, "mad.{half}{} {dst}, {a}, {b}, {c};", ty.suffix())
            }
            Op::Setp { cmp, ty, dst, a, b } => {
                write!(f, "setp.{}{} {dst}, {a}, {b};", cmp.name(), ty.suffix())
            }
            Op::Selp {
                ty,
                dst,
                a,
                b,
                pred,
            } => write!(f, "selp{} {dst}, {a}, {b}, {pred};", ty.suffix()),
            Op::Cvt {
                rounding,
                dst_ty,
                src_ty,
                dst,
                src,
            } => write!(
                f,
                "cvt{}{}{} {dst}, {src};",
                rounding.name(),
                dst_ty.suffix(),
                src_ty.suffix()
            ),
            Op::Ld {
                space,
                ty,
                dst,
                addr,
                cache,
            } => write!(
                f,
                "ld{}{}{} {dst}, {addr};",
                space.name(),
                cache.name(),
                ty.suffix()
            ),
            Op::St {
                space,
                ty,
                addr,
                src,
            } => write!(f, "st{}{} {addr}, {src};", space.name(), ty.suffix()),
            Op::LdVec {
                space,
                ty,
                dsts,
                addr,
                cache,
            } => write!(
                f,
                "ld{}{}.v{}{} {}, {addr};",
                space.name(),
                cache.name(),
                dsts.len(),
                ty.suffix(),
                Braced(dsts)
            ),
            Op::StVec {
                space,
                ty,
                addr,
                srcs,
            } => write!(
                f,
                "st{}.v{}{} {addr}, {};",
                space.name(),
                srcs.len(),
                ty.suffix(),
                Braced(srcs)
            ),
            Op::Atom {
                space,
                op,
                ty,
                dst,
                addr,
                b,
                c,
            } => {
                write!(
                    f,
                    "atom{}.{}{} {dst}, {addr}, {b}",
                    space.name(),
                    op.name(),
                    ty.suffix()
                )?;
                if let Some(c) = c {
                    write!(f, ", {c}")?;
                }
                f.write_str(";")
            }
            Op::Bra { target } => write!(f, "bra {target};"),
            Op::Label(l) => write!(f, "{l}:"),
            Op::BarSync => f.write_str("bar.sync 0;"),
            Op::MemBar => f.write_str("membar.gl;"),
            Op::Fence => f.write_str("fence.acq_rel.gpu;"),
            Op::WarpSync { mask } => write!(f, "bar.warp.sync {mask};"),
            Op::Shfl {
                mode,
                dst,
                dst_pred,
                a,
                b,
                c,
                mask,
            } => {
                write!(f, "shfl.sync.{}.b32 {dst}", mode.name())?;
                if let Some(p) = dst_pred {
                    write!(f, "|{p}")?;
                }
                write!(f, ", {a}, {b}, {c}, {mask};")
            }
            Op::Vote { mode, dst, a, mask } => {
                let ty = if *mode == VoteMode::Ballot {
                    ".b32"
                } else {
                    ".pred"
                };
                write!(f, "vote.sync.{}{ty} {dst}, {a}, {mask};", mode.name())
            }
            Op::ActiveMask { dst } => write!(f, "activemask.b32 {dst};"),
            Op::Ret => f.write_str("ret;"),
            Op::ScopeBegin => f.write_str("{"),
            Op::ScopeEnd => f.write_str("}"),
            Op::ParamDecl {
                name,
                ty: ParamDeclTy::Scalar(ty),
            } => write!(f, ".param {} {name};", ty.suffix()),
            Op::ParamDecl {
                name,
                ty: ParamDeclTy::Bytes { align, len },
            } => write!(f, ".param .align {align} .b8 {name}[{len}];"),
            Op::Call { ret, func, args } => {
                f.write_str("call.uni ")?;
                if let Some(r) = ret {
                    write!(f, "({r}), ")?;
                }
                write!(f, "{}, ({});", func.name(), args.join(", "))
            }
        }
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Op::Label(l) = self.op {
            return write!(f, "{l}:");
        }
        f.write_str("\t")?;
        if let Some(g) = self.guard {
            write!(f, "@{}{} ", if g.negate { "!" } else { "" }, g.pred)?;
        }
        write!(f, "{}", self.op)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, ".visible .entry {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            let sep = if i + 1 == self.params.len() { "" } else { "," };
            writeln!(f, "\t.param {} {}{sep}", p.ty.suffix(), p.name)?;
        }
        writeln!(f, ")")?;
        if let Some(n) = self.max_registers {
            writeln!(f, ".maxnreg {n}")?;
        }
        if let Some(o) = self.occupancy {
            writeln!(f, ".maxntid {}, 1, 1", o.max_threads)?;
            writeln!(f, ".minnctapersm {}", o.min_blocks)?;
        }
        writeln!(f, "{{")?;
        for (class, &n) in RegClass::ALL.iter().zip(self.reg_counts.iter()) {
            if n > 0 {
                writeln!(f, "\t.reg {} %{}<{n}>;", class.decl_type(), class.prefix())?;
            }
        }
        for s in &self.shared {
            if s.bytes == 0 {
                writeln!(f, "\t.extern .shared .align {} .b8 {}[];", s.align, s.name)?;
            } else {
                writeln!(
                    f,
                    "\t.shared .align {} .b8 {}[{}];",
                    s.align, s.name, s.bytes
                )?;
            }
        }
        for i in &self.body {
            writeln!(f, "{i}")?;
        }
        writeln!(f, "}}")
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "//\n// Generated by lb. Do not edit.\n//")?;
        writeln!(f, ".version {}.{}", self.version.0, self.version.1)?;
        writeln!(f, ".target {}", self.target)?;
        writeln!(f, ".address_size 64")?;
        for func in self.device_funcs() {
            writeln!(f)?;
            writeln!(f, "{}", func.prototype())?;
        }
        for k in &self.kernels {
            writeln!(f)?;
            write!(f, "{k}")?;
        }
        Ok(())
    }
}
