use lb::prelude::*;

// One mistake in the body gives one error: the function and its module still exist with their
// signatures, so the uses in `main` do not add errors of their own.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz]]
}

fn main() {
    let a = Csr::new(1, 1, vec![0, 1], vec![0], vec![2.0f32]).unwrap();
    let mut y = [0.0f32];
    spmv::cpu(&a, &[1.0], &mut y);
    let _ = spmv(&a, &[1.0], 0, 0);
    let _ = (spmv::PTX, spmv::PLANS, spmv::SCHEDULES, spmv::DEFAULT);
    let dev = Device::simulator();
    let _ = spmv::launch;
    let _ = spmv::launch_with(&dev, spmv::DEFAULT, &DeviceCsr::upload(&dev, &a).unwrap(), &dev.upload(&[1.0f32]).unwrap(), &mut dev.zeros::<f32>(1).unwrap());
}
