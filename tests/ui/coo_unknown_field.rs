use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Coo<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.row_offsets[row]]
}

fn main() {}
