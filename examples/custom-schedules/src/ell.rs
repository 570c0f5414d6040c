//! Sliced ELLPACK, a sparse format written outside lb that keeps lb's tile-set contract
//! (`lb::Tiles`, `lb::DeviceTileSet`) and so runs under every schedule, built-in or not.
//!
//! SELL-C (Kreutzer, Hager, Wellein, Fehske and Bishop, "A unified sparse matrix data format for
//! efficient general sparse matrix-vector multiplication on modern processors with wide SIMD
//! units", SIAM J. Sci. Comput. 2014, §2), without the sorting window (σ = 1): rows are grouped in
//! slices of [`SLICE`] rows; a slice is as wide as its longest row and is stored column-major, so
//! entry `k` of row `r` sits at `slice_offsets[r / SLICE] + k · SLICE + r % SLICE`, and the
//! shorter rows are padded.
//!
//! The contract numbers a tile's atoms contiguously (tile `r`'s are `offsets[r]..offsets[r +
//! 1]`): here the tiles are the rows and `offsets` the prefix sum of the row lengths, padding
//! excluded, so a schedule balances the real entries and never visits the padding. A kernel
//! takes the tile set as `&Tiles` and finds an entry's slot from its tile and its rank (`#[tile]`,
//! `#[rank]`), reading the format's arrays, which it takes as ordinary slices.

use lb::prelude::*;
use lb::Element;

/// Rows per slice: one warp's worth, so that the rows of a slice read one entry each from one
/// contiguous run of slots. The kernels below spell it as the literal `32`, which this checks.
pub const SLICE: usize = 32;
const _: () = assert!(
    SLICE == 32,
    "the kernels of this module index slices of 32 rows"
);

/// A sliced ELLPACK matrix on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct SlicedEll<T> {
    num_rows: usize,
    num_cols: usize,
    /// The rows as tiles: `tile_offsets` is the prefix sum of the row lengths.
    tiles: Tiles,
    /// Where each slice's slots begin (`num_rows.div_ceil(SLICE) + 1` entries).
    slice_offsets: Vec<u64>,
    /// Column of each slot; padding slots hold 0.
    cols: Vec<u32>,
    /// Value of each slot; padding slots hold `T::default()`.
    values: Vec<T>,
}

impl<T: Copy + Default> SlicedEll<T> {
    /// The matrix of `a`, each row's entries in `a`'s order. A matrix whose padded slots do not
    /// fit in memory is an `Err`.
    pub fn from_csr(a: &Csr<T>) -> lb::Result<SlicedEll<T>> {
        a.validate()?;
        let slices = a.num_rows.div_ceil(SLICE);
        let mut slice_offsets = Vec::with_capacity(slices + 1);
        slice_offsets.push(0u64);
        for s in 0..slices {
            let rows = s * SLICE..((s + 1) * SLICE).min(a.num_rows);
            let width = rows.map(|r| a.row(r).len()).max().unwrap_or(0) as u64;
            let end = slice_offsets[s] + width * SLICE as u64;
            slice_offsets.push(end);
        }
        let slots = usize::try_from(slice_offsets[slices]).map_err(|_| too_many(a.num_rows))?;
        let mut cols = Vec::new();
        cols.try_reserve_exact(slots)
            .map_err(|_| too_many(a.num_rows))?;
        cols.resize(slots, 0u32);
        let mut values = Vec::new();
        values
            .try_reserve_exact(slots)
            .map_err(|_| too_many(a.num_rows))?;
        values.resize(slots, T::default());
        for r in 0..a.num_rows {
            let base = slice_offsets[r / SLICE] as usize + r % SLICE;
            for (k, nz) in a.row(r).enumerate() {
                cols[base + k * SLICE] = a.col_indices[nz];
                values[base + k * SLICE] = a.values[nz];
            }
        }
        Ok(SlicedEll {
            num_rows: a.num_rows,
            num_cols: a.num_cols,
            tiles: Tiles::new(a.row_offsets.clone())?,
            slice_offsets,
            cols,
            values,
        })
    }
}

fn too_many(rows: usize) -> lb::Error {
    lb::Error::InvalidMatrix(format!(
        "the padded slices of {rows} rows do not fit in memory: store the matrix as CSR"
    ))
}

impl<T> SlicedEll<T> {
    pub fn num_rows(&self) -> usize {
        self.num_rows
    }
    pub fn num_cols(&self) -> usize {
        self.num_cols
    }
    /// The rows as tiles: what a kernel's CPU reference takes as its `&Tiles`.
    pub fn tiles(&self) -> &Tiles {
        &self.tiles
    }
    pub fn slice_offsets(&self) -> &[u64] {
        &self.slice_offsets
    }
    pub fn cols(&self) -> &[u32] {
        &self.cols
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Slots stored, padding included.
    pub fn slots(&self) -> usize {
        self.cols.len()
    }
}

/// A [`SlicedEll`] in device memory. It keeps the tile-set contract, so a kernel taking `&Tiles`
/// launches on it under any schedule: `sell_spmv::launch(&dev, &m, m.slice_offsets(), m.cols(),
/// m.values(), &x, &mut y)`.
pub struct DeviceSlicedEll<T: Element> {
    tiles: DeviceTiles,
    slice_offsets: DeviceBuffer<u64>,
    cols: DeviceBuffer<u32>,
    values: DeviceBuffer<T>,
    num_cols: usize,
}

impl<T: Element> DeviceSlicedEll<T> {
    /// Copies `m` to `dev`.
    pub fn upload(dev: &Device, m: &SlicedEll<T>) -> lb::Result<Self> {
        Ok(DeviceSlicedEll {
            tiles: DeviceTiles::upload(dev, &m.tiles)?,
            slice_offsets: dev.upload(&m.slice_offsets)?,
            cols: dev.upload(&m.cols)?,
            values: dev.upload(&m.values)?,
            num_cols: m.num_cols,
        })
    }
    pub fn num_rows(&self) -> usize {
        self.tiles.num_tiles()
    }
    pub fn num_cols(&self) -> usize {
        self.num_cols
    }
    pub fn slice_offsets(&self) -> &DeviceBuffer<u64> {
        &self.slice_offsets
    }
    pub fn cols(&self) -> &DeviceBuffer<u32> {
        &self.cols
    }
    pub fn values(&self) -> &DeviceBuffer<T> {
        &self.values
    }
}

impl<T: Element> DeviceTileSet for DeviceSlicedEll<T> {
    fn tiles(&self) -> &DeviceTiles {
        &self.tiles
    }
}

/// y = A·x on a sliced ELL matrix (`schedule = "every"`: every built-in schedule).
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
pub fn sell_spmv(
    a: &Tiles,
    slice_offsets: &[u64],
    cols: &[u32],
    values: &[f32],
    x: &[f32],
    #[tile] row: usize,
    #[rank] k: usize,
    #[atom] _nz: usize,
) -> f32 {
    let slot = slice_offsets[row / 32] as usize + k * 32 + row % 32;
    values[slot] * x[cols[slot] as usize]
}

/// C = A·B on a sliced ELL matrix, B dense row-major with `n` columns (one lane per column).
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "n")]
pub fn sell_spmm(
    a: &Tiles,
    slice_offsets: &[u64],
    cols: &[u32],
    values: &[f32],
    b: &[f32],
    n: usize,
    #[tile] row: usize,
    #[rank] k: usize,
    #[atom] _nz: usize,
    #[lane] j: usize,
) -> f32 {
    let slot = slice_offsets[row / 32] as usize + k * 32 + row % 32;
    values[slot] * b[cols[slot] as usize * n + j]
}
