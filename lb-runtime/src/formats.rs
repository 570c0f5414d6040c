//! Sparse formats on the host ([`Csr`]) and on the device ([`DeviceCsr`]), validated on creation;
//! the tile-set traits every format implements, and conversions between CSR, CSC and COO.
//!
//! Validation happens on the host, so bad data is an [`Error::InvalidMatrix`] naming the row or
//! entry at fault, never an illegal address on the GPU.

use std::ops::{AddAssign, Range};

use lb_ptx::plan::OffsetWidth;

use crate::buffer::{DeviceBuffer, Element};
use crate::coo::{Coo, DeviceCoo};
use crate::csc::{Csc, DeviceCsc};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::stats::TileStats;
use crate::tiles::{DeviceTileSet, DeviceTiles};

/// Compressed sparse rows. Fields are public: kernel bodies read them as plain Rust.
///
/// Invariants (checked by [`Csr::new`] and [`Csr::validate`]): `row_offsets` has
/// `num_rows + 1` entries, starts at 0, never decreases and ends at `nnz`; `col_indices` and
/// `values` have `nnz` entries; every column index is below `num_cols`. Columns within a row
/// need not be sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    pub num_rows: usize,
    pub num_cols: usize,
    pub row_offsets: Vec<usize>,
    pub col_indices: Vec<u32>,
    pub values: Vec<T>,
}

fn invalid(msg: String) -> Error {
    Error::InvalidMatrix(msg)
}

/// An empty vector with room for `n` items. Sizes come from user data (a file header, a row
/// count), so a request the host cannot meet is an [`Error::InvalidMatrix`] naming `what` and
/// the bytes asked for, never an abort.
pub(crate) fn try_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        invalid(match n.checked_mul(std::mem::size_of::<T>()) {
            Some(bytes) => format!(
                "{what} need {bytes} bytes, which the host cannot allocate: check the sizes \
                 (a size read from a file may be corrupt)"
            ),
            None => format!(
                "{what} need more than {} bytes: check the sizes (a size read from a file may \
                 be corrupt)",
                usize::MAX
            ),
        })
    })?;
    Ok(v)
}

/// `tiles + 1` zero offsets, the start of a compressed format's offsets, allocated fallibly
/// (see [`try_with_capacity`]); `axis` names the tiles ("row", "column").
pub(crate) fn zero_offsets(tiles: usize, axis: &str) -> Result<Vec<usize>> {
    let n = tiles.checked_add(1).ok_or_else(|| {
        invalid(format!(
            "{tiles} {axis}s need {tiles} + 1 offsets, more than a usize can count: check the \
             {axis} count"
        ))
    })?;
    let mut offsets = try_with_capacity(n, &format!("the offsets of {tiles} {axis}s"))?;
    offsets.resize(n, 0);
    Ok(offsets)
}

/// The largest count a u32 index addresses (indices `0..2^32`).
const U32_RANGE: u64 = u32::MAX as u64 + 1;

