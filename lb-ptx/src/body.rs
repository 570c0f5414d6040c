//! The body IR: the work of one atom, as the macro lowers it from the user's Rust function.
//!
//! It is typed (every expression knows its `Ty`), has no block expressions other than `If` and
//! `Block`, and
//! refers to parameters by position. Schedules never look inside it: they ask `codegen` to emit it
//! with the tile, atom, lane and rank registers they computed, and get back the atom's
//! contribution when the body reduces.

/// Scalar types of the body subset. `usize` is 64-bit on the GPU and lowers to `U64`.
///
/// `F16` and `Bf16` are storage types only: the element type of a slice, of a tile set's values
/// or of the output, never the type of an expression or a local. A load of one yields an `F32`
/// (exactly), a store or the output rounds an `F32` to nearest even: the arithmetic between
/// them is single precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Ty {
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// IEEE binary16 in memory (`half::f16`).
    F16,
    /// bfloat16 in memory (`half::bf16`): the upper half of an f32.
    Bf16,
}

impl Ty {
    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(self, Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::I32 | Ty::I64 | Ty::F32 | Ty::F64)
    }

    /// A 16-bit float storage type, whose values are `F32` once loaded.
    pub fn is_half(self) -> bool {
        matches!(self, Ty::F16 | Ty::Bf16)
    }

    /// The type of a value once loaded: `F32` for the half types, itself otherwise.
    pub fn arith(self) -> Ty {
        if self.is_half() {
            Ty::F32
        } else {
            self
        }
    }

    /// Size in bytes in device memory (`bool` is stored as one byte, like Rust's).
    pub fn size(self) -> u32 {
        match self {
            Ty::Bool => 1,
            Ty::F16 | Ty::Bf16 => 2,
            Ty::I32 | Ty::U32 | Ty::F32 => 4,
            Ty::I64 | Ty::U64 | Ty::F64 => 8,
        }
    }

    /// The Rust spelling, for messages and generated code.
    pub fn rust_name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::I32 => "i32",
            Ty::U32 => "u32",
            Ty::I64 => "i64",
            Ty::U64 => "u64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
            Ty::F16 => "f16",
            Ty::Bf16 => "bf16",
        }
    }
}

/// How the contributions of a tile's atoms are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Reduce {
    Sum,
    Min,
    Max,
}

/// Which tile-set format a tile-set parameter has, and so what its tiles are.
///
/// Kernel ABI (`.param` slots, in order; pointers are u64, sizes u64):
/// - `Csr` (tiles are rows): `row_offsets` (→ u64), `col_indices` (→ u32), `values` (→ T),
///   `num_rows`, `num_cols`, `nnz`.
/// - `Csc` (tiles are columns): `col_offsets` (→ u64, `num_cols + 1`), `row_indices` (→ u32),
///   `values`, `num_rows`, `num_cols`, `nnz`.
/// - `Coo` (atoms sorted by row, tiles are rows): `row_offsets` (→ u64, `num_rows + 1`, computed
///   from the sorted row indices when the matrix is uploaded: the tile offsets every schedule
///   needs), `row_indices` (→ u32), `col_indices` (→ u32), `values`, `num_rows`, `num_cols`, `nnz`.
/// - `Tiles` (the tile-set contract alone, for formats written outside lb): `tile_offsets` (→
///   u64, `num_tiles + 1`), `num_tiles`, `num_atoms`. It has no per-atom arrays: the format's
///   own arrays are the kernel's other parameters, indexed from the tile and the atom's rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TileSetKind {
    Csr,
    Csc,
    Coo,
    Tiles,
}

impl TileSetKind {
    /// The Rust type name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            TileSetKind::Csr => "Csr",
            TileSetKind::Csc => "Csc",
            TileSetKind::Coo => "Coo",
            TileSetKind::Tiles => "Tiles",
        }
    }
}

