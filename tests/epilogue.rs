//! The attribute's `epilogue`: every schedule applies it once per (tile, lane) to the final
//! reduced value, after every fix-up, and the CPU reference applies the same one; both are held
//! to an f64 reference computed here, on random and adversarial tile sets (empty tiles, no
//! atoms, one atom, a tile long enough for the huge-tile split), with lanes and with a frontier.
//! Runs on `Device::default()`: the simulator here, the GPU on a GPU machine.

#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use lb::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A PageRank-style step: `d · (A·x) + (1 - d) · base[row]` (a per-tile term read at the tile).
#[load_balanced(schedule = "every", reduce = "sum", output = "y",
    epilogue = |row, sum| d * sum + (1.0 - d) * base[row])]
fn teleport(a: &Csr<f32>, x: &[f32], base: &[f32], d: f32, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// `y = α·A·x + β·y`, in place: the epilogue reads the output's old value.
#[load_balanced(schedule = "every", reduce = "sum", output = "y",
    epilogue = |_row, sum, old| alpha * sum + beta * old)]
fn axpby(a: &Csr<f64>, x: &[f64], alpha: f64, beta: f64, #[atom] nz: usize) -> f64 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// The same at a block of 32 threads, where a tile of 2 048 atoms takes the huge-tile split.
#[load_balanced(schedule = "every", reduce = "sum", output = "y", block = 32,
    epilogue = |_row, sum, old| alpha * sum + beta * old)]
fn axpby32(a: &Csr<f64>, x: &[f64], alpha: f64, beta: f64, #[atom] nz: usize) -> f64 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// `C = α·A·B + β·C + lane` with lanes (a tile of 256 atoms takes the huge-tile split then).
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "k",
    epilogue = |row: usize, j: usize, sum: f64, old: f64| -> f64 { alpha * sum + beta * old + j as f64 })]
fn spmm_axpby(
    a: &Csr<f64>,
    b: &[f64],
    k: usize,
    alpha: f64,
    beta: f64,
    #[atom] nz: usize,
    #[lane] j: usize,
) -> f64 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

/// The identity of an empty tile is what the epilogue sees: `min` over no atoms is `+inf`.
#[load_balanced(schedule = "every", reduce = "min", output = "lo",
    epilogue = |row, m| if m == f64::INFINITY { -(row as f64) } else { m })]
fn row_min_or_tag(a: &Csr<f64>, #[atom] nz: usize) -> f64 {
    a.values[nz]
}

/// An epilogue over a frontier: only the listed tiles are written, each once.
#[load_balanced(schedule = "every", reduce = "sum", output = "y", tiles = "frontier",
    epilogue = |row, sum, old| 2.0 * sum + old + a.num_cols as f64)]
fn frontier_axpby(a: &Csr<f64>, frontier: &[u32], x: &[f64], #[atom] nz: usize) -> f64 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// PageRank's pull over a CSC (tiles are columns): the epilogue adds a term per column.
#[load_balanced(schedule = "every", reduce = "sum", output = "y",
    epilogue = |col, sum| d * sum + (1.0 - d) / a.num_cols as f64 + col as f64)]
fn csc_pull(a: &Csc<f64>, x: &[f64], d: f64, #[atom] nz: usize) -> f64 {
    x[a.row_indices[nz] as usize]
}

/// A COO's rows with lanes, the epilogue reading the old output.
#[load_balanced(schedule = "every", reduce = "max", output = "c", lanes = "k",
    epilogue = |_row, j, m, old| m.max(old) + j as f64)]
fn coo_max(a: &Coo<f64>, k: usize, #[atom] nz: usize, #[lane] j: usize) -> f64 {
    a.values[nz] * (j + 1) as f64
}

/// An epilogue read no host check proves (`scale[0]`): the safe kernels test it.
#[load_balanced(schedule = "every", reduce = "sum", output = "y",
    epilogue = |_row, sum| sum * scale[0])]
fn scaled(a: &Csr<f32>, scale: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz]
}

