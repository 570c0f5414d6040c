//! `binning` (CTA+Warp+Scan) and `lrb` (logarithmic radix binning) on the simulator against
//! sequential CPU loops: adversarial and random tile sets, frontiers, lanes, min/max, visit
//! counts, determinism; the LRB reorder pass on its own; ptxas and snapshots.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::plan::{Plan, ProblemSize, TempRole};
use lb_ptx::schedules::{Binning, Lrb};
use lb_ptx::sim::{self, Memory};
use lb_ptx::{generate, ir, Options, Schedule, ScheduleTemplate, Tuning};
use proptest::prelude::*;
use support::*;

const BLOCK: u32 = 128;

/// A schedule by name, or `binning` with thresholds of its own (block, warp): set on the
/// template (`Custom`) or through `Options::tuning` (`Tuned`, the attribute's route).
#[derive(Clone, Copy, Debug)]
enum Which {
    S(Schedule),
    Custom(u64, u64),
    Tuned(u64, u64),
}

/// `Options::tuning` with binning's two thresholds (block, warp).
fn binning_tuning(block: u64, warp: u64) -> Tuning {
    Tuning {
        block_threshold: Some(block),
        warp_threshold: Some(warp),
        ..Tuning::default()
    }
}

/// The module text of `template` built by hand, as `generate` would assemble it.
fn template_ptx(template: &Binning, body: &Body, o: &Options) -> (String, Plan) {
    // Every plan, as `generate` emits them: the plan and its 32-bit-offsets twin.
    let plans = template.plans(body, o).unwrap();
    let plan = plans[0].clone();
    let kernels = plans
        .iter()
        .flat_map(|p| template.kernels(body, o, p).unwrap())
        .collect();
    let module = ir::Module {
        version: (7, 8),
        target: o.target.clone(),
        kernels,
    };
    (module.to_string(), plan)
}

/// The schedules and threshold variants under test: the paper's thresholds, thresholds small
/// enough that every phase of `binning` sees many tiles, every tile to the scan, and every tile
/// (even empty ones) to the block.
const WHICH: [Which; 5] = [
    Which::S(Schedule::Binning),
    Which::S(Schedule::Lrb),
    Which::Custom(8, 3),
    Which::Custom(u64::MAX, u64::MAX),
    Which::Custom(0, 0),
];

fn opts() -> Options {
    Options {
        block: BLOCK,
        ..Options::default()
    }
}

/// The module text and the plan of `which` for `body`.
fn gen(body: &Body, o: &Options, which: Which) -> (String, Plan) {
    let generated = |o: Options| {
        let g = generate(body, &o).unwrap();
        assert_eq!(g.plans.len(), 2);
        assert_eq!(g.plans[1], g.plans[0].offsets32_twin());
        (g.ptx, g.plans[0].clone())
    };
    match which {
        Which::S(s) => generated(Options {
            schedules: vec![s],
            ..o.clone()
        }),
        Which::Custom(block, warp) => template_ptx(&Binning::new(block, warp), body, o),
        Which::Tuned(block, warp) => generated(Options {
            schedules: vec![Schedule::Binning],
            tuning: binning_tuning(block, warp),
            ..o.clone()
        }),
    }
}

/// Runs the first `upto` kernels of `plan` like the runtime does: grids from the plan's rule with
/// at most `grid` resident blocks, temporaries allocated (zeroed when asked, garbage otherwise)
/// and appended to `args`. Returns the temporaries' addresses.
fn run(
    ptx: &str,
    plan: &Plan,
    (grid, upto): (u32, usize),
    args: Vec<u64>,
    size: ProblemSize,
    mem: &mut Memory,
) -> Vec<u64> {
    let runner = Runner::resident(grid, upto);
    runner
        .run(&sim::parse(ptx).unwrap(), plan, args, size, mem)
        .0
}

/// SpMV (output pre-filled with NaN) against the sequential loop, bitwise (the values are
/// integers, exact in any order); returns the output bits.
fn check_spmv(t: &Tiles, which: Which, grid: u32) -> Vec<u32> {
    let (ptx, plan) = gen(&spmv(), &opts(), which);
    let x = xvec(t.ncols);
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    let y = upload(&mut mem, &nan_f32(t.rows()));
    args.extend([y, t.rows() as u64]);
    run(
        &ptx,
        &plan,
        (grid, usize::MAX),
        args,
        t.size(None, 1),
        &mut mem,
    );
    let got: Vec<u32> = read_words::<4>(&mem, y, t.rows())
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    for (r, &got) in got.iter().enumerate() {
        let mut acc = 0f32;
        for nz in t.atoms(r) {
            acc += t.values[nz] * x[t.cols[nz] as usize];
        }
        assert_eq!(got, acc.to_bits(), "{which:?}: row {r} of {}", t.rows());
    }
    got
}

