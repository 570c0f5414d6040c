//! The tile-set contract: what every schedule needs of a sparse format (how many tiles, where
//! each tile's atoms begin and end, how many atoms) as [`Tiles`] on the host and [`DeviceTiles`]
//! on the device, so that a format written outside lb runs under every schedule.
//!
//! Osama's thesis (§4.2.1, §4.3.1) defines a tile set by three iterators: over the atoms, over
//! the tiles, and over the atoms per tile. lb keeps the third as an offsets array
//! (`num_tiles + 1` entries, tile `t`'s atoms are `offsets[t]..offsets[t + 1]`), which is what
//! every schedule reads; atoms are numbered `0..num_atoms` in tile order. A format maps its own
//! storage onto that numbering: a kernel that takes `&Tiles` receives the tile, the atom and the
//! atom's rank in its tile, and reads the format's arrays (its other parameters) wherever that
//! format keeps the atom (ELL, say, at `rank * rows + row`). CSR, CSC and COO keep their tile
//! offsets in a `DeviceTiles` too, so a `&Tiles` kernel runs on them as well.

use std::ops::Range;

use lb_ptx::plan::OffsetWidth;

use crate::cache::TempCache;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::formats::{DeviceOffsets, TileSet};
use crate::stats::TileStats;

/// A tile set described by its tile offsets alone (host side): the parameter type `&Tiles` of a
/// kernel written against the contract, and what its CPU reference walks.
///
/// Invariants (checked by [`Tiles::new`] and [`Tiles::validate`]): `tile_offsets` has
/// `num_tiles + 1` entries, starts at 0 and never decreases; its last entry is the atom count.
/// The fields are public because kernel bodies read them as plain Rust (`a.num_tiles`,
/// `a.tile_offsets[t]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiles {
    pub num_tiles: usize,
    pub tile_offsets: Vec<usize>,
}

impl Tiles {
    /// The tiles `tile_offsets` delimits, after checking the invariants.
    pub fn new(tile_offsets: Vec<usize>) -> Result<Tiles> {
        let tiles = Tiles {
            num_tiles: tile_offsets.len().saturating_sub(1),
            tile_offsets,
        };
        tiles.validate()?;
        Ok(tiles)
    }

    /// The tiles of the given sizes, in order (tile `t` has `lengths[t]` atoms).
    pub fn from_lengths(lengths: &[usize]) -> Result<Tiles> {
        let mut offsets = crate::formats::zero_offsets(lengths.len(), "tile")?;
        for (t, &n) in lengths.iter().enumerate() {
            offsets[t + 1] = offsets[t].checked_add(n).ok_or_else(|| {
                Error::InvalidMatrix(format!(
                    "tiles 0..={t} hold more than {} atoms: check the tile lengths",
                    usize::MAX
                ))
            })?;
        }
        Tiles::new(offsets)
    }

    /// Checks the invariants; the error names the first offset at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidMatrix(msg));
        if self.tile_offsets.len().checked_sub(1) != Some(self.num_tiles) {
            return bad(format!(
                "{} tiles need one tile offset each plus the end, found {} offsets",
                self.num_tiles,
                self.tile_offsets.len()
            ));
        }
        if let Some(&first) = self.tile_offsets.first().filter(|&&o| o != 0) {
            return bad(format!("tile offsets must start at 0, found {first}"));
        }
        if let Some(t) = self.tile_offsets.windows(2).position(|w| w[1] < w[0]) {
            return bad(format!(
                "tile offsets must never decrease: offset {} is {} but offset {} is {}",
                t + 1,
                self.tile_offsets[t + 1],
                t,
                self.tile_offsets[t]
            ));
        }
        Ok(())
    }

    /// The number of atoms: the last offset.
    pub fn num_atoms(&self) -> usize {
        self.tile_offsets.last().copied().unwrap_or(0)
    }
}

impl TileSet for Tiles {
    fn num_tiles(&self) -> usize {
        self.num_tiles
    }
    fn tile_atoms(&self, tile: usize) -> Range<usize> {
        self.tile_offsets[tile]..self.tile_offsets[tile + 1]
    }
}

