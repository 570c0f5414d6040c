//! The typed tree: the kernel body as `check` leaves it, built in its one walk over the syntax.
//! Names are resolved (locals to their `LocalId`, parameters to their place in `Sig::params`,
//! `T::MAX` and the like to literals), assignments and calls are told apart, and every
//! expression carries its type as a unification variable that [`Typed::ty`] resolves. `lower`
//! converts this tree to lb-ptx's body IR and never looks at the syntax again.
//!
//! Every mistake is reported by `check`, with the span of the syntax it is about, so the tree
//! keeps no spans: nothing after it has a user's mistake to point at.

use lb_ptx::body::{AtomicOp, BinaryOp, CsrField, Lit, LocalId, Method, UnaryOp};

use crate::types::STy;

/// A type variable of `check`'s inference.
pub type TyVar = usize;

/// The checked body: its statements, the types of its locals, and every type variable's type.
#[derive(Debug)]
pub struct Typed {
    pub stmts: Vec<TStmt>,
    /// Indexed by `LocalId`.
    pub locals: Vec<STy>,
    /// Indexed by `TyVar`; `None` for a variable poisoned by an error (none are, once `check`
    /// has succeeded).
    pub types: Vec<Option<STy>>,
}

impl Typed {
    pub fn ty(&self, v: TyVar) -> Option<STy> {
        self.types.get(v).copied().flatten()
    }
}

/// What the body's code may index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Array {
    /// A slice parameter (index into `Sig::params`).
    Slice { param: usize, mutable: bool },
    /// An array or scalar field of the tile set (index into `Sig::params`).
    Field { param: usize, field: CsrField },
}

#[derive(Debug)]
pub struct TExpr {
    pub kind: TExprKind,
    pub ty: TyVar,
}

#[derive(Debug)]
pub enum TExprKind {
    /// A literal or an associated constant (`f32::INFINITY`). An integer token typed as a float
    /// (`1f32`) is still `Lit::Int` here: its type decides.
    Lit(Lit),
    Local(LocalId),
    /// A scalar or index-role parameter (index into `Sig::params`).
    Param(usize),
    Unary {
        op: UnaryOp,
        arg: Box<TExpr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<TExpr>,
        rhs: Box<TExpr>,
    },
    /// `arg as T`, `T` being the expression's type.
    Cast(Box<TExpr>),
    Load {
        array: Array,
        index: Box<TExpr>,
    },
    /// `a.num_rows`, `a.num_cols` (always an `Array::Field`).
    TileSetScalar(Array),
    /// `s.len()` of a slice parameter.
    Len(Array),
    /// The receiver first, then the arguments.
    Method {
        method: Method,
        args: Vec<TExpr>,
    },
    Atomic {
        op: AtomicOp,
        array: Array,
        index: Box<TExpr>,
        args: Vec<TExpr>,
    },
    If {
        cond: Box<TExpr>,
        then: TBlock,
        els: TBlock,
    },
    /// Statements, then a value: an inlined helper function, a `match` used as a value.
    Block(TBlock),
    /// Stands for a part already reported as an error, so the checker can go on looking at the
    /// rest of the expression (the tree of a body with errors is never lowered).
    Error,
}

/// A block used as a value: statements, then its value.
#[derive(Debug)]
pub struct TBlock {
    pub stmts: Vec<TStmt>,
    pub value: Box<TExpr>,
}

/// Where an assignment stores.
#[derive(Debug)]
pub enum Place {
    Local(LocalId),
    Element {
        array: Array,
        index: TExpr,
        elem: STy,
    },
}

/// A statement. Nested blocks are flattened into the enclosing list: `check` resolved their
/// scoping (a shadowing `let` gets a new local).
#[derive(Debug)]
pub enum TStmt {
    /// `place = value`, `place op= value`, and a `let` (an assignment to its new local).
    Assign {
        place: Place,
        op: Option<BinaryOp>,
        value: TExpr,
    },
    /// `else if` is an `else` holding one `If`.
    If {
        cond: TExpr,
        then: Vec<TStmt>,
        els: Vec<TStmt>,
    },
    For {
        var: LocalId,
        start: TExpr,
        end: TExpr,
        /// `a..=b` rather than `a..b`.
        inclusive: bool,
        body: Vec<TStmt>,
    },
    /// `loop { body }`, and `while cond { body }` as a loop whose body starts with
    /// `if !cond { break }`.
    Loop {
        body: Vec<TStmt>,
    },
    /// `break` / `continue` of the loop `n` levels out (0 the innermost `for` or loop).
    Break(u32),
    Continue(u32),
    /// `queue.push(value)` (index into `Sig::params`).
    Push {
        queue: usize,
        value: TExpr,
    },
    /// `return`, and the function's tail expression with `reduce`.
    Return(Option<TExpr>),
    /// An expression evaluated for its effect (an atomic), or `let _ = ...`.
    Expr(TExpr),
}
