//! Coordinate files: the size line's checks, the entry lines parsed in chunks on several threads,
//! and the CSR built from them by a counting sort on rows.

use super::lex::{self, Lines};
use super::{err, read_size_line, Banner, Field, MtxValue};
use crate::error::{Error, Result};
use crate::formats::{try_with_capacity, zero_offsets, Csr};

/// The fewest bytes an entry line takes: `1 1` and its newline.
const MIN_ENTRY_BYTES: usize = 4;

/// Rows the reader accepts whatever the text's length (2^24: 128 MiB of row offsets).
const ROW_FLOOR: usize = 1 << 24;

/// Further rows the reader accepts per byte of text.
const ROWS_PER_BYTE: usize = 8;

/// Entry text below this is parsed on the calling thread: a thread costs more than it saves.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Most buckets a chunk sorts its entries into (by row band): few enough that appending to
/// them streams through the cache, many enough that one band's row cursors and output fit in it.
const MAX_BUCKETS: usize = 256;

/// One entry, 0-based; its bucket holds the row's high bits, `row` the rest (a bucket spans at
/// most 2^32 rows). Columns fit u32 (the column count is checked).
#[derive(Clone, Copy)]
struct Entry<T> {
    row: u32,
    col: u32,
    value: T,
}

/// The entries of one chunk of the text, in file order within each bucket: bucket `b` holds
/// the entries of rows `b << shift ..< (b + 1) << shift`.
pub(super) struct Chunk<T> {
    buckets: Vec<Vec<Entry<T>>>,
    /// Entry lines read (a symmetric file's mirrored entries not counted).
    read: usize,
}

/// What every chunk needs to know about the matrix.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    rows: usize,
    cols: usize,
    pub(super) entries: usize,
    field: Field,
    symmetric: bool,
    size_line: usize,
    /// Rows per bucket, as a power of two.
    shift: u32,
}

/// Parses the size line and the entries after the banner (`lines` run over `text` after it).
/// Large texts are parsed on `threads` threads.
pub(super) fn parse<'a, T: MtxValue>(
    text: &'a [u8],
    banner: Banner,
    lines: Lines<'a>,
    threads: usize,
) -> Result<Csr<T>> {
    let size = read_size_line(
        text,
        lines,
        &["row count", "column count", "entry count"],
        "rows cols entries",
    )?;
    let shape = check_size(banner, size.line, &size.dims, size.rest, text.len())?;
    let entries = shape.entries;
    if threads > 1 && size.body.len() >= PARALLEL_MIN_BYTES {
        let chunks = parse_chunks(size.body, &shape, threads, size.body.len());
        if let Some(chunks) = chunks.filter(|c| entry_lines(c) == entries) {
            return build_csr(&shape, chunks, threads);
        }
    }
    // One chunk, read in order: also the path that finds the first error of a file the
    // parallel pass could not read, so errors never depend on the thread count.
    let mut chunk = new_chunk::<T>(&shape, shape.entries)?;
    parse_chunk(size.body, size.body_line, &shape, &mut chunk)?;
    if chunk.read < entries {
        return Err(err(
            lex::count_lines(text.strip_prefix(super::BOM).unwrap_or(text)) + 1,
            format!("the file ends after {} of {entries} entries", chunk.read),
        ));
    }
    build_csr(&shape, vec![chunk], threads)
}

