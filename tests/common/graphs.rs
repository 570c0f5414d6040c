//! Graphs and checks shared by the graph-app tests (`tests/apps.rs`, `tests/graph_apps.rs`).

use lb::algorithms::Traversal;
use lb::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// An iteration reads its queue counter (8 bytes) and, with the checked kernels, the first
/// word of the error flag (8): `per` bytes, never more, and nothing goes to the device. An
/// overflow adds the refill's launch, with the same reports.
pub fn check_traffic(what: &str, t: &Traversal, per: u64) {
    let launches = (t.iterations + t.retries) as u64;
    // A launch of several BFS levels in one block reads its outcome once for all of them.
    let reads = if t.steps.is_empty() {
        launches
    } else {
        (t.steps.len() + t.retries) as u64
    };
    assert_eq!(t.bytes_to_device, 0, "{what}: an iteration uploads nothing");
    assert!(
        t.bytes_to_host >= 8 * reads && t.bytes_to_host <= per * launches,
        "{what}: {} bytes to the host over {} iterations and {} refills",
        t.bytes_to_host,
        t.iterations,
        t.retries
    );
    if t.retries == 0 {
        assert!(
            t.bytes_per_iteration() <= per as f64,
            "{what}: {}",
            t.bytes_per_iteration()
        );
    }
    assert!(t.wall_ms > 0.0, "{what}: wall time");
    if let Some(ms) = t.elapsed_ms {
        assert!(
            f64::from(ms) <= t.wall_ms,
            "{what}: kernel time within wall time"
        );
    }
}

/// A graph of `n` vertices whose edges hold every case the drivers must survive: self-loops,
/// the same edge several times with different weights (rows unsorted, as `Csr::new` allows),
/// isolated vertices (no edge in or out), and targets confined to `parts` blocks so some
/// vertices are unreachable; about `degree` out-edges per vertex. Weights 0..=5, integers, so f32 sums are exact.
pub fn nasty_graph(n: usize, parts: usize, degree: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block = n.div_ceil(parts.clamp(1, n.max(1))).max(1);
    // About one vertex in five is isolated: no out-edges and never a target.
    let isolated: Vec<bool> = (0..n).map(|_| rng.random_range(0..5) == 0).collect();
    let mut offsets = vec![0usize];
    let (mut cols, mut vals) = (Vec::new(), Vec::new());
    for u in 0..n {
        if !isolated[u] {
            let (lo, hi) = ((u / block) * block, ((u / block + 1) * block).min(n));
            for _ in 0..rng.random_range(0..=2 * degree) {
                let v = match rng.random_range(0..6) {
                    0 => u,
                    _ => rng.random_range(lo..hi),
                };
                if isolated[v] {
                    continue;
                }
                // Sometimes the same edge again, with its own weight.
                for _ in 0..rng.random_range(1..=2) {
                    cols.push(v as u32);
                    vals.push(rng.random_range(0..=5u32) as f32);
                }
            }
        }
        offsets.push(cols.len());
    }
    Csr::new(n, n, offsets, cols, vals).expect("valid graph")
}
