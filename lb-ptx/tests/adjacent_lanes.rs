//! Adjacent lanes: the lane walks of the thread, group and `lrb` schedules and the split's tiers
//! read two or four adjacent lanes of the dense input with one vector load and store them with
//! one vector store, when the kernel finds the lane count a multiple of the lanes per thread and
//! the arrays aligned; otherwise they fall back to strided lanes. Both paths against an f64
//! reference on the simulator, which faults on a misaligned vector access as the GPU does.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::{BinaryOp, Block, Expr, ExprKind, IndexRole, Stmt, Ty};
use lb_ptx::{generate, IndexWidth, Schedule};
use support::*;

/// The schedules whose lane walks use adjacent lanes.
const SCHEDULES: [Schedule; 7] = [
    Schedule::ThreadMapped,
    Schedule::GroupMapped(4),
    Schedule::GroupMapped(8),
    Schedule::WarpMapped,
    Schedule::BlockMapped,
    Schedule::Lrb,
    Schedule::Binning,
];

fn lane_opts(s: Schedule, block: u32) -> lb_ptx::Options {
    lb_ptx::Options {
        lanes: Some(2),
        ..opts(s, block, 1, IndexWidth::U64)
    }
}

/// The plan the runtime picks for `k` lanes (`thread_mapped` has one per lanes per thread).
fn plan_for(o: &lb_ptx::Options, m: &Matrix, k: usize) -> usize {
    let g = generate(&spmm(), o).unwrap();
    let size = size(m, k);
    g.plans
        .iter()
        .position(|p| p.select.is_none_or(|s| s.matches(&size, 0.0)))
        .expect("a plan for every lane count")
}

/// Empty tiles, short ones, tiles around the mid tier's piece and threshold, one past the lane
/// threshold and a giant one, and a run of random sizes.
fn sizes(rng: &mut Rng) -> Vec<usize> {
    let lt = lb_ptx::primitives::huge::LANE_THRESHOLD as usize;
    let chunk = lb_ptx::primitives::huge::LANE_CHUNK as usize;
    let ceiling = lb_ptx::primitives::huge::MID_CEILING as usize;
    let mut sizes = vec![0, 1, 3, 31, 32, 33, 64, 65, 0, lt - 1, lt, lt + 1, 0];
    sizes.extend([ceiling - 1, ceiling, ceiling + 1, 0]);
    sizes.push(rng.range(2 * chunk + 1, 3 * chunk));
    sizes.extend((0..rng.range(60, 120)).map(|_| rng.range(0, 40)));
    sizes.extend((0..rng.range(5, 10)).map(|_| rng.range(32, ceiling + 40)));
    sizes
}

#[test]
fn lane_walks_read_and_store_vectors() {
    for s in SCHEDULES {
        let g = generate(&spmm(), &lane_opts(s, 128)).unwrap();
        assert!(
            g.ptx.contains("ld.global.nc.v4.f32"),
            "{}: no `ld.global.nc.v4.f32`",
            s.name()
        );
        // Two lanes a thread only in the huge-tile split's tiers (`SPLIT_LANE_BLOCKING`), which
        // every schedule here but `thread_mapped` has.
        if s != Schedule::ThreadMapped {
            assert!(
                g.ptx.contains("ld.global.nc.v2.f32"),
                "{}: no `ld.global.nc.v2.f32`",
                s.name()
            );
        }
        if s != Schedule::Binning {
            assert!(
                g.ptx.contains("st.global.v4.f32"),
                "{}: no vector store",
                s.name()
            );
        }
    }
}

#[test]
fn adjacent_lanes_match_the_reference() {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let m = Matrix::from_lengths(&sizes(&mut rng));
    for s in SCHEDULES {
        for block in [64, 256] {
            let o = lane_opts(s, block);
            // Multiples of four and of two (adjacent) and others (strided), below and above a
            // warp of lane groups.
            for k in [2, 4, 6, 8, 16, 20, 32, 34, 36, 64, 128, 132] {
                let what = format!("{} (block {block}), k {k}, seed {seed}", s.name());
                let plan = plan_for(&o, &m, k);
                let got = run_reduce(&spmm(), &o, plan, &m, Some(k));
                check_sum(&got, &m, Some(k), &what);
                assert_eq!(
                    got,
                    run_reduce(&spmm(), &o, plan, &m, Some(k)),
                    "{what}: twice"
                );
            }
        }
    }
}

#[test]
fn misaligned_operands_take_the_strided_lanes() {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let m = Matrix::from_lengths(&sizes(&mut rng));
    for s in SCHEDULES {
        let o = lane_opts(s, 128);
        for (k, offset) in [(32, 4), (32, 8), (16, 4), (64, 12)] {
            let what = format!(
                "{}, k {k}, operands {offset} bytes off, seed {seed}",
                s.name()
            );
            let got = run_reduce_at(&spmm(), &o, plan_for(&o, &m, k), &m, (Some(k), offset));
            check_sum(&got, &m, Some(k), &what);
        }
    }
}

