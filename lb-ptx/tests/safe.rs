//! `generate_safe`: a body whose every access is proven gets exactly the unchecked kernels (same
//! PTX, no error flag, no twins); a body with an unproven access or a frontier gets tested
//! kernels plus untested `_unchecked` twins, and the tests cover only what is unproven.

mod codegen_common;

use codegen_common::*;
use lb_ptx::body::{Body, GatherBound};
use lb_ptx::plan::{Plan, TempRole};
use lb_ptx::{generate, generate_safe, Options, Schedule};

fn every_schedule(lanes: Option<usize>, tiles: Option<usize>) -> Options {
    Options {
        schedules: Schedule::every().collect(),
        lanes,
        tiles,
        ..Options::default()
    }
}

fn has_error_flag(plans: &[Plan]) -> bool {
    plans
        .iter()
        .any(|p| p.temps.iter().any(|t| t.role == TempRole::ErrorFlag))
}

/// The safe PTX is the unchecked PTX, byte for byte, with one set of plans.
fn assert_unchecked_ptx(body: &Body, opts: &Options) {
    let safe = generate_safe(body, opts).unwrap();
    let unchecked = generate(body, opts).unwrap();
    assert_eq!(safe.ptx, unchecked.ptx, "{}", body.name);
    assert_eq!(safe.plans, unchecked.plans, "{}", body.name);
    assert_eq!(safe.unchecked, None, "{}", body.name);
    assert!(!safe.ptx.contains("error_flag"), "{}", body.name);
}

#[test]
fn spmv_and_spmm_default_ptx_is_the_unchecked_ptx() {
    assert_unchecked_ptx(&spmv(), &every_schedule(None, None));
    assert_unchecked_ptx(&spmm(), &every_schedule(Some(2), None));
    let safe = generate_safe(&spmv(), &every_schedule(None, None)).unwrap();
    assert_eq!(safe.gathers.len(), 1);
    assert_eq!(safe.gathers[0].bound, GatherBound::Columns);
    let safe = generate_safe(&spmm(), &every_schedule(Some(2), None)).unwrap();
    assert_eq!(safe.gathers[0].lanes, Some(2));
}

#[test]
fn a_frontier_is_tested_but_proven_accesses_are_not() {
    let body = relax();
    let safe = generate_safe(&body, &every_schedule(None, Some(1))).unwrap();
    assert!(has_error_flag(&safe.plans));
    let unchecked = safe.unchecked.as_ref().expect("twins");
    assert!(!has_error_flag(unchecked));
    // Every access of the relaxation is proven, so the safe kernels test the frontier entries
    // and not the body's accesses, which `checked = true` tests too.
    let debug = generate_safe(
        &body,
        &Options {
            checked: true,
            ..every_schedule(None, Some(1))
        },
    )
    .unwrap();
    let tests = |ptx: &str| ptx.matches("atom.global.cas.b64").count();
    assert!(
        tests(&safe.ptx) < tests(&debug.ptx),
        "proven accesses are not tested: {} vs {}",
        tests(&safe.ptx),
        tests(&debug.ptx)
    );
}

#[test]
fn an_unproven_access_gets_tested_kernels_and_untested_twins() {
    // `scatter` with its `y[col]` atomic moved to `y[col + 1]`, which no host check bounds.
    let mut body = scatter();
    body.name = "shifted".into();
    let mut shifted = false;
    shift_first_gather(&mut body.block, &mut shifted);
    assert!(shifted, "the body has a gather to shift");
    let opts = every_schedule(None, None);
    let safe = generate_safe(&body, &opts).unwrap();
    assert!(has_error_flag(&safe.plans));
    let unchecked = safe.unchecked.expect("twins");
    assert!(!has_error_flag(&unchecked));
    assert_eq!(safe.plans.len(), unchecked.len());
    let plain = generate(&body, &opts).unwrap();
    for (twin, plain) in unchecked.iter().zip(&plain.plans) {
        for (t, p) in twin.kernels.iter().zip(plain.kernels.iter()) {
            assert_eq!(
                t.entry,
                p.entry.replacen("shifted_", "shifted_unchecked_", 1)
            );
            assert!(safe.ptx.contains(&format!(".entry {}(", t.entry)));
        }
    }
}

/// Rewrites the first `y[col]` atomic of `block` into `y[col + 1]`.
fn shift_first_gather(block: &mut lb_ptx::body::Block, done: &mut bool) {
    use lb_ptx::body::{BinaryOp, ExprKind, Lit, Stmt};
    for s in &mut block.stmts {
        match s {
            Stmt::If { then, els, .. } => {
                shift_first_gather(then, done);
                shift_first_gather(els, done);
            }
            Stmt::Expr(e) if !*done => {
                if let ExprKind::Atomic { index, .. } = &mut e.kind {
                    let one = lb_ptx::body::Expr {
                        ty: index.ty,
                        kind: ExprKind::Lit(Lit::Int(1)),
                    };
                    let old = std::mem::replace(&mut **index, one.clone());
                    **index = lb_ptx::body::Expr {
                        ty: old.ty,
                        kind: ExprKind::Binary {
                            op: BinaryOp::Add,
                            lhs: Box::new(old),
                            rhs: Box::new(one),
                        },
                    };
                    *done = true;
                }
            }
            _ => {}
        }
    }
}
