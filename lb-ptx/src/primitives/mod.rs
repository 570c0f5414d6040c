//! The primitives layer: everything a schedule needs besides its own mapping of work to threads.
//!
//! A schedule file decides *which thread takes which atoms*; these modules decide *how* a tile
//! set is read and how partial results travel, so every schedule gets the same index widths,
//! cache policies and collectives by construction:
//!
//! - [`load`]: the cache policy of every load and the address arithmetic of an element;
//! - [`layout`]: the tile-set layout contract (work items, tiles, a tile's atom range, where a
//!   reduced value is stored);
//! - [`walker`]: the body emitted for one atom and a thread's walk over a tile's atoms;
//! - [`warp`]: ballots, shuffles and butterfly reductions on the value's own type, and the
//!   block-batch slot loader of the block-cooperative schedules;
//! - [`group`]: the cooperative walk of a group of N threads over N tiles and the virtual warps
//!   (N < 32, one tile at a time), which `group_mapped(N)`, `warp_mapped`, `block_mapped` and
//!   `dynamic_virtual_warps` map onto;
//! - [`work_oriented`]: the even split of the work with its deterministic carry-out and
//!   fix-up, shared by merge path, nonzero split, the direct, local-warp and block searches and
//!   the phase searches;
//! - [`partition`]: the partition and staging of the two- and multi-phase searches (the staging
//!   also `block_search`'s);
//! - [`huge`]: the huge-tile split of the tile-oriented schedules (binning, lrb, the group
//!   family, consolidate): tiles too large for one block walked by the whole grid in chunks.

pub mod group;
pub mod huge;
pub mod layout;
pub mod load;
pub mod partition;
pub mod walker;
pub mod warp;
pub mod work_oriented;

pub use layout::{Layout, WorkItem};
