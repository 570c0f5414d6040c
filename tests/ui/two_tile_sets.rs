use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn add(a: &Csr<f32>, b: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz] + b.values[nz]
}

fn main() {}
