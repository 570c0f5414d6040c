//! Hand-built bodies shared by the codegen tests: what the macro would lower a few example
//! functions to.

// Each test crate that includes this module uses a different subset of it.
#![allow(dead_code)]

use lb_ptx::body::*;

pub fn e(ty: Ty, kind: ExprKind) -> Expr {
    Expr { ty, kind }
}

pub fn local(ty: Ty, id: LocalId) -> Expr {
    e(ty, ExprKind::Local(id))
}

pub fn index(role: IndexRole) -> Expr {
    e(Ty::U64, ExprKind::Index(role))
}

pub fn int(ty: Ty, v: i128) -> Expr {
    e(ty, ExprKind::Lit(Lit::Int(v)))
}

pub fn float(ty: Ty, v: f64) -> Expr {
    e(ty, ExprKind::Lit(Lit::Float(v)))
}

pub fn load(ty: Ty, array: ArrayRef, i: Expr) -> Expr {
    e(
        ty,
        ExprKind::Load {
            array,
            index: Box::new(i),
        },
    )
}

pub fn bin(op: BinaryOp, ty: Ty, l: Expr, r: Expr) -> Expr {
    e(
        ty,
        ExprKind::Binary {
            op,
            lhs: Box::new(l),
            rhs: Box::new(r),
        },
    )
}

pub fn cast(ty: Ty, arg: Expr) -> Expr {
    e(ty, ExprKind::Cast { arg: Box::new(arg) })
}

pub fn method(m: Method, ty: Ty, args: Vec<Expr>) -> Expr {
    e(ty, ExprKind::Method { method: m, args })
}

pub fn atomic(op: AtomicOp, ty: Ty, array: ArrayRef, i: Expr, args: Vec<Expr>) -> Expr {
    e(
        ty,
        ExprKind::Atomic {
            op,
            array,
            index: Box::new(i),
            args,
        },
    )
}

pub fn assign(local: LocalId, value: Expr) -> Stmt {
    Stmt::Assign { local, value }
}

pub fn param(name: &str, kind: ParamKind) -> Param {
    Param {
        name: name.into(),
        kind,
    }
}

pub fn csr(name: &str, value: Ty) -> Param {
    param(
        name,
        ParamKind::TileSet {
            kind: TileSetKind::Csr,
            value,
        },
    )
}

pub fn slice(name: &str, elem: Ty, mutable: bool) -> Param {
    param(name, ParamKind::Slice { elem, mutable })
}

