use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "c")]
fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

fn main() {}
