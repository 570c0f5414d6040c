//! Lowering of the typed tree (`typed`) to lb-ptx's body IR. Every decision about names and
//! types was made by `check`; this pass only reshapes the tree (compound assignments become
//! load-op-store, `a..=b` becomes `a..b + 1`, a negated literal becomes a literal) and never
//! looks at the syntax.

use lb_ptx::body::{
    ArrayRef, BinaryOp, Block, Body, Expr as IrExpr, ExprKind, Guards, Lit, LocalId, Param,
    ParamKind, Stmt as IrStmt, Ty, UnaryOp,
};
use proc_macro2::Span;

use crate::parse::{Role, Sig};
use crate::typed::{Array, Place, TBlock, TExpr, TExprKind, TStmt, Typed};

/// Builds the body IR of the kernel `name` from its signature and its checked body.
pub fn lower(name: &str, sig: &Sig, typed: &Typed) -> syn::Result<Body> {
    let mut l = Lowerer {
        sig,
        typed,
        locals: typed.locals.iter().map(|t| t.lower()).collect(),
    };
    let stmts = l.stmts(&typed.stmts)?;
    let params = sig
        .body_params()
        .map(|p| Param {
            // A raw identifier (`r#type`) names the same thing without its prefix.
            name: syn::ext::IdentExt::unraw(&p.ident).to_string(),
            kind: match p.role {
                // A half-precision array holds 16 bits per element; the body sees `f32`.
                Role::TileSet { kind, value } => ParamKind::TileSet {
                    kind,
                    value: sig.halves.of(&p.ident).unwrap_or(value.lower()),
                },
                Role::Queue => ParamKind::Queue,
                Role::Slice { elem, mutable } => ParamKind::Slice {
                    elem: sig.halves.of(&p.ident).unwrap_or(elem.lower()),
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
        out_storage: sig.halves.output,
        // `lb_ptx::generate_safe` decides which accesses its kernels test.
        guards: Guards::Every,
        epilogue: None,
    })
}

struct Lowerer<'a> {
    sig: &'a Sig,
    typed: &'a Typed,
    locals: Vec<Ty>,
}

/// `check` accepted the tree, so what cannot be lowered is a bug in the macro; it is reported as
/// an error rather than a panic. The tree has no spans (its mistakes were all `check`'s to
/// report), so the error points at the attribute.
fn internal(what: &str) -> syn::Error {
    syn::Error::new(
        Span::call_site(),
        format!("internal error in #[load_balanced] ({what}): please report it"),
    )
}

impl Lowerer<'_> {
    fn ty(&self, e: &TExpr) -> syn::Result<Ty> {
        self.typed
            .ty(e.ty)
            .map(|t| t.lower())
            .ok_or_else(|| internal("untyped expression"))
    }

    fn new_local(&mut self, ty: Ty) -> LocalId {
        self.locals.push(ty);
        self.locals.len() - 1
    }

    /// The IR's reference to an array: parameters are numbered among the body parameters.
    fn array(&self, a: Array) -> ArrayRef {
        match a {
            Array::Slice { param, .. } => ArrayRef::Param(self.sig.body_index(param)),
            Array::Field { param, field } => ArrayRef::Field(self.sig.body_index(param), field),
        }
    }

    // ---- statements ----

    fn stmts(&mut self, stmts: &[TStmt]) -> syn::Result<Vec<IrStmt>> {
        let mut out = Vec::new();
        for s in stmts {
            self.stmt(s, &mut out)?;
        }
        Ok(out)
    }

    fn block(&mut self, stmts: &[TStmt]) -> syn::Result<Block> {
        Ok(Block {
            stmts: self.stmts(stmts)?,
            value: None,
        })
    }

    fn stmt(&mut self, s: &TStmt, out: &mut Vec<IrStmt>) -> syn::Result<()> {
        match s {
            TStmt::Assign { place, op, value } => self.assign(place, *op, value, out)?,
            TStmt::If { cond, then, els } => {
                let cond = self.value(cond)?;
                let then = self.block(then)?;
                let els = self.block(els)?;
                out.push(IrStmt::If { cond, then, els });
            }
            TStmt::For {
                var,
                start,
                end,
                inclusive,
                body,
            } => {
                let start = self.value(start)?;
                let mut end = self.value(end)?;
                if *inclusive {
                    // `a..=b` runs to `b + 1` exclusive (wrapping when `b` is the type's maximum,
                    // which then runs no iterations: a documented difference from Rust).
                    let ty = end.ty;
                    let one = IrExpr {
                        ty,
                        kind: ExprKind::Lit(Lit::Int(1)),
                    };
                    end = binary(BinaryOp::Add, end, one, ty);
                }
                let body = self.block(body)?;
                out.push(IrStmt::For {
                    var: *var,
                    start,
                    end,
                    body,
                });
            }
            TStmt::Loop { body } => {
                let body = self.block(body)?;
                out.push(IrStmt::Loop { body });
            }
            TStmt::Break(n) => out.push(IrStmt::Break(*n)),
            TStmt::Continue(n) => out.push(IrStmt::Continue(*n)),
            TStmt::Push { queue, value } => {
                let value = self.value(value)?;
                out.push(IrStmt::Push {
                    queue: self.sig.body_index(*queue),
                    value,
                });
            }
            TStmt::Return(v) => {
                let v = match v {
                    Some(e) => Some(self.value(e)?),
                    None => None,
                };
                out.push(IrStmt::Return(v));
            }
            TStmt::Expr(e) => {
                let v = self.value(e)?;
                out.push(IrStmt::Expr(v));
            }
        }
        Ok(())
    }

    fn assign(
        &mut self,
        place: &Place,
        op: Option<BinaryOp>,
        value: &TExpr,
        out: &mut Vec<IrStmt>,
    ) -> syn::Result<()> {
        let rhs = self.value(value)?;
        match place {
            Place::Local(local) => {
                let local = *local;
                let value = match op {
                    None => rhs,
                    Some(op) => {
                        let ty = self.locals[local];
                        let old = IrExpr {
                            ty,
                            kind: ExprKind::Local(local),
                        };
                        binary(op, old, rhs, ty)
                    }
                };
                out.push(IrStmt::Assign { local, value });
            }
            Place::Element { array, index, elem } => {
                let array = self.array(*array);
                let mut index = self.value(index)?;
                let value = match op {
                    None => rhs,
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
                        let ty = elem.lower();
                        let old = IrExpr {
                            ty,
                            kind: ExprKind::Load {
                                array,
                                index: Box::new(index.clone()),
                            },
                        };
                        binary(op, old, rhs, ty)
                    }
                };
                out.push(IrStmt::Store {
                    array,
                    index,
                    value,
                });
            }
        }
        Ok(())
    }

    // ---- expressions ----

    fn value(&mut self, e: &TExpr) -> syn::Result<IrExpr> {
        let ty = self.ty(e)?;
        let kind = match &e.kind {
            // `1f32` is an integer token with a float type.
            TExprKind::Lit(Lit::Int(v)) if ty.is_float() => ExprKind::Lit(Lit::Float(*v as f64)),
            TExprKind::Lit(lit) => ExprKind::Lit(*lit),
            TExprKind::Local(id) => ExprKind::Local(*id),
            TExprKind::Param(i) => match self.sig.params[*i].role {
                Role::Index(r) => ExprKind::Index(r),
                Role::Scalar(_) => ExprKind::Scalar(self.sig.body_index(*i)),
                _ => return Err(internal("parameter value")),
            },
            TExprKind::Unary { op, arg } => {
                let arg = self.value(arg)?;
                match (op, arg.kind) {
                    // `-1` is one literal, so `i32::MIN` written out stays in range.
                    (UnaryOp::Neg, ExprKind::Lit(Lit::Int(v))) => ExprKind::Lit(Lit::Int(-v)),
                    (UnaryOp::Neg, ExprKind::Lit(Lit::Float(v))) => ExprKind::Lit(Lit::Float(-v)),
                    (op, kind) => ExprKind::Unary {
                        op: *op,
                        arg: Box::new(IrExpr { ty: arg.ty, kind }),
                    },
                }
            }
            TExprKind::Binary { op, lhs, rhs } => ExprKind::Binary {
                op: *op,
                lhs: Box::new(self.value(lhs)?),
                rhs: Box::new(self.value(rhs)?),
            },
            TExprKind::Cast(arg) => ExprKind::Cast {
                arg: Box::new(self.value(arg)?),
            },
            TExprKind::Load { array, index } => ExprKind::Load {
                array: self.array(*array),
                index: Box::new(self.value(index)?),
            },
            TExprKind::TileSetScalar(a) => ExprKind::TileSetScalar(self.array(*a)),
            TExprKind::Len(a) => ExprKind::Len(self.array(*a)),
            TExprKind::Method { method, args } => ExprKind::Method {
                method: *method,
                args: self.values(args)?,
            },
            TExprKind::Atomic {
                op,
                array,
                index,
                args,
            } => ExprKind::Atomic {
                op: *op,
                array: self.array(*array),
                index: Box::new(self.value(index)?),
                args: self.values(args)?,
            },
            TExprKind::If { cond, then, els } => ExprKind::If {
                cond: Box::new(self.value(cond)?),
                then: self.block_value(then)?,
                els: self.block_value(els)?,
            },
            TExprKind::Block(b) => ExprKind::Block(self.block_value(b)?),
            TExprKind::Error => return Err(internal("expression reported as an error")),
        };
        Ok(IrExpr { ty, kind })
    }

    fn values(&mut self, es: &[TExpr]) -> syn::Result<Vec<IrExpr>> {
        es.iter().map(|e| self.value(e)).collect()
    }

    fn block_value(&mut self, b: &TBlock) -> syn::Result<Block> {
        let stmts = self.stmts(&b.stmts)?;
        let v = self.value(&b.value)?;
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
