//! `match` on an integer: the scrutinee is evaluated once into a local, and the arms become an
//! `if` / `else if` chain in their order, each arm's test built from its pattern (literals,
//! `a..=b` and `a..b` ranges, `|` alternatives, `_`, a name binding the value, and a guard
//! `if c`). The kernel cannot tell that literal arms cover every value, so a `match` needs a
//! catch-all arm (`_` or a name), as rustc does for integers.

use std::collections::HashMap;

use lb_ptx::body::BinaryOp;
use quote::ToTokens;
use syn::{Expr, Pat};

use super::{strip, Checker};
use crate::typed::{Place, TBlock, TExpr, TExprKind, TStmt};
use crate::types::STy;
use crate::valid::Req;

/// An arm's test, or `None` for an arm that matches everything.
type Test = Option<TExpr>;

impl Checker<'_> {
    /// The scrutinee in a fresh local, and its assignment; `None` after an error.
    fn scrutinee(&mut self, m: &syn::ExprMatch) -> Option<(usize, TStmt)> {
        let v = self.value(&m.expr)?;
        self.reqs.push((
            v.ty,
            Req::Int,
            m.expr.to_token_stream(),
            "a `match` in a kernel body (on integers)",
        ));
        let local = self.new_local(v.ty);
        Some((
            local,
            TStmt::Assign {
                place: Place::Local(local),
                op: None,
                value: v,
            },
        ))
    }

    /// Where the first catch-all arm is; an error (at `match`) when there is none.
    fn catch_all(&mut self, m: &syn::ExprMatch) -> Option<usize> {
        let found = m
            .arms
            .iter()
            .position(|a| a.guard.is_none() && is_catch_all(&a.pat));
        if found.is_none() {
            self.report(
                &m.match_token,
                "a `match` in a kernel body needs a last arm `_ => ...`: the kernel cannot tell \
                 that the other arms cover every integer",
            );
        }
        found
    }

    /// The arm's test against the scrutinee `local`, with the names it binds in the current
    /// scope; `None` inside for an arm that matches everything.
    fn arm_test(&mut self, arm: &syn::Arm, local: usize) -> Option<Test> {
        let test = self.pattern_test(&arm.pat, local)?;
        let Some((_, guard)) = &arm.guard else {
            return Some(test);
        };
        let guard = self.cond(guard)?;
        Some(Some(match test {
            Some(t) => self.logic(BinaryOp::And, t, guard),
            None => guard,
        }))
    }

    fn pattern_test(&mut self, pat: &Pat, local: usize) -> Option<Test> {
        let scrutinee = |c: &Checker| TExpr {
            kind: TExprKind::Local(local),
            ty: c.locals[local],
        };
        match pat {
            Pat::Wild(_) => Some(None),
            Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
                if let Some(scope) = self.scopes.last_mut() {
                    scope.insert(pi.ident.to_string(), local);
                }
                Some(None)
            }
            Pat::Paren(p) => self.pattern_test(&p.pat, local),
            Pat::Or(o) => {
                let mut test: Option<TExpr> = None;
                for case in &o.cases {
                    match self.pattern_test(case, local)? {
                        None => return Some(None),
                        Some(t) => {
                            test = Some(match test {
                                Some(prev) => self.logic(BinaryOp::Or, prev, t),
                                None => t,
                            })
                        }
                    }
                }
                Some(test)
            }
            Pat::Lit(l) => {
                let v = self.value(&Expr::Lit(l.clone()))?;
                Some(Some(self.compare(BinaryOp::Eq, scrutinee(self), v, &l)))
            }
            Pat::Range(r) => {
                let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
                    return self.err_at(
                        &r,
                        "a range pattern in a kernel body has both ends: `a..=b`",
                    );
                };
                let lo_v = self.value(lo)?;
                let hi_v = self.value(hi)?;
                let above = self.compare(BinaryOp::Ge, scrutinee(self), lo_v, lo);
                let op = match r.limits {
                    syn::RangeLimits::Closed(_) => BinaryOp::Le,
                    syn::RangeLimits::HalfOpen(_) => BinaryOp::Lt,
                };
                let below = self.compare(op, scrutinee(self), hi_v, hi);
                Some(Some(self.logic(BinaryOp::And, above, below)))
            }
            other => {
                // The names it binds stand for the error, so their uses report nothing more.
                let mut names = Vec::new();
                super::pattern_names(other, &mut names);
                for pi in names {
                    let poison = self.fresh(super::Kind::Poison);
                    self.bind(&pi.ident, poison);
                }
                self.err_at(
                    &other,
                    "a `match` arm in a kernel body matches integer literals, ranges `a..=b`, `|` \
                 alternatives, `_` or a name",
                )
            }
        }
    }

    /// `lhs op rhs` for a comparison, `rhs` (at `at`) checked against `lhs`'s type.
    fn compare(&mut self, op: BinaryOp, lhs: TExpr, rhs: TExpr, at: &dyn ToTokens) -> TExpr {
        self.expect(rhs.ty, lhs.ty, at, "the `match` scrutinee's type");
        self.logic(op, lhs, rhs)
    }

    /// `lhs op rhs` with a `bool` result.
    fn logic(&mut self, op: BinaryOp, lhs: TExpr, rhs: TExpr) -> TExpr {
        let ty = self.known(STy::Bool);
        TExpr {
            kind: TExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            ty,
        }
    }

    /// `match` as a statement: the arms' bodies are statements.
    pub(super) fn match_stmt(&mut self, m: &syn::ExprMatch, out: &mut Vec<TStmt>) {
        let scrutinee = self.scrutinee(m);
        let last = self.catch_all(m);
        let (Some((local, assign)), Some(last)) = (scrutinee, last) else {
            return;
        };
        out.push(assign);
        let mut arms = Vec::new();
        for arm in &m.arms[..=last] {
            self.scopes.push(HashMap::new());
            let test = self.arm_test(arm, local);
            let mut body = Vec::new();
            match strip(&arm.body) {
                Expr::Block(b) if b.label.is_none() => self.block_stmts(&b.block, &mut body),
                e => self.stmt_expr(e, &mut body),
            }
            self.scopes.pop();
            arms.push((test, body));
        }
        let mut chain: Vec<TStmt> = Vec::new();
        for (test, body) in arms.into_iter().rev() {
            chain = match test {
                Some(Some(cond)) => vec![TStmt::If {
                    cond,
                    then: body,
                    els: chain,
                }],
                // A catch-all: what follows it is never reached.
                Some(None) => body,
                None => return,
            };
        }
        out.extend(chain);
    }

    /// `match` as a value: each arm's body is a value of the first arm's type.
    pub(super) fn match_value(&mut self, m: &syn::ExprMatch) -> Option<TExpr> {
        let scrutinee = self.scrutinee(m);
        let last = self.catch_all(m);
        let ((local, assign), last) = (scrutinee?, last?);
        let mut arms = Vec::new();
        let mut ty = None;
        for arm in &m.arms[..=last] {
            self.scopes.push(HashMap::new());
            let test = self.arm_test(arm, local);
            let body = match strip(&arm.body) {
                Expr::Block(b) if b.label.is_none() => self.block_value(&b.block),
                e => self.value(e).map(|v| TBlock {
                    stmts: Vec::new(),
                    value: Box::new(v),
                }),
            };
            self.scopes.pop();
            if let Some(b) = &body {
                match ty {
                    None => ty = Some(b.value.ty),
                    Some(t) => self.expect(b.value.ty, t, &arm.body, "the first `match` arm"),
                }
            }
            arms.push((test, body));
        }
        let ty = ty?;
        let mut chain: Option<TBlock> = None;
        for (test, body) in arms.into_iter().rev() {
            let body = body?;
            chain = Some(match (test?, chain) {
                (Some(cond), Some(els)) => TBlock {
                    stmts: Vec::new(),
                    value: Box::new(TExpr {
                        kind: TExprKind::If {
                            cond: Box::new(cond),
                            then: body,
                            els,
                        },
                        ty,
                    }),
                },
                _ => body,
            });
        }
        let value = chain?;
        let mut stmts = vec![assign];
        stmts.extend(value.stmts);
        Some(TExpr {
            kind: TExprKind::Block(TBlock {
                stmts,
                value: value.value,
            }),
            ty,
        })
    }
}

/// Whether `pat` matches every value: `_`, a plain name, or an alternative of those.
fn is_catch_all(pat: &Pat) -> bool {
    match pat {
        Pat::Wild(_) => true,
        Pat::Ident(pi) => pi.subpat.is_none() && pi.by_ref.is_none(),
        Pat::Paren(p) => is_catch_all(&p.pat),
        Pat::Or(o) => o.cases.iter().any(is_catch_all),
        _ => false,
    }
}