/// `fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row, #[atom] nz) -> f32
/// { a.values[nz] * x[a.col_indices[nz] as usize] }`, reduce = sum.
pub fn spmv() -> Body {
    let col = load(
        Ty::U32,
        ArrayRef::Field(0, CsrField::ColIndices),
        index(IndexRole::Atom),
    );
    let value = bin(
        BinaryOp::Mul,
        Ty::F32,
        load(
            Ty::F32,
            ArrayRef::Field(0, CsrField::Values),
            index(IndexRole::Atom),
        ),
        load(Ty::F32, ArrayRef::Param(1), cast(Ty::U64, col)),
    );
    Body {
        name: "spmv".into(),
        params: vec![csr("a", Ty::F32), slice("x", Ty::F32, false)],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![],
        block: Block {
            stmts: vec![],
            value: Some(Box::new(value)),
        },
        reduce: Some((Ty::F32, Reduce::Sum)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// `fn math64(a: &Csr<f64>, #[atom] nz) -> f64 { let v = a.values[nz]; v.exp() + v.exp2() +
/// v.ln() + v.log2() + v.powf(v) + v.sin() + v.cos() + v.tanh() }`, reduce = sum: every `f64`
/// transcendental function, in software.
pub fn math64() -> Body {
    let v = || {
        load(
            Ty::F64,
            ArrayRef::Field(0, CsrField::Values),
            index(IndexRole::Atom),
        )
    };
    let terms = [
        method(Method::Exp, Ty::F64, vec![v()]),
        method(Method::Exp2, Ty::F64, vec![v()]),
        method(Method::Ln, Ty::F64, vec![v()]),
        method(Method::Log2, Ty::F64, vec![v()]),
        method(Method::Powf, Ty::F64, vec![v(), v()]),
        method(Method::Sin, Ty::F64, vec![v()]),
        method(Method::Cos, Ty::F64, vec![v()]),
        method(Method::Tanh, Ty::F64, vec![v()]),
    ];
    let value = terms
        .into_iter()
        .reduce(|acc, t| bin(BinaryOp::Add, Ty::F64, acc, t))
        .expect("terms");
    Body {
        name: "math64".into(),
        params: vec![csr("a", Ty::F64)],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![],
        block: Block {
            stmts: vec![],
            value: Some(Box::new(value)),
        },
        reduce: Some((Ty::F64, Reduce::Sum)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// `fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[tile] row, #[atom] nz, #[lane] j) -> f32
/// { a.values[nz] * b[a.col_indices[nz] as usize * k + j] }`, reduce = sum, lanes = k.
pub fn spmm() -> Body {
    let col = cast(
        Ty::U64,
        load(
            Ty::U32,
            ArrayRef::Field(0, CsrField::ColIndices),
            index(IndexRole::Atom),
        ),
    );
    let at = bin(
        BinaryOp::Add,
        Ty::U64,
        bin(BinaryOp::Mul, Ty::U64, col, e(Ty::U64, ExprKind::Scalar(2))),
        index(IndexRole::Lane),
    );
    let value = bin(
        BinaryOp::Mul,
        Ty::F32,
        load(
            Ty::F32,
            ArrayRef::Field(0, CsrField::Values),
            index(IndexRole::Atom),
        ),
        load(Ty::F32, ArrayRef::Param(1), at),
    );
    Body {
        name: "spmm".into(),
        params: vec![
            csr("a", Ty::F32),
            slice("b", Ty::F32, false),
            param("k", ParamKind::Scalar(Ty::U64)),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom, IndexRole::Lane],
        locals: vec![],
        block: Block {
            stmts: vec![],
            value: Some(Box::new(value)),
        },
        reduce: Some((Ty::F32, Reduce::Sum)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// No reduce: `fn scatter(a: &Csr<f32>, x: &[f32], y: &mut [f32], #[tile] row, #[atom] nz)
/// { if x[row] > 0.0 { atomic_add(&mut y[a.col_indices[nz] as usize], a.values[nz] * x[row]); } }`
pub fn scatter() -> Body {
    let xr = || load(Ty::F32, ArrayRef::Param(1), index(IndexRole::Tile));
    let col = cast(
        Ty::U64,
        load(
            Ty::U32,
            ArrayRef::Field(0, CsrField::ColIndices),
            index(IndexRole::Atom),
        ),
    );
    let add = atomic(
        AtomicOp::Add,
        Ty::F32,
        ArrayRef::Param(2),
        col,
        vec![bin(
            BinaryOp::Mul,
            Ty::F32,
            load(
                Ty::F32,
                ArrayRef::Field(0, CsrField::Values),
                index(IndexRole::Atom),
            ),
            xr(),
        )],
    );
    Body {
        name: "scatter".into(),
        params: vec![
            csr("a", Ty::F32),
            slice("x", Ty::F32, false),
            slice("y", Ty::F32, true),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![],
        block: Block {
            stmts: vec![Stmt::If {
                cond: bin(BinaryOp::Gt, Ty::Bool, xr(), float(Ty::F32, 0.0)),
                then: Block {
                    stmts: vec![Stmt::Expr(add)],
                    value: None,
                },
                els: Block::default(),
            }],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// SSSP relaxation over a frontier (checked in the tests):
/// ```text
/// fn relax(g: &Csr<f32>, frontier: &[u32], dist: &mut [f32], changed: &mut [bool], #[tile] u, #[atom] e) {
///     let v = g.col_indices[e] as usize;
///     let d = dist[u] + g.values[e];
///     if d < atomic_min(&mut dist[v], d) { changed[v] = true; }
/// }
/// ```
pub fn relax() -> Body {
    let v = assign(
        0,
        cast(
            Ty::U64,
            load(
                Ty::U32,
                ArrayRef::Field(0, CsrField::ColIndices),
                index(IndexRole::Atom),
            ),
        ),
    );
    let d = assign(
        1,
        bin(
            BinaryOp::Add,
            Ty::F32,
            load(Ty::F32, ArrayRef::Param(2), index(IndexRole::Tile)),
            load(
                Ty::F32,
                ArrayRef::Field(0, CsrField::Values),
                index(IndexRole::Atom),
            ),
        ),
    );
    let old = atomic(
        AtomicOp::Min,
        Ty::F32,
        ArrayRef::Param(2),
        local(Ty::U64, 0),
        vec![local(Ty::F32, 1)],
    );
    let relax = Stmt::If {
        cond: bin(BinaryOp::Lt, Ty::Bool, local(Ty::F32, 1), old),
        then: Block {
            stmts: vec![Stmt::Store {
                array: ArrayRef::Param(3),
                index: local(Ty::U64, 0),
                value: e(Ty::Bool, ExprKind::Lit(Lit::Bool(true))),
            }],
            value: None,
        },
        els: Block::default(),
    };
    Body {
        name: "relax".into(),
        params: vec![
            csr("g", Ty::F32),
            slice("frontier", Ty::U32, false),
            slice("dist", Ty::F32, true),
            slice("changed", Ty::Bool, true),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![Ty::U64, Ty::F32],
        block: Block {
            stmts: vec![v, d, relax],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// Most of the subset at once, reduce = sum over f64:
/// ```text
/// fn mix(a: &Csr<f64>, x: &[f64], flags: &[bool], lo: &mut [f32], counts: &mut [i32],
///        scale: f32, on: bool, #[tile] row, #[atom] nz, #[rank] r) -> f64 {
///     let c = a.col_indices[nz] as usize;
///     let w = if flags[c] && on { x[c] } else { -x[c] * 0.5 };
///     let mut s: i32 = 0;
///     for j in 0..(r as i32) { s = s + (j << 33i64) - j / 3; }
///     let f = (w as f32).mul_add(scale, 1.0).max(0.0).min(10.0);
///     atomic_min(&mut lo[row], f);
///     if s != 0 || f != f { atomic_add(&mut counts[row], s); } else { return 0.0; }
///     w + s as f64 + (f as f64).sqrt().abs()
/// }
/// ```
pub fn mix() -> Body {
    let (c, w, s, j, f) = (0, 1, 2, 3, 4);
    let xc = || load(Ty::F64, ArrayRef::Param(1), local(Ty::U64, c));
    let cond = bin(
        BinaryOp::And,
        Ty::Bool,
        load(Ty::Bool, ArrayRef::Param(2), local(Ty::U64, c)),
        e(Ty::Bool, ExprKind::Scalar(6)),
    );
    let neg = e(
        Ty::F64,
        ExprKind::Unary {
            op: UnaryOp::Neg,
            arg: Box::new(xc()),
        },
    );
    let w_if = e(
        Ty::F64,
        ExprKind::If {
            cond: Box::new(cond),
            then: Block {
                stmts: vec![],
                value: Some(Box::new(xc())),
            },
            els: Block {
                stmts: vec![],
                value: Some(Box::new(bin(
                    BinaryOp::Mul,
                    Ty::F64,
                    neg,
                    float(Ty::F64, 0.5),
                ))),
            },
        },
    );
    let step = bin(
        BinaryOp::Sub,
        Ty::I32,
        bin(
            BinaryOp::Add,
            Ty::I32,
            local(Ty::I32, s),
            bin(BinaryOp::Shl, Ty::I32, local(Ty::I32, j), int(Ty::I64, 33)),
        ),
        bin(BinaryOp::Div, Ty::I32, local(Ty::I32, j), int(Ty::I32, 3)),
    );
    let fma = method(
        Method::MulAdd,
        Ty::F32,
        vec![
            cast(Ty::F32, local(Ty::F64, w)),
            e(Ty::F32, ExprKind::Scalar(5)),
            float(Ty::F32, 1.0),
        ],
    );
    let clamp = method(
        Method::Min,
        Ty::F32,
        vec![
            method(Method::Max, Ty::F32, vec![fma, float(Ty::F32, 0.0)]),
            float(Ty::F32, 10.0),
        ],
    );
    let lo = atomic(
        AtomicOp::Min,
        Ty::F32,
        ArrayRef::Param(3),
        index(IndexRole::Tile),
        vec![local(Ty::F32, f)],
    );
    let count = Stmt::If {
        cond: bin(
            BinaryOp::Or,
            Ty::Bool,
            bin(BinaryOp::Ne, Ty::Bool, local(Ty::I32, s), int(Ty::I32, 0)),
            bin(BinaryOp::Ne, Ty::Bool, local(Ty::F32, f), local(Ty::F32, f)),
        ),
        then: Block {
            stmts: vec![Stmt::Expr(atomic(
                AtomicOp::Add,
                Ty::I32,
                ArrayRef::Param(4),
                index(IndexRole::Tile),
                vec![local(Ty::I32, s)],
            ))],
            value: None,
        },
        els: Block {
            stmts: vec![Stmt::Return(Some(float(Ty::F64, 0.0)))],
            value: None,
        },
    };
    let root = method(
        Method::Abs,
        Ty::F64,
        vec![method(
            Method::Sqrt,
            Ty::F64,
            vec![cast(Ty::F64, local(Ty::F32, f))],
        )],
    );
    let tail = bin(
        BinaryOp::Add,
        Ty::F64,
        bin(
            BinaryOp::Add,
            Ty::F64,
            local(Ty::F64, w),
            cast(Ty::F64, local(Ty::I32, s)),
        ),
        root,
    );
    Body {
        name: "mix".into(),
        params: vec![
            csr("a", Ty::F64),
            slice("x", Ty::F64, false),
            slice("flags", Ty::Bool, false),
            slice("lo", Ty::F32, true),
            slice("counts", Ty::I32, true),
            param("scale", ParamKind::Scalar(Ty::F32)),
            param("on", ParamKind::Scalar(Ty::Bool)),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom, IndexRole::Rank],
        locals: vec![Ty::U64, Ty::F64, Ty::I32, Ty::I32, Ty::F32],
        block: Block {
            stmts: vec![
                assign(
                    c,
                    cast(
                        Ty::U64,
                        load(
                            Ty::U32,
                            ArrayRef::Field(0, CsrField::ColIndices),
                            index(IndexRole::Atom),
                        ),
                    ),
                ),
                assign(w, w_if),
                assign(s, int(Ty::I32, 0)),
                Stmt::For {
                    var: j,
                    start: int(Ty::I32, 0),
                    end: cast(Ty::I32, index(IndexRole::Rank)),
                    body: Block {
                        stmts: vec![assign(s, step)],
                        value: None,
                    },
                },
                assign(f, clamp),
                Stmt::Expr(lo),
                count,
            ],
            value: Some(Box::new(tail)),
        },
        reduce: Some((Ty::F64, Reduce::Sum)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// Integer corners, no reduce:
/// ```text
/// fn bits(a: &Csr<u32>, v: &mut [u64], m: &mut [i64], n: i64, #[tile] row, #[atom] nz) {
///     let x = (a.values[nz] as u64) >> n;
///     let y = (x as i64) % n + (-1i64 as u64 >> 1) as i64;
///     let old = atomic_cas(&mut v[row], 0, x ^ 5);
///     atomic_exch(&mut v[nz], !old);
///     atomic_max(&mut m[row], y);
///     atomic_min(&mut m[nz], y as i32 as i64);
/// }
/// ```
pub fn bits() -> Body {
    let x = bin(
        BinaryOp::Shr,
        Ty::U64,
        cast(
            Ty::U64,
            load(
                Ty::U32,
                ArrayRef::Field(0, CsrField::Values),
                index(IndexRole::Atom),
            ),
        ),
        e(Ty::I64, ExprKind::Scalar(3)),
    );
    let y = bin(
        BinaryOp::Add,
        Ty::I64,
        bin(
            BinaryOp::Rem,
            Ty::I64,
            cast(Ty::I64, local(Ty::U64, 0)),
            e(Ty::I64, ExprKind::Scalar(3)),
        ),
        cast(
            Ty::I64,
            bin(
                BinaryOp::Shr,
                Ty::U64,
                int(Ty::U64, u64::MAX.into()),
                int(Ty::U32, 1),
            ),
        ),
    );
    let old = atomic(
        AtomicOp::Cas,
        Ty::U64,
        ArrayRef::Param(1),
        index(IndexRole::Tile),
        vec![
            int(Ty::U64, 0),
            bin(
                BinaryOp::BitXor,
                Ty::U64,
                local(Ty::U64, 0),
                int(Ty::U64, 5),
            ),
        ],
    );
    let not_old = e(
        Ty::U64,
        ExprKind::Unary {
            op: UnaryOp::Not,
            arg: Box::new(local(Ty::U64, 2)),
        },
    );
    Body {
        name: "bits".into(),
        params: vec![
            csr("a", Ty::U32),
            slice("v", Ty::U64, true),
            slice("m", Ty::I64, true),
            param("n", ParamKind::Scalar(Ty::I64)),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![Ty::U64, Ty::I64, Ty::U64],
        block: Block {
            stmts: vec![
                assign(0, x),
                assign(1, y),
                assign(2, old),
                Stmt::Expr(atomic(
                    AtomicOp::Exch,
                    Ty::U64,
                    ArrayRef::Param(1),
                    index(IndexRole::Atom),
                    vec![not_old],
                )),
                Stmt::Expr(atomic(
                    AtomicOp::Max,
                    Ty::I64,
                    ArrayRef::Param(2),
                    index(IndexRole::Tile),
                    vec![local(Ty::I64, 1)],
                )),
                Stmt::Expr(atomic(
                    AtomicOp::Min,
                    Ty::I64,
                    ArrayRef::Param(2),
                    index(IndexRole::Atom),
                    vec![cast(Ty::I64, cast(Ty::I32, local(Ty::I64, 1)))],
                )),
            ],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// Float atomics, no reduce:
/// ```text
/// fn fatom(a: &Csr<f64>, s: &mut [f64], t: &mut [f32], #[tile] row, #[atom] nz) {
///     atomic_add(&mut s[row], a.values[nz]);
///     atomic_max(&mut s[nz], a.values[nz]);
///     let o = atomic_exch(&mut t[row], a.values[nz] as f32);
///     atomic_cas(&mut t[nz], o, 1.5);
/// }
/// ```
pub fn fatom() -> Body {
    let v = || {
        load(
            Ty::F64,
            ArrayRef::Field(0, CsrField::Values),
            index(IndexRole::Atom),
        )
    };
    Body {
        name: "fatom".into(),
        params: vec![
            csr("a", Ty::F64),
            slice("s", Ty::F64, true),
            slice("t", Ty::F32, true),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom],
        locals: vec![Ty::F32],
        block: Block {
            stmts: vec![
                Stmt::Expr(atomic(
                    AtomicOp::Add,
                    Ty::F64,
                    ArrayRef::Param(1),
                    index(IndexRole::Tile),
                    vec![v()],
                )),
                Stmt::Expr(atomic(
                    AtomicOp::Max,
                    Ty::F64,
                    ArrayRef::Param(1),
                    index(IndexRole::Atom),
                    vec![v()],
                )),
                assign(
                    0,
                    atomic(
                        AtomicOp::Exch,
                        Ty::F32,
                        ArrayRef::Param(2),
                        index(IndexRole::Tile),
                        vec![cast(Ty::F32, v())],
                    ),
                ),
                Stmt::Expr(atomic(
                    AtomicOp::Cas,
                    Ty::F32,
                    ArrayRef::Param(2),
                    index(IndexRole::Atom),
                    vec![local(Ty::F32, 0), float(Ty::F32, 1.5)],
                )),
            ],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}
