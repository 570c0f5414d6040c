//! Reading a large coordinate file, plain or gzip, in blocks into one reused buffer, each
//! block's complete lines parsed on every core before the next is read: the kernel faults in
//! one block rather than the whole text, and a `.gz` is never decompressed whole into memory.

use std::io::{Read, Seek};
use std::path::Path;

use super::coordinate::{build_csr, check_size, entry_lines, parse_chunks, Chunk};
use super::{read_banner, read_size_line, Banner, Format, MtxValue, GZIP_MAGIC};
use crate::error::Result;
use crate::formats::Csr;

/// Bytes read at a time.
pub(super) const BLOCK: usize = 64 << 20;

/// What text usually weighs per compressed byte: sizes the first reservations for a `.gz`.
const GZIP_RATIO: usize = 4;

/// Reads `src` onto the end of `block` until the block holds `size` bytes or the source ends;
/// `None` on an I/O error (a corrupt gzip stream included).
fn fill(src: &mut impl Read, block: &mut Vec<u8>, size: usize) -> Option<()> {
    let want = size.saturating_sub(block.len()) as u64;
    src.take(want).read_to_end(block).ok()?;
    Some(())
}

/// Reads the coordinate file at `path` in blocks of `size` bytes (normally [`BLOCK`]), parsing
/// each on `threads` threads. `None` wherever this path does not apply or anything is irregular
/// (a file under two blocks, or a `.gz` under half of one; an I/O error, a fault in the text, a
/// plain file whose length changes): the caller then reads the whole text, which reports every
/// error exactly as `parse_mtx_bytes` does. A plain file's size line is checked against the
/// file's length before anything is allocated, as `parse_mtx_bytes` checks it against the
/// text's; a `.gz` one first against its first block (its rows bound the buckets), then against
/// the whole text once it has been read.
pub(super) fn read_in_blocks<T: MtxValue>(
    path: &Path,
    threads: usize,
    size: usize,
) -> Option<Result<Csr<T>>> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    let mut magic = [0u8; 2];
    let gzip = file.read_exact(&mut magic).is_ok() && magic == GZIP_MAGIC;
    file.rewind().ok()?;
    if threads < 2
        || len
            < if gzip {
                size / 2
            } else {
                size.saturating_mul(2)
            }
    {
        return None;
    }
    if gzip {
        // Multi-member streams (`cat a.gz b.gz`, pigz) are one file to gzip.
        let decoder = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file));
        let hint = len.saturating_mul(GZIP_RATIO);
        read_blocks(decoder, None, hint, threads, size)
    } else {
        read_blocks(file, Some(len), len, threads, size)
    }
}

/// The block loop over `src`, whose text is `known_len` bytes when known and about `hint`.
fn read_blocks<T: MtxValue>(
    mut src: impl Read,
    known_len: Option<usize>,
    hint: usize,
    threads: usize,
    size: usize,
) -> Option<Result<Csr<T>>> {
    let mut block: Vec<u8> = Vec::new();
    block.try_reserve_exact(size).ok()?;
    fill(&mut src, &mut block, size)?;
    let first = block.len();
    let Header {
        banner,
        line,
        dims,
        rest,
        body,
    } = header(&block)?;
    let shape = match known_len {
        Some(len) => check_size(banner, line, &dims, rest + (len - first), len).ok()?,
        // Stricter than the final check (the text is longer than its first block), so it may
        // send a valid file to the whole-text path, never an absurd one into the buckets.
        None => check_size(banner, line, &dims, usize::MAX - 1, first).ok()?,
    };
    let body_total = body + hint.saturating_sub(first);
    let mut chunks: Vec<Chunk<T>> = Vec::new();
    let mut start = first - body;
    let mut read = first;
    let mut eof = first < size;
    loop {
        // Complete lines only, but for the text's last line.
        let end = if eof {
            block.len()
        } else {
            // A line longer than a block: leave it to the whole-text path.
            start + memchr::memrchr(b'\n', &block[start..])? + 1
        };
        let parsed = parse_chunks(&block[start..end], &shape, threads, body_total)?;
        chunks.extend(parsed);
        if eof {
            break;
        }
        // Keep the partial line at the front, refill behind it.
        block.copy_within(end.., 0);
        block.truncate(block.len() - end);
        start = 0;
        let before = block.len();
        fill(&mut src, &mut block, size)?;
        read += block.len() - before;
        eof = block.len() < size;
    }
    // A plain file that changed length while read, or a size line the whole text refutes.
    if known_len.is_some_and(|len| len != read)
        || check_size(banner, line, &dims, rest + (read - first), read).is_err()
        || entry_lines(&chunks) != shape.entries
    {
        return None;
    }
    Some(build_csr(&shape, chunks, threads))
}

/// What the first block says: the banner, the size line's number and numbers, the bytes after
/// the size line's text (newline included) and the entry text's bytes in the block.
struct Header {
    banner: Banner,
    line: usize,
    dims: Vec<usize>,
    rest: usize,
    body: usize,
}

/// The header of a coordinate file from its first block; `None` if it is not there, or the size
/// line may go on in the next block.
fn header(block: &[u8]) -> Option<Header> {
    let (banner, lines) = read_banner(block).ok()?;
    if banner.format != Format::Coordinate {
        return None;
    }
    let names = ["row count", "column count", "entry count"];
    let size = read_size_line(block, lines, &names, "rows cols entries").ok()?;
    // The size line must end inside the block, or its last number may go on in the next one.
    (!size.body.is_empty()).then_some(Header {
        banner,
        line: size.line,
        dims: size.dims,
        rest: size.rest,
        body: size.body.len(),
    })
}
