//! The front end as one error context: the attribute, the signature, the body and the kernel's
//! name are each checked, and their errors reported together, so independent mistakes show up
//! in one compile. A phase that needs an earlier one's result runs on what that phase can still
//! tell: with a broken attribute, the body is checked against the signature as the function
//! declares it (`parse::parse_alone`), which finds the body's own mistakes without repeating the
//! attribute's. With a broken signature, the body is checked against the parameters that were
//! declared well (`parse::for_body`), and the uses of the others are not reported again.

use proc_macro2::{Span, TokenStream};
use syn::ItemFn;

use crate::attr::{self, Args};
use crate::check;
use crate::epilogue::{self, Checked};
use crate::parse::{self, Sig};
use crate::typed::Typed;
use crate::types::Errors;

/// What the front end found in a function without errors.
pub struct Front {
    pub args: Args,
    pub sig: Sig,
    pub typed: Typed,
    /// The kernel's PTX name.
    pub name: String,
    /// The attribute's `epilogue`, checked against the signature.
    pub epilogue: Option<Checked>,
}

/// Every phase of the front end, or all of their errors.
pub fn front(attr: TokenStream, func: &ItemFn) -> syn::Result<Front> {
    let mut errors = Errors::default();
    let args = errors.take(attr::parse(attr));
    let sig = errors.take(match &args {
        Some(args) => parse::parse(func, args),
        None => parse::parse_alone(func),
    });
    let typed = match &sig {
        Some(sig) => errors.take(check::check(sig, &func.block)),
        // The body's own mistakes, against what the signature could still tell.
        None => {
            if let Some(partial) = parse::for_body(func) {
                errors.take(check::check(&partial, &func.block));
            }
            None
        }
    };
    let epilogue = match (&args, &sig) {
        (Some(args), Some(sig)) => args
            .epilogue
            .as_ref()
            .and_then(|e| errors.take(epilogue::check(e, sig))),
        _ => None,
    };
    let name = errors.take(kernel_name(&func.sig.ident));
    if let Some(sig) = &sig {
        for p in sig.body_params() {
            errors.take(ptx_name(&p.ident, "parameter"));
        }
    }
    errors.finish()?;
    match (args, sig, typed, name) {
        (Some(args), Some(sig), Some(typed), Some(name)) => Ok(Front {
            args,
            sig,
            typed,
            name,
            epilogue,
        }),
        // A phase that gave nothing recorded an error, so this is a bug in the macro.
        _ => Err(syn::Error::new(
            Span::call_site(),
            "internal error in #[load_balanced] (a phase failed without an error): please report it",
        )),
    }
}

/// The function's name as the PTX entry's: PTX names are ASCII letters, digits and `_` (a raw
/// identifier such as `r#type` is written without its `r#`).
fn kernel_name(ident: &syn::Ident) -> syn::Result<String> {
    ptx_name(ident, "kernel")
}

/// `ident` as a PTX name: the kernel's entry, or a parameter of it (index parameters are computed
/// in the kernel and named nowhere).
fn ptx_name(ident: &syn::Ident, what: &str) -> syn::Result<String> {
    let name = syn::ext::IdentExt::unraw(ident).to_string();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        let (names, rename) = if what == "kernel" {
            ("entry names", "the function")
        } else {
            ("names", "the parameter")
        };
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "the {what} name `{name}` cannot be used in PTX, whose {names} are ASCII \
                 letters, digits and `_`: rename {rename}"
            ),
        ));
    }
    Ok(name)
}
