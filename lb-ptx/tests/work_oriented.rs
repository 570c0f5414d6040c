//! The work-oriented schedules (`merge_path`, `nonzero_split`) on the simulator against CPU
//! loops (the searches built on the same primitives, `examples/custom-schedules`, have their own
//! tests there):
//! sums within a tolerance (a split tile is summed in pieces), min/max and visits exactly, on
//! adversarial and random tile sets, tiles spanning hundreds of blocks, and frontiers (empty,
//! repeated, out of order, giant tiles, lanes); determinism, the 64-bit variant, plans, ptxas and
//! snapshots.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::plan::{
    DeviceLimits, FrontierGrid, Grid, OffsetWidth, ProblemSize, TempCount, TempRole,
};
use lb_ptx::sim::{self, Memory};
use lb_ptx::{generate, ptxas, GenError, IndexWidth, Options, Schedule};
use proptest::prelude::*;
use support::*;

/// The built-in work-oriented schedules: merge path and nonzero split, which share the walk,
/// carry-out and fix-up and differ in how a thread finds its tile.
const SCHEDULES: [Schedule; 2] = [Schedule::MergePath, Schedule::NonzeroSplit];

/// Every body on `m` under both schedules, with block size `block` and `items` per thread.
fn check_all(m: &Matrix, block: u32, items: u32, what: &str) {
    for s in SCHEDULES {
        let o = opts(s, block, items, IndexWidth::U32);
        let what = format!("{what} / {} block {block} items {items}", s.name());
        let sum = run_reduce(&spmv(), &o, 0, m, None);
        check_sum(&sum, m, None, &what);
        for r in [Reduce::Min, Reduce::Max] {
            let got = run_reduce(&spmv_reduce(r), &o, 0, m, None);
            check_min_max(&got, m, r, &what);
        }
        check_visits(&o, 0, m, &what);
    }
}

#[test]
fn adversarial_tile_sets() {
    for (what, rows) in giant_rows() {
        let m = Matrix::from_lengths(&rows);
        check_all(&m, 32, 1, what);
    }
}

/// Long runs of empty tiles inside one share: a thread's walk crosses hundreds of empty tiles.
#[test]
fn long_runs_of_empty_tiles() {
    let mut rows = vec![0usize; 5000];
    rows[0] = 1;
    rows[2500] = 3;
    rows[2501] = 40;
    rows[4999] = 2;
    check_all(&Matrix::from_lengths(&rows), 32, 1, "empty runs");
    let rows: Vec<usize> = (0..4000).map(|r| usize::from(r % 700 == 3) * 9).collect();
    check_all(&Matrix::from_lengths(&rows), 64, 3, "sparse nonempty tiles");
}

#[test]
fn default_block_and_other_shares() {
    let rows: Vec<usize> = (0..400)
        .map(|r| if r % 50 == 7 { 600 } else { r % 5 })
        .collect();
    let m = Matrix::from_lengths(&rows);
    check_all(&m, 256, 1, "default block");
    check_all(&m, 64, 3, "3 per thread");
    check_all(&m, 32, 2, "2 per thread");
}

/// The block's carry scan crosses warps through one warp's scan of their results: up to 32
/// warps (1 024 threads), with tiles that open in one warp and close many warps later, tiles
/// that fit in a lane, and warps that finish no tile.
#[test]
fn carry_scans_of_blocks_up_to_1024_threads() {
    let rows: Vec<usize> = (0..700)
        .map(|r| match r % 97 {
            3 => 1500,
            40 => 90,
            _ => r % 4,
        })
        .collect();
    let m = Matrix::from_lengths(&rows);
    check_all(&m, 1024, 1, "32 warps");
    check_all(&m, 512, 2, "16 warps");
}

#[test]
fn lanes_including_counts_that_are_not_multiples_of_32() {
    for k in [1, 3, 33] {
        let m = Matrix::from_lengths(&[0, 5, 40, 0, 0, 120, 1, 2, 0]);
        for s in SCHEDULES {
            let o = Options {
                lanes: Some(2),
                ..opts(s, 32, 1, IndexWidth::U32)
            };
            let got = run_reduce(&spmm(), &o, 0, &m, Some(k));
            check_sum(&got, &m, Some(k), &format!("{} k = {k}", s.name()));
        }
    }
}