/// A tile set's offsets in device memory, validated on the host, with what a launch learns from
/// them once: the statistics `auto` reads and the temporaries cached with the tile set.
///
/// Every device format keeps one ([`DeviceTileSet::tiles`]); a format written outside lb builds
/// its own with [`DeviceTiles::upload`]. It can only be made from valid offsets, so a schedule
/// walking it never leaves the tile set, whoever implements the format.
#[derive(Debug)]
pub struct DeviceTiles {
    /// 32-bit or 64-bit, see [`DeviceOffsets`].
    pub(crate) offsets: DeviceOffsets,
    atoms: usize,
    stats: TileStats,
    /// Temporaries that depend only on this tile set (see `TempCache`).
    cache: TempCache,
}

impl DeviceTiles {
    /// Validates `tiles`, then copies its offsets to `dev`, 32-bit when
    /// [`OffsetWidth::for_tile_set`] allows and 64-bit otherwise. `auto` sees a tile set of
    /// `tiles.num_tiles` tiles by as many columns.
    pub fn upload(dev: &Device, tiles: &Tiles) -> Result<DeviceTiles> {
        tiles.validate()?;
        DeviceTiles::of_valid(dev, &tiles.tile_offsets, tiles.num_tiles, None)
    }

    /// [`DeviceTiles::upload`] with the offsets stored at `width`; 32-bit offsets for a tile set
    /// too large for them are an [`Error::Shape`].
    pub fn upload_with_offsets(
        dev: &Device,
        tiles: &Tiles,
        width: OffsetWidth,
    ) -> Result<DeviceTiles> {
        tiles.validate()?;
        DeviceTiles::of_valid(dev, &tiles.tile_offsets, tiles.num_tiles, Some(width))
    }

    /// Uploads offsets the caller has validated (a format's own `validate`); `cols` is the other
    /// dimension, for the statistics.
    pub(crate) fn of_valid(
        dev: &Device,
        offsets: &[usize],
        cols: usize,
        width: Option<OffsetWidth>,
    ) -> Result<DeviceTiles> {
        let atoms = offsets.last().copied().unwrap_or(0);
        Ok(DeviceTiles {
            offsets: DeviceOffsets::upload(dev, offsets, atoms, width)?,
            atoms,
            stats: TileStats::of_offsets(cols as u64, offsets),
            cache: TempCache::default(),
        })
    }

    pub fn num_tiles(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn num_atoms(&self) -> usize {
        self.atoms
    }

    /// How the offsets are stored on the device.
    pub fn offset_width(&self) -> OffsetWidth {
        self.offsets.width()
    }

    /// Tiles, the other dimension, atoms, mean, spread and longest tile, as measured at upload
    /// (what `schedule = "auto"` picks a schedule from).
    pub fn stats(&self) -> &TileStats {
        &self.stats
    }

    /// The temporaries cached with this tile set (`TempRole::Cached`).
    pub fn temp_cache(&self) -> &TempCache {
        &self.cache
    }

    /// The device holding the offsets.
    pub fn device(&self) -> &Device {
        self.offsets.device()
    }

    /// Copies the tiles back to the host.
    pub fn download(&self) -> Result<Tiles> {
        Tiles::new(self.offsets.download("tile offset")?)
    }
}

/// The tile-set contract on the device: a format hands out its [`DeviceTiles`], and a kernel
/// that takes `&Tiles` launches on it (`launch(&dev, &my_format, …)`), the format's own arrays
/// passed as the kernel's other parameters. [`crate::DeviceCsr`], [`crate::DeviceCsc`] and
/// [`crate::DeviceCoo`] implement it; so can a format written outside lb.
pub trait DeviceTileSet {
    /// The tile offsets every schedule walks.
    fn tiles(&self) -> &DeviceTiles;

    fn num_tiles(&self) -> usize {
        self.tiles().num_tiles()
    }
    fn num_atoms(&self) -> usize {
        self.tiles().num_atoms()
    }
    /// How the tile offsets are stored on the device: only plans reading that width run.
    fn offset_width(&self) -> OffsetWidth {
        self.tiles().offset_width()
    }
    /// The temporaries cached with this tile set (`TempRole::Cached`).
    fn temp_cache(&self) -> &TempCache {
        self.tiles().temp_cache()
    }
    /// What `auto` picks a schedule from.
    fn stats(&self) -> &TileStats {
        self.tiles().stats()
    }
}

impl DeviceTileSet for DeviceTiles {
    fn tiles(&self) -> &DeviceTiles {
        self
    }
}
