//! Matrix Market reading: every supported kind of file (coordinate and array, plain and gzip),
//! and every kind of malformed one with the line the error names.

use std::io::Write;

use lb_runtime::{
    parse_mtx, parse_mtx_bytes, parse_mtx_dense, read_mtx, read_mtx_dense, write_mtx, Csr,
    DenseMatrix, Error,
};

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

/// The error of parsing `bytes`, as (line, message).
fn bytes_error(bytes: &[u8]) -> (usize, String) {
    match parse_mtx_bytes::<f64>(bytes) {
        Err(Error::MatrixMarket { line, message }) => (line, message),
        other => panic!("expected a MatrixMarket error, got {other:?}"),
    }
}

#[test]
fn byte_order_mark_crlf_and_tabs_are_accepted() {
    let text = "\u{feff}%%MatrixMarket matrix coordinate real general\r\n% c\r\n2 2 2\r\n1\t2\t0.5\r\n2 1 -1e-3\r\n";
    let m = parse_mtx::<f64>(text).unwrap();
    assert_eq!(dense(&m), vec![vec![0.0, 0.5], vec![-0.001, 0.0]]);
    // The mark counts as part of line 1, so later lines keep their numbers.
    let (line, _) =
        line_of("\u{feff}%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 x\n");
    assert_eq!(line, 3);
}

#[test]
fn sixty_four_bit_integers_are_accepted() {
    let h = "%%MatrixMarket matrix coordinate integer general\n";
    // The largest u64 and the smallest i64 are integers; each is stored as the nearest float.
    let m = parse_mtx::<f64>(&format!(
        "{h}2 2 2\n1 1 18446744073709551615\n2 2 -9223372036854775808\n"
    ))
    .unwrap();
    assert_eq!(
        m.values,
        vec![18446744073709551615.0, -9223372036854775808.0]
    );
    for (value, want) in [
        ("18446744073709551616", "not an integer"),
        ("-9223372036854775809", "not an integer"),
        ("1e3", "not an integer"),
    ] {
        let (line, message) = line_of(&format!("{h}2 2 1\n1 1 {value}\n"));
        assert_eq!(line, 3);
        assert!(message.contains(want), "{value}: `{message}`");
    }
    // A 20-digit index that fits a u64 is read, and rejected for being outside the matrix.
    let (line, message) = line_of(&format!("{h}2 2 1\n% c\n10000000000000000000 1 1\n"));
    assert_eq!(line, 4);
    assert!(
        message.contains("row index 10000000000000000000 is outside"),
        "{message}"
    );
}

#[test]
fn bytes_that_are_not_utf8_name_their_line() {
    let h = b"%%MatrixMarket matrix coordinate real general\n";
    // In a comment they are harmless.
    let mut ok = h.to_vec();
    ok.extend_from_slice(b"% caf\xe9\n1 1 1\n1 1 2.5\n");
    assert_eq!(parse_mtx_bytes::<f64>(&ok).unwrap().values, vec![2.5]);
    for (body, want_line, want) in [
        (&b"1 1 1\n1 1 2\xff\n"[..], 3, "value `2\u{fffd}`"),
        (&b"1 1 1\n% c\n\xff1 1 2\n"[..], 4, "row index `\u{fffd}1`"),
        (&b"\xc3\xa9 1 1\n"[..], 2, "row count"),
    ] {
        let mut text = h.to_vec();
        text.extend_from_slice(body);
        let (line, message) = bytes_error(&text);
        assert_eq!(line, want_line, "{message}");
        assert!(message.contains(want), "`{message}` lacks `{want}`");
    }
    let (line, _) = bytes_error(b"%%MatrixMarket matrix coordinate r\xe9al general\n1 1 0\n");
    assert_eq!(line, 1);
}

/// A path in the temporary directory, unique to this process and `name`.
fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lb-runtime-mtx-{}-{name}", std::process::id()))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn gzip_files_are_read_whatever_their_name() {
    let m = lb_runtime::generate::power_law(300, 200, 5.0, 11);
    let mut text = Vec::new();
    write_mtx(&m, &mut text).unwrap();
    let packed = gzip(&text);
    for name in ["a.mtx.gz", "b.mtx"] {
        let path = temp_path(name);
        std::fs::write(&path, &packed).unwrap();
        let back = read_mtx::<f32>(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.unwrap(), m, "{name}");
    }
    // Two members (`cat a.gz b.gz`) are one text.
    let (head, tail) = text.split_at(text.len() / 2);
    let mut two = gzip(head);
    two.extend(gzip(tail));
    let path = temp_path("two.mtx.gz");
    std::fs::write(&path, &two).unwrap();
    let back = read_mtx::<f32>(&path);
    // A corrupt stream is an I/O error naming the file.
    let cut = &packed[..packed.len() / 2];
    std::fs::write(&path, cut).unwrap();
    let corrupt = read_mtx::<f32>(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back.unwrap(), m);
    match corrupt {
        Err(Error::Io { path: p, .. }) => assert_eq!(p, path),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // Compressed text handed to the text parser says what it is.
    let (line, message) = bytes_error(&packed);
    assert_eq!(line, 1);
    assert!(message.contains("gzip"), "{message}");
}

