//! The SSSP and BFS drivers (`lb::algorithms`) against Dijkstra and queue BFS, on random graphs
//! with disconnected parts, zero-weight edges, self-loops, duplicate edges and isolated
//! vertices, under every frontier schedule; their recovery from queue overflows, with queues of
//! one and a few slots; and the host↔device bytes of their iterations (at most 16 each).

mod common;
#[path = "common/graphs.rs"]
mod graphs;

use graphs::{check_traffic, nasty_graph};
use lb::algorithms::{
    bfs, bfs_levels, bfs_unchecked, bfs_with_capacity, block_levels_limit, dijkstra, schedules,
    sssp, sssp_unchecked, sssp_with_capacity, step_schedule, Choice, Traversal, BLOCK_LEVELS,
};
use lb::prelude::*;
use lb::Error;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn device() -> Device {
    Device::default()
}

/// A directed graph of `n` vertices in `parts` disconnected blocks, about `degree` edges per
/// vertex, integer weights 0..=5 (so f32 sums are exact and zero weights occur).
fn random_graph(n: usize, parts: usize, degree: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let parts = parts.clamp(1, n.max(1));
    let block = n.div_ceil(parts).max(1);
    let mut triplets = Vec::new();
    for u in 0..n {
        let (lo, hi) = ((u / block) * block, ((u / block + 1) * block).min(n));
        for _ in 0..rng.random_range(0..=2 * degree) {
            let v = rng.random_range(lo..hi);
            triplets.push((u, v, rng.random_range(0..=5u32) as f32));
        }
    }
    Csr::from_triplets(n, n, triplets).expect("valid graph")
}

fn check(g: &Csr<f32>, source: usize, capacity: Option<usize>) {
    let dev = device();
    let dg = DeviceCsr::upload(&dev, g).unwrap();
    let (dist, depth) = (dijkstra(g, source), bfs_levels(g, source));
    let choices = schedules().iter().map(|&s| Choice::from(s));
    for s in choices.chain([Choice::Auto]) {
        let (sp, bf) = match capacity {
            Some(c) => (
                sssp_with_capacity(&dev, &dg, source, s, c).unwrap(),
                bfs_with_capacity(&dev, &dg, source, s, c).unwrap(),
            ),
            None => (
                sssp(&dev, &dg, source, s).unwrap(),
                bfs(&dev, &dg, source, s).unwrap(),
            ),
        };
        assert_eq!(sp.dist, dist, "sssp {}", s.name());
        assert_eq!(bf.depth, depth, "bfs {}", s.name());
        let levels = depth
            .iter()
            .filter(|&&d| d != u32::MAX)
            .max()
            .map_or(0, |&d| d as usize + 1);
        assert_eq!(bf.run.iterations, levels, "bfs {} iterations", s.name());
        let reached: u64 = (0..g.num_rows)
            .filter(|&u| depth[u] != u32::MAX)
            .map(|u| g.row(u).len() as u64)
            .sum();
        assert_eq!(bf.run.edges, reached, "bfs {} traversed edges", s.name());
        assert!(
            sp.run.edges >= reached,
            "sssp {} relaxes every reachable edge at least once",
            s.name()
        );
        check_traffic(&format!("sssp {}", s.name()), &sp.run, 16);
        check_traffic(&format!("bfs {}", s.name()), &bf.run, 16);
        check_schedules(s, &sp.run);
        check_schedules(s, &bf.run);
        check_steps(s, &sp.run);
        check_steps(s, &bf.run);
        if capacity.is_none() {
            // Without refills a BFS's launch after `l` levels expands the vertices at depth `l`
            // first.
            let frontiers: Vec<u64> = bf.run.steps.iter().map(|st| st.frontier).collect();
            let at_depth: Vec<u64> = bf
                .run
                .steps
                .iter()
                .scan(0u32, |level, st| {
                    let first = *level;
                    *level += st.levels as u32;
                    Some(depth.iter().filter(|&&d| d == first).count() as u64)
                })
                .collect();
            assert_eq!(frontiers, at_depth, "bfs {} frontiers", s.name());
            // Each vertex is pushed at most once per iteration: num_rows slots always suffice.
            assert_eq!((sp.run.retries, bf.run.retries), (0, 0), "{}", s.name());
            let (spu, bfu) = (
                sssp_unchecked(&dev, &dg, source, s).unwrap(),
                bfs_unchecked(&dev, &dg, source, s).unwrap(),
            );
            assert_eq!(spu.dist, dist, "sssp_unchecked {}", s.name());
            assert_eq!(bfu.depth, depth, "bfs_unchecked {}", s.name());
            // No error flag to read: the counter alone.
            check_traffic(&format!("sssp_unchecked {}", s.name()), &spu.run, 8);
            check_traffic(&format!("bfs_unchecked {}", s.name()), &bfu.run, 8);
        }
        if capacity == Some(1) && reached > 1 {
            assert!(
                sp.run.retries > 0 || bf.run.retries > 0,
                "{}: a one-slot queue must overflow",
                s.name()
            );
        }
    }
}

