//! `iteration_factor = 9`: above the largest factor, 8.
use lb::prelude::*;

#[load_balanced(schedule = "multi_phase", reduce = "sum", output = "y", iteration_factor = 9)]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