/// Fields of a tile set that a body may read; which exist depends on the [`TileSetKind`]
/// (`Csr`: `row_offsets`, `col_indices`; `Csc`: `col_offsets`, `row_indices`; `Coo`:
/// `row_indices`, `col_indices`; all three: `values`, `num_rows`, `num_cols`; `Tiles`:
/// `tile_offsets` as `RowOffsets` and `num_tiles` as `NumRows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CsrField {
    /// `row_offsets: [usize]` — `num_rows + 1` entries.
    RowOffsets,
    /// `col_indices: [u32]` — `nnz` entries.
    ColIndices,
    /// `values: [T]` — `nnz` entries.
    Values,
    /// `num_rows: usize`
    NumRows,
    /// `num_cols: usize`
    NumCols,
    /// `row_indices: [u32]` (`Csc`, `Coo`) — `nnz` entries.
    RowIndices,
    /// `col_offsets: [usize]` (`Csc`) — `num_cols + 1` entries.
    ColOffsets,
}

/// A kernel parameter of the body, in the order of the user's function (index roles excluded).
///
/// ABI (kernel `.param` slots, in order), shared by `codegen`, the macro and the runtime:
/// - `TileSet`: six slots (`Csr`, `Csc`), seven (`Coo`) or three (`Tiles`), see [`TileSetKind`].
/// - `Slice`: two slots, pointer (u64) then length in elements (u64).
/// - `Queue`: three slots, `items` (u64 pointer to u32), `count` (u64 pointer to one u64
///   counter) and `capacity` (u64, in items). A push claims slot `count` by an atomic add; a slot
///   at or past `capacity` is not written but still counted, so the host sees an overflow.
/// - `Scalar(ty)`: one slot; `bool` is passed as `.u32` (0 or 1), `usize` as `.u64`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Param {
    /// The Rust name, used to name the PTX params (`{name}_ptr`, `{name}_len`, …).
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ParamKind {
    TileSet {
        kind: TileSetKind,
        value: Ty,
    },
    Slice {
        elem: Ty,
        mutable: bool,
    },
    Scalar(Ty),
    /// `&mut Queue`: an append-only list of `u32`.
    Queue,
}

/// The index values a schedule hands to the body (all `usize`, i.e. `U64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum IndexRole {
    Tile,
    Atom,
    Lane,
    /// The atom's position inside its tile: `atom - row_offsets[tile]`.
    Rank,
}

/// Something that can be indexed: a slice parameter or a field of the tile-set parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ArrayRef {
    /// Index into `Body::params` (must be a `Slice`).
    Param(usize),
    /// Index into `Body::params` (must be a `TileSet`) and the field.
    Field(usize, CsrField),
}

/// A local variable: index into `Body::locals`.
pub type LocalId = usize;

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Lit {
    Bool(bool),
    /// Integer literal; the expression's `ty` says its width and sign.
    Int(i128),
    /// Float literal; the expression's `ty` says f32 or f64.
    Float(#[serde(with = "float_bits")] f64),
}

/// A float literal by its bits: `T::INFINITY` and NaN survive the trip through the body IR's
/// serialized form (JSON has no spelling for them).
mod float_bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `!x`: logical not on bool, bitwise not on integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `&&`, short-circuit: the right side is not evaluated when the left is false.
    And,
    /// `||`, short-circuit.
    Or,
}

/// Float and integer methods of the body subset (`x.min(y)`, `x.sqrt()`, `x.mul_add(a, b)`).
/// The receiver is the first operand; the result has the expression's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Method {
    Min,
    Max,
    Abs,
    Sqrt,
    /// `a.mul_add(b, c)`: one fused rounding, as in Rust.
    MulAdd,
    /// `x.clamp(lo, hi)` (floats and integers): `lo` below `lo`, `hi` above `hi`, NaN stays NaN.
    Clamp,
    /// Floats: rounding to an integer in the same type (`round`: half away from zero).
    Floor,
    Ceil,
    Round,
    Trunc,
    /// `x.powi(n)` with `n: i32` (floats), by repeated squaring.
    Powi,
    /// The transcendental functions: on `f32` the hardware approximations, on `f64` the
    /// software ones of [`crate::math64`].
    Exp,
    Exp2,
    Ln,
    Log2,
    /// `x.powf(y)`.
    Powf,
    Sin,
    Cos,
    Tanh,
    /// `x.pow(e)` with `e: u32` (integers), wrapping.
    Pow,
    /// Integers; the result is a `u32`.
    LeadingZeros,
    TrailingZeros,
    CountOnes,
}

impl Method {
    /// How many operands it takes, the receiver included.
    pub fn arity(self) -> usize {
        match self {
            Method::MulAdd | Method::Clamp => 3,
            Method::Min | Method::Max | Method::Powi | Method::Powf | Method::Pow => 2,
            _ => 1,
        }
    }

