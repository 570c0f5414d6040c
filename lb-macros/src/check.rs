//! Name resolution, type inference and validation of the kernel body against the subset of Rust
//! that the GPU code generator understands (its rules and messages are `valid`'s), in one walk
//! over the syntax that builds the typed tree (`typed`) `lower` converts.
//!
//! Inference is unification over type variables, as in rustc: an unsuffixed literal gets an
//! "integer" or "float" variable that the first concrete type it meets decides (`let mut acc =
//! 0.0; acc += a.values[nz];` makes `acc` an `f32`), and variables still undecided at the end
//! default to `i32` / `f64`. Like rustc, a method call needs its receiver's type at the point of
//! the call. The tree's nodes carry their variables, resolved once at the end (`Typed::types`).
//!
//! Every mistake is reported here, and once: a part already reported yields `None` (or an
//! `Error` node where the walk goes on past it), and an error's type agrees with everything.

mod helpers;
mod matching;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use lb_ptx::body::{AtomicOp, Lit, LocalId, Method, TileSetKind, UnaryOp};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{BinOp, Expr, Pat, Stmt, UnOp};

use crate::parse::{Role, Sig};
use crate::typed::{Array, Place, TBlock, TExpr, TExprKind, TStmt, Typed};
use crate::types::{Errors, STy};
use crate::valid::*;

/// The names a pattern binds, in order (iteratively: patterns nest without bound).
fn pattern_names<'p>(pat: &'p Pat, out: &mut Vec<&'p syn::PatIdent>) {
    let mut stack = vec![pat];
    while let Some(p) = stack.pop() {
        match p {
            Pat::Ident(pi) => {
                out.push(pi);
                if let Some((_, sub)) = &pi.subpat {
                    stack.push(sub);
                }
            }
            Pat::Tuple(t) => stack.extend(t.elems.iter().rev()),
            Pat::TupleStruct(t) => stack.extend(t.elems.iter().rev()),
            Pat::Slice(t) => stack.extend(t.elems.iter().rev()),
            Pat::Or(o) => stack.extend(o.cases.iter().rev()),
            Pat::Struct(st) => stack.extend(st.fields.iter().rev().map(|f| &*f.pat)),
            Pat::Reference(r) => stack.push(&r.pat),
            Pat::Paren(pp) => stack.push(&pp.pat),
            Pat::Type(pt) => stack.push(&pt.pat),
            _ => {}
        }
    }
}

type Var = crate::typed::TyVar;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Known(STy),
    /// An unsuffixed integer literal's type, not decided yet.
    Int,
    /// An unsuffixed float literal's type, not decided yet.
    Float,
    /// The type of something already reported as an error: agrees with everything, so one
    /// mistake is reported once.
    Poison,
}

#[derive(Clone, Copy, Debug)]
enum Slot {
    Link(Var),
    Root(Kind),
}

struct Checker<'a> {
    sig: &'a Sig,
    slots: Vec<Slot>,
    locals: Vec<Var>,
    scopes: Vec<HashMap<String, LocalId>>,
    reqs: Vec<(Var, Req, TokenStream, &'static str)>,
    casts: Vec<(Var, STy, TokenStream)>,
    ret: Option<Var>,
    /// The loops around the statement being checked, innermost last, with their labels; a
    /// helper function's body starts a list of its own (`break` cannot leave a function).
    loops: Vec<Option<String>>,
    /// The helper functions visible here (`helpers`), innermost block last.
    helpers: Vec<Rc<helpers::Helper>>,
    /// Helpers whose body was checked once (their mistakes are reported at the first call).
    checked_helpers: HashSet<String>,
    /// The helpers being inlined, outermost first (a call of one of them is recursion).
    inlining: Vec<String>,
    /// The innermost helper being inlined.
    frame: Option<helpers::Frame>,
    /// Inside a helper: the kernel's parameters are out of scope.
    hide_params: bool,
    errors: Errors,
}

/// Checks the function body and builds its typed tree; every error is collected and reported
/// together.
pub fn check(sig: &Sig, block: &syn::Block) -> syn::Result<Typed> {
    let mut c = Checker {
        sig,
        slots: Vec::new(),
        locals: Vec::new(),
        scopes: vec![HashMap::new()],
        reqs: Vec::new(),
        casts: Vec::new(),
        ret: None,
        loops: Vec::new(),
        helpers: Vec::new(),
        checked_helpers: HashSet::new(),
        inlining: Vec::new(),
        frame: None,
        hide_params: false,
        errors: Errors::default(),
    };
    c.ret = sig.ret.map(|t| c.known(t));
    let stmts = c.fn_body(block);
    c.finish(stmts)
}

/// Whether the function's tail expression is its return value rather than a statement.
fn tail_is_value(sig: &Sig, block: &syn::Block) -> bool {
    sig.ret.is_some() && matches!(block.stmts.last(), Some(Stmt::Expr(_, None)))
}

