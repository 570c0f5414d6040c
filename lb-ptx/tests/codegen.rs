//! Snapshot tests of the generated PTX for hand-built bodies, plus `generate`'s validation and
//! plans. Every snapshot was read as PTX before it was accepted.

mod codegen_common;

use codegen_common::*;
use lb_ptx::body::Body;
use lb_ptx::plan::{DeviceLimits, Grid, OffsetWidth, ProblemSize, TempRole};
use lb_ptx::{generate, GenError, Options, Schedule};

fn ptx(body: &Body, opts: &Options) -> String {
    generate(body, opts).expect("generates").ptx
}

#[test]
fn spmv_sum() {
    insta::assert_snapshot!(ptx(&spmv(), &Options::default()));
}

#[test]
fn spmm_lanes() {
    let opts = Options {
        lanes: Some(2),
        ..Options::default()
    };
    insta::assert_snapshot!(ptx(&spmm(), &opts));
}

#[test]
fn scatter_atomic_add_no_reduce() {
    insta::assert_snapshot!(ptx(&scatter(), &Options::default()));
}

#[test]
fn relax_frontier_checked() {
    let opts = Options {
        tiles: Some(1),
        checked: true,
        ..Options::default()
    };
    insta::assert_snapshot!(ptx(&relax(), &opts));
}

#[test]
fn mix_of_the_subset() {
    insta::assert_snapshot!(ptx(&mix(), &Options::default()));
}

#[test]
fn integer_corners() {
    insta::assert_snapshot!(ptx(&bits(), &Options::default()));
}

#[test]
fn spmv_checked() {
    let opts = Options {
        checked: true,
        ..Options::default()
    };
    insta::assert_snapshot!(ptx(&spmv(), &opts));
}

#[test]
fn float_atomics() {
    insta::assert_snapshot!(ptx(&fatom(), &Options::default()));
}

#[test]
fn float_rem_is_rejected() {
    let mut body = spmv();
    let value = body.block.value.take().unwrap();
    body.block.value = Some(Box::new(bin(
        lb_ptx::body::BinaryOp::Rem,
        lb_ptx::body::Ty::F32,
        *value,
        float(lb_ptx::body::Ty::F32, 2.0),
    )));
    assert!(matches!(
        generate(&body, &Options::default()),
        Err(GenError::Unsupported(m)) if m.contains('%')
    ));
}

#[test]
fn plan_of_thread_mapped() {
    let g = generate(&spmv(), &Options::default()).unwrap();
    assert_eq!(g.plans.len(), 2);
    let plan = &g.plans[0];
    assert_eq!(plan.offsets, OffsetWidth::U64);
    let twin = &g.plans[1];
    assert_eq!(twin.offsets, OffsetWidth::U32);
    assert_eq!(twin.kernels[0].entry, "spmv_thread_mapped_u32");
    assert_eq!(twin.temps, plan.temps);
    assert!(g.ptx.contains(".visible .entry spmv_thread_mapped_u32("));
    assert_eq!(plan.schedule, "thread_mapped");
    assert_eq!(plan.kernels.len(), 1);
    assert_eq!(plan.kernels[0].entry, "spmv_thread_mapped");
    assert_eq!(plan.kernels[0].block, 256);
    assert_eq!(plan.kernels[0].grid, Grid::CoverItems { per_thread: 1 });
    assert!(plan.temps.is_empty());
    assert!(g.ptx.contains(".visible .entry spmv_thread_mapped("));

    let checked = Options {
        checked: true,
        ..Options::default()
    };
    let g = generate(&spmv(), &checked).unwrap();
    let temps = &g.plans[0].temps;
    assert_eq!(temps.len(), 1);
    assert_eq!(temps[0].role, TempRole::ErrorFlag);
    assert_eq!((temps[0].elem_bytes, temps[0].zero), (8, true));
}

/// The grid of a group walk's own kernel (the last of its plan's) under `schedules`.
fn walk_grids(body: &Body, schedule: Schedule, lanes: Option<usize>) -> Vec<(String, Grid)> {
    let opts = Options {
        schedules: vec![schedule],
        lanes,
        ..Options::default()
    };
    generate(body, &opts)
        .unwrap()
        .plans
        .iter()
        .map(|p| {
            let k = p.kernels.last().unwrap();
            (k.entry.to_string(), k.grid)
        })
        .collect()
}