    /// The transcendental functions (`f32` and `f64` only): PTX approximates them in single
    /// precision, and [`crate::math64`] computes them in double precision.
    pub fn is_transcendental(self) -> bool {
        matches!(
            self,
            Method::Exp
                | Method::Exp2
                | Method::Ln
                | Method::Log2
                | Method::Powf
                | Method::Sin
                | Method::Cos
                | Method::Tanh
        )
    }
}

/// Atomic read-modify-writes on a slice element; they return the old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AtomicOp {
    Add,
    Min,
    Max,
    Exch,
    /// `atomic_cas(&mut s[i], compare, new)`
    Cas,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Expr {
    pub ty: Ty,
    pub kind: ExprKind,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ExprKind {
    Lit(Lit),
    Local(LocalId),
    Index(IndexRole),
    /// A scalar parameter (index into `Body::params`).
    Scalar(usize),
    /// `array[index]`; `index` has type `U64`.
    Load {
        array: ArrayRef,
        index: Box<Expr>,
    },
    /// `slice.len()`, or a CSR scalar field (`NumRows`, `NumCols`) through `Field`.
    Len(ArrayRef),
    /// `a.num_rows` / `a.num_cols`: `array` is `Field(p, NumRows|NumCols)`.
    TileSetScalar(ArrayRef),
    Unary {
        op: UnaryOp,
        arg: Box<Expr>,
    },
    /// Both operands have the same type, except shifts, whose right side may be any integer type.
    /// Comparison results have type `Bool`.
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `arg as ty`, with Rust's semantics (wrapping int casts, saturating float -> int).
    Cast {
        arg: Box<Expr>,
    },
    Method {
        method: Method,
        args: Vec<Expr>,
    },
    /// `atomic_op(&mut array[index], value [, new])`: returns the old value.
    Atomic {
        op: AtomicOp,
        array: ArrayRef,
        index: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `if cond { then } else { els }` used as a value.
    If {
        cond: Box<Expr>,
        then: Block,
        els: Block,
    },
    /// A block used as a value: its statements, then its value (an inlined helper function's
    /// call, a `match` used as a value).
    Block(Block),
}

/// A block whose last expression (if any) is its value.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub value: Option<Box<Expr>>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Stmt {
    /// `let x = e;`, `x = e;` and compound assignment (lowered to `x = x op e`).
    Assign {
        local: LocalId,
        value: Expr,
    },
    /// `array[index] = value;` (and compound, lowered to load-op-store).
    Store {
        array: ArrayRef,
        index: Expr,
        value: Expr,
    },
    /// An expression evaluated for its side effects (an atomic whose result is unused).
    Expr(Expr),
    If {
        cond: Expr,
        then: Block,
        els: Block,
    },
    /// `for var in start..end { body }` over integers of `var`'s type. `Continue` goes on with
    /// the next value.
    For {
        var: LocalId,
        start: Expr,
        end: Expr,
        body: Block,
    },
    /// An endless loop (`loop`, and `while`, whose body starts by breaking out when its condition
    /// is false): it is left by `Break`, `Return`, or never. `Continue` starts it over.
    Loop {
        body: Block,
    },
    /// `break`: leaves the loop `n` levels out (0 the innermost `For` or `Loop`).
    Break(u32),
    /// `continue`: starts the next iteration of the loop `n` levels out.
    Continue(u32),
    /// `return value;` (or the body's tail expression): the atom's contribution.
    Return(Option<Expr>),
    /// `queue.push(value);`: `queue` indexes `Body::params` (a `Queue`), `value` is a `U32`.
    Push {
        queue: usize,
        value: Expr,
    },
}

/// The whole atom function.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Body {
    /// The Rust function's name, used in kernel entry names.
    pub name: String,
    pub params: Vec<Param>,
    /// Which index roles the function takes (a role not taken is not computed by schedules that
    /// can skip it).
    pub roles: Vec<IndexRole>,
    /// Types of the local variables, indexed by `LocalId`.
    pub locals: Vec<Ty>,
    pub block: Block,
    /// With `reduce`: the contribution's type and the reduction. Without: `None`.
    pub reduce: Option<(Ty, Reduce)>,
    /// With `reduce`: the output's element type in memory when it differs from the reduced
    /// type (`F16` or `Bf16` for an `F32` reduction, rounded once, after the epilogue).
    pub out_storage: Option<Ty>,
    /// Which accesses a kernel built with [`crate::Options::checked`] tests.
    pub guards: Guards,
    /// With `reduce`: what turns a tile's reduced value into the value stored (the attribute's
    /// `epilogue`); `None` stores the reduced value itself.
    pub epilogue: Option<Epilogue>,
}

