//! Lowering of the checked body to lb-ptx's body IR. Every decision about names and types was
//! made by `check`; this pass only reshapes the tree (compound assignments become
//! load-op-store, `a..=b` becomes `a..b + 1`, a negated literal becomes a literal).

use lb_ptx::body::{
    ArrayRef, AtomicOp, BinaryOp, Block, Body, CsrField, Expr as IrExpr, ExprKind, Guards, Lit,
    LocalId, Method, Param, ParamKind, Stmt as IrStmt, Ty, UnaryOp,
};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Pat, Stmt, UnOp};

use crate::check::{key, member_name, path_ident, strip, tail_is_value, Name, Typed};
use crate::parse::{Role, Sig};

/// Builds the body IR of `func` from its checked signature and body.
pub fn lower(name: &str, sig: &Sig, block: &syn::Block, typed: &Typed) -> syn::Result<Body> {
    let mut l = Lowerer {
        sig,
        typed,
        locals: typed.locals.iter().map(|t| t.lower()).collect(),
    };
    let mut stmts = Vec::new();
    let tail = tail_is_value(sig, block);
    let n = block.stmts.len();
    for (i, s) in block.stmts.iter().enumerate() {
        match s {
            Stmt::Expr(e, None) if tail && i + 1 == n => {
                let v = l.value(e)?;
                stmts.push(IrStmt::Return(Some(v)));
            }
            _ => l.stmt(s, &mut stmts)?,
        }
    }
    let params = sig
        .body_params()
        .map(|p| Param {
            // A raw identifier (`r#type`) names the same thing without its prefix.
            name: syn::ext::IdentExt::unraw(&p.ident).to_string(),
            kind: match p.role {
                Role::TileSet { kind, value } => ParamKind::TileSet {
                    kind,
                    value: value.lower(),
                },
                Role::Queue => ParamKind::Queue,
                Role::Slice { elem, mutable } => ParamKind::Slice {
                    elem: elem.lower(),
                    mutable,
                },
                Role::Scalar(t) => ParamKind::Scalar(t.lower()),
                // `body_params` leaves the index roles out.
                Role::Index(_) => ParamKind::Scalar(Ty::U64),
            },
        })
        .collect();
    Ok(Body {
        name: name.to_string(),
        params,
        roles: sig.roles(),
        locals: l.locals,
        block: Block { stmts, value: None },
        reduce: sig.reduce.map(|(t, r)| (t.lower(), r)),
        // `lb_ptx::generate_safe` decides which accesses its kernels test.
        guards: Guards::Every,
    })
}

struct Lowerer<'a> {
    sig: &'a Sig,
    typed: &'a Typed,
    locals: Vec<Ty>,
}

/// `check` accepted the tree, so a missing entry is a bug in the macro; it is reported as an
/// error rather than a panic.
fn internal(span: proc_macro2::Span, what: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!("internal error in #[load_balanced] ({what}): please report it"),
    )
}

