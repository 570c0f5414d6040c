use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
fn relax(g: &Csr<f32>, frontier: &[u32], next: &mut [u32], #[atom] e: usize) {
    next.push(g.col_indices[e]);
}

fn main() {}
