//! Matrix Market I/O: coordinate files (real, integer or pattern; general or symmetric).
//!
//! Every error names the 1-based line at fault; a file that ends early names the line after its
//! last. The reader never panics on any input.

use std::fmt::Display;
use std::io::Write;
use std::ops::AddAssign;
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::formats::Csr;

/// A value type a Matrix Market file can be read into.
pub trait MtxValue: Copy + AddAssign + FromStr + Display {
    /// The value of every entry of a `pattern` matrix.
    const ONE: Self;
}

impl MtxValue for f32 {
    const ONE: f32 = 1.0;
}

impl MtxValue for f64 {
    const ONE: f64 = 1.0;
}

#[derive(Clone, Copy, PartialEq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

fn err(line: usize, message: impl Into<String>) -> Error {
    Error::MatrixMarket {
        line,
        message: message.into(),
    }
}

/// Reads the Matrix Market file at `path`.
pub fn read_mtx<T: MtxValue>(path: impl AsRef<Path>) -> Result<Csr<T>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_mtx(&text)
}

/// The fewest bytes an entry line takes: `1 1` and its newline.
const MIN_ENTRY_BYTES: usize = 4;

/// Rows the reader accepts whatever the text's length (2^24: 128 MiB of row offsets).
const ROW_FLOOR: usize = 1 << 24;

/// Further rows the reader accepts per byte of text.
const ROWS_PER_BYTE: usize = 8;

