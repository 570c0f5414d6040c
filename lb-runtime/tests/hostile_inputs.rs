//! Hostile inputs: Matrix Market headers that declare absurd sizes, constructors and conversions
//! given overflowing dimensions, and absurd simulator allocations all return `Err` quickly, never
//! panic or abort; property tests mutate valid files and check the reader never panics, and feed
//! the constructors arbitrary arrays and sizes.

use std::time::{Duration, Instant};

use lb_runtime::{
    parse_mtx, parse_mtx_bytes, Coo, Csc, Csr, Device, DeviceCoo, DeviceQueue, Error,
};
use proptest::prelude::*;

const HEADER: &str = "%%MatrixMarket matrix coordinate real general\n";

/// Parses `text` and returns its error, failing if it parses or takes longer than a second.
fn parse_err(text: &str) -> Error {
    let start = Instant::now();
    let result = parse_mtx::<f64>(text);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "{text:?} took {took:?} to parse"
    );
    match result {
        Ok(m) => panic!(
            "{text:?} parsed as a {} × {} matrix",
            m.num_rows, m.num_cols
        ),
        Err(e) => e,
    }
}

/// Asserts `text` is a Matrix Market error whose message contains `want`.
fn rejects(text: &str, want: &str) {
    match parse_err(text) {
        Error::MatrixMarket { message, .. } => {
            assert!(
                message.contains(want),
                "{text:?}: `{message}` lacks `{want}`"
            )
        }
        other => panic!("{text:?}: expected a MatrixMarket error, got {other:?}"),
    }
}

#[test]
fn absurd_size_lines_are_errors() {
    for size in [
        "1000000000000000000 3 0",
        "18446744073709551615 3 0",
        "2305843009213693952 3 0",
        "1000000000 3 0",
        "18446744073709551615 18446744073709551615 0",
        "9223372036854775807 9223372036854775807 9223372036854775807",
    ] {
        rejects(&format!("{HEADER}{size}\n"), "");
    }
    // The row count alone drives the row offsets: say so, with the bytes it would take.
    rejects(
        &format!("{HEADER}1000000000 3 0\n"),
        "the row offsets alone would take 8000000008 bytes",
    );
    rejects(
        &format!("{HEADER}3 18446744073709551615 0\n"),
        "exceed the u32 index range",
    );
}

#[test]
fn entry_counts_beyond_the_text_are_errors() {
    rejects(
        &format!("{HEADER}3 3 18446744073709551615\n1 1 1\n"),
        "the file is truncated or the entry count is wrong",
    );
    rejects(
        &format!("{HEADER}3 3 1000000\n1 1 1\n2 2 2\n"),
        "hold at most",
    );
    // Symmetric files reserve two slots per entry: that product is checked too.
    rejects(
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 9223372036854775807\n1 1 1\n",
        "hold at most",
    );
    // Counts the text can hold still read to the end and name what is missing.
    rejects(
        &format!("{HEADER}2 2 3\n1 1 1\n2 2 2\n"),
        "ends after 2 of 3",
    );
}

#[test]
fn malformed_size_lines_are_errors() {
    for (size, want) in [
        ("-1 3 0", "row count `-1`"),
        ("3 -3 0", "column count `-3`"),
        ("3 3 -1", "entry count `-1`"),
        ("3 3", "3 numbers"),
        ("3", "3 numbers"),
        ("3 3 0 0", "3 numbers"),
        ("18446744073709551616 3 0", "row count"),
        ("1e9 3 0", "row count"),
        ("+ 3 0", "row count"),
    ] {
        rejects(&format!("{HEADER}{size}\n"), want);
    }
}

#[test]
fn entries_outside_the_matrix_are_errors() {
    rejects(&format!("{HEADER}0 0 1\n1 1 1\n"), "outside 1..=0");
    rejects(&format!("{HEADER}0 3 1\n1 1 1\n"), "row index 1 is outside");
    rejects(&format!("{HEADER}2 2 1\n3 1 1\n"), "row index 3");
    rejects(&format!("{HEADER}2 2 1\n1 3 1\n"), "column index 3");
    rejects(
        &format!("{HEADER}2 2 1\n18446744073709551615 1 1\n"),
        "row index 18446744073709551615",
    );
    rejects(
        &format!("{HEADER}2 2 1\n1 18446744073709551616 1\n"),
        "not a positive integer",
    );
    rejects(&format!("{HEADER}2 2 1\n1 -1 1\n"), "column index `-1`");
    rejects(&format!("{HEADER}2 2 1\n1\n"), "expected 3 fields");
}

