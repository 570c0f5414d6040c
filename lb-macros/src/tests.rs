//! Unit tests of the phases: attribute validation, roles, inference and lowering to the body IR,
//! and the shape of the expansion.

use lb_ptx::body::{
    ArrayRef, BinaryOp, Body, CsrField, Expr, ExprKind, IndexRole, Lit, ParamKind, Reduce, Stmt, Ty,
};
use lb_ptx::Schedule;
use proc_macro2::TokenStream;
use quote::quote;

use crate::{attr, check, expand, lower, parse};

pub(crate) fn lower_fn(attr: TokenStream, item: TokenStream) -> syn::Result<Body> {
    let func: syn::ItemFn = syn::parse2(item)?;
    let args = attr::parse(attr)?;
    let sig = parse::parse(&func, &args)?;
    let typed = check::check(&sig, &func.block)?;
    lower::lower(&func.sig.ident.to_string(), &sig, &typed)
}

fn reduce_sum() -> TokenStream {
    quote!(schedule = "thread_mapped", reduce = "sum", output = "y")
}

fn errors(r: syn::Result<Body>) -> Vec<String> {
    match r {
        Ok(b) => panic!("expected errors, got {b:?}"),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn e(ty: Ty, kind: ExprKind) -> Expr {
    Expr { ty, kind }
}

fn index(role: IndexRole) -> Box<Expr> {
    Box::new(e(Ty::U64, ExprKind::Index(role)))
}

#[test]
fn spmv_lowers_to_one_return() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
                a.values[nz] * x[a.col_indices[nz] as usize]
            }
        },
    )
    .unwrap();
    assert_eq!(body.name, "spmv");
    assert_eq!(body.params.len(), 2);
    assert_eq!(
        body.params[0].kind,
        ParamKind::TileSet {
            kind: lb_ptx::body::TileSetKind::Csr,
            value: Ty::F32
        }
    );
    assert_eq!(
        body.params[1].kind,
        ParamKind::Slice {
            elem: Ty::F32,
            mutable: false
        }
    );
    assert_eq!(body.roles, vec![IndexRole::Tile, IndexRole::Atom]);
    assert_eq!(body.reduce, Some((Ty::F32, Reduce::Sum)));
    let col = e(
        Ty::U32,
        ExprKind::Load {
            array: ArrayRef::Field(0, CsrField::ColIndices),
            index: index(IndexRole::Atom),
        },
    );
    let expected = e(
        Ty::F32,
        ExprKind::Binary {
            op: BinaryOp::Mul,
            lhs: Box::new(e(
                Ty::F32,
                ExprKind::Load {
                    array: ArrayRef::Field(0, CsrField::Values),
                    index: index(IndexRole::Atom),
                },
            )),
            rhs: Box::new(e(
                Ty::F32,
                ExprKind::Load {
                    array: ArrayRef::Param(1),
                    index: Box::new(e(Ty::U64, ExprKind::Cast { arg: Box::new(col) })),
                },
            )),
        },
    );
    assert_eq!(body.block.stmts, vec![Stmt::Return(Some(expected))]);
}

#[test]
fn unsuffixed_literal_takes_the_type_it_meets_later() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let mut acc = 0.0;
                acc += a.values[nz];
                acc
            }
        },
    )
    .unwrap();
    assert_eq!(body.locals, vec![Ty::F32]);
    assert_eq!(
        body.block.stmts[0],
        Stmt::Assign {
            local: 0,
            value: e(Ty::F32, ExprKind::Lit(Lit::Float(0.0)))
        }
    );
}

#[test]
fn empty_statements_are_nothing_as_in_rust() {
    let with = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                ;
                let mut acc = 0.0;
                if acc > 1.0 { ; } else { acc += a.values[nz];; }
                acc
            }
        },
    )
    .unwrap();
    let without = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let mut acc = 0.0;
                if acc > 1.0 { } else { acc += a.values[nz]; }
                acc
            }
        },
    )
    .unwrap();
    assert_eq!(with.block, without.block);
}

#[test]
fn literals_without_context_default_like_rust() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let i = 1;
                let g = 2.5;
                let n = -3;
                a.values[nz] * (i as f32) * (g as f32) * (n as f32)
            }
        },
    )
    .unwrap();
    assert_eq!(body.locals, vec![Ty::I32, Ty::F64, Ty::I32]);
    // A negated literal is one literal, so `i32::MIN` written out stays in range.
    assert_eq!(
        body.block.stmts[2],
        Stmt::Assign {
            local: 2,
            value: e(Ty::I32, ExprKind::Lit(Lit::Int(-3)))
        }
    );
}