impl Lowerer<'_> {
    fn ty(&self, e: &Expr) -> syn::Result<Ty> {
        self.typed
            .types
            .get(&key(e))
            .map(|t| t.lower())
            .ok_or_else(|| internal(e.span(), "untyped expression"))
    }

    fn name(&self, e: &Expr) -> syn::Result<Name> {
        self.typed
            .names
            .get(&key(e))
            .copied()
            .ok_or_else(|| internal(e.span(), "unresolved name"))
    }

    fn binding(&self, k: usize, span: proc_macro2::Span) -> syn::Result<LocalId> {
        self.typed
            .bindings
            .get(&k)
            .copied()
            .ok_or_else(|| internal(span, "unbound pattern"))
    }

    fn new_local(&mut self, ty: Ty) -> LocalId {
        self.locals.push(ty);
        self.locals.len() - 1
    }

    // ---- statements ----

    fn block(&mut self, b: &syn::Block) -> syn::Result<Block> {
        let mut stmts = Vec::new();
        for s in &b.stmts {
            self.stmt(s, &mut stmts)?;
        }
        Ok(Block { stmts, value: None })
    }

    fn stmt(&mut self, s: &Stmt, out: &mut Vec<IrStmt>) -> syn::Result<()> {
        match s {
            Stmt::Local(l) => {
                let init = l
                    .init
                    .as_ref()
                    .ok_or_else(|| internal(l.span(), "let without value"))?;
                let value = self.value(&init.expr)?;
                let pat = match &l.pat {
                    Pat::Type(pt) => &*pt.pat,
                    p => p,
                };
                match pat {
                    Pat::Ident(pi) => {
                        let local = self.binding(key(pi), pi.span())?;
                        out.push(IrStmt::Assign { local, value });
                    }
                    _ => out.push(IrStmt::Expr(value)),
                }
                Ok(())
            }
            Stmt::Expr(e, _) => self.stmt_expr(e, out),
            other => Err(internal(other.span(), "statement kind")),
        }
    }

    fn stmt_expr(&mut self, e: &Expr, out: &mut Vec<IrStmt>) -> syn::Result<()> {
        match e {
            Expr::Assign(a) => self.assign(&a.left, &a.right, None, out),
            Expr::Binary(b) if compound(&b.op).is_some() => {
                self.assign(&b.left, &b.right, compound(&b.op), out)
            }
            Expr::If(i) => {
                let s = self.if_stmt(i)?;
                out.push(s);
                Ok(())
            }
            Expr::ForLoop(f) => {
                let var = self.binding(key(&*f.pat), f.pat.span())?;
                let Expr::Range(r) = strip(&f.expr) else {
                    return Err(internal(f.expr.span(), "for range"));
                };
                let (Some(start), Some(end)) = (&r.start, &r.end) else {
                    return Err(internal(r.span(), "for bounds"));
                };
                let start = self.value(start)?;
                let mut end = self.value(end)?;
                if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                    // `a..=b` runs to `b + 1` exclusive (wrapping when `b` is the type's maximum,
                    // which then runs no iterations: a documented difference from Rust).
                    let ty = end.ty;
                    end = IrExpr {
                        ty,
                        kind: ExprKind::Binary {
                            op: BinaryOp::Add,
                            lhs: Box::new(end),
                            rhs: Box::new(IrExpr {
                                ty,
                                kind: ExprKind::Lit(Lit::Int(1)),
                            }),
                        },
                    };
                }
                let body = self.block(&f.body)?;
                out.push(IrStmt::For {
                    var,
                    start,
                    end,
                    body,
                });
                Ok(())
            }
            Expr::Block(b) => {
                // Scoping was resolved by `check` (shadowing gets new locals), so a nested
                // block's statements can join the enclosing list.
                for s in &b.block.stmts {
                    self.stmt(s, out)?;
                }
                Ok(())
            }
            Expr::MethodCall(m) if m.method == "push" => {
                let Name::Param(i) = self.name(strip(&m.receiver))? else {
                    return Err(internal(m.span(), "queue"));
                };
                let arg = m.args.first().ok_or_else(|| internal(m.span(), "push"))?;
                let value = self.value(arg)?;
                out.push(IrStmt::Push {
                    queue: self.sig.body_index(i),
                    value,
                });
                Ok(())
            }
            Expr::Return(r) => {
                let v = match &r.expr {
                    Some(e) => Some(self.value(e)?),
                    None => None,
                };
                out.push(IrStmt::Return(v));
                Ok(())
            }
            _ => {
                let v = self.value(e)?;
                out.push(IrStmt::Expr(v));
                Ok(())
            }
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> syn::Result<IrStmt> {
        let cond = self.value(&i.cond)?;
        let then = self.block(&i.then_branch)?;
        let els = match &i.else_branch {
            None => Block::default(),
            Some((_, e)) => match &**e {
                Expr::Block(b) => self.block(&b.block)?,
                Expr::If(ei) => Block {
                    stmts: vec![self.if_stmt(ei)?],
                    value: None,
                },
                other => return Err(internal(other.span(), "else")),
            },
        };
        Ok(IrStmt::If { cond, then, els })
    }

    fn assign(
        &mut self,
        lhs: &Expr,
        rhs: &Expr,
        op: Option<BinaryOp>,
        out: &mut Vec<IrStmt>,
    ) -> syn::Result<()> {
        let rhs_ir = self.value(rhs)?;
        let lhs = strip(lhs);
        match lhs {
            Expr::Path(_) => {
                let Name::Local(local) = self.name(lhs)? else {
                    return Err(internal(lhs.span(), "assignment target"));
                };
                let value = match op {
                    None => rhs_ir,
                    Some(op) => {
                        let ty = self.locals[local];
                        binary(
                            op,
                            IrExpr {
                                ty,
                                kind: ExprKind::Local(local),
                            },
                            rhs_ir,
                            ty,
                        )
                    }
                };
                out.push(IrStmt::Assign { local, value });
            }
            Expr::Index(ix) => {
                let array = self.array(&ix.expr)?;
                let mut index = self.value(&ix.index)?;
                let value = match op {
                    None => rhs_ir,
                    Some(op) => {
                        // Load-op-store: an index with work in it is computed once, into a local.
                        if !is_trivial(&index) {
                            let tmp = self.new_local(index.ty);
                            out.push(IrStmt::Assign {
                                local: tmp,
                                value: index,
                            });
                            index = IrExpr {
                                ty: Ty::U64,
                                kind: ExprKind::Local(tmp),
                            };
                        }
                        let ty = self.ty(lhs)?;
                        let old = IrExpr {
                            ty,
                            kind: ExprKind::Load {
                                array,
                                index: Box::new(index.clone()),
                            },
                        };
                        binary(op, old, rhs_ir, ty)
                    }
                };
                out.push(IrStmt::Store {
                    array,
                    index,
                    value,
                });
            }
            other => return Err(internal(other.span(), "assignment target")),
        }
        Ok(())
    }

    // ---- expressions ----

    fn array(&self, base: &Expr) -> syn::Result<ArrayRef> {
        match strip(base) {
            Expr::Path(_) => match self.name(strip(base))? {
                Name::Param(i) => Ok(ArrayRef::Param(self.sig.body_index(i))),
                _ => Err(internal(base.span(), "array")),
            },
            Expr::Field(f) => {
                let Name::Param(i) = self.name(strip(&f.base))? else {
                    return Err(internal(base.span(), "tile set"));
                };
                let field = match member_name(&f.member).as_str() {
                    "values" => CsrField::Values,
                    "col_indices" => CsrField::ColIndices,
                    "row_offsets" => CsrField::RowOffsets,
                    "num_rows" => CsrField::NumRows,
                    "num_cols" => CsrField::NumCols,
                    "row_indices" => CsrField::RowIndices,
                    "col_offsets" => CsrField::ColOffsets,
                    _ => return Err(internal(f.span(), "field")),
                };
                Ok(ArrayRef::Field(self.sig.body_index(i), field))
            }
            other => Err(internal(other.span(), "array")),
        }
    }

    fn value(&mut self, e: &Expr) -> syn::Result<IrExpr> {
        if let Expr::Paren(p) = e {
            return self.value(&p.expr);
        }
        if let Expr::Group(g) = e {
            return self.value(&g.expr);
        }
        let ty = self.ty(e)?;
        let kind = match e {
            Expr::Lit(l) => ExprKind::Lit(literal(&l.lit, ty)?),
            Expr::Path(_) => match self.name(e)? {
                Name::Local(id) => ExprKind::Local(id),
                Name::Const(lit) => ExprKind::Lit(lit),
                Name::Param(i) => match self.sig.params[i].role {
                    Role::Index(r) => ExprKind::Index(r),
                    Role::Scalar(_) => ExprKind::Scalar(self.sig.body_index(i)),
                    _ => return Err(internal(e.span(), "parameter value")),
                },
            },
            Expr::Unary(u) => {
                let arg = self.value(&u.expr)?;
                match (u.op, arg.kind) {
                    // `-1` is one literal, so `i32::MIN` written out stays in range.
                    (UnOp::Neg(_), ExprKind::Lit(Lit::Int(v))) => ExprKind::Lit(Lit::Int(-v)),
                    (UnOp::Neg(_), ExprKind::Lit(Lit::Float(v))) => ExprKind::Lit(Lit::Float(-v)),
                    (op, kind) => ExprKind::Unary {
                        op: if matches!(op, UnOp::Neg(_)) {
                            UnaryOp::Neg
                        } else {
                            UnaryOp::Not
                        },
                        arg: Box::new(IrExpr { ty: arg.ty, kind }),
                    },
                }
            }
            Expr::Binary(b) => {
                let op = binop(&b.op).ok_or_else(|| internal(b.span(), "operator"))?;
                ExprKind::Binary {
                    op,
                    lhs: Box::new(self.value(&b.left)?),
                    rhs: Box::new(self.value(&b.right)?),
                }
            }
            Expr::Cast(c) => ExprKind::Cast {
                arg: Box::new(self.value(&c.expr)?),
            },
            Expr::Index(ix) => ExprKind::Load {
                array: self.array(&ix.expr)?,
                index: Box::new(self.value(&ix.index)?),
            },
            Expr::Field(_) => ExprKind::TileSetScalar(self.array(e)?),
            Expr::MethodCall(m) => {
                let method = match m.method.to_string().as_str() {
                    "len" => {
                        return Ok(IrExpr {
                            ty,
                            kind: ExprKind::Len(self.array(&m.receiver)?),
                        })
                    }
                    "min" => Method::Min,
                    "max" => Method::Max,
                    "abs" => Method::Abs,
                    "sqrt" => Method::Sqrt,
                    "mul_add" => Method::MulAdd,
                    _ => return Err(internal(m.span(), "method")),
                };
                let mut args = vec![self.value(&m.receiver)?];
                for a in &m.args {
                    args.push(self.value(a)?);
                }
                ExprKind::Method { method, args }
            }
            Expr::Call(c) => {
                let op = match &*c.func {
                    Expr::Path(p) => match path_ident(p).map(|i| i.to_string()).as_deref() {
                        Some("atomic_add") => AtomicOp::Add,
                        Some("atomic_min") => AtomicOp::Min,
                        Some("atomic_max") => AtomicOp::Max,
                        Some("atomic_exch") => AtomicOp::Exch,
                        Some("atomic_cas") => AtomicOp::Cas,
                        _ => return Err(internal(c.span(), "call")),
                    },
                    _ => return Err(internal(c.span(), "call")),
                };
                let Expr::Reference(r) = strip(&c.args[0]) else {
                    return Err(internal(c.span(), "atomic target"));
                };
                let Expr::Index(ix) = strip(&r.expr) else {
                    return Err(internal(c.span(), "atomic target"));
                };
                let array = self.array(&ix.expr)?;
                let index = Box::new(self.value(&ix.index)?);
                let mut args = Vec::new();
                for a in c.args.iter().skip(1) {
                    args.push(self.value(a)?);
                }
                ExprKind::Atomic {
                    op,
                    array,
                    index,
                    args,
                }
            }
            Expr::If(i) => return self.if_value(i),
            other => return Err(internal(other.span(), "expression")),
        };
        Ok(IrExpr { ty, kind })
    }

    fn if_value(&mut self, i: &syn::ExprIf) -> syn::Result<IrExpr> {
        let cond = Box::new(self.value(&i.cond)?);
        let then = self.block_value(&i.then_branch)?;
        let els = match &i.else_branch {
            Some((_, e)) => match &**e {
                Expr::Block(b) => self.block_value(&b.block)?,
                Expr::If(ei) => {
                    let v = self.if_value(ei)?;
                    Block {
                        stmts: Vec::new(),
                        value: Some(Box::new(v)),
                    }
                }
                other => return Err(internal(other.span(), "else")),
            },
            None => return Err(internal(i.span(), "if without else")),
        };
        let ty = then
            .value
            .as_ref()
            .map(|v| v.ty)
            .ok_or_else(|| internal(i.span(), "if value"))?;
        Ok(IrExpr {
            ty,
            kind: ExprKind::If { cond, then, els },
        })
    }

    fn block_value(&mut self, b: &syn::Block) -> syn::Result<Block> {
        let mut stmts = Vec::new();
        let Some((last, init)) = b.stmts.split_last() else {
            return Err(internal(b.span(), "empty value block"));
        };
        for s in init {
            self.stmt(s, &mut stmts)?;
        }
        let Stmt::Expr(e, None) = last else {
            return Err(internal(b.span(), "value block"));
        };
        let v = self.value(e)?;
        Ok(Block {
            stmts,
            value: Some(Box::new(v)),
        })
    }
}

