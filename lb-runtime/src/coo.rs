//! Coordinates on the host ([`Coo`]) and the device ([`DeviceCoo`]): a tile set whose atoms are
//! stored in row order and whose tiles are the rows.
//!
//! Every schedule finds a tile's atoms through tile offsets, which a COO does not store: the
//! device type computes the row offsets once, at upload, from the sorted row indices, and passes
//! them as the first slot of its kernel ABI (`lb_ptx::body::TileSetKind`).

use crate::buffer::{DeviceBuffer, Element};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::formats::zero_offsets;
use crate::stats::TileStats;
use crate::tiles::DeviceTiles;
use lb_ptx::plan::OffsetWidth;

/// Coordinate format, sorted by row. Fields are public: kernel bodies read them as plain Rust.
///
/// Invariants (checked by [`Coo::new`] and [`Coo::validate`]): `row_indices`, `col_indices` and
/// `values` have the same length; row indices never decrease and are below `num_rows`; column
/// indices are below `num_cols`. Columns within a row need not be sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct Coo<T> {
    pub num_rows: usize,
    pub num_cols: usize,
    pub row_indices: Vec<u32>,
    pub col_indices: Vec<u32>,
    pub values: Vec<T>,
}

fn invalid(msg: String) -> Error {
    Error::InvalidMatrix(msg)
}

impl<T> Coo<T> {
    /// A matrix from its arrays, after checking every invariant.
    pub fn new(
        num_rows: usize,
        num_cols: usize,
        row_indices: Vec<u32>,
        col_indices: Vec<u32>,
        values: Vec<T>,
    ) -> Result<Coo<T>> {
        let coo = Coo {
            num_rows,
            num_cols,
            row_indices,
            col_indices,
            values,
        };
        coo.validate()?;
        Ok(coo)
    }

    /// Checks the invariants listed on [`Coo`]; the error names the first entry at fault.
    pub fn validate(&self) -> Result<()> {
        let limit = u64::from(u32::MAX) + 1;
        if self.num_rows as u64 > limit || self.num_cols as u64 > limit {
            return Err(invalid(format!(
                "{} × {} exceeds the u32 index range",
                self.num_rows, self.num_cols
            )));
        }
        let n = self.row_indices.len();
        if self.col_indices.len() != n || self.values.len() != n {
            return Err(invalid(format!(
                "{n} row indices, {} column indices and {} values: the lengths must agree",
                self.col_indices.len(),
                self.values.len()
            )));
        }
        for e in 0..n {
            let (r, c) = (self.row_indices[e] as usize, self.col_indices[e] as usize);
            if r >= self.num_rows || c >= self.num_cols {
                return Err(invalid(format!(
                    "entry {e} is at ({r}, {c}), outside the {} × {} matrix",
                    self.num_rows, self.num_cols
                )));
            }
            if e > 0 && self.row_indices[e - 1] > self.row_indices[e] {
                return Err(invalid(format!(
                    "entry {e} has row {r} after row {}: entries must be sorted by row",
                    self.row_indices[e - 1]
                )));
            }
        }
        Ok(())
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.row_indices.len()
    }

    /// Where each row's entries begin (`num_rows + 1` entries): the tile offsets. Assumes the
    /// invariants (rows in range and sorted). A row count whose offsets overflow or cannot be
    /// allocated is an [`Error::InvalidMatrix`] naming the bytes asked for.
    pub fn row_offsets(&self) -> Result<Vec<usize>> {
        let mut offsets = zero_offsets(self.num_rows, "row")?;
        for &r in &self.row_indices {
            if let Some(o) = offsets.get_mut(r as usize + 1) {
                *o += 1;
            }
        }
        for r in 0..self.num_rows {
            offsets[r + 1] += offsets[r];
        }
        Ok(offsets)
    }
}

/// A [`Coo`] in device memory, with its row offsets (ABI in `lb_ptx::body::TileSetKind`).
#[derive(Debug)]
pub struct DeviceCoo<T: Element> {
    /// The row offsets computed at upload (32-bit or 64-bit, see [`crate::DeviceOffsets`]),
    /// statistics and cache.
    pub(crate) tiles: DeviceTiles,
    pub(crate) row_indices: DeviceBuffer<u32>,
    pub(crate) col_indices: DeviceBuffer<u32>,
    pub(crate) values: DeviceBuffer<T>,
    num_rows: usize,
    num_cols: usize,
}

impl<T: Element> DeviceCoo<T> {
    /// Validates `coo`, computes its row offsets, then copies both to `dev`, the offsets 32-bit
    /// when [`OffsetWidth::for_tile_set`] allows and 64-bit otherwise.
    pub fn upload(dev: &Device, coo: &Coo<T>) -> Result<Self> {
        Self::upload_inner(dev, coo, None)
    }

    /// [`DeviceCoo::upload`] with the row offsets stored at `width` (see
    /// [`crate::DeviceCsr::upload_with_offsets`]).
    pub fn upload_with_offsets(dev: &Device, coo: &Coo<T>, width: OffsetWidth) -> Result<Self> {
        Self::upload_inner(dev, coo, Some(width))
    }

    fn upload_inner(dev: &Device, coo: &Coo<T>, width: Option<OffsetWidth>) -> Result<Self> {
        coo.validate()?;
        let row_offsets = coo.row_offsets()?;
        Ok(DeviceCoo {
            tiles: DeviceTiles::of_valid(dev, &row_offsets, coo.num_cols, width)?,
            row_indices: dev.upload(&coo.row_indices)?,
            col_indices: dev.upload(&coo.col_indices)?,
            values: dev.upload(&coo.values)?,
            num_rows: coo.num_rows,
            num_cols: coo.num_cols,
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

    /// How the derived row offsets are stored on the device.
    pub fn offset_width(&self) -> OffsetWidth {
        self.tiles.offset_width()
    }

    pub fn device(&self) -> &Device {
        self.values.device()
    }

    /// Copies the matrix back to the host (validated).
    pub fn download(&self) -> Result<Coo<T>> {
        Coo::new(
            self.num_rows,
            self.num_cols,
            self.row_indices.download()?,
            self.col_indices.download()?,
            self.values.download()?,
        )
    }
}