#[test]
fn literal_operand_takes_the_other_operands_type() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f64>, #[atom] nz: usize) -> f64 {
                2.0 * a.values[nz] + 1
                    as f64
            }
        },
    )
    .unwrap();
    let Stmt::Return(Some(ret)) = &body.block.stmts[0] else {
        panic!("{:?}", body.block)
    };
    let ExprKind::Binary { lhs, .. } = &ret.kind else {
        panic!("{ret:?}")
    };
    let ExprKind::Binary { lhs: two, .. } = &lhs.kind else {
        panic!("{lhs:?}")
    };
    assert_eq!(**two, e(Ty::F64, ExprKind::Lit(Lit::Float(2.0))));
}

#[test]
fn compound_assignment_to_an_element_is_load_op_store() {
    let body = lower_fn(
        quote!(schedule = "thread_mapped"),
        quote! {
            fn f(a: &Csr<f32>, y: &mut [f32], #[tile] row: usize, #[atom] nz: usize) {
                y[row] += a.values[nz];
                y[row * 2] -= 1.0;
            }
        },
    )
    .unwrap();
    let load = |index: Box<Expr>| {
        e(
            Ty::F32,
            ExprKind::Load {
                array: ArrayRef::Param(1),
                index,
            },
        )
    };
    let values = e(
        Ty::F32,
        ExprKind::Load {
            array: ArrayRef::Field(0, CsrField::Values),
            index: index(IndexRole::Atom),
        },
    );
    assert_eq!(
        body.block.stmts[0],
        Stmt::Store {
            array: ArrayRef::Param(1),
            index: *index(IndexRole::Tile),
            value: e(
                Ty::F32,
                ExprKind::Binary {
                    op: BinaryOp::Add,
                    lhs: Box::new(load(index(IndexRole::Tile))),
                    rhs: Box::new(values)
                }
            ),
        }
    );
    // An index with work in it is computed once, into a new local.
    assert_eq!(body.locals, vec![Ty::U64]);
    assert!(
        matches!(&body.block.stmts[1], Stmt::Assign { local: 0, value } if value.ty == Ty::U64)
    );
    let tmp = || Box::new(e(Ty::U64, ExprKind::Local(0)));
    assert_eq!(
        body.block.stmts[2],
        Stmt::Store {
            array: ArrayRef::Param(1),
            index: *tmp(),
            value: e(
                Ty::F32,
                ExprKind::Binary {
                    op: BinaryOp::Sub,
                    lhs: Box::new(load(tmp())),
                    rhs: Box::new(e(Ty::F32, ExprKind::Lit(Lit::Float(1.0))))
                }
            ),
        }
    );
}

#[test]
fn short_circuit_operators_are_preserved() {
    let body = lower_fn(
        quote!(schedule = "thread_mapped"),
        quote! {
            fn f(a: &Csr<f32>, y: &mut [f32], #[tile] row: usize, #[atom] nz: usize) {
                if nz < y.len() && a.values[nz] > 0.0 || false {
                    y[nz] = 1.0;
                }
            }
        },
    )
    .unwrap();
    let Stmt::If { cond, .. } = &body.block.stmts[0] else {
        panic!("{:?}", body.block)
    };
    let ExprKind::Binary {
        op: BinaryOp::Or,
        lhs,
        ..
    } = &cond.kind
    else {
        panic!("{cond:?}")
    };
    let ExprKind::Binary {
        op: BinaryOp::And,
        rhs,
        ..
    } = &lhs.kind
    else {
        panic!("{lhs:?}")
    };
    assert_eq!(cond.ty, Ty::Bool);
    assert!(matches!(
        rhs.kind,
        ExprKind::Binary {
            op: BinaryOp::Gt,
            ..
        }
    ));
}

