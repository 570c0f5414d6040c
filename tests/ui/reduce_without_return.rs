use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, out: &mut [f32], #[tile] row: usize, #[atom] nz: usize) {
    out[row] += a.values[nz];
}

fn main() {}
