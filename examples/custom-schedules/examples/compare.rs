//! The three searches against lb's built-in work-oriented schedules on SpMV: each schedule's
//! median kernel time over `--reps` launches (after one warm-up launch), checked against an f64
//! reference. On a GPU the matrices have the medium corpus's shapes (lb-bench's `--scale
//! medium`, regenerated with lb's generators); on the simulator they are 100× smaller and only
//! the results are checked (it times nothing).
//!
//! `cargo run --release -p lb-custom-schedules --example compare [-- --reps N]`

use lb::prelude::*;
use lb::schedule::UserSchedule;
use lb_custom_schedules::ALL;

#[load_balanced(
    schedule = "merge_path, nonzero_split, two_phase, multi_phase",
    reduce = "sum",
    output = "y"
)]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// One row of 2 000 000 atoms (`scale` divides it) among one-atom rows.
fn giant_row(rows: usize, giant: usize) -> lb::Result<Csr<f32>> {
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0);
    let mut cols = Vec::new();
    for r in 0..rows {
        let len = if r == rows / 2 { giant } else { 1 };
        cols.extend((0..len).map(|i| ((r * 7919 + i * 104_729) % rows) as u32));
        offsets.push(cols.len());
    }
    let values = lb::generate::random_vector(cols.len(), 9);
    Csr::new(rows, rows, offsets, cols, values)
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// `Err` unless `y` is within 1e-4 of the f64 product, relative to each row's magnitude.
fn verify(a: &Csr<f32>, x: &[f32], y: &[f32], what: &str) -> lb::Result<()> {
    for (row, &got) in y.iter().enumerate() {
        let terms = a
            .row(row)
            .map(|nz| f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]));
        let (sum, mag) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
        if (f64::from(got) - sum).abs() > 1e-4 * mag.max(1e-30) {
            return Err(lb::Error::Shape(format!(
                "{what}: row {row}: {got} against {sum}"
            )));
        }
    }
    Ok(())
}

fn main() -> lb::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20usize)
        .max(1);
    let dev = Device::default();
    let s = if dev.is_gpu() { 1 } else { 100 };
    let matrices = [
        (
            "regular-250000x4",
            lb::generate::uniform(250_000 / s, 250_000 / s, 4, 1),
        ),
        (
            "regular-250000x16",
            lb::generate::uniform(250_000 / s, 250_000 / s, 16, 2),
        ),
        (
            "power_law-500000",
            lb::generate::power_law(500_000 / s, 500_000 / s, 8.0, 3),
        ),
        (
            "giant_row-1000000",
            giant_row(1_000_000 / s, 2_000_000 / s)?,
        ),
    ];
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
        for &s in spmv::SCHEDULES {
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
