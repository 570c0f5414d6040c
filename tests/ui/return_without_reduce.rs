use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped")]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
