//! Launches a safe caller can get wrong, each an `Err` that names the argument and leaves every
//! buffer untouched: arguments allocated by another device, and slices too short for the
//! indices the body reads them with (checked once on the host, not per access on the GPU).

use lb::prelude::*;
use lb::Error;

#[load_balanced(schedule = "thread_mapped, merge_path", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// Column gathers through a local, and a tile-indexed read and write.
#[load_balanced(schedule = "thread_mapped, warp_mapped")]
fn relax(a: &Csr<f32>, dist: &mut [f32], #[tile] u: usize, #[atom] e: usize) {
    let v = a.col_indices[e] as usize;
    let d = dist[u] + a.values[e];
    atomic_min(&mut dist[v], d);
}

/// An index the host cannot bound (`nz % 7`): no host check, so the kernels test it.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn unbounded(a: &Csr<f32>, w: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * w[nz % 7]
}

fn matrix() -> Csr<f32> {
    lb::generate::power_law(300, 200, 5.0, 3)
}

#[test]
fn arguments_of_another_device_are_refused_and_nothing_is_written() {
    let a = matrix();
    let x = lb::generate::random_vector(a.num_cols, 1);
    let (dev, other) = (Device::simulator(), Device::simulator());
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let foreign_x = other.upload(&x).unwrap();
    let mut dy = dev.upload(&vec![7.0f32; a.num_rows]).unwrap();
    let mut foreign_y = other.upload(&vec![7.0f32; a.num_rows]).unwrap();
    let foreign_a = DeviceCsr::upload(&other, &a).unwrap();
    for &s in spmv::SCHEDULES {
        let e = spmv::launch_with(&dev, s, &da, &foreign_x, &mut dy).unwrap_err();
        assert!(
            matches!(&e, Error::DeviceMismatch { what } if what.contains("`x`")),
            "{}: {e}",
            s.name()
        );
        let e = spmv::launch_with(&dev, s, &da, &dx, &mut foreign_y).unwrap_err();
        assert!(
            matches!(&e, Error::DeviceMismatch { what } if what.contains("`y`")),
            "{}: {e}",
            s.name()
        );
        let e = spmv::launch_with(&dev, s, &foreign_a, &dx, &mut dy).unwrap_err();
        assert!(
            matches!(&e, Error::DeviceMismatch { what } if what.contains("`a`")),
            "{}: {e}",
            s.name()
        );
    }
    assert_eq!(da.download().unwrap(), a, "the matrix is untouched");
    assert_eq!(dev.download(&dy).unwrap(), vec![7.0; a.num_rows]);
    assert_eq!(other.download(&foreign_y).unwrap(), vec![7.0; a.num_rows]);
    let mut dist = other.upload(&vec![1.0f32; a.num_rows]).unwrap();
    let e = relax::launch(&dev, &da, &mut dist).unwrap_err();
    assert!(
        matches!(&e, Error::DeviceMismatch { what } if what.contains("`dist`")),
        "{e}"
    );
}

#[test]
fn a_slice_shorter_than_what_indexes_it_is_a_shape_error() {
    let a = matrix();
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    for short in [0, 1, a.num_cols - 1] {
        let dx = dev.upload(&vec![1.0f32; short]).unwrap();
        let mut dy = dev.upload(&vec![7.0f32; a.num_rows]).unwrap();
        for &s in spmv::SCHEDULES {
            let e = spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(e, Error::Shape(_))
                    && text.contains("`x`")
                    && text.contains(&format!("{short} elements"))
                    && text.contains("a.col_indices"),
                "{}: {text}",
                s.name()
            );
        }
        assert_eq!(dev.download(&dy).unwrap(), vec![7.0; a.num_rows]);
    }
    // Exactly the column count is enough.
    let x = lb::generate::random_vector(a.num_cols, 2);
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
    let mut want = vec![0.0; a.num_rows];
    spmv::cpu(&a, &x, &mut want);
    for (g, w) in dev.download(&dy).unwrap().iter().zip(&want) {
        assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{g} vs {w}");
    }

    // A square matrix: `dist` is read at the tile and written at the column.
    let sq = lb::generate::power_law(250, 250, 4.0, 9);
    let dsq = DeviceCsr::upload(&dev, &sq).unwrap();
    for short in [0, 249] {
        let mut dist = dev.upload(&vec![1.0f32; short]).unwrap();
        for &s in relax::SCHEDULES {
            let e = relax::launch_with(&dev, s, &dsq, &mut dist).unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(e, Error::Shape(_)) && text.contains("`dist`"),
                "{}: {text}",
                s.name()
            );
        }
    }
}