fn random_f64(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// Row `row` of `A·x` in f64 (`x` read at `col * k + j`), and the sum of its terms' magnitudes.
fn row_dot(a: &Csr<f64>, x: &[f64], k: usize, j: usize, row: usize) -> (f64, f64) {
    a.row(row).fold((0.0, 0.0), |(s, m), nz| {
        let t = a.values[nz] * x[a.col_indices[nz] as usize * k + j];
        (s + t, m + t.abs())
    })
}

fn close(got: f64, want: f64, magnitude: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * magnitude.max(1.0)
}

/// The matrices: every shape of `random_csr` (the giant row's 700 atoms take the lane split),
/// and a row of 3 000 atoms for the split at 32 threads.
fn matrices(seed: u64) -> Vec<(String, Csr<f64>)> {
    let mut out: Vec<(String, Csr<f64>)> = SHAPES
        .iter()
        .enumerate()
        .map(|(i, &shape)| {
            let a = random_csr(shape, 130 + i * 17, 800, seed + i as u64);
            (format!("{shape:?}"), to_f64(&a))
        })
        .collect();
    let mut triplets: Vec<(usize, usize, f64)> = (0..3000)
        .map(|c| (7, c, 0.5 - (c % 5) as f64 * 0.25))
        .collect();
    triplets.extend((0..40).filter(|r| r % 3 != 0).map(|r| (r, r * 11, 1.5)));
    out.push((
        "huge row".into(),
        Csr::from_triplets(40, 3000, triplets).unwrap(),
    ));
    out
}

#[test]
fn teleport_epilogue_on_every_schedule() {
    let dev = Device::default();
    for (name, a64) in matrices(1) {
        let a = to_f32(&a64);
        let x = random_vec(a.num_cols, 2);
        let base = random_vec(a.num_rows, 3);
        let d = 0.85f32;
        let mut reference = vec![f32::NAN; a.num_rows];
        teleport::cpu(&a, &x, &base, d, &mut reference);
        let check = |got: &[f32], what: &str| {
            let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            for row in 0..a.num_rows {
                let (sum, mag) = row_dot(&a64, &x64, 1, 0, row);
                let want = 0.85 * sum + 0.15 * f64::from(base[row]);
                assert!(
                    close(f64::from(got[row]), want, mag, 1e-5),
                    "{name}, {what}: row {row}: got {}, f64 reference {want}",
                    got[row]
                );
            }
        };
        check(&reference, "cpu");
        let (da, dx, db) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&x).unwrap(),
            dev.upload(&base).unwrap(),
        );
        for &s in teleport::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            teleport::launch_with(&dev, s, &da, &dx, &db, d, &mut dy).unwrap();
            check(&dev.download(&dy).unwrap(), s.name());
        }
    }
}

/// `y = α·A·x + β·y` against the f64 reference, for the kernel at 256 and at 32 threads a
/// block; a schedule that applied the epilogue to a partial, or twice, would add `β·y` twice.
#[test]
fn axpby_reads_the_old_output_once_on_every_schedule() {
    let dev = Device::default();
    let (alpha, beta) = (1.5, -0.75);
    for (name, a) in matrices(10) {
        let x = random_f64(a.num_cols, 11);
        let y0 = random_f64(a.num_rows, 12);
        let want: Vec<(f64, f64)> = (0..a.num_rows)
            .map(|row| {
                let (sum, mag) = row_dot(&a, &x, 1, 0, row);
                (alpha * sum + beta * y0[row], alpha.abs() * mag)
            })
            .collect();
        let check = |got: &[f64], what: &str| {
            for (row, (&g, &(w, mag))) in got.iter().zip(&want).enumerate() {
                assert!(
                    close(g, w, mag, 1e-12),
                    "{name}, {what}: row {row}: got {g}, f64 reference {w}"
                );
            }
        };
        let mut reference = y0.clone();
        axpby::cpu(&a, &x, alpha, beta, &mut reference);
        check(&reference, "cpu");
        let mut reference32 = y0.clone();
        axpby32::cpu(&a, &x, alpha, beta, &mut reference32);
        assert_eq!(reference32, reference, "{name}: the two references");
        let (da, dx) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for &s in axpby::SCHEDULES {
            let mut dy = dev.upload(&y0).unwrap();
            axpby::launch_with(&dev, s, &da, &dx, alpha, beta, &mut dy).unwrap();
            check(&dev.download(&dy).unwrap(), s.name());
        }
        for &s in axpby32::SCHEDULES {
            let mut dy = dev.upload(&y0).unwrap();
            axpby32::launch_with(&dev, s, &da, &dx, alpha, beta, &mut dy).unwrap();
            check(
                &dev.download(&dy).unwrap(),
                &format!("{} at block 32", s.name()),
            );
        }
    }
}