fn check_min_max(t: &Tiles, which: Which, grid: u32) {
    for (reduce, name) in [(Reduce::Min, "vmin"), (Reduce::Max, "vmax")] {
        let (ptx, plan) = gen(&values_body(name, reduce), &opts(), which);
        let mut mem = Memory::new();
        let mut args = t.upload(&mut mem);
        let y = upload(&mut mem, &nan_f32(t.rows()));
        args.extend([y, t.rows() as u64]);
        run(
            &ptx,
            &plan,
            (grid, usize::MAX),
            args,
            t.size(None, 1),
            &mut mem,
        );
        let got = read_words::<4>(&mem, y, t.rows());
        for (r, got) in got.into_iter().enumerate() {
            let vals = t.atoms(r).map(|nz| t.values[nz]);
            let want = if reduce == Reduce::Min {
                vals.fold(f32::INFINITY, f32::min)
            } else {
                vals.fold(f32::NEG_INFINITY, f32::max)
            };
            assert_eq!(f32::from_le_bytes(got), want, "{name} {which:?} row {r}");
        }
    }
}

fn check_isum(t: &Tiles, which: Which, grid: u32) {
    let (ptx, plan) = gen(&isum(), &opts(), which);
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    let y = upload(&mut mem, &vec![0xAB; 8 * t.rows()]);
    args.extend([y, t.rows() as u64]);
    run(
        &ptx,
        &plan,
        (grid, usize::MAX),
        args,
        t.size(None, 1),
        &mut mem,
    );
    for (r, got) in read_words::<8>(&mem, y, t.rows()).into_iter().enumerate() {
        let begin = t.offsets[r] as i64;
        let want: i64 = t
            .atoms(r)
            .map(|nz| nz as i64 * 7 - (nz as i64 - begin))
            .sum();
        assert_eq!(i64::from_le_bytes(got), want, "isum {which:?} row {r}");
    }
}

/// Every atom of the active tiles is visited once per occurrence of its tile, with the right
/// tile and rank.
fn check_visit(t: &Tiles, frontier: Option<&[u32]>, which: Which, grid: u32) {
    let body = visit(frontier.is_some());
    let o = Options {
        tiles: frontier.map(|_| 1),
        ..opts()
    };
    let (ptx, plan) = gen(&body, &o, which);
    let mut mem = Memory::new();
    let (args, outs) = visit_args(&mut mem, t, frontier);
    run(
        &ptx,
        &plan,
        (grid, usize::MAX),
        args,
        t.size(frontier, 1),
        &mut mem,
    );
    check_visit_outputs(&mem, t, frontier, outs, &which);
}

fn check_spmm(t: &Tiles, k: usize, which: Which, grid: u32) {
    let o = Options {
        lanes: Some(2),
        ..opts()
    };
    let (ptx, plan) = gen(&spmm(), &o, which);
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
    run(
        &ptx,
        &plan,
        (grid, usize::MAX),
        args,
        t.size(None, k as u64),
        &mut mem,
    );
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
                "{which:?} row {r} lane {j} of {k}"
            );
        }
    }
}

fn check_spmv_frontier(t: &Tiles, frontier: &[u32], which: Which, grid: u32) {
    let o = Options {
        tiles: Some(1),
        ..opts()
    };
    let (ptx, plan) = gen(&spmv_frontier(), &o, which);
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
    let size = t.size(Some(frontier), 1);
    run(&ptx, &plan, (grid, usize::MAX), args, size, &mut mem);
    let got = read_words::<4>(&mem, y, t.rows());
    for (r, got) in got.into_iter().enumerate() {
        let got = f32::from_le_bytes(got);
        if frontier.contains(&(r as u32)) {
            let want: f32 = t
                .atoms(r)
                .fold(0.0, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
            assert_eq!(got, want, "{which:?} frontier row {r}");
        } else {
            assert!(got.is_nan(), "{which:?}: row {r} is not in the frontier");
        }
    }
}

/// Sizes around every LRB bin edge up to 2^11, and around the warp and block thresholds.
fn every_bin() -> Vec<usize> {
    let mut sizes = vec![0];
    for b in 0..12 {
        sizes.extend([1usize << b, (2usize << b) - 1]);
    }
    sizes.extend([0, 3, 0, 1, 2, 130, 0, 5]);
    sizes
}

/// Adversarial tile sets, sized against a block of 128.
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
        ("bigger than warp and block", mixed),
        ("every bin", every_bin()),
        ("two batches", (0..300).map(|i| (i * 7) % 5).collect()),
    ]
}

