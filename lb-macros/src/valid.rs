//! The kernel language's rules, apart from inference: which syntax, operators, methods,
//! intrinsics, constants and tile-set fields a body may use, what each operator requires of its
//! operands, and the message for everything else (`check` walks the body and applies them).

use lb_ptx::body::{AtomicOp, BinaryOp, CsrField, Lit, Method, TileSetKind};
use syn::{BinOp, Expr};

use crate::types::STy;

/// The fields of a tile set of `kind`, for messages.
pub(crate) fn fields_of(kind: TileSetKind) -> &'static str {
    match kind {
        TileSetKind::Csr => "`values`, `col_indices`, `row_offsets`, `num_rows`, `num_cols`",
        TileSetKind::Csc => "`values`, `row_indices`, `col_offsets`, `num_rows`, `num_cols`",
        TileSetKind::Coo => "`values`, `row_indices`, `col_indices`, `num_rows`, `num_cols`",
        TileSetKind::Tiles => "`tile_offsets`, `num_tiles`",
    }
}

/// The array fields of a tile set of `kind`: name, field, and whether its elements are the
/// values (`None`) or an index type.
pub(crate) fn arrays_of(kind: TileSetKind) -> &'static [(&'static str, CsrField, Option<STy>)] {
    const VALUES: (&str, CsrField, Option<STy>) = ("values", CsrField::Values, None);
    match kind {
        TileSetKind::Csr => &[
            VALUES,
            ("col_indices", CsrField::ColIndices, Some(STy::U32)),
            ("row_offsets", CsrField::RowOffsets, Some(STy::Usize)),
        ],
        TileSetKind::Csc => &[
            VALUES,
            ("row_indices", CsrField::RowIndices, Some(STy::U32)),
            ("col_offsets", CsrField::ColOffsets, Some(STy::Usize)),
        ],
        TileSetKind::Coo => &[
            VALUES,
            ("row_indices", CsrField::RowIndices, Some(STy::U32)),
            ("col_indices", CsrField::ColIndices, Some(STy::U32)),
        ],
        TileSetKind::Tiles => &[("tile_offsets", CsrField::RowOffsets, Some(STy::Usize))],
    }
}

/// The scalar fields of a tile set of `kind`: name and field.
pub(crate) fn scalars_of(kind: TileSetKind) -> &'static [(&'static str, CsrField)] {
    match kind {
        TileSetKind::Tiles => &[("num_tiles", CsrField::NumRows)],
        _ => &[
            ("num_rows", CsrField::NumRows),
            ("num_cols", CsrField::NumCols),
        ],
    }
}

/// The message for `push` on anything but a queue parameter.
pub(crate) const PUSH_ONLY_ON_QUEUE: &str = "`push` is only defined on a `&mut Queue` parameter";

/// The intrinsics a body may call.
pub(crate) const ATOMICS: [&str; 5] = [
    "atomic_add",
    "atomic_min",
    "atomic_max",
    "atomic_exch",
    "atomic_cas",
];

/// Requirements of operators, checked once every variable is decided.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Req {
    Numeric,
    Int,
    IntOrBool,
    Signed,
}

/// How an operator is type-checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum OpClass {
    Arith,
    Bit,
    Shift,
    Eq,
    Ord,
    Logic,
}

impl OpClass {
    pub(crate) fn req(self) -> Req {
        match self {
            OpClass::Bit => Req::IntOrBool,
            OpClass::Shift => Req::Int,
            _ => Req::Numeric,
        }
    }

    pub(crate) fn what(self) -> &'static str {
        match self {
            OpClass::Bit => "a bit operation",
            OpClass::Shift => "a shift",
            _ => "arithmetic",
        }
    }
}

