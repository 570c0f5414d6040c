use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped")]
fn scale(a: &Csr<f32>, y: &[f32], #[tile] row: usize, #[atom] nz: usize) {
    y[row] = a.values[nz];
}

fn main() {}