#[test]
fn lane_epilogue_on_every_schedule() {
    let dev = Device::default();
    let (alpha, beta) = (-0.5, 2.0);
    for k in [1, 3, 16, 33] {
        for (name, a) in matrices(20 + k as u64) {
            let b = random_f64(a.num_cols * k, 21);
            let c0 = random_f64(a.num_rows * k, 22);
            let check = |got: &[f64], what: &str| {
                for row in 0..a.num_rows {
                    for j in 0..k {
                        let (sum, mag) = row_dot(&a, &b, k, j, row);
                        let w = alpha * sum + beta * c0[row * k + j] + j as f64;
                        let g = got[row * k + j];
                        assert!(
                            close(g, w, mag, 1e-12),
                            "{name}, k = {k}, {what}: c[{row}][{j}] = {g}, f64 reference {w}"
                        );
                    }
                }
            };
            let mut reference = c0.clone();
            spmm_axpby::cpu(&a, &b, k, alpha, beta, &mut reference);
            check(&reference, "cpu");
            let (da, db) = (
                DeviceCsr::upload(&dev, &a).unwrap(),
                dev.upload(&b).unwrap(),
            );
            for &s in spmm_axpby::SCHEDULES {
                let mut dc = dev.upload(&c0).unwrap();
                spmm_axpby::launch_with(&dev, s, &da, &db, k, alpha, beta, &mut dc).unwrap();
                check(&dev.download(&dc).unwrap(), s.name());
            }
        }
    }
}

/// Exact: `min` has one answer whatever the order, and an empty tile's identity (`+inf`) is
/// what reaches the epilogue.
#[test]
fn empty_tiles_reach_the_epilogue_as_the_identity() {
    let dev = Device::default();
    for (name, a) in matrices(30) {
        let want: Vec<f64> = (0..a.num_rows)
            .map(|row| {
                let m = a
                    .row(row)
                    .map(|nz| a.values[nz])
                    .fold(f64::INFINITY, f64::min);
                if m == f64::INFINITY {
                    -(row as f64)
                } else {
                    m
                }
            })
            .collect();
        let mut reference = vec![f64::NAN; a.num_rows];
        row_min_or_tag::cpu(&a, &mut reference);
        assert_eq!(reference, want, "{name}: cpu");
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for &s in row_min_or_tag::SCHEDULES {
            let mut lo = dev.upload(&vec![f64::NAN; a.num_rows]).unwrap();
            row_min_or_tag::launch_with(&dev, s, &da, &mut lo).unwrap();
            assert_eq!(dev.download(&lo).unwrap(), want, "{name}: {}", s.name());
        }
    }
}

/// A frontier of distinct tiles in random order: listed tiles get the epilogue once, the
/// others keep their old value bit for bit.
#[test]
fn frontier_epilogue_writes_listed_tiles_once() {
    let dev = Device::default();
    for (name, a) in matrices(40) {
        let mut rng = ChaCha8Rng::seed_from_u64(41);
        let mut frontier: Vec<u32> = (0..a.num_rows as u32)
            .filter(|_| rng.random_bool(0.4))
            .collect();
        for i in (1..frontier.len()).rev() {
            frontier.swap(i, rng.random_range(0..=i));
        }
        let x = random_f64(a.num_cols, 42);
        let y0 = random_f64(a.num_rows, 43);
        let mut want: Vec<(f64, f64)> = y0.iter().map(|&v| (v, 0.0)).collect();
        for &t in &frontier {
            let (sum, mag) = row_dot(&a, &x, 1, 0, t as usize);
            want[t as usize] = (2.0 * sum + y0[t as usize] + a.num_cols as f64, 2.0 * mag);
        }
        let check = |got: &[f64], what: &str| {
            for (row, (&g, &(w, mag))) in got.iter().zip(&want).enumerate() {
                assert!(
                    close(g, w, mag, 1e-12),
                    "{name}, {what}: row {row}: got {g}, want {w}"
                );
            }
        };
        let mut reference = y0.clone();
        frontier_axpby::cpu(&a, &frontier, &x, &mut reference);
        check(&reference, "cpu");
        let (da, df, dx) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&frontier).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for &s in frontier_axpby::SCHEDULES {
            let mut dy = dev.upload(&y0).unwrap();
            frontier_axpby::launch_with(&dev, s, &da, &df, &dx, &mut dy).unwrap();
            check(&dev.download(&dy).unwrap(), s.name());
        }
    }
}