/// `a op b` of type `ty` (the result type of compound-assignment operators is the place's).
fn binary(op: BinaryOp, lhs: IrExpr, rhs: IrExpr, ty: Ty) -> IrExpr {
    IrExpr {
        ty,
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
    }
}

/// Expressions cheap and pure enough to evaluate twice.
fn is_trivial(e: &IrExpr) -> bool {
    matches!(
        e.kind,
        ExprKind::Local(_) | ExprKind::Index(_) | ExprKind::Scalar(_) | ExprKind::Lit(_)
    )
}

fn literal(lit: &syn::Lit, ty: Ty) -> syn::Result<Lit> {
    match lit {
        syn::Lit::Bool(b) => Ok(Lit::Bool(b.value)),
        syn::Lit::Int(i) => {
            let v: u128 = i.base10_parse()?;
            let v = i128::try_from(v)
                .map_err(|_| syn::Error::new(i.span(), "integer literal too large"))?;
            // `1f32` is an integer token with a float suffix.
            Ok(if ty.is_float() {
                Lit::Float(v as f64)
            } else {
                Lit::Int(v)
            })
        }
        syn::Lit::Float(f) => Ok(Lit::Float(f.base10_parse()?)),
        other => Err(internal(other.span(), "literal")),
    }
}

fn binop(op: &BinOp) -> Option<BinaryOp> {
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
fn compound(op: &BinOp) -> Option<BinaryOp> {
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