#[test]
fn plausible_sizes_still_parse() {
    // Tall, empty matrices up to the floor are accepted whatever the file's length.
    let m = parse_mtx::<f64>(&format!("{HEADER}1000000 1000000 0\n")).unwrap();
    assert_eq!((m.num_rows, m.num_cols, m.nnz()), (1_000_000, 1_000_000, 0));
    assert_eq!(m.row_offsets.len(), 1_000_001);
    let m = parse_mtx::<f64>(&format!("{HEADER}3 4294967296 1\n3 4294967296 2.5\n")).unwrap();
    assert_eq!(m.col_indices, vec![u32::MAX]);
}

#[test]
fn constructors_with_overflowing_sizes_are_errors() {
    let is_invalid = |r: lb_runtime::Result<Csr<f32>>, want: &str| match r {
        Err(Error::InvalidMatrix(m)) => assert!(m.contains(want), "`{m}` lacks `{want}`"),
        other => panic!("expected InvalidMatrix, got {other:?}"),
    };
    // rows + 1 overflows.
    is_invalid(Csr::empty(usize::MAX, 3), "more than a usize can count");
    is_invalid(
        Csr::from_triplets(usize::MAX, 3, vec![(0, 0, 1.0)]),
        "more than a usize can count",
    );
    // (rows + 1) × 8 bytes overflows.
    is_invalid(Csr::empty(usize::MAX / 4, 3), "need more than");
    // Representable, but far more than any host has: the error names the bytes asked for.
    is_invalid(
        Csr::empty(usize::MAX / 16, 3),
        &format!("need {} bytes", (usize::MAX / 16 + 1) * 8),
    );
    is_invalid(
        Csr::from_triplets(1 << 60, 3, vec![(5, 1, 1.0)]),
        "which the host cannot allocate",
    );
    is_invalid(Csr::empty(3, usize::MAX), "exceed the u32 index range");
    // Valid sizes are unchanged.
    assert_eq!(Csr::<f32>::empty(2, 3).unwrap().row_offsets, vec![0, 0, 0]);
}

#[test]
fn conversions_of_absurd_or_invalid_matrices_are_errors() {
    // Fields are public, so a matrix can claim any size: conversions validate first.
    let mut tall = Csr::<f32>::empty(2, 2).unwrap();
    tall.num_rows = usize::MAX;
    assert!(matches!(tall.to_csc(), Err(Error::InvalidMatrix(_))));
    assert!(matches!(tall.to_coo(), Err(Error::InvalidMatrix(_))));

    let coo = Coo::<f32> {
        num_rows: usize::MAX,
        num_cols: 1,
        row_indices: vec![],
        col_indices: vec![],
        values: vec![],
    };
    assert!(matches!(coo.to_csr(), Err(Error::InvalidMatrix(_))));
    assert!(matches!(coo.to_csc(), Err(Error::InvalidMatrix(_))));
    assert!(matches!(coo.row_offsets(), Err(Error::InvalidMatrix(_))));

    let csc = Csc::<f32> {
        num_rows: 1,
        num_cols: usize::MAX,
        col_offsets: vec![0],
        row_indices: vec![],
        values: vec![],
    };
    assert!(matches!(csc.to_csr(), Err(Error::InvalidMatrix(_))));
    assert!(matches!(csc.to_coo(), Err(Error::InvalidMatrix(_))));
}

#[test]
fn device_coo_upload_of_absurd_sizes_is_an_error() {
    let dev = Device::simulator();
    // The row offsets are computed on the host at upload, from a row count that may be
    // anything: validated first, so no allocation is attempted.
    let mut bad = Coo::<f32>::new(0, 0, vec![], vec![], vec![]).unwrap();
    bad.num_rows = usize::MAX;
    assert!(matches!(
        DeviceCoo::upload(&dev, &bad),
        Err(Error::InvalidMatrix(_))
    ));
}

