//! Unit tests of the wider body language in the front end: loops with `break` / `continue`,
//! helper functions, `match` and the math methods, lowered to the body IR or reported once.

use lb_ptx::body::{Body, Expr, ExprKind, Method, Stmt, Ty, UnaryOp};
use proc_macro2::TokenStream;
use quote::quote;

use crate::tests::lower_fn;

fn reduce_sum() -> TokenStream {
    quote!(schedule = "thread_mapped", reduce = "sum", output = "y")
}

fn errors(r: syn::Result<Body>) -> Vec<String> {
    match r {
        Ok(b) => panic!("expected errors, got {b:?}"),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// Every statement of the body, nested ones included, in order.
fn all_stmts(body: &Body) -> Vec<Stmt> {
    let mut out = Vec::new();
    body.block.any(
        &mut |s| {
            out.push(s.clone());
            false
        },
        &mut |_| false,
    );
    out
}

fn all_exprs(body: &Body) -> Vec<Expr> {
    let mut out = Vec::new();
    body.block.any(&mut |_| false, &mut |e| {
        out.push(e.clone());
        false
    });
    out
}

#[test]
fn while_is_a_loop_that_breaks_on_its_negated_condition() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let mut v = a.values[nz];
                while v > 1.0 { v *= 0.5; }
                v
            }
        },
    )
    .unwrap();
    let Stmt::Loop { body: inner } = &body.block.stmts[1] else {
        panic!("{:?}", body.block.stmts[1]);
    };
    let Stmt::If { cond, then, els } = &inner.stmts[0] else {
        panic!("{:?}", inner.stmts[0]);
    };
    assert!(matches!(
        cond.kind,
        ExprKind::Unary {
            op: UnaryOp::Not,
            ..
        }
    ));
    assert_eq!(then.stmts, vec![Stmt::Break(0)]);
    assert!(els.stmts.is_empty());
}

#[test]
fn labels_count_loops_from_the_innermost() {
    let body = lower_fn(
        quote!(schedule = "thread_mapped"),
        quote! {
            fn f(a: &Csr<f32>, y: &mut [f32], #[atom] nz: usize) {
                'outer: loop {
                    for i in 0..4u32 {
                        if i == 2 { continue; }
                        if i == 3 { break 'outer; }
                        continue 'outer;
                    }
                }
                y[nz] = a.values[nz];
            }
        },
    )
    .unwrap();
    let jumps: Vec<Stmt> = all_stmts(&body)
        .into_iter()
        .filter(|s| matches!(s, Stmt::Break(_) | Stmt::Continue(_)))
        .collect();
    assert_eq!(
        jumps,
        vec![Stmt::Continue(0), Stmt::Break(1), Stmt::Continue(1)]
    );
}

#[test]
fn break_outside_a_loop_and_break_with_a_value_are_errors() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                continue;
                loop { break 1; }
                a.values[nz]
            }
        },
    ));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].contains("`continue` outside of a loop"), "{errs:?}");
    assert!(errs[1].contains("`break` with a value"), "{errs:?}");
}

#[test]
fn a_helper_is_inlined_at_every_call_and_its_return_leaves_a_loop() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                fn pos(v: f32) -> f32 {
                    if v < 0.0 { return 0.0; }
                    v
                }
                pos(a.values[nz]) + pos(-a.values[nz])
            }
        },
    )
    .unwrap();
    let blocks = all_exprs(&body)
        .into_iter()
        .filter(|e| matches!(e.kind, ExprKind::Block(_)))
        .count();
    assert_eq!(blocks, 2);
    let loops = all_stmts(&body)
        .into_iter()
        .filter(|s| matches!(s, Stmt::Loop { .. }))
        .count();
    assert_eq!(loops, 2);
    // The early return: the result, then out of the loop around the inlined body.
    assert_eq!(
        all_stmts(&body)
            .iter()
            .filter(|s| **s == Stmt::Break(0))
            .count(),
        4
    );
}

#[test]
fn a_helpers_mistake_is_reported_once_and_recursion_is_an_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                fn bad(v: f32) -> f32 { v.cbrt() }
                fn down(n: u32) -> u32 { if n == 0 { 0 } else { down(n - 1) } }
                fn sees(v: f32) -> f32 { v + a.values[0] }
                bad(1.0) + bad(2.0) + down(3) as f32 + sees(1.0)
            }
        },
    ));
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs[0].contains("method `cbrt`"), "{errs:?}");
    assert!(errs[1].contains("`down` calls itself"), "{errs:?}");
    assert!(
        errs[2].contains("`a` is the kernel's parameter"),
        "{errs:?}"
    );
}

#[test]
fn match_is_an_if_chain_over_the_scrutinee_in_a_local() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                match a.col_indices[nz] {
                    0 | 1 => 1.0,
                    2..=9 => 2.0,
                    _ => 3.0,
                }
            }
        },
    )
    .unwrap();
    let Stmt::Return(Some(v)) = &body.block.stmts[0] else {
        panic!("{:?}", body.block.stmts);
    };
    let ExprKind::Block(b) = &v.kind else {
        panic!("{v:?}");
    };
    assert!(matches!(b.stmts[0], Stmt::Assign { .. }));
    let ExprKind::If { els, .. } = &b.value.as_ref().unwrap().kind else {
        panic!("{b:?}");
    };
    assert!(matches!(
        els.value.as_ref().unwrap().kind,
        ExprKind::If { .. }
    ));
}

#[test]
fn a_match_without_a_catch_all_is_one_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                match a.col_indices[nz] { 0 => 1.0, 1..=u32::MAX => 2.0 }
            }
        },
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("needs a last arm `_ => ...`"), "{errs:?}");
}

#[test]
fn math_methods_take_rusts_types() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let k = a.col_indices[nz];
                a.values[nz].powi(3).exp() + k.count_ones() as f32 + k.pow(2) as f32
            }
        },
    )
    .unwrap();
    let methods: Vec<(Method, Ty, Vec<Ty>)> = all_exprs(&body)
        .into_iter()
        .filter_map(|e| match e.kind {
            ExprKind::Method { method, args } => {
                Some((method, e.ty, args.iter().map(|a| a.ty).collect()))
            }
            _ => None,
        })
        .collect();
    assert!(methods.contains(&(Method::Powi, Ty::F32, vec![Ty::F32, Ty::I32])));
    assert!(methods.contains(&(Method::Exp, Ty::F32, vec![Ty::F32])));
    assert!(methods.contains(&(Method::CountOnes, Ty::U32, vec![Ty::U32])));
    assert!(methods.contains(&(Method::Pow, Ty::U32, vec![Ty::U32, Ty::U32])));
}

#[test]
fn transcendental_functions_on_f64_lower_to_software() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f64>, #[atom] nz: usize) -> f64 {
                a.values[nz].ln() + a.values[nz].powf(0.5) + a.values[nz].tanh()
            }
        },
    )
    .expect("f64 transcendentals lower");
    let text = format!("{body:?}");
    for m in ["Ln", "Powf", "Tanh"] {
        assert!(text.contains(&format!("method: {m}")), "{text}");
    }
}
