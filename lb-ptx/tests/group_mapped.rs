//! The group-mapped family (`group_mapped(N)`, `warp_mapped`, `block_mapped`,
//! `dynamic_virtual_warps`) on the simulator against sequential CPU loops, on adversarial and
//! random tile sets; plus the PTX shape of virtual warps, ptxas, and snapshots.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::plan::{OffsetWidth, Plan, ProblemSize, Select};
use lb_ptx::schedules::DynamicVirtualWarps;
use lb_ptx::sim::{self, Memory};
use lb_ptx::{generate, GenError, Generated, Options, Schedule};
use proptest::prelude::*;
use support::*;

const BLOCK: u32 = 128;

/// Every group size under test: the shuffle sizes, one shared-memory size below the block, and
/// the whole block.
const SCHEDULES: [Schedule; 7] = [
    Schedule::GroupMapped(2),
    Schedule::GroupMapped(4),
    Schedule::GroupMapped(8),
    Schedule::GroupMapped(16),
    Schedule::WarpMapped,
    Schedule::GroupMapped(64),
    Schedule::BlockMapped,
];

fn opts(schedule: Schedule) -> Options {
    Options {
        schedules: vec![schedule],
        block: BLOCK,
        ..Options::default()
    }
}

/// Runs the kernel of `plan` from `g` over `grid` blocks.
fn launch(g: &Generated, plan: &Plan, grid: u32, args: &[u64], mem: &mut Memory) -> Vec<u64> {
    // Every kernel of the plan (the huge-tile split's too), with its temporaries; the group
    // walk gets at most `grid` resident blocks.
    let module = sim::parse(&g.ptx).unwrap();
    let runner = Runner::resident(grid, usize::MAX);
    // An upper bound of every test's problem (all rows, up to 33 lanes): temporaries and the
    // split's grids only grow with it.
    let size = ProblemSize {
        tiles: args[3],
        atoms: args[5],
        lanes: 33,
        max_tile_atoms: u64::MAX,
        offsets: plan.offsets,
    };
    runner.run(&module, plan, args.to_vec(), size, mem).0
}

/// Every plan of `schedule` for `body`, each with the generated module.
fn plans(body: &Body, o: &Options) -> (Generated, Vec<Plan>) {
    let g = generate(body, o).unwrap();
    let plans = g.plans.clone();
    (g, plans)
}

/// SpMV on every plan of `o`; returns the raw output bits of each run.
fn check_spmv(t: &Tiles, o: &Options, grid: u32) -> Vec<Vec<u32>> {
    let (g, plans) = plans(&spmv(), o);
    let x = xvec(t.ncols);
    let mut outs = Vec::new();
    for plan in &plans {
        let mut mem = Memory::new();
        let mut args = t.upload_at(&mut mem, plan.offsets);
        args.extend([
            upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
            x.len() as u64,
        ]);
        let y = upload(&mut mem, &nan_f32(t.rows()));
        args.extend([y, t.rows() as u64]);
        launch(&g, plan, grid, &args, &mut mem);
        let got: Vec<u32> = read_words::<4>(&mem, y, t.rows())
            .into_iter()
            .map(u32::from_le_bytes)
            .collect();
        for (r, &got) in got.iter().enumerate() {
            let mut acc = 0f32;
            for nz in t.atoms(r) {
                acc += t.values[nz] * x[t.cols[nz] as usize];
            }
            assert_eq!(
                got,
                acc.to_bits(),
                "{}: row {r} of {}",
                plan.kernels[0].entry,
                t.rows()
            );
        }
        outs.push(got);
    }
    outs
}

fn check_min_max(t: &Tiles, schedule: Schedule, grid: u32) {
    for (reduce, name) in [(Reduce::Min, "vmin"), (Reduce::Max, "vmax")] {
        let (g, plans) = plans(&values_body(name, reduce), &opts(schedule));
        let mut mem = Memory::new();
        let mut args = t.upload(&mut mem);
        let y = upload(&mut mem, &nan_f32(t.rows()));
        args.extend([y, t.rows() as u64]);
        launch(&g, &plans[0], grid, &args, &mut mem);
        let got = read_words::<4>(&mem, y, t.rows());
        for (r, got) in got.into_iter().enumerate() {
            let want = t.atoms(r).fold(
                if reduce == Reduce::Min {
                    f32::INFINITY
                } else {
                    f32::NEG_INFINITY
                },
                |a, nz| {
                    if reduce == Reduce::Min {
                        a.min(t.values[nz])
                    } else {
                        a.max(t.values[nz])
                    }
                },
            );
            assert_eq!(f32::from_le_bytes(got), want, "{name} {schedule:?} row {r}");
        }
    }
}

