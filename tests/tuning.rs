//! The per-schedule tuning keys end to end: kernels whose `binning` and `consolidate` thresholds
//! come from the attribute, launched on `Device::default()` (the simulator here, the GPU on a GPU
//! machine) against the generated CPU reference and an f64 loop, on random matrices with empty
//! rows and one giant row. The kernels round every operation as the CPU does (`fma = false`),
//! so the tiles a schedule sums in atom order must match the CPU reference bitwise.

use lb::prelude::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[load_balanced(
    schedule = "binning",
    block_threshold = 64,
    warp_threshold = 4,
    reduce = "sum",
    output = "y",
    fma = false
)]
pub fn spmv_binned(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

#[load_balanced(
    schedule = "consolidate, consolidate(block), consolidate(warp)",
    consolidate_threshold = 0,
    reduce = "sum",
    output = "y",
    fma = false
)]
pub fn spmv_all_buffered(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

#[load_balanced(
    schedule = "consolidate, consolidate(block), consolidate(warp)",
    consolidate_threshold = 1000,
    reduce = "sum",
    output = "y",
    fma = false
)]
pub fn spmv_giant_buffered(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// The generated functions of one kernel, so one check serves all three.
struct Kernel {
    name: &'static str,
    ptx: &'static str,
    schedules: &'static [Schedule],
    cpu: fn(&Csr<f32>, &[f32], &mut [f32]),
    launch: fn(&Device, Schedule, &DeviceCsr<f32>, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>),
    /// The tunings' comparison immediates, which must show in the PTX.
    thresholds: &'static [u64],
    /// Rows below this many atoms are summed in atom order, bitwise as the CPU reference does:
    /// binning's scan tiles (below `warp_threshold`) and consolidate's in-place tiles.
    sequential_below: u64,
}

const KERNELS: [Kernel; 3] = [
    Kernel {
        name: "spmv_binned",
        ptx: spmv_binned::PTX,
        schedules: spmv_binned::SCHEDULES,
        cpu: spmv_binned::cpu,
        launch: |dev, s, a, x, y| {
            spmv_binned::launch_with(dev, s, a, x, y).unwrap();
        },
        thresholds: &[64, 4],
        sequential_below: 4,
    },
    Kernel {
        name: "spmv_all_buffered",
        ptx: spmv_all_buffered::PTX,
        schedules: spmv_all_buffered::SCHEDULES,
        cpu: spmv_all_buffered::cpu,
        launch: |dev, s, a, x, y| {
            spmv_all_buffered::launch_with(dev, s, a, x, y).unwrap();
        },
        thresholds: &[0],
        sequential_below: 0,
    },
    Kernel {
        name: "spmv_giant_buffered",
        ptx: spmv_giant_buffered::PTX,
        schedules: spmv_giant_buffered::SCHEDULES,
        cpu: spmv_giant_buffered::cpu,
        launch: |dev, s, a, x, y| {
            spmv_giant_buffered::launch_with(dev, s, a, x, y).unwrap();
        },
        thresholds: &[1000],
        sequential_below: 1000,
    },
];

/// `rows` rows: about a quarter empty, the others 1 to 80 atoms (across both binning thresholds
/// and the default ones), and one giant row of 1000 to 3000 atoms (at least the largest
/// threshold); columns repeat freely, values in [-2, 2).
fn random_matrix(rows: usize, cols: usize, seed: u64) -> Csr<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let giant = rng.random_range(0..rows);
    let mut offsets = vec![0usize];
    let (mut col_indices, mut values) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let len = if r == giant {
            rng.random_range(1000..=3000)
        } else if rng.random_bool(0.25) {
            0
        } else {
            rng.random_range(1..=80)
        };
        for _ in 0..len {
            col_indices.push(rng.random_range(0..cols as u32));
            values.push(rng.random_range(-2.0f32..2.0));
        }
        offsets.push(col_indices.len());
    }
    Csr::new(rows, cols, offsets, col_indices, values).expect("generated matrices are valid")
}

/// Row `row` of A·x in f64 and the sum of its terms' magnitudes (the scale of its rounding).
fn exact_row(a: &Csr<f32>, x: &[f32], row: usize) -> (f64, f64) {
    a.row(row).fold((0.0, 0.0), |(sum, mag), nz| {
        let term = f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
        (sum + term, mag + term.abs())
    })
}

/// Within f32 rounding of the f64 loop, whatever the order of the additions.
fn assert_close(got: f32, (exact, magnitude): (f64, f64), what: &str) {
    assert!(
        (f64::from(got) - exact).abs() <= 1e-5 * magnitude.max(1e-30),
        "{what}: got {got}, f64 reference {exact}"
    );
}

fn check(k: &Kernel, a: &Csr<f32>, x: &[f32]) {
    for t in k.thresholds {
        let compare = format!(", {t};");
        assert!(
            k.ptx
                .lines()
                .any(|l| l.trim_start().starts_with("setp.ge.u64") && l.ends_with(&compare)),
            "{}: no comparison with the threshold {t}",
            k.name
        );
    }
    let mut reference = vec![f32::NAN; a.num_rows];
    (k.cpu)(a, x, &mut reference);
    for (row, &r) in reference.iter().enumerate() {
        assert_close(
            r,
            exact_row(a, x, row),
            &format!("{} cpu row {row}", k.name),
        );
    }
    let dev = Device::default();
    let da = DeviceCsr::upload(&dev, a).unwrap();
    let dx = dev.upload(x).unwrap();
    for &s in k.schedules {
        // NaN first: every row, the empty ones included, must be written.
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        (k.launch)(&dev, s, &da, &dx, &mut dy);
        let got = dev.download(&dy).unwrap();
        for row in 0..a.num_rows {
            let what = format!(
                "{} {} row {row} ({} atoms)",
                k.name,
                s.name(),
                a.row(row).len()
            );
            if (a.row(row).len() as u64) < k.sequential_below {
                assert_eq!(got[row].to_bits(), reference[row].to_bits(), "{what}");
            } else {
                assert_close(got[row], exact_row(a, x, row), &what);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn tuned_thresholds_match_the_cpu_reference(
        rows in 1usize..400,
        cols in 1usize..500,
        seed in any::<u64>(),
    ) {
        let a = random_matrix(rows, cols, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        let x: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        for k in &KERNELS {
            check(k, &a, &x);
        }
    }
}
