//! Generators: deterministic per seed, and shaped as documented.

use lb_runtime::generate::{power_law, random_vector, uniform};

#[test]
fn deterministic_per_seed() {
    assert_eq!(power_law(500, 300, 8.0, 7), power_law(500, 300, 8.0, 7));
    assert_ne!(power_law(500, 300, 8.0, 7), power_law(500, 300, 8.0, 8));
    assert_eq!(uniform(100, 50, 5, 1), uniform(100, 50, 5, 1));
    assert_eq!(random_vector(64, 9), random_vector(64, 9));
    assert_ne!(random_vector(64, 9), random_vector(64, 10));
}

#[test]
fn power_law_has_the_mean_and_a_heavy_tail() {
    let (rows, avg) = (20_000, 16.0);
    let m = power_law(rows, 10_000, avg, 42);
    m.validate().unwrap();
    let mean = m.nnz() as f64 / rows as f64;
    assert!((mean - avg).abs() / avg < 0.05, "mean {mean}");
    let max = (0..rows).map(|r| m.row(r).len()).max().unwrap();
    assert!(max as f64 > 10.0 * avg, "longest row {max}: no heavy tail");
    for r in 0..rows {
        let cols: Vec<u32> = m.row(r).map(|e| m.col_indices[e]).collect();
        assert!(
            cols.windows(2).all(|w| w[0] < w[1]),
            "row {r} has sorted distinct columns"
        );
    }
    assert!(m.values.iter().all(|v| (-1.0..1.0).contains(v)));
}

#[test]
fn power_law_caps_rows_at_the_column_count() {
    let m = power_law(2_000, 20, 10.0, 5);
    m.validate().unwrap();
    assert!((0..2_000).all(|r| m.row(r).len() <= 20));
    assert!((0..2_000).any(|r| m.row(r).len() == 20));
}

#[test]
fn uniform_rows_have_exact_lengths() {
    let m = uniform(300, 40, 7, 3);
    m.validate().unwrap();
    assert!((0..300).all(|r| m.row(r).len() == 7));
    let full = uniform(10, 5, 9, 3);
    assert!((0..10).all(|r| full.row(r).len() == 5));
    assert_eq!(uniform(0, 5, 3, 1).nnz(), 0);
}

#[test]
fn random_vector_range() {
    let v = random_vector(10_000, 1);
    assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
    let mean: f32 = v.iter().sum::<f32>() / v.len() as f32;
    assert!(mean.abs() < 0.05);
}