#[test]
fn loops_shadowing_and_if_expressions() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, k: u32, #[atom] nz: usize) -> f32 {
                let mut s = 0.0f32;
                for j in 0..=k {
                    let s2 = if j % 2 == 0 { 1.0 } else if j == 1 { 2.0 } else { a.values[nz] };
                    s += s2;
                }
                let s = s * 2.0;
                s
            }
        },
    )
    .unwrap();
    // s, j, s2, and the shadowing s.
    assert_eq!(body.locals, vec![Ty::F32, Ty::U32, Ty::F32, Ty::F32]);
    let Stmt::For {
        var: 1,
        start,
        end,
        body: inner,
    } = &body.block.stmts[1]
    else {
        panic!("{:?}", body.block)
    };
    assert_eq!(start.kind, ExprKind::Lit(Lit::Int(0)));
    assert_eq!(start.ty, Ty::U32);
    // `..=k` runs to `k + 1`.
    assert!(
        matches!(&end.kind, ExprKind::Binary { op: BinaryOp::Add, rhs, .. } if rhs.kind == ExprKind::Lit(Lit::Int(1)))
    );
    let Stmt::Assign { local: 2, value } = &inner.stmts[0] else {
        panic!("{inner:?}")
    };
    let ExprKind::If { els, .. } = &value.kind else {
        panic!("{value:?}")
    };
    assert!(matches!(
        els.value.as_deref(),
        Some(Expr {
            kind: ExprKind::If { .. },
            ty: Ty::F32
        })
    ));
    assert_eq!(
        body.block.stmts[3],
        Stmt::Return(Some(e(Ty::F32, ExprKind::Local(3))))
    );
}

#[test]
fn atomics_and_methods() {
    let body = lower_fn(
        quote!(schedule = "thread_mapped"),
        quote! {
            fn f(a: &Csr<f32>, d: &mut [f32], c: &mut [u32], #[tile] u: usize, #[atom] e: usize) {
                let v = a.col_indices[e] as usize;
                let old = atomic_min(&mut d[v], d[u] + a.values[e].abs().max(0.5));
                atomic_cas(&mut c[v], 0, 1);
                if old > 1.0f32.sqrt() {
                    atomic_add(&mut c[u], 1);
                }
            }
        },
    )
    .unwrap();
    assert_eq!(body.locals, vec![Ty::U64, Ty::F32]);
    let Stmt::Expr(cas) = &body.block.stmts[2] else {
        panic!("{:?}", body.block)
    };
    assert!(
        matches!(&cas.kind, ExprKind::Atomic { op: lb_ptx::body::AtomicOp::Cas, args, .. } if args.len() == 2 && args[0].ty == Ty::U32)
    );
}

#[test]
fn float_index_is_an_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 { x[a.values[nz]] + x[2.0] }
        },
    ));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs.iter()
            .all(|e| e.starts_with("indices must be `usize`")),
        "{errs:?}"
    );
}

#[test]
fn method_on_undecided_literal_is_an_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 { a.values[nz] * 2.0.sqrt() }
        },
    ));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains("cannot call `sqrt` on a float whose type is not known yet"),
        "{errs:?}"
    );
}

#[test]
fn min_and_max_on_an_undecided_integer_take_its_type_from_later_use() {
    // rustc accepts this (`Ord::min`): the loop variable becomes `usize` from the index.
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let mut acc = a.values[nz];
                for i in 0..=2 { acc += x[i.min(1)] + x[i.max(2) - 2]; }
                acc
            }
        },
    )
    .expect("accepted");
    let text = format!("{body:?}");
    assert!(text.contains("Min") && text.contains("Max"), "{text}");
    // `abs` is inherent to each integer type, so rustc refuses it on an undecided one, as here.
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let k = 3;
                a.values[nz] * x[k.abs() as usize]
            }
        },
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("cannot call `abs` on an integer"),
        "{errs:?}"
    );
}

#[test]
fn a_signature_mistake_and_a_body_mistake_are_reported_together() {
    // The bad parameter's uses are not reported again; the closure is a mistake of its own.
    let errs = expand_errors(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &Vec<f32>, #[atom] nz: usize) -> f32 {
                let mut acc = a.values[nz] * x[a.col_indices[nz] as usize];
                let half = |v: f32| v * 0.5;
                acc
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("closures")), "{errs:?}");
    // One mistake in the signature alone is one error, however often the body uses it.
    let errs = expand_errors(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &Vec<f32>, #[atom] nz: usize) -> f32 {
                x[0] + x[1] + a.values[nz] * x[a.col_indices[nz] as usize]
            }
        },
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
}

#[test]
fn a_parameter_pattern_is_one_error_however_often_the_body_uses_its_names() {
    // Each pattern is rejected once; the names it binds are the function's, so their uses in
    // the body are not reported as unknown.
    for params in [
        quote!((p, q): (u32, u32)),
        quote!(&(p, q): &(u32, u32)),
        quote!(Pair { p, q }: Pair),
        quote!([p, q]: [u32; 2]),
    ] {
        let errs = expand_errors(
            reduce_sum(),
            quote! {
                fn f(a: &Csr<f32>, #params, #[atom] nz: usize) -> f32 {
                    let m = p + q * 2;
                    a.values[nz] * (m as f32) + (p as f32)
                }
            },
        );
        assert_eq!(errs.len(), 1, "{params}: {errs:?}");
        assert!(errs[0].contains("not a pattern"), "{params}: {errs:?}");
    }
    // `_` binds nothing: a use of a name it did not bind is still a mistake of its own.
    let errs = expand_errors(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, _: u32, #[atom] nz: usize) -> f32 {
                a.values[nz] * (p as f32)
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[1].contains("`p`"), "{errs:?}");
}

