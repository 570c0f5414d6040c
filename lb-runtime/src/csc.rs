//! Compressed sparse columns on the host ([`Csc`]) and the device ([`DeviceCsc`]): a tile set
//! whose tiles are the columns, validated on creation like [`crate::Csr`].

use std::ops::Range;

use crate::buffer::{DeviceBuffer, Element};
use crate::device::Device;
use crate::error::Result;
use crate::formats::{validate_compressed, Axes};
use lb_ptx::plan::OffsetWidth;

use crate::stats::TileStats;
use crate::tiles::DeviceTiles;

/// Compressed sparse columns. Fields are public: kernel bodies read them as plain Rust.
///
/// Invariants (checked by [`Csc::new`] and [`Csc::validate`]): `col_offsets` has
/// `num_cols + 1` entries, starts at 0, never decreases and ends at `nnz`; `row_indices` and
/// `values` have `nnz` entries; every row index is below `num_rows`.
#[derive(Clone, Debug, PartialEq)]
pub struct Csc<T> {
    pub num_rows: usize,
    pub num_cols: usize,
    pub col_offsets: Vec<usize>,
    pub row_indices: Vec<u32>,
    pub values: Vec<T>,
}

impl<T> Csc<T> {
    /// A matrix from its arrays, after checking every invariant.
    pub fn new(
        num_rows: usize,
        num_cols: usize,
        col_offsets: Vec<usize>,
        row_indices: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Csc<T>> {
        let csc = Csc {
            num_rows,
            num_cols,
            col_offsets,
            row_indices,
            values,
        };
        csc.validate()?;
        Ok(csc)
    }

    /// Checks the invariants listed on [`Csc`]; the error names the first column or entry at
    /// fault.
    pub fn validate(&self) -> Result<()> {
        validate_compressed(
            &Axes::CSC,
            self.num_cols,
            self.num_rows,
            &self.col_offsets,
            &self.row_indices,
            self.values.len(),
        )
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.row_indices.len()
    }

    /// The positions of column `j`'s entries. Panics if `j` is not below `num_cols`.
    pub fn col(&self, j: usize) -> Range<usize> {
        self.col_offsets[j]..self.col_offsets[j + 1]
    }
}

/// A [`Csc`] in device memory (ABI in `lb_ptx::body::TileSetKind`).
#[derive(Debug)]
pub struct DeviceCsc<T: Element> {
    /// The column offsets (32-bit or 64-bit, see [`crate::DeviceOffsets`]), statistics and cache.
    pub(crate) tiles: DeviceTiles,
    pub(crate) row_indices: DeviceBuffer<u32>,
    pub(crate) values: DeviceBuffer<T>,
    num_rows: usize,
    num_cols: usize,
}

impl<T: Element> DeviceCsc<T> {
    /// Validates `csc`, then copies it to `dev`, its offsets 32-bit when
    /// [`OffsetWidth::for_tile_set`] allows and 64-bit otherwise.
    pub fn upload(dev: &Device, csc: &Csc<T>) -> Result<Self> {
        Self::upload_inner(dev, csc, None)
    }

    /// [`DeviceCsc::upload`] with the offsets stored at `width` (see
    /// [`crate::DeviceCsr::upload_with_offsets`]).
    pub fn upload_with_offsets(dev: &Device, csc: &Csc<T>, width: OffsetWidth) -> Result<Self> {
        Self::upload_inner(dev, csc, Some(width))
    }

    fn upload_inner(dev: &Device, csc: &Csc<T>, width: Option<OffsetWidth>) -> Result<Self> {
        csc.validate()?;
        Ok(DeviceCsc {
            tiles: DeviceTiles::of_valid(dev, &csc.col_offsets, csc.num_rows, width)?,
            row_indices: dev.upload(&csc.row_indices)?,
            values: dev.upload(&csc.values)?,
            num_rows: csc.num_rows,
            num_cols: csc.num_cols,
        })
    }

    /// Tiles, the other dimension, atoms, mean and longest tile, as measured at upload (what
    /// `schedule = "auto"` picks a schedule from).
    pub fn stats(&self) -> &TileStats {
        self.tiles.stats()
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    pub fn nnz(&self) -> usize {
        self.row_indices.len()
    }

    /// How the column offsets are stored on the device.
    pub fn offset_width(&self) -> OffsetWidth {
        self.tiles.offset_width()
    }

    pub fn device(&self) -> &Device {
        self.values.device()
    }

    /// Copies the matrix back to the host (validated).
    pub fn download(&self) -> Result<Csc<T>> {
        let col_offsets = self.tiles.offsets.download("column offset")?;
        Csc::new(
            self.num_rows,
            self.num_cols,
            col_offsets,
            self.row_indices.download()?,
            self.values.download()?,
        )
    }
}
