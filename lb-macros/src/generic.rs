//! One kernel function for several element types: `fn f<T>(…)` with `types = "f32, f64"` in the
//! attribute is expanded once per listed type, with `T` replaced by it everywhere (signature,
//! body, casts, `T::MAX`), as its own kernel family `f_<type>` (module, reference function and
//! PTX entry names), and a module `f` that names them `f::f32`, `f::f64`, …
//!
//! For `f16` and `bf16`, `T` is the storage type where an array or the output holds it (`&[T]`,
//! `&Csr<T>`, the return type) and `f32` everywhere else (scalars, casts, `T::MAX`, locals,
//! the epilogue): the body computes in `f32` and `half` takes it from there. One generic body
//! then means the same arithmetic for `f16` as for `f32`, with 16-bit storage.
//!
//! This phase runs before the others and hands each instantiation to them unchanged, so every
//! rule of the language applies to each element type as if it had been written out by hand. Only
//! the first instantiation's mistakes are reported when it has any: a mistake in the body is the
//! same mistake for every type, and one mistake gives one error.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{GenericParam, Ident, ItemFn, Lit, Meta, Token};

/// The element types `types` may list: the body language's value types that a tile set and the
/// dense inputs hold, and the half-precision storage types.
const ELEMENT_TYPES: [&str; 8] = ["f32", "f64", "i32", "u32", "i64", "u64", "f16", "bf16"];

/// One instantiation: the attribute without `types`, and the function for one element type.
pub struct Instance {
    pub attr: TokenStream,
    pub item: TokenStream,
    /// The element type's name, which names the instantiation's module in the wrapper.
    pub ty: Ident,
}

