//! Sliced ELL, a format written outside lb, under every built-in schedule and the three searches
//! of this crate, against a product recomputed in f64 from the CSR it was built from: the
//! adversarial shapes of lb's own tests (no rows, rows without atoms, one giant row, a single
//! atom, alternating empty and long rows, a row spanning many blocks), lanes, frontiers; and the
//! tile-set contract itself on CSR, CSC and COO, and on offsets that break it. Fresh random
//! inputs each run; every message names its seed. Runs on `Device::default()`: the simulator
//! here, the GPU on a GPU machine.

// Rows index the matrix, the reference and the output together; a range reads best.
#![allow(clippy::needless_range_loop)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use common::*;
use lb::prelude::*;
use lb_custom_schedules::ell::{sell_spmm, sell_spmv, DeviceSlicedEll, SlicedEll, SLICE};
use lb_custom_schedules::ALL;

fn fresh_seed() -> u64 {
    rand::random()
}

/// SpMV through the kernel's CPU reference.
fn cpu_spmv(ell: &SlicedEll<f32>, x: &[f32]) -> Vec<f32> {
    let mut y = vec![0.0f32; ell.num_rows()];
    let (s, c, v) = (ell.slice_offsets(), ell.cols(), ell.values());
    sell_spmv::cpu(ell.tiles(), s, c, v, x, &mut y);
    y
}

fn upload(dev: &Device, a: &Csr<f32>) -> (SlicedEll<f32>, DeviceSlicedEll<f32>) {
    let ell = SlicedEll::from_csr(a).unwrap();
    let dell = DeviceSlicedEll::upload(dev, &ell).unwrap();
    (ell, dell)
}

#[test]
fn the_format_stores_every_entry_at_its_slot() {
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed) {
        let ell = SlicedEll::from_csr(&a).unwrap();
        assert_eq!(ell.tiles().tile_offsets, a.row_offsets, "{what}");
        let slices = a.num_rows.div_ceil(SLICE);
        assert_eq!(ell.slice_offsets().len(), slices + 1, "{what}");
        for r in 0..a.num_rows {
            let width = (ell.slice_offsets()[r / SLICE + 1] - ell.slice_offsets()[r / SLICE])
                as usize
                / SLICE;
            assert!(
                a.row(r).len() <= width,
                "{what}: row {r} wider than its slice"
            );
            for (k, nz) in a.row(r).enumerate() {
                let slot = ell.slice_offsets()[r / SLICE] as usize + k * SLICE + r % SLICE;
                assert_eq!(
                    ell.cols()[slot],
                    a.col_indices[nz],
                    "{what}: row {r} entry {k}"
                );
                assert_eq!(
                    ell.values()[slot],
                    a.values[nz],
                    "{what}: row {r} entry {k}"
                );
            }
        }
    }
}

#[test]
fn spmv_under_every_schedule_matches_the_f64_reference() {
    let dev = Device::default();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed) {
        let x = random_vec(a.num_cols, seed ^ 1);
        let (ell, dell) = upload(&dev, &a);
        let dx = dev.upload(&x).unwrap();
        let want = cpu_spmv(&ell, &x);
        assert_spmv_close(&a, &x, &want, &format!("the CPU reference on {what}"));
        let (s, c, v) = (dell.slice_offsets(), dell.cols(), dell.values());
        for &schedule in sell_spmv::SCHEDULES {
            // Garbage first: every row, empty ones included, must be written.
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            sell_spmv::launch_with(&dev, schedule, &dell, s, c, v, &dx, &mut dy).unwrap();
            let got = dev.download(&dy).unwrap();
            assert_spmv_close(&a, &x, &got, &format!("{schedule} on {what}"));
        }
        for user in ALL {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            sell_spmv::launch_custom(&dev, user, &dell, s, c, v, &dx, &mut dy).unwrap();
            let got = dev.download(&dy).unwrap();
            assert_spmv_close(&a, &x, &got, &format!("{} on {what}", user.name()));
        }
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        sell_spmv::launch(&dev, &dell, s, c, v, &dx, &mut dy).unwrap();
        assert_spmv_close(
            &a,
            &x,
            &dev.download(&dy).unwrap(),
            &format!("auto on {what}"),
        );
    }
}

#[test]
fn spmm_lanes_match_the_f64_reference() {
    let dev = Device::default();
    let seed = fresh_seed();
    for (i, &shape) in SHAPES.iter().enumerate() {
        let a = random_csr(shape, 45, 29, seed.wrapping_add(i as u64));
        let (_, dell) = upload(&dev, &a);
        let (s, c, v) = (dell.slice_offsets(), dell.cols(), dell.values());
        for k in [1usize, 3, 32, 33] {
            let b = random_vec(a.num_cols * k, seed ^ k as u64);
            let db = dev.upload(&b).unwrap();
            for &schedule in sell_spmm::SCHEDULES {
                let what = format!("{schedule}, k = {k}, {shape:?}, seed {seed}");
                let mut dc = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
                sell_spmm::launch_with(&dev, schedule, &dell, s, c, v, &db, k, &mut dc).unwrap();
                assert_spmm_close(&a, &b, k, &dev.download(&dc).unwrap(), &what);
            }
        }
    }
}

