use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", types = "f32, f64")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

fn main() {}