/// The instantiations of `item` when it has a type parameter or the attribute lists `types`
/// (`None`: an ordinary kernel, expanded as it is), with the wrapper module that names them.
pub fn instances(
    attr: &TokenStream,
    item: &TokenStream,
) -> syn::Result<Option<(Vec<Instance>, TokenStream)>> {
    let metas: Punctuated<Meta, Token![,]> =
        syn::parse::Parser::parse2(Punctuated::parse_terminated, attr.clone())?;
    let types = metas.iter().find(|m| m.path().is_ident("types"));
    let Ok(func) = syn::parse2::<ItemFn>(item.clone()) else {
        // Not a function: the ordinary path says so.
        return Ok(None);
    };
    let param = type_param(&func)?;
    let (param, types) = match (param, types) {
        (None, None) => return Ok(None),
        (Some(p), None) => {
            return Err(syn::Error::new(
                p.span(),
                format!(
                    "a kernel generic over `{p}` lists its element types in the attribute: \
                     `types = \"f32, f64\"`"
                ),
            ))
        }
        (None, Some(t)) => {
            return Err(syn::Error::new(
                t.span(),
                "`types` instantiates a generic kernel: declare its element type as a type \
                 parameter (`fn name<T>(a: &Csr<T>, x: &[T], …)`), or remove `types`",
            ))
        }
        (Some(p), Some(t)) => (p, t),
    };
    let list = type_list(types)?;
    let rest: Punctuated<Meta, Token![,]> = metas
        .iter()
        .filter(|m| !m.path().is_ident("types"))
        .cloned()
        .collect();
    let instances = list
        .iter()
        .map(|ty| {
            // `T` of a half type is its storage where an array holds it and `f32` everywhere
            // else: the body computes in `f32` (see `half`).
            let arith = if ty == "f16" || ty == "bf16" {
                Ident::new("f32", ty.span())
            } else {
                ty.clone()
            };
            let mut sub = Substitute {
                param: &param,
                ty: &arith,
            };
            let mut f = func.clone();
            f.sig.generics = syn::Generics::default();
            let mut stored = Substitute { param: &param, ty };
            for input in &mut f.sig.inputs {
                match input {
                    syn::FnArg::Typed(pt) if matches!(*pt.ty, syn::Type::Reference(_)) => {
                        stored.visit_type_mut(&mut pt.ty);
                    }
                    _ => {}
                }
            }
            stored.visit_return_type_mut(&mut f.sig.output);
            sub.visit_item_fn_mut(&mut f);
            f.sig.ident = format_ident!("{}_{}", func.sig.ident, ty);
            // What is general code for `T` may be a no-op for one type (`0 as T` for `i64`,
            // `v > T::MAX` for an integer): not the user's mistake.
            f.attrs.push(syn::parse_quote!(
                #[allow(clippy::unnecessary_cast, clippy::absurd_extreme_comparisons)]
            ));
            // The epilogue closure may name the element type too.
            let mut attr = rest.clone();
            for meta in attr.iter_mut() {
                sub.visit_meta_mut(meta);
            }
            Instance {
                attr: quote!(#attr),
                item: quote!(#f),
                ty: ty.clone(),
            }
        })
        .collect::<Vec<_>>();
    let (vis, name) = (&func.vis, &func.sig.ident);
    let doc = format!("The instantiations of the kernel `{name}`, one module per element type.");
    let inner = one_level_down(vis);
    let names = instances.iter().map(|i| {
        let module = format_ident!("{}_{}", name, i.ty);
        let ty = &i.ty;
        let doc = format!("`{name}` for `{ty}` elements.");
        quote!(#[doc = #doc] #inner use super::#module as #ty;)
    });
    let wrapper = quote! {
        #[doc = #doc]
        #[allow(non_snake_case)]
        #vis mod #name { #(#names)* }
    };
    Ok(Some((instances, wrapper)))
}

/// The visibility `vis` (of an item in some module) written from inside a child module: a
/// re-export there may not be more visible than the item it names.
fn one_level_down(vis: &syn::Visibility) -> TokenStream {
    match vis {
        syn::Visibility::Public(_) => quote!(pub),
        syn::Visibility::Inherited => quote!(pub(super)),
        syn::Visibility::Restricted(r) => {
            let path = &r.path;
            if path.is_ident("crate") || path.segments.first().is_some_and(|s| s.ident == "crate") {
                quote!(pub(in #path))
            } else if path.is_ident("self") {
                quote!(pub(super))
            } else {
                quote!(pub(in super::#path))
            }
        }
    }
}

/// The function's one type parameter, if it has one; lifetimes and const parameters, or a
/// second type parameter, are errors.
fn type_param(func: &ItemFn) -> syn::Result<Option<Ident>> {
    let mut found = None;
    for param in &func.sig.generics.params {
        match param {
            GenericParam::Type(t) if found.is_none() => found = Some(t.ident.clone()),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "a kernel takes at most one generic parameter, its element type (`<T>`), \
                     instantiated for the types listed by `types = \"…\"`",
                ))
            }
        }
    }
    Ok(found)
}

/// The types of `types = "f32, f64"`: known element types, at least one, none twice.
fn type_list(meta: &Meta) -> syn::Result<Vec<Ident>> {
    let lit = match meta {
        Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(l) => match &l.lit {
                Lit::Str(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    let Some(lit) = lit else {
        return Err(syn::Error::new(
            meta.span(),
            "write the element types as a string: `types = \"f32, f64\"`",
        ));
    };
    let mut out: Vec<Ident> = Vec::new();
    for name in lit.value().split(',').map(str::trim) {
        if !ELEMENT_TYPES.contains(&name) {
            return Err(syn::Error::new(
                lit.span(),
                format!(
                    "`{name}` is not an element type a kernel can be instantiated for; \
                     `types` takes a comma-separated list of {}",
                    ELEMENT_TYPES.join(", ")
                ),
            ));
        }
        if out.iter().any(|t| t == name) {
            return Err(syn::Error::new(
                lit.span(),
                format!("`{name}` is listed twice in `types`"),
            ));
        }
        out.push(Ident::new(name, Span::call_site()));
    }
    Ok(out)
}

/// Replaces the type parameter by one element type: in types (`&[T]`, `Csr<T>`, `as T`) and in
/// paths that start with it (`T::MAX`).
struct Substitute<'a> {
    param: &'a Ident,
    ty: &'a Ident,
}

impl VisitMut for Substitute<'_> {
    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        if path.leading_colon.is_none() {
            if let Some(first) = path.segments.first_mut() {
                if first.ident == *self.param && first.arguments.is_none() {
                    first.ident = Ident::new(&self.ty.to_string(), first.ident.span());
                }
            }
        }
        syn::visit_mut::visit_path_mut(self, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapper(item: TokenStream) -> String {
        let attr = quote!(reduce = "sum", output = "y", types = "f32, u32");
        let (instances, wrapper) = instances(&attr, &item).unwrap().unwrap();
        assert_eq!(instances.len(), 2);
        for i in &instances {
            let text = i.item.to_string();
            assert!(!text.contains("T"), "{text}");
            assert!(!i.attr.to_string().contains("types"));
        }
        wrapper.to_string()
    }

    #[test]
    fn the_wrapper_is_as_visible_as_the_function() {
        let body = quote!((a: &Csr<T>, #[atom] nz: usize) -> T { a.values[nz] as T });
        let cases = [
            (quote!(), "pub (super) use"),
            (quote!(pub), "pub use"),
            (quote!(pub(crate)), "pub (in crate) use"),
            (quote!(pub(super)), "pub (in super :: super) use"),
        ];
        for (vis, want) in cases {
            let text = wrapper(quote!(#vis fn k<T> #body));
            assert!(text.contains(want), "{vis}: {text}");
            assert!(text.contains("super :: k_f32 as f32"), "{text}");
        }
    }

    #[test]
    fn a_half_type_is_storage_in_arrays_and_f32_elsewhere() {
        let attr = quote!(
            reduce = "sum",
            output = "y",
            types = "f16",
            epilogue = |_r, v| v * (1 as T)
        );
        let item = quote!(
            fn k<T>(a: &Csr<T>, x: &[T], s: T, #[atom] nz: usize) -> T {
                a.values[nz] * x[nz] * s + T::MAX
            }
        );
        let (instances, _) = instances(&attr, &item).unwrap().unwrap();
        let f: ItemFn = syn::parse2(instances[0].item.clone()).unwrap();
        let sig = &f.sig;
        assert_eq!(
            quote!(#sig).to_string(),
            quote!(fn k_f16(a: &Csr<f16>, x: &[f16], s: f32, #[atom] nz: usize) -> f16).to_string()
        );
        assert!(quote!(#f).to_string().contains("f32 :: MAX"));
        assert!(instances[0].attr.to_string().contains("as f32"));
    }

    #[test]
    fn an_ordinary_kernel_is_left_alone() {
        let item = quote!(
            fn k(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                a.values[nz]
            }
        );
        assert!(instances(&quote!(reduce = "sum"), &item).unwrap().is_none());
    }
}
