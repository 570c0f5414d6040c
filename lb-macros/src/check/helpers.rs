//! Helper functions: `fn` items declared inside the kernel's body (a proc macro sees only its
//! own item's tokens, so a helper declared next to the kernel would be invisible to it). rustc
//! compiles them as ordinary nested functions for the CPU reference; for the GPU, every call is
//! inlined here, at check time: the arguments are evaluated in the caller, bound to fresh locals
//! named like the parameters, and the helper's body is checked in a scope of its own (a nested
//! `fn` sees neither the kernel's parameters nor its locals, as in Rust). A `return` inside it
//! assigns the result and leaves a loop wrapped around the inlined body. A helper that calls
//! itself, directly or through others, is an error: there is no call stack to inline it onto.

use std::collections::HashMap;
use std::rc::Rc;

use syn::{Expr, FnArg, Pat, ReturnType, Stmt};

use super::Checker;
use crate::typed::{Place, TBlock, TExpr, TExprKind, TStmt};
use crate::types::{Errors, STy};
use crate::valid::{scalar_type, SCALARS};

/// A helper's parameters (name and type) and its return type (`None`: nothing).
type HelperSig = (Vec<(syn::Ident, STy)>, Option<STy>);

/// A helper `fn` declared in a block of the body.
pub(super) struct Helper {
    name: String,
    item: syn::ItemFn,
    /// Its parameters, or `None` when its signature was reported (calls then report nothing).
    params: Option<Vec<(syn::Ident, STy)>>,
    ret: Option<STy>,
    /// How many helpers are visible inside it: those declared before its block ended.
    visible: usize,
}

/// The inlining in progress of one helper call.
pub(super) struct Frame {
    /// The local its result goes to (`None` for a helper returning nothing).
    result: Option<usize>,
    /// Whether its body has a `return` (it is then wrapped in a loop to leave).
    returns: bool,
}

