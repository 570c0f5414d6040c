//! `#[load_balanced]`: turns the work of one atom, written as a Rust function, into PTX for the
//! requested schedules, their plans, a CPU reference and typed launchers (see the `lb` crate).
//!
//! The phases are one module each: `attr` (the attribute's keys), `parse` (parameter roles),
//! `check` (names and types of the body), `lower` (to lb-ptx's body IR), `expand` (the emitted
//! items). Each phase collects its errors and reports them together; nothing panics.

mod attr;
mod check;
mod expand;
mod lower;
mod parse;
mod types;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Generates a load-balanced GPU kernel family from the function computing one atom.
///
/// See the `lb` crate's documentation for the keys and the body subset.
#[proc_macro_attribute]
pub fn load_balanced(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (attr, item) = (
        proc_macro2::TokenStream::from(attr),
        proc_macro2::TokenStream::from(item),
    );
    match expand::expand(attr.clone(), item.clone()) {
        Ok(tokens) => tokens.into(),
        Err(error) => expand::fallback(attr, item, error).into(),
    }
}
