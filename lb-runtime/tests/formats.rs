//! Csr validation and construction from triplets.

use lb_runtime::{Csr, Error};

fn rejects(r: lb_runtime::Result<Csr<f32>>, want: &str) {
    match r {
        Err(Error::InvalidMatrix(m)) => assert!(m.contains(want), "`{m}` lacks `{want}`"),
        other => panic!("expected InvalidMatrix({want}), got {other:?}"),
    }
}

#[test]
fn accepts_valid_and_empty_matrices() {
    let m = Csr::new(
        3,
        3,
        vec![0, 2, 2, 3],
        vec![0, 2, 1],
        vec![1.0f32, 2.0, 3.0],
    )
    .unwrap();
    assert_eq!(m.nnz(), 3);
    assert_eq!(m.row(1), 2..2);
    assert_eq!(m.row(2), 2..3);
    Csr::<f32>::new(0, 0, vec![0], vec![], vec![]).unwrap();
    Csr::<f32>::new(0, 5, vec![0], vec![], vec![]).unwrap();
    Csr::<f32>::new(4, 2, vec![0; 5], vec![], vec![]).unwrap();
    assert_eq!(
        Csr::<f32>::empty(4, 2).unwrap(),
        Csr::new(4, 2, vec![0; 5], vec![], vec![]).unwrap()
    );
}

#[test]
fn rejects_each_invalid_shape() {
    rejects(
        Csr::new(2, 2, vec![0, 1], vec![0], vec![1.0]),
        "row_offsets has 2 entries; 2 rows need 3",
    );
    rejects(
        Csr::new(0, 2, vec![], vec![], vec![]),
        "row_offsets has 0 entries",
    );
    rejects(
        Csr::new(1, 2, vec![1, 1], vec![0], vec![1.0]),
        "row_offsets[0] is 1",
    );
    rejects(
        Csr::new(3, 2, vec![0, 2, 1, 2], vec![0, 1], vec![1.0, 2.0]),
        "row 1 ends before it starts",
    );
    rejects(
        Csr::new(1, 2, vec![0, 2], vec![0], vec![1.0, 2.0]),
        "2 but there are 1 column indices",
    );
    rejects(
        Csr::new(1, 2, vec![0, 2], vec![0, 1], vec![1.0]),
        "2 but there are 1 values",
    );
    rejects(
        Csr::new(2, 2, vec![0, 1, 3], vec![0, 1, 2], vec![1.0; 3]),
        "entry 2 (row 1) has column 2",
    );
    rejects(
        Csr::new(1, u32::MAX as usize + 2, vec![0, 0], vec![], vec![]),
        "exceed the u32 index range",
    );
    // 2^32 columns is the most u32 indices address.
    Csr::<f32>::new(
        1,
        u32::MAX as usize + 1,
        vec![0, 1],
        vec![u32::MAX],
        vec![1.0],
    )
    .unwrap();
}

#[test]
fn validate_catches_edits_after_construction() {
    let mut m = Csr::new(1, 2, vec![0, 1], vec![1], vec![1.0f32]).unwrap();
    m.col_indices[0] = 5;
    assert!(matches!(m.validate(), Err(Error::InvalidMatrix(_))));
}

#[test]
fn from_triplets_matches_dense_reference() {
    let triplets = vec![
        (2, 1, 1.0f32),
        (0, 3, 2.0),
        (2, 1, 0.5),
        (1, 0, -1.0),
        (0, 0, 4.0),
        (2, 0, 3.0),
    ];
    let m = Csr::from_triplets(4, 4, triplets.clone()).unwrap();
    m.validate().unwrap();
    let mut want = [[0.0f32; 4]; 4];
    for &(r, c, v) in &triplets {
        want[r][c] += v;
    }
    let mut got = [[0.0f32; 4]; 4];
    for (r, row) in got.iter_mut().enumerate() {
        let cols: Vec<u32> = m.row(r).map(|e| m.col_indices[e]).collect();
        assert!(
            cols.windows(2).all(|w| w[0] < w[1]),
            "row {r} sorted without duplicates"
        );
        for e in m.row(r) {
            row[m.col_indices[e] as usize] = m.values[e];
        }
    }
    assert_eq!(got, want);
    assert_eq!(m.nnz(), 5);
    assert_eq!(m.row(3), 5..5);
}

#[test]
fn from_triplets_rejects_out_of_range() {
    rejects(
        Csr::from_triplets(2, 2, vec![(0, 0, 1.0f32), (2, 0, 1.0)]),
        "triplet 1 is at (2, 0)",
    );
    rejects(
        Csr::from_triplets(2, 2, vec![(0, 2, 1.0f32)]),
        "triplet 0 is at (0, 2)",
    );
}

/// `TileSet::tile_atoms` finds a COO's rows by binary search; it must agree with the offsets
/// computed from the row indices, on empty rows, trailing empty rows and no atoms at all.
#[test]
fn coo_tile_atoms_match_its_row_offsets() {
    use lb_runtime::TileSet;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for case in 0..40 {
        let rows = [0usize, 1, 7, 64][case % 4];
        let mut triplets = Vec::new();
        for r in 0..rows {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Most rows empty or short, an occasional long one.
            let len = match state % 8 {
                0..=3 => 0,
                7 => 40,
                n => n as usize,
            };
            triplets.extend((0..len).map(|c| (r, c % 5, 1.0f32)));
        }
        let csr = Csr::from_triplets(rows, 5, triplets).unwrap();
        let coo = csr.to_coo().unwrap();
        let offsets = coo.row_offsets().unwrap();
        assert_eq!(TileSet::num_tiles(&coo), rows);
        for t in 0..rows {
            assert_eq!(
                coo.tile_atoms(t),
                offsets[t]..offsets[t + 1],
                "case {case}, row {t}"
            );
        }
    }
}