/// What the operands of an arithmetic or bit operator must be, and the operation's name for the
/// message: `%` takes integers only, since PTX has no float remainder (Rust has one).
pub(crate) fn requirement(class: OpClass, op: Option<&BinOp>) -> (Req, &'static str) {
    match op {
        Some(BinOp::Rem(_) | BinOp::RemAssign(_)) => {
            (Req::Int, "the remainder `%` (PTX has no float remainder)")
        }
        _ => (class.req(), class.what()),
    }
}

pub(crate) fn op_class(op: &BinOp) -> OpClass {
    match op {
        BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_) => {
            OpClass::Arith
        }
        BinOp::BitAnd(_) | BinOp::BitOr(_) | BinOp::BitXor(_) => OpClass::Bit,
        BinOp::Shl(_) | BinOp::Shr(_) => OpClass::Shift,
        BinOp::Eq(_) | BinOp::Ne(_) => OpClass::Eq,
        BinOp::And(_) | BinOp::Or(_) => OpClass::Logic,
        _ => OpClass::Ord,
    }
}

/// The class of a compound assignment operator (`+=` → `Arith`), or `None` for other operators.
pub(crate) fn compound_op(op: &BinOp) -> Option<OpClass> {
    match op {
        BinOp::AddAssign(_)
        | BinOp::SubAssign(_)
        | BinOp::MulAssign(_)
        | BinOp::DivAssign(_)
        | BinOp::RemAssign(_) => Some(OpClass::Arith),
        BinOp::BitAndAssign(_) | BinOp::BitOrAssign(_) | BinOp::BitXorAssign(_) => {
            Some(OpClass::Bit)
        }
        BinOp::ShlAssign(_) | BinOp::ShrAssign(_) => Some(OpClass::Shift),
        _ => None,
    }
}

/// A scalar type written in a cast or an annotation.
pub(crate) fn scalar_type(ty: &syn::Type) -> Option<STy> {
    match ty {
        syn::Type::Path(tp) if tp.qself.is_none() => tp
            .path
            .get_ident()
            .and_then(|i| STy::from_name(&i.to_string())),
        syn::Type::Paren(p) => scalar_type(&p.elem),
        syn::Type::Group(g) => scalar_type(&g.elem),
        _ => None,
    }
}

pub(crate) fn assoc_const(t: STy, name: &str) -> Option<Lit> {
    Some(match (t, name) {
        (STy::I32, "MIN") => Lit::Int(i32::MIN.into()),
        (STy::I32, "MAX") => Lit::Int(i32::MAX.into()),
        (STy::U32, "MIN") | (STy::U64, "MIN") | (STy::Usize, "MIN") => Lit::Int(0),
        (STy::U32, "MAX") => Lit::Int(u32::MAX.into()),
        (STy::I64, "MIN") => Lit::Int(i64::MIN.into()),
        (STy::I64, "MAX") => Lit::Int(i64::MAX.into()),
        // `usize` is 64-bit on the GPU.
        (STy::U64, "MAX") | (STy::Usize, "MAX") => Lit::Int(u64::MAX.into()),
        (STy::F32, "MIN") => Lit::Float(f32::MIN.into()),
        (STy::F32, "MAX") => Lit::Float(f32::MAX.into()),
        (STy::F32, "INFINITY") | (STy::F64, "INFINITY") => Lit::Float(f64::INFINITY),
        (STy::F32, "NEG_INFINITY") | (STy::F64, "NEG_INFINITY") => Lit::Float(f64::NEG_INFINITY),
        (STy::F64, "MIN") => Lit::Float(f64::MIN),
        (STy::F64, "MAX") => Lit::Float(f64::MAX),
        _ => return None,
    })
}

pub(crate) const SCALARS: &str = "bool, i32, u32, i64, u64, usize, f32, f64";

pub(crate) const MACRO_MSG: &str = "macros are not supported in a kernel body (its GPU code is generated from the syntax): write the expression out";

pub(crate) const INDEXABLE_MSG: &str =
    "only slice parameters and the tile set's arrays can be indexed";

