use lb::prelude::*;

// `f16` and `bf16` are storage types: a scalar cannot be one, the body computes in `f32` (so it
// never names them), a half-precision `&mut` slice is only stored to, and it takes no atomics.
#[load_balanced(schedule = "thread_mapped")]
fn scale(a: &Csr<f16>, s: f16, y: &mut [bf16], z: &mut [f16], #[atom] nz: usize) {
    let v: f16 = a.values[nz];
    y[nz] += v;
    atomic_add(&mut z[0], 1.0);
}

fn main() {}
