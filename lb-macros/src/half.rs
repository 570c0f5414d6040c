//! Half-precision storage: `f16` and `bf16` (the `half` crate's) as the element type of a
//! slice, of a tile set's values or of the output. They are storage only: the body computes in
//! `f32`, a load of one is its exact `f32` and a store rounds to nearest even.
//!
//! This phase runs first, on the syntax: it writes every `f16` / `bf16` of the signature as
//! `f32` and remembers which parameters (and whether the output) keep 16 bits in memory. Every
//! later phase then sees an ordinary `f32` kernel, which is exactly what the body means; only
//! the body IR's element types (`lower`), the host types of the launchers and the CPU
//! reference's conversions (`expand`) read what was remembered. `f16` anywhere else, or an
//! atomic on a half-precision slice, is an error here.

use lb_ptx::body::Ty;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

use crate::types::Errors;

/// What the signature stored in 16 bits before it was written in `f32`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Halves {
    /// Each half-precision parameter (slice or tile set) by name, with its storage type.
    pub params: Vec<(String, Ty)>,
    /// The names of the half-precision `&mut` slices, which the body may only store to.
    pub written: Vec<String>,
    /// The output's storage type when the function returns `f16` or `bf16`.
    pub output: Option<Ty>,
}

impl Halves {
    /// The storage type of the parameter `name`, if it is half precision.
    pub fn of(&self, name: &syn::Ident) -> Option<Ty> {
        let name = syn::ext::IdentExt::unraw(name).to_string();
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, t)| t)
    }

    pub fn is_empty(&self) -> bool {
        self.params.is_empty() && self.output.is_none()
    }
}

/// The half type a type names (`f16`, `half::f16`, `lb::half::bf16`, …), if any.
fn half_of(ty: &Type) -> Option<Ty> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => {
            let last = tp.path.segments.last()?;
            if !last.arguments.is_none() {
                return None;
            }
            match last.ident.to_string().as_str() {
                "f16" => Some(Ty::F16),
                "bf16" => Some(Ty::Bf16),
                _ => None,
            }
        }
        Type::Paren(p) => half_of(&p.elem),
        Type::Group(g) => half_of(&g.elem),
        _ => None,
    }
}

fn f32_at(span: Span) -> Type {
    Type::Path(syn::TypePath {
        qself: None,
        path: syn::Ident::new("f32", span).into(),
    })
}

