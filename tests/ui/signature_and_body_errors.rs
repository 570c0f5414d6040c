use lb::prelude::*;

// Two independent mistakes, one in the signature and one in the body: both are reported, and
// the body's uses of the bad parameter are not reported again.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &Vec<f32>, #[atom] nz: usize) -> f32 {
    let mut acc = a.values[nz] * x[a.col_indices[nz] as usize];
    acc = acc.cbrt();
    acc
}

fn main() {}