fn check_isum(t: &Tiles, schedule: Schedule, grid: u32) {
    let (g, plans) = plans(&isum(), &opts(schedule));
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    let y = upload(&mut mem, &vec![0xAB; 8 * t.rows()]);
    args.extend([y, t.rows() as u64]);
    launch(&g, &plans[0], grid, &args, &mut mem);
    let got = read_words::<8>(&mem, y, t.rows());
    for (r, got) in got.into_iter().enumerate() {
        let begin = t.offsets[r] as i64;
        let want: i64 = t
            .atoms(r)
            .map(|nz| nz as i64 * 7 - (nz as i64 - begin))
            .sum();
        assert_eq!(i64::from_le_bytes(got), want, "isum {schedule:?} row {r}");
    }
}

/// Runs `visit` (optionally over `frontier`) and checks every atom of the active tiles was
/// visited once per occurrence of its tile, with the right tile and rank.
fn check_visit(t: &Tiles, frontier: Option<&[u32]>, schedule: Schedule, grid: u32) {
    let body = visit(frontier.is_some());
    let o = Options {
        tiles: frontier.map(|_| 1),
        ..opts(schedule)
    };
    let (g, plans) = plans(&body, &o);
    let mut mem = Memory::new();
    let (args, outs) = visit_args(&mut mem, t, frontier);
    launch(&g, &plans[0], grid, &args, &mut mem);
    check_visit_outputs(&mem, t, frontier, outs, &schedule);
}

