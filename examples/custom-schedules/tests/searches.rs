//! The three searches against the CPU reference, through `launch_custom`, on the bodies and
//! adversarial tile sets lb's own schedules are tested on (lb's `tests/common`): empty matrices,
//! rows without atoms, one giant row, a single atom, alternating empty and long rows, rows
//! spanning many blocks, frontiers (empty, repeated, out of order), lanes (k = 1, 3, 32, 33),
//! COO and CSC tile sets, side effects through atomics and queues. Fresh random inputs each run;
//! every message names its seed. Runs on `Device::default()`: the simulator here, the GPU on a
//! GPU machine.

// Rows index the matrix, the reference and the output together; a range reads best.
#![allow(clippy::needless_range_loop)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use common::*;
use lb::prelude::*;
use lb::schedule::UserSchedule;
use lb_custom_schedules::{BlockSearch, DirectSearch, LocalWarpSearch, ALL};

fn device() -> Device {
    Device::default()
}

/// A fresh seed per call, printed by every failure that uses it.
fn fresh_seed() -> u64 {
    rand::random()
}

#[test]
fn sums_match_the_f64_reference_on_every_shape() {
    let dev = device();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed) {
        let x = random_vec(a.num_cols, seed ^ 1);
        let (da, dx) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for s in ALL {
            // Garbage first: every row, empty ones included, must be written.
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            spmv::launch_custom(&dev, s, &da, &dx, &mut dy).unwrap();
            let got = dev.download(&dy).unwrap();
            assert_spmv_close(&a, &x, &got, &format!("{} on {what}", s.name()));
        }
    }
}

#[test]
fn min_and_max_are_exact() {
    let dev = device();
    let seed = fresh_seed();
    for (what, a32) in adversarial_matrices(seed) {
        let a = to_f64(&a32);
        let x: Vec<f64> = random_vec(a.num_cols, seed ^ 2)
            .into_iter()
            .map(f64::from)
            .collect();
        let mut lo_ref = vec![0.0; a.num_rows];
        row_min::cpu(&a, &x, &mut lo_ref);
        let mut hi_ref = vec![0u32; a.num_rows];
        row_max_col::cpu(&a32, &mut hi_ref);
        let (da, da32, dx) = (
            DeviceCsr::upload(&dev, &a).unwrap(),
            DeviceCsr::upload(&dev, &a32).unwrap(),
            dev.upload(&x).unwrap(),
        );
        for s in ALL {
            let mut lo = dev.zeros::<f64>(a.num_rows).unwrap();
            row_min::launch_custom(&dev, s, &da, &dx, &mut lo).unwrap();
            assert_eq!(dev.download(&lo).unwrap(), lo_ref, "{} on {what}", s.name());
            let mut hi = dev.upload(&vec![7u32; a.num_rows]).unwrap();
            row_max_col::launch_custom(&dev, s, &da32, &mut hi).unwrap();
            assert_eq!(dev.download(&hi).unwrap(), hi_ref, "{} on {what}", s.name());
        }
    }
}

#[test]
fn side_effects_visit_every_atom_once() {
    let dev = device();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed) {
        let mut counts_ref = vec![0u32; a.num_cols];
        let mut sums_ref = vec![0.0f32; a.num_cols];
        scatter::cpu(&a, &mut counts_ref, &mut sums_ref);
        let mut positives_ref = Queue::new();
        positives::cpu(&a, &mut positives_ref);
        let mut want_pushed = positives_ref.as_slice().to_vec();
        want_pushed.sort_unstable();
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for s in ALL {
            let what = format!("{} on {what}", s.name());
            let mut counts = dev.zeros::<u32>(a.num_cols).unwrap();
            let mut sums = dev.zeros::<f32>(a.num_cols).unwrap();
            scatter::launch_custom(&dev, s, &da, &mut counts, &mut sums).unwrap();
            assert_eq!(dev.download(&counts).unwrap(), counts_ref, "{what}");
            let got = dev.download(&sums).unwrap();
            for c in 0..a.num_cols {
                let tol = 1e-4 * (1.0 + sums_ref[c].abs());
                assert!((got[c] - sums_ref[c]).abs() <= tol, "{what}: column {c}");
            }
            let mut queue = DeviceQueue::new(&dev, a.nnz() + 1).unwrap();
            positives::launch_custom(&dev, s, &da, &mut queue).unwrap();
            let mut pushed = queue.download().unwrap();
            pushed.sort_unstable();
            assert_eq!(pushed, want_pushed, "{what}");
        }
    }
}

#[test]
fn lanes_match_the_f64_reference() {
    let dev = device();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed).into_iter().step_by(2) {
        for k in [1usize, 3, 32, 33] {
            let b = random_vec(a.num_cols * k, seed ^ 3);
            let (da, db) = (
                DeviceCsr::upload(&dev, &a).unwrap(),
                dev.upload(&b).unwrap(),
            );
            for s in ALL {
                let mut c = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
                spmm::launch_custom(&dev, s, &da, &db, k, &mut c).unwrap();
                let got = dev.download(&c).unwrap();
                assert_spmm_close(&a, &b, k, &got, &format!("{} k = {k} on {what}", s.name()));
            }
        }
    }
}

