use lb::prelude::*;

// A half-precision instantiation computes in `f32`: integer operators on its values, and its
// values where an index is needed, are the errors they are for `f32`, said once.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", types = "f16, bf16")]
fn bits<T>(a: &Csr<T>, x: &[T], #[atom] nz: usize) -> T {
    (a.values[nz] & T::MAX) * x[a.values[nz]]
}

fn main() {}
