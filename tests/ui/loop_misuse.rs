use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    let mut i = 0usize;
    if i == 0 {
        break;
    }
    let v = loop {
        break 2.0f32;
    };
    'rows: while i < 3 {
        i += 1;
        for _j in 0..i {
            continue 'cols;
        }
        break 'rows;
    }
    a.values[nz] * x[i] * v
}

fn main() {}
