//! A user crate outside the lb workspace: its own kernel bodies, checked against plain Rust loops.

use lb::prelude::*;

/// The largest absolute weighted entry of each row, scaled: exercises `reduce = "max"`, a scalar,
/// f64 arithmetic, `abs` and an `if` expression.
#[load_balanced(schedule = "thread_mapped", reduce = "max", output = "peak")]
fn row_peak(a: &Csr<f64>, w: &[f64], scale: f64, #[tile] row: usize, #[atom] nz: usize) -> f64 {
    let v = a.values[nz] * w[a.col_indices[nz] as usize];
    if row % 2 == 0 {
        v.abs() * scale
    } else {
        v.abs()
    }
}

/// Counts how often each column is referenced: side effects through atomics, no reduction.
#[load_balanced(schedule = "thread_mapped")]
fn column_histogram(a: &Csr<f64>, counts: &mut [u32], #[atom] nz: usize) {
    atomic_add(&mut counts[a.col_indices[nz] as usize], 1u32);
}

fn main() -> lb::Result<()> {
    let triplets = vec![
        (0, 0, -3.0),
        (0, 2, 1.5),
        (2, 1, 4.0),
        (3, 0, 2.0),
        (3, 1, -0.5),
        (3, 2, 8.0),
    ];
    let a = Csr::<f64>::from_triplets(5, 3, triplets)?;
    let w = [0.5, -2.0, 1.0];
    let scale = 3.0;

    let expected_peak: Vec<f64> = (0..a.num_rows)
        .map(|row| {
            a.row(row)
                .map(|nz| {
                    let v = (a.values[nz] * w[a.col_indices[nz] as usize]).abs();
                    if row % 2 == 0 {
                        v * scale
                    } else {
                        v
                    }
                })
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    let mut expected_counts = vec![0u32; a.num_cols];
    for &c in &a.col_indices {
        expected_counts[c as usize] += 1;
    }

    let dev = Device::default();
    let da = DeviceCsr::upload(&dev, &a)?;
    let dw = dev.upload(&w)?;
    let mut dpeak = dev.zeros::<f64>(a.num_rows)?;
    row_peak::launch(&dev, &da, &dw, scale, &mut dpeak)?;
    let mut dcounts = dev.zeros::<u32>(a.num_cols)?;
    column_histogram::launch(&dev, &da, &mut dcounts)?;

    let peak = dev.download(&dpeak)?;
    let counts = dev.download(&dcounts)?;
    if peak != expected_peak || counts != expected_counts {
        eprintln!("external crate: mismatch on {}\n peak   {peak:?}\n wanted {expected_peak:?}\n counts {counts:?}\n wanted {expected_counts:?}", dev.name());
        std::process::exit(1);
    }
    println!(
        "external crate: row_peak and column_histogram match plain Rust on {}",
        dev.name()
    );
    Ok(())
}