#[test]
fn frontiers_empty_repeated_and_out_of_order() {
    let dev = device();
    let seed = fresh_seed();
    let a = random_csr(Shape::Alternating, 300, 400, seed);
    let x = random_vec(a.num_cols, seed ^ 4);
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&x).unwrap(),
    );
    let frontiers: [Vec<u32>; 4] = [
        vec![],
        vec![1],
        vec![299, 3, 3, 150, 1, 0, 299],
        (0..300).rev().collect(),
    ];
    for frontier in &frontiers {
        let what = format!("frontier {frontier:?}, seed {seed}");
        let mut want = vec![-1.0f32; a.num_rows];
        frontier_spmv::cpu(&a, frontier, &x, &mut want);
        let mut want_pushed = Queue::new();
        gather::cpu(&a, frontier, &mut want_pushed);
        let mut want_pushed = want_pushed.as_slice().to_vec();
        want_pushed.sort_unstable();
        let df = dev.upload(frontier).unwrap();
        for s in ALL {
            let mut dy = dev.upload(&vec![-1.0f32; a.num_rows]).unwrap();
            frontier_spmv::launch_custom(&dev, s, &da, &df, &dx, &mut dy).unwrap();
            let got = dev.download(&dy).unwrap();
            for row in 0..a.num_rows {
                if !frontier.contains(&(row as u32)) {
                    assert_eq!(got[row], -1.0, "{} {what}: row {row} written", s.name());
                    continue;
                }
                let magnitude: f32 = a
                    .row(row)
                    .map(|nz| (a.values[nz] * x[a.col_indices[nz] as usize]).abs())
                    .sum();
                let tol = 1e-5 * magnitude.max(1e-30);
                assert!(
                    (got[row] - want[row]).abs() <= tol,
                    "{} {what}: row {row}: {} vs {}",
                    s.name(),
                    got[row],
                    want[row]
                );
            }
            let mut queue = DeviceQueue::new(&dev, want_pushed.len() + 1).unwrap();
            gather::launch_custom(&dev, s, &da, &df, &mut queue).unwrap();
            let mut pushed = queue.download().unwrap();
            pushed.sort_unstable();
            assert_eq!(pushed, want_pushed, "{} {what}", s.name());
        }
    }
}

#[test]
fn coo_and_csc_tile_sets() {
    let dev = device();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed).into_iter().step_by(3) {
        let x = random_vec(a.num_cols, seed ^ 6);
        let coo = a.to_coo().unwrap();
        let mut want = vec![0.0f32; a.num_rows];
        coo_spmv::cpu(&coo, &x, &mut want);
        let csc = a.to_csc().unwrap();
        let xt = random_vec(a.num_rows, seed ^ 7);
        let mut want_t = vec![0.0f32; a.num_cols];
        csc_spmv_t::cpu(&csc, &xt, &mut want_t);
        let (dcoo, dx) = (
            DeviceCoo::upload(&dev, &coo).unwrap(),
            dev.upload(&x).unwrap(),
        );
        let (dcsc, dxt) = (
            DeviceCsc::upload(&dev, &csc).unwrap(),
            dev.upload(&xt).unwrap(),
        );
        for s in ALL {
            let what = format!("{} on {what}", s.name());
            let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
            coo_spmv::launch_custom(&dev, s, &dcoo, &dx, &mut dy).unwrap();
            assert_close(&dev.download(&dy).unwrap(), &want, &what);
            let mut dyt = dev.zeros::<f32>(a.num_cols).unwrap();
            csc_spmv_t::launch_custom(&dev, s, &dcsc, &dxt, &mut dyt).unwrap();
            assert_close(&dev.download(&dyt).unwrap(), &want_t, &what);
        }
    }
}

/// `got` within 1e-4 of `want`, relative to its magnitude (both sums of the same terms in
/// another order; the terms are below 2 in magnitude and at most 700 per row).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}: [{i}] {g} vs {w}"
        );
    }
}

#[test]
fn launches_are_bitwise_repeatable_and_built_once() {
    let dev = device();
    let seed = fresh_seed();
    let a = random_csr(Shape::OneGiantRow, 2000, 700, seed);
    let x = random_vec(a.num_cols, seed);
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&x).unwrap(),
    );
    for s in ALL {
        let first = lb::user_kernels(spmv::IR, s).unwrap();
        let mut outputs = Vec::new();
        for _ in 0..3 {
            let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
            let launch = spmv::launch_custom(&dev, s, &da, &dx, &mut dy).unwrap();
            // Timed as `launch_with` is: events on a GPU, instruction counts on the simulator.
            assert_eq!(launch.elapsed_ms.is_some(), dev.is_gpu(), "{}", s.name());
            assert_eq!(launch.sim.is_some(), !dev.is_gpu(), "{}", s.name());
            assert_eq!(launch.schedule, s.name());
            outputs.push(dev.download(&dy).unwrap());
        }
        assert!(
            outputs.windows(2).all(|w| w[0] == w[1]),
            "{} seed {seed}",
            s.name()
        );
        assert!(std::ptr::eq(first, lb::user_kernels(spmv::IR, s).unwrap()));
        assert!(first.ptx.contains(&format!(".entry spmv_{}_", s.name())));
    }
}