fn check_spmm(t: &Tiles, k: usize, schedule: Schedule, grid: u32) {
    let o = Options {
        lanes: Some(2),
        ..opts(schedule)
    };
    let (g, plans) = plans(&spmm(), &o);
    let b: Vec<f32> = (0..t.ncols * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    args.extend([
        upload(&mut mem, &bytes_of(&b, f32::to_le_bytes)),
        b.len() as u64,
    ]);
    args.push(k as u64);
    let c = upload(&mut mem, &nan_f32(t.rows() * k));
    args.extend([c, (t.rows() * k) as u64]);
    launch(&g, &plans[0], grid, &args, &mut mem);
    let got = read_words::<4>(&mem, c, t.rows() * k);
    for r in 0..t.rows() {
        for j in 0..k {
            let mut acc = 0f32;
            for nz in t.atoms(r) {
                acc += t.values[nz] * b[t.cols[nz] as usize * k + j];
            }
            assert_eq!(
                f32::from_le_bytes(got[r * k + j]),
                acc,
                "{schedule:?} row {r} lane {j}"
            );
        }
    }
}

fn check_spmv_frontier(t: &Tiles, frontier: &[u32], schedule: Schedule, grid: u32) {
    let o = Options {
        tiles: Some(1),
        ..opts(schedule)
    };
    let (g, plans) = plans(&spmv_frontier(), &o);
    let x = xvec(t.ncols);
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    args.extend([
        upload(&mut mem, &bytes_of(frontier, u32::to_le_bytes)),
        frontier.len() as u64,
    ]);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    let y = upload(&mut mem, &nan_f32(t.rows()));
    args.extend([y, t.rows() as u64]);
    launch(&g, &plans[0], grid, &args, &mut mem);
    let got = read_words::<4>(&mem, y, t.rows());
    for r in 0..t.rows() {
        let got = f32::from_le_bytes(got[r]);
        if frontier.contains(&(r as u32)) {
            let want: f32 = t
                .atoms(r)
                .fold(0.0, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
            assert_eq!(got, want, "{schedule:?} frontier row {r}");
        } else {
            assert!(got.is_nan(), "{schedule:?}: row {r} is not in the frontier");
        }
    }
}

/// The adversarial tile sets of DESIGN §5, sized against a block of 128 and groups up to 128.
fn adversarial() -> Vec<(&'static str, Vec<usize>)> {
    let mut mixed: Vec<usize> = (0..37).map(|i| [0, 1, 3, 0, 9, 2][i % 6]).collect();
    mixed[5] = 300;
    mixed[20] = 70;
    vec![
        ("one giant tile", vec![700]),
        ("all empty", vec![0; 45]),
        ("zero tiles", vec![]),
        ("single atom", vec![1]),
        ("one atom among empties", vec![0, 0, 0, 1, 0]),
        ("bigger than group and block", mixed),
        ("uneven", (0..133).map(|i| (i * 7) % 5).collect()),
    ]
}

#[test]
fn every_group_size_matches_the_cpu_on_adversarial_tile_sets() {
    for (name, sizes) in adversarial() {
        let t = Tiles::new(&sizes);
        for (i, &s) in SCHEDULES.iter().enumerate() {
            let grid = 1 + (i as u32 % 2);
            eprintln!("{name}: {s:?}");
            check_spmv(&t, &opts(s), grid);
            check_isum(&t, s, grid);
            check_visit(&t, None, s, grid);
        }
    }
}

#[test]
fn min_max_lanes_and_frontiers_match_the_cpu() {
    let mut sizes: Vec<usize> = (0..70).map(|i| (i * 11) % 6).collect();
    sizes[3] = 150;
    let t = Tiles::new(&sizes);
    let frontier: Vec<u32> = vec![3, 0, 69, 3, 10, 11, 12, 40, 3, 5, 5, 68];
    for (i, &s) in SCHEDULES.iter().enumerate() {
        let grid = 1 + (i as u32 % 3);
        check_min_max(&t, s, grid);
        for k in [1, 3, 33] {
            check_spmm(&Tiles::new(&sizes[..20]), k, s, grid);
        }
        check_spmv_frontier(&t, &frontier, s, grid);
        check_visit(&t, Some(&frontier), s, grid);
        check_visit(&t, Some(&[]), s, grid);
    }
}

/// With a frontier, `dynamic_virtual_warps` picks N on the device from the frontier's own mean
/// atoms per tile (the host knows only the whole tile set's atoms): one plan per offset width,
/// a kernel summing the frontier's atoms before the walk, and results that match the CPU
/// whichever size the frontier's mean picks (1, 6 and 40 atoms: N = 2, 8 and 32; mixed; empty).
#[test]
fn dynamic_virtual_warps_pick_from_the_frontier() {
    let o = Options {
        tiles: Some(1),
        ..opts(Schedule::DynamicVirtualWarps)
    };
    let (_, frontier_plans) = plans(&spmv_frontier(), &o);
    assert_eq!(frontier_plans.len(), 2, "one plan at each offset width");
    for p in &frontier_plans {
        assert!(p.select.is_none(), "the size is picked on the device");
        assert!(
            p.kernels
                .iter()
                .any(|k| k.entry.contains("_frontier_atoms")),
            "{:?}",
            p.kernels
        );
    }
    let sizes: Vec<usize> = (0..60).map(|i| [1, 6, 40][i % 3]).collect();
    let t = Tiles::new(&sizes);
    let of = |first: u32| (first..60).step_by(3).collect::<Vec<u32>>();
    for frontier in [of(0), of(1), of(2), vec![2, 0, 2, 4, 59, 1], vec![]] {
        for grid in [1, 3] {
            check_spmv_frontier(&t, &frontier, Schedule::DynamicVirtualWarps, grid);
            check_visit(&t, Some(&frontier), Schedule::DynamicVirtualWarps, grid);
        }
    }
}

#[test]
fn awkward_floats_agree_within_rounding_and_are_deterministic() {
    // Small tiles (scanned rounds), tiles of at least a warp (walked by a shuffle group) and
    // tiles of at least 128 atoms (walked by a whole group wider than a warp).
    let mut sizes: Vec<usize> = (0..50).map(|i| (i * 13) % 40).collect();
    sizes[7] = 300;
    sizes[30] = 150;
    let mut t = Tiles::new(&sizes);
    for (i, v) in t.values.iter_mut().enumerate() {
        *v = ((i as f32) * 0.37).sin() * 1e3 + 1e-4;
    }
    let x: Vec<f32> = (0..t.ncols)
        .map(|i| (i as f32 * 0.71).cos() * 3.3)
        .collect();
    for &s in &SCHEDULES {
        let (g, plans) = plans(&spmv(), &opts(s));
        let run = |grid| {
            let mut mem = Memory::new();
            let mut args = t.upload(&mut mem);
            args.extend([
                upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
                x.len() as u64,
            ]);
            let y = upload(&mut mem, &nan_f32(t.rows()));
            args.extend([y, t.rows() as u64]);
            launch(&g, &plans[0], grid, &args, &mut mem);
            read_words::<4>(&mem, y, t.rows())
        };
        let (a, b, c) = (run(1), run(1), run(3));
        assert_eq!(a, b, "{s:?}: two launches differ");
        assert_eq!(a, c, "{s:?}: the grid size changed the result");
        for (r, got) in a.iter().enumerate() {
            let (mut want, mut mag) = (0f64, 0f64);
            for nz in t.atoms(r) {
                let p = f64::from(t.values[nz]) * f64::from(x[t.cols[nz] as usize]);
                want += p;
                mag += p.abs();
            }
            let got = f64::from(f32::from_le_bytes(*got));
            assert!(
                (got - want).abs() <= mag * 1e-5 + 1e-6,
                "{s:?} row {r}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn dynamic_virtual_warps_picks_the_documented_size() {
    for (avg, n) in [
        (0, 2),
        (1, 2),
        (2, 2),
        (3, 4),
        (4, 4),
        (5, 8),
        (8, 8),
        (9, 16),
        (16, 16),
        (17, 32),
        (1000, 32),
        (u64::MAX, 32),
    ] {
        assert_eq!(DynamicVirtualWarps::size_for(avg), n, "average {avg}");
    }
    let (_, plans) = plans(&spmv(), &opts(Schedule::DynamicVirtualWarps));
    assert_eq!(plans.len(), 10, "five sizes at each offset width");
    let plans: Vec<Plan> = plans
        .into_iter()
        .filter(|p| p.offsets == OffsetWidth::U64)
        .collect();
    assert_eq!(plans.len(), 5);
    for (tiles, atoms, n) in [(0, 0, 2), (10, 20, 2), (10, 21, 4), (3, 24, 8), (1, 17, 32)] {
        let size = ProblemSize {
            tiles,
            atoms,
            lanes: 1,
            max_tile_atoms: u64::MAX,
            offsets: OffsetWidth::U64,
        };
        let picked: Vec<&Plan> = plans
            .iter()
            .filter(|p| p.select.is_some_and(|s| s.matches(&size, 0.0)))
            .collect();
        assert_eq!(picked.len(), 1, "exactly one plan for {size:?}");
        assert_eq!(picked[0].schedule, "dynamic_virtual_warps");
        assert!(
            picked[0]
                .kernels
                .iter()
                .any(|k| k.entry.ends_with(&format!("_dynamic_virtual_warps_{n}"))),
            "{size:?} picks N = {n}"
        );
        assert_eq!(
            Select::avg_atoms_per_tile(&size),
            atoms.div_ceil(tiles.max(1))
        );
    }
    // Every variant computes the same thing.
    let t = Tiles::new(&(0..40).map(|i| (i * 3) % 11).collect::<Vec<_>>());
    let outs = check_spmv(&t, &opts(Schedule::DynamicVirtualWarps), 2);
    assert_eq!(outs.len(), 10, "five sizes at each offset width");
}

#[test]
fn names_parse_and_bad_blocks_are_rejected() {
    for (name, s) in [
        ("group_mapped(8)", Schedule::GroupMapped(8)),
        ("group_mapped(1024)", Schedule::GroupMapped(1024)),
        ("warp_mapped", Schedule::WarpMapped),
        ("block_mapped", Schedule::BlockMapped),
        ("dynamic_virtual_warps", Schedule::DynamicVirtualWarps),
    ] {
        assert_eq!(Schedule::from_name(name), Some(s));
        assert_eq!(s.name(), name);
    }
    for bad in [
        "group_mapped(3)",
        "group_mapped(1)",
        "group_mapped(2048)",
        "group_mapped",
    ] {
        assert_eq!(Schedule::from_name(bad), None, "{bad}");
    }
    let o = Options {
        block: 64,
        ..opts(Schedule::GroupMapped(128))
    };
    assert!(matches!(
        generate(&spmv(), &o),
        Err(GenError::BadBlock { block: 64, .. })
    ));
    let o = Options {
        block: 32,
        ..opts(Schedule::BlockMapped)
    };
    let g = generate(&spmv(), &o).unwrap();
    assert!(!g.ptx.contains(".shared"), "a 32-thread block shuffles");
}

#[test]
fn checked_frontier_entries_out_of_range_are_reported_and_skipped() {
    let t = Tiles::new(&[3, 0, 5, 2]);
    let frontier = [2u32, 9, 0, 3];
    let x = xvec(t.ncols);
    for &s in &SCHEDULES {
        let o = Options {
            tiles: Some(1),
            checked: true,
            ..opts(s)
        };
        let (g, plans) = plans(&spmv_frontier(), &o);
        let mut mem = Memory::new();
        let mut args = t.upload(&mut mem);
        args.extend([
            upload(&mut mem, &bytes_of(&frontier, u32::to_le_bytes)),
            frontier.len() as u64,
        ]);
        args.extend([
            upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
            x.len() as u64,
        ]);
        let y = upload(&mut mem, &nan_f32(t.rows()));
        args.extend([y, t.rows() as u64]);
        // The error flag is the plan's first temporary under `checked`.
        let flag = launch(&g, &plans[0], 1, &args, &mut mem)[0];
        let words: Vec<u64> = read_words::<8>(&mem, flag, 2)
            .into_iter()
            .map(u64::from_le_bytes)
            .collect();
        assert_eq!(
            words,
            [2, 9],
            "{s:?}: the frontier (parameter 1) holds 9, no tile of the tile set"
        );
        let got = read_words::<4>(&mem, y, t.rows());
        for r in [0usize, 2, 3] {
            let want: f32 = t
                .atoms(r)
                .fold(0.0, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
            assert_eq!(f32::from_le_bytes(got[r]), want, "{s:?} row {r}");
        }
        assert!(
            f32::from_le_bytes(got[1]).is_nan(),
            "{s:?}: row 1 is not active"
        );
    }
}

/// The text of one `.entry` of a module.
fn kernel_text(ptx: &str, entry: &str) -> String {
    sim::parse(ptx).unwrap().kernel(entry).unwrap().to_string()
}

#[test]
fn virtual_warps_shuffle_with_sub_warp_masks() {
    for n in [2u32, 4, 8, 16] {
        let g = generate(&spmv(), &opts(Schedule::GroupMapped(n))).unwrap();
        let text = kernel_text(&g.ptx, &format!("spmv_group_mapped_{n}"));
        assert!(!text.contains(".shared"), "N = {n} uses no shared memory");
        assert!(!text.contains("bar.sync"), "N = {n} needs no block barrier");
        assert_eq!(g.plans[0].kernels[0].dynamic_shared, 0);
        let seg = (32 - n) << 8;
        let shuffles: Vec<&str> = text.lines().filter(|l| l.contains("shfl.sync")).collect();
        // A virtual warp takes one tile at a time and combines its lanes' partials with a
        // butterfly (Busato & Bombieri §2.2.2): no scan over a batch of tiles.
        assert!(
            shuffles.iter().any(|l| l.contains("shfl.sync.bfly.b32")),
            "N = {n}: reduces by a butterfly"
        );
        assert!(
            !shuffles.iter().any(|l| l.contains("shfl.sync.up.b32")),
            "N = {n}: no scan"
        );
        for l in &shuffles {
            let ops: Vec<&str> = l.trim_end_matches(';').split(", ").collect();
            let (c, mask) = (ops[ops.len() - 2], ops[ops.len() - 1]);
            assert!(
                mask.starts_with("%r"),
                "N = {n}: member mask is the group's: {l}"
            );
            let c: u32 = c.parse().unwrap();
            assert_eq!(c & !0x1f, seg, "N = {n}: sub-warp segment in `{l}`");
        }
    }
    let g = generate(&spmv(), &opts(Schedule::GroupMapped(64))).unwrap();
    let text = kernel_text(&g.ptx, "spmv_group_mapped_64");
    // Per thread a slot's first atom, end and tile; per warp a partial and a ballot.
    let decl = format!(
        ".shared .align 8 .b8 lb_smem[{}];",
        24 * BLOCK + 12 * (BLOCK / 32)
    );
    assert!(text.contains("bar.sync") && text.contains(&decl));
}

#[test]
fn every_variant_assembles_without_spills() {
    let all = Options {
        schedules: vec![
            Schedule::GroupMapped(2),
            Schedule::GroupMapped(4),
            Schedule::GroupMapped(8),
            Schedule::GroupMapped(16),
            Schedule::WarpMapped,
            Schedule::GroupMapped(64),
            Schedule::BlockMapped,
            Schedule::DynamicVirtualWarps,
        ],
        block: 256,
        ..Options::default()
    };
    for body in [
        spmv(),
        isum(),
        visit(true),
        values_body("vmax", Reduce::Max),
    ] {
        let o = Options {
            tiles: body.params.iter().position(|p| p.name == "frontier"),
            ..all.clone()
        };
        let g = generate(&body, &o).unwrap();
        lb_ptx::ptxas::assert_assembles(&body.name, &g.ptx);
    }
    let o = Options {
        lanes: Some(2),
        checked: true,
        block: 1024,
        ..all
    };
    let g = generate(&spmm(), &o).unwrap();
    lb_ptx::ptxas::assert_assembles("spmm", &g.ptx);
}

#[test]
fn snapshots() {
    let g = generate(&spmv(), &opts(Schedule::GroupMapped(8))).unwrap();
    insta::assert_snapshot!("spmv_group_mapped_8", g.ptx);
    let g = generate(&spmv(), &opts(Schedule::GroupMapped(64))).unwrap();
    insta::assert_snapshot!("spmv_group_mapped_64", g.ptx);
    let o = Options {
        tiles: Some(1),
        ..opts(Schedule::DynamicVirtualWarps)
    };
    let g = generate(&spmv_frontier(), &o).unwrap();
    insta::assert_snapshot!("spmv_frontier_dynamic_virtual_warps", g.ptx);
}

fn sizes_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![4 => 0usize..6, 1 => 0usize..200], 0..90)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_tile_sets_match_the_cpu(
        sizes in sizes_strategy(),
        which in 0..SCHEDULES.len(),
        grid in 1u32..4,
    ) {
        let t = Tiles::new(&sizes);
        let s = SCHEDULES[which];
        check_spmv(&t, &opts(s), grid);
        check_visit(&t, None, s, grid);
    }

    #[test]
    fn random_frontiers_match_the_cpu(
        sizes in prop::collection::vec(0usize..40, 1..60),
        picks in prop::collection::vec(any::<u32>(), 0..70),
        which in 0..SCHEDULES.len(),
    ) {
        let t = Tiles::new(&sizes);
        let frontier: Vec<u32> = picks.iter().map(|p| p % sizes.len() as u32).collect();
        check_spmv_frontier(&t, &frontier, SCHEDULES[which], 2);
    }
}

/// Tiles of at least the huge-tile threshold are split over the grid and folded back
/// deterministically, for the block and warp walks and a virtual warp.
#[test]
fn huge_tiles_are_split_across_the_grid() {
    for (s, block) in [
        (Schedule::BlockMapped, 64),
        (Schedule::WarpMapped, 32),
        (Schedule::GroupMapped(4), 32),
    ] {
        check_huge_tiles(s, block);
    }
}

/// On one giant row among one-atom rows, the busiest thread's path stays within a small factor
/// of merge path's.
#[test]
fn a_giant_row_has_no_cliff() {
    for s in [Schedule::BlockMapped, Schedule::WarpMapped] {
        check_no_cliff(s, 4);
    }
}
