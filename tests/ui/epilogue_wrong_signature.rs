//! An epilogue's parameters: too many for a kernel without lanes, a type that is not the
//! reduced one, a name the kernel already uses, and something that is not a closure.
use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, lane, sum, old| sum)]
fn four(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, sum: f64| sum)]
fn wrong_type(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y",
    epilogue = |row, d| d)]
fn shadows(a: &Csr<f32>, d: f32, #[atom] nz: usize) -> f32 {
    a.values[nz] * d
}

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y", epilogue = "finish")]
fn not_a_closure(a: &Csr<f32>, #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn main() {}
