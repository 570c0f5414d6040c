//! `two_phase` and `multi_phase` on the simulator against CPU loops: the prefix-sum searches on
//! their own (interpolation against lower-bound binary search), the partition array, every body
//! on adversarial, random and frontier tile sets, lanes, determinism, plans, ptxas and snapshots.

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::builder::KernelBuilder;
use lb_ptx::ir::{BinOp, Module, Operand, Rounding, Space, Special, Type};
use lb_ptx::plan::{OffsetWidth, ProblemSize, Select, TempCount};
use lb_ptx::primitives::partition::{tiles_ending_by, Search};
use lb_ptx::schedules::multi_phase;
use lb_ptx::sim::{self, LaunchConfig, Memory};
use lb_ptx::{generate, ptxas, GenError, Generated, IndexWidth, Options, Schedule};
use proptest::prelude::*;
use support::*;

const SCHEDULES: [Schedule; 2] = [Schedule::TwoPhase, Schedule::MultiPhase];

/// Every body on `m` under both schedules, with block size `block` and `items` per thread.
/// How many plans of one index width `s` has (`multi_phase`: one per search).
fn variants(s: Schedule) -> usize {
    generate(&spmv(), &opts(s, 32, 1, IndexWidth::U32))
        .unwrap()
        .plans
        .len()
}

/// The plans of `s` over a frontier (32-bit index): `multi_phase` picks its search on the
/// device there, so it has one.
fn frontier_variants(s: Schedule) -> usize {
    let (body, p) = with_frontier(spmv());
    let o = Options {
        tiles: Some(p),
        ..opts(s, 32, 1, IndexWidth::U32)
    };
    generate(&body, &o).unwrap().plans.len()
}

/// Every body on `m` under both schedules and every search variant, with block size `block`
/// and `items` per thread.
fn check_all(m: &Matrix, block: u32, items: u32, what: &str) {
    check_all_tuned(m, block, items, None, what);
}

/// The options of `s`, with `multi_phase`'s iteration factor `is` (`None`: the default).
fn tuned(s: Schedule, block: u32, items: u32, is: Option<u32>) -> Options {
    let mut o = opts(s, block, items, IndexWidth::U32);
    o.tuning.iteration_factor = is;
    o
}

/// [`check_all`] with `multi_phase`'s iteration factor `is`.
fn check_all_tuned(m: &Matrix, block: u32, items: u32, is: Option<u32>, what: &str) {
    for s in SCHEDULES {
        let o = tuned(s, block, items, is);
        for p in 0..variants(s) {
            let what = format!("{what} / {} plan {p} block {block} items {items}", s.name());
            let sum = run_reduce(&spmv(), &o, p, m, None);
            check_sum(&sum, m, None, &what);
            for r in [Reduce::Min, Reduce::Max] {
                let got = run_reduce(&spmv_reduce(r), &o, p, m, None);
                check_min_max(&got, m, r, &what);
            }
            check_visits(&o, p, m, &what);
        }
    }
}

