//! An epilogue's body is checked like the kernel's: an unknown name, a value of the wrong type,
//! and a store (an epilogue only computes the value stored).
use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, sum| damping * sum)]
fn unknown(a: &Csr<f32>, d: f32, #[atom] nz: usize) -> f32 {
    a.values[nz] * d
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, sum| row)]
fn wrong_value(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, sum| { w[row] = sum; sum })]
fn stores(a: &Csr<f32>, w: &mut [f32], #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