#[test]
fn adversarial_tile_sets_match_the_cpu() {
    for (name, sizes) in adversarial() {
        let t = Tiles::new(&sizes);
        for (i, &w) in WHICH.iter().enumerate() {
            let grid = 1 + (i as u32 % 2);
            eprintln!("{name}: {w:?}");
            check_spmv(&t, w, grid);
            check_isum(&t, w, grid);
            check_visit(&t, None, w, grid);
        }
    }
}

#[test]
fn min_max_lanes_and_frontiers_match_the_cpu() {
    let mut sizes: Vec<usize> = (0..70).map(|i| (i * 11) % 6).collect();
    sizes[3] = 150;
    sizes[9] = 40;
    let t = Tiles::new(&sizes);
    let frontier: Vec<u32> = vec![3, 0, 69, 3, 10, 9, 12, 40, 3, 5, 5, 68, 9];
    for (i, &w) in WHICH.iter().enumerate() {
        let grid = 1 + (i as u32 % 3);
        check_min_max(&t, w, grid);
        for k in [1, 3, 33] {
            check_spmm(&Tiles::new(&sizes[..20]), k, w, grid);
        }
        check_spmv_frontier(&t, &frontier, w, grid);
        check_visit(&t, Some(&frontier), w, grid);
        check_visit(&t, Some(&[]), w, grid);
    }
}

