use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    match nz {
        0 => 1.0,
        _ => a.values[nz],
    }
}

fn main() {}