/// `run.schedules` accounts for every iteration that did not overflow: under a named schedule,
/// that schedule alone; under `auto`, schedules the traversal kernel was generated for.
fn check_schedules(choice: Choice, run: &Traversal) {
    let counted: usize = run.schedules.iter().map(|(_, n)| n).sum();
    assert!(
        counted <= run.iterations && counted + run.retries >= run.iterations,
        "{}: {:?} over {} iterations and {} refills",
        choice.name(),
        run.schedules,
        run.iterations,
        run.retries
    );
    for (name, _) in &run.schedules {
        match choice {
            Choice::Named(s) => assert_eq!(name, s.name()),
            Choice::Auto => assert!(
                name == BLOCK_LEVELS || schedules().iter().any(|s| s.name() == name),
                "auto ran {name}"
            ),
        }
    }
}

/// `run.steps` holds one record per launch, whose levels add up to the iterations (one a
/// launch but for [`BLOCK_LEVELS`]), and the iterations that did not overflow ran the schedules
/// `run.schedules` counts; the first frontier is the source alone.
fn check_steps(choice: Choice, run: &Traversal) {
    let levels: usize = run.steps.iter().map(|st| st.levels).sum();
    assert_eq!(levels, run.iterations, "{}: steps", choice.name());
    for st in &run.steps {
        assert!(
            st.levels == 1 || st.schedule == BLOCK_LEVELS && st.levels > 1,
            "{}: {st:?}",
            choice.name()
        );
    }
    if let Some(first) = run.steps.first() {
        assert_eq!(first.frontier, 1, "{}: the first frontier", choice.name());
    }
    for (name, n) in &run.schedules {
        let ran: usize = run
            .steps
            .iter()
            .filter(|st| &st.schedule == name)
            .map(|st| st.levels)
            .sum();
        assert!(
            ran >= *n && ran <= n + run.retries,
            "{}: {name} counted {n}, ran in {ran} steps ({} refills)",
            choice.name(),
            run.retries
        );
    }
}

