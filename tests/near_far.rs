//! Near-Far SSSP (`lb::algorithms::sssp_near_far`) against Dijkstra under every schedule and
//! several Δ: on graphs with disconnected parts, zero-weight edges, self-loops, duplicate edges
//! and isolated vertices, with integer and fractional weights, weights so large that Δ is lost
//! to rounding, one vertex, no edges and a star; its work (a vertex relaxed once when Δ is below
//! every nonzero weight), its traffic (16 bytes per step) and its errors.

mod common;
#[path = "common/graphs.rs"]
mod graphs;

use graphs::{check_traffic, nasty_graph};
use lb::algorithms::{dijkstra, schedules, sssp, sssp_near_far, Delta, NearFarResult, WINDOW};
use lb::prelude::*;
use lb::Error;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every schedule with `delta` from `source`: Dijkstra's distances exactly, at most 16 bytes
/// per step and nothing uploaded. Returns the runs.
fn check(g: &Csr<f32>, source: usize, delta: Delta, few: bool) -> Vec<NearFarResult> {
    let dev = Device::default();
    let dg = DeviceCsr::upload(&dev, g).unwrap();
    let want = dijkstra(g, source);
    let all = schedules();
    let chosen: &[Schedule] = if few {
        &[Schedule::ThreadMapped, Schedule::MergePath, Schedule::Lrb]
    } else {
        all
    };
    chosen
        .iter()
        .map(|&s| {
            let what = format!("near-far {} {delta:?}", s.name());
            let r = sssp_near_far(&dev, &dg, source, s, delta).unwrap();
            assert_eq!(r.dist, want, "{what}");
            check_traffic(&what, &r.run, 16);
            assert!(
                r.divisions < r.run.iterations.max(1),
                "{what}: divisions are steps"
            );
            r
        })
        .collect()
}

/// The out-degrees of the vertices `dist` reaches.
fn reached_edges(g: &Csr<f32>, dist: &[f32]) -> u64 {
    (0..g.num_rows)
        .filter(|&u| dist[u].is_finite())
        .map(|u| g.row(u).len() as u64)
        .sum()
}

#[test]
fn nasty_graphs_match_dijkstra_for_every_delta() {
    for (i, &(n, parts)) in [(1, 1), (2, 1), (37, 1), (120, 3), (250, 5)]
        .iter()
        .enumerate()
    {
        let seed = 0x4ea2 + i as u64;
        let g = nasty_graph(n, parts, 3, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let source = rng.random_range(0..n);
        for delta in [Delta::FromWeights, Delta::Fixed(1.0), Delta::Fixed(2.5)] {
            check(&g, source, delta, false);
        }
        for delta in [Delta::Fixed(f32::INFINITY), Delta::Fixed(1e-3)] {
            check(&g, source, delta, true);
        }
    }
}

/// With integer weights and Δ = 1 every phase holds one distance, so a vertex is relaxed once,
/// with its final distance: the relaxed edges are exactly the reached vertices' out-degrees
/// (plain relaxation may relax a vertex once per improvement).
#[test]
fn unit_delta_relaxes_each_vertex_once() {
    let g = nasty_graph(300, 2, 4, 0xdead);
    let source = (0..g.num_rows).find(|&u| g.row(u).len() > 2).unwrap();
    for r in check(&g, source, Delta::Fixed(1.0), false) {
        let reached = reached_edges(&g, &r.dist);
        assert!(reached > 100, "{reached} edges reached");
        assert_eq!(r.run.edges, reached);
        assert!(r.divisions > 2, "{} divisions", r.divisions);
    }
}

/// Δ = ∞ is one phase: the steps of plain frontier relaxation, no division.
#[test]
fn infinite_delta_is_plain_relaxation() {
    let g = nasty_graph(200, 1, 3, 17);
    let dev = Device::default();
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    for &s in &[
        Schedule::ThreadMapped,
        Schedule::WarpMapped,
        Schedule::MergePath,
    ] {
        let plain = sssp(&dev, &dg, 3, s).unwrap();
        let nf = sssp_near_far(&dev, &dg, 3, s, Delta::Fixed(f32::INFINITY)).unwrap();
        assert_eq!(nf.dist, plain.dist, "{}", s.name());
        assert_eq!(nf.divisions, 0, "{}", s.name());
        assert_eq!(
            (nf.run.iterations, nf.run.edges),
            (plain.run.iterations, plain.run.edges),
            "{}",
            s.name()
        );
    }
}

/// Fractional weights: the f32 sums round, and Near-Far reaches Dijkstra's rounded fixed point.
#[test]
fn fractional_weights_match_dijkstra() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut g = nasty_graph(400, 2, 5, 99);
    g.values
        .iter_mut()
        .for_each(|w| *w = rng.random_range(0.0f32..1.0) * rng.random_range(0.0f32..30.0));
    for delta in [Delta::FromWeights, Delta::Fixed(0.37)] {
        check(&g, 0, delta, false);
    }
}