#[test]
fn array_files_read_column_major() {
    let d = parse_mtx_dense::<f64>(
        "%%MatrixMarket matrix array real general\n% 2 x 3\n2 3\n1\n2\n3\n\n4\n5.5\n-6e1\n",
    )
    .unwrap();
    assert_eq!((d.num_rows, d.num_cols), (2, 3));
    assert_eq!(d.values, vec![1.0, 2.0, 3.0, 4.0, 5.5, -60.0]);
    assert_eq!(
        (d.get(1, 2), d.get(0, 1), d.get(2, 0)),
        (Some(-60.0), Some(3.0), None)
    );
    // Symmetric: the lower triangle, column by column.
    let s = parse_mtx_dense::<f32>(
        "%%MatrixMarket matrix array integer symmetric\n3 3\n1\n2\n3\n4\n5\n6\n",
    )
    .unwrap();
    assert_eq!(s.values, vec![1.0, 2.0, 3.0, 2.0, 4.0, 5.0, 3.0, 5.0, 6.0]);
    // A right-hand side read from disk, gzip-compressed.
    let rhs: Vec<f64> = (0..50).map(|i| f64::from(i) * 0.25 - 3.0).collect();
    let mut text = String::from("%%MatrixMarket matrix array real general\n50 1\n");
    for v in &rhs {
        text.push_str(&format!("{v}\n"));
    }
    let path = temp_path("rhs.mtx.gz");
    std::fs::write(&path, gzip(text.as_bytes())).unwrap();
    let back = read_mtx_dense::<f64>(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        back.unwrap(),
        DenseMatrix {
            num_rows: 50,
            num_cols: 1,
            values: rhs
        }
    );
    let empty = parse_mtx_dense::<f64>("%%MatrixMarket matrix array real general\n0 4\n").unwrap();
    assert_eq!(
        (empty.num_rows, empty.num_cols, empty.values.len()),
        (0, 4, 0)
    );
}

#[test]
fn malformed_array_files_name_their_line() {
    let h = "%%MatrixMarket matrix array real general\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("{h}2 2\n1\n2\n3\n"), 6, "ends after 3 of 4"),
        (format!("{h}1 2\n1\n2\n3\n"), 5, "more values"),
        (format!("{h}2 1\n1\n2 3\n"), 4, "expected 1 value, found 2"),
        (format!("{h}2 1\n1\nx\n"), 4, "`x` is not a number"),
        (format!("{h}2 1 5\n"), 2, "2 numbers"),
        (format!("{h}4294967296 4294967296\n1\n"), 2, "hold at most"),
        (
            format!("{h}18446744073709551615 2\n1\n"),
            2,
            "more than usize::MAX",
        ),
        (
            "%%MatrixMarket matrix array integer general\n1 1\n1.5\n".into(),
            3,
            "not an integer",
        ),
        (
            "%%MatrixMarket matrix array real symmetric\n2 3\n".into(),
            2,
            "square",
        ),
        (
            "%%MatrixMarket matrix array pattern general\n1 1\n".into(),
            1,
            "pattern",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n1 1 0\n".into(),
            1,
            "read_mtx",
        ),
    ];
    for (text, want_line, want) in cases {
        match parse_mtx_dense::<f64>(&text) {
            Err(Error::MatrixMarket { line, message }) => {
                assert_eq!(line, want_line, "{text:?}: {message}");
                assert!(
                    message.contains(want),
                    "{text:?}: `{message}` lacks `{want}`"
                );
            }
            other => panic!("{text:?}: expected a MatrixMarket error, got {other:?}"),
        }
    }
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

    #[test]
    fn arbitrary_array_files_never_panic(text in "(%%MatrixMarket matrix array (real|integer) (general|symmetric)\n)?([0-9 .e%-]{0,8}\n){0,8}") {
        if let Ok(d) = parse_mtx_dense::<f64>(&text) {
            proptest::prop_assert_eq!(d.values.len(), d.num_rows * d.num_cols);
        }
    }
}
