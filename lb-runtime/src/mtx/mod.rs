//! Matrix Market I/O: coordinate files (real, integer or pattern; general or symmetric) into a
//! [`Csr`], array files (real or integer; general or symmetric) into a [`DenseMatrix`], plain or
//! gzip-compressed.
//!
//! The reader works on bytes: a UTF-8 byte order mark is skipped, comments may hold any bytes,
//! and a token that is not ASCII is an error naming its line. Every error names the 1-based line
//! at fault; a file that ends early names the line after its last. The reader never panics on
//! any input, and large coordinate files are parsed on every core (`docs/formats.md` has the
//! speed).

mod array;
mod coordinate;
mod lex;
mod stream;

use std::fmt::Display;
use std::io::{Read, Write};
use std::ops::AddAssign;
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::formats::Csr;

pub use array::DenseMatrix;

/// A value type a Matrix Market file can be read into.
pub trait MtxValue: Copy + AddAssign + FromStr + Display + Send + Sync {
    /// The value of every entry of a `pattern` matrix.
    const ONE: Self;

    /// Parses one value token; `None` if it is not a number. The default reads the token as
    /// UTF-8 through [`FromStr`]; `f32` and `f64` parse common decimals by hand, to the same
    /// bits `str::parse` gives.
    fn parse_token(token: &[u8]) -> Option<Self> {
        std::str::from_utf8(token).ok()?.parse().ok()
    }
}

impl MtxValue for f32 {
    const ONE: f32 = 1.0;

    fn parse_token(token: &[u8]) -> Option<f32> {
        lex::fast_decimal_f32(token).or_else(|| std::str::from_utf8(token).ok()?.parse().ok())
    }
}

impl MtxValue for f64 {
    const ONE: f64 = 1.0;

    fn parse_token(token: &[u8]) -> Option<f64> {
        lex::fast_decimal(token).or_else(|| std::str::from_utf8(token).ok()?.parse().ok())
    }
}

/// Read as `f64` and rounded once to nearest even; duplicate entries are summed in `f16`.
impl MtxValue for half::f16 {
    const ONE: half::f16 = half::f16::ONE;

    fn parse_token(token: &[u8]) -> Option<half::f16> {
        f64::parse_token(token).map(half::f16::from_f64)
    }
}

/// Read as `f64` and rounded once to nearest even; duplicate entries are summed in `bf16`.
impl MtxValue for half::bf16 {
    const ONE: half::bf16 = half::bf16::ONE;

    fn parse_token(token: &[u8]) -> Option<half::bf16> {
        f64::parse_token(token).map(half::bf16::from_f64)
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Format {
    Coordinate,
    Array,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Field {
    Real,
    Integer,
    Pattern,
}

/// What the banner declares.
#[derive(Clone, Copy, Debug)]
struct Banner {
    format: Format,
    field: Field,
    symmetric: bool,
}

fn err(line: usize, message: impl Into<String>) -> Error {
    Error::MatrixMarket {
        line,
        message: message.into(),
    }
}

/// The two bytes every gzip stream starts with.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The UTF-8 byte order mark some editors put first.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Reads the whole file at `path`, decompressed when it is gzip (recognized by its magic bytes,
/// whatever its name). Growth is fallible: a stream that decompresses to more than the host can
/// hold is an `OutOfMemory` I/O error, not an abort.
fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if !raw.starts_with(&GZIP_MAGIC) {
        return Ok(raw);
    }
    // Multi-member streams (`cat a.gz b.gz`, pigz) are one file to gzip, so read them whole.
    let mut decoder = flate2::read::MultiGzDecoder::new(raw.as_slice());
    let mut out: Vec<u8> = Vec::new();
    let mut block = vec![0u8; 1 << 16];
    loop {
        let n = match decoder.read(&mut block) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(io(std::io::Error::new(
                    e.kind(),
                    format!("the gzip stream is corrupt: {e}"),
                )))
            }
        };
        // Doubling keeps the growth amortized; `try_reserve` keeps it fallible.
        out.try_reserve(n.max(out.len())).map_err(|_| {
            io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "the decompressed text exceeds {} bytes, more than the host can allocate",
                    out.len()
                ),
            ))
        })?;
        out.extend_from_slice(&block[..n]);
    }
}

/// Reads the Matrix Market coordinate file at `path`, plain or gzip-compressed (`.mtx.gz`,
/// recognized by its content). See [`parse_mtx_bytes`].
///
/// A large file (plain or gzip) is read in blocks into one reused buffer, each block's lines
/// parsed on every core before the next is read; where that meets anything irregular (an error in the text, a file that changes while read), the whole
/// text is read and parsed again, so results and errors are those of [`parse_mtx_bytes`].
pub fn read_mtx<T: MtxValue>(path: impl AsRef<Path>) -> Result<Csr<T>> {
    let path = path.as_ref();
    let threads = available_threads();
    if let Some(result) = stream::read_in_blocks(path, threads, stream::BLOCK) {
        return result;
    }
    parse_coordinate(&read_bytes(path)?, threads)
}