/// Weights of 1e8 with Δ = 1: `split + Δ` rounds back to `split`, and the divisions still make
/// progress (the far pile's least distance joins the near pile).
#[test]
fn delta_lost_to_rounding_still_finishes() {
    let n = 40;
    let triplets: Vec<(usize, usize, f32)> = (0..n - 1)
        .flat_map(|u| [(u, u + 1, 1e8), (u, (u + 7) % n, 3e8)])
        .collect();
    let g = Csr::from_triplets(n, n, triplets).unwrap();
    for r in check(&g, 0, Delta::Fixed(1.0), true) {
        // Each distinct distance is a phase of its own.
        let mut distinct: Vec<u32> = r.dist.iter().map(|d| d.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            r.divisions + 1 >= distinct.len(),
            "{} divisions",
            r.divisions
        );
    }
}

#[test]
fn edge_cases() {
    check(
        &Csr::<f32>::empty(1, 1).unwrap(),
        0,
        Delta::FromWeights,
        false,
    );
    let r = check(
        &Csr::<f32>::empty(7, 7).unwrap(),
        3,
        Delta::FromWeights,
        true,
    );
    assert!(r
        .iter()
        .all(|r| r.delta == f32::INFINITY && r.run.iterations == 1));
    // A star with weights 1..=3 out of the hub and back: one near pile of thousands.
    let leaves = 3000;
    let triplets: Vec<(usize, usize, f32)> = (1..=leaves)
        .flat_map(|v| [(0, v, (v % 3 + 1) as f32), (v, 0, 1.0)])
        .collect();
    let star = Csr::from_triplets(leaves + 1, leaves + 1, triplets).unwrap();
    check(&star, 0, Delta::Fixed(1.0), true);
    check(&star, 17, Delta::FromWeights, true);
    // Every weight zero: Δ from the weights is infinite, one phase.
    let mut zero = nasty_graph(60, 1, 3, 5);
    zero.values.iter_mut().for_each(|w| *w = 0.0);
    let r = check(&zero, 0, Delta::FromWeights, true);
    assert!(r
        .iter()
        .all(|r| r.delta == f32::INFINITY && r.divisions == 0));
}

#[test]
fn delta_from_weights_is_32_mean_weight_over_mean_degree() {
    // 4 vertices, 8 edges of weight 3: mean degree 2, Δ = 32 · 3 / 2.
    let triplets: Vec<(usize, usize, f32)> = (0..4)
        .flat_map(|u| [(u, (u + 1) % 4, 3.0), (u, (u + 2) % 4, 3.0)])
        .collect();
    let g = Csr::from_triplets(4, 4, triplets).unwrap();
    let r = check(&g, 0, Delta::FromWeights, true);
    assert!(r.iter().all(|r| r.delta == 48.0));
    let r = check(&g, 0, Delta::Scaled(2.0), true);
    assert!(r.iter().all(|r| r.delta == 3.0));
    assert_eq!(WINDOW, 5);
}

#[test]
fn bad_inputs_are_errors() {
    let dev = Device::default();
    let g = nasty_graph(10, 1, 2, 1);
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    let s = Schedule::ThreadMapped;
    for bad in [0.0, -1.0, f32::NAN, f32::NEG_INFINITY] {
        match sssp_near_far(&dev, &dg, 0, s, Delta::Fixed(bad)) {
            Err(Error::Shape(m)) => assert!(m.contains("positive"), "{m}"),
            other => panic!("Δ = {bad}: {other:?}"),
        }
    }
    for bad in [0.0, -2.0, f32::NAN, f32::INFINITY] {
        match sssp_near_far(&dev, &dg, 0, s, Delta::Scaled(bad)) {
            Err(Error::Shape(m)) => assert!(m.contains("positive and finite"), "{m}"),
            other => panic!("factor {bad}: {other:?}"),
        }
    }
    assert!(matches!(
        sssp_near_far(&dev, &dg, 10, s, Delta::default()),
        Err(Error::Shape(_))
    ));
    let rect = DeviceCsr::upload(&dev, &Csr::<f32>::empty(3, 4).unwrap()).unwrap();
    assert!(matches!(
        sssp_near_far(&dev, &rect, 0, s, Delta::default()),
        Err(Error::Shape(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn matches_dijkstra_on_random_graphs(n in 1usize..400, parts in 1usize..4, degree in 0usize..6, delta in 0.1f32..8.0, seed in any::<u64>()) {
        let g = nasty_graph(n, parts, degree, seed);
        check(&g, (seed as usize) % n, Delta::Fixed(delta), true);
    }
}
