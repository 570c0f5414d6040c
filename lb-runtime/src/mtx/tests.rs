//! The reader's internals against independent references: hand-parsed numbers against
//! `str::parse`, and the chunked parse on 1–4 threads against `Csr::from_triplets` (results) and
//! against itself (errors, which must name the same line whatever the thread count).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{parse_coordinate, MtxValue};
use crate::error::Error;
use crate::formats::Csr;

/// A random decimal token in one of the forms a file may hold.
fn random_decimal(rng: &mut ChaCha8Rng) -> String {
    let mut s = String::new();
    match rng.random_range(0..4) {
        0 => s.push('-'),
        1 => s.push('+'),
        _ => {}
    }
    let int_digits = rng.random_range(0..12);
    let frac_digits = rng.random_range(0..14);
    for _ in 0..int_digits {
        s.push(char::from(b'0' + rng.random_range(0..10u8)));
    }
    if frac_digits > 0 || rng.random_bool(0.2) {
        s.push('.');
    }
    for _ in 0..frac_digits {
        s.push(char::from(b'0' + rng.random_range(0..10u8)));
    }
    if int_digits + frac_digits == 0 {
        s.push('7');
    }
    if rng.random_bool(0.4) {
        s.push(if rng.random_bool(0.5) { 'e' } else { 'E' });
        match rng.random_range(0..3) {
            0 => s.push('-'),
            1 => s.push('+'),
            _ => {}
        }
        s.push_str(&rng.random_range(0..40).to_string());
    }
    s
}

fn same_bits<T: MtxValue + std::fmt::Debug>(token: &str, bits: impl Fn(T) -> u64) {
    let ours = T::parse_token(token.as_bytes()).map(&bits);
    let std = token.parse::<T>().ok().map(&bits);
    assert_eq!(ours, std, "`{token}`");
}

#[test]
fn hand_parsed_decimals_match_str_parse_bit_for_bit() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6d74_7831);
    let mut tokens: Vec<String> = (0..200_000).map(|_| random_decimal(&mut rng)).collect();
    // Shortest round-trip forms of random floats, as writers print them.
    for _ in 0..50_000 {
        let bits: u64 = rng.random();
        let x = f64::from_bits(bits);
        if x.is_finite() {
            tokens.push(format!("{x}"));
            tokens.push(format!("{x:e}"));
        }
        let y = f32::from_bits(rng.random());
        if y.is_finite() {
            tokens.push(format!("{y}"));
        }
    }
    // Midpoints between neighbouring f32s, the values where rounding to f64 first could tie.
    for _ in 0..50_000 {
        let a = f32::from_bits(rng.random_range(0x0080_0000..0x7f00_0000u32));
        let b = f32::from_bits(a.to_bits() + 1);
        let mid = (f64::from(a) + f64::from(b)) / 2.0;
        tokens.push(format!("{mid}"));
        tokens.push(format!("{mid:.17e}"));
    }
    for edge in [
        "0",
        "-0",
        "+0",
        "0.0",
        "-0.0",
        ".5",
        "5.",
        "-.5",
        ".",
        "-",
        "+",
        "e5",
        "1e",
        "1e+",
        "1.e5",
        "9007199254740992",
        "9007199254740993",
        "18446744073709551615",
        "99999999999999999999999",
        "1e22",
        "1e23",
        "1e-22",
        "1e-23",
        "inf",
        "-inf",
        "NaN",
        "infinity",
        "0x10",
        "1_000",
        "1,5",
        "1.5.5",
        "1e5e5",
        "--1",
        "3.4028235e38",
        "3.4028236e38",
        "1e-45",
        "1.401298464324817e-45",
        "0.000000000000000000000001",
    ] {
        tokens.push(edge.to_string());
    }
    for t in &tokens {
        same_bits::<f64>(t, f64::to_bits);
        same_bits::<f32>(t, |x| u64::from(x.to_bits()));
    }
}

/// A coordinate file and the triplets it holds (mirrored for a symmetric file), in file order.
struct File {
    text: String,
    triplets: Vec<(usize, usize, f64)>,
    /// The line of each entry, in order.
    entry_lines: Vec<usize>,
}