#[test]
fn a_float_remainder_is_one_spanned_error_not_a_failed_generation() {
    // Rust has `%` on floats; PTX does not, so the front end refuses it at the operator.
    for body in [
        quote!(a.values[nz] % x[nz]),
        quote!(let mut v = a.values[nz]; v %= 2.0; v),
    ] {
        let errs = expand_errors(
            reduce_sum(),
            quote! {
                fn f(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 { #body }
            },
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("remainder `%`") && errs[0].contains("`f32`"),
            "{errs:?}"
        );
    }
}

#[test]
fn all_body_errors_are_reported_together() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let mut i = 0;
                i = i.cbrt();
                break;
                let t = (1, 2);
                let z = 1.0 + true;
                a.values[nz]
            }
        },
    ));
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(errs[0].starts_with("method `cbrt` is not supported"));
    assert!(errs[1].starts_with("`break` outside of a loop"));
    assert!(errs[2].starts_with("tuples are not supported"));
    assert!(errs[3].starts_with("mismatched types"));
}

#[test]
fn unsigned_negation_and_bool_arithmetic_are_errors() {
    let errs = errors(lower_fn(
        quote!(schedule = "thread_mapped"),
        quote! {
            fn f(a: &Csr<f32>, y: &mut [u32], #[atom] nz: usize) {
                y[nz] = -y[nz];
                let b = true + false;
            }
        },
    ));
    assert_eq!(
        errs,
        vec![
            "negation is not defined on `u32`",
            "arithmetic is not defined on `bool`"
        ]
    );
}