/// The largest `x` over the columns of each row a frontier lists (other rows untouched).
#[load_balanced(schedule = "every", reduce = "max", output = "hi", tiles = "frontier")]
fn sell_frontier_max(
    a: &Tiles,
    frontier: &[u32],
    slice_offsets: &[u64],
    cols: &[u32],
    x: &[f32],
    #[tile] r: usize,
    #[rank] k: usize,
    #[atom] _nz: usize,
) -> f32 {
    x[cols[slice_offsets[r / 32] as usize + r % 32 + k * 32] as usize]
}

#[test]
fn frontiers_empty_repeated_and_out_of_order() {
    let dev = Device::default();
    let seed = fresh_seed();
    let a = random_csr(Shape::Alternating, 90, 40, seed);
    let x = random_vec(a.num_cols, seed ^ 3);
    let (ell, dell) = upload(&dev, &a);
    let dx = dev.upload(&x).unwrap();
    let frontiers: [Vec<u32>; 4] = [
        vec![],
        vec![5],
        vec![89, 3, 40, 0, 64, 33],
        vec![7, 7, 12, 7],
    ];
    for frontier in &frontiers {
        let mut want = vec![-7.0f32; a.num_rows];
        let (s, c) = (ell.slice_offsets(), ell.cols());
        sell_frontier_max::cpu(ell.tiles(), frontier, s, c, &x, &mut want);
        for row in 0..a.num_rows {
            let listed = frontier.contains(&(row as u32));
            let columns = a.row(row).map(|nz| x[a.col_indices[nz] as usize]);
            match columns.reduce(f32::max) {
                Some(max) if listed => assert_eq!(want[row], max, "row {row}, seed {seed}"),
                _ if listed => {}
                _ => assert_eq!(want[row], -7.0, "row {row} is not in {frontier:?}"),
            }
        }
        let df = dev.upload(frontier).unwrap();
        for &schedule in sell_frontier_max::SCHEDULES {
            let what = format!("{schedule}, frontier {frontier:?}, seed {seed}");
            let mut hi = dev.upload(&vec![-7.0f32; a.num_rows]).unwrap();
            let (s, c) = (dell.slice_offsets(), dell.cols());
            sell_frontier_max::launch_with(&dev, schedule, &dell, &df, s, c, &dx, &mut hi).unwrap();
            assert_eq!(dev.download(&hi).unwrap(), want, "{what}");
        }
    }
}

/// Each tile's length two ways: from the offsets the body reads, and by counting its atoms.
#[load_balanced(schedule = "every", reduce = "max", output = "len")]
fn tile_length(a: &Tiles, #[tile] t: usize, #[rank] k: usize, #[atom] nz: usize) -> u64 {
    let from_offsets = (a.tile_offsets[t + 1] - a.tile_offsets[t]) as u64;
    let counted = k as u64 + 1;
    if nz < a.tile_offsets[a.num_tiles] && counted <= from_offsets {
        from_offsets
    } else {
        u64::MAX
    }
}

#[test]
fn csr_csc_and_coo_keep_the_contract() {
    let dev = Device::default();
    let seed = fresh_seed();
    for (what, a) in adversarial_matrices(seed) {
        let csc = a.to_csc().unwrap();
        let coo = a.to_coo().unwrap();
        let sets: [(&str, Box<dyn DeviceTileSet>, Vec<usize>); 3] = [
            (
                "csr",
                Box::new(DeviceCsr::upload(&dev, &a).unwrap()),
                a.row_offsets.clone(),
            ),
            (
                "csc",
                Box::new(DeviceCsc::upload(&dev, &csc).unwrap()),
                csc.col_offsets.clone(),
            ),
            (
                "coo",
                Box::new(DeviceCoo::upload(&dev, &coo).unwrap()),
                a.row_offsets.clone(),
            ),
        ];
        for (format, set, offsets) in &sets {
            let tiles = Tiles::new(offsets.clone()).unwrap();
            let mut want = vec![0u64; tiles.num_tiles];
            tile_length::cpu(&tiles, &mut want);
            let lengths: Vec<u64> = offsets.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
            assert_eq!(want, lengths, "the CPU reference on {format} {what}");
            assert_eq!(set.num_tiles(), tiles.num_tiles, "{format} {what}");
            assert_eq!(set.num_atoms(), tiles.num_atoms(), "{format} {what}");
            for &schedule in tile_length::SCHEDULES {
                let mut len = dev.upload(&vec![7u64; tiles.num_tiles]).unwrap();
                tile_length::launch_with(&dev, schedule, set.as_ref(), &mut len).unwrap();
                let got = dev.download(&len).unwrap();
                assert_eq!(got, lengths, "{schedule} on {format} {what}");
            }
        }
    }
}

