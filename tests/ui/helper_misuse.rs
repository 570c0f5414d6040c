use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    fn even(n: u32) -> bool {
        if n == 0 {
            return true;
        }
        odd(n - 1)
    }
    fn odd(n: u32) -> bool {
        if n == 0 {
            return false;
        }
        even(n - 1)
    }
    fn scale(v: f32, by: &[f32]) -> f32 {
        v * by[0]
    }
    fn first(v: f32) -> f32 {
        v * a.values[0]
    }
    let e = if even(a.col_indices[nz]) { 1.0f32 } else { 2.0 };
    e * first(x[0]) * scale(1.0, x) * helper_that_is_missing(2.0)
}

fn main() {}