#[test]
fn the_host_checks_of_the_built_in_schedules_apply() {
    let dev = device();
    let a = Csr::new(2, 6, vec![0, 1, 2], vec![1, 5], vec![1.0f32, 2.0]).unwrap();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let short_x = dev.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let x = dev.upload(&[1.0f32; 6]).unwrap();
    let other = Device::simulator();
    let foreign_x = other.upload(&[1.0f32; 6]).unwrap();
    for s in ALL {
        let mut dy = dev.zeros::<f32>(2).unwrap();
        let err = spmv::launch_custom(&dev, s, &da, &short_x, &mut dy).unwrap_err();
        assert!(matches!(err, lb::Error::Shape(_)), "{}: {err}", s.name());
        let mut short_y = dev.zeros::<f32>(1).unwrap();
        let err = spmv::launch_custom(&dev, s, &da, &x, &mut short_y).unwrap_err();
        assert!(matches!(err, lb::Error::Shape(_)), "{}: {err}", s.name());
        let err = spmv::launch_custom(&dev, s, &da, &foreign_x, &mut dy).unwrap_err();
        assert!(
            matches!(err, lb::Error::DeviceMismatch { .. }),
            "{}: {err}",
            s.name()
        );
        // The checked kernels of `spmv_checked` report the index under a user schedule too.
        match spmv_checked::launch_custom(&dev, s, &da, &short_x, &mut dy) {
            Err(lb::Error::OutOfBounds { param, index }) => {
                assert_eq!((param.as_str(), index), ("x", 5), "{}", s.name());
            }
            other => panic!(
                "{}: expected an out-of-bounds error, got {other:?}",
                s.name()
            ),
        }
    }
}

/// A schedule whose name cannot be one: an `Err` at the launch, nothing run.
struct Misnamed(&'static str);

impl lb::schedule::ScheduleTemplate for Misnamed {
    fn plan(
        &self,
        body: &lb::schedule::Body,
        opts: &lb::schedule::Options,
    ) -> Result<lb::schedule::plan::Plan, lb::schedule::GenError> {
        DirectSearch.plan(body, opts)
    }

    fn build(
        &self,
        body: &lb::schedule::Body,
        opts: &lb::schedule::Options,
        plan: &lb::schedule::plan::Plan,
    ) -> Result<Vec<lb::schedule::ir::Kernel>, lb::schedule::GenError> {
        DirectSearch.build(body, opts, plan)
    }
}

// SAFETY: its kernels are `DirectSearch`'s; only the name differs, and the tests below show
// it is refused before anything runs.
unsafe impl UserSchedule for Misnamed {
    fn name(&self) -> &'static str {
        self.0
    }
}

#[test]
fn a_bad_schedule_name_is_an_error() {
    let dev = device();
    let a = Csr::new(1, 1, vec![0, 1], vec![0], vec![2.0f32]).unwrap();
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&[3.0f32]).unwrap(),
    );
    for (name, why) in [
        ("merge_path", "built-in"),
        ("two words", "PTX entry names"),
        ("", "PTX entry names"),
    ] {
        let mut dy = dev.zeros::<f32>(1).unwrap();
        let err = spmv::launch_custom(&dev, &Misnamed(name), &da, &dx, &mut dy).unwrap_err();
        assert!(
            matches!(&err, lb::Error::UserSchedule { message, .. } if message.contains(why)),
            "{name:?}: {err}"
        );
    }
    // The same kernel under the well-named schedules runs.
    for s in [
        &DirectSearch as &dyn UserSchedule,
        &LocalWarpSearch,
        &BlockSearch,
    ] {
        let mut dy = dev.zeros::<f32>(1).unwrap();
        spmv::launch_custom(&dev, s, &da, &dx, &mut dy).unwrap();
        assert_eq!(dev.download(&dy).unwrap(), [6.0]);
    }
}

#[test]
fn modules_assemble_without_spills() {
    for s in ALL {
        for (kernel, ir) in [
            ("spmv", spmv::IR),
            ("spmv_checked", spmv_checked::IR),
            ("spmm", spmm::IR),
            ("frontier_spmv", frontier_spmv::IR),
            ("gather", gather::IR),
            ("scatter", scatter::IR),
        ] {
            let module = lb::user_kernels(ir, s).unwrap();
            lb::schedule::ptxas::assert_assembles(&format!("{kernel} / {}", s.name()), module.ptx);
        }
    }
}