#[test]
fn signature_rules() {
    let cases: [(TokenStream, TokenStream, &str); 6] = [
        (
            quote!(),
            quote!(
                fn f(a: &Csr<f32>, #[tile] r: usize) {}
            ),
            "needs an `#[atom] nz: usize`",
        ),
        (
            quote!(),
            quote!(
                fn f(x: &[f32], #[atom] n: usize) {}
            ),
            "exactly one tile-set parameter",
        ),
        (
            quote!(),
            quote!(
                fn f(a: &Csr<f32>, #[atom] n: u32) {}
            ),
            "its type must be `usize`",
        ),
        (
            quote!(),
            quote!(
                fn f(a: &Csr<f32>, #[atom] n: usize, #[atom] m: usize) {}
            ),
            "already has this role",
        ),
        (
            quote!(),
            quote!(
                fn f(a: &Csr<f32>, v: Vec<f32>, #[atom] n: usize) {}
            ),
            "take a slice instead of a `Vec`",
        ),
        (
            quote!(),
            quote!(
                fn f<T>(a: &Csr<f32>, #[atom] n: usize) {}
            ),
            "cannot be generic",
        ),
    ];
    for (attr, item, msg) in cases {
        let errs = errors(lower_fn(attr, item.clone()));
        assert!(errs.iter().any(|e| e.contains(msg)), "{item}: {errs:?}");
    }
}

#[test]
fn attribute_rules() {
    let args = attr::parse(quote!(schedule = "auto")).unwrap();
    assert_eq!(args.schedules, Schedule::ALL);
    assert!(args.auto);
    // `"every"` adds the schedules `"auto"` leaves out, and is as lenient as `"auto"`.
    let args = attr::parse(quote!(schedule = "every")).unwrap();
    assert_eq!(args.schedules, Schedule::every().collect::<Vec<_>>());
    assert!(args.auto);
    for s in Schedule::EXTRA {
        assert!(!Schedule::ALL.contains(s) && args.schedules.contains(s));
    }
    // The searches of Busato & Bombieri are user schedules now (`launch_custom`), not names.
    let err = attr::parse(quote!(schedule = "direct_search")).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("unknown schedule `direct_search`"));
    let err = attr::parse(quote!(schedule = "auto, every")).unwrap_err();
    assert!(err.to_string().contains("write one alone"));
    let args = attr::parse(quote!()).unwrap();
    assert_eq!(
        (args.block, args.items_per_thread, args.target.as_str()),
        (256, 1, "sm_75")
    );
    let err = attr::parse(quote!(schedule = "thread_mapped, thread_mapped")).unwrap_err();
    assert!(err.to_string().contains("listed twice"));
    let err = attr::parse(quote!(
        schedule = "nope",
        block = 64,
        items_per_thread = 0,
        target = "sm_60"
    ))
    .unwrap_err();
    let msgs: Vec<String> = err.into_iter().map(|e| e.to_string()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].starts_with("unknown schedule `nope`"));
    let args = attr::parse(quote!(
        checked,
        index = "u32",
        block = 1024,
        target = "sm_90a"
    ))
    .unwrap();
    assert!(args.checked);
    assert_eq!((args.index, args.block), (lb_ptx::IndexWidth::U32, 1024));
    let err = attr::parse(quote!(reduce = "sum")).unwrap_err();
    assert!(err.to_string().contains("needs `output"));
    let err = attr::parse(quote!(reduce = "product", output = "y")).unwrap_err();
    assert!(err.to_string().contains("product"), "{err}");
}

#[test]
fn tuning_keys_are_validated_and_reach_the_options() {
    let args = attr::parse(quote!(
        schedule = "binning, consolidate(warp), multi_phase",
        block_threshold = 64,
        warp_threshold = 4,
        consolidate_threshold = 0,
        iteration_factor = 8
    ))
    .unwrap();
    assert_eq!(
        args.tuning,
        lb_ptx::Tuning {
            block_threshold: Some(64),
            warp_threshold: Some(4),
            consolidate_threshold: Some(0),
            iteration_factor: Some(8),
        }
    );
    // "auto" and no schedule at all generate every schedule, so every key is accepted.
    for schedule in [quote!(schedule = "auto",), quote!()] {
        let args = attr::parse(quote!(
            #schedule
            block_threshold = 300,
            consolidate_threshold = 18446744073709551615,
            iteration_factor = 1
        ))
        .unwrap();
        assert_eq!(args.tuning.consolidate_threshold, Some(u64::MAX));
        assert_eq!(args.tuning.warp_threshold, None);
    }
    let args = attr::parse(quote!(schedule = "merge_path")).unwrap();
    assert_eq!(args.tuning, lb_ptx::Tuning::default());

    let msgs = |attr: TokenStream| -> Vec<String> {
        match attr::parse(attr) {
            Ok(a) => panic!("expected errors, got {a:?}"),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    };
    let cases = [
        (
            quote!(schedule = "multi_phase", iteration_factor = 0),
            "`iteration_factor` must be from 1 to 8",
        ),
        (
            quote!(schedule = "multi_phase", iteration_factor = 9),
            "`iteration_factor` must be from 1 to 8",
        ),
        (
            quote!(schedule = "binning", warp_threshold = 0),
            "`warp_threshold` must be at least 1",
        ),
        (
            quote!(schedule = "binning", block_threshold = 0),
            "`block_threshold` must be at least 1",
        ),
        (
            quote!(schedule = "binning", block_threshold = 8, warp_threshold = 8),
            "`block_threshold` (8) must be greater than `warp_threshold` (8)",
        ),
        (
            quote!(schedule = "merge_path", iteration_factor = 2),
            "`iteration_factor` tunes `multi_phase`, which is not among the schedules (`merge_path`): drop the key or add the schedule",
        ),
        (
            quote!(schedule = "binning, lrb", consolidate_threshold = 5),
            "`consolidate_threshold` tunes `consolidate`, `consolidate(block)` and `consolidate(warp)`, none of which is among the schedules (`binning`, `lrb`): drop the key or add one of them",
        ),
        (
            quote!(schedule = "consolidate", warp_threshold = 5),
            "`warp_threshold` tunes `binning`, which is not among the schedules (`consolidate`)",
        ),
    ];
    for (attr, want) in cases {
        let got = msgs(attr.clone());
        assert_eq!(got.len(), 1, "{attr}: {got:?}");
        assert!(got[0].starts_with(want), "{attr}: {got:?}");
    }
    // Every consolidate level takes the key; a bad schedule name is reported alone.
    for level in ["consolidate", "consolidate(block)", "consolidate(warp)"] {
        attr::parse(quote!(schedule = #level, consolidate_threshold = 7)).unwrap();
    }
    let got = msgs(quote!(schedule = "binnig", block_threshold = 64));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("unknown schedule `binnig`"), "{got:?}");
}

#[test]
fn expansion_has_the_contracts_items() {
    let out = expand::expand(
        reduce_sum(),
        quote! {
            fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
                a.values[nz] * x[a.col_indices[nz] as usize]
            }
        },
    )
    .unwrap();
    let file: syn::File = syn::parse2(out).unwrap();
    let syn::Item::Fn(user) = &file.items[0] else {
        panic!()
    };
    // Role attributes are gone; the function is otherwise the user's.
    let params = quote!(#user).to_string();
    assert!(
        !params.contains("# [tile]") && !params.contains("# [atom]"),
        "{params}"
    );
    let syn::Item::Mod(m) = &file.items[1] else {
        panic!()
    };
    assert_eq!(m.ident, "spmv");
    let names: Vec<String> = m
        .content
        .as_ref()
        .unwrap()
        .1
        .iter()
        .filter_map(|i| match i {
            syn::Item::Const(c) => Some(c.ident.to_string()),
            syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "PTX",
            "SCHEDULES",
            "PLANS",
            "UNCHECKED_PLANS",
            "DEFAULT",
            "REDUCTION",
            "IR",
            "PARAM_NAMES",
            "cpu",
            "launch",
            "launch_async",
            "__lb_auto",
            "launch_with_async",
            "workspace_size",
            "launch_with",
            "launch_unchecked",
            "launch_with_unchecked",
            "launch_with_unchecked_async",
            "launch_custom",
            "launch_custom_async",
            "__lb_run",
            "__lb_run_in"
        ]
    );
}

#[test]
fn fallback_keeps_the_names() {
    let item = quote! {
        fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 { let f = |v: f32| v; a.values[nz] }
    };
    let err = expand::expand(reduce_sum(), item.clone()).unwrap_err();
    let out = expand::fallback(reduce_sum(), item, err).to_string();
    assert!(out.contains("compile_error"));
    assert!(
        out.contains("pub fn cpu")
            && out.contains("pub fn launch_with")
            && out.contains("pub fn launch_custom")
            && out.contains("pub const IR"),
        "{out}"
    );
    assert!(
        !out.contains("| v : f32 |"),
        "the rejected body must not reach rustc: {out}"
    );
}

/// Destructuring anything but a tuple of values is one mistake, so one error: not a second one
/// for what it binds, nor one per use of the names it would have bound. A mistake of its own
/// inside the initializer still counts.
#[test]
fn destructuring_let_is_one_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn k(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let (p, q) = a.values[nz];
                p * q
            }
        },
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("destructuring is not supported"),
        "{errs:?}"
    );
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn k(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let [p, (q, r)] = [a.values[nz], missing];
                p * q + r
            }
        },
    ));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].contains("destructuring is not supported"),
        "{errs:?}"
    );
    assert!(errs[1].contains("cannot find `missing`"), "{errs:?}");
}

