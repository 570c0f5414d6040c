use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", types = "f32")]
fn spmv<T, U>(a: &Csr<T>, x: &[U], #[atom] nz: usize) -> T {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

fn main() {}
