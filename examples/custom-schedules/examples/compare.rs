//! The three searches against lb's built-in work-oriented schedules on SpMV: each schedule's
//! median kernel time over `--reps` launches (after one warm-up launch), checked against an f64
//! reference. On a GPU the matrices have the medium corpus's shapes (lb-bench's `--scale
//! medium`, regenerated with lb's generators); on the simulator they are 100× smaller and only
//! the results are checked (it times nothing).
//!
//! `cargo run --release -p lb-custom-schedules --example compare [-- --reps N]`

mod common;

use common::{matrices, median, reps, spmv, verify};
use lb::prelude::*;
use lb::schedule::UserSchedule;
use lb_custom_schedules::ALL;

/// lb's built-in work-oriented schedules, the searches' family.
const WORK_ORIENTED: [Schedule; 4] = [
    Schedule::MergePath,
    Schedule::NonzeroSplit,
    Schedule::TwoPhase,
    Schedule::MultiPhase,
];

fn main() -> lb::Result<()> {
    let reps = reps();
    let dev = Device::default();
    let matrices = matrices(&dev)?;
    println!("device: {}; median of {reps} launches, µs", dev.name());
    println!(
        "{:<20} {:<18} {:>10} {:>8}",
        "matrix", "schedule", "µs", "× best"
    );
    for (name, a) in &matrices {
        let x = lb::generate::random_vector(a.num_cols, 4);
        let (da, dx) = (DeviceCsr::upload(&dev, a)?, dev.upload(&x)?);
        let mut dy = dev.zeros::<f32>(a.num_rows)?;
        let mut rows: Vec<(String, f32)> = Vec::new();
        for s in WORK_ORIENTED {
            let mut times = Vec::new();
            for i in 0..=reps {
                let l = spmv::launch_with(&dev, s, &da, &dx, &mut dy)?;
                if i > 0 {
                    times.push(l.elapsed_ms.unwrap_or(0.0) * 1e3);
                }
            }
            verify(a, &x, &dev.download(&dy)?, s.name())?;
            rows.push((s.name().to_string(), median(times)));
        }
        for s in ALL {
            let mut times = Vec::new();
            for i in 0..=reps {
                let l = spmv::launch_custom(&dev, s, &da, &dx, &mut dy)?;
                if i > 0 {
                    times.push(l.elapsed_ms.unwrap_or(0.0) * 1e3);
                }
            }
            verify(a, &x, &dev.download(&dy)?, UserSchedule::name(s))?;
            rows.push((UserSchedule::name(s).to_string(), median(times)));
        }
        if !dev.is_gpu() {
            println!("{name:<20} verified under {} schedules", rows.len());
            continue;
        }
        let best = rows.iter().map(|r| r.1).fold(f32::INFINITY, f32::min);
        for (schedule, us) in rows {
            println!("{name:<20} {schedule:<18} {us:>10.1} {:>8.2}", us / best);
        }
    }
    Ok(())
}