/// The epilogue of a reducing body: a second small function of the tile (and the lane), the
/// tile's reduced value and, when it asks for it, the output's value before the launch; it
/// returns the value stored. Schedules apply it once per (tile, lane), to the final value only
/// (after every fix-up), in [`crate::primitives::Layout::store_output`].
///
/// It sees the body's parameters (by the same positions) and two more scalars after them:
/// parameter `params.len()` is the reduced value and, with `reads_old`, `params.len() + 1` the
/// output's old value. Its index roles are `Tile` and, with `lanes`, `Lane`. It only computes
/// a value: no store, atomic or push.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Epilogue {
    /// Types of its own locals, indexed by `LocalId`.
    pub locals: Vec<Ty>,
    /// Its statements and value (a `return` or the tail is the value stored).
    pub block: Block,
    /// The index roles it reads (`Tile`, `Lane`).
    pub roles: Vec<IndexRole>,
    /// Whether it reads the output's old value (then the output is read before it is written).
    pub reads_old: bool,
}

/// The names of the epilogue's two extra parameters in the PTX-facing [`Param`] list.
const EPILOGUE_VALUE: &str = "lb_reduced";
const EPILOGUE_OLD: &str = "lb_old";

impl Body {
    /// The index of the tile-set parameter (the macro guarantees there is exactly one).
    pub fn tile_set(&self) -> usize {
        self.params
            .iter()
            .position(|p| matches!(p.kind, ParamKind::TileSet { .. }))
            .expect("a body has exactly one tile-set parameter")
    }

    /// Whether the body reads index `role` anywhere (a parameter it declares but never reads
    /// does not count).
    pub fn reads(&self, role: IndexRole) -> bool {
        self.roles.contains(&role)
            && self
                .block
                .any(&mut |_| false, &mut |e| e.kind == ExprKind::Index(role))
    }

    /// The epilogue as a body of its own: the body's parameters and then the reduced value (and
    /// the old output value) as scalars, the body's reduction and guards, so that `codegen`
    /// emits it and [`Proofs`] bound its accesses as they do the body's.
    pub fn epilogue_body(&self) -> Option<Body> {
        let e = self.epilogue.as_ref()?;
        let (ty, _) = self.reduce?;
        let mut params = self.params.clone();
        params.push(Param {
            name: EPILOGUE_VALUE.into(),
            kind: ParamKind::Scalar(ty),
        });
        if e.reads_old {
            params.push(Param {
                name: EPILOGUE_OLD.into(),
                kind: ParamKind::Scalar(ty),
            });
        }
        Some(Body {
            name: self.name.clone(),
            params,
            roles: e.roles.clone(),
            locals: e.locals.clone(),
            block: e.block.clone(),
            reduce: self.reduce,
            out_storage: self.out_storage,
            guards: self.guards,
            epilogue: None,
        })
    }

    /// Whether the body only computes its value: no store, atomic or queue push anywhere. Such
    /// a body may be evaluated for an atom whose value is then thrown away.
    pub fn is_pure(&self) -> bool {
        !self.block.any(
            &mut |s| matches!(s, Stmt::Store { .. } | Stmt::Push { .. }),
            &mut |e| matches!(e.kind, ExprKind::Atomic { .. }),
        )
    }
}