/// Parses Matrix Market text. Duplicate entries are summed; symmetric files list one triangle
/// and every off-diagonal entry is mirrored.
///
/// The size line is untrusted, so it is checked against the text before anything is allocated:
/// - the entry count must fit in the text after the size line, at 4 bytes per
///   entry (a larger one is a truncated file or a corrupt count);
/// - the row count drives the only allocation not backed by text (a CSR stores `rows + 1`
///   offsets even with no entries), so it may be at most `max(2^24, 8 × text bytes)`: a 30-byte
///   file cannot declare a billion rows and make the reader spend gigabytes (a matrix that
///   really is that tall and empty is better built with [`Csr::empty`]);
/// - the column count must fit the u32 column indices.
///
/// Every allocation is fallible: one the host cannot meet is an error naming the bytes asked
/// for, never an abort.
pub fn parse_mtx<T: MtxValue>(text: &str) -> Result<Csr<T>> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, banner) = lines
        .next()
        .ok_or_else(|| err(1, "empty file: expected a %%MatrixMarket banner"))?;
    let words: Vec<String> = banner
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(err(
            1,
            "expected a `%%MatrixMarket matrix coordinate <field> <symmetry>` banner",
        ));
    }
    if words.len() != 5 || words[1] != "matrix" {
        return Err(err(
            1,
            "the banner must read `%%MatrixMarket matrix <format> <field> <symmetry>`",
        ));
    }
    if words[2] != "coordinate" {
        return Err(err(
            1,
            format!("format `{}` is not supported: only `coordinate`", words[2]),
        ));
    }
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        other => {
            return Err(err(
                1,
                format!("field `{other}` is not supported: use real, integer or pattern"),
            ))
        }
    };
    let symmetric = match words[4].as_str() {
        "general" => false,
        "symmetric" => true,
        other => {
            return Err(err(
                1,
                format!("symmetry `{other}` is not supported: use general or symmetric"),
            ));
        }
    };

    // Comments and blank lines may appear anywhere after the banner.
    let mut content = lines.filter(|(_, l)| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('%')
    });
    let last_line = text.lines().count();
    let (size_line, size) = content
        .next()
        .ok_or_else(|| err(last_line + 1, "missing the size line"))?;
    let dims: Vec<&str> = size.split_whitespace().collect();
    let parse_dim = |s: &str, what: &str| {
        s.parse::<usize>().map_err(|_| {
            err(
                size_line,
                format!("the {what} `{s}` is not a non-negative integer"),
            )
        })
    };
    if dims.len() != 3 {
        return Err(err(
            size_line,
            format!(
                "the size line needs 3 numbers (rows cols entries), found {}",
                dims.len()
            ),
        ));
    }
    let rows = parse_dim(dims[0], "row count")?;
    let cols = parse_dim(dims[1], "column count")?;
    let entries = parse_dim(dims[2], "entry count")?;
    if symmetric && rows != cols {
        return Err(err(
            size_line,
            format!("a symmetric matrix must be square, not {rows} × {cols}"),
        ));
    }
    if cols as u64 > u64::from(u32::MAX) + 1 {
        return Err(err(
            size_line,
            format!("{cols} columns exceed the u32 index range"),
        ));
    }
    // `size` borrows from `text`, so its end is where the entry lines begin.
    let rest = text.len() - (size.as_ptr() as usize - text.as_ptr() as usize + size.len());
    // The last line needs no newline, hence the extra byte.
    let max_entries = (rest + 1) / MIN_ENTRY_BYTES;
    if entries > max_entries {
        return Err(err(
            size_line,
            format!(
                "the size line declares {entries} entries, but the {rest} bytes after it hold at \
                 most {max_entries} (an entry line takes at least {MIN_ENTRY_BYTES} bytes): the \
                 file is truncated or the entry count is wrong"
            ),
        ));
    }
    let max_rows = ROW_FLOOR.max(text.len().saturating_mul(ROWS_PER_BYTE));
    if rows > max_rows {
        return Err(err(
            size_line,
            format!(
                "the size line declares {rows} rows, more than the {max_rows} a file of {} bytes \
                 may declare (the row offsets alone would take {} bytes): the row count is \
                 probably corrupt; build a matrix that really is this tall and sparse with \
                 `Csr::empty` or `Csr::from_triplets`",
                text.len(),
                rows.saturating_add(1)
                    .saturating_mul(std::mem::size_of::<usize>())
            ),
        ));
    }

    let expect = if field == Field::Pattern { 2 } else { 3 };
    // Bounded by the text's length (checked above), but still fallible: the host may be short.
    let capacity = if symmetric {
        entries.checked_mul(2)
    } else {
        Some(entries)
    }
    .ok_or_else(|| err(size_line, format!("{entries} entries overflow a usize")))?;
    let mut triplets = Vec::new();
    triplets.try_reserve_exact(capacity).map_err(|_| {
        err(
            size_line,
            format!(
                "{entries} entries need {} bytes, which the host cannot allocate",
                capacity.saturating_mul(std::mem::size_of::<(usize, usize, T)>())
            ),
        )
    })?;
    let mut read = 0usize;
    for (line, l) in content {
        if read == entries {
            return Err(err(
                line,
                format!("more entries than the {entries} the size line declares"),
            ));
        }
        read += 1;
        let toks: Vec<&str> = l.split_whitespace().collect();
        if toks.len() < expect {
            return Err(err(
                line,
                format!(
                    "expected {expect} fields (row col{}), found {}",
                    if expect == 3 { " value" } else { "" },
                    toks.len()
                ),
            ));
        }
        if toks.len() > expect {
            return Err(err(
                line,
                format!("expected {expect} fields, found {}", toks.len()),
            ));
        }
        let index = |s: &str, what: &str, n: usize| -> Result<usize> {
            let i = s.parse::<usize>().map_err(|_| {
                err(
                    line,
                    format!("the {what} index `{s}` is not a positive integer"),
                )
            })?;
            if i == 0 || i > n {
                return Err(err(
                    line,
                    format!("the {what} index {i} is outside 1..={n}"),
                ));
            }
            Ok(i - 1)
        };
        let r = index(toks[0], "row", rows)?;
        let c = index(toks[1], "column", cols)?;
        let v = match field {
            Field::Pattern => T::ONE,
            Field::Integer => {
                // Integers must look like integers, even though they are stored as floats.
                if toks[2].parse::<i64>().is_err() {
                    return Err(err(
                        line,
                        format!("the value `{}` is not an integer", toks[2]),
                    ));
                }
                parse_value(toks[2], line)?
            }
            Field::Real => parse_value(toks[2], line)?,
        };
        triplets.push((r, c, v));
        if symmetric && r != c {
            triplets.push((c, r, v));
        }
    }
    if read < entries {
        return Err(err(
            last_line + 1,
            format!("the file ends after {read} of {entries} entries"),
        ));
    }
    // The sizes were checked above, so an error here is the host running out of memory.
    Csr::from_triplets(rows, cols, triplets).map_err(|e| err(size_line, e.to_string()))
}

fn parse_value<T: MtxValue>(s: &str, line: usize) -> Result<T> {
    s.parse::<T>()
        .map_err(|_| err(line, format!("the value `{s}` is not a number")))
}

/// Writes `csr` as a `coordinate real general` file; [`parse_mtx`] reads it back exactly
/// (Rust prints floats with the fewest digits that round-trip). An invalid `csr` is an
/// `InvalidData` error.
pub fn write_mtx<T: Display>(csr: &Csr<T>, mut out: impl Write) -> std::io::Result<()> {
    csr.validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    writeln!(out, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(out, "{} {} {}", csr.num_rows, csr.num_cols, csr.nnz())?;
    for r in 0..csr.num_rows {
        for e in csr.row(r) {
            writeln!(
                out,
                "{} {} {}",
                r + 1,
                u64::from(csr.col_indices[e]) + 1,
                csr.values[e]
            )?;
        }
    }
    Ok(())
}