impl Checker<'_> {
    // ---- type variables ----

    fn fresh(&mut self, kind: Kind) -> Var {
        self.slots.push(Slot::Root(kind));
        self.slots.len() - 1
    }

    fn known(&mut self, t: STy) -> Var {
        self.fresh(Kind::Known(t))
    }

    fn find(&self, mut v: Var) -> Var {
        while let Slot::Link(next) = self.slots[v] {
            v = next;
        }
        v
    }

    fn kind(&self, v: Var) -> Kind {
        match self.slots[self.find(v)] {
            Slot::Root(k) => k,
            Slot::Link(_) => Kind::Poison,
        }
    }

    fn unify(&mut self, a: Var, b: Var) -> Result<(), (Kind, Kind)> {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return Ok(());
        }
        let (ka, kb) = (self.kind(ra), self.kind(rb));
        let merged = match (ka, kb) {
            (Kind::Poison, _) | (_, Kind::Poison) => Kind::Poison,
            (Kind::Known(x), Kind::Known(y)) if x == y => ka,
            (Kind::Known(t), Kind::Int) | (Kind::Int, Kind::Known(t)) if t.is_int() => {
                Kind::Known(t)
            }
            (Kind::Known(t), Kind::Float) | (Kind::Float, Kind::Known(t)) if t.is_float() => {
                Kind::Known(t)
            }
            (Kind::Int, Kind::Int) | (Kind::Float, Kind::Float) => ka,
            _ => return Err((ka, kb)),
        };
        self.slots[ra] = Slot::Link(rb);
        self.slots[rb] = Slot::Root(merged);
        Ok(())
    }

    /// Unifies `found` with `expected`, reporting `what` at `span` when they disagree.
    fn expect(&mut self, found: Var, expected: Var, at: &dyn ToTokens, what: &str) {
        if let Err((f, e)) = self.unify(found, expected) {
            self.errors.push(syn::Error::new_spanned(
                at,
                format!(
                    "mismatched types: {what} expects `{}`, found {}: convert with `as`",
                    describe(e),
                    describe_found(f)
                ),
            ));
        }
    }

    /// An error covering all of `node` (a `Span` alone covers only its first token on stable).
    /// Records an error where no value follows.
    fn report(&mut self, node: &dyn ToTokens, msg: impl std::fmt::Display) {
        self.errors
            .push(syn::Error::new_spanned(node, msg.to_string()));
    }

    fn err_at<T>(&mut self, node: &dyn ToTokens, msg: impl std::fmt::Display) -> Option<T> {
        self.errors
            .push(syn::Error::new_spanned(node, msg.to_string()));
        None
    }

    fn node(&mut self, kind: TExprKind, t: STy) -> TExpr {
        let ty = self.known(t);
        TExpr { kind, ty }
    }

    /// `e`, or where it was already reported, a node standing for it, so the walk can go on
    /// with the expression around it.
    fn or_error(&mut self, e: Option<TExpr>) -> TExpr {
        e.unwrap_or_else(|| TExpr {
            kind: TExprKind::Error,
            ty: self.fresh(Kind::Poison),
        })
    }

    /// The decided type of a method's receiver, or an error like rustc's E0689.
    fn receiver_type(&mut self, v: Var, span: &dyn ToTokens, method: &str) -> Option<STy> {
        match self.kind(v) {
            Kind::Known(t) => Some(t),
            Kind::Poison => None,
            Kind::Int => {
                self.err_at(span, format!("cannot call `{method}` on an integer whose type is not known yet: add a suffix (`2i32`) or annotate the `let` (`let x: i32 = ...`)"))
            },
            Kind::Float => {
                self.err_at(span, format!("cannot call `{method}` on a float whose type is not known yet: add a suffix (`2.0f32`) or annotate the `let` (`let x: f32 = ...`)"))
            },
        }
    }

    // ---- names ----

    fn lookup_local(&self, name: &str) -> Option<LocalId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn lookup_param(&self, name: &str) -> Option<usize> {
        if self.hide_params {
            return None;
        }
        self.sig.params.iter().position(|p| p.ident == name)
    }

    /// Whether `name` is a parameter whose declaration was already reported.
    fn rejected(&self, name: &str) -> bool {
        if self.hide_params {
            return false;
        }
        self.sig.rejected.iter().any(|r| r == name)
    }

    fn new_local(&mut self, v: Var) -> LocalId {
        self.locals.push(v);
        self.locals.len() - 1
    }

    fn bind(&mut self, ident: &syn::Ident, v: Var) -> LocalId {
        let id = self.new_local(v);
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(ident.to_string(), id);
        }
        id
    }

    // ---- statements ----

    fn fn_body(&mut self, block: &syn::Block) -> Vec<TStmt> {
        let tail = tail_is_value(self.sig, block);
        let n = block.stmts.len();
        let mut out = Vec::new();
        self.declare_helpers(&block.stmts);
        for (i, s) in block.stmts.iter().enumerate() {
            match s {
                // A tail `loop` is left only by `return` (rustc types it `!`): a statement.
                Stmt::Expr(e, None) if tail && i + 1 == n && !matches!(e, Expr::Loop(_)) => {
                    if let Some(v) = self.value(e) {
                        if let Some(r) = self.ret {
                            self.expect(v.ty, r, &e, "the function's return type");
                        }
                        out.push(TStmt::Return(Some(v)));
                    }
                }
                _ => self.stmt(s, &mut out),
            }
        }
        out
    }

    /// A block's statements in a scope of their own, appended to `out`.
    fn block_stmts(&mut self, block: &syn::Block, out: &mut Vec<TStmt>) {
        self.scopes.push(HashMap::new());
        let mark = self.declare_helpers(&block.stmts);
        for s in &block.stmts {
            self.stmt(s, out);
        }
        self.forget_helpers(mark);
        self.scopes.pop();
    }

    fn block(&mut self, block: &syn::Block) -> Vec<TStmt> {
        let mut out = Vec::new();
        self.block_stmts(block, &mut out);
        out
    }

    fn stmt(&mut self, s: &Stmt, out: &mut Vec<TStmt>) {
        match s {
            Stmt::Local(l) => self.local(l, out),
            // Declared when its block was entered, inlined at its calls.
            Stmt::Item(syn::Item::Fn(_)) => {}
            Stmt::Item(item) => {
                self.report(&item, "items other than helper `fn`s (`const`, `use`, `struct`, …) cannot be declared inside a kernel body: declare them outside and pass values as parameters");
            }
            // A lone `;` (syn's empty verbatim expression): an empty statement, as in Rust.
            Stmt::Expr(Expr::Verbatim(tokens), Some(_)) if tokens.is_empty() => {}
            Stmt::Expr(e, _) => self.stmt_expr(e, out),
            Stmt::Macro(m) => {
                self.report(&m, MACRO_MSG);
            }
        }
    }

    fn local(&mut self, l: &syn::Local, out: &mut Vec<TStmt>) {
        let Some(init) = &l.init else {
            self.report(&l, "a `let` in a kernel body needs a value: `let x = 0.0;`");
            return;
        };
        if let Some((_, diverge)) = &init.diverge {
            self.report(
                &diverge,
                "`let ... else` is not supported in a kernel body: use `if`",
            );
        }
        let (pat, annot) = match &l.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        if !matches!(pat, Pat::Wild(_))
            && !matches!(pat, Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none())
        {
            if !self.tuple_let(pat, &init.expr, out) {
                self.destructuring(pat, &init.expr);
            }
            return;
        }
        let v = self.value(&init.expr);
        let annot_var = match annot {
            Some(ty) => match scalar_type(ty) {
                Some(t) => Some(self.known(t)),
                None => self.err_at(
                    &ty,
                    format!(
                        "unsupported type `{}`: locals have one of the types {SCALARS}",
                        quote::quote!(#ty)
                    ),
                ),
            },
            None => None,
        };
        if let (Some(v), Some(a)) = (&v, annot_var) {
            self.expect(v.ty, a, &init.expr, "the annotation");
        }
        let var = match (annot_var, &v) {
            (Some(a), _) => a,
            (None, Some(v)) => v.ty,
            (None, None) => self.fresh(Kind::Poison),
        };
        let local = match pat {
            Pat::Ident(pi) => Some(self.bind(&pi.ident, var)),
            _ => None,
        };
        if let Some(value) = v {
            out.push(match local {
                Some(local) => TStmt::Assign {
                    place: Place::Local(local),
                    op: None,
                    value,
                },
                None => TStmt::Expr(value),
            });
        }
    }

    /// `let (p, q) = (a, b);`: a tuple pattern of names and `_` (nested tuples too) against a
    /// tuple of the same shape. Every value is evaluated into a temporary first, left to right,
    /// and only then bound, so `let (a, b) = (b, a);` swaps as in Rust. Returns `false`, having
    /// checked nothing, for any other pattern or initializer (then [`Self::destructuring`]
    /// reports it).
    fn tuple_let(&mut self, pat: &Pat, init: &Expr, out: &mut Vec<TStmt>) -> bool {
        let mut pairs = Vec::new();
        if !matches!(pat, Pat::Tuple(_)) || !tuple_pairs(pat, init, &mut pairs) {
            return false;
        }
        let mut bound = Vec::with_capacity(pairs.len());
        for (leaf, value) in pairs {
            let Some(v) = self.value(value) else {
                // Reported; the names still exist, so their uses report nothing more.
                let poison = self.fresh(Kind::Poison);
                bound.push((leaf, None, poison));
                continue;
            };
            let (ty, temp) = (v.ty, self.new_local(v.ty));
            out.push(TStmt::Assign {
                place: Place::Local(temp),
                op: None,
                value: v,
            });
            bound.push((leaf, Some(temp), ty));
        }
        for (leaf, temp, ty) in bound {
            let Pat::Ident(pi) = leaf else { continue };
            let local = self.bind(&pi.ident, ty);
            if let Some(temp) = temp {
                out.push(TStmt::Assign {
                    place: Place::Local(local),
                    op: None,
                    value: TExpr {
                        kind: TExprKind::Local(temp),
                        ty,
                    },
                });
            }
        }
        true
    }

    /// `let (p, q) = (a, b);` and other patterns: one error for the one mistake. The names the
    /// pattern binds are declared as errors, so their uses report nothing more, and a tuple or
    /// array initializer is part of the same mistake: only its elements are checked, for
    /// mistakes of their own.
    fn destructuring(&mut self, pat: &Pat, init: &Expr) {
        self.report(
            pat,
            "only simple names can be bound in a kernel body: destructuring is not supported; \
             write one `let` per value (`let p = ...; let q = ...;`)",
        );
        match init {
            Expr::Tuple(syn::ExprTuple { elems, .. })
            | Expr::Array(syn::ExprArray { elems, .. }) => elems.iter().for_each(|e| {
                self.value(e);
            }),
            e => {
                self.value(e);
            }
        }
        let mut names = Vec::new();
        pattern_names(pat, &mut names);
        for pi in names {
            let poison = self.fresh(Kind::Poison);
            self.bind(&pi.ident, poison);
        }
    }

    fn stmt_expr(&mut self, e: &Expr, out: &mut Vec<TStmt>) {
        match e {
            Expr::Assign(a) => self.assign(&a.left, &a.right, None, e, out),
            Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, &b.right, Some(&b.op), e, out)
            }
            Expr::If(i) => {
                if let Some(s) = self.if_stmt(i) {
                    out.push(s);
                }
            }
            Expr::ForLoop(f) => self.for_loop(f, out),
            Expr::While(w) => self.while_loop(w, out),
            Expr::Match(m) => self.match_stmt(m, out),
            Expr::Loop(l) => self.endless_loop(l, out),
            Expr::Break(b) => {
                self.break_continue(b.label.as_ref(), b.expr.is_some(), &b, true, out)
            }
            Expr::Continue(c) => self.break_continue(c.label.as_ref(), false, &c, false, out),
            // Its scope ends with it, so its statements can join the enclosing list.
            Expr::Block(b) if b.label.is_none() => self.block_stmts(&b.block, out),
            Expr::Return(r) => self.ret(r, out),
            Expr::MethodCall(m) if m.method == "push" => self.push(m, out),
            Expr::Call(c) if self.helper(&c.func).is_some() => {
                if let Some(h) = self.helper(&c.func) {
                    if let Some((stmts, _)) = self.inline(&h, c) {
                        out.extend(stmts);
                    }
                }
            }
            // Anything else is evaluated for its side effects (an atomic whose old value is not
            // needed); pure expressions are harmless.
            _ => {
                if let Some(v) = self.value(e) {
                    out.push(TStmt::Expr(v));
                }
            }
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Option<TStmt> {
        let cond = self.cond(&i.cond);
        let then = self.block(&i.then_branch);
        let els = match &i.else_branch {
            None => Some(Vec::new()),
            Some((_, els)) => match &**els {
                Expr::Block(b) => Some(self.block(&b.block)),
                Expr::If(ei) => self.if_stmt(ei).map(|s| vec![s]),
                other => self.err_at(&other, "expected a block or `if` after `else`"),
            },
        };
        Some(TStmt::If {
            cond: cond?,
            then,
            els: els?,
        })
    }

    fn cond(&mut self, cond: &Expr) -> Option<TExpr> {
        let v = self.value(cond)?;
        let b = self.known(STy::Bool);
        self.expect(v.ty, b, &cond, "an `if` condition");
        Some(v)
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop, out: &mut Vec<TStmt>) {
        let range = match strip(&f.expr) {
            Expr::Range(r) if r.start.is_some() && r.end.is_some() => r,
            other => {
                self.report(&other, "a kernel `for` loop must run over a bounded integer range: `for i in a..b` or `for i in a..=b`");
                return;
            }
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            return;
        };
        let sv = self.value(start);
        let ev = self.value(end);
        let var = match (&sv, &ev) {
            (Some(s), Some(e)) => {
                self.expect(e.ty, s.ty, &end, "the range's start");
                self.reqs
                    .push((s.ty, Req::Int, range.to_token_stream(), "a `for` range"));
                s.ty
            }
            _ => self.fresh(Kind::Poison),
        };
        self.scopes.push(HashMap::new());
        let bound = match &*f.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                Some(self.bind(&pi.ident, var))
            }
            Pat::Wild(_) => Some(self.new_local(var)),
            other => self.err_at(
                &other,
                "a `for` loop variable must be a simple name: `for i in a..b`",
            ),
        };
        let body = self.loop_body(f.label.as_ref(), &f.body, Vec::new());
        self.scopes.pop();
        if let (Some(var), Some(start), Some(end)) = (bound, sv, ev) {
            out.push(TStmt::For {
                var,
                start,
                end,
                inclusive: matches!(range.limits, syn::RangeLimits::Closed(_)),
                body,
            });
        }
    }

    /// A loop's body in a scope of its own, after `first` (a `while`'s test), with the loop
    /// (and its label) visible to the `break`s and `continue`s inside.
    fn loop_body(
        &mut self,
        label: Option<&syn::Label>,
        body: &syn::Block,
        first: Vec<TStmt>,
    ) -> Vec<TStmt> {
        self.loops.push(label.map(|l| l.name.ident.to_string()));
        let mut out = first;
        self.block_stmts(body, &mut out);
        self.loops.pop();
        out
    }

    /// `while cond { body }`: a loop whose body starts by leaving it when `cond` is false.
    fn while_loop(&mut self, w: &syn::ExprWhile, out: &mut Vec<TStmt>) {
        let cond = self.cond(&w.cond);
        let first = match cond {
            Some(cond) => {
                let ty = cond.ty;
                let not = TExpr {
                    kind: TExprKind::Unary {
                        op: UnaryOp::Not,
                        arg: Box::new(cond),
                    },
                    ty,
                };
                vec![TStmt::If {
                    cond: not,
                    then: vec![TStmt::Break(0)],
                    els: Vec::new(),
                }]
            }
            None => Vec::new(),
        };
        let body = self.loop_body(w.label.as_ref(), &w.body, first);
        out.push(TStmt::Loop { body });
    }

    /// `loop { body }`, left by `break` or `return` (or never: a GPU thread that never leaves it
    /// hangs the launch, as in CUDA).
    fn endless_loop(&mut self, l: &syn::ExprLoop, out: &mut Vec<TStmt>) {
        let body = self.loop_body(l.label.as_ref(), &l.body, Vec::new());
        out.push(TStmt::Loop { body });
    }

    /// `break` (`is_break`) or `continue`, with or without a label: the loop it leaves, counted
    /// from the innermost.
    fn break_continue(
        &mut self,
        label: Option<&syn::Lifetime>,
        has_value: bool,
        at: &dyn ToTokens,
        is_break: bool,
        out: &mut Vec<TStmt>,
    ) {
        let word = if is_break { "break" } else { "continue" };
        if has_value {
            self.report(at, "`break` with a value is not supported in a kernel body: assign the value to a local declared before the loop, then `break`");
            return;
        }
        let depth = match label {
            None if self.loops.is_empty() => {
                self.report(at, format!("`{word}` outside of a loop"));
                return;
            }
            None => 0,
            Some(l) => {
                let name = l.ident.to_string();
                match self
                    .loops
                    .iter()
                    .rev()
                    .position(|x| x.as_deref() == Some(name.as_str()))
                {
                    Some(d) => d,
                    None => {
                        self.report(l, format!("no enclosing loop is labeled `{l}` here"));
                        return;
                    }
                }
            }
        };
        out.push(if is_break {
            TStmt::Break(depth as u32)
        } else {
            TStmt::Continue(depth as u32)
        });
    }

    fn ret(&mut self, r: &syn::ExprReturn, out: &mut Vec<TStmt>) {
        if self.helper_return(r, out) {
            return;
        }
        match (&r.expr, self.ret) {
            (Some(e), Some(rv)) => {
                if let Some(v) = self.value(e) {
                    self.expect(v.ty, rv, &e, "the function's return type");
                    out.push(TStmt::Return(Some(v)));
                }
            }
            (None, None) => out.push(TStmt::Return(None)),
            (Some(e), None) => {
                self.report(&e, "this function has no `reduce`, so it returns nothing: write `return;`, or add `reduce` and a return type");
            }
            (None, Some(_)) => {
                self.report(
                    &r,
                    "`return` needs a value here: the atom's contribution to the reduction",
                );
            }
        }
    }

    /// `lhs = rhs;` and `lhs op= rhs;`.
    fn assign(
        &mut self,
        lhs: &Expr,
        rhs: &Expr,
        op: Option<&BinOp>,
        whole: &Expr,
        out: &mut Vec<TStmt>,
    ) {
        let value = self.value(rhs);
        let (place, lv) = self.place(strip(lhs));
        let (Some(lv), Some(value)) = (lv, value) else {
            return;
        };
        let rv = value.ty;
        match op.and_then(compound_op) {
            None => self.expect(rv, lv, &rhs, "the assigned place"),
            Some(OpClass::Shift) => {
                self.reqs
                    .push((lv, Req::Int, whole.to_token_stream(), "a shift"));
                self.reqs
                    .push((rv, Req::Int, rhs.to_token_stream(), "a shift amount"));
            }
            Some(class) => {
                self.expect(rv, lv, &rhs, "the assigned place");
                let (req, what) = requirement(class, op);
                self.reqs.push((lv, req, whole.to_token_stream(), what));
            }
        }
        if let Some(place) = place {
            out.push(TStmt::Assign {
                place,
                op: op.and_then(compound),
                value,
            });
        }
    }

    /// The place an assignment stores to, and its type (which a mistake in the index leaves
    /// known, so the assigned value is still checked against it).
    fn place(&mut self, lhs: &Expr) -> (Option<Place>, Option<Var>) {
        match lhs {
            Expr::Path(p) => match path_ident(p) {
                Some(ident) => match self.lookup_local(&ident.to_string()) {
                    Some(id) => (Some(Place::Local(id)), Some(self.locals[id])),
                    None if self.rejected(&ident.to_string()) => (None, None),
                    None if self.lookup_param(&ident.to_string()).is_some() => (None, self.err_at(&lhs,
                        format!("kernel parameters are read-only: copy it into a local first (`let mut {ident} = {ident};`)"),
                    )),
                    None => (None, self.err_at(&lhs, format!("cannot find a local `{ident}` in this kernel"))),
                },
                None => (None, self.err_at(&lhs, ASSIGN_TARGET_MSG)),
            },
            Expr::Index(ix) => match self.array(&ix.expr) {
                Some((array @ Array::Slice { mutable: true, .. }, elem)) => {
                    let index = self.index_expr(&ix.index);
                    let v = self.known(elem);
                    (index.map(|index| Place::Element { array, index, elem }), Some(v))
                }
                Some((Array::Slice { param, .. }, elem)) => (None, self.err_at(&ix.expr,
                    format!("`{}` is a read-only input: declare it `&mut [{}]` to store into it", self.sig.params[param].ident, elem.name()),
                )),
                Some((Array::Field { .. }, _)) => (None, self.err_at(&ix.expr, "the tile set is read-only: store into a `&mut [T]` parameter")),
                None => (None, None),
            },
            _ => (None, self.err_at(&lhs, ASSIGN_TARGET_MSG)),
        }
    }

    // ---- expressions ----

    /// Checks an expression used as a value; `None` after an error.
    fn value(&mut self, e: &Expr) -> Option<TExpr> {
        match e {
            Expr::Lit(l) => self.lit(&l.lit),
            Expr::Paren(p) => self.value(&p.expr),
            Expr::Group(g) => self.value(&g.expr),
            Expr::Path(p) => self.path_value(p),
            Expr::Unary(u) => {
                let arg = self.value(&u.expr)?;
                let op = match u.op {
                    UnOp::Neg(_) => {
                        self.reqs.push((arg.ty, Req::Signed, e.to_token_stream(), "negation"));
                        UnaryOp::Neg
                    }
                    UnOp::Not(_) => {
                        self.reqs.push((arg.ty, Req::IntOrBool, e.to_token_stream(), "`!`"));
                        UnaryOp::Not
                    }
                    _ => return self.err_at(&e, "dereferencing is not supported in a kernel body: index slices directly (`s[i]`)"),
                };
                let ty = arg.ty;
                Some(TExpr {
                    kind: TExprKind::Unary {
                        op,
                        arg: Box::new(arg),
                    },
                    ty,
                })
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Cast(c) => self.cast(c, e),
            Expr::Index(ix) => {
                let (array, elem) = self.array(&ix.expr)?;
                let index = self.index_expr(&ix.index);
                let index = Box::new(self.or_error(index));
                Some(self.node(TExprKind::Load { array, index }, elem))
            }
            Expr::Field(f) => self.field_value(f),
            Expr::MethodCall(m) => self.method(m),
            Expr::Call(c) => match self.helper(&c.func) {
                Some(h) => self.helper_value(&h, c),
                None => self.call(c),
            },
            Expr::If(i) => self.if_value(i),
            Expr::Match(m) => self.match_value(m),
            Expr::Assign(_) => self.err_at(
                &e,
                "an assignment is a statement in a kernel body: end it with `;`",
            ),
            other => self.err_at(&anchor(other), unsupported(other)),
        }
    }

    fn lit(&mut self, lit: &syn::Lit) -> Option<TExpr> {
        match lit {
            syn::Lit::Bool(b) => Some(self.node(TExprKind::Lit(Lit::Bool(b.value)), STy::Bool)),
            syn::Lit::Int(i) => {
                let Some(v) = i.base10_parse::<i128>().ok() else {
                    return self.err_at(&i, "integer literal too large for a kernel type");
                };
                let kind = TExprKind::Lit(Lit::Int(v));
                match i.suffix() {
                    "" => Some(TExpr { kind, ty: self.fresh(Kind::Int) }),
                    s => match STy::from_name(s) {
                        Some(t) if t != STy::Bool => Some(self.node(kind, t)),
                        _ => self.err_at(&i, format!("`{s}` is not a kernel type: use one of {SCALARS}")),
                    },
                }
            }
            syn::Lit::Float(f) => {
                let v = self.errors.take(f.base10_parse::<f64>())?;
                let kind = TExprKind::Lit(Lit::Float(v));
                match f.suffix() {
                    "" => Some(TExpr { kind, ty: self.fresh(Kind::Float) }),
                    "f32" => Some(self.node(kind, STy::F32)),
                    "f64" => Some(self.node(kind, STy::F64)),
                    s => self.err_at(&f, format!("`{s}` is not a float type: use `f32` or `f64`")),
                }
            }
            other => self.err_at(&other, "string, character and byte literals are not supported in a kernel body: it works on numbers and `bool`s"),
        }
    }

    fn path_value(&mut self, p: &syn::ExprPath) -> Option<TExpr> {
        if let Some(ident) = path_ident(p) {
            let name = ident.to_string();
            if let Some(id) = self.lookup_local(&name) {
                return Some(TExpr {
                    kind: TExprKind::Local(id),
                    ty: self.locals[id],
                });
            }
            let Some(i) = self.lookup_param(&name) else {
                if self.rejected(&name) || self.hidden_param(&ident, &name).is_some() {
                    return None;
                }
                return self.err_at(&ident,
                    format!("cannot find `{name}` in this kernel: a kernel body can use its parameters and locals only (pass constants as parameters)"),
                );
            };
            return match &self.sig.params[i].role {
                Role::Index(_) => Some(self.node(TExprKind::Param(i), STy::Usize)),
                Role::Scalar(t) => Some(self.node(TExprKind::Param(i), *t)),
                Role::Slice { .. } => self.err_at(&ident, format!("`{name}` is a slice: index it (`{name}[i]`) or take its length (`{name}.len()`)")),
                Role::TileSet { kind, .. } => { let fields = fields_of(*kind); self.err_at(&ident, format!("`{name}` is the tile set: read one of its fields ({fields})")) }
                Role::Queue => self.err_at(&ident, format!("`{name}` is a queue: the only thing a kernel does with it is `{name}.push(v)`")),
            };
        }
        // `f32::INFINITY`, `u32::MAX`, …
        if p.qself.is_none() && p.path.segments.len() == 2 {
            let ty = p.path.segments[0].ident.to_string();
            let c = p.path.segments[1].ident.to_string();
            if let Some(t) = STy::from_name(&ty) {
                if let Some(lit) = assoc_const(t, &c) {
                    return Some(self.node(TExprKind::Lit(lit), t));
                }
            }
        }
        self.err_at(&p,
            "only parameters, locals and the constants `T::MIN`, `T::MAX`, `T::INFINITY`, `T::NEG_INFINITY` can be named in a kernel body",
        )
    }

    fn cast(&mut self, c: &syn::ExprCast, e: &Expr) -> Option<TExpr> {
        let src = self.value(&c.expr);
        let Some(t) = scalar_type(&c.ty) else {
            let ty = &c.ty;
            return self.err_at(
                &c.ty,
                format!(
                    "cannot cast to `{}`: the kernel types are {SCALARS}",
                    quote::quote!(#ty)
                ),
            );
        };
        if t == STy::Bool {
            return self.err_at(&c.ty, "cannot cast to `bool`: compare instead (`x != 0`)");
        }
        if let Some(s) = &src {
            self.casts.push((s.ty, t, e.to_token_stream()));
        }
        let arg = Box::new(self.or_error(src));
        Some(self.node(TExprKind::Cast(arg), t))
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Option<TExpr> {
        if compound_op(&b.op).is_some() {
            return self.err_at(&b, "compound assignment is a statement in a kernel body: write it on its own, ending with `;`");
        }
        let l = self.value(&b.left);
        let r = self.value(&b.right);
        let (l, r) = (l?, r?);
        let Some(op) = binop(&b.op) else {
            return self.err_at(&b.op, "this operator is not supported in a kernel body");
        };
        let class = op_class(&b.op);
        let ty = match class {
            OpClass::Logic => {
                let bl = self.known(STy::Bool);
                self.expect(l.ty, bl, &b.left, "`&&` / `||`");
                self.expect(r.ty, bl, &b.right, "`&&` / `||`");
                bl
            }
            OpClass::Shift => {
                self.reqs
                    .push((l.ty, Req::Int, b.left.to_token_stream(), "a shift"));
                self.reqs
                    .push((r.ty, Req::Int, b.right.to_token_stream(), "a shift amount"));
                l.ty
            }
            OpClass::Eq | OpClass::Ord => {
                self.expect(r.ty, l.ty, &b.right, "the comparison's left side");
                if class == OpClass::Ord {
                    self.reqs.push((
                        l.ty,
                        Req::Numeric,
                        b.to_token_stream(),
                        "an ordering comparison",
                    ));
                }
                self.known(STy::Bool)
            }
            OpClass::Arith | OpClass::Bit => {
                self.expect(r.ty, l.ty, &b.right, "the operator's left side");
                let (req, what) = requirement(class, Some(&b.op));
                self.reqs.push((l.ty, req, b.to_token_stream(), what));
                l.ty
            }
        };
        let (lhs, rhs) = (Box::new(l), Box::new(r));
        Some(TExpr {
            kind: TExprKind::Binary { op, lhs, rhs },
            ty,
        })
    }

    /// The array a `base[...]` indexes, and its element type.
    fn array(&mut self, base: &Expr) -> Option<(Array, STy)> {
        match strip(base) {
            Expr::Path(p) => {
                let Some(ident) = path_ident(p) else {
                    return self.err_at(&base, INDEXABLE_MSG);
                };
                let name = ident.to_string();
                if self.lookup_local(&name).is_some() {
                    return self.err_at(&base, format!("`{name}` is a local scalar and cannot be indexed: index a slice parameter"));
                }
                let Some(i) = self.lookup_param(&name) else {
                    if self.rejected(&name) || self.hidden_param(&base, &name).is_some() {
                        return None;
                    }
                    return self.err_at(
                        &base,
                        format!("cannot find a slice `{name}` in this kernel"),
                    );
                };
                match &self.sig.params[i].role {
                    Role::Slice { elem, mutable } => Some((Array::Slice { param: i, mutable: *mutable }, *elem)),
                    Role::TileSet { kind, .. } => {
                        let arrays = arrays_of(*kind).iter().map(|(f, _, _)| format!("`{name}.{f}[i]`")).collect::<Vec<_>>().join(", ");
                        self.err_at(&base, format!("index one of the tile set's arrays: {arrays}"))
                    }
                    Role::Queue => self.err_at(&base, format!("`{name}` is a queue and cannot be indexed: push to it (`{name}.push(v)`)")),
                    _ => self.err_at(&base, format!("`{name}` is a scalar and cannot be indexed")),
                }
            }
            Expr::Field(f) => {
                let (param, kind, value) = self.tile_set_of(&f.base)?;
                let name = member_name(&f.member);
                let arrays = arrays_of(kind);
                match arrays.iter().find(|(n, _, _)| *n == name) {
                    Some(&(_, field, elem)) => {
                        Some((Array::Field { param, field }, elem.unwrap_or(value)))
                    }
                    None => {
                        let list = arrays
                            .iter()
                            .map(|(n, _, _)| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(", ");
                        self.err_at(&f.member, format!("`{name}` is not an array of a `{}` tile set: the arrays are {list}", kind.name()))
                    }
                }
            }
            other => self.err_at(&other, INDEXABLE_MSG),
        }
    }

    /// The tile-set parameter a field access starts from.
    fn tile_set_of(&mut self, base: &Expr) -> Option<(usize, TileSetKind, STy)> {
        let found = match strip(base) {
            Expr::Path(p) => path_ident(p).and_then(|ident| {
                let name = ident.to_string();
                if self.lookup_local(&name).is_some() {
                    return None;
                }
                let i = self.lookup_param(&name)?;
                match self.sig.params[i].role {
                    Role::TileSet { kind, value } => Some((i, kind, value)),
                    _ => None,
                }
            }),
            _ => None,
        };
        let rejected = match strip(base) {
            Expr::Path(p) => path_ident(p).is_some_and(|i| {
                self.rejected(&i.to_string()) || self.hidden_param(&base, &i.to_string()).is_some()
            }),
            _ => false,
        };
        match found {
            Some(found) => Some(found),
            None if rejected => None,
            None => self.err_at(&base, "fields can only be read from the tile-set parameter"),
        }
    }

    fn index_expr(&mut self, index: &Expr) -> Option<TExpr> {
        let v = self.value(index)?;
        let u = self.known(STy::Usize);
        if let Err((found, _)) = self.unify(v.ty, u) {
            self.report(
                &index,
                format!(
                    "indices must be `usize`, found {}: write `x[i as usize]`",
                    describe_found(found)
                ),
            );
        }
        Some(v)
    }

    fn field_value(&mut self, f: &syn::ExprField) -> Option<TExpr> {
        let (param, kind, _) = self.tile_set_of(&f.base)?;
        let name = member_name(&f.member);
        let scalar = scalars_of(kind).iter().find(|(n, _)| *n == name);
        let field = match (scalar, name.as_str()) {
            (Some(&(_, field)), _) => field,
            (None, other) if arrays_of(kind).iter().any(|(n, _, _)| *n == other) => {
                return self.err_at(
                    &f,
                    "index the tile set's arrays (`a.values[nz]`): they cannot be used whole",
                )
            }
            (None, other) => {
                return self.err_at(
                    &f.member,
                    format!(
                        "a `{}` tile set has no field `{other}`: its fields are {}",
                        kind.name(),
                        fields_of(kind)
                    ),
                )
            }
        };
        Some(self.node(
            TExprKind::TileSetScalar(Array::Field { param, field }),
            STy::Usize,
        ))
    }

    /// The queue parameter a `push` is called on (index into `Sig::params`), if it is one.
    fn queue_of(&self, receiver: &Expr) -> Option<usize> {
        let Expr::Path(p) = strip(receiver) else {
            return None;
        };
        let name = path_ident(p)?.to_string();
        if self.lookup_local(&name).is_some() {
            return None;
        }
        let i = self.lookup_param(&name)?;
        (self.sig.params[i].role == Role::Queue).then_some(i)
    }

    /// `queue.push(v);` as a statement, with `v: u32`.
    fn push(&mut self, m: &syn::ExprMethodCall, out: &mut Vec<TStmt>) {
        let Some(queue) = self.queue_of(&m.receiver) else {
            let rejected = match strip(&m.receiver) {
                Expr::Path(p) => path_ident(p).is_some_and(|i| self.rejected(&i.to_string())),
                _ => false,
            };
            if !rejected {
                self.report(&m, PUSH_ONLY_ON_QUEUE);
            }
            return;
        };
        if m.args.len() != 1 {
            self.report(&m, "`push` takes 1 argument: `queue.push(v)` with `v: u32`");
            return;
        }
        if let Some(value) = self.value(&m.args[0]) {
            let u = self.known(STy::U32);
            self.expect(value.ty, u, &m.args[0], "the queue's item type `u32`");
            out.push(TStmt::Push { queue, value });
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Option<TExpr> {
        let name = m.method.to_string();
        if name == "push" {
            return match self.queue_of(&m.receiver) {
                Some(_) => self.err_at(
                    &m,
                    "`push` returns nothing: call it as a statement, `queue.push(v);`",
                ),
                None => self.err_at(&m, PUSH_ONLY_ON_QUEUE),
            };
        }
        if let Some(t) = &m.turbofish {
            return self.err_at(
                &t,
                "type arguments on methods are not supported in a kernel body",
            );
        }
        let Some((method, arity)) = method_named(&name) else {
            return self.err_at(&m.method,
                format!("method `{name}` is not supported in a kernel body: the supported methods are {METHODS} and `len` (on slices)"),
            );
        };
        if m.args.len() != arity {
            return self.err_at(&m, format!("`{name}` takes {arity} argument(s)"));
        }
        let Some(method) = method else {
            return match self.array(&m.receiver)? {
                (array @ Array::Slice { .. }, _) => Some(self.node(TExprKind::Len(array), STy::Usize)),
                (Array::Field { .. }, _) => self.err_at(&m, "use `a.num_rows` (rows) or `a.row_offsets[a.num_rows]` (atoms) instead of the length of a tile-set array"),
            };
        };
        let receiver = self.value(&m.receiver);
        let args: Vec<Option<TExpr>> = m.args.iter().map(|a| self.value(a)).collect();
        let receiver = receiver?;
        // `min` and `max` exist on every integer type (`Ord`), so as in rustc an integer whose
        // type is not decided yet may call them: the result and the argument share its type.
        let undecided_ord =
            matches!(name.as_str(), "min" | "max") && self.kind(receiver.ty) == Kind::Int;
        let rv = if undecided_ord {
            receiver.ty
        } else {
            let t = self.receiver_type(receiver.ty, &m.receiver, &name)?;
            if !method_accepts(method, t) {
                return self.err_at(
                    &m.method,
                    format!(
                        "`{name}` is not available on `{}` in a kernel body{}",
                        t.name(),
                        method_types(method)
                    ),
                );
            }
            self.known(t)
        };
        let mut all = vec![receiver];
        for (a, v) in m.args.iter().zip(args) {
            if let Some(v) = &v {
                match method_arg(method) {
                    Some(t) => {
                        let want = self.known(t);
                        self.expect(v.ty, want, &a, &format!("`{name}`'s exponent"));
                    }
                    None => self.expect(v.ty, rv, &a, "the receiver's type"),
                }
            }
            all.push(self.or_error(v));
        }
        let rv = match method {
            Method::LeadingZeros | Method::TrailingZeros | Method::CountOnes => {
                self.known(STy::U32)
            }
            _ => rv,
        };
        Some(TExpr {
            kind: TExprKind::Method { method, args: all },
            ty: rv,
        })
    }

    /// The atomic intrinsic a call names, or the error saying what to write instead.
    fn callee(&mut self, func: &Expr) -> Option<(AtomicOp, String)> {
        let func = match func {
            Expr::Path(p) => p,
            other => {
                return self.err_at(
                    &other,
                    "only the atomic intrinsics can be called in a kernel body",
                )
            }
        };
        match path_ident(func) {
            Some(i) if self.lookup_local(&i.to_string()).is_some() => {
                let id = self.lookup_local(&i.to_string())?;
                if self.kind(self.locals[id]) == Kind::Poison {
                    // Its `let` was already reported (a closure, most likely).
                    return None;
                }
                self.err_at(&func, format!("`{i}` is a local value, not a function"))
            }
            Some(i) => match atomic_op(&i.to_string()) {
                Some(op) => Some((op, i.to_string())),
                None => self.err_at(&func,
                    format!("`{i}` is not a function the kernel can call: it calls the intrinsics {} and helper `fn`s declared inside its body (declare `{i}` there, or inline its computation)", ATOMICS.join(", ")),
                ),
            },
            None => self.err_at(&func,
                "function calls are not supported in a kernel body: use the method form (`x.sqrt()`, `x.min(y)`) or the atomic intrinsics",
            ),
        }
    }

    fn call(&mut self, c: &syn::ExprCall) -> Option<TExpr> {
        let (op, name) = self.callee(&c.func)?;
        let arity = if op == AtomicOp::Cas { 3 } else { 2 };
        if c.args.len() != arity {
            let shape = if arity == 3 {
                "(&mut s[i], compare, new)"
            } else {
                "(&mut s[i], value)"
            };
            return self.err_at(
                &c,
                format!("`{name}` takes {arity} arguments: `{name}{shape}`"),
            );
        }
        let target = match strip(&c.args[0]) {
            Expr::Reference(r) if r.mutability.is_some() => match strip(&r.expr) {
                Expr::Index(ix) => Some(ix),
                _ => None,
            },
            _ => None,
        };
        let Some(ix) = target else {
            return self.err_at(
                &c.args[0],
                format!("the first argument of `{name}` must be a slice element: `&mut s[i]`"),
            );
        };
        let (array, elem) = self.array(&ix.expr)?;
        let index = self.index_expr(&ix.index);
        let rest: Vec<Option<TExpr>> = c.args.iter().skip(1).map(|a| self.value(a)).collect();
        match array {
            Array::Slice { mutable: true, .. } => {}
            _ => return self.err_at(&ix.expr, "atomics need a `&mut [T]` parameter"),
        }
        if elem == STy::Bool || (op == AtomicOp::Cas && elem.is_float()) {
            let allowed = if op == AtomicOp::Cas {
                "i32, u32, i64, u64"
            } else {
                "i32, u32, i64, u64, f32, f64"
            };
            return self.err_at(
                &ix.expr,
                format!(
                    "`{name}` is not defined on `{}`: use one of {allowed}",
                    elem.name()
                ),
            );
        }
        let ev = self.known(elem);
        let mut args = Vec::new();
        for (a, v) in c.args.iter().skip(1).zip(rest) {
            if let Some(v) = &v {
                self.expect(v.ty, ev, &a, "the slice's element type");
            }
            args.push(self.or_error(v));
        }
        let index = Box::new(self.or_error(index));
        let kind = TExprKind::Atomic {
            op,
            array,
            index,
            args,
        };
        Some(TExpr { kind, ty: ev })
    }

    fn if_value(&mut self, i: &syn::ExprIf) -> Option<TExpr> {
        let cond = self.cond(&i.cond);
        let then = self.block_value(&i.then_branch);
        let els = match &i.else_branch {
            None => return self.err_at(&i, "an `if` used as a value needs an `else` branch"),
            Some((_, e)) => match &**e {
                Expr::Block(b) => self.block_value(&b.block),
                Expr::If(ei) => self.if_value(ei).map(|v| TBlock {
                    stmts: Vec::new(),
                    value: Box::new(v),
                }),
                other => self.err_at(&other, "expected a block or `if` after `else`"),
            },
        };
        let (then, els) = (then?, els?);
        if let Some((_, e)) = &i.else_branch {
            self.expect(els.value.ty, then.value.ty, &e, "the `if` branch");
        }
        let ty = then.value.ty;
        let cond = Box::new(self.or_error(cond));
        Some(TExpr {
            kind: TExprKind::If { cond, then, els },
            ty,
        })
    }

    /// A block used as a value: statements, then a tail expression.
    fn block_value(&mut self, block: &syn::Block) -> Option<TBlock> {
        self.scopes.push(HashMap::new());
        let mark = self.declare_helpers(&block.stmts);
        let n = block.stmts.len();
        let mut stmts = Vec::new();
        for s in block.stmts.iter().take(n.saturating_sub(1)) {
            self.stmt(s, &mut stmts);
        }
        let v = match block.stmts.last() {
            Some(Stmt::Expr(e, None)) => self.value(e),
            Some(s) => {
                self.stmt(s, &mut stmts);
                self.err_at(
                    &block,
                    "this block is used as a value: end it with an expression (no `;`)",
                )
            }
            None => self.err_at(
                &block,
                "this block is used as a value: end it with an expression",
            ),
        };
        self.forget_helpers(mark);
        self.scopes.pop();
        Some(TBlock {
            stmts,
            value: Box::new(v?),
        })
    }

    // ---- the end ----

    fn resolve(&self, v: Var) -> Option<STy> {
        match self.kind(v) {
            Kind::Known(t) => Some(t),
            Kind::Int => Some(STy::I32),
            Kind::Float => Some(STy::F64),
            Kind::Poison => None,
        }
    }

    fn finish(mut self, stmts: Vec<TStmt>) -> syn::Result<Typed> {
        for (v, req, span, what) in std::mem::take(&mut self.reqs) {
            let Some(t) = self.resolve(v) else { continue };
            let ok = match req {
                Req::Numeric => t != STy::Bool,
                Req::Int => t.is_int(),
                Req::IntOrBool => t.is_int() || t == STy::Bool,
                Req::Signed => t.is_signed(),
            };
            if !ok {
                self.errors.push(syn::Error::new_spanned(
                    span,
                    format!("{what} is not defined on `{}`", t.name()),
                ));
            }
        }
        for (v, to, span) in std::mem::take(&mut self.casts) {
            if self.resolve(v) == Some(STy::Bool) && to.is_float() {
                self.errors.push(syn::Error::new_spanned(
                    span,
                    format!("a `bool` cannot be cast to `{}`: cast to an integer first (`b as u32 as {}`)", to.name(), to.name()),
                ));
            }
        }
        std::mem::take(&mut self.errors).finish()?;
        Ok(Typed {
            stmts,
            locals: self
                .locals
                .iter()
                .map(|&v| self.resolve(v).unwrap_or(STy::I32))
                .collect(),
            types: (0..self.slots.len()).map(|v| self.resolve(v)).collect(),
        })
    }
}

/// Parentheses and invisible groups do not matter to the kernel.
fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        _ => e,
    }
}

fn path_ident(p: &syn::ExprPath) -> Option<&syn::Ident> {
    if p.qself.is_none() {
        p.path.get_ident()
    } else {
        None
    }
}

fn member_name(m: &syn::Member) -> String {
    match m {
        syn::Member::Named(i) => i.to_string(),
        syn::Member::Unnamed(i) => i.index.to_string(),
    }
}

fn describe(k: Kind) -> String {
    match k {
        Kind::Known(t) => t.name().to_string(),
        Kind::Int => "{integer}".to_string(),
        Kind::Float => "{float}".to_string(),
        Kind::Poison => "_".to_string(),
    }
}

fn describe_found(k: Kind) -> String {
    match k {
        Kind::Known(t) => format!("`{}`", t.name()),
        Kind::Int => "an integer literal".to_string(),
        Kind::Float => "a float literal".to_string(),
        Kind::Poison => "an error".to_string(),
    }
}

/// Where an unsupported construct's error points: the keyword of a control-flow construct (its
/// body would only add noise), or the whole expression.
fn anchor(e: &Expr) -> TokenStream {
    match e {
        Expr::While(w) => w.while_token.to_token_stream(),
        Expr::Loop(l) => l.loop_token.to_token_stream(),
        Expr::Match(m) => m.match_token.to_token_stream(),
        Expr::Unsafe(u) => u.unsafe_token.to_token_stream(),
        Expr::ForLoop(f) => f.for_token.to_token_stream(),
        Expr::If(i) => i.if_token.to_token_stream(),
        Expr::Closure(c) => {
            let (or1, inputs, or2) = (&c.or1_token, &c.inputs, &c.or2_token);
            quote::quote!(#or1 #inputs #or2)
        }
        _ => e.to_token_stream(),
    }
}

/// The (leaf pattern, value) pairs of a tuple pattern against a tuple expression of the same
/// shape, in order, where every leaf is a plain name or `_`; `false` for anything else.
fn tuple_pairs<'a>(pat: &'a Pat, init: &'a Expr, out: &mut Vec<(&'a Pat, &'a Expr)>) -> bool {
    let init = match init {
        Expr::Paren(p) => &*p.expr,
        e => e,
    };
    match (pat, init) {
        (Pat::Tuple(pt), Expr::Tuple(et)) if pt.elems.len() == et.elems.len() => pt
            .elems
            .iter()
            .zip(&et.elems)
            .all(|(p, e)| tuple_pairs(p, e, out)),
        (Pat::Tuple(_), _) => false,
        (Pat::Wild(_), e) => {
            out.push((pat, e));
            true
        }
        (Pat::Ident(pi), e) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            out.push((pat, e));
            true
        }
        _ => false,
    }
}