pub(crate) const ASSIGN_TARGET_MSG: &str =
    "a kernel body can assign to a local variable or a slice element (`s[i] = v`) only";

/// The message for a construct outside the kernel subset: what it is and what to write instead.
pub(crate) fn unsupported(e: &Expr) -> &'static str {
    match e {
        Expr::While(_) | Expr::Loop(_) => "a loop cannot be used as a value in a kernel body: write it as a statement and assign the value to a local declared before it",
        Expr::Closure(_) => "closures are not supported in a kernel body: write the computation inline",
        Expr::Macro(_) => MACRO_MSG,
        Expr::Tuple(_) => "tuples are not supported in a kernel body: use one `let` per value",
        Expr::Struct(_) => "struct literals are not supported in a kernel body: use one `let` per field",
        Expr::Array(_) | Expr::Repeat(_) => "arrays are not supported in a kernel body: use scalar locals, or index a slice parameter",
        Expr::Reference(_) => "references are only allowed as the first argument of an atomic in a kernel body: `atomic_add(&mut s[i], v)`",
        Expr::Try(_) => "`?` is not supported in a kernel body: there are no `Result`s on the GPU",
        Expr::Unsafe(_) => "`unsafe` blocks are not supported in a kernel body: nothing in it needs `unsafe`",
        Expr::Async(_) | Expr::Await(_) => "`async` / `.await` are not supported in a kernel body",
        Expr::Break(_) | Expr::Continue(_) => "`break` and `continue` are statements in a kernel body: write them in a block (`if c { break; }`)",
        Expr::Range(_) => "ranges are only supported as the bounds of a `for` loop in a kernel body",
        Expr::Let(_) => "`let` in expressions (`if let`, `while let`) is not supported in a kernel body: use `if` with a comparison",
        Expr::Block(_) => "a block cannot be used as a value in a kernel body: use `if` / `else`, or compute the value with `let` first",
        Expr::Return(_) => "`return` can only be a statement in a kernel body: `return x;`",
        Expr::ForLoop(_) | Expr::If(_) => "this statement cannot be used as a value in a kernel body",
        _ => "this expression is not supported in a kernel body",
    }
}

/// The atomic intrinsic of this name (one of [`ATOMICS`]).
pub(crate) fn atomic_op(name: &str) -> Option<AtomicOp> {
    Some(match name {
        "atomic_add" => AtomicOp::Add,
        "atomic_min" => AtomicOp::Min,
        "atomic_max" => AtomicOp::Max,
        "atomic_exch" => AtomicOp::Exch,
        "atomic_cas" => AtomicOp::Cas,
        _ => return None,
    })
}

/// The body IR's operator for a binary operator (`None` for the compound assignments).
pub(crate) fn binop(op: &BinOp) -> Option<BinaryOp> {
    Some(match op {
        BinOp::Add(_) => BinaryOp::Add,
        BinOp::Sub(_) => BinaryOp::Sub,
        BinOp::Mul(_) => BinaryOp::Mul,
        BinOp::Div(_) => BinaryOp::Div,
        BinOp::Rem(_) => BinaryOp::Rem,
        BinOp::BitAnd(_) => BinaryOp::BitAnd,
        BinOp::BitOr(_) => BinaryOp::BitOr,
        BinOp::BitXor(_) => BinaryOp::BitXor,
        BinOp::Shl(_) => BinaryOp::Shl,
        BinOp::Shr(_) => BinaryOp::Shr,
        BinOp::Eq(_) => BinaryOp::Eq,
        BinOp::Ne(_) => BinaryOp::Ne,
        BinOp::Lt(_) => BinaryOp::Lt,
        BinOp::Le(_) => BinaryOp::Le,
        BinOp::Gt(_) => BinaryOp::Gt,
        BinOp::Ge(_) => BinaryOp::Ge,
        BinOp::And(_) => BinaryOp::And,
        BinOp::Or(_) => BinaryOp::Or,
        _ => return None,
    })
}

