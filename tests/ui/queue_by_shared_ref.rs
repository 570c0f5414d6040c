use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped")]
fn visit(g: &Csr<f32>, next: &Queue, #[atom] e: usize) {
    next.push(g.col_indices[e]);
}

fn main() {}
