//! Sliced ELL against CSR on SpMV, under the same built-in schedules: each pair's median kernel
//! time over `--reps` launches (after one warm-up launch), both checked against an f64
//! reference, with the format's padding (slots stored over nonzeros). On a GPU the matrices have
//! the medium corpus's shapes (regenerated with lb's generators); on the simulator they are 100×
//! smaller and only the results are checked (it times nothing).
//!
//! `cargo run --release -p lb-custom-schedules --example ell_vs_csr [-- --reps N]`

mod common;

use common::{matrices, median, reps, spmv, verify};
use lb::prelude::*;
use lb_custom_schedules::ell::{sell_spmv, DeviceSlicedEll, SlicedEll};

/// The schedules compared: one per family of lb's built-ins.
const SCHEDULES: [Schedule; 4] = [
    Schedule::ThreadMapped,
    Schedule::WarpMapped,
    Schedule::MergePath,
    Schedule::Lrb,
];

/// The median time (µs) of `reps` launches after a warm-up one.
fn time(reps: usize, mut launch: impl FnMut() -> lb::Result<Launch>) -> lb::Result<f32> {
    let mut times = Vec::new();
    for i in 0..=reps {
        let l = launch()?;
        if i > 0 {
            times.push(l.elapsed_ms.unwrap_or(0.0) * 1e3);
        }
    }
    Ok(median(times))
}

fn main() -> lb::Result<()> {
    let reps = reps();
    let dev = Device::default();
    let matrices = matrices(&dev)?;
    println!("device: {}; median of {reps} launches, µs", dev.name());
    if dev.is_gpu() {
        println!(
            "{:<20} {:>8} {:<15} {:>9} {:>9} {:>8}",
            "matrix", "padding", "schedule", "CSR", "SELL", "SELL/CSR"
        );
    }
    for (name, a) in &matrices {
        let x = lb::generate::random_vector(a.num_cols, 4);
        let ell = SlicedEll::from_csr(a)?;
        let padding = ell.slots() as f64 / a.nnz().max(1) as f64;
        let (da, de, dx) = (
            DeviceCsr::upload(&dev, a)?,
            DeviceSlicedEll::upload(&dev, &ell)?,
            dev.upload(&x)?,
        );
        let mut dy = dev.zeros::<f32>(a.num_rows)?;
        let (so, c, v) = (de.slice_offsets(), de.cols(), de.values());
        for schedule in SCHEDULES {
            let csr = time(reps, || {
                spmv::launch_with(&dev, schedule, &da, &dx, &mut dy)
            })?;
            verify(a, &x, &dev.download(&dy)?, schedule.name())?;
            let sell = time(reps, || {
                sell_spmv::launch_with(&dev, schedule, &de, so, c, v, &dx, &mut dy)
            })?;
            verify(a, &x, &dev.download(&dy)?, schedule.name())?;
            if dev.is_gpu() {
                println!(
                    "{name:<20} {padding:>8.2} {:<15} {csr:>9.1} {sell:>9.1} {:>8.2}",
                    schedule.name(),
                    sell / csr
                );
            }
        }
        if !dev.is_gpu() {
            println!("{name:<20} verified, padding {padding:.2}");
        }
    }
    Ok(())
}
