use lb::prelude::*;

// A parameter written as a pattern is one mistake: the names it binds are the function's, so
// the body's uses of them are not reported again as unknown names.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn scaled(a: &Csr<f32>, (p, q): (f32, f32), #[atom] nz: usize) -> f32 {
    a.values[nz] * p + q
}

fn main() {}