/// Checks the size line (`dims`, on line `size_line`) against the text: `rest` bytes follow
/// it, of `text_len` in all. See `parse_mtx_bytes` for the rules.
pub(super) fn check_size(
    banner: Banner,
    size_line: usize,
    dims: &[usize],
    rest: usize,
    text_len: usize,
) -> Result<Shape> {
    let (rows, cols, entries) = (dims[0], dims[1], dims[2]);
    if banner.symmetric && rows != cols {
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
    let max_rows = ROW_FLOOR.max(text_len.saturating_mul(ROWS_PER_BYTE));
    if rows > max_rows {
        return Err(err(
            size_line,
            format!(
                "the size line declares {rows} rows, more than the {max_rows} a file of \
                 {text_len} bytes may declare (the row offsets alone would take {} bytes): the \
                 row count is probably corrupt; build a matrix that really is this tall and \
                 sparse with `Csr::empty` or `Csr::from_triplets`",
                rows.saturating_add(1)
                    .saturating_mul(std::mem::size_of::<usize>())
            ),
        ));
    }
    Ok(Shape {
        rows,
        cols,
        entries,
        field: banner.field,
        symmetric: banner.symmetric,
        size_line,
        shift: bucket_shift(rows),
    })
}

/// The smallest shift that splits `rows` into at most [`MAX_BUCKETS`] buckets, capped at 32 so
/// a row within its bucket fits the entry's u32 (beyond 2^40 rows there are more buckets; the
/// row count is bounded by the text's length, so not many more).
fn bucket_shift(rows: usize) -> u32 {
    let mut shift = 0;
    while shift < 32 && (rows >> shift) >= MAX_BUCKETS {
        shift += 1;
    }
    shift
}

/// An empty chunk with room for about `entries` entry lines (twice that for a symmetric file,
/// whose off-diagonal entries are mirrored), spread evenly over its buckets; they grow as
/// needed. Bounded by the text's length (checked by the caller), but still fallible: the host
/// may be short.
fn new_chunk<T>(shape: &Shape, entries: usize) -> Result<Chunk<T>> {
    let capacity = if shape.symmetric {
        entries.checked_mul(2)
    } else {
        Some(entries)
    }
    .ok_or_else(|| {
        err(
            shape.size_line,
            format!("{entries} entries overflow a usize"),
        )
    })?;
    let count = (shape.rows >> shape.shift) + 1;
    let each = capacity / count + 16;
    let mut buckets = Vec::with_capacity(count);
    for _ in 0..count {
        let mut bucket = Vec::new();
        bucket.try_reserve_exact(each).map_err(|_| {
            err(
                shape.size_line,
                format!(
                    "{} entries need {} bytes, which the host cannot allocate",
                    shape.entries,
                    capacity.saturating_mul(std::mem::size_of::<Entry<T>>())
                ),
            )
        })?;
        buckets.push(bucket);
    }
    Ok(Chunk { buckets, read: 0 })
}

/// Splits `body` into one chunk per thread at line boundaries and parses them at once; `None`
/// when any chunk fails (the caller then reads the text in order, which names the first fault
/// exactly: a chunk does not know the number of its first line, nor how many entries came
/// before it). `body` is `body_total` bytes of entry text or part of them, which sizes each
/// chunk's first reservation.
pub(super) fn parse_chunks<T: MtxValue>(
    body: &[u8],
    shape: &Shape,
    threads: usize,
    body_total: usize,
) -> Option<Vec<Chunk<T>>> {
    let mut bounds = vec![0];
    for k in 1..threads {
        let target = (body.len() * k / threads).max(*bounds.last()?);
        let end = memchr::memchr(b'\n', &body[target..]).map_or(body.len(), |i| target + i + 1);
        bounds.push(end);
    }
    bounds.push(body.len());
    let jobs: Vec<_> = bounds
        .windows(2)
        .map(|w| {
            let chunk = &body[w[0]..w[1]];
            move || {
                // The chunk's share of the declared entries (at most what its bytes can hold,
                // whatever the count claims); buckets grow if it is not enough.
                let share = (shape.entries as u128 * chunk.len() as u128
                    / body_total.max(1) as u128) as usize;
                let share = share.min(chunk.len() / MIN_ENTRY_BYTES + 1);
                let mut out = new_chunk::<T>(shape, share).ok()?;
                parse_chunk(chunk, 1, shape, &mut out).ok()?;
                Some(out)
            }
        })
        .collect();
    on_threads(jobs).into_iter().collect()
}

/// The entry lines the chunks read.
pub(super) fn entry_lines<T>(chunks: &[Chunk<T>]) -> usize {
    chunks.iter().map(|c| c.read).sum()
}

/// The next whitespace-separated token of `line` from `*pos`, moving `*pos` past it.
fn next_token<'a>(line: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let mut start = *pos;
    while start < line.len() && lex::is_space(line[start]) {
        start += 1;
    }
    let mut end = start;
    while end < line.len() && !lex::is_space(line[end]) {
        end += 1;
    }
    *pos = end;
    (end > start).then(|| &line[start..end])
}