/// The threads a large text is parsed on.
fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Reads the Matrix Market array file at `path` (a dense matrix or vector, e.g. a right-hand
/// side), plain or gzip-compressed. See [`parse_mtx_dense`].
pub fn read_mtx_dense<T: MtxValue>(path: impl AsRef<Path>) -> Result<DenseMatrix<T>> {
    parse_mtx_dense_bytes(&read_bytes(path.as_ref())?)
}

/// Parses Matrix Market coordinate text; see [`parse_mtx_bytes`].
pub fn parse_mtx<T: MtxValue>(text: &str) -> Result<Csr<T>> {
    parse_mtx_bytes(text.as_bytes())
}

/// Parses Matrix Market coordinate text given as bytes. Duplicate entries are summed (in file
/// order); symmetric files list one triangle and every off-diagonal entry is mirrored. Indices
/// and `integer` values may take all 64 bits (a 20-digit `u64` is an integer).
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
/// for, never an abort. Text of a megabyte or more is parsed in chunks on
/// `std::thread::available_parallelism` threads; the result and every error are the same as a
/// single thread's.
pub fn parse_mtx_bytes<T: MtxValue>(text: &[u8]) -> Result<Csr<T>> {
    parse_coordinate(text, available_threads())
}

/// [`parse_mtx_bytes`] on `threads` threads (where the text is large enough for more than one).
fn parse_coordinate<T: MtxValue>(text: &[u8], threads: usize) -> Result<Csr<T>> {
    let (banner, lines) = read_banner(text)?;
    if banner.format == Format::Array {
        return Err(err(
            1,
            "format `array` is a dense matrix: read it with `read_mtx_dense` or \
             `parse_mtx_dense` (`read_mtx` reads `coordinate` files)",
        ));
    }
    coordinate::parse(text, banner, lines, threads)
}

/// Parses Matrix Market array text; see [`parse_mtx_dense_bytes`].
pub fn parse_mtx_dense<T: MtxValue>(text: &str) -> Result<DenseMatrix<T>> {
    parse_mtx_dense_bytes(text.as_bytes())
}

/// Parses Matrix Market array text (`%%MatrixMarket matrix array real|integer
/// general|symmetric`): one value a line, column by column, into a column-major
/// [`DenseMatrix`]. A symmetric file lists the lower triangle column by column; both triangles
/// are filled. The value count is checked against the text before anything is allocated, at 2
/// bytes a value.
pub fn parse_mtx_dense_bytes<T: MtxValue>(text: &[u8]) -> Result<DenseMatrix<T>> {
    let (banner, lines) = read_banner(text)?;
    if banner.format == Format::Coordinate {
        return Err(err(
            1,
            "format `coordinate` is a sparse matrix: read it with `read_mtx` or `parse_mtx` \
             (`read_mtx_dense` reads `array` files)",
        ));
    }
    array::parse(text, banner, lines)
}

/// Reads the banner (line 1, after a byte order mark if any) and returns the lines after it.
fn read_banner(text: &[u8]) -> Result<(Banner, lex::Lines<'_>)> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    let mut lines = lex::Lines::new(text, 1);
    let (_, first) = lines
        .next()
        .ok_or_else(|| err(1, "empty file: expected a %%MatrixMarket banner"))?;
    let words: Vec<String> = lex::tokens(first)
        .map(|w| lex::show(w).to_ascii_lowercase())
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        let hint = if text.starts_with(&GZIP_MAGIC) {
            " (this text is gzip-compressed: `read_mtx` decompresses files)"
        } else {
            ""
        };
        return Err(err(
            1,
            format!(
                "expected a `%%MatrixMarket matrix coordinate <field> <symmetry>` banner{hint}"
            ),
        ));
    }
    if words.len() != 5 || words[1] != "matrix" {
        return Err(err(
            1,
            "the banner must read `%%MatrixMarket matrix <format> <field> <symmetry>`",
        ));
    }
    let format = match words[2].as_str() {
        "coordinate" => Format::Coordinate,
        "array" => Format::Array,
        other => {
            return Err(err(
                1,
                format!("format `{other}` is not supported: use coordinate or array"),
            ))
        }
    };
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" if format == Format::Coordinate => Field::Pattern,
        "pattern" => return Err(err(1, "an `array` file cannot have the `pattern` field")),
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
    Ok((
        Banner {
            format,
            field,
            symmetric,
        },
        lines,
    ))
}

/// The size line: its number, its `names.len()` numbers, and the text after it (with the
/// number of its first line). Comments and blank lines before it are skipped.
struct SizeLine<'a> {
    line: usize,
    dims: Vec<usize>,
    /// The bytes after the size line's text, its newline included.
    rest: usize,
    body: &'a [u8],
    body_line: usize,
}

/// Finds and parses the size line among `lines` (which run over `text` after its banner).
fn read_size_line<'a>(
    text: &'a [u8],
    mut lines: lex::Lines<'a>,
    names: &[&str],
    list: &str,
) -> Result<SizeLine<'a>> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    let (line, size) = loop {
        match lines.next() {
            Some((line, l)) if lex::is_content(l) => break (line, l),
            Some(_) => {}
            None => return Err(err(lex::count_lines(text) + 1, "missing the size line")),
        }
    };
    let words: Vec<&[u8]> = lex::tokens(size).collect();
    if words.len() != names.len() {
        return Err(err(
            line,
            format!(
                "the size line needs {} numbers ({list}), found {}",
                names.len(),
                words.len()
            ),
        ));
    }
    let dims = words
        .iter()
        .zip(names)
        .map(|(w, what)| {
            lex::parse_usize(w).ok_or_else(|| {
                err(
                    line,
                    format!(
                        "the {what} `{}` is not a non-negative integer",
                        lex::show(w)
                    ),
                )
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    // `size` borrows from `text`, so its end is where the rest of the text begins.
    let end = size.as_ptr() as usize - text.as_ptr() as usize + size.len();
    Ok(SizeLine {
        line,
        dims,
        rest: text.len() - end,
        body: &text[lines.pos()..],
        body_line: lines.line(),
    })
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

#[cfg(test)]
mod tests;