#[test]
fn nasty_graphs_match_references_with_any_capacity() {
    for (i, &(n, parts)) in [(1, 1), (2, 1), (37, 1), (120, 3), (250, 5)]
        .iter()
        .enumerate()
    {
        let seed = 0x5eed + i as u64;
        let g = nasty_graph(n, parts, 3, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..2 {
            let source = rng.random_range(0..n);
            check(&g, source, None);
            check(&g, source, Some(3));
        }
    }
}

/// Vertices 1..=k all reach `t` in the same iteration along paths whose lengths fall with the
/// vertex, so (in lane order) every relaxation of `t` improves it; `t` must still enter the
/// next frontier once, or its out-edge would be relaxed once per copy. Exact counts for every
/// schedule: 4 frontiers ({0}, {1..=k}, {t}, {z}) and 2k + 1 relaxed edges.
#[test]
fn sssp_pushes_each_vertex_once_per_iteration() {
    let k = 30;
    let (t, z) = (k + 1, k + 2);
    let triplets: Vec<(usize, usize, f32)> = (1..=k)
        .map(|i| (0, i, 1.0))
        .chain((1..=k).map(|i| (i, t, (k - i + 1) as f32)))
        .chain([(t, z, 1.0)])
        .collect();
    let g = Csr::from_triplets(k + 3, k + 3, triplets).unwrap();
    let dev = device();
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    for &s in schedules() {
        let r = sssp(&dev, &dg, 0, s).unwrap();
        assert_eq!(r.dist, dijkstra(&g, 0), "{}", s.name());
        assert_eq!(
            (r.run.iterations, r.run.edges),
            (4, 2 * k as u64 + 1),
            "{}: iterations and relaxed edges",
            s.name()
        );
    }
}

#[test]
fn tiny_queue_recovers_from_overflow() {
    // A star: the source's 40 neighbours all improve in the first iteration.
    let triplets: Vec<(usize, usize, f32)> = (1..41)
        .map(|v| (0, v, 1.0))
        .chain((1..40).map(|v| (v, v + 1, 0.0)))
        .collect();
    let g = Csr::from_triplets(41, 41, triplets).unwrap();
    check(&g, 0, Some(1));
    check(&random_graph(300, 3, 4, 11), 5, Some(1));
}

#[test]
fn bad_source_is_an_error() {
    let dev = device();
    let g = random_graph(10, 1, 2, 1);
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    assert!(matches!(
        sssp(&dev, &dg, 10, Schedule::ThreadMapped),
        Err(Error::Shape(_))
    ));
    assert!(matches!(
        bfs(&dev, &dg, 99, Schedule::ThreadMapped),
        Err(Error::Shape(_))
    ));
    let rect = DeviceCsr::upload(&dev, &Csr::<f32>::empty(3, 4).unwrap()).unwrap();
    assert!(matches!(
        sssp(&dev, &rect, 0, Schedule::ThreadMapped),
        Err(Error::Shape(_))
    ));
}

#[test]
fn isolated_source_finishes_in_one_iteration() {
    let dev = device();
    let g = Csr::<f32>::empty(5, 5).unwrap();
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    let r = sssp(&dev, &dg, 2, Schedule::WarpMapped).unwrap();
    assert_eq!((r.run.iterations, r.run.edges), (1, 0));
    assert_eq!(
        r.dist,
        vec![
            f32::INFINITY,
            f32::INFINITY,
            0.0,
            f32::INFINITY,
            f32::INFINITY
        ]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn drivers_match_references(n in 1usize..400, parts in 1usize..4, degree in 0usize..6, seed in any::<u64>()) {
        let g = random_graph(n, parts, degree, seed);
        let source = (seed as usize) % n;
        check(&g, source, None);
    }
}

/// A row 20 times the mean is no hub: `step_schedule` keeps the rule's pick for short rows
/// (`thread_mapped`) at every frontier length; past the rule's heavy-tail ratio (32 times the
/// mean) it splits every step (`multi_phase`).
#[test]
fn step_schedule_splits_only_where_the_rule_sees_a_heavy_tail() {
    let dev = device();
    let n = 10_000;
    for (longest, want) in [(40, Schedule::ThreadMapped), (2_000, Schedule::MultiPhase)] {
        let triplets: Vec<(usize, usize, f32)> = (1..=longest)
            .map(|v| (0, v, 1.0))
            .chain((1..n).flat_map(|u| [(u, (u + 1) % n, 1.0), (u, (3 * u) % n, 1.0)]))
            .collect();
        let g = Csr::from_triplets(n, n, triplets).unwrap();
        let dg = DeviceCsr::upload(&dev, &g).unwrap();
        for len in [1, 100, 5_000] {
            assert_eq!(
                step_schedule(&dg, len),
                want,
                "longest {longest}, {len} vertices"
            );
        }
    }
}

/// `auto` runs `step_schedule`'s pick for each step's frontier and measures nothing (the bytes
/// of a named schedule): on a graph of short rows with one hub of 50 000 edges every step runs
/// `multi_phase` (any frontier may hold the hub), on the same rows without the hub
/// `thread_mapped`, and on rows of 16 a warp per row; both run the frontiers of at most
/// `block_levels_limit` vertices in one block instead, several levels a launch, but never on the
/// graph with the hub. Depths and distances match the references.
#[test]
fn auto_runs_the_step_schedule_of_each_frontier() {
    let n = 60_000;
    let ring = |u: usize| [(u, (u + 1) % n, 2.0), (u, (2 * u) % n, 3.0)];
    let hub: Vec<(usize, usize, f32)> = (1..=50_000)
        .map(|v| (0, v, 1.0))
        .chain((1..n).flat_map(ring))
        .collect();
    let short: Vec<(usize, usize, f32)> = (0..n).flat_map(ring).collect();
    let sixteen: Vec<(usize, usize, f32)> = (0..4_000)
        .flat_map(|u| (1..=16).map(move |k| (u, (u * 7 + k * 131) % 4_000, k as f32)))
        .collect();
    let dev = device();
    for (what, rows, triplets, want) in [
        ("hub", n, hub, Schedule::MultiPhase),
        ("short rows", n, short, Schedule::ThreadMapped),
        ("rows of 16", 4_000, sixteen, Schedule::WarpMapped),
    ] {
        let g = Csr::from_triplets(rows, rows, triplets).unwrap();
        let dg = DeviceCsr::upload(&dev, &g).unwrap();
        let source = 1;
        let bf = bfs(&dev, &dg, source, Choice::Auto).unwrap();
        assert_eq!(bf.depth, bfs_levels(&g, source), "{what}");
        let sp = sssp(&dev, &dg, source, Choice::Auto).unwrap();
        assert_eq!(sp.dist, dijkstra(&g, source), "{what}");
        // Both expand the frontiers up to the limit in one block, after the first.
        let limit = block_levels_limit(&dg);
        for run in [&bf.run, &sp.run] {
            check_schedules(Choice::Auto, run);
            check_traffic(what, run, 16);
            for (i, st) in run.steps.iter().enumerate() {
                let pick = if i > 0 && st.frontier <= limit {
                    BLOCK_LEVELS
                } else {
                    step_schedule(&dg, st.frontier).name()
                };
                assert_eq!(st.schedule, pick, "{what}, step {i}");
            }
            let large = |st: &&lb::algorithms::Step| st.frontier >= 1_000 && st.frontier > limit;
            let big = run.steps.iter().filter(large).count();
            assert!(big > 0, "{what}: a frontier of 1 000 vertices or more");
            assert!(
                run.steps
                    .iter()
                    .filter(large)
                    .all(|st| st.schedule == want.name()),
                "{what}: {:?}",
                run.schedules
            );
        }
        for run in [&bf.run, &sp.run] {
            let fused = run.steps.iter().filter(|st| st.schedule == BLOCK_LEVELS);
            let most = fused.map(|st| st.levels).max().unwrap_or(0);
            match what {
                "hub" => assert_eq!(most, 0, "{what}: a hub is never one thread's"),
                _ => assert!(most > 1, "{what}: no launch ran several levels"),
            }
        }
    }
}

/// A grid of 80 × 50 vertices (rows of two to four atoms) is 129 levels from a corner, none
/// wider than 50 vertices: `auto`'s BFS and SSSP run the source's step as a schedule's kernel
/// and every later level in one launch of one block, where a named schedule launches once a
/// level.
#[test]
fn auto_runs_a_long_diameter_in_one_block() {
    let (w, h) = (80usize, 50usize);
    let at = |x: usize, y: usize| y * w + x;
    let mut triplets = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let mut link = |v: usize| triplets.push((at(x, y), v, 1.0));
            if x + 1 < w {
                link(at(x + 1, y));
            }
            if x > 0 {
                link(at(x - 1, y));
            }
            if y + 1 < h {
                link(at(x, y + 1));
            }
            if y > 0 {
                link(at(x, y - 1));
            }
        }
    }
    let g = Csr::from_triplets(w * h, w * h, triplets).unwrap();
    let dev = device();
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    assert_eq!(block_levels_limit(&dg), 2_048);
    let want = bfs_levels(&g, 0);
    let auto = bfs(&dev, &dg, 0, Choice::Auto).unwrap();
    assert_eq!(auto.depth, want);
    assert_eq!(auto.run.iterations, w + h - 1);
    let launched: Vec<(&str, usize)> = auto
        .run
        .steps
        .iter()
        .map(|st| (st.schedule.as_str(), st.levels))
        .collect();
    assert_eq!(
        launched,
        [("thread_mapped", 1), (BLOCK_LEVELS, w + h - 2)],
        "{:?}",
        auto.run.schedules
    );
    check_traffic("auto on a grid", &auto.run, 16);
    check_steps(Choice::Auto, &auto.run);
    let named = bfs(&dev, &dg, 0, Schedule::ThreadMapped).unwrap();
    assert_eq!(named.depth, want);
    assert_eq!(named.run.steps.len(), w + h - 1);
    assert_eq!(named.run.edges, auto.run.edges);
    // Unit weights: SSSP's distances are the depths, and its levels the BFS's.
    let sp = sssp(&dev, &dg, 0, Choice::Auto).unwrap();
    let depths: Vec<f32> = want.iter().map(|&d| d as f32).collect();
    assert_eq!(sp.dist, depths);
    let launched: Vec<&str> = sp.run.steps.iter().map(|st| st.schedule.as_str()).collect();
    assert_eq!(launched, ["thread_mapped", BLOCK_LEVELS]);
    check_traffic("sssp auto on a grid", &sp.run, 16);
    check_steps(Choice::Auto, &sp.run);
}