/// Parses the entry lines of `chunk`, whose first line is `first_line`, into `out`, counting
/// them in `out.read`. More than the declared count is an error at the first extra one.
fn parse_chunk<T: MtxValue>(
    chunk: &[u8],
    first_line: usize,
    shape: &Shape,
    out: &mut Chunk<T>,
) -> Result<()> {
    let pattern = shape.field == Field::Pattern;
    let mut pos = 0;
    let mut line = first_line;
    while pos < chunk.len() {
        let next = match fast_entry(chunk, pos, pattern) {
            Some((r, c, v, next)) => {
                let r = check_index(r, "row", shape.rows, line)?;
                let c = check_index(c, "column", shape.cols, line)?;
                add_entry(r, c, v, line, shape, out)?;
                next
            }
            None => {
                let end = memchr::memchr(b'\n', &chunk[pos..]).map_or(chunk.len(), |i| pos + i);
                parse_line(&chunk[pos..end], line, shape, out)?;
                end + 1
            }
        };
        pos = next;
        line += 1;
    }
    Ok(())
}

/// The digits of a 1-based index at `*pos` (1 to 19 of them, so no overflow), moving past them.
fn digits(b: &[u8], pos: &mut usize) -> Option<usize> {
    let start = *pos;
    let mut n = 0u64;
    while let Some(d) = b
        .get(*pos)
        .map(|&c| c.wrapping_sub(b'0'))
        .filter(|&d| d <= 9)
    {
        if *pos - start == 19 {
            return None;
        }
        n = n * 10 + u64::from(d);
        *pos += 1;
    }
    if *pos == start {
        return None;
    }
    usize::try_from(n).ok()
}

/// Moves `*pos` past spaces and tabs; `None` if there were none.
fn gap(b: &[u8], pos: &mut usize) -> Option<()> {
    let start = *pos;
    while matches!(b.get(*pos), Some(b' ' | b'\t')) {
        *pos += 1;
    }
    (*pos > start).then_some(())
}

/// The common entry line at `pos`, read in one pass: `row col value` (or `row col` when
/// `pattern`) with plain digits for the indices, spaces or tabs between, then the line's end.
/// Returns the indices, the value token and where the next line starts; `None` for any other
/// line (a comment, a blank, an error), which [`parse_line`] then reads.
fn fast_entry(b: &[u8], pos: usize, pattern: bool) -> Option<(usize, usize, &[u8], usize)> {
    let mut p = pos;
    let r = digits(b, &mut p)?;
    gap(b, &mut p)?;
    let c = digits(b, &mut p)?;
    let mut value: &[u8] = &[];
    if !pattern {
        gap(b, &mut p)?;
        let start = p;
        while b.get(p).is_some_and(|&x| !lex::is_space(x) && x != b'\n') {
            p += 1;
        }
        value = &b[start..p];
    }
    while b.get(p).is_some_and(|&x| lex::is_space(x)) {
        p += 1;
    }
    match b.get(p) {
        None => Some((r, c, value, p)),
        Some(b'\n') => Some((r, c, value, p + 1)),
        Some(_) => None,
    }
}

