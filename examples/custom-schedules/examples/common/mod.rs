//! What the examples share: the SpMV kernel on CSR, the `--reps` argument, the matrices (the medium corpus's shapes on a
//! GPU, 100× smaller on the simulator), the median and the check against an f64 reference.

use lb::prelude::*;

/// y = A·x on CSR, under every built-in schedule.
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// `--reps N` from the command line (20 when absent, at least 1).
pub fn reps() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(20usize)
        .max(1)
}

/// One row of `giant` atoms among one-atom rows.
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

/// The matrices, named: regular rows of 4 and 16, a power law, and one row of 2 000 000 atoms
/// (each size divided by 100 on the simulator).
pub fn matrices(dev: &Device) -> lb::Result<Vec<(&'static str, Csr<f32>)>> {
    let s = if dev.is_gpu() { 1 } else { 100 };
    Ok(vec![
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
    ])
}

pub fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// `Err` unless `y` is within 1e-4 of the f64 product, relative to each row's magnitude.
pub fn verify(a: &Csr<f32>, x: &[f32], y: &[f32], what: &str) -> lb::Result<()> {
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
