use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", types = "f32, f8")]
fn spmv<T>(a: &Csr<T>, x: &[T], #[atom] nz: usize) -> T {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

fn main() {}