impl<T> Csr<T> {
    /// A matrix from its arrays, after checking every invariant.
    pub fn new(
        num_rows: usize,
        num_cols: usize,
        row_offsets: Vec<usize>,
        col_indices: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Csr<T>> {
        let csr = Csr {
            num_rows,
            num_cols,
            row_offsets,
            col_indices,
            values,
        };
        csr.validate()?;
        Ok(csr)
    }

    /// Checks the invariants listed on [`Csr`]; the error names the first row or entry at fault.
    pub fn validate(&self) -> Result<()> {
        validate_compressed(
            &Axes::CSR,
            self.num_rows,
            self.num_cols,
            &self.row_offsets,
            &self.col_indices,
            self.values.len(),
        )
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_indices.len()
    }

    /// The positions of row `i`'s entries in `col_indices` and `values`. Panics if `i` is not
    /// below `num_rows`, like slice indexing.
    pub fn row(&self, i: usize) -> Range<usize> {
        self.row_offsets[i]..self.row_offsets[i + 1]
    }

    /// An `num_rows × num_cols` matrix with no entries.
    ///
    /// Fallible like the other constructors, because even an empty CSR stores `num_rows + 1`
    /// row offsets: a row count from user data can overflow that length or ask for more memory
    /// than the host has, and either is an [`Error::InvalidMatrix`] (with the bytes asked for)
    /// rather than an abort. More than 2^32 columns is an error too (column indices are u32).
    pub fn empty(num_rows: usize, num_cols: usize) -> Result<Csr<T>> {
        if num_cols as u64 > U32_RANGE {
            return Err(invalid(format!(
                "{num_cols} columns exceed the u32 index range"
            )));
        }
        Ok(Csr {
            num_rows,
            num_cols,
            row_offsets: zero_offsets(num_rows, "row")?,
            col_indices: Vec::new(),
            values: Vec::new(),
        })
    }
}

impl<T: Copy + AddAssign> Csr<T> {
    /// A matrix from `(row, col, value)` triplets in any order. Rows come out sorted by column,
    /// and duplicate `(row, col)` pairs are summed into one entry (as Matrix Market readers do).
    ///
    /// A triplet outside the matrix, more than 2^32 columns, or a row count whose `num_rows + 1`
    /// offsets overflow or cannot be allocated is an [`Error::InvalidMatrix`]; every allocation
    /// is fallible, so no size aborts the process.
    pub fn from_triplets(
        num_rows: usize,
        num_cols: usize,
        mut triplets: Vec<(usize, usize, T)>,
    ) -> Result<Csr<T>> {
        if num_cols as u64 > U32_RANGE {
            return Err(invalid(format!(
                "{num_cols} columns exceed the u32 index range"
            )));
        }
        if let Some((i, &(r, c, _))) = triplets
            .iter()
            .enumerate()
            .find(|(_, &(r, c, _))| r >= num_rows || c >= num_cols)
        {
            return Err(invalid(format!(
                "triplet {i} is at ({r}, {c}), outside the {num_rows} × {num_cols} matrix"
            )));
        }
        // Stable, so duplicates are summed in input order: deterministic float rounding.
        triplets.sort_by_key(|&(r, c, _)| (r, c));
        let mut row_offsets = zero_offsets(num_rows, "row")?;
        let what = format!("the entries of {} triplets", triplets.len());
        let mut col_indices: Vec<u32> = try_with_capacity(triplets.len(), &what)?;
        let mut values: Vec<T> = try_with_capacity(triplets.len(), &what)?;
        let mut last: Option<(usize, usize)> = None;
        for (r, c, v) in triplets {
            if last == Some((r, c)) {
                if let Some(slot) = values.last_mut() {
                    *slot += v;
                }
                continue;
            }
            last = Some((r, c));
            row_offsets[r + 1] += 1;
            col_indices.push(c as u32);
            values.push(v);
        }
        for r in 0..num_rows {
            row_offsets[r + 1] += row_offsets[r];
        }
        Ok(Csr {
            num_rows,
            num_cols,
            row_offsets,
            col_indices,
            values,
        })
    }
}

/// A device tile set's tile offsets (`num_tiles + 1` entries), stored 32-bit when
/// [`OffsetWidth::for_tile_set`] allows (`tiles + atoms <= u32::MAX`) and 64-bit otherwise; host
/// `usize` is not a device type. Kernels read them at the width of their plan
/// (`Plan::offsets`), which must be this one.
#[derive(Debug)]
pub enum DeviceOffsets {
    U32(DeviceBuffer<u32>),
    U64(DeviceBuffer<u64>),
}

impl DeviceOffsets {
    /// Uploads `offsets` (of a tile set of `tiles` tiles and `atoms` atoms) at `width`, or at
    /// the rule's width when `None`. 32-bit offsets for a tile set too large for them are an
    /// [`Error::Shape`].
    pub(crate) fn upload(
        dev: &Device,
        offsets: &[usize],
        atoms: usize,
        width: Option<OffsetWidth>,
    ) -> Result<DeviceOffsets> {
        let tiles = offsets.len().saturating_sub(1) as u64;
        let fits = OffsetWidth::for_tile_set(tiles, atoms as u64);
        match width.unwrap_or(fits) {
            OffsetWidth::U32 if fits == OffsetWidth::U32 => {
                let v: Vec<u32> = offsets.iter().map(|&o| o as u32).collect();
                Ok(DeviceOffsets::U32(dev.upload(&v)?))
            }
            OffsetWidth::U32 => Err(Error::Shape(format!(
                "a tile set of {tiles} tiles and {atoms} atoms cannot store 32-bit offsets \
                 (tiles + atoms must be at most {})",
                OffsetWidth::U32_LIMIT
            ))),
            OffsetWidth::U64 => {
                let v: Vec<u64> = offsets.iter().map(|&o| o as u64).collect();
                Ok(DeviceOffsets::U64(dev.upload(&v)?))
            }
        }
    }