#[test]
fn adversarial_tile_sets() {
    for (what, rows) in giant_rows() {
        let m = Matrix::from_lengths(&rows);
        check_all(&m, 32, 1, what);
    }
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

#[test]
fn lanes_including_counts_that_are_not_multiples_of_32() {
    for k in [1, 3, 33] {
        let m = Matrix::from_lengths(&[0, 5, 40, 0, 0, 120, 1, 2, 0]);
        for s in SCHEDULES {
            let o = Options {
                lanes: Some(2),
                ..opts(s, 32, 1, IndexWidth::U32)
            };
            for p in 0..variants(s) {
                let got = run_reduce(&spmm(), &o, p, &m, Some(k));
                check_sum(&got, &m, Some(k), &format!("{} plan {p} k = {k}", s.name()));
            }
        }
    }
}

#[test]
fn deterministic_and_the_64_bit_variant_agrees() {
    let rows: Vec<usize> = (0..200).map(|r| [0, 1, 90, 3, 0, 17][r % 6]).collect();
    let m = Matrix::from_lengths(&rows);
    for s in SCHEDULES {
        let auto = opts(s, 32, 1, IndexWidth::Auto);
        let n = variants(s);
        let g = generate(&spmv(), &auto).unwrap();
        assert_eq!(g.plans.len(), 2 * n);
        let first = run_reduce(&spmv(), &auto, 0, &m, None);
        // Every variant finds the same shares, so all of them agree bit for bit.
        for p in 0..2 * n {
            let again = run_reduce(&spmv(), &auto, p, &m, None);
            assert_eq!(first, again, "{}: plan {p} differs", s.name());
        }
        let forced = run_reduce(&spmv(), &opts(s, 32, 1, IndexWidth::U64), 0, &m, None);
        assert_eq!(first, forced, "{}: IndexWidth::U64 differs", s.name());
        for p in 0..n {
            check_visits(&opts(s, 32, 1, IndexWidth::U64), p, &m, "u64 visits");
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
        let wide = run_reduce(&spmv(), &auto, variants(s), &m, None);
        assert_eq!(first, wide, "{}: u64 variant differs", s.name());
    }
}

fn check_frontier_all(m: &Matrix, frontier: &[u32], block: u32, items: u32, what: &str) {
    check_frontier_tuned(m, frontier, (block, items, None), what);
}

/// [`check_frontier_all`] with `multi_phase`'s iteration factor.
fn check_frontier_tuned(
    m: &Matrix,
    frontier: &[u32],
    (block, items, is): (u32, u32, Option<u32>),
    what: &str,
) {
    for s in SCHEDULES {
        let what = format!(
            "{what} / {} block {block} items {items} IS {is:?}",
            s.name()
        );
        let o = tuned(s, block, items, is);
        for r in [Reduce::Sum, Reduce::Min, Reduce::Max] {
            let body = spmv_reduce(r);
            for p in 0..frontier_variants(s) {
                let got = run_frontier_reduce(&body, m, frontier, &o, p);
                check_frontier(&got, m, frontier, r, &format!("{what} plan {p}"));
            }
        }
        check_frontier_visits(m, frontier, &o, &what);
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

/// A kernel that answers `queries[i]` against the sorted `array` with both searches, at width
/// `w`: `out[2i]` by lower-bound binary search, `out[2i + 1]` by interpolation, over `lo..hi`.
fn search_kernel(w: Type) -> Module {
    let mut b = KernelBuilder::new("search");
    let array = b.load_param("array", Type::U64);
    let lo = b.load_param("lo", Type::U64);
    let hi = b.load_param("hi", Type::U64);
    let queries = b.load_param("queries", Type::U64);
    let count = b.load_param("count", Type::U64);
    let out = b.load_param("out", Type::U64);
    let tid = b.special(Special::TidX);
    let i = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let inside = b.setp(lb_ptx::ir::Cmp::Lt, Type::U64, i, count);
    let scope = b.if_begin(inside, false);
    let narrow = |b: &mut KernelBuilder, r| {
        if w == Type::U64 {
            r
        } else {
            b.cvt(Rounding::None, Type::U32, Type::U64, r)
        }
    };
    let addr = b.elem_addr(queries, i, 8);
    let a = b.ld(Space::Global, Type::U64, addr);
    let a = narrow(&mut b, a);
    let (lo, hi) = (narrow(&mut b, lo), narrow(&mut b, hi));
    for (k, search) in [Search::LowerBound, Search::Interpolation]
        .into_iter()
        .enumerate()
    {
        let mut end = |b: &mut KernelBuilder, j| {
            let j = if w == Type::U64 {
                j
            } else {
                b.cvt(Rounding::None, Type::U64, Type::U32, j)
            };
            let addr = b.elem_addr(array, j, 8);
            let v = b.ld(Space::Global, Type::U64, addr);
            narrow(b, v)
        };
        let r = tiles_ending_by(&mut b, w, search, a, (lo, hi), &mut end);
        let r = if w == Type::U64 {
            r
        } else {
            b.cvt(Rounding::None, Type::U64, Type::U32, r)
        };
        let slot = b.bin(BinOp::Mul, Type::U64, i, Operand::Imm(2));
        let slot = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(k as i64));
        let addr = b.elem_addr(out, slot, 8);
        b.st(Space::Global, Type::U64, addr, r);
    }
    b.if_end(scope);
    Module {
        version: (7, 8),
        target: "sm_75".into(),
        kernels: vec![b.finish()],
    }
}

/// Both searches over `array[lo..hi]` for every query, against `partition_point`.
fn check_searches(array: &[u64], (lo, hi): (usize, usize), queries: &[u64], what: &str) {
    for w in [Type::U32, Type::U64] {
        let module = search_kernel(w);
        let mut mem = Memory::new();
        let args = vec![
            upload(&mut mem, &bytes_of(array, u64::to_le_bytes)),
            lo as u64,
            hi as u64,
            upload(&mut mem, &bytes_of(queries, u64::to_le_bytes)),
            queries.len() as u64,
            upload(&mut mem, &vec![0xAB; 16 * queries.len().max(1)]),
        ];
        let cfg = LaunchConfig {
            grid: 1,
            block: queries.len().max(1) as u32,
            dynamic_shared: 0,
        };
        sim::launch(&module, "search", cfg, &args, &mut mem).unwrap();
        let got: Vec<u64> = read_words::<8>(&mem, args[5], 2 * queries.len())
            .into_iter()
            .map(u64::from_le_bytes)
            .collect();
        for (q, &a) in queries.iter().enumerate() {
            let want = lo + array[lo..hi].partition_point(|&e| e <= a);
            assert_eq!(got[2 * q], want as u64, "{what} {w:?}: binary, query {a}");
            assert_eq!(
                got[2 * q + 1],
                want as u64,
                "{what} {w:?}: interpolation, query {a}"
            );
        }
    }
}

#[test]
fn searches_agree_on_edge_cases() {
    let queries: Vec<u64> = (0..40).chain([99, 1000, 1 << 31]).collect();
    check_searches(&[5], (0, 1), &queries, "a single element");
    check_searches(&[7; 20], (0, 20), &queries, "all equal");
    check_searches(&[0; 9], (0, 9), &queries, "all zero");
    check_searches(
        &[3, 3, 3, 8, 8, 9, 30, 30, 30, 30, 31],
        (0, 11),
        &queries,
        "repeats",
    );
    check_searches(&[1, 2, 4, 8, 16, 32], (2, 5), &queries, "a sub-range");
    check_searches(&[1, 2, 4], (1, 1), &queries, "an empty range");
    check_searches(&[0, 0, 0, 0, 1000], (0, 5), &queries, "one huge step");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn searches_agree_on_random_sorted_arrays(
        steps in prop::collection::vec(prop_oneof![3 => 0u64..3, 1 => 0u64..200], 1..200),
        queries in prop::collection::vec(0u64..3000, 1..64),
    ) {
        let array: Vec<u64> = steps
            .iter()
            .scan(0, |sum, &s| {
                *sum += s;
                Some(*sum)
            })
            .collect();
        check_searches(&array, (0, array.len()), &queries, "random");
    }
}

/// The partition array: block `c` starts at the number of tiles ending at or before atom
/// `c × chunk` (0 for block 0), the slot after the last block holds `tiles`, and the visits
/// (checked elsewhere) cover every atom once.
#[test]
fn partition_array_holds_each_blocks_first_tile() {
    let rows: Vec<usize> = (0..500)
        .map(|r| match r % 37 {
            3 => 300,
            5..=9 => 0,
            k => k % 4,
        })
        .chain([0; 200])
        .collect();
    let m = Matrix::from_lengths(&rows);
    for s in SCHEDULES {
        for (block, items) in [(32u32, 1u32), (32, 3), (64, 7)] {
            let o = opts(s, block, items, IndexWidth::U32);
            for p in 0..variants(s) {
                let g = generate(&visit_seen(), &o).unwrap();
                let plan = &g.plans[p];
                assert!(plan.kernels[0].entry.ends_with("_partition"));
                let mut mem = Memory::new();
                let mut args = csr_args_at(&mut mem, &m, plan.offsets);
                let n = m.nnz();
                for bytes in [4, 8, 8] {
                    args.extend([upload(&mut mem, &vec![0; bytes * n]), n as u64]);
                }
                let (temps, blocks) = run_plan(&g, plan, args, size(&m, 1), &mut mem);
                let starts: Vec<u64> =
                    read_words::<8>(&mem, *temps.last().unwrap(), blocks as usize + 1)
                        .into_iter()
                        .map(u64::from_le_bytes)
                        .collect();
                // `items_per_thread` 1 means the work-oriented default, 7; a multi-phase block
                // takes `IS` rounds of them.
                let rounds = if s == Schedule::MultiPhase {
                    multi_phase::DEFAULT_ITERATION_FACTOR
                } else {
                    1
                };
                let chunk = u64::from(block * if items <= 1 { 7 } else { items } * rounds);
                for (c, &start) in starts.iter().enumerate() {
                    let a = (c as u64 * chunk).min(n as u64);
                    let want = if c == 0 {
                        0
                    } else {
                        m.offsets[1..].partition_point(|&e| e <= a) as u64
                    };
                    assert_eq!(
                        start,
                        want,
                        "{} plan {p} block {block} items {items}: slot {c}",
                        s.name()
                    );
                }
                assert_eq!(starts[blocks as usize], m.rows() as u64);
            }
        }
    }
}

#[test]
fn plans_put_the_partition_before_the_main_kernel() {
    let g = generate(&spmv(), &opts(Schedule::TwoPhase, 128, 1, IndexWidth::Auto)).unwrap();
    let entries: Vec<Vec<&str>> = g
        .plans
        .iter()
        .map(|p| p.kernels.iter().map(|k| k.entry.as_ref()).collect())
        .collect();
    assert_eq!(
        entries,
        [
            [
                "spmv_two_phase_u32_partition",
                "spmv_two_phase_u32",
                "spmv_two_phase_u32_fixup"
            ],
            [
                "spmv_two_phase_u64_partition",
                "spmv_two_phase_u64",
                "spmv_two_phase_u64_fixup"
            ]
        ]
    );
    assert_eq!(g.plans[0].kernels[0].grid, g.plans[0].kernels[1].grid);
    let last = g.plans[0].temps.last().unwrap();
    assert_eq!(
        (last.name.as_ref(), last.count),
        ("block_starts", TempCount::PerBlock { extra: 1 })
    );

    let g = generate(
        &spmv(),
        &opts(Schedule::MultiPhase, 128, 1, IndexWidth::Auto),
    )
    .unwrap();
    let mains: Vec<(&str, &str, Option<u64>, Option<Select>)> = g
        .plans
        .iter()
        .map(|p| {
            let (partition, main) = (&p.kernels[0].entry, &p.kernels[1].entry);
            (partition.as_ref(), main.as_ref(), p.index_limit, p.select)
        })
        .collect();
    let interpolation = Select::Spread {
        max_avg: 9,
        max_std_dev: 8,
        low: true,
    };
    let binary = Select::Spread {
        max_avg: 9,
        max_std_dev: 8,
        low: false,
    };
    let limit = Some(u64::from(u32::MAX));
    // The variants differ only in their partition; the expansion and fix-up are shared.
    assert_eq!(
        mains,
        [
            (
                "spmv_multi_phase_interpolation_u32_partition",
                "spmv_multi_phase_u32",
                limit,
                Some(interpolation)
            ),
            (
                "spmv_multi_phase_binary_u32_partition",
                "spmv_multi_phase_u32",
                limit,
                Some(binary)
            ),
            (
                "spmv_multi_phase_interpolation_u64_partition",
                "spmv_multi_phase_u64",
                None,
                Some(interpolation)
            ),
            (
                "spmv_multi_phase_binary_u64_partition",
                "spmv_multi_phase_u64",
                None,
                Some(binary)
            ),
        ]
    );
    // Every kernel a plan names is in the module exactly once.
    for plan in &g.plans {
        for k in plan.kernels.iter() {
            let entry = format!(".entry {}(", k.entry);
            assert_eq!(g.ptx.matches(entry.as_str()).count(), 1, "{}", k.entry);
        }
    }
    // The rule of B&B §3.1.2: interpolation up to 9 atoms per tile on average and a standard
    // deviation up to 8; binary search everywhere else.
    let at = |atoms| ProblemSize {
        tiles: 10,
        atoms,
        lanes: 1,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    };
    for (atoms, std_dev, interpolates) in [
        (90, 0.0, true),
        (90, 8.0, true),
        (90, 8.5, false),
        (91, 0.0, false),
        (0, 0.0, true),
    ] {
        assert_eq!(interpolation.matches(&at(atoms), std_dev), interpolates);
        assert_eq!(binary.matches(&at(atoms), std_dev), !interpolates);
    }
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
        let (spmv_frontier, p) = with_frontier(spmv());
        let (visit_frontier, q) = with_frontier(visit_seen());
        let frontier = |p| Options {
            tiles: Some(p),
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
            ("spmv frontier", spmv_frontier.clone(), frontier(p)),
            ("spmv frontier checked", spmv_frontier, checked(frontier(p))),
            ("visit frontier", visit_frontier, frontier(q)),
        ];
        for (what, body, o) in cases {
            let g = generate(&body, &o).unwrap();
            assert_eq!(sim::parse(&g.ptx).unwrap().to_string(), g.ptx);
            ptxas::assert_assembles(&format!("{what} / {}", s.name()), &g.ptx);
        }
    }
}

/// `IS` rounds per block (B&B §3.2): every factor on the nasty tile sets, with frontiers and
/// lanes, against the CPU loops.
#[test]
fn iteration_factors() {
    let (fm, cases) = frontier_cases();
    for is in [1, 2, 3, 4, 8] {
        for (what, rows) in giant_rows() {
            let m = Matrix::from_lengths(&rows);
            check_all_tuned(&m, 32, 2, Some(is), what);
        }
        let rows: Vec<usize> = (0..300)
            .map(|r| [0, 1, 90, 3, 0, 17, 0, 0][r % 8])
            .collect();
        check_all_tuned(&Matrix::from_lengths(&rows), 64, 3, Some(is), "mixed");
        for (what, frontier) in &cases {
            check_frontier_tuned(&fm, frontier, (32, 2, Some(is)), what);
        }
        let m = Matrix::from_lengths(&[0, 5, 40, 0, 0, 120, 1, 2, 0]);
        let o = tuned(Schedule::MultiPhase, 32, 1, Some(is));
        for p in 0..variants(Schedule::MultiPhase) {
            let o = Options {
                lanes: Some(2),
                ..o.clone()
            };
            let got = run_reduce(&spmm(), &o, p, &m, Some(3));
            check_sum(&got, &m, Some(3), &format!("IS {is} plan {p} lanes"));
        }
    }
}

/// The shape that `multi_phase` picks to fit a block's shared memory counts everything the
/// plan stages: over a frontier with a body that does not reduce, the 16 bytes through which a
/// strided block passes its range too (a block of 256 with `IS` = 3 and 64-bit indices once
/// picked a shape 16 bytes over the limit, and the kernel was refused).
#[test]
fn the_shape_fits_a_strided_frontier_plan() {
    let (body, p) = with_frontier(visit_seen());
    for index in [IndexWidth::U32, IndexWidth::U64] {
        for block in [128, 256, 512] {
            for is in 1..=4 {
                let mut o = Options {
                    tiles: Some(p),
                    ..opts(Schedule::MultiPhase, block, 1, index)
                };
                o.tuning.iteration_factor = Some(is);
                let what = format!("{index:?}, block {block}, IS {is}");
                let g = generate(&body, &o).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(!g.plans.is_empty(), "{what}");
            }
        }
    }
}

/// The coalesced expansion is in the kernel: the body's loads unrolled once per item of a
/// thread's share (§3.3.1), warp-synchronous sections (§3.3.5), the round buffer.
#[test]
fn the_expansion_is_unrolled_and_warp_synchronous() {
    for items in [3u32, 7] {
        let g = generate(
            &spmv(),
            &opts(Schedule::MultiPhase, 256, items, IndexWidth::U32),
        )
        .unwrap();
        let main = g
            .ptx
            .split(".entry ")
            .find(|k| k.starts_with("spmv_multi_phase_u32("))
            .expect("the main kernel");
        // `spmv` loads a value (streamed) and an `x` entry (read-only) per nonzero.
        assert_eq!(main.matches("ld.global.cs.nc.f32").count(), items as usize);
        assert_eq!(main.matches("ld.global.nc.f32").count(), items as usize);
        assert_eq!(main.matches("bar.warp.sync 4294967295;").count(), 2);
        assert!(main.contains("lb_expansion_slots"));
        let two_phase = generate(
            &spmv(),
            &opts(Schedule::TwoPhase, 256, items, IndexWidth::U32),
        )
        .unwrap()
        .ptx;
        assert!(!two_phase.contains("bar.warp.sync"));
    }
}

/// An iteration factor outside 1..=8, or a shape whose staged offsets and buffer do not fit, is
/// an error that says what to change; what the attribute leaves out shrinks to fit.
#[test]
fn iteration_factor_limits() {
    let with = |block, items, is| {
        let mut o = opts(Schedule::MultiPhase, block, items, IndexWidth::Auto);
        o.tuning.iteration_factor = is;
        generate(&spmv(), &o)
    };
    let error = |r: Result<Generated, GenError>| match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the shape fits, but should not"),
    };
    for bad in [0, 9] {
        let e = error(with(256, 1, Some(bad)));
        assert!(e.contains("`iteration_factor` must be from 1 to 8"), "{e}");
    }
    let e = error(with(256, 7, Some(8)));
    assert!(e.contains("use fewer threads or items per thread"), "{e}");
    let e = error(with(512, 7, None));
    assert!(e.contains("plus 28672 bytes of expansion buffer"), "{e}");
    // An explicit factor with the default share: the share shrinks (2 × 8 items fit).
    assert!(with(256, 1, Some(8)).is_ok());
    assert!(with(256, 1, None) == with(256, 7, Some(multi_phase::DEFAULT_ITERATION_FACTOR)));
    for block in [512, 1024] {
        let g = with(block, 1, None).unwrap();
        ptxas::assert_assembles(&format!("multi_phase block {block}"), &g.ptx);
    }
}

/// Large blocks, where the defaults shrink to fit, still compute the right answers.
#[test]
fn large_blocks_with_the_shrunken_shape() {
    let rows: Vec<usize> = (0..3000).map(|r| [0, 1, 900, 3, 0, 17, 2][r % 7]).collect();
    let m = Matrix::from_lengths(&rows);
    for block in [512, 1024] {
        let o = opts(Schedule::MultiPhase, block, 1, IndexWidth::U32);
        for p in 0..variants(Schedule::MultiPhase) {
            let got = run_reduce(&spmv(), &o, p, &m, None);
            check_sum(&got, &m, None, &format!("block {block} plan {p}"));
            check_visits(&o, p, &m, &format!("block {block} plan {p}"));
        }
    }
}

#[test]
fn snapshot_two_phase_spmv_u32() {
    let g = generate(&spmv(), &opts(Schedule::TwoPhase, 256, 1, IndexWidth::U32)).unwrap();
    insta::assert_snapshot!(g.ptx);
}

#[test]
fn snapshot_multi_phase_visit_u64() {
    let g = generate(
        &visit_seen(),
        &opts(Schedule::MultiPhase, 256, 1, IndexWidth::U64),
    )
    .unwrap();
    insta::assert_snapshot!(g.ptx);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn random_tile_sets(
        rows in prop::collection::vec(
            prop_oneof![4 => 0usize..4, 2 => 0usize..40, 1 => Just(0usize), 1 => 100usize..400],
            0..120,
        ),
        block in prop_oneof![Just(32u32), Just(64u32)],
        items in prop_oneof![Just(1u32), Just(2u32), Just(5u32)],
        is in 1u32..5,
    ) {
        let m = Matrix::from_lengths(&rows);
        check_all_tuned(&m, block, items, Some(is), "random");
    }
}

/// Over a frontier `multi_phase` has one plan per index width, which picks its search on the
/// device: the frontier scan sums `min(size, 2^16)²` into `tile_squares`, and the blocks of the
/// strided main kernel (no partition kernel, no `block_starts`) apply B&B §3.1.2's rule to the
/// frontier's mean and spread when they search for their tiles. Frontiers on each side of the
/// rule (uniform short tiles, spread ones, one giant tile, empty) give the CPU loop's results,
/// and `tile_squares` holds the host's sum. A reducing body strides the same way (its carries
/// are counted for the grid's bound), with the fix-up kernel last.
#[test]
fn multi_phase_frontier_measures_its_spread() {
    let (body, p) = with_frontier(visit_seen());
    let o = Options {
        tiles: Some(p),
        ..opts(Schedule::MultiPhase, 32, 2, IndexWidth::U32)
    };
    let g = generate(&body, &o).unwrap();
    assert_eq!(g.plans.len(), 1);
    let plan = &g.plans[0];
    assert_eq!(plan.select, None);
    let names: Vec<&str> = plan.temps.iter().map(|t| t.name.as_ref()).collect();
    let squares = names.iter().position(|&n| n == "tile_squares").unwrap();
    assert!(!names.contains(&"block_starts"), "{names:?}");
    assert!(plan
        .kernels
        .iter()
        .all(|k| !k.entry.ends_with("_partition")));
    let (reducing, q) = with_frontier(spmv());
    let reducing = generate(
        &reducing,
        &Options {
            tiles: Some(q),
            ..o.clone()
        },
    )
    .unwrap();
    let temps = &reducing.plans[0].temps;
    assert!(temps.iter().all(|t| t.name != "block_starts"));
    assert!(temps.iter().any(|t| t.name == "tile_squares"));
    let kernels = &reducing.plans[0].kernels;
    assert!(kernels.iter().all(|k| !k.entry.ends_with("_partition")));
    assert!(kernels.last().is_some_and(|k| k.entry.ends_with("_fixup")));
    let lengths: Vec<usize> = (0..400)
        .map(|r| match (r, r % 10) {
            (0, _) => 70_000,
            (_, 0) => 40,
            (_, 1..=3) => 0,
            (_, k) => k,
        })
        .collect();
    let m = Matrix::from_lengths(&lengths);
    let mut rng = support::Rng::fresh();
    let seed = rng.0;
    let spread: Vec<u32> = (0..150).map(|_| rng.range(1, 400) as u32).collect();
    let cases: [(&str, Vec<u32>); 4] = [
        ("uniform short tiles", (0..40).map(|k| 10 * k + 5).collect()),
        ("spread tiles", spread),
        ("one giant tile", vec![0]),
        ("empty", vec![]),
    ];
    for (what, frontier) in &cases {
        let what = format!("{what} (LB_HUGE_SEED={seed})");
        check_frontier_visits(&m, frontier, &o, &what);
        let module = sim::parse(&g.ptx).unwrap();
        let mut mem = Memory::new();
        let mut args = csr_args_at(&mut mem, &m, plan.offsets);
        let n = m.nnz();
        for bytes in [4, 8, 8] {
            args.extend([upload(&mut mem, &vec![0u8; bytes * n]), n as u64]);
        }
        args.extend([
            upload(&mut mem, &bytes_of(frontier, u32::to_le_bytes)),
            frontier.len() as u64,
        ]);
        let runner = Runner::resident(2, usize::MAX);
        let (temps, _) = runner.run(&module, plan, args, frontier_size(&m, frontier), &mut mem);
        let want: u64 = frontier
            .iter()
            .map(|&t| (lengths[t as usize] as u64).min(1 << 16).pow(2))
            .sum();
        assert_eq!(read_u64(&mem, temps[squares], 1), [want], "{what}");
    }
}
