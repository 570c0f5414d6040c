//! Sparse formats on the host ([`Csr`]) and on the device ([`DeviceCsr`]), validated on creation.
//!
//! Validation happens on the host, so bad data is an [`Error::InvalidMatrix`] naming the row or
//! entry at fault, never an illegal address on the GPU.

use std::ops::{AddAssign, Range};

use crate::buffer::{DeviceBuffer, Element};
use crate::device::Device;
use crate::error::{Error, Result};

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
        // Column indices are u32, so num_cols = 2^32 is the most they can address.
        if self.num_cols as u64 > u64::from(u32::MAX) + 1 {
            return Err(invalid(format!(
                "{} columns exceed the u32 index range",
                self.num_cols
            )));
        }
        if self.row_offsets.len() != self.num_rows.saturating_add(1) {
            return Err(invalid(format!(
                "row_offsets has {} entries; {} rows need {}",
                self.row_offsets.len(),
                self.num_rows,
                self.num_rows.saturating_add(1)
            )));
        }
        if self.row_offsets[0] != 0 {
            return Err(invalid(format!(
                "row_offsets[0] is {}, not 0",
                self.row_offsets[0]
            )));
        }
        if let Some(r) = (0..self.num_rows).find(|&r| self.row_offsets[r + 1] < self.row_offsets[r])
        {
            return Err(invalid(format!(
                "row {r} ends before it starts (row_offsets[{r}] = {}, row_offsets[{}] = {})",
                self.row_offsets[r],
                r + 1,
                self.row_offsets[r + 1]
            )));
        }
        let last = self.row_offsets[self.num_rows];
        if self.col_indices.len() != last {
            return Err(invalid(format!(
                "row_offsets ends at {last} but there are {} column indices",
                self.col_indices.len()
            )));
        }
        if self.values.len() != last {
            return Err(invalid(format!(
                "row_offsets ends at {last} but there are {} values",
                self.values.len()
            )));
        }
        if let Some(e) = self
            .col_indices
            .iter()
            .position(|&c| c as usize >= self.num_cols)
        {
            let row = self.row_offsets.partition_point(|&o| o <= e) - 1;
            return Err(invalid(format!(
                "entry {e} (row {row}) has column {} but there are {} columns",
                self.col_indices[e], self.num_cols
            )));
        }
        Ok(())
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
    pub fn empty(num_rows: usize, num_cols: usize) -> Csr<T> {
        Csr {
            num_rows,
            num_cols,
            row_offsets: vec![0; num_rows + 1],
            col_indices: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<T: Copy + AddAssign> Csr<T> {
    /// A matrix from `(row, col, value)` triplets in any order. Rows come out sorted by column,
    /// and duplicate `(row, col)` pairs are summed into one entry (as Matrix Market readers do).
    pub fn from_triplets(
        num_rows: usize,
        num_cols: usize,
        mut triplets: Vec<(usize, usize, T)>,
    ) -> Result<Csr<T>> {
        if num_cols as u64 > u64::from(u32::MAX) + 1 {
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
        let mut row_offsets = vec![0usize; num_rows + 1];
        let mut col_indices: Vec<u32> = Vec::with_capacity(triplets.len());
        let mut values: Vec<T> = Vec::with_capacity(triplets.len());
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

/// A [`Csr`] in device memory; kernels receive its three arrays and three sizes.
#[derive(Debug)]
pub struct DeviceCsr<T: Element> {
    /// Offsets as u64: host `usize` is not a device type.
    pub(crate) row_offsets: DeviceBuffer<u64>,
    pub(crate) col_indices: DeviceBuffer<u32>,
    pub(crate) values: DeviceBuffer<T>,
    num_rows: usize,
    num_cols: usize,
}

impl<T: Element> DeviceCsr<T> {
    /// Validates `csr`, then copies it to `dev`.
    pub fn upload(dev: &Device, csr: &Csr<T>) -> Result<Self> {
        csr.validate()?;
        let offsets: Vec<u64> = csr.row_offsets.iter().map(|&o| o as u64).collect();
        Ok(DeviceCsr {
            row_offsets: dev.upload(&offsets)?,
            col_indices: dev.upload(&csr.col_indices)?,
            values: dev.upload(&csr.values)?,
            num_rows: csr.num_rows,
            num_cols: csr.num_cols,
        })
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    pub fn nnz(&self) -> usize {
        self.col_indices.len()
    }

    /// The device holding the matrix.
    pub fn device(&self) -> &Device {
        self.values.device()
    }

    /// Copies the matrix back to the host (validated: a kernel may have written into it).
    pub fn download(&self) -> Result<Csr<T>> {
        let offsets = self.row_offsets.download()?;
        let row_offsets = offsets
            .into_iter()
            .map(|o| {
                usize::try_from(o)
                    .map_err(|_| invalid(format!("row offset {o} does not fit in usize")))
            })
            .collect::<Result<Vec<usize>>>()?;
        Csr::new(
            self.num_rows,
            self.num_cols,
            row_offsets,
            self.col_indices.download()?,
            self.values.download()?,
        )
    }
}