/// `let (p, q) = (a, b);` binds by value, all values first: a swap swaps, `_` drops a value, a
/// nested tuple binds its names, and a mistake inside one value is that value's one error.
#[test]
fn tuple_lets_bind_every_value_first() {
    let ok = lower_fn(
        reduce_sum(),
        quote! {
            fn k(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let (mut p, q) = (a.values[nz], x[0]);
                let (p2, (_, r)) = (q, (p, 2.0f32));
                p += p2;
                let (p, q) = (q, p);
                p * q * r
            }
        },
    );
    if let Err(e) = ok {
        panic!("tuple lets are accepted: {e}");
    }
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn k(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let (p, q) = (a.values[nz], missing);
                p * q
            }
        },
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("cannot find `missing`"), "{errs:?}");
}

/// A body of 2,500 gathers: about 27 registers each under `thread_mapped` (past
/// [`lb_ptx::MAX_REGISTERS`]), about 18 under `two_phase` (within it).
fn oversized_kernel() -> TokenStream {
    let stmts: String = (0..2500)
        .map(|i| format!("acc += a.values[nz] * x[a.col_indices[nz] as usize] * {i}.0f32;"))
        .collect();
    format!(
        "fn big(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {{ let mut acc = 0.0f32; \
         {stmts} acc }}"
    )
    .parse()
    .expect("tokens")
}

#[test]
fn a_body_too_large_for_a_named_schedule_is_a_compile_error_naming_it() {
    let err = expand::expand(
        quote!(schedule = "thread_mapped", reduce = "sum", output = "y"),
        oversized_kernel(),
    )
    .expect_err("too many registers");
    let message = err.to_string();
    assert!(
        message.contains("too large for `thread_mapped`") && message.contains("registers"),
        "{message}"
    );
}

