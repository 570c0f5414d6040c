//! `consolidate` at every level through the macro and `execute`, on `Device::default()`: the
//! simulator here (host fallback), the GPU on a GPU machine (device-side launch where the module
//! links against libcudadevrt). `Launch::notes` must say which path ran; on a GPU set
//! `LB_REQUIRE_DEVICE_LAUNCH=1` to fail unless the device-side launch ran.

use lb::prelude::*;

#[load_balanced(
    schedule = "consolidate(warp), consolidate(block), consolidate",
    reduce = "sum",
    output = "y"
)]
pub fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// Rows of 0–4 atoms with a large row (100+ atoms) every 7th; integer values, so every
/// summation order is exact.
fn matrix(rows: usize, cols: usize) -> Csr<f32> {
    let mut offsets = vec![0usize];
    let mut col_indices = Vec::new();
    for r in 0..rows {
        let k = if r % 7 == 0 { 100 + r % 500 } else { r % 5 };
        col_indices.extend((0..k).map(|j| ((r + j) % cols) as u32));
        offsets.push(col_indices.len());
    }
    let values = (0..col_indices.len()).map(|i| (i % 5) as f32).collect();
    Csr::new(rows, cols, offsets, col_indices, values).unwrap()
}

#[test]
fn every_level_matches_the_cpu_and_says_which_path_ran() {
    let dev = Device::default();
    let (rows, cols) = (5000, 40);
    let a = matrix(rows, cols);
    let x: Vec<f32> = (0..cols).map(|i| i as f32 - 20.0).collect();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let require = std::env::var_os("LB_REQUIRE_DEVICE_LAUNCH").is_some();
    for &s in spmv::SCHEDULES {
        let mut dy = dev.upload(&vec![f32::NAN; rows]).unwrap();
        let launch = spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
        eprintln!("{}: {:?}", launch.schedule, launch.notes);
        assert_eq!(launch.notes.len(), 1, "{:?}", launch.notes);
        let device_side = launch.notes[0].starts_with("device-side launch");
        if device_side {
            assert_eq!(launch.kernels.len(), 1);
            assert!(launch.kernels[0].entry.ends_with("_dl"));
        } else {
            assert!(launch.notes[0].starts_with("host fallback"));
            // Parent and child; the huge-tile split's four kernels are skipped, because no
            // tile of this matrix is huge.
            assert_eq!(launch.kernels.len(), 2, "{:?}", launch.kernels);
            assert!(!dev.is_gpu() || !require, "{:?}", launch.notes);
        }
        let y = dev.download(&dy).unwrap();
        for (r, &got) in y.iter().enumerate() {
            let want: f32 = (a.row_offsets[r]..a.row_offsets[r + 1])
                .map(|i| a.values[i] * x[a.col_indices[i] as usize])
                .sum();
            assert_eq!(got, want, "{} row {r}", launch.schedule);
        }
    }
}

/// `a` with row `row` replaced by `atoms` atoms (integer values, columns cycling): one row past
/// the huge-tile threshold.
fn with_giant_row(a: &Csr<f32>, row: usize, atoms: usize) -> Csr<f32> {
    let mut offsets = vec![0usize];
    let (mut col_indices, mut values) = (Vec::new(), Vec::new());
    for r in 0..a.num_rows {
        if r == row {
            col_indices.extend((0..atoms).map(|j| ((j * 7) % a.num_cols) as u32));
            values.extend((0..atoms).map(|j| (j % 3) as f32));
        } else {
            let span = a.row_offsets[r]..a.row_offsets[r + 1];
            col_indices.extend_from_slice(&a.col_indices[span.clone()]);
            values.extend_from_slice(&a.values[span]);
        }
        offsets.push(col_indices.len());
    }
    Csr::new(a.num_rows, a.num_cols, offsets, col_indices, values).unwrap()
}

/// The consolidation counters reset themselves (no memset per launch): launches back to back on
/// one stream, alternating a matrix without huge tiles (the device-side launch on a GPU) with one
/// whose giant row takes the host path and the huge-tile split, at every level, each result
/// exact. A launch that left its counters set would buffer stale tiles into the next one.
#[test]
fn repeated_launches_reset_their_counters_on_every_path() {
    let dev = Device::default();
    let cols = 40;
    let small = matrix(3000, cols);
    let giant = with_giant_row(&matrix(2000, cols), 1000, 40_000);
    let x: Vec<f32> = (0..cols).map(|i| i as f32 - 20.0).collect();
    let dx = dev.upload(&x).unwrap();
    let mats = [&small, &giant];
    let uploaded: Vec<_> = mats
        .iter()
        .map(|a| DeviceCsr::upload(&dev, a).unwrap())
        .collect();
    let rounds = if dev.is_gpu() { 40 } else { 3 };
    for round in 0..rounds {
        for &s in spmv::SCHEDULES {
            for (a, da) in mats.iter().zip(&uploaded) {
                let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
                let launch = spmv::launch_with(&dev, s, da, &dx, &mut dy).unwrap();
                if std::ptr::eq(*a, &giant) {
                    assert!(
                        launch.notes[0].starts_with("host fallback"),
                        "{:?}",
                        launch.notes
                    );
                }
                let y = dev.download(&dy).unwrap();
                for (r, &got) in y.iter().enumerate() {
                    let want: f32 = (a.row_offsets[r]..a.row_offsets[r + 1])
                        .map(|i| a.values[i] * x[a.col_indices[i] as usize])
                        .sum();
                    assert_eq!(
                        got, want,
                        "round {round}, {} ({:?}), {} rows: row {r}",
                        launch.schedule, launch.notes, a.num_rows
                    );
                }
            }
        }
    }
}