/// Reads one line (without its newline) of any shape: skips blanks and comments, parses an
/// entry, or names what is wrong with it.
fn parse_line<T: MtxValue>(l: &[u8], line: usize, shape: &Shape, out: &mut Chunk<T>) -> Result<()> {
    let expect = if shape.field == Field::Pattern { 2 } else { 3 };
    let mut pos = 0;
    let Some(r) = next_token(l, &mut pos) else {
        return Ok(());
    };
    if r[0] == b'%' {
        return Ok(());
    }
    // Counted before the fields are checked, so the first extra line is named as extra.
    if out.read == shape.entries {
        return Err(more_entries(shape, line));
    }
    let c = next_token(l, &mut pos).ok_or_else(|| fields_error(l, line, expect))?;
    let v = if expect == 3 {
        next_token(l, &mut pos).ok_or_else(|| fields_error(l, line, expect))?
    } else {
        &[]
    };
    if next_token(l, &mut pos).is_some() {
        return Err(fields_error(l, line, expect));
    }
    let r = index(r, "row", shape.rows, line)?;
    let c = index(c, "column", shape.cols, line)?;
    add_entry(r, c, v, line, shape, out)
}

fn more_entries(shape: &Shape, line: usize) -> Error {
    err(
        line,
        format!(
            "more entries than the {} the size line declares",
            shape.entries
        ),
    )
}

/// Counts an entry line with valid 0-based indices and adds its entry (and its mirror).
fn add_entry<T: MtxValue>(
    r: usize,
    c: usize,
    v: &[u8],
    line: usize,
    shape: &Shape,
    out: &mut Chunk<T>,
) -> Result<()> {
    if out.read == shape.entries {
        return Err(more_entries(shape, line));
    }
    out.read += 1;
    let value = match shape.field {
        Field::Pattern => T::ONE,
        // Integers must look like integers, even though they are stored as floats.
        Field::Integer if !lex::is_integer(v) => {
            return Err(err(
                line,
                format!("the value `{}` is not an integer", lex::show(v)),
            ))
        }
        Field::Integer | Field::Real => T::parse_token(v).ok_or_else(|| {
            err(
                line,
                format!("the value `{}` is not a number", lex::show(v)),
            )
        })?,
    };
    // Both indices are below the column count (a symmetric matrix is square), so both fit the
    // u32 column index.
    push(out, shape.shift, r, c as u32, value, line)?;
    if shape.symmetric && r != c {
        push(out, shape.shift, c, r as u32, value, line)?;
    }
    Ok(())
}

/// Appends an entry to its bucket, growing the bucket fallibly.
fn push<T>(
    out: &mut Chunk<T>,
    shift: u32,
    row: usize,
    col: u32,
    value: T,
    line: usize,
) -> Result<()> {
    // `row >> shift` is below the bucket count: `new_chunk` made one per band of rows.
    let Some(bucket) = out.buckets.get_mut(row >> shift) else {
        return Err(err(line, format!("row {row} has no bucket")));
    };
    if bucket.len() == bucket.capacity() {
        bucket.try_reserve(bucket.len().max(1024)).map_err(|_| {
            err(
                line,
                format!(
                    "the entries up to here need more than {} bytes, which the host cannot \
                     allocate",
                    bucket.len().saturating_mul(std::mem::size_of::<Entry<T>>())
                ),
            )
        })?;
    }
    // The low `shift` (at most 32) bits of the row: they fit.
    let row = (row & ((1usize << shift) - 1)) as u32;
    bucket.push(Entry { row, col, value });
    Ok(())
}

/// The error for an entry line with the wrong number of fields.
fn fields_error(l: &[u8], line: usize, expect: usize) -> Error {
    let found = lex::tokens(l).count();
    if found < expect {
        err(
            line,
            format!(
                "expected {expect} fields (row col{}), found {found}",
                if expect == 3 { " value" } else { "" },
            ),
        )
    } else {
        err(line, format!("expected {expect} fields, found {found}"))
    }
}

/// A 1-based index token as a 0-based index below `n`.
fn index(token: &[u8], what: &str, n: usize, line: usize) -> Result<usize> {
    let i = lex::parse_usize(token).ok_or_else(|| {
        err(
            line,
            format!(
                "the {what} index `{}` is not a positive integer",
                lex::show(token)
            ),
        )
    })?;
    check_index(i, what, n, line)
}