#[test]
fn offsets_that_break_the_contract_are_errors() {
    let bad: [(Vec<usize>, &str); 3] = [
        (vec![], "one tile offset each plus the end"),
        (vec![1, 2], "start at 0"),
        (vec![0, 3, 2, 4], "never decrease"),
    ];
    for (offsets, says) in bad {
        let err = Tiles::new(offsets.clone()).unwrap_err().to_string();
        assert!(err.contains(says), "{offsets:?}: {err}");
    }
    let mut tiles = Tiles::from_lengths(&[2, 0, 5]).unwrap();
    assert_eq!(tiles.tile_offsets, [0, 2, 2, 7]);
    tiles.num_tiles = 5;
    let dev = Device::default();
    let err = DeviceTiles::upload(&dev, &tiles).unwrap_err().to_string();
    assert!(err.contains("5 tiles"), "{err}");
    // A format's arrays shorter than its tiles claim: the kernel's reads are tested, an `Err`.
    let a = random_csr(Shape::Random, 70, 30, 11);
    let (_, dell) = upload(&dev, &a);
    let (dx, short_values) = (
        dev.upload(&random_vec(30, 12)).unwrap(),
        dev.upload(&[1.0f32]).unwrap(),
    );
    for &schedule in sell_spmv::SCHEDULES {
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        let (s, c) = (dell.slice_offsets(), dell.cols());
        let got = sell_spmv::launch_with(&dev, schedule, &dell, s, c, &short_values, &dx, &mut dy);
        assert!(
            got.is_err(),
            "{schedule}: a 1-entry `values` was read past its end"
        );
    }
    // An output shorter than the tiles is refused before any kernel runs.
    let good = DeviceTiles::upload(&dev, &Tiles::from_lengths(&[2, 0, 5]).unwrap()).unwrap();
    let mut short = dev.zeros::<u64>(2).unwrap();
    let err = tile_length::launch(&dev, &good, &mut short)
        .unwrap_err()
        .to_string();
    assert!(err.contains("len"), "{err}");
}

#[test]
fn modules_assemble_without_spills() {
    for (kernel, ptx) in [
        ("sell_spmv", sell_spmv::PTX),
        ("sell_spmm", sell_spmm::PTX),
        ("sell_frontier_max", sell_frontier_max::PTX),
    ] {
        lb::schedule::ptxas::assert_assembles(kernel, ptx);
    }
    for s in ALL {
        let module = lb::user_kernels(sell_spmv::IR, s).unwrap();
        lb::schedule::ptxas::assert_assembles(&format!("sell_spmv / {}", s.name()), module.ptx);
    }
}

/// A format whose `tiles` answers differently from call to call: three short tiles, then a
/// thousand long ones, alternately.
struct Fickle {
    few: DeviceTiles,
    many: DeviceTiles,
    calls: std::cell::Cell<usize>,
}

impl DeviceTileSet for Fickle {
    fn tiles(&self) -> &DeviceTiles {
        let n = self.calls.get();
        self.calls.set(n + 1);
        if n.is_multiple_of(2) {
            &self.few
        } else {
            &self.many
        }
    }
}

/// A launch reads one answer: its sizes, checks and kernel arguments agree, so a format that
/// answers differently gets a launch over one of its answers or an `Err`, never kernels walking a
/// thousand tiles into an output checked against three.
#[test]
fn a_format_that_answers_differently_is_read_once() {
    let dev = Device::default();
    let fickle = Fickle {
        few: DeviceTiles::upload(&dev, &Tiles::from_lengths(&[2, 0, 5]).unwrap()).unwrap(),
        many: DeviceTiles::upload(&dev, &Tiles::from_lengths(&[40; 1000]).unwrap()).unwrap(),
        calls: std::cell::Cell::new(0),
    };
    for &schedule in tile_length::SCHEDULES {
        for start in 0..2 {
            fickle.calls.set(start);
            let mut len = dev.upload(&[9u64; 3]).unwrap();
            match tile_length::launch_with(&dev, schedule, &fickle, &mut len) {
                Ok(_) => assert_eq!(dev.download(&len).unwrap(), [2, 0, 5], "{schedule}"),
                Err(lb::Error::Shape(msg)) => {
                    assert!(msg.contains("1000"), "{schedule}: {msg}");
                    assert_eq!(dev.download(&len).unwrap(), [9; 3], "{schedule}");
                }
                Err(e) => panic!("{schedule}: {e}"),
            }
        }
    }
}