impl Block {
    /// Whether `stmt` holds for a statement or `expr` for an expression anywhere in the block,
    /// nested blocks and sub-expressions included (statements before their expressions, each
    /// expression before its operands).
    pub fn any(
        &self,
        stmt: &mut dyn FnMut(&Stmt) -> bool,
        expr: &mut dyn FnMut(&Expr) -> bool,
    ) -> bool {
        self.stmts.iter().any(|s| {
            stmt(s)
                || match s {
                    Stmt::Assign { value, .. } | Stmt::Expr(value) | Stmt::Push { value, .. } => {
                        value.any(stmt, expr)
                    }
                    Stmt::Store { index, value, .. } => {
                        index.any(stmt, expr) || value.any(stmt, expr)
                    }
                    Stmt::If { cond, then, els } => {
                        cond.any(stmt, expr) || then.any(stmt, expr) || els.any(stmt, expr)
                    }
                    Stmt::For {
                        start, end, body, ..
                    } => start.any(stmt, expr) || end.any(stmt, expr) || body.any(stmt, expr),
                    Stmt::Loop { body } => body.any(stmt, expr),
                    Stmt::Break(_) | Stmt::Continue(_) => false,
                    Stmt::Return(value) => value.as_ref().is_some_and(|v| v.any(stmt, expr)),
                }
        }) || self.value.as_deref().is_some_and(|v| v.any(stmt, expr))
    }
}

/// Which of the body's accesses a kernel built with [`crate::Options::checked`] tests.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Guards {
    /// Every load, store and atomic, each reporting its own index (the attribute's
    /// `checked = true`).
    #[default]
    Every,
    /// Only those that [`Proofs`] cannot show in bounds: the launcher checks the body's
    /// [`Body::gathers`] once on the host and the tile set's upload validated its indices, so
    /// the others cannot leave their arrays. `lanes` is the scalar parameter holding the lane
    /// count (index into `Body::params`), which bounds `x[i * lanes + lane]`.
    Unproven { lanes: Option<usize> },
}

/// A slice whose every access [`Proofs`] bounds by one comparison at launch: the body indexes
/// it with a tile set's own index array at the atom (`x[a.col_indices[nz] as usize]`, directly
/// or through a local assigned once from it), whose entries the upload validated against the
/// column (or row) count, with the tile index, or with the atom index; each possibly as
/// `i * lanes + lane`. `slice.len() >= count × lanes` then covers all of them on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather {
    /// The slice (index into `Body::params`).
    pub slice: usize,
    /// The tile set (index into `Body::params`).
    pub tile_set: usize,
    /// What bounds the index.
    pub bound: GatherBound,
    /// `Some(p)` when the index is `i * lanes + lane` with the lane count in scalar parameter
    /// `p`: the slice must then hold the count times `lanes`.
    pub lanes: Option<usize>,
}

/// The tile-set count an index of a [`Gather`] stays below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherBound {
    /// `col_indices` entries: below `num_cols`.
    Columns,
    /// `row_indices` entries: below `num_rows`.
    Rows,
    /// The tile index: below the tile count.
    Tiles,
    /// The atom index (and the rank, which is at most the atom): below the atom count.
    Atoms,
}

/// What an index expression is known to stay below: a count, times the lanes plus the lane
/// when `scaled`.
type Bounded = (GatherBound, bool);

/// The proofs that an access stays in bounds, for every thread of every schedule: the index is
/// built from values the schedules and the upload bound (the atom, the tile, the rank, a tile
/// set's index array read at the atom) only through casts that cannot grow a value (between
/// `u32` and `u64`), locals assigned once, and `i * lanes + lane`. Nothing else is proven:
/// `x[col + 1]` may be `x[num_cols]`, and a loop variable or a reassigned local may hold
/// anything.
#[derive(Clone, Debug)]
pub struct Proofs {
    tile_set: usize,
    lanes: Option<usize>,
    locals: Vec<(LocalId, Bounded)>,
}

impl Proofs {
    /// Whether `array[index]` stays in bounds once the host checked the body's gathers: the
    /// tile set's atom arrays at a bounded atom, its offsets at the tile or the tile plus one
    /// (they hold one more entry than there are tiles), a slice at any bounded index.
    pub fn proven(&self, array: ArrayRef, index: &Expr) -> bool {
        match array {
            ArrayRef::Param(slice) => self.gather(ArrayRef::Param(slice), index).is_some(),
            ArrayRef::Field(_, CsrField::Values | CsrField::ColIndices | CsrField::RowIndices) => {
                self.bound(index) == Some((GatherBound::Atoms, false))
            }
            ArrayRef::Field(_, CsrField::RowOffsets | CsrField::ColOffsets) => {
                self.bound(index) == Some((GatherBound::Tiles, false)) || self.tile_plus_one(index)
            }
            ArrayRef::Field(_, CsrField::NumRows | CsrField::NumCols) => false,
        }
    }

