//! The graph apps of `lb::algorithms` beyond push BFS and SSSP (direction-optimizing BFS,
//! connected components, PageRank) against sequential references (queue BFS, union-find, f64
//! power iteration) on random graphs with disconnected parts, self-loops, duplicate edges and
//! isolated vertices, and on the edge cases: one vertex, no edges, a star with thousands of
//! leaves (a million on the GPU, with push BFS and both SSSP drivers too). Each iteration's
//! host↔device traffic is checked too (at most 16 bytes).

#[path = "common/graphs.rs"]
mod graphs;

use graphs::{check_traffic, nasty_graph};
use lb::algorithms::{
    bfs, bfs_direction_optimizing, bfs_direction_optimizing_into, bfs_into, bfs_levels,
    components_union_find, connected_components, dijkstra, pagerank, pagerank_reference, schedules,
    sssp, sssp_near_far, BfsResult, Delta, Direction, DoBfsGraph, DoBfsLevel, DoBfsResult,
    PageRankGraph, PageRankOptions,
};
use lb::prelude::*;
use lb::Error;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A star: vertex 0 points at `leaves` leaves, and each leaf points back.
fn star(leaves: usize) -> Csr<f32> {
    let triplets = (1..=leaves)
        .flat_map(|v| [(0, v, 1.0), (v, 0, 1.0)])
        .collect();
    Csr::from_triplets(leaves + 1, leaves + 1, triplets).expect("valid star")
}

/// Direction-optimizing BFS from `source` under `schedules`, with the paper's switch and with
/// push only and pull only, against the queue BFS and the push driver: same depths, same
/// iterations and traversed edges, 16 bytes per iteration.
fn check_dobfs(g: &Csr<f32>, source: usize, schedules: &[Schedule]) {
    let dev = Device::default();
    let dg = DeviceCsr::upload(&dev, g).unwrap();
    let directed = DoBfsGraph::upload(&dev, g).unwrap();
    let want = bfs_levels(g, source);
    for &s in schedules {
        let push = bfs(&dev, &dg, source, s).unwrap();
        assert_eq!(push.depth, want, "push bfs {}", s.name());
        for (name, d) in [
            ("default", Direction::default()),
            ("push only", Direction::PUSH_ONLY),
            ("pull only", Direction::PULL_ONLY),
        ] {
            let what = format!("dobfs {name} {}", s.name());
            let r = bfs_direction_optimizing(&dev, &directed, source, s, d).unwrap();
            assert_eq!(r.depth, want, "{what}: depths");
            assert_eq!(r.run.iterations, push.run.iterations, "{what}: iterations");
            assert_eq!(r.run.edges, push.run.edges, "{what}: traversed edges");
            assert_eq!(
                r.push_iterations + r.pull_iterations,
                r.run.iterations,
                "{what}: every iteration goes one way"
            );
            if d == Direction::PUSH_ONLY {
                assert_eq!(r.pull_iterations, 0, "{what}");
            }
            check_traffic(&what, &r.run, 16);
            check_levels(&what, g, &want, &r.levels);
        }
    }
}

/// Each step reached the vertices of the next depth, and ran over the frontier (top-down) or
/// every vertex (bottom-up).
fn check_levels(what: &str, g: &Csr<f32>, want: &[u32], levels: &[DoBfsLevel]) {
    let at = |d: u32| want.iter().filter(|&&x| x == d).count() as u64;
    for (i, l) in levels.iter().enumerate() {
        let level = i as u32;
        assert_eq!(l.reached, at(level + 1), "{what}: step {i} reached");
        let tiles = if l.pulled {
            g.num_rows as u64
        } else {
            at(level)
        };
        assert_eq!(l.tiles, tiles, "{what}: step {i}'s tiles");
    }
}

