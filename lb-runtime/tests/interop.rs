//! Round trips between lb's formats and sprs / nalgebra-sparse (features `sprs` and
//! `nalgebra-sparse`; `scripts/test.sh` runs them), checked against each library's own
//! construction from the same triplets, and the conversions' refusals.
#![cfg(any(feature = "sprs", feature = "nalgebra-sparse"))]

use lb_runtime::{Coo, Csc, Csr, Error};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Random triplets with duplicates, in random order.
fn triplets(seed: u64, rows: usize, cols: usize, n: usize) -> Vec<(usize, usize, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t: Vec<(usize, usize, f64)> = (0..n)
        .map(|_| {
            (
                rng.random_range(0..rows),
                rng.random_range(0..cols),
                rng.random_range(-1.0..1.0),
            )
        })
        .collect();
    let dups: Vec<_> = t.iter().take(n / 10).copied().collect();
    t.extend(dups);
    t
}

/// A valid CSR with unsorted rows and no duplicates: `from_triplets`, then each row reversed.
fn unsorted_csr(seed: u64, rows: usize, cols: usize, n: usize) -> Csr<f64> {
    let mut m = Csr::from_triplets(rows, cols, triplets(seed, rows, cols, n)).unwrap();
    for r in 0..rows {
        let range = m.row(r);
        m.col_indices[range.clone()].reverse();
        m.values[range].reverse();
    }
    m.validate().unwrap();
    m
}

/// `coo` holds the triplets `t`, in row order and in `t`'s order within a row (a stable sort).
fn assert_sorted_by_row(coo: &Coo<f64>, t: &[(usize, usize, f64)]) {
    let mut want = t.to_vec();
    want.sort_by_key(|&(r, _, _)| r);
    let got: Vec<_> = (0..coo.nnz())
        .map(|e| {
            (
                coo.row_indices[e] as usize,
                coo.col_indices[e] as usize,
                coo.values[e],
            )
        })
        .collect();
    assert_eq!(got, want);
}

fn invalid_matrix<T: std::fmt::Debug>(r: Result<T, Error>, want: &str) {
    match r {
        Err(Error::InvalidMatrix(m)) => assert!(m.contains(want), "`{m}` lacks `{want}`"),
        other => panic!("expected InvalidMatrix containing `{want}`, got {other:?}"),
    }
}

#[cfg(feature = "sprs")]
mod sprs_round_trips {
    use super::*;
    use lb_runtime::sprs::{CsMat, TriMat};

    /// sprs's own CSR of the triplets (sums duplicates, sorts rows).
    fn reference(rows: usize, cols: usize, t: &[(usize, usize, f64)]) -> CsMat<f64> {
        let mut tri = TriMat::new((rows, cols));
        for &(r, c, v) in t {
            tri.add_triplet(r, c, v);
        }
        tri.to_csr()
    }

    #[test]
    fn csr_and_csc_round_trip() {
        for (seed, rows, cols, n) in [(1, 60, 45, 400), (2, 1, 1, 3), (3, 0, 0, 0), (4, 30, 1, 20)]
        {
            let t = triplets(seed, rows.max(1), cols.max(1), n);
            let t: Vec<_> = t
                .into_iter()
                .filter(|&(r, c, _)| r < rows && c < cols)
                .collect();
            let want = reference(rows, cols, &t);
            let lb = Csr::from_triplets(rows, cols, t.clone()).unwrap();
            let ours = CsMat::try_from(&lb).unwrap();
            assert_eq!(ours.indptr().raw_storage(), want.indptr().raw_storage());
            assert_eq!(ours.indices(), want.indices());
            // Duplicates are summed in file order by lb, in sorted order by sprs: compare closely.
            for (a, b) in ours.data().iter().zip(want.data()) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
            assert_eq!(Csr::try_from(&ours).unwrap(), lb);
            // CSC both ways, and across storages.
            let csc = lb.to_csc().unwrap();
            let sprs_csc = CsMat::try_from(&csc).unwrap();
            assert!(!sprs_csc.is_csr());
            assert_eq!(Csc::try_from(&sprs_csc).unwrap(), csc);
            assert_eq!(Csr::try_from(&sprs_csc).unwrap(), lb);
            assert_eq!(Csc::try_from(&ours).unwrap(), csc);
        }
    }

    #[test]
    fn unsorted_rows_come_out_sorted() {
        let m = unsorted_csr(5, 40, 50, 300);
        let s = CsMat::try_from(&m).unwrap();
        let sorted = m.to_csc().unwrap().to_csr().unwrap();
        assert_eq!(Csr::try_from(&s).unwrap(), sorted);
    }

    #[test]
    fn triplets_round_trip_sorted_by_row() {
        let t = triplets(6, 25, 30, 200);
        let mut tri = TriMat::new((25, 30));
        for &(r, c, v) in &t {
            tri.add_triplet(r, c, v);
        }
        let coo = Coo::try_from(&tri).unwrap();
        assert_sorted_by_row(&coo, &t);
        let back = TriMat::try_from(&coo).unwrap();
        assert_eq!(Coo::try_from(&back).unwrap(), coo);
    }