    /// The host check that proves `array[index]`, when `array` is a slice and the index bounded.
    fn gather(&self, array: ArrayRef, index: &Expr) -> Option<Gather> {
        let ArrayRef::Param(slice) = array else {
            return None;
        };
        let (bound, scaled) = self.bound(index)?;
        Some(Gather {
            slice,
            tile_set: self.tile_set,
            bound,
            lanes: if scaled { self.lanes } else { None },
        })
    }

    /// What `index` stays below, if anything.
    fn bound(&self, index: &Expr) -> Option<Bounded> {
        let index = strip_widening(index);
        match &index.kind {
            ExprKind::Index(IndexRole::Tile) => Some((GatherBound::Tiles, false)),
            ExprKind::Index(IndexRole::Atom | IndexRole::Rank) => Some((GatherBound::Atoms, false)),
            ExprKind::Load {
                array: ArrayRef::Field(p, field),
                index,
            } if *p == self.tile_set && self.bound(index) == Some((GatherBound::Atoms, false)) => {
                match field {
                    CsrField::ColIndices => Some((GatherBound::Columns, false)),
                    CsrField::RowIndices => Some((GatherBound::Rows, false)),
                    _ => None,
                }
            }
            ExprKind::Local(l) => self.locals.iter().find(|(id, _)| id == l).map(|&(_, b)| b),
            ExprKind::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } => {
                let is_lane = |e: &Expr| matches!(e.kind, ExprKind::Index(IndexRole::Lane));
                let product = match (is_lane(lhs), is_lane(rhs)) {
                    (true, false) => rhs,
                    (false, true) => lhs,
                    _ => return None,
                };
                self.times_lanes(product).map(|b| (b, true))
            }
            _ => None,
        }
    }

    /// `i * lanes` or `lanes * i` with `i` bounded (unscaled): what `i` stays below.
    fn times_lanes(&self, e: &Expr) -> Option<GatherBound> {
        let lanes = self.lanes?;
        let ExprKind::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } = &e.kind
        else {
            return None;
        };
        let is_lanes = |e: &Expr| matches!(e.kind, ExprKind::Scalar(p) if p == lanes);
        let factor = match (is_lanes(lhs), is_lanes(rhs)) {
            (true, false) => rhs,
            (false, true) => lhs,
            _ => return None,
        };
        match self.bound(factor)? {
            (bound, false) => Some(bound),
            (_, true) => None,
        }
    }

    /// `tile + 1` or `1 + tile`, with the tile bounded by the tile count.
    fn tile_plus_one(&self, index: &Expr) -> bool {
        let ExprKind::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } = &strip_widening(index).kind
        else {
            return false;
        };
        let one = |e: &Expr| matches!(e.kind, ExprKind::Lit(Lit::Int(1)));
        let tile = |e: &Expr| self.bound(e) == Some((GatherBound::Tiles, false));
        (tile(lhs) && one(rhs)) || (one(lhs) && tile(rhs))
    }
}

/// `e` under its casts between `u32` and `u64`, none of which makes a value larger (a
/// narrowing cast truncates, which only lowers it). Other casts stop here: `i as i32 as usize`
/// turns a large `u32` into a huge `usize`, and a float may round up.
fn strip_widening(mut e: &Expr) -> &Expr {
    let unsigned = |t: Ty| matches!(t, Ty::U32 | Ty::U64);
    while let ExprKind::Cast { arg } = &e.kind {
        if !(unsigned(e.ty) && unsigned(arg.ty)) {
            break;
        }
        e = arg;
    }
    e
}