#[test]
fn dobfs_matches_queue_bfs_on_nasty_graphs() {
    for (i, &(n, parts, degree)) in [(1, 1, 0), (2, 1, 1), (40, 1, 3), (150, 3, 4), (300, 2, 8)]
        .iter()
        .enumerate()
    {
        let g = nasty_graph(n, parts, degree, 0xd0bf5 + i as u64);
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64);
        check_dobfs(&g, rng.random_range(0..n), schedules());
    }
}

#[test]
fn dobfs_edge_cases() {
    let few = [Schedule::ThreadMapped, Schedule::MergePath];
    check_dobfs(&Csr::<f32>::empty(1, 1).unwrap(), 0, few.as_slice());
    check_dobfs(&Csr::<f32>::empty(7, 7).unwrap(), 3, few.as_slice());
    let looped = Csr::from_triplets(1, 1, vec![(0, 0, 1.0), (0, 0, 2.0)]).unwrap();
    check_dobfs(&looped, 0, few.as_slice());
    // A star from its hub: the second frontier holds every leaf, so the default switch pulls.
    let s = star(3000);
    check_dobfs(&s, 0, few.as_slice());
    check_dobfs(&s, 17, few.as_slice());
}

/// On a star from its hub the hub's edges are half the graph: the switch pulls at once.
#[test]
fn dobfs_switches_direction() {
    let dev = Device::default();
    let g = star(2000);
    let dg = DoBfsGraph::upload(&dev, &g).unwrap();
    let r = bfs_direction_optimizing(&dev, &dg, 0, Schedule::ThreadMapped, Direction::default())
        .unwrap();
    assert_eq!(r.depth, bfs_levels(&g, 0));
    assert!(r.pull_iterations > 0, "{r:?}");
    let pushed =
        bfs_direction_optimizing(&dev, &dg, 5, Schedule::ThreadMapped, Direction::PUSH_ONLY)
            .unwrap();
    assert_eq!((pushed.push_iterations, pushed.pull_iterations), (3, 0));
}

/// One prepared graph searched from several sources in turn (each search reuses the buffers the
/// last one left): every search starts clean.
#[test]
fn dobfs_searches_in_turn_start_clean() {
    let dev = Device::default();
    let g = nasty_graph(200, 3, 4, 0x5eed);
    let dg = DoBfsGraph::upload(&dev, &g).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for round in 0..8 {
        let source = rng.random_range(0..200);
        let d = [Direction::default(), Direction::PULL_ONLY][round % 2];
        let r = bfs_direction_optimizing(&dev, &dg, source, Schedule::MergePath, d).unwrap();
        assert_eq!(
            r.depth,
            bfs_levels(&g, source),
            "round {round}, source {source}"
        );
        let reached: u64 = (0..200)
            .filter(|&v| r.depth[v] != u32::MAX)
            .map(|v| g.row(v).len() as u64)
            .sum();
        assert_eq!(r.run.edges, reached, "round {round}: traversed edges");
    }
}

