//! `iteration_factor = 0`: multi_phase needs at least one round per partition search.
use lb::prelude::*;

#[load_balanced(schedule = "multi_phase", reduce = "sum", output = "y", iteration_factor = 0)]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
