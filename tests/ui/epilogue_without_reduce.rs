//! `epilogue` without `reduce`: there is no reduced value to finish.
use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", epilogue = |row, sum| sum)]
fn scale(a: &Csr<f32>, y: &mut [f32], #[atom] nz: usize) {
    y[nz] = a.values[nz];
}

fn main() {}