#[test]
fn virtual_warps_take_a_tile_each() {
    // Busato & Bombieri's `#RequiredThreads = #workitems · |VirtualWarp|`: N threads per tile.
    for n in [2, 4, 8, 16] {
        for (entry, grid) in walk_grids(&spmv(), Schedule::GroupMapped(n), None) {
            assert_eq!(grid, Grid::GroupPerItem { threads: n }, "{entry}");
        }
    }
    // `dynamic_virtual_warps` picks a size per tile set; its 32-thread plan is the warp walk.
    for (entry, grid) in walk_grids(&spmv(), Schedule::DynamicVirtualWarps, None) {
        let n: u32 = entry
            .trim_end_matches("_u32")
            .rsplit('_')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no group size in `{entry}`"));
        let want = if n < 32 {
            Grid::GroupPerItem { threads: n }
        } else {
            Grid::CoverItems { per_thread: 1 }
        };
        assert_eq!(grid, want, "{entry}");
    }
    // With lanes the walk takes one (tile, lane) item per thread; a warp walk keeps its slots.
    for schedule in [Schedule::GroupMapped(8), Schedule::WarpMapped] {
        let lanes = (schedule == Schedule::GroupMapped(8)).then_some(2);
        let body = if lanes.is_some() { spmm() } else { spmv() };
        for (entry, grid) in walk_grids(&body, schedule, lanes) {
            assert_eq!(grid, Grid::CoverItems { per_thread: 1 }, "{entry}");
        }
    }
}

#[test]
fn group_per_item_grids_cover_the_groups_up_to_the_resident_blocks() {
    let limits = DeviceLimits {
        sm_count: 132,
        blocks_per_sm: 8,
    };
    let size = |tiles, lanes| ProblemSize {
        tiles,
        atoms: tiles * 28,
        lanes,
        max_tile_atoms: 28,
        offsets: OffsetWidth::U32,
    };
    let grid = Grid::GroupPerItem { threads: 8 };
    // 100 tiles of 8 threads: 800 threads, four blocks of 256 (one thread a tile needs one).
    assert_eq!(grid.blocks(&size(100, 1), 256, &limits), 4);
    assert_eq!(
        Grid::CoverItems { per_thread: 1 }.blocks(&size(100, 1), 256, &limits),
        1
    );
    // 120 000 tiles want 3 750 blocks; 1 056 are resident and stride over the rest.
    assert_eq!(grid.blocks(&size(120_000, 1), 256, &limits), 1056);
    // Lanes multiply the items; no tiles still launch one block.
    assert_eq!(grid.blocks(&size(64, 2), 256, &limits), 4);
    assert_eq!(grid.blocks(&size(0, 1), 256, &limits), 1);
    assert_eq!(
        Grid::GroupPerItem { threads: 0 }.blocks(&size(512, 1), 256, &limits),
        2
    );
}

#[test]
fn params_follow_the_abi() {
    let g = generate(
        &spmv(),
        &Options {
            checked: true,
            ..Options::default()
        },
    )
    .unwrap();
    let names: Vec<&str> = g
        .ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".param "))
        .collect();
    // The same list for the 64-bit-offsets kernel and its 32-bit twin (the offsets are a
    // pointer either way).
    assert_eq!(names.len(), 26);
    assert_eq!(names[..13], names[13..]);
    assert_eq!(
        names[..13],
        [
            ".u64 a_row_offsets,",
            ".u64 a_col_indices,",
            ".u64 a_values,",
            ".u64 a_num_rows,",
            ".u64 a_num_cols,",
            ".u64 a_nnz,",
            ".u64 x_ptr,",
            ".u64 x_len,",
            ".u64 lb_out_ptr,",
            ".u64 lb_out_len,",
            ".u64 lb_tmp_error_flag,",
            ".u64 lb_mirrors,",
            ".u64 lb_mirror_count",
        ]
    );
}

#[test]
fn rejects_old_targets_and_odd_blocks() {
    for target in ["sm_70", "sm_52", "compute_80", "sm_", "sm_9", "sm_80ab"] {
        let opts = Options {
            target: target.into(),
            ..Options::default()
        };
        assert_eq!(
            generate(&spmv(), &opts),
            Err(GenError::BadTarget(target.into()))
        );
    }
    for target in [
        "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100",
    ] {
        let opts = Options {
            target: target.into(),
            ..Options::default()
        };
        assert!(generate(&spmv(), &opts).is_ok(), "{target}");
    }
    for block in [0, 16, 48, 100, 2048] {
        let opts = Options {
            block,
            ..Options::default()
        };
        assert!(
            matches!(generate(&spmv(), &opts), Err(GenError::BadBlock { block: b, .. }) if b == block)
        );
    }
}

#[test]
fn rejects_a_schedule_listed_twice() {
    let opts = Options {
        schedules: vec![lb_ptx::Schedule::ThreadMapped; 2],
        ..Options::default()
    };
    assert!(matches!(
        generate(&spmv(), &opts),
        Err(GenError::Unsupported(_))
    ));
}

#[test]
fn generation_is_deterministic() {
    let opts = Options::default();
    assert_eq!(ptx(&mix(), &opts), ptx(&mix(), &opts));
}
