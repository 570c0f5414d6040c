//! Cheap statistics of a tile set (rows, columns, atoms, mean and longest tile), computed once
//! when a matrix is uploaded so that `schedule = "auto"` can pick a schedule per launch for free.

use crate::formats::Csr;

/// The shape of a tile set as the schedule heuristic sees it (tiles are rows, atoms nonzeros).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TileStats {
    pub tiles: u64,
    pub cols: u64,
    pub atoms: u64,
    /// Atoms per tile, averaged over all tiles (0 for no tiles).
    pub mean_atoms: f64,
    /// Atoms in the longest tile.
    pub max_atoms: u64,
}

impl TileStats {
    /// The statistics of `csr`: one pass over its row offsets.
    pub fn of_csr<T>(csr: &Csr<T>) -> TileStats {
        let max_atoms = csr
            .row_offsets
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]) as u64)
            .max()
            .unwrap_or(0);
        TileStats::new(
            csr.num_rows as u64,
            csr.num_cols as u64,
            csr.nnz() as u64,
            max_atoms,
        )
    }

    /// Statistics from their parts (the mean is derived).
    pub fn new(tiles: u64, cols: u64, atoms: u64, max_atoms: u64) -> TileStats {
        let mean_atoms = if tiles == 0 {
            0.0
        } else {
            atoms as f64 / tiles as f64
        };
        TileStats {
            tiles,
            cols,
            atoms,
            mean_atoms,
            max_atoms,
        }
    }

    /// Longest tile over the mean tile: 1 for perfectly regular rows, large for power laws.
    pub fn imbalance(&self) -> f64 {
        if self.mean_atoms > 0.0 {
            self.max_atoms as f64 / self.mean_atoms
        } else {
            1.0
        }
    }
}