/// The element type slot of a parameter type that may hold a half type: the `T` of `&[T]`,
/// `&mut [T]` and `&Csr<T>` (`Csc`, `Coo`).
fn element_slot(ty: &mut Type) -> Option<&mut Type> {
    let Type::Reference(r) = ty else {
        return None;
    };
    match &mut *r.elem {
        Type::Slice(s) => Some(&mut s.elem),
        Type::Path(tp) if tp.qself.is_none() => {
            let last = tp.path.segments.last_mut()?;
            if !matches!(last.ident.to_string().as_str(), "Csr" | "Csc" | "Coo") {
                return None;
            }
            match &mut last.arguments {
                syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => {
                    match &mut a.args[0] {
                        syn::GenericArgument::Type(t) => Some(t),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// `func` with its half types written as `f32`, and what they were; or the errors of every
/// `f16` / `bf16` that is not an element type, and of every atomic on a half-precision slice.
pub fn narrow(func: &ItemFn) -> syn::Result<(ItemFn, Halves)> {
    let mut f = func.clone();
    let mut halves = Halves::default();
    let mut errors = Errors::default();
    for input in &mut f.sig.inputs {
        let FnArg::Typed(pt) = input else { continue };
        let Pat::Ident(pi) = &*pt.pat else { continue };
        let name = syn::ext::IdentExt::unraw(&pi.ident).to_string();
        if let Some(slot) = element_slot(&mut pt.ty) {
            if let Some(t) = half_of(slot) {
                *slot = f32_at(slot.span());
                if matches!(&*pt.ty, Type::Reference(r) if r.mutability.is_some()) {
                    halves.written.push(name.clone());
                }
                halves.params.push((name, t));
            }
        } else if let Some(t) = half_of(&pt.ty) {
            // Reported here, once: the rewrite keeps it from being a stray `f16` too.
            let span = pt.ty.span();
            *pt.ty = f32_at(span);
            errors.push(syn::Error::new(
                span,
                format!(
                    "a scalar cannot be `{}`: `{}` is a storage type for slices, tile-set values \
                     and the output, and the body computes in `f32`; take the scalar as `f32`",
                    t.rust_name(),
                    t.rust_name()
                ),
            ));
        }
    }
    if let ReturnType::Type(_, ty) = &mut f.sig.output {
        if let Some(t) = half_of(ty) {
            **ty = f32_at(ty.span());
            halves.output = Some(t);
        }
    }
    if !halves.is_empty() || mentions_half(func) {
        let mut stray = Stray {
            errors: &mut errors,
            halves: &halves,
        };
        stray.visit_item_fn(&f);
    }
    errors.finish()?;
    Ok((f, halves))
}

/// Whether `func` names `f16` or `bf16` anywhere (most kernels do not: then nothing is walked).
fn mentions_half(func: &ItemFn) -> bool {
    struct Find(bool);
    impl Visit<'_> for Find {
        fn visit_ident(&mut self, i: &syn::Ident) {
            self.0 |= i == "f16" || i == "bf16";
        }
    }
    let mut find = Find(false);
    find.visit_item_fn(func);
    find.0
}

impl Stray<'_> {
    /// The name of the written half slice that `e` names, if it does.
    fn written(&self, e: &syn::Expr) -> Option<String> {
        let syn::Expr::Path(p) = e else { return None };
        let name = syn::ext::IdentExt::unraw(p.path.get_ident()?).to_string();
        self.halves.written.contains(&name).then_some(name)
    }
}

/// Reports what is left after the signature's element types were rewritten: a half type
/// anywhere else, and an atomic on a half-precision slice.
struct Stray<'a> {
    errors: &'a mut Errors,
    halves: &'a Halves,
}

impl Visit<'_> for Stray<'_> {
    fn visit_path(&mut self, path: &syn::Path) {
        if let Some(seg) = path
            .segments
            .iter()
            .find(|s| s.ident == "f16" || s.ident == "bf16")
        {
            let t = &seg.ident;
            self.errors.push(syn::Error::new(
                seg.ident.span(),
                format!(
                    "`{t}` is a storage type: it may only be the element type of a slice \
                     (`&[{t}]`, `&mut [{t}]`), of a tile set (`&Csr<{t}>`) or the return type; \
                     values read from such an array are `f32` in the body, so write `f32` here"
                ),
            ));
        }
        syn::visit::visit_path(self, path);
    }

    /// `s[i] = v` on a written half slice is a store: only its index and value are reads.
    fn visit_expr_assign(&mut self, assign: &syn::ExprAssign) {
        match &*assign.left {
            syn::Expr::Index(ix) if self.written(&ix.expr).is_some() => {
                self.visit_expr(&ix.index);
                self.visit_expr(&assign.right);
            }
            _ => syn::visit::visit_expr_assign(self, assign),
        }
    }

    /// Any other use of an element of a written half slice reads it back (`s[i] += v` too).
    fn visit_expr_index(&mut self, ix: &syn::ExprIndex) {
        if let Some(name) = self.written(&ix.expr) {
            self.errors.push(syn::Error::new(
                ix.span(),
                format!(
                    "`{name}` holds 16-bit floats and is write-only in the body: a value read \
                     back would be the rounded one on the GPU, which the `f32` reference cannot \
                     see; store with `{name}[i] = value` only, and keep a value that is read \
                     again in an `f32` slice (or use `reduce`)"
                ),
            ));
        }
        syn::visit::visit_expr_index(self, ix);
    }

    fn visit_expr_call(&mut self, call: &syn::ExprCall) {
        let atomic = matches!(&*call.func, syn::Expr::Path(p)
            if p.path.segments.last().is_some_and(|s| s.ident.to_string().starts_with("atomic_")));
        let target = match call.args.first() {
            Some(syn::Expr::Reference(r)) if atomic => match &*r.expr {
                syn::Expr::Index(ix) => Some(ix),
                _ => None,
            },
            _ => None,
        };
        let half = target.and_then(|ix| match &*ix.expr {
            syn::Expr::Path(p) => p.path.get_ident().and_then(|i| self.halves.of(i)),
            _ => None,
        });
        let (Some(ix), Some(t)) = (target, half) else {
            return syn::visit::visit_expr_call(self, call);
        };
        let name = t.rust_name();
        self.errors.push(syn::Error::new(
            call.span(),
            format!(
                "atomics on `{name}` elements are not supported (16-bit float atomics are not \
                 on every target): keep this slice in `f32`"
            ),
        ));
        // One error for the call: its element is not reported again as read back.
        self.visit_expr(&ix.index);
        for arg in call.args.iter().skip(1) {
            self.visit_expr(arg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn the_signature_is_written_in_f32_and_its_storage_remembered() {
        let func: ItemFn = syn::parse2(quote!(
            fn k(a: &Csr<half::f16>, x: &[bf16], y: &mut [f16], s: f32, #[atom] nz: usize) -> f16 {
                y[nz] = s;
                a.values[nz] * x[nz]
            }
        ))
        .unwrap();
        let (f, halves) = narrow(&func).unwrap();
        let text = quote!(#f).to_string();
        assert!(!text.contains("f16"), "{text}");
        assert_eq!(
            halves.params,
            [
                ("a".to_string(), Ty::F16),
                ("x".to_string(), Ty::Bf16),
                ("y".to_string(), Ty::F16)
            ]
        );
        assert_eq!(halves.written, ["y"]);
        assert_eq!(halves.output, Some(Ty::F16));
    }

    #[test]
    fn a_kernel_without_half_types_is_unchanged() {
        let func: ItemFn = syn::parse2(quote!(
            fn k(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                a.values[nz]
            }
        ))
        .unwrap();
        let (f, halves) = narrow(&func).unwrap();
        assert!(halves.is_empty());
        assert_eq!(quote!(#f).to_string(), quote!(#func).to_string());
    }
}