#[test]
fn auto_leaves_out_a_schedule_the_body_is_too_large_for() {
    let body = lower_fn(
        quote!(schedule = "auto", reduce = "sum", output = "y"),
        oversized_kernel(),
    )
    .expect("a valid body");
    let opts = lb_ptx::Options {
        schedules: vec![Schedule::ThreadMapped, Schedule::TwoPhase],
        leave_out_oversized: true,
        ..lb_ptx::Options::default()
    };
    let g = lb_ptx::generate_safe(&body, &opts).expect("two_phase fits");
    assert_eq!(g.left_out.len(), 1, "{:?}", g.left_out);
    assert_eq!(g.left_out[0].schedule, Schedule::ThreadMapped);
    assert!(g.plans.iter().all(|p| p.schedule == "two_phase"));
    assert!(!g.plans.is_empty());
    assert!(!g.ptx.contains("big_thread_mapped"));
    assert!(g.ptx.contains("big_two_phase"));
    let refused = lb_ptx::Options {
        leave_out_oversized: false,
        ..opts
    };
    assert!(matches!(
        lb_ptx::generate_safe(&body, &refused),
        Err(lb_ptx::GenError::TooManyRegisters {
            schedule: "thread_mapped",
            ..
        })
    ));
}

/// The messages of `expand`'s errors.
fn expand_errors(attr: TokenStream, item: TokenStream) -> Vec<String> {
    match expand::expand(attr, item) {
        Ok(out) => panic!("expected errors, got {out}"),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// The attribute, the signature and the body share one error context: a mistake in the
/// attribute does not hide one in the body, and each is reported once.
#[test]
fn attribute_and_body_mistakes_are_reported_together() {
    let errs = expand_errors(
        quote!(schedule = "thread_mapped", reduce = "sum", outptu = "y"),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                let s = a.values[nz].cbrt();
                a.values[nz] + s
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].contains("Unknown field: `outptu`"), "{errs:?}");
    assert!(
        errs[1].starts_with("method `cbrt` is not supported"),
        "{errs:?}"
    );
    // A misspelt `reduce` is one error: the body still returns the declared type, and nothing
    // complains that the function returns a value without `reduce`.
    let errs = expand_errors(
        quote!(schedule = "thread_mapped", reduc = "sum", output = "y"),
        quote! {
            fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
                if nz == 0 { return 0.0; }
                a.values[nz]
            }
        },
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("Unknown field: `reduc`"), "{errs:?}");
    // A bad value of a known key and a non-ASCII kernel name, independent mistakes.
    let errs = expand_errors(
        quote!(schedule = "thread_mapped", block = 100),
        quote! {
            fn café(a: &Csr<f32>, #[atom] nz: usize) {
                let v = a.values[nz];
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("`block` must be a power of two"),
        "{errs:?}"
    );
    assert!(errs[1].starts_with("the kernel name `café`"), "{errs:?}");
}

/// Indexing a path that is not a plain name is an error of its own (it used to reach the
/// lowering unresolved).
#[test]
fn indexing_a_qualified_path_is_an_error() {
    let errs = errors(lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
                let v = std::x[0] + x.len() as f32;
                a.values[nz] + v
            }
        },
    ));
    assert_eq!(
        errs,
        ["only slice parameters and the tile set's arrays can be indexed"]
    );
}

/// A sum of 1,000 terms, the most `depth` lets through, goes through the front end and the
/// lowering (and the typed tree's recursive drop) on a thread with the default 2 MiB stack.
#[test]
fn a_sum_at_the_depth_limit_lowers_on_a_default_stack() {
    let terms = vec!["a.values[nz]"; 1000].join(" + ");
    let text = format!("fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {{ {terms} }}");
    // Tokens cannot cross threads: the text does, and is parsed on the small stack.
    let lowered = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let item: TokenStream = text.parse().map_err(|e| format!("{e}"))?;
            crate::depth::check(item.clone()).map_err(|e| e.to_string())?;
            lower_fn(reduce_sum(), item)
                .map(|body| body.block.stmts.len())
                .map_err(|e| e.to_string())
        })
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert_eq!(lowered, Ok(1));
}

