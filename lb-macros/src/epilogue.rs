//! The attribute's `epilogue = |tile, sum| ...`: a closure that turns a tile's reduced value into
//! the value stored, checked and lowered by the body's own front end against a signature of the
//! kernel's parameters plus the closure's (`Sig::for_epilogue`), and copied into the CPU
//! reference as a function of the same parameters.
//!
//! Forms, by what the closure takes (`lane` only with `lanes`, which it then must take):
//! `|tile, value|`, `|tile, value, old|`, `|tile, lane, value|`, `|tile, lane, value, old|`.
//! `value` is the reduced value, `old` the output's value before the launch (asking for it
//! makes the kernels read the output before they store it: `y = alpha * sum + beta * old`).

use lb_ptx::body::{ArrayRef, Epilogue, ExprKind, IndexRole};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Pat};

use crate::check;
use crate::lower;
use crate::parse::{Role, Sig, SigParam};
use crate::types::STy;

/// A checked epilogue: its body IR and what the CPU reference needs.
pub struct Checked {
    pub ir: Epilogue,
    /// The reduced type: of the value, the old value and the result.
    ty: STy,
    /// The closure's parameter count beyond the tile and the value: whether it takes the lane
    /// and the old value.
    pub lane: bool,
    pub old: bool,
    /// The closure's parameters (tile, lane, value, old as taken) and its body, for the copy.
    idents: Vec<Ident>,
    body: Expr,
}

const FORMS: &str = "`|tile, value| ...` or `|tile, value, old| ...` (with `lanes`: `|tile, lane, value| ...` or `|tile, lane, value, old| ...`), where `value` is the tile's reduced value and `old` the output's value before the launch";

/// Checks `expr` (the attribute's `epilogue`) against the kernel's signature `sig` (which
/// reduces) and lowers it.
pub fn check(expr: &Expr, sig: &Sig) -> syn::Result<Checked> {
    let Expr::Closure(closure) = expr else {
        // The attribute sees only the function it is on, so it cannot read another one's body.
        let named = if matches!(expr, Expr::Path(_)) {
            " (not the name of a function, whose body the attribute cannot see)"
        } else {
            ""
        };
        return Err(syn::Error::new_spanned(
            expr,
            format!("`epilogue` must be a closure{named}: {FORMS}"),
        ));
    };
    let Some((ty, _)) = sig.reduce else {
        return Err(syn::Error::new_spanned(
            expr,
            "`epilogue` applies to each tile's reduced value: it needs `reduce` and `output`",
        ));
    };
    let lanes = sig.lanes.is_some();
    let base = if lanes { 3 } else { 2 };
    let n = closure.inputs.len();
    if n != base && n != base + 1 {
        return Err(syn::Error::new_spanned(
            &closure.inputs,
            format!("this epilogue has {n} parameters; write {FORMS}"),
        ));
    }
    let old = n == base + 1;
    let index = |r| (Role::Index(r), STy::Usize, "an index");
    let value = (Role::Scalar(ty), ty, "the reduced type");
    let mut roles = vec![index(IndexRole::Tile)];
    if lanes {
        roles.push(index(IndexRole::Lane));
    }
    roles.push(value.clone());
    if old {
        roles.push(value);
    }
    let mut extra = Vec::new();
    for (i, (pat, (role, want, what))) in closure.inputs.iter().zip(roles).enumerate() {
        let ident = param_ident(pat, (want, what), i)?;
        if sig.body_params().any(|p| p.ident == ident) {
            return Err(syn::Error::new_spanned(
                pat,
                format!("the epilogue's parameter `{ident}` has the name of a parameter of the kernel, which the epilogue reads by that name: rename it"),
            ));
        }
        extra.push(SigParam { ident, role });
    }
    if let syn::ReturnType::Type(_, t) = &closure.output {
        expect_type(t, ty, "the epilogue returns the stored value")?;
    }
    let idents: Vec<Ident> = extra.iter().map(|p| p.ident.clone()).collect();
    let esig = sig.for_epilogue(extra);
    let body = (*closure.body).clone();
    let block = match &body {
        Expr::Block(b) if b.label.is_none() => b.block.clone(),
        e => syn::Block {
            brace_token: Default::default(),
            stmts: vec![syn::Stmt::Expr(e.clone(), None)],
        },
    };
    let typed = check::check(&esig, &block)?;
    let lowered = lower::lower("epilogue", &esig, &typed)?;
    if !lowered.is_pure() {
        return Err(syn::Error::new_spanned(
            &closure.body,
            "the epilogue computes the value stored: it may not store, use atomics or push",
        ));
    }
    Ok(Checked {
        ir: Epilogue {
            locals: lowered.locals,
            block: lowered.block,
            roles: lowered.roles,
            reads_old: old,
        },
        ty,
        lane: lanes,
        old,
        idents,
        body,
    })
}

