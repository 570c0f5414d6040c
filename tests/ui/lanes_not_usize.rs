use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "c", lanes = "k")]
fn spmm(a: &Csr<f32>, b: &[f32], k: u32, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k as usize + j]
}

fn main() {}