/// The epilogue's value and old value are the scalars after the kernel's parameters, its tile is
/// the tile role, and the kernel's scalars keep their positions (index roles are not counted).
#[test]
fn an_epilogue_lowers_against_the_kernels_parameters() {
    let attr = quote!(
        schedule = "thread_mapped",
        reduce = "sum",
        output = "y",
        epilogue = |row, sum, old| alpha * sum + beta * old + base[row]
    );
    let item = quote! {
        fn axpby(a: &Csr<f64>, #[tile] t: usize, x: &[f64], alpha: f64, beta: f64, base: &[f64],
                 #[atom] nz: usize) -> f64 {
            a.values[nz] * x[a.col_indices[nz] as usize]
        }
    };
    // The whole expansion generates; the checked closure is then inspected on its own.
    let generated = expand::expansion(attr, item).unwrap().generated;
    assert!(
        generated.ptx.contains("ld.global.f64"),
        "the old output is loaded"
    );
    let func: syn::ItemFn = syn::parse2(quote! {
        fn axpby(a: &Csr<f64>, #[tile] t: usize, x: &[f64], alpha: f64, beta: f64, base: &[f64],
                 #[atom] nz: usize) -> f64 { a.values[nz] }
    })
    .unwrap();
    let args = attr::parse(quote!(reduce = "sum", output = "y")).unwrap();
    let sig = parse::parse(&func, &args).unwrap();
    let closure: syn::Expr =
        syn::parse2(quote!(|row, sum, old| alpha * sum + beta * old + base[row])).unwrap();
    let e = crate::epilogue::check(&closure, &sig).unwrap();
    assert!(e.old && !e.lane);
    assert_eq!(e.ir.roles, [IndexRole::Tile]);
    let mut scalars = Vec::new();
    let mut tiles = 0;
    e.ir.block.any(&mut |_| false, &mut |x| {
        match &x.kind {
            ExprKind::Scalar(p) => scalars.push(*p),
            ExprKind::Index(IndexRole::Tile) => tiles += 1,
            _ => {}
        }
        false
    });
    // a, x, alpha, beta, base are 0..5; the value is 5, the old value 6.
    scalars.sort_unstable();
    assert_eq!(scalars, [2, 3, 5, 6]);
    assert_eq!(tiles, 1);
    assert_eq!(e.reads(), [2, 5, 3, 6, 4]);
}

/// The attribute is measured like the body: an epilogue of 1,001 terms is one error, not a
/// stack overflow in the parser.
#[test]
fn a_deep_epilogue_is_refused_up_front() {
    let terms = vec!["sum"; 1001].join(" + ");
    let attr: TokenStream = format!(
        "schedule = \"thread_mapped\", reduce = \"sum\", output = \"y\", epilogue = |row, sum| {terms}"
    )
    .parse()
    .unwrap();
    let item = quote!(
        fn f(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
            a.values[nz]
        }
    );
    let err = expand::expansion(attr, item).err().expect("refused");
    assert!(
        err.to_string().contains("more than 1000 operators"),
        "{err}"
    );
}

/// `&Tiles` is the tile-set contract alone: read-only, no value type, only `tile_offsets` and
/// `num_tiles` to read; the format's arrays are ordinary slices.
#[test]
fn the_tile_set_contract_has_its_own_fields_and_no_value_type() {
    let body = lower_fn(
        reduce_sum(),
        quote! {
            fn f(a: &Tiles, v: &[f32], #[tile] t: usize, #[rank] k: usize, #[atom] nz: usize) -> f32 {
                let n = a.tile_offsets[t + 1] - a.tile_offsets[t] + a.num_tiles;
                v[nz + k] * n as f32
            }
        },
    )
    .unwrap();
    assert!(matches!(
        body.params[0].kind,
        ParamKind::TileSet {
            kind: lb_ptx::body::TileSetKind::Tiles,
            ..
        }
    ));
    for (item, says) in [
        (
            quote!(fn f(a: &Tiles, #[atom] nz: usize) -> f32 { a.values[nz] }),
            "`values` is not an array of a `Tiles` tile set: the arrays are `tile_offsets`",
        ),
        (
            quote!(fn f(a: &Tiles, #[atom] nz: usize) -> f32 { a.num_rows as f32 }),
            "a `Tiles` tile set has no field `num_rows`: its fields are `tile_offsets`, `num_tiles`",
        ),
        (
            quote!(fn f(a: &mut Tiles, #[atom] nz: usize) -> f32 { 1.0 }),
            "take it as `&Tiles`",
        ),
        (
            quote!(fn f(a: &Tiles<f32>, #[atom] nz: usize) -> f32 { 1.0 }),
            "take it as `&Tiles`",
        ),
    ] {
        let errs = errors(lower_fn(reduce_sum(), item.clone()));
        assert!(errs.iter().any(|e| e.contains(says)), "{item}: {errs:?}");
    }
}
