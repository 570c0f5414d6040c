use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    let c = a.col_indices[nz];
    let w = match c {
        0 => 1.0f32,
        1..=4 => 2.0,
    };
    let v = match a.values[nz] {
        _ => 1.0f32,
    };
    let s = match c {
        Some(k) => k,
        _ => 0,
    };
    a.values[nz] * x[c as usize] * w * v * s as f32
}

fn main() {}
