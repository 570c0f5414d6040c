//! The GCN layer of `examples/gcn.rs` (its module, compiled in here) on the simulator: both
//! aggregations under every generated schedule pass the example's own f64 check, on the
//! normalised power-law graph it runs by default (smaller) and on a rectangular matrix with empty
//! rows taken as it is; the normalisation is checked by a property the reference does not use.

#[path = "../examples/gcn/layer.rs"]
mod layer;

use layer::{check_schedules, normalized_adjacency, transform, Layer, SCHEDULES};
use lb::prelude::*;

/// Runs the example's check on the simulator and returns its table; fails on any mismatch.
fn table(a: Csr<f32>, features: usize, k: usize) -> Vec<String> {
    let layer = Layer::new(a, features, k, 3);
    let mut lines = Vec::new();
    let ok = check_schedules(&Device::simulator(), &layer, 1, &mut |line| {
        lines.push(line.to_string())
    })
    .unwrap();
    assert!(ok, "k = {k}:\n{}", lines.join("\n"));
    lines
}

/// Every schedule has its row, judged `ok`, for lane counts on both sides of a warp.
#[test]
fn every_schedule_matches_the_reference_on_a_normalised_power_law_graph() {
    let a = normalized_adjacency(&lb::generate::power_law(300, 300, 6.0, 5)).unwrap();
    for k in [32, 33] {
        let lines = table(a.clone(), 16, k);
        assert_eq!(lines.len(), 1 + SCHEDULES.len(), "{lines:?}");
        for (line, schedule) in lines[1..].iter().zip(SCHEDULES) {
            assert!(line.starts_with(schedule.name()), "{line}");
            assert!(line.ends_with("ok"), "{line}");
        }
    }
}

/// `--as-is`: a matrix used as Â without normalisation, not square, some rows empty (their mean
/// is the identity 0, not a division by zero).
#[test]
fn a_rectangular_matrix_with_empty_rows_is_aggregated_as_given() {
    let a = lb::generate::power_law(200, 350, 1.5, 9);
    assert!((0..a.num_rows).any(|row| a.row(row).is_empty()));
    table(a, 8, 5);
}

/// Â = D^-1/2 (A + Aᵀ + I) D^-1/2 is symmetric with a full diagonal, and √d (d the row lengths of
/// A + Aᵀ + I) is its eigenvector of eigenvalue 1: (Â·√d)_i = Σ_j √d_j / √(d_i d_j) = d_i / √d_i.
#[test]
fn the_normalised_adjacency_is_symmetric_and_keeps_the_square_root_of_the_degrees() {
    let hat = normalized_adjacency(&lb::generate::power_law(400, 400, 5.0, 11)).unwrap();
    let entry = |i: usize, j: usize| {
        hat.row(i)
            .find(|&nz| hat.col_indices[nz] as usize == j)
            .map(|nz| hat.values[nz])
    };
    let sqrt_d: Vec<f64> = (0..hat.num_rows)
        .map(|i| (hat.row(i).len() as f64).sqrt())
        .collect();
    for i in 0..hat.num_rows {
        assert!(entry(i, i).is_some(), "no self-loop at {i}");
        let mut product = 0.0f64;
        for nz in hat.row(i) {
            let j = hat.col_indices[nz] as usize;
            assert_eq!(entry(j, i), Some(hat.values[nz]), "({i}, {j})");
            product += f64::from(hat.values[nz]) * sqrt_d[j];
        }
        assert!(
            (product - sqrt_d[i]).abs() <= 1e-5 * sqrt_d[i],
            "row {i}: {product} vs {}",
            sqrt_d[i]
        );
    }
    let e = normalized_adjacency(&lb::generate::power_law(3, 4, 1.0, 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("square") && e.contains("3 × 4"), "{e}");
}

/// H = X·W on the host, row-major, on numbers small enough to check by hand.
#[test]
fn the_host_transform_is_a_row_major_product() {
    // X = [[1, 2, 3], [4, 5, 6]], W = [[1, 0], [0, 1], [1, -1]].
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let w = [1.0, 0.0, 0.0, 1.0, 1.0, -1.0];
    assert_eq!(transform(&x, &w, 3, 2), vec![4.0, -1.0, 10.0, -1.0]);
}
