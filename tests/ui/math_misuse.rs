use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f64>, x: &[f64], #[atom] nz: usize) -> f64 {
    let v = a.values[nz];
    let e = (nz as u32).exp() as f64;
    let bits = (v as f32).count_ones() as f64;
    let p = v.powi(2.0);
    let c = x[nz].clamp(0.0);
    e + bits + p + c
}

fn main() {}