#[test]
fn awkward_floats_agree_within_rounding_and_are_deterministic() {
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
    for w in WHICH {
        let (ptx, plan) = gen(&spmv(), &opts(), w);
        let launch = |grid| {
            let mut mem = Memory::new();
            let mut args = t.upload(&mut mem);
            args.extend([
                upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
                x.len() as u64,
            ]);
            let y = upload(&mut mem, &nan_f32(t.rows()));
            args.extend([y, t.rows() as u64]);
            run(
                &ptx,
                &plan,
                (grid, usize::MAX),
                args,
                t.size(None, 1),
                &mut mem,
            );
            read_words::<4>(&mem, y, t.rows())
        };
        let (a, b, c) = (launch(1), launch(1), launch(3));
        assert_eq!(a, b, "{w:?}: two launches differ");
        assert_eq!(a, c, "{w:?}: the grid size changed the result");
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
                "{w:?} row {r}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn checked_frontier_entries_out_of_range_are_reported_and_skipped() {
    let t = Tiles::new(&[3, 0, 500, 40]);
    let frontier = [2u32, 9, 0, 3];
    let x = xvec(t.ncols);
    for w in WHICH {
        let o = Options {
            tiles: Some(1),
            checked: true,
            ..opts()
        };
        let (ptx, plan) = gen(&spmv_frontier(), &o, w);
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
        let size = t.size(Some(&frontier), 1);
        let temps = run(&ptx, &plan, (1, usize::MAX), args, size, &mut mem);
        assert_eq!(plan.temps[0].role, TempRole::ErrorFlag);
        assert_eq!(
            read_u64(&mem, temps[0], 2),
            [2, 9],
            "{w:?}: the frontier (parameter 1) holds 9, no tile of the tile set"
        );
        let got = read_words::<4>(&mem, y, t.rows());
        for r in [0usize, 2, 3] {
            let want: f32 = t
                .atoms(r)
                .fold(0.0, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
            assert_eq!(f32::from_le_bytes(got[r]), want, "{w:?} row {r}");
        }
        assert!(
            f32::from_le_bytes(got[1]).is_nan(),
            "{w:?}: row 1 is not active"
        );
    }
}

/// The LRB reorder on its own: counts per bin, bin starts, and reordered tile ids that form a
/// permutation of the active tiles grouped by bin (in any order inside a bin: the scatter is
/// not stable).
#[test]
fn lrb_reorder_groups_the_tiles_by_bin() {
    assert_eq!(Lrb::bin(0), 0);
    assert_eq!(Lrb::bin(1), 1);
    assert_eq!(Lrb::bin(31), 5);
    assert_eq!(Lrb::bin(32), 6);
    assert_eq!(Lrb::bin(u64::MAX), 64);
    assert_eq!(Lrb::block_bin(128), 8);
    // Every bin once, then more tiles than the grid's threads (the count and scatter stride,
    // one block histogram per round) with a frontier that repeats tiles.
    let many: Vec<usize> = (0..700).map(|i| [0, 1, 3, 40, 9, 2, 200][i % 7]).collect();
    let many_frontier: Vec<u32> = (0..900).map(|i| (i * 37 % 700) as u32).collect();
    let cases = [
        (every_bin(), vec![5, 0, 5, 20, 1, 13, 2, 5, 27]),
        (many, many_frontier),
    ];
    for (sizes, frontier) in &cases {
        reorder_groups_by_bin(sizes, frontier);
    }
}

/// The reorder of `sizes`, with and without `frontier`, holds each active tile once, bin by bin.
fn reorder_groups_by_bin(sizes: &[usize], frontier: &[u32]) {
    let t = Tiles::new(sizes);
    for f in [None, Some(frontier)] {
        let body = if f.is_some() { spmv_frontier() } else { spmv() };
        let o = Options {
            tiles: f.map(|_| 1),
            ..opts()
        };
        let (ptx, plan) = gen(&body, &o, Which::S(Schedule::Lrb));
        // The huge-tile split's list and scan, count, scan, scatter, the three process kernels,
        // the split's walk and fix-up.
        assert_eq!(plan.kernels.len(), 10);
        let mut mem = Memory::new();
        let mut args = t.upload(&mut mem);
        if let Some(f) = f {
            args.extend([
                upload(&mut mem, &bytes_of(f, u32::to_le_bytes)),
                f.len() as u64,
            ]);
        }
        let x = xvec(t.ncols);
        args.extend([
            upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
            x.len() as u64,
        ]);
        args.extend([upload(&mut mem, &nan_f32(t.rows())), t.rows() as u64]);
        let temps = run(&ptx, &plan, (2, 5), args, t.size(f, 1), &mut mem);
        let all: Vec<u32> = (0..t.rows() as u32).collect();
        let active = f.unwrap_or(&all);
        let bins = Lrb::BINS as usize;
        let mut want = vec![0u64; bins];
        for &r in active {
            want[Lrb::bin(sizes[r as usize] as u64) as usize] += 1;
        }
        let starts = read_u64(&mem, temps[1], bins + 1);
        let mut run_sum = 0;
        for b in 0..bins {
            assert_eq!(starts[b], run_sum, "start of bin {b}");
            run_sum += want[b];
        }
        assert_eq!(starts[bins], active.len() as u64);
        // After the scatter each cursor sits at its bin's end.
        assert_eq!(read_u64(&mem, temps[0], bins), starts[1..].to_vec());
        let perm = read_u64(&mem, temps[2], active.len());
        for b in 0..bins {
            for &tile in &perm[starts[b] as usize..starts[b + 1] as usize] {
                assert_eq!(Lrb::bin(sizes[tile as usize] as u64) as usize, b);
            }
        }
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        let mut expect: Vec<u64> = active.iter().map(|&r| u64::from(r)).collect();
        expect.sort_unstable();
        assert_eq!(sorted, expect, "a permutation of the active tiles");
    }
}

#[test]
fn names_parse_and_every_variant_assembles_without_spills() {
    for (name, s) in [("binning", Schedule::Binning), ("lrb", Schedule::Lrb)] {
        assert_eq!(Schedule::from_name(name), Some(s));
        assert_eq!(s.name(), name);
        assert!(Schedule::ALL.contains(&s));
    }
    // `assert_assembles` assembles for sm_75, sm_80 and sm_90 and rejects spills.
    for block in [32, 256, 1024] {
        let all = Options {
            schedules: vec![Schedule::Binning, Schedule::Lrb],
            block,
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
            ..all
        };
        let g = generate(&spmm(), &o).unwrap();
        lb_ptx::ptxas::assert_assembles("spmm", &g.ptx);
    }
}

#[test]
fn snapshots() {
    for s in [Schedule::Binning, Schedule::Lrb] {
        let o = Options {
            schedules: vec![s],
            ..opts()
        };
        let g = generate(&spmv(), &o).unwrap();
        insta::assert_snapshot!(format!("spmv_{}", s.name()), g.ptx);
    }
}

/// The immediates compared against by `setp.ge.u64` in `ptx`: where the thresholds show.
fn ge_immediates(ptx: &str) -> Vec<u64> {
    ptx.lines()
        .filter(|l| l.trim_start().starts_with("setp.ge.u64"))
        .filter_map(|l| {
            l.trim_end()
                .strip_suffix(';')?
                .rsplit(", ")
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Thresholds set through `Options::tuning` reach the PTX as the comparisons' immediates, build
/// exactly the kernel `Binning::new` builds with them, and win over the template's own values.
fn check_tuned_ptx(block: u64, warp: u64) {
    let o = Options {
        schedules: vec![Schedule::Binning],
        tuning: binning_tuning(block, warp),
        ..opts()
    };
    let (tuned, _) = gen(&spmv(), &opts(), Which::Tuned(block, warp));
    let seen = ge_immediates(&tuned);
    assert!(seen.contains(&block), "block {block} in {seen:?}");
    assert!(seen.contains(&warp), "warp {warp} in {seen:?}");
    let (by_template, _) = gen(&spmv(), &opts(), Which::Custom(block, warp));
    assert_eq!(
        tuned, by_template,
        "tuning ({block}, {warp}) vs Binning::new"
    );
    let (overridden, _) = template_ptx(&Binning::new(block + 3, warp + 1), &spmv(), &o);
    assert_eq!(tuned, overridden, "Options::tuning wins over the template");
    if (block, warp) != (u64::from(BLOCK), 32) {
        let (default, _) = gen(&spmv(), &opts(), Which::S(Schedule::Binning));
        assert_ne!(tuned, default, "tuning ({block}, {warp}) changed nothing");
    }
}

/// Tile sizes at, just below and just above both thresholds, empty ones and random ones.
fn around_thresholds(block: u64, warp: u64, picks: &[(usize, usize)]) -> Vec<usize> {
    let (b, w) = (block as usize, warp as usize);
    let near = [0, w - 1, w, w + 1, b - 1, b, b + 1];
    picks
        .iter()
        .map(|&(kind, noise)| near.get(kind).copied().unwrap_or(noise))
        .collect()
}

fn sizes_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![4 => 0usize..6, 2 => 0usize..50, 1 => 0usize..400],
        0..150,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_tile_sets_match_the_cpu(
        sizes in sizes_strategy(),
        which in 0..WHICH.len(),
        grid in 1u32..4,
    ) {
        let t = Tiles::new(&sizes);
        check_spmv(&t, WHICH[which], grid);
        check_visit(&t, None, WHICH[which], grid);
    }

    #[test]
    fn random_frontiers_match_the_cpu(
        sizes in prop::collection::vec(0usize..300, 1..60),
        picks in prop::collection::vec(any::<u32>(), 0..70),
        which in 0..WHICH.len(),
    ) {
        let t = Tiles::new(&sizes);
        let frontier: Vec<u32> = picks.iter().map(|p| p % sizes.len() as u32).collect();
        check_spmv_frontier(&t, &frontier, WHICH[which], 2);
    }

    #[test]
    fn thresholds_from_options_tuning_match_the_cpu(
        warp in 1u64..48,
        gap in 1u64..200,
        picks in prop::collection::vec((0usize..9, 0usize..400), 0..160),
        grid in 1u32..4,
    ) {
        let block = warp + gap;
        check_tuned_ptx(block, warp);
        let t = Tiles::new(&around_thresholds(block, warp, &picks));
        let which = Which::Tuned(block, warp);
        check_spmv(&t, which, grid);
        check_isum(&t, which, grid);
        check_visit(&t, None, which, grid);
    }
}

/// Tiles of at least the huge-tile threshold are split over the grid and folded back
/// deterministically: sums, lanes, min/max, side effects, frontiers, `checked`. `lrb` at block
/// 512 too: there its warp class would reach the split's tiles with lanes (256 atoms on).
#[test]
fn huge_tiles_are_split_across_the_grid() {
    for (s, block) in [
        (Schedule::Binning, 32),
        (Schedule::Lrb, 32),
        (Schedule::Lrb, 512),
    ] {
        check_huge_tiles(s, block);
    }
}

/// On one giant row among one-atom rows, the busiest thread's path stays within a small factor
/// of merge path's instead of walking the giant row in one block.
#[test]
fn a_giant_row_has_no_cliff() {
    for s in [Schedule::Binning, Schedule::Lrb] {
        check_no_cliff(s, 4);
    }
}
