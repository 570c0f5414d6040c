//! The nesting guard: syn's parser, the `check` and `lower` phases and the typed tree's drop
//! recurse over the body's expressions, so a statement nested deeper than the compiler's stack
//! can hold (a sum of thousands of terms) is refused up front with one spanned error, measured
//! on the tokens without recursion.

use proc_macro2::{Spacing, TokenStream, TokenTree};

/// The most binary operators one statement may chain, brackets included (`a + b + …` nests
/// one level per `+`): a sum of 1,000 terms passes; past that, syn and the lowering run out of
/// stack somewhere below 2,000.
pub const MAX_OPERATORS: usize = 1000;

/// The most brackets that may nest.
pub const MAX_BRACKETS: usize = 256;

/// `Err` at the first operator past [`MAX_OPERATORS`] in one statement (counting those of the
/// brackets the statement sits in), or the first bracket past [`MAX_BRACKETS`].
pub fn check(tokens: TokenStream) -> syn::Result<()> {
    // One entry per open bracket: its tokens, the count its statements start from, the count.
    let mut stack = vec![(tokens.into_iter(), 0usize, 0usize)];
    loop {
        let depth = stack.len();
        let Some((tokens, base, count)) = stack.last_mut() else {
            return Ok(());
        };
        let Some(token) = tokens.next() else {
            stack.pop();
            continue;
        };
        match token {
            TokenTree::Punct(p) if p.as_char() == ';' => *count = *base,
            // The last character of an operator (`==` is `=` joint, then `=` alone); not the
            // separators and path punctuation, which do not nest.
            TokenTree::Punct(p)
                if p.spacing() == Spacing::Alone && !".,:#?'$@~".contains(p.as_char()) =>
            {
                *count += 1;
                if *count > MAX_OPERATORS {
                    return Err(syn::Error::new(
                        p.span(),
                        format!(
                            "this statement chains more than {MAX_OPERATORS} operators, more than \
                             the macro can lower: split it into `let` steps (partial sums, say)"
                        ),
                    ));
                }
            }
            TokenTree::Group(g) => {
                if depth > MAX_BRACKETS {
                    return Err(syn::Error::new(
                        g.span(),
                        format!(
                            "brackets nest more than {MAX_BRACKETS} deep here: name the inner \
                             parts with `let`"
                        ),
                    ));
                }
                let inner = *count;
                stack.push((g.stream().into_iter(), inner, inner));
            }
            TokenTree::Punct(_) | TokenTree::Ident(_) | TokenTree::Literal(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(terms: usize) -> TokenStream {
        let text = (0..terms)
            .map(|i| format!("x[i + {i}]"))
            .collect::<Vec<_>>()
            .join(" + ");
        format!("fn f(x: &[f32], i: usize) -> f32 {{ let a = -1.0 == 2.0; {text} }}")
            .parse()
            .unwrap()
    }

    #[test]
    fn sums_pass_up_to_the_limit_and_fail_past_it() {
        // Each term's `+ i` sits inside its bracket, on top of the chain before it.
        assert!(check(sum(500)).is_ok());
        let e = check(sum(2000)).unwrap_err();
        assert!(e.to_string().contains("split it into `let` steps"), "{e}");
    }

    #[test]
    fn statements_start_over_and_brackets_are_bounded() {
        let many: String = (0..3000)
            .map(|i| format!("let v{i} = x[{i}] + 1.0 * 2.0;"))
            .collect();
        let text = format!("fn f(x: &[f32]) {{ {many} }}");
        assert!(check(text.parse().unwrap()).is_ok());
        let nested = format!("fn f() {{ {}1{} }}", "(".repeat(300), ")".repeat(300));
        let e = check(nested.parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("brackets nest"), "{e}");
        let fine = format!("fn f() {{ {}1{} }}", "(".repeat(100), ")".repeat(100));
        assert!(check(fine.parse().unwrap()).is_ok());
    }
}
