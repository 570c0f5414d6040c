use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
fn relax(g: &Csr<f32>, frontier: &[u64], dist: &mut [f32], #[tile] u: usize, #[atom] e: usize) {
    let v = g.col_indices[e] as usize;
    atomic_min(&mut dist[v], dist[u] + g.values[e]);
}

fn main() {}