#[test]
fn absurd_simulator_allocations_are_errors() {
    let dev = Device::simulator();
    // Element count × size overflows.
    assert!(dev.zeros::<f32>(usize::MAX / 2).is_err());
    // Fits in a usize but not in a simulated allocation: the error names the bytes.
    let n = usize::MAX / 8;
    match dev.zeros::<f32>(n) {
        Err(Error::Sim(e)) => {
            let msg = e.to_string();
            assert!(msg.contains(&(n * 4).to_string()), "{msg}");
        }
        other => panic!("expected a simulator error, got {other:?}"),
    }
    assert!(matches!(
        dev.zeros::<u64>(1 << 40),
        Err(Error::Sim(lb_ptx::sim::SimError::AllocTooLarge { .. }))
    ));
    assert!(DeviceQueue::new(&dev, usize::MAX).is_err());
    assert!(matches!(
        DeviceQueue::new(&dev, usize::MAX / 8),
        Err(Error::Sim(_))
    ));
    let mut q = DeviceQueue::new(&dev, 4).unwrap();
    assert!(q.grow(usize::MAX / 8).is_err());
    assert_eq!(q.capacity(), 4, "a failed grow keeps the queue");
    // The device still works afterwards.
    assert_eq!(dev.zeros::<f32>(3).unwrap().download().unwrap(), [0.0; 3]);
}

/// A small valid file the property test mutates, with a comment, a blank line and values in
/// several notations.
const VALID: &str = "%%MatrixMarket matrix coordinate real general\n% comment\n\n4 5 6\n1 1 1.5\n2 3 -2e1\n3 5 0.25\n4 4 7\n1 5 1e-3\n4 1 -0\n";

/// One mutation of the text's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR one byte (at a position taken modulo the length) with a nonzero mask.
    Flip(usize, u8),
    /// Keep only a prefix.
    Truncate(usize),
    /// Insert a run of digits.
    Digits(usize, String),
    /// Duplicate one line.
    DuplicateLine(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), "[0-9]{1,22}").prop_map(|(i, d)| Mutation::Digits(i, d)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip(i, mask) if !bytes.is_empty() => {
            let i = i % bytes.len();
            bytes[i] ^= mask;
        }
        Mutation::Flip(..) => {}
        Mutation::Truncate(i) => bytes.truncate(i % (bytes.len() + 1)),
        Mutation::Digits(i, d) => {
            let i = i % (bytes.len() + 1);
            bytes.splice(i..i, d.bytes());
        }
        Mutation::DuplicateLine(i) => {
            let lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let i = i % lines.len();
            let mut out = Vec::with_capacity(bytes.len() + lines[i].len() + 1);
            for (j, line) in lines.iter().enumerate() {
                if j > 0 {
                    out.push(b'\n');
                }
                out.extend_from_slice(line);
                if j == i {
                    out.push(b'\n');
                    out.extend_from_slice(line);
                }
            }
            *bytes = out;
        }
    }
}

proptest! {
    // 256 cases by default; `PROPTEST_CASES` overrides it (ProptestConfig::default reads it).
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn mutated_files_never_panic(mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut bytes = VALID.as_bytes().to_vec();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        // Flips can break UTF-8: read the bytes as they are, and what a lossy decode gives.
        let text = String::from_utf8_lossy(&bytes);
        let start = Instant::now();
        let f64s = parse_mtx::<f64>(&text);
        let f32s = parse_mtx_bytes::<f32>(&bytes);
        prop_assert!(start.elapsed() < Duration::from_secs(1), "{text:?} was slow");
        // Whatever parses is a valid matrix.
        if let Ok(m) = f64s {
            prop_assert!(m.validate().is_ok());
        }
        if let Ok(m) = f32s {
            prop_assert!(m.validate().is_ok());
        }
    }
}

/// A dimension: mostly tiny, sometimes one no host can back (overflowing `+ 1` or `× 8`, or
/// petabytes), never one in between that a lenient allocator might actually try to fill.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..6,
        1 => Just(usize::MAX),
        1 => Just(1usize << 62),
        1 => Just(1usize << 50),
    ]
}