/// An epilogue's slice read at the tile is checked once on the host, as the body's gathers
/// are: a `base` shorter than the tile count is an `Error::Shape`, nothing launched.
#[test]
fn a_short_epilogue_slice_is_a_shape_error() {
    let dev = Device::default();
    let a = to_f32(&matrices(50).remove(0).1);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&random_vec(a.num_cols, 51)).unwrap();
    let short = dev.upload(&vec![0.0f32; a.num_rows - 1]).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let err = teleport::launch(&dev, &da, &dx, &short, 0.85, &mut dy).unwrap_err();
    assert!(matches!(err, lb::Error::Shape(_)), "{err}");
}

/// The other tile-set formats: a CSC's columns and a COO's rows, against f64 references.
#[test]
fn csc_and_coo_epilogues_on_every_schedule() {
    let dev = Device::default();
    for (name, a) in matrices(80) {
        let csc = a.to_csc().unwrap();
        let x = random_f64(a.num_rows, 81);
        let d = 0.85;
        let want: Vec<(f64, f64)> = (0..a.num_cols)
            .map(|col| {
                let (sum, mag) = csc.col(col).fold((0.0, 0.0), |(s, m), nz| {
                    let t = x[csc.row_indices[nz] as usize];
                    (s + t, m + t.abs())
                });
                (d * sum + (1.0 - d) / a.num_cols as f64 + col as f64, mag)
            })
            .collect();
        let check = |got: &[f64], what: &str| {
            for (col, (&g, &(w, mag))) in got.iter().zip(&want).enumerate() {
                assert!(
                    close(g, w, mag, 1e-12),
                    "{name}, {what}: column {col}: got {g}, want {w}"
                );
            }
        };
        let mut reference = vec![f64::NAN; a.num_cols];
        csc_pull::cpu(&csc, &x, d, &mut reference);
        check(&reference, "cpu");
        let (dcsc, dx) = (
            DeviceCsc::upload(&dev, &csc).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for &s in csc_pull::SCHEDULES {
            let mut dy = dev.upload(&vec![f64::NAN; a.num_cols]).unwrap();
            csc_pull::launch_with(&dev, s, &dcsc, &dx, d, &mut dy).unwrap();
            check(&dev.download(&dy).unwrap(), s.name());
        }

        let coo = a.to_coo().unwrap();
        let k = 5;
        let c0 = random_f64(a.num_rows * k, 82);
        let want: Vec<f64> = (0..a.num_rows * k)
            .map(|i| {
                let (row, j) = (i / k, i % k);
                let m = a
                    .row(row)
                    .map(|nz| a.values[nz] * (j + 1) as f64)
                    .fold(f64::NEG_INFINITY, f64::max);
                m.max(c0[i]) + j as f64
            })
            .collect();
        let mut reference = c0.clone();
        coo_max::cpu(&coo, k, &mut reference);
        assert_eq!(reference, want, "{name}: cpu");
        let dcoo = DeviceCoo::upload(&dev, &coo).unwrap();
        for &s in coo_max::SCHEDULES {
            let mut dc = dev.upload(&c0).unwrap();
            coo_max::launch_with(&dev, s, &dcoo, k, &mut dc).unwrap();
            assert_eq!(dev.download(&dc).unwrap(), want, "{name}: {}", s.name());
        }
    }
}

/// An unproven epilogue read past its slice is `Error::OutOfBounds` naming the slice, on every
/// schedule; in bounds, the value is right.
#[test]
fn an_unproven_epilogue_read_is_tested() {
    let dev = Device::default();
    let a = to_f32(&matrices(70).remove(0).1);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let (empty, three) = (dev.zeros::<f32>(0).unwrap(), dev.upload(&[3.0f32]).unwrap());
    for &s in scaled::SCHEDULES {
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        match scaled::launch_with(&dev, s, &da, &empty, &mut dy) {
            Err(lb::Error::OutOfBounds { param, index: 0 }) => assert_eq!(param, "scale"),
            other => panic!("{}: {other:?}", s.name()),
        }
        scaled::launch_with(&dev, s, &da, &three, &mut dy).unwrap();
        let got = dev.download(&dy).unwrap();
        for row in 0..a.num_rows {
            let want: f32 = a.row(row).map(|nz| a.values[nz]).sum::<f32>() * 3.0;
            assert!(
                (got[row] - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "{}: row {row}",
                s.name()
            );
        }
    }
}

/// Under tuning, a kernel whose epilogue reads the old output is tuned on scratch copies of the
/// output (each candidate reads the caller's `y`, not the previous candidate's result) and
/// applies `β·y` once, in the chosen schedule's launch; one whose epilogue does not is tuned
/// like any reduce kernel, its winner's write whole.
#[test]
fn accumulating_kernels_are_tuned_on_copies_and_run_once() {
    let dev = Device::simulator();
    dev.set_tuning(lb::Tuning::Tune);
    dev.set_tuning_file(None);
    let a = matrices(60).remove(0).1;
    let x = random_f64(a.num_cols, 61);
    let y0 = random_f64(a.num_rows, 62);
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&x).unwrap(),
    );
    let mut dy = dev.upload(&y0).unwrap();
    let l = axpby::launch(&dev, &da, &dx, 1.5, -0.75, &mut dy).unwrap();
    assert!(matches!(l.picked, lb::Picked::Tuned(_)), "{:?}", l.picked);
    let got = dev.download(&dy).unwrap();
    for row in 0..a.num_rows {
        let (sum, mag) = row_dot(&a, &x, 1, 0, row);
        let want = 1.5 * sum - 0.75 * y0[row];
        assert!(
            close(got[row], want, mag, 1e-12),
            "row {row}: got {}, want {want}",
            got[row]
        );
    }

    let a = to_f32(&a);
    let x = random_vec(a.num_cols, 63);
    let base = random_vec(a.num_rows, 64);
    let (da, dx, db) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&x).unwrap(),
        dev.upload(&base).unwrap(),
    );
    let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    let l = teleport::launch(&dev, &da, &dx, &db, 0.5, &mut dy).unwrap();
    assert!(matches!(l.picked, lb::Picked::Tuned(_)), "{:?}", l.picked);
    let mut want = vec![0.0; a.num_rows];
    teleport::cpu(&a, &x, &base, 0.5, &mut want);
    for (row, (g, w)) in dev.download(&dy).unwrap().iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "row {row}: got {g}, want {w}"
        );
    }
}

