//! A tuning key whose schedule is not generated points at the key.
use lb::prelude::*;

#[load_balanced(schedule = "merge_path", reduce = "sum", output = "y", iteration_factor = 2)]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