    #[test]
    fn refusals_are_errors() {
        let dup = Csr {
            num_rows: 2,
            num_cols: 3,
            row_offsets: vec![0, 2, 2],
            col_indices: vec![1, 1],
            values: vec![1.0, 2.0],
        };
        invalid_matrix(CsMat::try_from(&dup), "row 0 holds index 1 twice");
        let bad = Csr {
            num_rows: 1,
            num_cols: 3,
            row_offsets: vec![0, 1],
            col_indices: vec![7],
            values: vec![1.0],
        };
        invalid_matrix(CsMat::try_from(&bad), "");
        let wide = CsMat::new((1, 1 << 33), vec![0, 1], vec![(1 << 32) + 5], vec![1.0]);
        invalid_matrix(Csr::try_from(&wide), "exceeds the u32 index range");
        let bad_coo = Coo {
            num_rows: 2,
            num_cols: 2,
            row_indices: vec![0, 5],
            col_indices: vec![0, 0],
            values: vec![1.0, 2.0],
        };
        invalid_matrix(TriMat::try_from(&bad_coo), "outside");
    }
}

#[cfg(feature = "nalgebra-sparse")]
mod nalgebra_round_trips {
    use super::*;
    use lb_runtime::nalgebra_sparse::{CooMatrix, CscMatrix, CsrMatrix};

    /// nalgebra-sparse's own CSR of the triplets (sums duplicates, sorts rows).
    fn reference(rows: usize, cols: usize, t: &[(usize, usize, f64)]) -> CsrMatrix<f64> {
        let coo = CooMatrix::try_from_triplets(
            rows,
            cols,
            t.iter().map(|x| x.0).collect(),
            t.iter().map(|x| x.1).collect(),
            t.iter().map(|x| x.2).collect(),
        )
        .unwrap();
        CsrMatrix::from(&coo)
    }

    #[test]
    fn csr_and_csc_round_trip() {
        for (seed, rows, cols, n) in [(7, 70, 35, 500), (8, 1, 1, 2), (9, 0, 4, 0)] {
            let t: Vec<_> = triplets(seed, rows.max(1), cols.max(1), n)
                .into_iter()
                .filter(|&(r, c, _)| r < rows && c < cols)
                .collect();
            let want = reference(rows, cols, &t);
            let lb = Csr::from_triplets(rows, cols, t).unwrap();
            let ours = CsrMatrix::try_from(&lb).unwrap();
            assert_eq!(ours.row_offsets(), want.row_offsets());
            assert_eq!(ours.col_indices(), want.col_indices());
            for (a, b) in ours.values().iter().zip(want.values()) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
            assert_eq!(Csr::try_from(&ours).unwrap(), lb);
            let csc = lb.to_csc().unwrap();
            let na_csc = CscMatrix::try_from(&csc).unwrap();
            assert_eq!(na_csc, CscMatrix::from(&want));
            assert_eq!(Csc::try_from(&na_csc).unwrap(), csc);
        }
    }

    #[test]
    fn unsorted_rows_come_out_sorted() {
        let m = unsorted_csr(10, 40, 50, 300);
        let n = CsrMatrix::try_from(&m).unwrap();
        assert_eq!(
            Csr::try_from(&n).unwrap(),
            m.to_csc().unwrap().to_csr().unwrap()
        );
    }

    #[test]
    fn triplets_round_trip_sorted_by_row() {
        let t = triplets(11, 25, 30, 200);
        let na = CooMatrix::try_from_triplets(
            25,
            30,
            t.iter().map(|x| x.0).collect(),
            t.iter().map(|x| x.1).collect(),
            t.iter().map(|x| x.2).collect(),
        )
        .unwrap();
        let coo = Coo::try_from(&na).unwrap();
        assert_sorted_by_row(&coo, &t);
        let back = CooMatrix::try_from(&coo).unwrap();
        assert_eq!(Coo::try_from(&back).unwrap(), coo);
    }

    #[test]
    fn refusals_are_errors() {
        let dup = Csc {
            num_rows: 3,
            num_cols: 1,
            col_offsets: vec![0, 2],
            row_indices: vec![2, 2],
            values: vec![1.0, 2.0],
        };
        invalid_matrix(CscMatrix::try_from(&dup), "column 0 holds index 2 twice");
        let wide =
            CooMatrix::try_from_triplets(1 << 33, 1, vec![(1 << 32) + 1], vec![0], vec![1.0])
                .unwrap();
        invalid_matrix(Coo::try_from(&wide), "exceed");
        let bad = Coo {
            num_rows: 2,
            num_cols: 2,
            row_indices: vec![0, 1],
            col_indices: vec![0, 9],
            values: vec![1.0, 2.0],
        };
        invalid_matrix(CooMatrix::try_from(&bad), "outside");
    }
}