/// The name of closure parameter `i` (a `_` gets a name of its own), its type checked against
/// `want` (`what` it is) when annotated.
fn param_ident(pat: &Pat, (want, what): (STy, &str), i: usize) -> syn::Result<Ident> {
    let (pat, ty) = match pat {
        Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
        p => (p, None),
    };
    let ident = match pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
        Pat::Wild(w) => format_ident!("__lb_unused_{i}", span = w.span()),
        p => {
            return Err(syn::Error::new_spanned(
                p,
                format!("an epilogue parameter is a name: write {FORMS}"),
            ))
        }
    };
    if let Some(t) = ty {
        expect_type(t, want, &format!("`{ident}` is {what}"))?;
    }
    Ok(ident)
}

fn expect_type(t: &syn::Type, want: STy, what: &str) -> syn::Result<()> {
    let ok = matches!(t, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident(want.name()));
    if ok {
        Ok(())
    } else {
        Err(syn::Error::new_spanned(
            t,
            format!("{what}, `{}`: write that type or none", want.name()),
        ))
    }
}

impl Checked {
    /// The kernel's parameters (indices into the body parameters) the epilogue reads.
    pub fn reads(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.ir.block.any(&mut |_| false, &mut |e| {
            match &e.kind {
                ExprKind::Scalar(p)
                | ExprKind::Load {
                    array: ArrayRef::Param(p) | ArrayRef::Field(p, _),
                    ..
                }
                | ExprKind::Len(ArrayRef::Param(p) | ArrayRef::Field(p, _))
                | ExprKind::TileSetScalar(ArrayRef::Param(p) | ArrayRef::Field(p, _)) => {
                    out.push(*p)
                }
                _ => {}
            }
            false
        });
        out
    }

    /// The CPU reference's copy, `__lb_epilogue`: the kernel's parameters (a `&mut` slice
    /// read-only, no queue: the epilogue only reads), then the closure's, returning its body.
    pub fn cpu_fn(&self, sig: &Sig, param_type: impl Fn(&Role) -> TokenStream) -> TokenStream {
        let t = crate::expand::prim(self.ty);
        let kernel = sig.body_params().filter_map(|p| {
            let id = &p.ident;
            match &p.role {
                Role::Queue => None,
                Role::Slice { elem, .. } => {
                    let e = crate::expand::prim(*elem);
                    Some(quote!(#id: &[#e]))
                }
                role => {
                    let ty = param_type(role);
                    Some(quote!(#id: #ty))
                }
            }
        });
        let mut own = vec![quote!(::core::primitive::usize)];
        if self.lane {
            own.push(quote!(::core::primitive::usize));
        }
        own.push(t.clone());
        if self.old {
            own.push(t.clone());
        }
        let own = self.idents.iter().zip(own).map(|(id, ty)| quote!(#id: #ty));
        let body = &self.body;
        quote! {
            #[allow(warnings, clippy::all)]
            fn __lb_epilogue(#(#kernel,)* #(#own),*) -> #t {
                #body
            }
        }
    }

    /// The call of [`Checked::cpu_fn`] that replaces `acc`, read in the reference's tile loop
    /// (`old` is the output element's current value).
    pub fn cpu_call(&self, sig: &Sig, acc: TokenStream, old: TokenStream) -> TokenStream {
        let kernel = sig.body_params().filter_map(|p| {
            let id = &p.ident;
            match &p.role {
                Role::Queue => None,
                Role::Slice { mutable: true, .. } => Some(quote!(&*#id)),
                _ => Some(quote!(#id)),
            }
        });
        let own = std::iter::once(quote!(__lb_tile))
            .chain(self.lane.then(|| quote!(__lb_lane)))
            .chain(Some(acc))
            .chain(self.old.then_some(old));
        quote!(__lb_epilogue(#(#kernel,)* #(#own),*))
    }
}