/// A 1-based index as a 0-based index below `n`.
fn check_index(i: usize, what: &str, n: usize, line: usize) -> Result<usize> {
    if i == 0 || i > n {
        return Err(err(
            line,
            format!("the {what} index {i} is outside 1..={n}"),
        ));
    }
    Ok(i - 1)
}

/// Runs every job, the first on the calling thread and each other on a thread of its own, and
/// returns their results in order. A job that panics re-raises its panic here.
pub(super) fn on_threads<R: Send, F: FnOnce() -> R + Send>(jobs: Vec<F>) -> Vec<R> {
    let mut jobs = jobs.into_iter();
    let Some(first) = jobs.next() else {
        return Vec::new();
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.map(|job| scope.spawn(job)).collect();
        let mut results = vec![first()];
        for h in handles {
            results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        results
    })
}

/// Builds the CSR from the chunks' entries, in file order: a counting sort places each row's
/// entries in the order they were read, each row is then sorted by column (stably; rows that are
/// already sorted, as in most files, are left alone) and duplicates are summed in file order —
/// the same result, bit for bit, as a stable sort of all entries by (row, column). Buckets are
/// independent: runs of them, of about equal entry counts, go to `threads` threads, each owning
/// its rows' slice of the arrays.
pub(super) fn build_csr<T: MtxValue>(
    shape: &Shape,
    chunks: Vec<Chunk<T>>,
    threads: usize,
) -> Result<Csr<T>> {
    // The sizes were checked, so an error here is the host running out of memory.
    let oom = |e: Error| err(shape.size_line, e.to_string());
    let rows = shape.rows;
    let count = (rows >> shape.shift) + 1;
    // Where each bucket's entries start in the arrays before duplicates are summed.
    let mut starts = vec![0usize; count + 1];
    for b in 0..count {
        let size: usize = chunks.iter().map(|c| c.buckets[b].len()).sum();
        starts[b + 1] = starts[b] + size;
    }
    let total = starts[count];
    let mut offsets = zero_offsets(rows, "row").map_err(oom)?;
    let what = format!("the entries of {total} triplets");
    let mut col_indices: Vec<u32> = try_with_capacity(total, &what).map_err(oom)?;
    let mut values: Vec<T> = try_with_capacity(total, &what).map_err(oom)?;
    col_indices.resize(total, 0);
    values.resize(total, T::ONE);

    // Runs of buckets: cut where the entry count crosses even shares.
    let mut cuts = vec![0];
    for k in 1..threads {
        let target = (total as u128 * k as u128 / threads as u128) as usize;
        let cut = starts.partition_point(|&s| s < target).min(count);
        if cut > *cuts.last().unwrap_or(&0) && cut < count {
            cuts.push(cut);
        }
    }
    cuts.push(count);
    let chunks = &chunks;
    let mut jobs = Vec::new();
    let (mut cols_left, mut vals_left) = (&mut col_indices[..], &mut values[..]);
    let mut offsets_left = &mut offsets[1..];
    for w in cuts.windows(2) {
        let (b0, b1) = (w[0], w[1]);
        let len = starts[b1] - starts[b0];
        let (cols, cols_tail) = cols_left.split_at_mut(len);
        let (vals, vals_tail) = vals_left.split_at_mut(len);
        let row_lo = b0 << shape.shift;
        let row_hi = (b1 << shape.shift).min(rows);
        let (ends, ends_tail) = offsets_left.split_at_mut(row_hi - row_lo);
        (cols_left, vals_left, offsets_left) = (cols_tail, vals_tail, ends_tail);
        let band = Band {
            buckets: b0..b1,
            row_lo,
            cols,
            vals,
            ends,
        };
        jobs.push(move || fill_band(chunks, shape, band));
    }
    let lens = on_threads(jobs);

    // Move each run's compacted entries down to where the previous run's end.
    let mut write = 0;
    for (w, len) in cuts.windows(2).zip(lens) {
        let len = len?;
        let from = starts[w[0]];
        // Without duplicates nothing moves.
        if from != write {
            col_indices.copy_within(from..from + len, write);
            values.copy_within(from..from + len, write);
        }
        let row_lo = w[0] << shape.shift;
        let row_hi = (w[1] << shape.shift).min(rows);
        for end in &mut offsets[row_lo + 1..=row_hi] {
            *end += write;
        }
        write += len;
    }
    col_indices.truncate(write);
    values.truncate(write);
    Ok(Csr {
        num_rows: rows,
        num_cols: shape.cols,
        row_offsets: offsets,
        col_indices,
        values,
    })
}