#[test]
fn checked_lanes_test_each_index() {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let m = Matrix::from_lengths(&sizes(&mut rng));
    for s in SCHEDULES {
        let o = lb_ptx::Options {
            checked: true,
            ..lane_opts(s, 128)
        };
        for k in [4, 32] {
            let what = format!("{}, checked, k {k}, seed {seed}", s.name());
            let got = run_reduce(&spmm(), &o, plan_for(&o, &m, k), &m, Some(k));
            check_sum(&got, &m, Some(k), &what);
        }
    }
}

/// A body whose lane load sits under a branch reads it with scalar loads: the first lane's copy
/// may skip the branch that another lane's takes.
#[test]
fn a_branching_body_reads_scalars() {
    let mut body = spmm();
    let value = body.block.value.take().unwrap();
    let lane_is_even = Expr {
        kind: ExprKind::Binary {
            op: BinaryOp::Eq,
            lhs: Box::new(Expr {
                kind: ExprKind::Binary {
                    op: BinaryOp::BitAnd,
                    lhs: Box::new(Expr {
                        kind: ExprKind::Index(IndexRole::Lane),
                        ty: Ty::U64,
                    }),
                    rhs: Box::new(Expr {
                        kind: ExprKind::Lit(lb_ptx::body::Lit::Int(1)),
                        ty: Ty::U64,
                    }),
                },
                ty: Ty::U64,
            }),
            rhs: Box::new(Expr {
                kind: ExprKind::Lit(lb_ptx::body::Lit::Int(0)),
                ty: Ty::U64,
            }),
        },
        ty: Ty::Bool,
    };
    let zero = Expr {
        kind: ExprKind::Lit(lb_ptx::body::Lit::Float(0.0)),
        ty: Ty::F32,
    };
    body.block.stmts.push(Stmt::Return(Some(Expr {
        kind: ExprKind::If {
            cond: Box::new(lane_is_even),
            then: Block {
                stmts: vec![],
                value: Some(value),
            },
            els: Block {
                stmts: vec![],
                value: Some(Box::new(zero)),
            },
        },
        ty: Ty::F32,
    })));
    let g = generate(&body, &lane_opts(Schedule::WarpMapped, 128)).unwrap();
    assert!(!g.ptx.contains("ld.global.nc.v4.f32"));
}

/// The plan's kernels with every track-0 kernel first, then the side tracks' (each in listed
/// order): the other serialization that running the tracks side by side allows.
fn side_tracks_last(plan: &lb_ptx::plan::Plan) -> lb_ptx::plan::Plan {
    let mut kernels = plan.kernels.to_vec();
    kernels.sort_by_key(|k| k.track != 0);
    lb_ptx::plan::Plan {
        kernels: std::borrow::Cow::Owned(kernels),
        ..plan.clone()
    }
}

/// The huge-tile split's tiers run on a side track beside the schedule's kernel for the short
/// tiles: each must neither read what the other writes nor write what the other reads, so the
/// plan is right in either order. With lanes (both tiers) and without (the huge tier), on tiles
/// in every tier and on tile sets with no tile for a tier.
#[test]
fn the_tiers_and_the_schedule_agree_in_either_order() {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let threshold = lb_ptx::primitives::huge::threshold(64, false) as usize;
    let sets = [
        sizes(&mut rng),
        (0..200).map(|_| rng.range(0, 30)).collect(),
        vec![threshold + 5, 0, 2, 40, 1, threshold * 2, 7],
    ];
    for lengths in sets {
        let m = Matrix::from_lengths(&lengths);
        for s in [
            Schedule::GroupMapped(8),
            Schedule::WarpMapped,
            Schedule::Lrb,
            Schedule::Binning,
        ] {
            let what = |k: Option<usize>| format!("{}, k {k:?}, seed {seed}", s.name());
            let o = lane_opts(s, 64);
            let g = generate(&spmm(), &o).unwrap();
            for k in [8, 32, 33] {
                let plan = &g.plans[plan_for(&o, &m, k)];
                assert!(
                    plan.kernels.iter().any(|k| k.track != 0),
                    "{}",
                    what(Some(k))
                );
                // The cache producers (the tiers' lists among them) lead on track 0: the
                // tiers' kernels read what they made.
                let producers = plan.cache_producers();
                assert!(producers >= 2, "{}", what(Some(k)));
                assert!(
                    plan.kernels[..producers].iter().all(|k| k.track == 0),
                    "{}",
                    what(Some(k))
                );
                let got = run_reduce_in(&g, &side_tracks_last(plan), &m, (Some(k), 0));
                check_sum(&got, &m, Some(k), &what(Some(k)));
            }
            let o = opts(s, 64, 1, IndexWidth::U64);
            let g = generate(&spmv(), &o).unwrap();
            let got = run_reduce_in(&g, &side_tracks_last(&g.plans[0]), &m, (None, 0));
            check_sum(&got, &m, None, &what(None));
        }
    }
}
