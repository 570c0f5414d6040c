//! Matrix Market reading: every supported kind of file, and every kind of malformed one with
//! the line the error names.

use lb_runtime::{parse_mtx, read_mtx, write_mtx, Csr, Error};

fn dense(csr: &Csr<f64>) -> Vec<Vec<f64>> {
    let mut d = vec![vec![0.0; csr.num_cols]; csr.num_rows];
    for (r, row) in d.iter_mut().enumerate() {
        for e in csr.row(r) {
            row[csr.col_indices[e] as usize] += csr.values[e];
        }
    }
    d
}

fn line_of(text: &str) -> (usize, String) {
    match parse_mtx::<f64>(text) {
        Err(Error::MatrixMarket { line, message }) => (line, message),
        other => panic!("expected a MatrixMarket error, got {other:?}"),
    }
}

#[test]
fn general_real_with_comments_and_blank_lines() {
    let text = "%%MatrixMarket matrix coordinate real general\n% a comment\n\n3 4 4\n1 1 1.5\n% mid comment\n3 4 -2e1\n\n2 2 0.25\n1 3 7\n";
    let m = parse_mtx::<f64>(text).unwrap();
    assert_eq!((m.num_rows, m.num_cols, m.nnz()), (3, 4, 4));
    assert_eq!(m.row_offsets, vec![0, 2, 3, 4]);
    assert_eq!(m.col_indices, vec![0, 2, 1, 3]);
    assert_eq!(m.values, vec![1.5, 7.0, 0.25, -20.0]);
}

#[test]
fn symmetric_integer_mirrors_off_diagonal() {
    let text = "%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n1 1 4\n2 1 -1\n3 2 5\n";
    let m = parse_mtx::<f64>(text).unwrap();
    assert_eq!(
        dense(&m),
        vec![
            vec![4.0, -1.0, 0.0],
            vec![-1.0, 0.0, 5.0],
            vec![0.0, 5.0, 0.0]
        ]
    );
    assert_eq!(m.nnz(), 5);
}

#[test]
fn pattern_general_and_symmetric_are_ones() {
    let g = parse_mtx::<f32>("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n1 3\n2 1\n")
        .unwrap();
    assert_eq!(g.values, vec![1.0, 1.0]);
    assert_eq!(g.col_indices, vec![2, 0]);
    let s =
        parse_mtx::<f64>("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n1 1\n2 1\n")
            .unwrap();
    assert_eq!(dense(&s), vec![vec![1.0, 1.0], vec![1.0, 0.0]]);
}

#[test]
fn banner_is_case_insensitive_and_duplicates_sum() {
    let m =
        parse_mtx::<f64>("%%MatrixMarket MATRIX Coordinate Real General\n1 1 2\n1 1 1\n1 1 2\n")
            .unwrap();
    assert_eq!(m.values, vec![3.0]);
}

#[test]
fn empty_matrices() {
    let m = parse_mtx::<f64>("%%MatrixMarket matrix coordinate real general\n0 0 0\n").unwrap();
    assert_eq!((m.num_rows, m.num_cols, m.nnz()), (0, 0, 0));
    let m = parse_mtx::<f64>("%%MatrixMarket matrix coordinate real general\n3 2 0\n").unwrap();
    assert_eq!(m.row_offsets, vec![0, 0, 0, 0]);
}

#[test]
fn malformed_files_name_their_line() {
    let h = "%%MatrixMarket matrix coordinate real general\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (String::new(), 1, "empty"),
        (
            "%MatrixMarket matrix coordinate real general\n1 1 0\n".into(),
            1,
            "banner",
        ),
        (
            "%%MatrixMarket matrix coordinate real\n1 1 0\n".into(),
            1,
            "banner",
        ),
        (
            "%%MatrixMarket matrix array real general\n1 1\n1\n".into(),
            1,
            "array",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n1 1 0\n".into(),
            1,
            "complex",
        ),
        (
            "%%MatrixMarket matrix coordinate real skew-symmetric\n1 1 0\n".into(),
            1,
            "skew-symmetric",
        ),
        (format!("{h}% only a comment\n"), 3, "size line"),
        (format!("{h}\n2 x 1\n1 1 1\n"), 3, "column count"),
        (format!("{h}2 2\n"), 2, "3 numbers"),
        (format!("{h}2 2 -1\n"), 2, "entry count"),
        (
            "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n".into(),
            2,
            "square",
        ),
        (format!("{h}2 2 3\n1 1 1\n2 2 2\n"), 5, "ends after 2 of 3"),
        (format!("{h}2 2 1\n1 1 1\n% c\n2 2 2\n"), 5, "more entries"),
        (format!("{h}2 2 1\n0 1 1\n"), 3, "row index 0"),
        (format!("{h}2 2 1\n3 1 1\n"), 3, "row index 3"),
        (format!("{h}2 2 1\n1 3 1\n"), 3, "column index 3"),
        (format!("{h}2 2 1\n1 -1 1\n"), 3, "column index `-1`"),
        (format!("{h}2 2 1\n1 1 abc\n"), 3, "`abc` is not a number"),
        (format!("{h}2 2 1\n1 1\n"), 3, "expected 3 fields"),
        (format!("{h}2 2 1\n1 1 1 1\n"), 3, "expected 3 fields"),
        (
            "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n".into(),
            3,
            "not an integer",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n".into(),
            3,
            "expected 2 fields",
        ),
    ];
    for (text, want_line, want_msg) in cases {
        let (line, message) = line_of(&text);
        assert_eq!(line, want_line, "{text:?}: {message}");
        assert!(
            message.contains(want_msg),
            "{text:?}: `{message}` lacks `{want_msg}`"
        );
    }
}

#[test]
fn write_then_read_round_trips() {
    let m = lb_runtime::generate::power_law(50, 40, 4.0, 3);
    let mut text = Vec::new();
    write_mtx(&m, &mut text).unwrap();
    let back = parse_mtx::<f32>(std::str::from_utf8(&text).unwrap()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn read_from_disk_and_missing_file() {
    let path = std::env::temp_dir().join(format!("lb-runtime-mtx-{}.mtx", std::process::id()));
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n1 2 1\n1 2 3.5\n",
    )
    .unwrap();
    let m = read_mtx::<f32>(&path).unwrap();
    assert_eq!(m.values, vec![3.5]);
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(read_mtx::<f32>(&path), Err(Error::Io { .. })));
}

proptest::proptest! {
    /// Any text, and any line-level mangling of a valid file, gives a matrix or an error.
    #[test]
    fn never_panics(text in "(%%MatrixMarket matrix coordinate (real|integer|pattern) (general|symmetric)\n)?([0-9 .e%-]{0,12}\n){0,6}") {
        if let Ok(m) = parse_mtx::<f32>(&text) {
            m.validate().unwrap();
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(text in "\\PC{0,200}") {
        let _ = parse_mtx::<f64>(&text);
    }
}