/// A run of buckets and what it owns: its rows' slice of the column and value arrays, and
/// their row ends (`ends[i]` is the end of row `row_lo + i`).
struct Band<'a, T> {
    buckets: std::ops::Range<usize>,
    row_lo: usize,
    cols: &'a mut [u32],
    vals: &'a mut [T],
    ends: &'a mut [usize],
}

/// Fills a band: for each bucket, counts its rows, scatters its entries in file order (chunk by
/// chunk), sorts each row by column and sums duplicates. Leaves each row's compacted end in
/// `ends`, relative to the band's start, and returns the band's compacted length.
fn fill_band<T: MtxValue>(chunks: &[Chunk<T>], shape: &Shape, band: Band<'_, T>) -> Result<usize> {
    let Band {
        buckets,
        row_lo,
        cols,
        vals,
        ends,
    } = band;
    let mut cursor: Vec<usize> = Vec::new();
    let mut scratch: Vec<(u32, T)> = Vec::new();
    let mut read = 0;
    let mut write = 0;
    for b in buckets {
        let lo = b << shape.shift;
        let hi = ((b + 1) << shape.shift).min(shape.rows);
        // `cursor[i]` counts row `lo + i`, then becomes its next free slot.
        cursor.clear();
        cursor
            .try_reserve(hi - lo)
            .map_err(|_| err(shape.size_line, "the host cannot allocate a bucket's rows"))?;
        cursor.resize(hi - lo, 0);
        for e in chunks.iter().flat_map(|c| &c.buckets[b]) {
            cursor[e.row as usize] += 1;
        }
        let mut next = read;
        for slot in cursor.iter_mut() {
            let n = *slot;
            *slot = next;
            next += n;
        }
        for e in chunks.iter().flat_map(|c| &c.buckets[b]) {
            let slot = &mut cursor[e.row as usize];
            cols[*slot] = e.col;
            vals[*slot] = e.value;
            *slot += 1;
        }
        // Each cursor now sits at its row's end.
        let mut start = read;
        for (i, &row_end) in cursor.iter().enumerate() {
            sort_row(
                &mut cols[start..row_end],
                &mut vals[start..row_end],
                &mut scratch,
            )
            .map_err(|()| err(shape.size_line, "the host cannot allocate a row to sort"))?;
            // Compact in place: `write` never passes the entry being read.
            let row_start = write;
            for e in start..row_end {
                if write > row_start && cols[write - 1] == cols[e] {
                    let v = vals[e];
                    vals[write - 1] += v;
                } else {
                    cols[write] = cols[e];
                    vals[write] = vals[e];
                    write += 1;
                }
            }
            ends[lo - row_lo + i] = write;
            start = row_end;
        }
        read = next;
    }
    Ok(write)
}

/// Sorts a row by column, stably so duplicates keep their file order; a sorted row (as in most
/// files) is left alone.
fn sort_row<T: Copy>(
    cols: &mut [u32],
    vals: &mut [T],
    scratch: &mut Vec<(u32, T)>,
) -> std::result::Result<(), ()> {
    if cols.windows(2).all(|w| w[0] <= w[1]) {
        return Ok(());
    }
    scratch.clear();
    scratch.try_reserve(cols.len()).map_err(|_| ())?;
    scratch.extend(cols.iter().copied().zip(vals.iter().copied()));
    scratch.sort_by_key(|&(c, _)| c);
    for ((c, v), &(sc, sv)) in cols.iter_mut().zip(vals.iter_mut()).zip(scratch.iter()) {
        *c = sc;
        *v = sv;
    }
    Ok(())
}