fn to_f32(a: &Csr<f64>) -> Csr<f32> {
    Csr::new(
        a.num_rows,
        a.num_cols,
        a.row_offsets.clone(),
        a.col_indices.clone(),
        a.values.iter().map(|&v| v as f32).collect(),
    )
    .unwrap()
}

/// The modules with an epilogue assemble with ptxas (when `LB_PTXAS` names it) without spills,
/// for sm_75, sm_80 and sm_90: a slice read at the tile, the old output, lanes, a frontier.
#[test]
fn every_epilogue_module_assembles_without_spills() {
    let modules = [
        ("teleport", teleport::PTX),
        ("axpby", axpby::PTX),
        ("spmm_axpby", spmm_axpby::PTX),
        ("frontier_axpby", frontier_axpby::PTX),
    ];
    for (name, ptx) in modules {
        lb_ptx::ptxas::assert_assembles(name, ptx);
    }
}

/// The epilogue in the PTX of the simplest schedule: the reduced sum, the old output loaded
/// (not through the read-only path: the kernel writes it), `alpha * sum + beta * old`, stored.
#[test]
fn axpby_ptx_snapshot() {
    let start = axpby::PTX
        .find(".visible .entry axpby_thread_mapped(")
        .expect("the module has the kernel");
    let end = start
        + axpby::PTX[start..]
            .find("\n}\n")
            .expect("kernels end with a brace")
        + 3;
    insta::assert_snapshot!("axpby", &axpby::PTX[start..end]);
}