#[test]
fn an_index_the_host_cannot_bound_gets_no_host_check() {
    // One nonzero: `w[nz % 7]` reads `w[0]` only, so a one-element `w` is right here, and the
    // launcher must not refuse it by a bound it cannot know.
    let a = Csr::from_triplets(1, 1, vec![(0, 0, 3.0f32)]).unwrap();
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dw = dev.upload(&[2.0f32]).unwrap();
    let mut dy = dev.upload(&[0.0f32]).unwrap();
    unbounded::launch(&dev, &da, &dw, &mut dy).unwrap();
    assert_eq!(dev.download(&dy).unwrap(), vec![6.0]);
    // Two nonzeros read `w[1]`, past the one element: the kernel reports it, nothing faults.
    let a = Csr::from_triplets(1, 2, vec![(0, 0, 3.0f32), (0, 1, 1.0)]).unwrap();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let e = unbounded::launch(&dev, &da, &dw, &mut dy).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfBounds { param, index } if param == "w" && *index == 1),
        "{e}"
    );
}

/// A raw identifier names the kernel without its `r#`.
#[load_balanced(schedule = "thread_mapped", reduce = "sum", output = "y")]
fn r#match(a: &Csr<f32>, r#type: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * r#type[a.col_indices[nz] as usize]
}

#[test]
fn raw_identifiers_name_kernels_and_parameters() {
    assert!(r#match::PTX.contains(".entry match_thread_mapped("));
    assert!(r#match::PTX.contains("type_ptr"));
    let a = Csr::from_triplets(2, 2, vec![(0, 1, 3.0f32), (1, 0, 2.0)]).unwrap();
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&[5.0f32, 7.0]).unwrap();
    let mut dy = dev.upload(&[0.0f32; 2]).unwrap();
    r#match::launch(&dev, &da, &dx, &mut dy).unwrap();
    assert_eq!(dev.download(&dy).unwrap(), vec![21.0, 10.0]);
}

#[test]
fn a_schedule_not_generated_is_named_as_written() {
    let a = matrix();
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&vec![1.0f32; a.num_cols]).unwrap();
    let mut dy = dev.upload(&vec![0.0f32; a.num_rows]).unwrap();
    for (s, shown) in [
        (Schedule::GroupMapped(3), "group_mapped(3)"),
        (Schedule::Lrb, "lrb"),
    ] {
        let e = spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap_err();
        assert!(
            matches!(&e, Error::ScheduleNotGenerated { requested, generated }
                if requested == shown && generated == "thread_mapped, merge_path"),
            "{e}"
        );
    }
}

/// Row sums over a frontier of rows, bounds-checked.
#[load_balanced(
    schedule = "thread_mapped, warp_mapped, merge_path",
    reduce = "sum",
    output = "y",
    tiles = "frontier",
    checked
)]
fn frontier_sums(a: &Csr<f32>, frontier: &[u32], #[atom] nz: usize) -> f32 {
    a.values[nz]
}

#[test]
fn a_frontier_entry_that_is_no_tile_is_reported_against_the_frontier() {
    let a = matrix();
    let dev = Device::simulator();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let bad = a.num_rows as u32 + 5;
    let frontier = dev.upload(&[0u32, 3, bad, 1]).unwrap();
    // The output is indexed by tile: one entry per row of `a`.
    let mut dy = dev.upload(&vec![0.0f32; a.num_rows]).unwrap();
    for &s in frontier_sums::SCHEDULES {
        let e = frontier_sums::launch_with(&dev, s, &da, &frontier, &mut dy).unwrap_err();
        assert!(
            matches!(&e, Error::OutOfBounds { param, index }
                if param == "frontier" && *index == u64::from(bad)),
            "{}: {e}",
            s.name()
        );
    }
}
