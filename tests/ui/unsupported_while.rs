use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    let mut i = 0usize;
    while i < 3 {
        i += 1;
    }
    a.values[nz] * x[i]
}

fn main() {}
