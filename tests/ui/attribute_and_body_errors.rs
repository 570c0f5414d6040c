use lb::prelude::*;

// Independent mistakes in the attribute and in the body are reported in one compile, each once.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", outptu = "y")]
fn spmv(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    let s = a.values[nz].cbrt();
    a.values[nz] + s
}

fn main() {}