impl Body {
    /// The proofs of this body's accesses under `guards` (no local is bounded under
    /// [`Guards::Every`], whose kernels test every access anyway).
    pub fn proofs(&self, guards: Guards) -> Proofs {
        let lanes = match guards {
            Guards::Every => None,
            Guards::Unproven { lanes } => lanes,
        };
        let mut proofs = Proofs {
            tile_set: self.tile_set(),
            lanes,
            locals: Vec::new(),
        };
        // A local is bounded when it is assigned exactly once (so every read sees that value:
        // rustc rejects a read before it), from a bounded value; in program order, so a local
        // may be bounded through an earlier one.
        let mut assignments: Vec<(LocalId, Option<Expr>)> = Vec::new();
        self.block.any(
            &mut |s| {
                let (local, value) = match s {
                    Stmt::Assign { local, value } => (local, Some(value.clone())),
                    Stmt::For { var, .. } => (var, None),
                    _ => return false,
                };
                match assignments.iter_mut().find(|(l, _)| l == local) {
                    Some(seen) => seen.1 = None,
                    None => assignments.push((*local, value)),
                }
                false
            },
            &mut |_| false,
        );
        if matches!(guards, Guards::Unproven { .. }) {
            for (local, value) in assignments {
                if let Some(bound) = value.and_then(|v| proofs.bound(&v)) {
                    proofs.locals.push((local, bound));
                }
            }
        }
        proofs
    }

    /// The host checks the kernels built under `guards` rely on, each once: loads and atomics,
    /// then stores. None under [`Guards::Every`], whose kernels test every access and report its
    /// index.
    pub fn gathers(&self, guards: Guards) -> Vec<Gather> {
        if guards == Guards::Every {
            return Vec::new();
        }
        let proofs = self.proofs(guards);
        let mut out = self.accesses(|array, index| proofs.gather(*array, index));
        for g in self
            .epilogue_body()
            .map_or_else(Vec::new, |e| e.gathers(guards))
        {
            if !out.contains(&g) {
                out.push(g);
            }
        }
        out
    }

    /// The parameters (indices into `Body::params`, each once: loads and atomics, then stores)
    /// that some load, store or atomic indexes without a proof under `guards`: a kernel that
    /// runs the body must test those accesses.
    pub fn unproven_params(&self, guards: Guards) -> Vec<usize> {
        let proofs = self.proofs(guards);
        let mut out = self.accesses(|array, index| {
            let proven = guards != Guards::Every && proofs.proven(*array, index);
            match *array {
                ArrayRef::Param(p) | ArrayRef::Field(p, _) => (!proven).then_some(p),
            }
        });
        for p in self
            .epilogue_body()
            .map_or_else(Vec::new, |e| e.unproven_params(guards))
        {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// What `f` says of each load, store and atomic `array[index]`, each value once: loads and
    /// atomics first, then stores.
    fn accesses<T: PartialEq>(&self, f: impl Fn(&ArrayRef, &Expr) -> Option<T>) -> Vec<T> {
        let (mut stored, mut read) = (Vec::new(), Vec::new());
        self.block.any(
            &mut |s| {
                if let Stmt::Store { array, index, .. } = s {
                    stored.extend(f(array, index));
                }
                false
            },
            &mut |e| {
                if let ExprKind::Load { array, index } | ExprKind::Atomic { array, index, .. } =
                    &e.kind
                {
                    read.extend(f(array, index));
                }
                false
            },
        );
        let mut out: Vec<T> = Vec::new();
        for x in read.into_iter().chain(stored) {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }
}

impl Expr {
    /// [`Block::any`] for an expression and everything inside it.
    pub fn any(
        &self,
        stmt: &mut dyn FnMut(&Stmt) -> bool,
        expr: &mut dyn FnMut(&Expr) -> bool,
    ) -> bool {
        if expr(self) {
            return true;
        }
        match &self.kind {
            ExprKind::Lit(_)
            | ExprKind::Local(_)
            | ExprKind::Index(_)
            | ExprKind::Scalar(_)
            | ExprKind::Len(_)
            | ExprKind::TileSetScalar(_) => false,
            ExprKind::Load { index, .. } => index.any(stmt, expr),
            ExprKind::Unary { arg, .. } | ExprKind::Cast { arg } => arg.any(stmt, expr),
            ExprKind::Binary { lhs, rhs, .. } => lhs.any(stmt, expr) || rhs.any(stmt, expr),
            ExprKind::Method { args, .. } => args.iter().any(|a| a.any(stmt, expr)),
            ExprKind::Atomic { index, args, .. } => {
                index.any(stmt, expr) || args.iter().any(|a| a.any(stmt, expr))
            }
            ExprKind::If { cond, then, els } => {
                cond.any(stmt, expr) || then.any(stmt, expr) || els.any(stmt, expr)
            }
            ExprKind::Block(block) => block.any(stmt, expr),
        }
    }
}