impl Checker<'_> {
    /// Declares the helpers among `stmts` (visible in the whole block, as items are in Rust);
    /// returns the mark [`Checker::forget_helpers`] takes at the block's end.
    pub(super) fn declare_helpers(&mut self, stmts: &[Stmt]) -> usize {
        let mark = self.helpers.len();
        let declared: Vec<&syn::ItemFn> = stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Item(syn::Item::Fn(f)) => Some(f),
                _ => None,
            })
            .collect();
        let visible = mark + declared.len();
        for f in declared {
            let (params, ret) = match self.helper_signature(&f.sig) {
                Some((p, r)) => (Some(p), r),
                None => (None, None),
            };
            self.helpers.push(Rc::new(Helper {
                name: f.sig.ident.to_string(),
                item: f.clone(),
                params,
                ret,
                visible,
            }));
        }
        mark
    }

    pub(super) fn forget_helpers(&mut self, mark: usize) {
        self.helpers.truncate(mark);
    }

    /// The helper `name` names here, unless a local shadows it.
    pub(super) fn helper(&self, func: &Expr) -> Option<Rc<Helper>> {
        let Expr::Path(p) = super::strip(func) else {
            return None;
        };
        let name = super::path_ident(p)?.to_string();
        if self.lookup_local(&name).is_some() {
            return None;
        }
        self.helpers.iter().rev().find(|h| h.name == name).cloned()
    }

    /// The parameter and return types of a helper, each a scalar of the body; `None` after
    /// reporting what is not.
    fn helper_signature(&mut self, sig: &syn::Signature) -> Option<HelperSig> {
        let mut errors = Errors::default();
        if !sig.generics.params.is_empty()
            || sig.asyncness.is_some()
            || sig.unsafety.is_some()
            || sig.abi.is_some()
            || sig.variadic.is_some()
        {
            errors.push(syn::Error::new_spanned(
                &sig.ident,
                "a helper function in a kernel body is a plain `fn` with scalar parameters: no generics, `async`, `unsafe` or `extern`",
            ));
        }
        let mut params = Vec::new();
        for input in &sig.inputs {
            let FnArg::Typed(pt) = input else {
                errors.push(syn::Error::new_spanned(
                    input,
                    "a helper function cannot take `self`",
                ));
                continue;
            };
            let ident = match &*pt.pat {
                Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
                other => {
                    errors.push(syn::Error::new_spanned(
                        other,
                        "a helper's parameter must be a plain name (`x: f32`)",
                    ));
                    continue;
                }
            };
            match scalar_type(&pt.ty) {
                Some(t) => params.push((ident, t)),
                None => errors.push(syn::Error::new_spanned(
                    &pt.ty,
                    format!("a helper's parameters have one of the types {SCALARS}: pass slice elements, not slices"),
                )),
            }
        }
        let ret = match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => match scalar_type(ty) {
                Some(t) => Some(t),
                None => {
                    errors.push(syn::Error::new_spanned(
                        ty,
                        format!("a helper returns one of the types {SCALARS}, or nothing"),
                    ));
                    None
                }
            },
        };
        match errors.finish() {
            Ok(()) => Some((params, ret)),
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    /// The call `c` of helper `h`, inlined: its statements, and its result as the block's
    /// value (`None` as the value for a helper that returns nothing). `None` after an error.
    pub(super) fn inline(
        &mut self,
        h: &Rc<Helper>,
        c: &syn::ExprCall,
    ) -> Option<(Vec<TStmt>, Option<TExpr>)> {
        // A helper whose signature was reported: its calls are part of that mistake.
        let params = h.params.clone()?;
        let args: Vec<Option<TExpr>> = c.args.iter().map(|a| self.value(a)).collect();
        if self.inlining.iter().any(|n| *n == h.name) {
            let chain = self.inlining.join("` → `");
            return self.err_at(&c.func, format!(
                "`{}` calls itself (through `{chain}` → `{}`): a helper is inlined at every call, so it cannot be recursive; write the recursion as a loop",
                h.name, h.name
            ));
        }
        if args.len() != params.len() {
            return self.err_at(
                &c,
                format!("`{}` takes {} argument(s)", h.name, params.len()),
            );
        }
        let mut stmts = Vec::new();
        let mut bound = Vec::new();
        for ((a, v), (ident, t)) in c.args.iter().zip(args).zip(&params) {
            let var = self.known(*t);
            if let Some(v) = &v {
                self.expect(
                    v.ty,
                    var,
                    &a,
                    &format!("parameter `{ident}` of `{}`", h.name),
                );
            }
            let local = self.new_local(var);
            bound.push((ident.to_string(), local));
            if let Some(value) = v {
                stmts.push(TStmt::Assign {
                    place: Place::Local(local),
                    op: None,
                    value,
                });
            }
        }
        // The helper's own context: its parameters, no loops, the helpers visible where it is
        // declared; its mistakes are reported at its first call only.
        let result_var = h.ret.map(|t| self.known(t));
        let result = result_var.map(|v| self.new_local(v));
        let first = self.checked_helpers.insert(h.name.clone());
        let saved_errors = (!first).then(|| std::mem::take(&mut self.errors));
        let (reqs, casts) = (self.reqs.len(), self.casts.len());
        let hidden = self.helpers.split_off(h.visible.min(self.helpers.len()));
        let scopes = std::mem::replace(
            &mut self.scopes,
            vec![bound.into_iter().collect::<HashMap<_, _>>()],
        );
        let loops = std::mem::take(&mut self.loops);
        let ret = std::mem::replace(&mut self.ret, result_var);
        let frame = self.frame.replace(Frame {
            result,
            returns: false,
        });
        let hide = std::mem::replace(&mut self.hide_params, true);
        self.inlining.push(h.name.clone());

        let body = self.helper_body(&h.item.block, result);

        self.inlining.pop();
        self.hide_params = hide;
        let returns = self.frame.take().is_some_and(|f| f.returns);
        self.frame = frame;
        self.ret = ret;
        self.loops = loops;
        self.scopes = scopes;
        self.helpers.extend(hidden);
        if let Some(saved) = saved_errors {
            self.errors = saved;
            self.reqs.truncate(reqs);
            self.casts.truncate(casts);
        }
        if returns {
            let mut body = body;
            body.push(TStmt::Break(0));
            stmts.push(TStmt::Loop { body });
        } else {
            stmts.extend(body);
        }
        let value = match (result, result_var) {
            (Some(local), Some(ty)) => Some(TExpr {
                kind: TExprKind::Local(local),
                ty,
            }),
            _ => None,
        };
        Some((stmts, value))
    }

    /// The helper's statements, its tail assigned to `result`.
    fn helper_body(&mut self, block: &syn::Block, result: Option<usize>) -> Vec<TStmt> {
        let mark = self.declare_helpers(&block.stmts);
        let n = block.stmts.len();
        let mut out = Vec::new();
        for (i, s) in block.stmts.iter().enumerate() {
            match (s, result) {
                (Stmt::Expr(e, None), Some(local)) if i + 1 == n && !matches!(e, Expr::Loop(_)) => {
                    self.set_result(e, local, &mut out);
                }
                _ => self.stmt(s, &mut out),
            }
        }
        self.forget_helpers(mark);
        out
    }

    /// The inlined helper's result local := `e` (its tail or a `return`'s value), checked
    /// against the helper's return type.
    fn set_result(&mut self, e: &Expr, local: usize, out: &mut Vec<TStmt>) {
        if let Some(v) = self.value(e) {
            let rv = self.locals[local];
            self.expect(v.ty, rv, &e, "the helper's return type");
            out.push(TStmt::Assign {
                place: Place::Local(local),
                op: None,
                value: v,
            });
        }
    }

    /// `return` inside a helper being inlined: the result, then out of the loop around the
    /// inlined body. `false` outside a helper.
    pub(super) fn helper_return(&mut self, r: &syn::ExprReturn, out: &mut Vec<TStmt>) -> bool {
        let Some(result) = self.frame.as_ref().map(|f| f.result) else {
            return false;
        };
        match (&r.expr, result) {
            (Some(e), Some(local)) => self.set_result(e, local, out),
            (None, None) => {}
            (Some(e), None) => self.report(
                &e,
                "this helper returns nothing: write `return;`, or declare its return type",
            ),
            (None, Some(_)) => self.report(&r, "`return` needs a value here: the helper's result"),
        }
        out.push(TStmt::Break(self.loops.len() as u32));
        if let Some(f) = &mut self.frame {
            f.returns = true;
        }
        true
    }

    /// A helper call used as a value.
    pub(super) fn helper_value(&mut self, h: &Rc<Helper>, c: &syn::ExprCall) -> Option<TExpr> {
        if h.params.is_some() && h.ret.is_none() {
            return self.err_at(
                &c,
                format!(
                    "`{}` returns nothing: call it as a statement, `{}(...);`",
                    h.name, h.name
                ),
            );
        }
        let (stmts, value) = self.inline(h, c)?;
        let value = value?;
        let ty = value.ty;
        Some(TExpr {
            kind: TExprKind::Block(TBlock {
                stmts,
                value: Box::new(value),
            }),
            ty,
        })
    }
}

impl Checker<'_> {
    /// The error for a kernel parameter named inside a helper, which cannot see it (`None` when
    /// `name` is not one, or outside a helper).
    pub(super) fn hidden_param(&mut self, at: &dyn quote::ToTokens, name: &str) -> Option<()> {
        if !self.hide_params || !self.sig.params.iter().any(|p| p.ident == name) {
            return None;
        }
        self.report(
            at,
            format!(
                "`{name}` is the kernel's parameter, which a helper `fn` cannot see (as in Rust): \
                 pass the value it needs as an argument"
            ),
        );
        Some(())
    }
}