/// An offset or index: near the tiny dimensions, or at the edges of its type.
fn offset() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0usize..8, 1 => Just(usize::MAX), 1 => Just(u32::MAX as usize + 1)]
}

fn index() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..8, 1 => Just(u32::MAX)]
}

/// The matrix as dense row-major sums (small dimensions only): duplicates add up, so it is the
/// same whichever format holds the entries.
fn dense(rows: usize, cols: usize, entries: impl Iterator<Item = (usize, usize, f32)>) -> Vec<f32> {
    let mut d = vec![0.0; rows * cols];
    for (r, c, v) in entries {
        d[r * cols + c] += v;
    }
    d
}

fn csr_dense(m: &Csr<f32>) -> Vec<f32> {
    dense(
        m.num_rows,
        m.num_cols,
        (0..m.num_rows)
            .flat_map(|r| m.row(r).map(move |nz| (r, nz)))
            .map(|(r, nz)| (r, m.col_indices[nz] as usize, m.values[nz])),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    /// Constructors on arbitrary arrays and sizes return `Ok` (a valid matrix, whose conversions
    /// keep every entry) or `Err`, never panic. Values are small integers, so sums are exact.
    #[test]
    fn random_constructor_inputs_never_panic(
        rows in dim(),
        cols in dim(),
        offsets in prop::collection::vec(offset(), 0..8),
        indices in prop::collection::vec(index(), 0..8),
        others in prop::collection::vec(index(), 0..8),
        values in prop::collection::vec(-4i8..4, 0..8),
        triplets in prop::collection::vec((offset(), offset(), -4i8..4), 0..8),
        plausible in any::<bool>(),
    ) {
        let mut values: Vec<f32> = values.into_iter().map(f32::from).collect();
        let mut offsets = offsets;
        if plausible && rows < 6 {
            // Sorted offsets from 0 to the entry count, so that the arrays often form a valid
            // matrix and the `Ok` branches below run too.
            let nnz = indices.len();
            values.resize(nnz, 1.0);
            offsets.iter_mut().for_each(|o| *o %= nnz + 1);
            offsets.resize(rows + 1, nnz);
            offsets.sort_unstable();
            offsets[0] = 0;
            offsets[rows] = nnz;
        }
        if let Ok(m) = Csr::new(rows, cols, offsets.clone(), indices.clone(), values.clone()) {
            prop_assert!(m.validate().is_ok());
            let want = csr_dense(&m);
            prop_assert_eq!(csr_dense(&m.to_csc().unwrap().to_csr().unwrap()), want.clone());
            prop_assert_eq!(csr_dense(&m.to_coo().unwrap().to_csr().unwrap()), want);
        }
        if let Ok(m) = Csc::new(rows, cols, offsets, indices.clone(), values.clone()) {
            prop_assert!(m.validate().is_ok());
            let back = m.to_csr().unwrap();
            prop_assert_eq!(csr_dense(&m.to_coo().unwrap().to_csr().unwrap()), csr_dense(&back));
        }
        if let Ok(m) = Coo::new(rows, cols, indices, others, values) {
            prop_assert!(m.validate().is_ok());
            let want = dense(
                m.num_rows,
                m.num_cols,
                (0..m.values.len()).map(|i| {
                    (m.row_indices[i] as usize, m.col_indices[i] as usize, m.values[i])
                }),
            );
            prop_assert_eq!(csr_dense(&m.to_csr().unwrap()), want.clone());
            prop_assert_eq!(csr_dense(&m.to_csc().unwrap().to_csr().unwrap()), want);
        }
        let triplets: Vec<(usize, usize, f32)> =
            triplets.into_iter().map(|(r, c, v)| (r, c, f32::from(v))).collect();
        match Csr::from_triplets(rows, cols, triplets.clone()) {
            Ok(m) => {
                prop_assert!(m.validate().is_ok());
                prop_assert_eq!(csr_dense(&m), dense(rows, cols, triplets.into_iter()));
            }
            Err(e) => prop_assert!(matches!(e, Error::InvalidMatrix(_)), "{e}"),
        }
    }
}