#[test]
fn deterministic_and_the_64_bit_variant_agrees() {
    let rows: Vec<usize> = (0..200).map(|r| [0, 1, 90, 3, 0, 17][r % 6]).collect();
    let m = Matrix::from_lengths(&rows);
    for s in SCHEDULES {
        let auto = opts(s, 32, 1, IndexWidth::Auto);
        let g = generate(&spmv(), &auto).unwrap();
        assert_eq!(g.plans.len(), 2);
        let first = run_reduce(&spmv(), &auto, 0, &m, None);
        let again = run_reduce(&spmv(), &auto, 0, &m, None);
        assert_eq!(first, again, "{}: two launches differ", s.name());
        let wide = run_reduce(&spmv(), &auto, 1, &m, None);
        assert_eq!(first, wide, "{}: u64 variant differs", s.name());
        let forced = run_reduce(&spmv(), &opts(s, 32, 1, IndexWidth::U64), 0, &m, None);
        assert_eq!(first, forced, "{}: IndexWidth::U64 differs", s.name());
        check_visits(&opts(s, 32, 1, IndexWidth::U64), 0, &m, "u64 visits");
    }
}

/// Tile lengths that put tile ends on and beside the boundaries of main blocks (64 atoms with
/// block 32 and 2 items per thread) and of the fix-up kernel's blocks (32 main blocks, 2 048
/// atoms), and tiles that span several of either.
fn boundary_length() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(63),
        Just(64),
        Just(65),
        Just(128),
        0usize..300,
        Just(2047),
        Just(2048),
        Just(2049),
        Just(6145),
        0usize..5000,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]

    /// The fix-up both ways: a grid of at most `block` (32) blocks, joined by the main kernel's
    /// last block, and the same rows repeated and padded past that, joined by the fix-up
    /// kernel (runs inside a fix-up block, ending on its last slot, and across many, which its
    /// last block joins). Every
    /// work-oriented and phase-search schedule, against the f64 loop, bitwise equal on a
    /// second launch, and the counter left at zero (the runner checks).
    #[test]
    fn fixup_in_the_main_kernel_and_in_its_own(
        rows in prop::collection::vec(boundary_length(), 2..30),
        short in prop::collection::vec(0usize..200, 1..12),
    ) {
        let padded: Vec<usize> = rows.iter().chain(std::iter::repeat_n(&3000, 8)).copied().collect();
        let schedules = SCHEDULES.into_iter().chain([Schedule::TwoPhase, Schedule::MultiPhase]);
        for s in schedules {
            for (what, rows) in [("short rows", &short), ("rows", &rows), ("padded", &padded)] {
                let m = Matrix::from_lengths(rows);
                let o = opts(s, 32, 2, IndexWidth::U32);
                let got = run_reduce(&spmv(), &o, 0, &m, None);
                check_sum(&got, &m, None, &format!("{} {what}", s.name()));
                let again = run_reduce(&spmv(), &o, 0, &m, None);
                prop_assert_eq!(&got, &again, "{}: two launches differ", s.name());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// `merge_path`'s staging pass both ways in one launch: blocks whose atoms fill every item
    /// but the last (long rows: at most one tile per thread) read the atom arrays at immediate
    /// offsets from the thread's first atom, the others (short rows, empty rows, the last
    /// block) clamp every item. SpMV and SpMM (an odd lane count and one past a warp) against
    /// the f64 loop, at a small share and at the default block and items.
    #[test]
    fn staging_of_blocks_with_and_without_room_left(
        long in prop::collection::vec(12usize..90, 40..400),
        short in prop::collection::vec(0usize..4, 0..300),
        giant in 0usize..5000,
    ) {
        let rows: Vec<usize> = long
            .iter()
            .chain(&short)
            .chain(&[giant, 0])
            .chain(&long)
            .copied()
            .collect();
        let m = Matrix::from_lengths(&rows);
        for (block, items) in [(32, 5), (256, 13)] {
            let o = opts(Schedule::MergePath, block, items, IndexWidth::U32);
            let what = format!("block {block} items {items}");
            let got = run_reduce(&spmv(), &o, 0, &m, None);
            check_sum(&got, &m, None, &what);
            for k in [3, 33] {
                let o = Options { lanes: Some(2), ..o.clone() };
                let got = run_reduce(&spmm(), &o, 0, &m, Some(k));
                check_sum(&got, &m, Some(k), &format!("{what} k = {k}"));
            }
        }
    }
}

/// A tile far longer than a block's share: with block 32 and 2 items per thread, the tile of
/// 50 000 atoms spans about 780 blocks, so its carries cross hundreds of block boundaries.
#[test]
fn long_tiles_spanning_many_blocks() {
    let rows = [3, 50_000, 0, 7, 0, 20_000, 1, 0];
    let m = Matrix::from_lengths(&rows);
    check_all(&m, 32, 2, "long tiles");
    for s in SCHEDULES {
        let auto = opts(s, 32, 2, IndexWidth::Auto);
        let first = run_reduce(&spmv(), &auto, 0, &m, None);
        let again = run_reduce(&spmv(), &auto, 0, &m, None);
        assert_eq!(first, again, "{}: two launches differ", s.name());
        let wide = run_reduce(&spmv(), &auto, 1, &m, None);
        assert_eq!(first, wide, "{}: u64 variant differs", s.name());
    }
}

#[test]
fn plans_have_one_variant_per_index_width() {
    for s in SCHEDULES {
        let g = generate(&spmv(), &opts(s, 128, 1, IndexWidth::Auto)).unwrap();
        let name = s.name();
        assert_eq!(g.plans.len(), 2);
        for (plan, (suffix, limit, offsets)) in g.plans.iter().zip([
            ("u32", Some(u64::from(u32::MAX)), OffsetWidth::U32),
            ("u64", None, OffsetWidth::U64),
        ]) {
            assert_eq!(plan.schedule, name);
            assert_eq!(plan.index_limit, limit);
            assert_eq!(
                plan.offsets, offsets,
                "the 32-bit index plan reads 32-bit offsets"
            );
            let entries: Vec<&str> = plan.kernels.iter().map(|k| k.entry.as_ref()).collect();
            let main = format!("spmv_{name}_{suffix}");
            let fixup = format!("{main}_fixup");
            // merge_path searches its blocks' diagonals in a partition kernel first, cached
            // with the tile set.
            let merge = s == Schedule::MergePath;
            let mut expected = vec![main.clone(), fixup];
            if merge {
                expected.insert(0, format!("{main}_partition"));
            }
            assert_eq!(entries, expected);
            let count_tiles = merge;
            // merge_path's default is 13 items per thread, the others' 7.
            let items = if merge { 13 } else { 7 };
            let main_grid = Grid::CoverWork {
                per_thread: items,
                count_tiles,
                frontier: FrontierGrid::No,
            };
            // The fix-ups: one thread per block of the main kernel.
            let fixup_grid = Grid::CoverWork {
                per_thread: items * 128,
                count_tiles,
                frontier: FrontierGrid::No,
            };
            let mut grids = vec![main_grid, fixup_grid];
            if merge {
                grids.insert(0, main_grid);
            }
            for (k, grid) in plan.kernels.iter().zip(grids) {
                assert_eq!((k.grid, k.block), (grid, 128));
                // The fix-up kernel runs only past `block` main blocks; below that the main
                // kernel joins the runs itself.
                let fixup = k.entry.contains("_fixup");
                assert_eq!(k.min_grid, fixup.then_some(129), "{}", k.entry);
            }
            let temps: Vec<(&str, u32, TempCount, TempRole)> = plan
                .temps
                .iter()
                .map(|t| (t.name.as_ref(), t.elem_bytes, t.count, t.role))
                .collect();
            let per_block = TempCount::PerBlock { extra: 0 };
            let mut expected = vec![
                ("carry_keys", 8, per_block, TempRole::Scratch),
                ("carry_values", 4, per_block, TempRole::Scratch),
                ("carry_heads", 4, per_block, TempRole::Scratch),
                ("fixup_span_ends", 8, per_block, TempRole::Scratch),
                ("fixup_counter", 8, TempCount::Fixed(1), TempRole::Counters),
            ];
            if merge {
                let bounds = TempCount::PerBlock { extra: 1 };
                let cached = TempRole::Cached { producers: 1 };
                expected.push(("merge_bounds", 8, bounds, cached));
            }
            assert_eq!(temps, expected, "a key, a carry and a head per block");
            assert!(
                plan.temps.iter().all(|t| !t.zero),
                "nothing zeroed per launch"
            );
        }
        // A forced 64-bit index still reads either offset width.
        let g = generate(&visit_seen(), &opts(s, 128, 4, IndexWidth::U64)).unwrap();
        assert_eq!(g.plans.len(), 2);
        let widths: Vec<OffsetWidth> = g.plans.iter().map(|p| p.offsets).collect();
        assert_eq!(widths, [OffsetWidth::U32, OffsetWidth::U64]);
        let merge = usize::from(s == Schedule::MergePath);
        // merge_path's partition kernel comes first.
        assert_eq!(
            g.plans[0].kernels[merge].entry,
            format!("visit_{name}_u64_o32")
        );
        for plan in &g.plans {
            assert_eq!(plan.kernels.len(), 1 + merge, "no fix-up without reduce");
            assert_eq!(plan.temps.len(), merge, "only merge_path's bounds");
            assert_eq!(plan.index_limit, None);
        }
    }
}

#[test]
fn cover_work_grid() {
    let limits = DeviceLimits {
        sm_count: 1,
        blocks_per_sm: 1,
    };
    let size = ProblemSize {
        tiles: 100,
        atoms: 1000,
        lanes: 3,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    };
    let merge = Grid::CoverWork {
        per_thread: 7,
        count_tiles: true,
        frontier: FrontierGrid::No,
    };
    let split = Grid::CoverWork {
        per_thread: 7,
        count_tiles: false,
        frontier: FrontierGrid::No,
    };
    assert_eq!(merge.blocks(&size, 32, &limits), 5 * 3);
    assert_eq!(split.blocks(&size, 32, &limits), 5 * 3);
    assert_eq!(merge.blocks(&size, 64, &limits), 3 * 3);
    assert_eq!(split.blocks(&size, 64, &limits), 3 * 3);
    let empty = ProblemSize {
        tiles: 0,
        atoms: 0,
        lanes: 1,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    };
    assert_eq!(merge.blocks(&empty, 256, &limits), 1);
    // A frontier's grid covers at most `tiles × max_tile_atoms` atoms, and never more than the
    // tile set's; an unknown longest tile leaves the tile set's atoms.
    let frontier = Grid::CoverWork {
        per_thread: 7,
        count_tiles: true,
        frontier: FrontierGrid::Bounded,
    };
    let few = ProblemSize {
        tiles: 4,
        atoms: 1_000_000,
        lanes: 3,
        max_tile_atoms: 5,
        offsets: OffsetWidth::U64,
    };
    let per_block = 7 * 32;
    assert_eq!(frontier.blocks(&few, 32, &limits), 3);
    let many = ProblemSize {
        tiles: 100_000,
        ..few
    };
    let bounded = (100_000u64 + 500_000).div_ceil(per_block) as u32;
    assert_eq!(frontier.blocks(&many, 32, &limits), bounded * 3);
    let long = ProblemSize {
        max_tile_atoms: 20,
        ..many
    };
    let whole = (100_000u64 + 1_000_000).div_ceil(per_block) as u32;
    assert_eq!(frontier.blocks(&long, 32, &limits), whole * 3);
    let unknown = ProblemSize {
        max_tile_atoms: u64::MAX,
        ..few
    };
    let whole = (4u64 + 1_000_000).div_ceil(per_block) as u32;
    assert_eq!(frontier.blocks(&unknown, 32, &limits), whole * 3);
    assert_eq!(
        merge.blocks(&few, 32, &limits),
        whole * 3,
        "no frontier: the tile set"
    );
    // A strided frontier grid: the same bound, but at most the resident blocks per lane.
    let strided = Grid::CoverWork {
        per_thread: 7,
        count_tiles: true,
        frontier: FrontierGrid::Strided,
    };
    let resident = DeviceLimits {
        sm_count: 4,
        blocks_per_sm: 2,
    };
    assert_eq!(strided.blocks(&few, 32, &resident), 3, "under the bound");
    assert_eq!(
        strided.blocks(&long, 32, &resident),
        8 * 3,
        "the resident blocks"
    );
    assert_eq!(strided.blocks(&empty, 32, &resident), 1);
}

/// Which frontier grid a work-oriented plan asks for: strided over a frontier (the searches'
/// blocks find their own tiles, with no partition kernel), with or without a reducing body (whose
/// carries are counted for the grid's bound and taken per virtual block); none without a
/// frontier. The fix-up keeps the bound's grid, one thread per carry slot.
#[test]
fn frontier_grid_kinds() {
    let searches = [Schedule::TwoPhase, Schedule::MultiPhase];
    for s in SCHEDULES.into_iter().chain(searches) {
        let main_grid = |body: &Body, frontier: bool| {
            let o = opts(s, 32, 2, IndexWidth::U32);
            let (body, o) = if frontier {
                let (body, p) = with_frontier(body.clone());
                (
                    body,
                    Options {
                        tiles: Some(p),
                        ..o
                    },
                )
            } else {
                (body.clone(), o)
            };
            let g = generate(&body, &o).unwrap();
            let plan = &g.plans[0];
            // The main kernel: after the partition or the frontier scan, before the fix-up.
            let main = plan
                .kernels
                .iter()
                .rev()
                .find(|k| !k.entry.ends_with("_fixup"))
                .unwrap();
            match main.grid {
                Grid::CoverWork { frontier, .. } => frontier,
                other => panic!("{}: {other:?}", s.name()),
            }
        };
        assert_eq!(
            main_grid(&visit_seen(), true),
            FrontierGrid::Strided,
            "{}",
            s.name()
        );
        assert_eq!(
            main_grid(&spmv_reduce(Reduce::Sum), true),
            FrontierGrid::Strided,
            "{}",
            s.name()
        );
        assert_eq!(
            main_grid(&visit_seen(), false),
            FrontierGrid::No,
            "{}",
            s.name()
        );
    }
}

/// A frontier of a few short tiles in a large tile set bounds its grid by its own atoms (at most
/// `tiles × longest tile`), not the tile set's, and launches at most the resident blocks of that
/// bound; the carry slots of a reducing body are counted for the whole bound
/// (`Grid::uncapped`). Frontiers below, near and above the bound, on a device of one resident
/// block, so every kernel strides (the simulator fills temporaries with garbage, so a kernel
/// that read a slot it did not write would fail).
#[test]
fn frontier_grid_follows_its_tiles() {
    let lengths: Vec<usize> = (0..6000).map(|r| (r * 7) % 9).collect();
    let m = Matrix::from_lengths(&lengths);
    let mut rng = support::Rng::fresh();
    let seed = rng.0;
    let mut pick = |n: usize| -> Vec<u32> { (0..n).map(|_| rng.range(0, 6000) as u32).collect() };
    let cases = [
        ("one tile", pick(1)),
        ("forty tiles, some repeated", {
            let mut f = pick(40);
            f.extend_from_slice(&f.clone()[..10]);
            f
        }),
        // Rows 9k + 5 have the longest tiles, 8 atoms.
        ("longest tiles only", vec![5, 14, 5, 23]),
        ("past the tile set's atoms", pick(4000)),
    ];
    let limits = DeviceLimits {
        sm_count: 1,
        blocks_per_sm: 1,
    };
    for (what, frontier) in &cases {
        let what = &format!("{what} (LB_HUGE_SEED={seed})");
        check_frontier_all(&m, frontier, 32, 2, what);
        for s in SCHEDULES {
            let (body, p) = with_frontier(spmv());
            let o = frontier_opts(s, 32, 2, IndexWidth::U32, p);
            let g = generate(&body, &o).unwrap();
            let size = frontier_size(&m, frontier);
            let grid = g.plans[0].kernels[0].grid;
            let Grid::CoverWork {
                per_thread,
                count_tiles,
                frontier: FrontierGrid::Strided,
            } = grid
            else {
                panic!("{what}: {}: not a frontier's grid", s.name());
            };
            let atoms = (m.nnz() as u64).min(frontier.len() as u64 * 8);
            let work = atoms
                + if count_tiles {
                    frontier.len() as u64
                } else {
                    0
                };
            let want = work.div_ceil(u64::from(per_thread) * 32).max(1);
            let bound = grid.uncapped().blocks(&size, 32, &limits);
            assert_eq!(u64::from(bound), want, "{what}: {}", s.name());
            assert_eq!(grid.blocks(&size, 32, &limits), 1, "{what}: {}", s.name());
        }
    }
}

fn check_frontier_all(m: &Matrix, frontier: &[u32], block: u32, items: u32, what: &str) {
    for s in SCHEDULES {
        let what = format!("{what} / {} block {block} items {items}", s.name());
        for r in [Reduce::Sum, Reduce::Min, Reduce::Max] {
            let body = spmv_reduce(r);
            let got = run_frontier_reduce(
                &body,
                m,
                frontier,
                &opts(s, block, items, IndexWidth::U32),
                0,
            );
            check_frontier(&got, m, frontier, r, &what);
        }
        check_frontier_visits(m, frontier, &opts(s, block, items, IndexWidth::U32), &what);
    }
}

#[test]
fn frontier_tile_sets() {
    let (m, cases) = frontier_cases();
    for (what, frontier) in &cases {
        check_frontier_all(&m, frontier, 32, 2, what);
    }
    let (_, frontier) = &cases[2];
    check_frontier_all(&m, frontier, 256, 1, "default block");
}

#[test]
fn frontier_with_lanes() {
    let m = Matrix::from_lengths(&[0, 5, 400, 0, 0, 120, 1, 2, 0, 77]);
    let frontier = [9u32, 2, 2, 0, 5, 1];
    for k in [1usize, 3, 33] {
        for s in SCHEDULES {
            let (body, p) = with_frontier(spmm());
            let o = Options {
                lanes: Some(2),
                ..frontier_opts(s, 32, 2, IndexWidth::U32, p)
            };
            let g = generate(&body, &o).unwrap();
            let x = x_of(m.cols * k);
            let mut mem = Memory::new();
            let mut args = csr_args_at(&mut mem, &m, g.plans[0].offsets);
            args.extend([
                upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
                x.len() as u64,
                k as u64,
                upload(&mut mem, &bytes_of(&frontier, u32::to_le_bytes)),
                frontier.len() as u64,
            ]);
            let n = m.rows() * k;
            let nan = bytes_of(&vec![f32::from_bits(NAN_FILL); n], f32::to_le_bytes);
            let y = upload(&mut mem, &nan);
            args.extend([y, n as u64]);
            let size = ProblemSize {
                tiles: frontier.len() as u64,
                atoms: m.nnz() as u64,
                lanes: k as u64,
                max_tile_atoms: m.longest(),
                offsets: OffsetWidth::U64,
            };
            run_plan(&g, &g.plans[0], args, size, &mut mem);
            let got: Vec<u32> = read_words::<4>(&mem, y, n)
                .into_iter()
                .map(u32::from_le_bytes)
                .collect();
            let what = format!("{} k = {k}", s.name());
            for r in 0..m.rows() {
                if frontier.contains(&(r as u32)) {
                    check_sum(&got[r * k..(r + 1) * k], &m.row_of(r), Some(k), &what);
                } else {
                    assert!(
                        got[r * k..(r + 1) * k].iter().all(|&v| v == NAN_FILL),
                        "{what}: row {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn frontier_is_deterministic_and_the_64_bit_variant_agrees() {
    let rows: Vec<usize> = (0..120).map(|r| [0, 1, 3000, 3, 0, 17][r % 6]).collect();
    let m = Matrix::from_lengths(&rows);
    let frontier: Vec<u32> = (0..120).rev().filter(|r| r % 5 != 0).collect();
    for s in SCHEDULES {
        let cfg = opts(s, 32, 2, IndexWidth::Auto);
        let first = run_frontier_reduce(&spmv(), &m, &frontier, &cfg, 0);
        let again = run_frontier_reduce(&spmv(), &m, &frontier, &cfg, 0);
        assert_eq!(first, again, "{}: two launches differ", s.name());
        let wide = run_frontier_reduce(&spmv(), &m, &frontier, &cfg, 1);
        assert_eq!(first, wide, "{}: u64 variant differs", s.name());
        check_frontier(&first, &m, &frontier, Reduce::Sum, s.name());
    }
}

#[test]
fn frontier_plans_scan_first() {
    for s in SCHEDULES {
        let (body, p) = with_frontier(spmv());
        let g = generate(&body, &frontier_opts(s, 128, 1, IndexWidth::U32, p)).unwrap();
        let entries: Vec<&str> = g.plans[0]
            .kernels
            .iter()
            .map(|k| k.entry.as_ref())
            .collect();
        let main = format!("spmv_frontier_{}_u32", s.name());
        let want: Vec<String> = ["_tile_sums", "_tile_offsets", "", "_fixup"]
            .iter()
            .map(|suffix| format!("{main}{suffix}"))
            .collect();
        assert_eq!(entries, want);
        let kernels = &g.plans[0].kernels;
        for scan in &kernels[..2] {
            assert_eq!(
                scan.grid, kernels[2].grid,
                "per-block temps follow the main grid"
            );
        }
        // The first kernel's last block scans the chunk sums: its count is a counter word.
        let counter = g.plans[0].temps.iter().find(|t| t.name == "scan_counter");
        assert_eq!(counter.map(|t| t.role), Some(TempRole::Counters));
    }
}

#[test]
fn merge_path_rejects_a_block_whose_tile_offsets_overflow_shared_memory() {
    let o = opts(Schedule::MergePath, 1024, 7, IndexWidth::Auto);
    assert!(matches!(
        generate(&spmv(), &o),
        Err(GenError::BadBlock { .. })
    ));
    let o = opts(Schedule::MergePath, 1024, 7, IndexWidth::U32);
    assert!(generate(&spmv(), &o).is_ok());
}

#[test]
fn modules_assemble_without_spills() {
    let checked = |o: Options| Options { checked: true, ..o };
    for s in SCHEDULES {
        let auto = opts(s, 256, 1, IndexWidth::Auto);
        let lanes = Options {
            lanes: Some(2),
            ..auto.clone()
        };
        let cases = [
            ("spmv", spmv(), auto.clone()),
            ("spmv checked", spmv(), checked(auto.clone())),
            ("spmv min", spmv_reduce(Reduce::Min), auto.clone()),
            ("spmm", spmm(), lanes.clone()),
            ("spmm checked", spmm(), checked(lanes)),
            ("visit", visit_seen(), auto.clone()),
            ("mix", mix(), auto.clone()),
        ];
        let (spmv_frontier, p) = with_frontier(spmv());
        let (visit_frontier, q) = with_frontier(visit_seen());
        let frontier = |p| Options {
            tiles: Some(p),
            ..auto.clone()
        };
        let cases = cases.into_iter().chain([
            ("spmv frontier", spmv_frontier.clone(), frontier(p)),
            ("spmv frontier checked", spmv_frontier, checked(frontier(p))),
            ("visit frontier", visit_frontier, frontier(q)),
        ]);
        for (what, body, o) in cases {
            let g = generate(&body, &o).unwrap();
            assert_eq!(sim::parse(&g.ptx).unwrap().to_string(), g.ptx);
            ptxas::assert_assembles(&format!("{what} / {}", s.name()), &g.ptx);
        }
    }
}

#[test]
fn snapshot_merge_path_spmv_u32() {
    let g = generate(&spmv(), &opts(Schedule::MergePath, 256, 1, IndexWidth::U32)).unwrap();
    insta::assert_snapshot!(g.ptx);
}

#[test]
fn snapshot_nonzero_split_spmv_u64() {
    let g = generate(
        &spmv(),
        &opts(Schedule::NonzeroSplit, 256, 1, IndexWidth::U64),
    )
    .unwrap();
    insta::assert_snapshot!(g.ptx);
}

#[test]
fn snapshot_merge_path_visit_u32() {
    let g = generate(
        &visit_seen(),
        &opts(Schedule::MergePath, 256, 1, IndexWidth::U32),
    )
    .unwrap();
    insta::assert_snapshot!(g.ptx);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_tile_sets(
        rows in prop::collection::vec(
            prop_oneof![4 => 0usize..4, 2 => 0usize..40, 1 => Just(0usize), 1 => 100usize..400],
            0..120,
        ),
        block in prop_oneof![Just(32u32), Just(64u32)],
        items in prop_oneof![Just(1u32), Just(2u32), Just(5u32)],
    ) {
        let m = Matrix::from_lengths(&rows);
        check_all(&m, block, items, "random");
    }
}

/// `fn visit_lanes(a, visits: &mut [u32], k: u64, #[atom] nz, #[lane] l) { visits[nz * k + l] += 1 }`.
fn visit_lanes() -> Body {
    let at = bin(
        BinaryOp::Add,
        Ty::U64,
        bin(
            BinaryOp::Mul,
            Ty::U64,
            index(IndexRole::Atom),
            e(Ty::U64, ExprKind::Scalar(2)),
        ),
        index(IndexRole::Lane),
    );
    Body {
        name: "visit_lanes".into(),
        params: vec![
            csr("a", Ty::F32),
            slice("visits", Ty::U32, true),
            param("k", ParamKind::Scalar(Ty::U64)),
        ],
        roles: vec![IndexRole::Atom, IndexRole::Lane],
        locals: vec![],
        block: Block {
            stmts: vec![Stmt::Expr(atomic(
                AtomicOp::Add,
                Ty::U32,
                ArrayRef::Param(1),
                at,
                vec![int(Ty::U32, 1)],
            ))],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// A strided frontier grid ([`FrontierGrid::Strided`]): fewer resident blocks than the
/// frontier's shares, so each block takes several virtual blocks, with and without lanes (lane
/// fastest), on frontiers with repeated tiles, empty tiles and one tile longer than a block's
/// share; the searches (`two_phase`, `multi_phase`) find each virtual block's tiles in the main
/// kernel. Every atom of every entry is visited once per entry and lane.
#[test]
fn strided_frontier_blocks_cover_every_share() {
    let m = Matrix::from_lengths(&[0, 5, 400, 0, 0, 120, 1, 2, 0, 77, 3, 0, 9]);
    let mut rng = support::Rng::fresh();
    let seed = rng.0;
    let random: Vec<u32> = (0..300).map(|_| rng.range(0, 13) as u32).collect();
    // The fourth frontier's tiles are short and even, so `multi_phase` interpolates.
    let short = vec![1u32, 6, 7, 10, 12, 6, 7, 8];
    let frontiers = [vec![2u32], vec![9, 2, 2, 0, 5, 1, 3, 4], random, short];
    let searches = [Schedule::TwoPhase, Schedule::MultiPhase];
    // Blocks of one warp search both ends of their atoms in one thread, larger ones in two.
    let cases = SCHEDULES
        .into_iter()
        .map(|s| (s, 32u32))
        .chain(searches.into_iter().flat_map(|s| [(s, 32), (s, 64)]));
    for frontier in &frontiers {
        for k in [1usize, 3, 33] {
            for resident in [1u32, 2, 5] {
                for (s, block) in cases.clone() {
                    let what = format!(
                        "{} block {block} k = {k}, {resident} resident, {} entries \
                         (LB_HUGE_SEED={seed})",
                        s.name(),
                        frontier.len()
                    );
                    let (body, p) = with_frontier(visit_lanes());
                    let o = Options {
                        lanes: Some(2),
                        ..frontier_opts(s, block, 2, IndexWidth::U32, p)
                    };
                    let g = generate(&body, &o).unwrap();
                    let plan = &g.plans[0];
                    let main = plan.kernels.last().unwrap();
                    assert!(
                        matches!(
                            main.grid,
                            Grid::CoverWork {
                                frontier: FrontierGrid::Strided,
                                ..
                            }
                        ),
                        "{what}: {:?}",
                        main.grid
                    );
                    let mut mem = Memory::new();
                    let mut args = csr_args_at(&mut mem, &m, plan.offsets);
                    let n = m.nnz() * k;
                    let visits = upload(&mut mem, &vec![0u8; 4 * n]);
                    args.extend([visits, n as u64, k as u64]);
                    args.extend([
                        upload(&mut mem, &bytes_of(frontier, u32::to_le_bytes)),
                        frontier.len() as u64,
                    ]);
                    let size = ProblemSize {
                        tiles: frontier.len() as u64,
                        atoms: m.nnz() as u64,
                        lanes: k as u64,
                        max_tile_atoms: m.longest(),
                        offsets: OffsetWidth::U64,
                    };
                    let module = sim::parse(&g.ptx).unwrap();
                    let runner = Runner::resident(resident, usize::MAX);
                    let grid = main.grid.blocks(&size, main.block, &runner.limits);
                    assert!(grid <= resident * k as u32, "{what}: {grid} blocks");
                    runner.run(&module, plan, args, size, &mut mem);
                    let visits: Vec<u32> = read_words::<4>(&mem, visits, n)
                        .into_iter()
                        .map(u32::from_le_bytes)
                        .collect();
                    for r in 0..m.rows() {
                        let times = frontier.iter().filter(|&&t| t as usize == r).count() as u32;
                        for nz in m.atoms(r) {
                            for l in 0..k {
                                assert_eq!(visits[nz * k + l], times, "{what}: atom {nz} lane {l}");
                            }
                        }
                    }
                }
            }
        }
    }
}