/// A file of `entries` entries in random order with duplicates, comments, blank lines, CRLF
/// and tab separators, values in several notations.
fn random_file(rng: &mut ChaCha8Rng, entries: usize, field: &str, symmetric: bool) -> File {
    let (rows, cols) = if symmetric { (900, 900) } else { (1100, 700) };
    let symmetry = if symmetric { "symmetric" } else { "general" };
    let mut text = format!("%%MatrixMarket matrix coordinate {field} {symmetry}\n% generated\n");
    text.push_str(&format!("{rows} {cols} {entries}\n"));
    let mut line = 3;
    let mut triplets = Vec::new();
    let mut entry_lines = Vec::new();
    let mut last = (0, 0);
    for _ in 0..entries {
        while rng.random_bool(0.01) {
            text.push_str(if rng.random_bool(0.5) {
                "% note\n"
            } else {
                "  \n"
            });
            line += 1;
        }
        let (mut r, mut c) = if rng.random_bool(0.05) {
            last
        } else {
            (rng.random_range(0..rows), rng.random_range(0..cols))
        };
        if symmetric && c > r {
            std::mem::swap(&mut r, &mut c);
        }
        last = (r, c);
        let v: f64 = match field {
            "pattern" => 1.0,
            "integer" => rng.random_range(-1000..1000) as f64,
            _ => rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-5..5)),
        };
        let sep = if rng.random_bool(0.1) { "\t" } else { " " };
        let value = match field {
            "pattern" => String::new(),
            "integer" => format!("{sep}{v}"),
            _ if rng.random_bool(0.3) => format!("{sep}{v:e}"),
            _ => format!("{sep}{v}"),
        };
        let end = if rng.random_bool(0.1) { "\r\n" } else { "\n" };
        text.push_str(&format!("{}{sep}{}{value}{end}", r + 1, c + 1));
        line += 1;
        entry_lines.push(line);
        triplets.push((r, c, v));
        if symmetric && r != c {
            triplets.push((c, r, v));
        }
    }
    File {
        text,
        triplets,
        entry_lines,
    }
}

/// The reader's error, as (line, message).
fn failure(r: crate::Result<Csr<f64>>) -> (usize, String) {
    match r {
        Err(Error::MatrixMarket { line, message }) => (line, message),
        other => panic!("expected a Matrix Market error, got {other:?}"),
    }
}

#[test]
fn chunked_parse_matches_from_triplets_on_any_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    for (field, symmetric) in [
        ("real", false),
        ("real", true),
        ("integer", false),
        ("pattern", true),
    ] {
        // Enough entries for the text to pass the threshold of the chunked parse.
        let entries = if field == "pattern" { 220_000 } else { 120_000 };
        let file = random_file(&mut rng, entries, field, symmetric);
        assert!(file.text.len() > super::coordinate::PARALLEL_MIN_BYTES);
        let (rows, cols) = if symmetric { (900, 900) } else { (1100, 700) };
        let want = Csr::from_triplets(rows, cols, file.triplets.clone()).unwrap();
        for threads in 1..=4 {
            let got = parse_coordinate::<f64>(file.text.as_bytes(), threads).unwrap();
            assert_eq!(got, want, "{field} {symmetric} on {threads} threads");
        }
        let one = parse_coordinate::<f32>(file.text.as_bytes(), 1).unwrap();
        assert_eq!(
            parse_coordinate::<f32>(file.text.as_bytes(), 3).unwrap(),
            one
        );
    }
}

#[test]
fn chunked_parse_names_the_same_line_on_any_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(1818);
    let file = random_file(&mut rng, 100_000, "real", false);
    let lines: Vec<&str> = file.text.lines().collect();
    for case in 0..12 {
        let k = rng.random_range(0..file.entry_lines.len());
        let at = file.entry_lines[k];
        let (text, want_line, want) = match case % 4 {
            0 => (with_line(&lines, at, "1 1 x1"), at, "`x1` is not a number"),
            1 => (with_line(&lines, at, "1101 1 1"), at, "row index 1101"),
            // One entry fewer declared: the last entry line is the extra one.
            2 => (
                file.text.replacen("1100 700 100000", "1100 700 99999", 1),
                *file.entry_lines.last().unwrap(),
                "more entries",
            ),
            _ => (
                file.text.replacen("1100 700 100000", "1100 700 100001", 1),
                lines.len() + 1,
                "ends after 100000 of 100001",
            ),
        };
        for threads in 1..=4 {
            let (line, message) = failure(parse_coordinate::<f64>(text.as_bytes(), threads));
            assert_eq!(line, want_line, "{message} on {threads} threads");
            assert!(message.contains(want), "`{message}` lacks `{want}`");
        }
    }
}

