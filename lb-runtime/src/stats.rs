//! Cheap statistics of a tile set (rows, columns, atoms, mean, spread and longest tile), computed once
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
    /// Standard deviation of the atoms per tile (0 when unknown: built by [`TileStats::new`]).
    pub std_atoms: f64,
    /// Atoms in the shortest tile (0 when unknown: built by [`TileStats::new`]).
    pub min_atoms: u64,
}

impl TileStats {
    /// The statistics of `csr`: one pass over its row offsets.
    pub fn of_csr<T>(csr: &Csr<T>) -> TileStats {
        TileStats::of_offsets(csr.num_cols as u64, &csr.row_offsets)
    }

    /// The statistics of the tiles that `offsets` delimits (`offsets.len() - 1` tiles), with
    /// `cols` the size of the other dimension: one pass, mean and spread included.
    pub fn of_offsets(cols: u64, offsets: &[usize]) -> TileStats {
        let lengths = || offsets.windows(2).map(|w| w[1].saturating_sub(w[0]) as u64);
        let tiles = lengths().count() as u64;
        let atoms: u64 = lengths().sum();
        let mut stats = TileStats::new(tiles, cols, atoms, lengths().max().unwrap_or(0));
        if tiles > 0 {
            let variance = lengths()
                .map(|n| (n as f64 - stats.mean_atoms).powi(2))
                .sum::<f64>()
                / tiles as f64;
            stats.std_atoms = variance.sqrt();
            stats.min_atoms = lengths().min().unwrap_or(0);
        }
        stats
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
            std_atoms: 0.0,
            min_atoms: 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_the_population_standard_deviation_of_tile_sizes() {
        // Tiles of 2, 4, 4, 4, 5, 5, 7, 9 atoms: mean 5, standard deviation 2.
        let sizes = [2usize, 4, 4, 4, 5, 5, 7, 9];
        let mut offsets = vec![0];
        for n in sizes {
            offsets.push(offsets.last().unwrap() + n);
        }
        let s = TileStats::of_offsets(100, &offsets);
        assert_eq!((s.tiles, s.cols, s.atoms, s.max_atoms), (8, 100, 40, 9));
        assert_eq!(s.mean_atoms, 5.0);
        assert!((s.std_atoms - 2.0).abs() < 1e-12, "{}", s.std_atoms);
        let empty = TileStats::of_offsets(3, &[0]);
        assert_eq!(
            (empty.tiles, empty.mean_atoms, empty.std_atoms),
            (0, 0.0, 0.0)
        );
    }
}
