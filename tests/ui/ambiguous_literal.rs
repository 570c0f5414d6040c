use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn scaled(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    let two = 2.0;
    a.values[nz] * two.sqrt()
}

fn main() {}