/// The `_into` drivers write into results kept across searches, in a `Vec` or page-locked
/// memory, on two graphs of different sizes in turn (so every buffer changes length), from fresh
/// random sources: the depths are the queue BFS's and the records the allocating drivers'.
#[test]
fn searches_into_kept_results() {
    let dev = Device::default();
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    let seed = rng.random::<u64>();
    let graphs = [
        nasty_graph(200, 3, 4, seed),
        nasty_graph(57, 2, 5, seed ^ 1),
    ];
    let device: Vec<_> = graphs
        .iter()
        .map(|g| {
            (
                DeviceCsr::upload(&dev, g).unwrap(),
                DoBfsGraph::upload(&dev, g).unwrap(),
            )
        })
        .collect();
    let mut pinned: BfsResult<HostBuffer<u32>> = BfsResult::default();
    let mut plain: BfsResult = BfsResult::default();
    let mut direction: DoBfsResult<HostBuffer<u32>> = DoBfsResult::default();
    let s = Schedule::MergePath;
    for round in 0..6 {
        let (g, (dg, dog)) = (&graphs[round % 2], &device[round % 2]);
        let source = rng.random_range(0..g.num_rows);
        let what = format!("round {round}, source {source} (seed {seed})");
        let want = bfs_levels(g, source);
        bfs_into(&dev, dg, source, s, &mut pinned).unwrap();
        bfs_into(&dev, dg, source, s, &mut plain).unwrap();
        let fresh = bfs(&dev, dg, source, s).unwrap();
        assert_eq!(pinned.depth, want, "{what}: pinned");
        assert_eq!(plain.depth, want, "{what}: vec");
        assert_eq!(pinned.run.edges, fresh.run.edges, "{what}");
        assert_eq!(plain.run.iterations, fresh.run.iterations, "{what}");
        bfs_direction_optimizing_into(&dev, dog, source, s, Direction::default(), &mut direction)
            .unwrap();
        let fresh = bfs_direction_optimizing(&dev, dog, source, s, Direction::default()).unwrap();
        assert_eq!(direction.depth, want, "{what}: direction-optimizing");
        assert_eq!(direction.levels.len(), fresh.levels.len(), "{what}");
        assert_eq!(direction.run.edges, fresh.run.edges, "{what}");
        assert_eq!(
            direction.push_iterations + direction.pull_iterations,
            direction.run.iterations,
            "{what}"
        );
    }
}