    pub fn width(&self) -> OffsetWidth {
        match self {
            DeviceOffsets::U32(_) => OffsetWidth::U32,
            DeviceOffsets::U64(_) => OffsetWidth::U64,
        }
    }

    pub fn device_addr(&self) -> u64 {
        match self {
            DeviceOffsets::U32(b) => b.device_addr(),
            DeviceOffsets::U64(b) => b.device_addr(),
        }
    }

    /// Entries (`num_tiles + 1`).
    pub fn len(&self) -> usize {
        match self {
            DeviceOffsets::U32(b) => b.len(),
            DeviceOffsets::U64(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn device(&self) -> &Device {
        match self {
            DeviceOffsets::U32(b) => b.device(),
            DeviceOffsets::U64(b) => b.device(),
        }
    }

    /// Copies the offsets back as `usize`; `what` names them in the error of one that does not
    /// fit.
    pub(crate) fn download(&self, what: &str) -> Result<Vec<usize>> {
        let wide: Vec<u64> = match self {
            DeviceOffsets::U32(b) => b.download()?.into_iter().map(u64::from).collect(),
            DeviceOffsets::U64(b) => b.download()?,
        };
        wide.into_iter()
            .map(|o| {
                usize::try_from(o).map_err(|_| invalid(format!("{what} {o} does not fit in usize")))
            })
            .collect()
    }
}

/// A [`Csr`] in device memory; kernels receive its three arrays and three sizes.
#[derive(Debug)]
pub struct DeviceCsr<T: Element> {
    /// The row offsets (32-bit or 64-bit, see [`DeviceOffsets`]), statistics and cache.
    pub(crate) tiles: DeviceTiles,
    pub(crate) col_indices: DeviceBuffer<u32>,
    pub(crate) values: DeviceBuffer<T>,
    num_cols: usize,
}

impl<T: Element> DeviceCsr<T> {
    /// Validates `csr`, then copies it to `dev`, its offsets 32-bit when
    /// [`OffsetWidth::for_tile_set`] allows and 64-bit otherwise.
    pub fn upload(dev: &Device, csr: &Csr<T>) -> Result<Self> {
        Self::upload_inner(dev, csr, None)
    }

    /// [`DeviceCsr::upload`] with the offsets stored at `width` (64-bit for any matrix, say, to
    /// run the 64-bit plans on a small one); 32-bit offsets for a matrix too large for them are
    /// an [`Error::Shape`].
    pub fn upload_with_offsets(dev: &Device, csr: &Csr<T>, width: OffsetWidth) -> Result<Self> {
        Self::upload_inner(dev, csr, Some(width))
    }

    /// [`DeviceCsr::upload`] of a matrix given as borrowed arrays: a split's part uploads its
    /// rows' column indices and values straight from the whole matrix's, so the host never
    /// holds a second copy of them (a matrix split because no one GPU holds it can fill most of
    /// the host's memory too).
    pub(crate) fn upload_slices(
        dev: &Device,
        (num_rows, num_cols): (usize, usize),
        row_offsets: &[usize],
        col_indices: &[u32],
        values: &[T],
    ) -> Result<Self> {
        validate_compressed(
            &Axes::CSR,
            num_rows,
            num_cols,
            row_offsets,
            col_indices,
            values.len(),
        )?;
        Self::of_valid(dev, (row_offsets, num_cols), col_indices, values, None)
    }

    fn upload_inner(dev: &Device, csr: &Csr<T>, width: Option<OffsetWidth>) -> Result<Self> {
        csr.validate()?;
        let offsets = (&csr.row_offsets[..], csr.num_cols);
        Self::of_valid(dev, offsets, &csr.col_indices, &csr.values, width)
    }

    /// The copy on `dev` of a CSR already validated.
    fn of_valid(
        dev: &Device,
        (row_offsets, num_cols): (&[usize], usize),
        col_indices: &[u32],
        values: &[T],
        width: Option<OffsetWidth>,
    ) -> Result<Self> {
        Ok(DeviceCsr {
            tiles: DeviceTiles::of_valid(dev, row_offsets, num_cols, width)?,
            col_indices: dev.upload(col_indices)?,
            values: dev.upload(values)?,
            num_cols,
        })
    }

    /// Rows, columns, nonzeros, mean and longest row, as measured at upload.
    pub fn stats(&self) -> &TileStats {
        self.tiles.stats()
    }

    pub fn num_rows(&self) -> usize {
        self.tiles.num_tiles()
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    pub fn nnz(&self) -> usize {
        self.col_indices.len()
    }

    /// How the row offsets are stored on the device.
    pub fn offset_width(&self) -> OffsetWidth {
        self.tiles.offset_width()
    }

    /// The device holding the matrix.
    pub fn device(&self) -> &Device {
        self.values.device()
    }

    /// Copies the matrix back to the host (validated: a kernel may have written into it).
    pub fn download(&self) -> Result<Csr<T>> {
        let row_offsets = self.tiles.offsets.download("row offset")?;
        Csr::new(
            self.num_rows(),
            self.num_cols,
            row_offsets,
            self.col_indices.download()?,
            self.values.download()?,
        )
    }
}

/// A host tile set as the CPU reference walks it: its tiles and where each tile's atoms begin.
pub trait TileSet {
    /// Number of tiles: rows of a CSR or COO, columns of a CSC.
    fn num_tiles(&self) -> usize;
    /// The atoms of tile `tile` (below `num_tiles`), found without allocating: a COO's rows
    /// come from its sorted row indices, so the CPU reference needs no offsets array and cannot
    /// fail for want of memory.
    fn tile_atoms(&self, tile: usize) -> Range<usize>;
}

impl<T> TileSet for Csr<T> {
    fn num_tiles(&self) -> usize {
        self.num_rows
    }
    fn tile_atoms(&self, tile: usize) -> Range<usize> {
        self.row_offsets[tile]..self.row_offsets[tile + 1]
    }
}

impl<T> TileSet for Csc<T> {
    fn num_tiles(&self) -> usize {
        self.num_cols
    }
    fn tile_atoms(&self, tile: usize) -> Range<usize> {
        self.col_offsets[tile]..self.col_offsets[tile + 1]
    }
}

impl<T> TileSet for Coo<T> {
    fn num_tiles(&self) -> usize {
        self.num_rows
    }
    /// Two binary searches of the row indices, which a valid COO keeps sorted.
    fn tile_atoms(&self, tile: usize) -> Range<usize> {
        let start = self.row_indices.partition_point(|&r| (r as usize) < tile);
        let end = self.row_indices.partition_point(|&r| (r as usize) <= tile);
        start..end.max(start)
    }
}

impl<T: Element> DeviceTileSet for DeviceCsr<T> {
    fn tiles(&self) -> &DeviceTiles {
        &self.tiles
    }
}

impl<T: Element> DeviceTileSet for DeviceCsc<T> {
    fn tiles(&self) -> &DeviceTiles {
        &self.tiles
    }
}

impl<T: Element> DeviceTileSet for DeviceCoo<T> {
    fn tiles(&self) -> &DeviceTiles {
        &self.tiles
    }
}

/// Transposes a compressed structure (`major` offsets over `indices` < `minor`, already
/// validated): the offsets of the other dimension, its indices, and for each new position the
/// old one it comes from. Stable, so each new tile lists its entries in the old major order
/// (CSR → CSC keeps rows sorted). The new indices are u32, so more than 2^32 majors is an
/// [`Error::InvalidMatrix`]; allocations are fallible (see [`try_with_capacity`]).
fn transpose(
    axes: &Axes,
    minor: usize,
    offsets: &[usize],
    indices: &[u32],
) -> Result<(Vec<usize>, Vec<u32>, Vec<usize>)> {
    let majors = offsets.len().saturating_sub(1);
    if majors as u64 > U32_RANGE {
        return Err(invalid(format!(
            "{majors} {}s exceed the u32 index range of the transposed format",
            axes.major
        )));
    }
    let mut new_offsets = zero_offsets(minor, axes.minor)?;
    for &i in indices {
        new_offsets[i as usize + 1] += 1;
    }
    for j in 0..minor {
        new_offsets[j + 1] += new_offsets[j];
    }
    let mut next = try_with_capacity(new_offsets.len(), "the transpose's cursors")?;
    next.extend_from_slice(&new_offsets);
    let what = format!("the transpose of {} entries", indices.len());
    let mut new_indices = try_with_capacity(indices.len(), &what)?;
    new_indices.resize(indices.len(), 0u32);
    let mut from = try_with_capacity(indices.len(), &what)?;
    from.resize(indices.len(), 0usize);
    for major in 0..majors {
        for e in offsets[major]..offsets[major + 1] {
            let slot = &mut next[indices[e] as usize];
            new_indices[*slot] = major as u32;
            from[*slot] = e;
            *slot += 1;
        }
    }
    Ok((new_offsets, new_indices, from))
}

/// `values` gathered in the order `from` lists, allocated fallibly.
fn gather<T: Clone>(values: &[T], from: &[usize]) -> Result<Vec<T>> {
    let mut out = try_with_capacity(from.len(), &format!("{} values", from.len()))?;
    out.extend(from.iter().map(|&e| values[e].clone()));
    Ok(out)
}

// The conversions validate their source first (the fields are public, so it may be anything)
// and allocate fallibly: an invalid source or a size the host cannot hold is an error, never a
// panic or an abort.

impl<T: Clone> Csr<T> {
    /// The same matrix by columns (rows sorted within each column). More than 2^32 rows is an
    /// error (CSC row indices are u32), as is an invalid `self`.
    ///
    /// A CSC of A holds the same arrays as a CSR of Aᵀ, so this is also the transpose:
    /// reinterpret the result's fields as a `Csr` with rows and columns swapped.
    ///
    /// ```
    /// use lb_runtime::Csr;
    /// // A = [[1, 0, 2],
    /// //      [0, 3, 0]]
    /// let a = Csr::from_triplets(2, 3, vec![(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)])?;
    /// let csc = a.to_csc()?;
    /// assert_eq!(csc.col_offsets, [0, 1, 2, 3]);
    /// assert_eq!(csc.row_indices, [0, 1, 0]);
    /// assert_eq!(csc.values, [1.0, 3.0, 2.0]);
    /// // Aᵀ as a CSR: the CSC's arrays with the shape swapped.
    /// let at = Csr::new(a.num_cols, a.num_rows, csc.col_offsets, csc.row_indices, csc.values)?;
    /// assert_eq!(at.col_indices, [0, 1, 0]); // row 0 of Aᵀ is column 0 of A: (0, 0) = 1
    /// assert_eq!(at.row(2), 2..3); // row 2 of Aᵀ holds A's (0, 2) = 2
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn to_csc(&self) -> Result<Csc<T>> {
        self.validate()?;
        let (col_offsets, row_indices, from) = transpose(
            &Axes::CSR,
            self.num_cols,
            &self.row_offsets,
            &self.col_indices,
        )?;
        Ok(Csc {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            col_offsets,
            row_indices,
            values: gather(&self.values, &from)?,
        })
    }

    /// The same entries as coordinates, in the same (row) order. More than 2^32 rows is an
    /// error (COO row indices are u32), as is an invalid `self`.
    pub fn to_coo(&self) -> Result<Coo<T>> {
        self.validate()?;
        if self.num_rows as u64 > U32_RANGE {
            return Err(invalid(format!(
                "{} rows exceed the u32 index range of a COO",
                self.num_rows
            )));
        }
        let mut row_indices = try_with_capacity(self.nnz(), "the row indices of a COO")?;
        row_indices.extend(
            (0..self.num_rows).flat_map(|r| std::iter::repeat_n(r as u32, self.row(r).len())),
        );
        Ok(Coo {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            row_indices,
            col_indices: self.col_indices.clone(),
            values: self.values.clone(),
        })
    }
}

impl<T: Clone> Csc<T> {
    /// The same matrix by rows (columns sorted within each row); an invalid `self` is an error.
    pub fn to_csr(&self) -> Result<Csr<T>> {
        self.validate()?;
        let (row_offsets, col_indices, from) = transpose(
            &Axes::CSC,
            self.num_rows,
            &self.col_offsets,
            &self.row_indices,
        )?;
        Ok(Csr {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            row_offsets,
            col_indices,
            values: gather(&self.values, &from)?,
        })
    }

    /// The same entries as coordinates, sorted by row.
    pub fn to_coo(&self) -> Result<Coo<T>> {
        self.to_csr()?.to_coo()
    }
}

impl<T: Clone> Coo<T> {
    /// The same entries by rows, in the same order; an invalid `self` is an error.
    pub fn to_csr(&self) -> Result<Csr<T>> {
        self.validate()?;
        Ok(Csr {
            num_rows: self.num_rows,
            num_cols: self.num_cols,
            row_offsets: self.row_offsets()?,
            col_indices: self.col_indices.clone(),
            values: self.values.clone(),
        })
    }

    /// The same matrix by columns.
    pub fn to_csc(&self) -> Result<Csc<T>> {
        self.to_csr()?.to_csc()
    }
}

/// The names a compressed format (CSR, CSC) gives its axes, for its error messages.
pub(crate) struct Axes {
    /// The axis of the offsets: "row" for CSR.
    major: &'static str,
    minor: &'static str,
    offsets: &'static str,
}

impl Axes {
    pub(crate) const CSR: Axes = Axes {
        major: "row",
        minor: "column",
        offsets: "row_offsets",
    };
    pub(crate) const CSC: Axes = Axes {
        major: "column",
        minor: "row",
        offsets: "col_offsets",
    };
}

/// Checks a compressed format: `offsets` has `majors + 1` entries, starts at 0, never decreases
/// and ends at the number of `indices` and of values; every index is below `minors`, which
/// itself fits the u32 indices. The error names the first line or entry at fault.
pub(crate) fn validate_compressed(
    axes: &Axes,
    majors: usize,
    minors: usize,
    offsets: &[usize],
    indices: &[u32],
    values: usize,
) -> Result<()> {
    let Axes {
        major,
        minor,
        offsets: name,
    } = axes;
    // Indices are u32, so 2^32 is the most they can address.
    if minors as u64 > U32_RANGE {
        return Err(invalid(format!(
            "{minors} {minor}s exceed the u32 index range"
        )));
    }
    if offsets.len() != majors.saturating_add(1) {
        return Err(invalid(format!(
            "{name} has {} entries; {majors} {major}s need {}",
            offsets.len(),
            majors.saturating_add(1)
        )));
    }
    if offsets[0] != 0 {
        return Err(invalid(format!("{name}[0] is {}, not 0", offsets[0])));
    }
    if let Some(m) = (0..majors).find(|&m| offsets[m + 1] < offsets[m]) {
        return Err(invalid(format!(
            "{major} {m} ends before it starts ({name}[{m}] = {}, {name}[{}] = {})",
            offsets[m],
            m + 1,
            offsets[m + 1]
        )));
    }
    let last = offsets[majors];
    if indices.len() != last {
        return Err(invalid(format!(
            "{name} ends at {last} but there are {} {minor} indices",
            indices.len()
        )));
    }
    if values != last {
        return Err(invalid(format!(
            "{name} ends at {last} but there are {values} values"
        )));
    }
    if let Some(e) = indices.iter().position(|&i| i as usize >= minors) {
        let at = offsets.partition_point(|&o| o <= e) - 1;
        return Err(invalid(format!(
            "entry {e} ({major} {at}) has {minor} {} but there are {minors} {minor}s",
            indices[e]
        )));
    }
    Ok(())
}