/// The operator of a compound assignment (`+=` → `Add`).
pub(crate) fn compound(op: &BinOp) -> Option<BinaryOp> {
    Some(match op {
        BinOp::AddAssign(_) => BinaryOp::Add,
        BinOp::SubAssign(_) => BinaryOp::Sub,
        BinOp::MulAssign(_) => BinaryOp::Mul,
        BinOp::DivAssign(_) => BinaryOp::Div,
        BinOp::RemAssign(_) => BinaryOp::Rem,
        BinOp::BitAndAssign(_) => BinaryOp::BitAnd,
        BinOp::BitOrAssign(_) => BinaryOp::BitOr,
        BinOp::BitXorAssign(_) => BinaryOp::BitXor,
        BinOp::ShlAssign(_) => BinaryOp::Shl,
        BinOp::ShrAssign(_) => BinaryOp::Shr,
        _ => return None,
    })
}

/// The methods a body may call, for messages.
pub(crate) const METHODS: &str = "`min`, `max`, `abs`, `sqrt`, `mul_add`, `clamp`, `floor`, \
    `ceil`, `round`, `trunc`, `powi`, `exp`, `exp2`, `ln`, `log2`, `powf`, `sin`, `cos`, `tanh` \
    (floats), `pow`, `leading_zeros`, `trailing_zeros`, `count_ones` (integers)";

/// The method of this name and how many arguments it takes besides the receiver; `None` as
/// the method for `len`, which is not a [`Method`] but a slice's length.
pub(crate) fn method_named(name: &str) -> Option<(Option<Method>, usize)> {
    let m = match name {
        "len" => return Some((None, 0)),
        "abs" => Method::Abs,
        "sqrt" => Method::Sqrt,
        "min" => Method::Min,
        "max" => Method::Max,
        "mul_add" => Method::MulAdd,
        "clamp" => Method::Clamp,
        "floor" => Method::Floor,
        "ceil" => Method::Ceil,
        "round" => Method::Round,
        "trunc" => Method::Trunc,
        "powi" => Method::Powi,
        "exp" => Method::Exp,
        "exp2" => Method::Exp2,
        "ln" => Method::Ln,
        "log2" => Method::Log2,
        "powf" => Method::Powf,
        "sin" => Method::Sin,
        "cos" => Method::Cos,
        "tanh" => Method::Tanh,
        "pow" => Method::Pow,
        "leading_zeros" => Method::LeadingZeros,
        "trailing_zeros" => Method::TrailingZeros,
        "count_ones" => Method::CountOnes,
        _ => return None,
    };
    Some((Some(m), m.arity() - 1))
}

/// Whether `method` exists on a receiver of type `t` (as in Rust's std).
pub(crate) fn method_accepts(method: Method, t: STy) -> bool {
    match method {
        Method::Min | Method::Max | Method::Clamp => t != STy::Bool,
        Method::Abs => t.is_signed(),
        Method::Pow | Method::LeadingZeros | Method::TrailingZeros | Method::CountOnes => {
            t.is_int()
        }
        _ => t.is_float(),
    }
}

/// The receiver types of `method`, for the message when it is called on another.
pub(crate) fn method_types(method: Method) -> &'static str {
    match method {
        Method::Min | Method::Max | Method::Clamp => "",
        Method::Abs => ": it is defined on i32, i64, f32, f64",
        Method::Pow | Method::LeadingZeros | Method::TrailingZeros | Method::CountOnes => {
            ": it is defined on the integer types"
        }
        _ => ": it is defined on f32, f64",
    }
}

/// The type of `method`'s arguments when it is not the receiver's: `powi`'s `i32`, `pow`'s
/// `u32`.
pub(crate) fn method_arg(method: Method) -> Option<STy> {
    match method {
        Method::Powi => Some(STy::I32),
        Method::Pow => Some(STy::U32),
        _ => None,
    }
}