/// `lines` joined with line `at` (1-based) replaced.
fn with_line(lines: &[&str], at: usize, new: &str) -> String {
    let mut out: Vec<&str> = lines.to_vec();
    out[at - 1] = new;
    out.join("\n")
}

/// Writes `bytes` to a fresh temporary file and returns its path.
fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("lb-mtx-unit-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn block_reader_matches_the_whole_text_or_steps_aside() {
    use super::stream::read_in_blocks;
    let mut rng = ChaCha8Rng::seed_from_u64(64);
    for (k, (field, symmetric)) in [("real", false), ("pattern", true)].into_iter().enumerate() {
        let file = random_file(&mut rng, 40_000, field, symmetric);
        let want = parse_coordinate::<f64>(file.text.as_bytes(), 1).unwrap();
        let path = temp_file(&format!("blocks{k}"), file.text.as_bytes());
        // Blocks smaller than a line's worth, odd sizes, and a few lines each.
        for size in [4096, 65_537, file.text.len() / 3] {
            for threads in [2, 3] {
                let got = read_in_blocks::<f64>(&path, threads, size);
                let got = got.expect("a regular file takes the block path").unwrap();
                assert_eq!(got, want, "{field} blocks of {size} on {threads} threads");
            }
        }
        // One thread, or a file under two blocks: the whole-text path.
        assert!(read_in_blocks::<f64>(&path, 1, 4096).is_none());
        assert!(read_in_blocks::<f64>(&path, 2, file.text.len()).is_none());
        // The same text gzip-compressed, decompressed block by block.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, file.text.as_bytes()).unwrap();
        let packed = enc.finish().unwrap();
        std::fs::write(&path, &packed).unwrap();
        for size in [4096, 65_537] {
            let got = read_in_blocks::<f64>(&path, 2, size).expect("a .gz takes the block path");
            assert_eq!(got.unwrap(), want, "{field} .gz in blocks of {size}");
        }
        // A corrupt stream steps aside; the whole-text path names the file.
        std::fs::write(&path, &packed[..packed.len() / 2]).unwrap();
        assert!(read_in_blocks::<f64>(&path, 2, 4096).is_none());
        assert!(matches!(
            crate::read_mtx::<f64>(&path),
            Err(Error::Io { .. })
        ));
        std::fs::remove_file(&path).unwrap();
    }
    // Anything irregular steps aside, so the whole-text path names the error.
    let file = random_file(&mut rng, 20_000, "real", false);
    let lines: Vec<&str> = file.text.lines().collect();
    let bad_value = with_line(&lines, file.entry_lines[15_000], "1 1 zz");
    let extra = file.text.replacen("1100 700 20000", "1100 700 19999", 1);
    let long_line = format!("{}% {}\n", file.text, "x".repeat(10_000));
    for (name, text) in [("bad", bad_value), ("extra", extra), ("long", long_line)] {
        let path = temp_file(name, text.as_bytes());
        let blocks = read_in_blocks::<f64>(&path, 2, 4096);
        let whole = crate::read_mtx::<f64>(&path);
        std::fs::remove_file(&path).unwrap();
        assert!(blocks.is_none(), "{name}");
        if name == "long" {
            assert_eq!(
                whole.unwrap(),
                parse_coordinate::<f64>(text.as_bytes(), 1).unwrap()
            );
        } else {
            assert!(matches!(whole, Err(Error::MatrixMarket { .. })), "{name}");
        }
    }
}

#[test]
fn mutated_large_files_read_the_same_on_any_thread_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(1919);
    let file = random_file(&mut rng, 60_000, "real", false);
    let alphabet = b"0189 .-+e%\n\t\rx\xff";
    for _ in 0..16 {
        let mut bytes = file.text.clone().into_bytes();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..bytes.len());
            bytes[at] = alphabet[rng.random_range(0..alphabet.len())];
        }
        let one = parse_coordinate::<f64>(&bytes, 1);
        for threads in [2, 3] {
            let many = parse_coordinate::<f64>(&bytes, threads);
            match (&one, &many) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!(
                    "1 thread: {:?}\n{threads} threads: {:?}",
                    one.as_ref().map(Csr::nnz),
                    many.as_ref().map(Csr::nnz)
                ),
            }
        }
    }
}