#[test]
fn dobfs_bad_inputs_are_errors() {
    let dev = Device::default();
    let g = nasty_graph(20, 1, 3, 5);
    let dg = DoBfsGraph::upload(&dev, &g).unwrap();
    let s = Schedule::ThreadMapped;
    let d = Direction::default();
    assert!(matches!(
        bfs_direction_optimizing(&dev, &dg, 20, s, d),
        Err(Error::Shape(_))
    ));
    let wide = Csr::from_triplets(3, 4, vec![(0, 3, 1.0)]).unwrap();
    assert!(matches!(
        DoBfsGraph::upload(&dev, &wide),
        Err(Error::Shape(_))
    ));
    let nan = Direction {
        alpha: f64::NAN,
        beta: 24.0,
    };
    assert!(matches!(
        bfs_direction_optimizing(&dev, &dg, 0, s, nan),
        Err(Error::Shape(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn dobfs_matches_on_random_graphs(n in 1usize..300, parts in 1usize..4, degree in 0usize..8, seed in any::<u64>()) {
        let g = nasty_graph(n, parts, degree, seed);
        check_dobfs(&g, (seed as usize) % n, &[Schedule::ThreadMapped, Schedule::WarpMapped]);
    }
}

/// Connected components under `schedules` against union-find, 12 bytes per iteration.
fn check_cc(g: &Csr<f32>, schedules: &[Schedule]) {
    let dev = Device::default();
    let dg = DeviceCsr::upload(&dev, g).unwrap();
    let want = components_union_find(g);
    let count = (0..want.len()).filter(|&u| want[u] as usize == u).count();
    for &s in schedules {
        let what = format!("cc {}", s.name());
        let r = connected_components(&dev, &dg, s).unwrap();
        assert_eq!(r.labels, want, "{what}");
        assert_eq!(r.components, count, "{what}: components");
        assert!(r.run.iterations >= 1, "{what}");
        assert_eq!(
            r.run.edges,
            r.run.iterations as u64 * g.nnz() as u64,
            "{what}"
        );
        check_traffic(&what, &r.run, 12);
    }
}

#[test]
fn cc_matches_union_find_on_nasty_graphs() {
    for (i, &(n, parts, degree)) in [(40, 1, 1), (150, 4, 2), (300, 3, 3), (300, 40, 1)]
        .iter()
        .enumerate()
    {
        check_cc(&nasty_graph(n, parts, degree, 0xcc + i as u64), schedules());
    }
}

#[test]
fn cc_edge_cases() {
    let few = [Schedule::ThreadMapped, Schedule::MergePath];
    check_cc(&Csr::<f32>::empty(0, 0).unwrap(), few.as_slice());
    check_cc(&Csr::<f32>::empty(1, 1).unwrap(), few.as_slice());
    check_cc(&Csr::<f32>::empty(9, 9).unwrap(), few.as_slice());
    check_cc(&star(3000), few.as_slice());
    // A path numbered backwards: the smallest label must travel the whole way.
    let path: Vec<(usize, usize, f32)> = (1..200).map(|v| (v, v - 1, 1.0)).collect();
    check_cc(&Csr::from_triplets(200, 200, path).unwrap(), few.as_slice());
    let dev = Device::default();
    let rect = DeviceCsr::upload(&dev, &Csr::<f32>::empty(3, 4).unwrap()).unwrap();
    assert!(matches!(
        connected_components(&dev, &rect, Schedule::ThreadMapped),
        Err(Error::Shape(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn cc_matches_on_random_graphs(n in 1usize..300, parts in 1usize..6, degree in 0usize..4, seed in any::<u64>()) {
        check_cc(&nasty_graph(n, parts, degree, seed), &[Schedule::ThreadMapped, Schedule::GroupMapped(8)]);
    }
}

/// PageRank under `schedules` against the f64 power iteration: within 10 × the tolerance in
/// L1 (both stop within it of the fixed point; f32 rounding adds far less), summing to 1,
/// 12 bytes per iteration. `tolerance` must sit above the f32 iterates' rounding floor (see
/// `pagerank_matches_f64_power_iteration`).
fn check_pagerank(g: &Csr<f32>, tolerance: f64, schedules: &[Schedule]) {
    let dev = Device::default();
    let dg = PageRankGraph::upload(&dev, g).unwrap();
    let opts = PageRankOptions {
        tolerance,
        ..PageRankOptions::default()
    };
    let (want, iterations) = pagerank_reference(g, opts);
    assert!(iterations < opts.max_iterations, "the reference converges");
    for &s in schedules {
        let what = format!("pagerank {}", s.name());
        let r = pagerank(&dev, &dg, s, opts).unwrap();
        assert!(
            r.converged,
            "{what}: {} iterations, reference {iterations}, n {}",
            r.run.iterations, g.num_rows
        );
        let l1: f64 = r
            .rank
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (f64::from(a) - b).abs())
            .sum();
        assert!(l1 < 10.0 * opts.tolerance, "{what}: L1 {l1:e}");
        let total: f64 = r.rank.iter().map(|&x| f64::from(x)).sum();
        assert!((total - 1.0).abs() < 1e-4, "{what}: ranks sum to {total}");
        assert!(
            r.run.iterations.abs_diff(iterations) <= 3,
            "{what}: {} vs {iterations}",
            r.run.iterations
        );
        assert_eq!(
            r.run.edges,
            r.run.iterations as u64 * g.nnz() as u64,
            "{what}"
        );
        check_traffic(&what, &r.run, 12);
    }
}

#[test]
fn pagerank_matches_f64_power_iteration() {
    for (i, &(n, parts, degree)) in [(60, 1, 3), (250, 3, 4)].iter().enumerate() {
        check_pagerank(
            &nasty_graph(n, parts, degree, 0x9a9e + i as u64),
            1e-5,
            schedules(),
        );
    }
    let few = [Schedule::ThreadMapped, Schedule::MergePath];
    check_pagerank(&Csr::<f32>::empty(1, 1).unwrap(), 1e-5, few.as_slice());
    check_pagerank(&Csr::<f32>::empty(6, 6).unwrap(), 1e-5, few.as_slice());
    // The hub sums its leaves' ranks in f32, each addition rounded at the hub's rank (about
    // 0.5, an ulp of 6e-8): with 3000 leaves the iterates wobble by about 1e-4 in L1 and never
    // settle closer, with 300 by about 1e-5.
    check_pagerank(&star(3000), 1e-3, few.as_slice());
    check_pagerank(&star(300), 1e-4, few.as_slice());
    let dev = Device::default();
    for bad in [
        Csr::<f32>::empty(0, 0).unwrap(),
        Csr::<f32>::empty(2, 3).unwrap(),
    ] {
        assert!(matches!(
            PageRankGraph::upload(&dev, &bad),
            Err(Error::Shape(_))
        ));
    }
    let dg = PageRankGraph::upload(&dev, &star(3)).unwrap();
    let nan = PageRankOptions {
        damping: f32::NAN,
        ..PageRankOptions::default()
    };
    assert!(matches!(
        pagerank(&dev, &dg, Schedule::ThreadMapped, nan),
        Err(Error::Shape(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn pagerank_matches_on_random_graphs(n in 1usize..200, parts in 1usize..4, degree in 0usize..6, seed in any::<u64>()) {
        check_pagerank(&nasty_graph(n, parts, degree, seed), 1e-5, &[Schedule::WarpMapped]);
    }
}

/// A star of `leaves` leaves whose `2 × leaves` edges weigh fresh random values in `[0.5, 8)`.
fn weighted_star(leaves: usize, seed: u64) -> Csr<f32> {
    let mut g = star(leaves);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    g.values
        .iter_mut()
        .for_each(|w| *w = rng.random_range(0.5f32..8.0));
    g
}

/// Every app on a weighted star, under `schedules`, against the sequential references: the hub's
/// row is one tile of `leaves` atoms, and from the hub the second frontier holds `leaves` tiles
/// of one atom. Push BFS and both SSSP drivers from the hub and from a leaf, then the
/// direction-optimizing BFS, connected components and PageRank.
fn star_apps(leaves: usize, schedules: &[Schedule]) {
    let seed = rand::rng().random::<u64>();
    let g = weighted_star(leaves, seed);
    let dev = Device::default();
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    for source in [0, 1 + (seed as usize) % leaves] {
        let depth = bfs_levels(&g, source);
        let dist = dijkstra(&g, source);
        for &s in schedules {
            let what = format!(
                "star of {leaves}, seed {seed}, source {source}, {}",
                s.name()
            );
            let b = bfs(&dev, &dg, source, s).unwrap();
            assert_eq!(b.depth, depth, "{what}: bfs");
            check_traffic(&what, &b.run, 16);
            // One path to each vertex, summed in the same order: equal, not just close.
            let r = sssp(&dev, &dg, source, s).unwrap();
            assert_eq!(r.dist, dist, "{what}: sssp");
            check_traffic(&what, &r.run, 16);
            let nf = sssp_near_far(&dev, &dg, source, s, Delta::default()).unwrap();
            assert_eq!(nf.dist, dist, "{what}: near-far");
        }
        check_dobfs(&g, source, schedules);
    }
    check_cc(&g, schedules);
    // `thread_mapped` gives the hub's row to one thread, which adds its `leaves` f32 terms in
    // order: on a million leaves the sum's rounding moves each iterate by more than the
    // tolerance (docs/graph-apps.md, PageRank). Every other schedule splits a row that long.
    let split: Vec<Schedule> = schedules
        .iter()
        .copied()
        .filter(|&s| s != Schedule::ThreadMapped || leaves < 100_000)
        .collect();
    check_pagerank(&g, 1e-3, &split);
}

#[test]
fn star_apps_on_every_path() {
    star_apps(
        1_500,
        &[Schedule::ThreadMapped, Schedule::MergePath, Schedule::Lrb],
    );
}

/// The star of a million leaves, under every schedule, on GPU 0.
#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_million_leaf_star() {
    let dev = Device::default();
    assert!(
        Device::cuda(0).is_ok() && dev.is_gpu(),
        "this test needs a CUDA GPU"
    );
    star_apps(1_000_000, schedules());
}
