use lb::prelude::*;

// One mistake in a kernel instantiated for three types is one error, not three.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", types = "f32, f64, i64")]
fn spmv<T>(a: &Csr<T>, x: &[T], #[atom] nz: usize) -> T {
    a.values[nz] * x[a.col_indices[nz]]
}

fn main() {}
