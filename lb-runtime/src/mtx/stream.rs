//! Reading a large plain coordinate file in blocks into one reused buffer, each block's complete
//! lines parsed on every core before the next is read: the kernel faults in one block rather
//! than the whole text.

use std::io::Read;
use std::path::Path;

use super::coordinate::{build_csr, check_size, entry_lines, parse_chunks, Chunk};
use super::{read_banner, read_size_line, Format, MtxValue, GZIP_MAGIC};
use crate::error::Result;
use crate::formats::Csr;

/// Bytes read at a time.
pub(super) const BLOCK: usize = 64 << 20;

/// Reads `file` onto the end of `block` until the block holds `size` bytes or the file ends;
/// `None` on an I/O error.
fn fill(file: &mut std::fs::File, block: &mut Vec<u8>, size: usize) -> Option<()> {
    let want = size.saturating_sub(block.len()) as u64;
    file.take(want).read_to_end(block).ok()?;
    Some(())
}

/// Reads the plain coordinate file at `path` in blocks of `size` bytes (normally [`BLOCK`]),
/// parsing each on `threads` threads.
/// `None` wherever this path does not apply or anything is irregular (a file under two blocks,
/// gzip, an I/O error, a fault in the text, a file whose length changes): the caller then reads
/// the whole text, which reports every error exactly as `parse_mtx_bytes` does. The size line
/// is checked against the file's length, as `parse_mtx_bytes` checks it against the text's.
pub(super) fn read_in_blocks<T: MtxValue>(
    path: &Path,
    threads: usize,
    size: usize,
) -> Option<Result<Csr<T>>> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if threads < 2 || len < size.saturating_mul(2) {
        return None;
    }
    let mut block: Vec<u8> = Vec::new();
    block.try_reserve_exact(size).ok()?;
    fill(&mut file, &mut block, size)?;
    if block.starts_with(&GZIP_MAGIC) {
        return None;
    }
    let (banner, lines) = read_banner(&block).ok()?;
    if banner.format != Format::Coordinate {
        return None;
    }
    let names = ["row count", "column count", "entry count"];
    let line = read_size_line(&block, lines, &names, "rows cols entries").ok()?;
    // The size line must end inside the block, or its last number may go on in the next one.
    if line.body.is_empty() {
        return None;
    }
    let unread = len - block.len();
    let shape = check_size(banner, line.line, &line.dims, line.rest + unread, len).ok()?;
    let body_total = line.body.len() + unread;
    let mut chunks: Vec<Chunk<T>> = Vec::new();
    let mut start = block.len() - line.body.len();
    let mut read = block.len();
    loop {
        let at_end = read == len;
        // Complete lines only, but for the file's last line.
        let end = if at_end {
            block.len()
        } else {
            // A line longer than a block: leave it to the whole-text path.
            start + memchr::memrchr(b'\n', &block[start..])? + 1
        };
        chunks.extend(parse_chunks(
            &block[start..end],
            &shape,
            threads,
            body_total,
        )?);
        if at_end {
            break;
        }
        // Keep the partial line at the front, refill behind it.
        block.copy_within(end.., 0);
        block.truncate(block.len() - end);
        start = 0;
        let before = block.len();
        fill(&mut file, &mut block, size)?;
        if block.len() == before {
            // The file is shorter than it was.
            return None;
        }
        read += block.len() - before;
    }
    // The file must not have grown either.
    if file.read(&mut [0u8; 1]).ok()? != 0 || entry_lines(&chunks) != shape.entries {
        return None;
    }
    Some(build_csr(&shape, chunks, threads))
}
