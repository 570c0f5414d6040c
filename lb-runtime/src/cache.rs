//! Temporaries that depend only on a tile set (`TempRole::Cached`), kept with the device tile set
//! so that repeated launches over the same matrix skip the kernels that produce them.
//!
//! The cache lives inside `DeviceCsr` / `DeviceCsc` / `DeviceCoo`, which are immutable after
//! upload: an entry is valid for exactly as long as its tile set, and is freed with it. Nothing
//! keyed by address can outlive the data it describes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use lb_ptx::Schedule;

use crate::buffer::RawBuffer;
use crate::device::lock;

/// Which plan and stream a cache entry belongs to: the module text's address, the plan's first
/// entry and the stream's id (a producer still running on one stream must not be read by a
/// launch on another).
pub(crate) type PlanKey = (usize, Cow<'static, str>, u64);

/// One plan's cached buffers, in the order of its `Cached` temporaries, shared with the launches
/// that read them.
pub(crate) type CachedTemps = Arc<[Arc<RawBuffer>]>;

/// The cached temporaries of one tile set, per plan and stream (keyed by the module text's
/// address, the plan's first entry and the stream, so two kernels of the same name in different
/// modules never share).
///
/// A tile set has one entry per plan with cached temporaries and stream it ran on, a handful:
/// a list searched in order costs a launch less than hashing the key.
#[derive(Default)]
pub struct TempCache {
    entries: Mutex<Vec<(PlanKey, CachedTemps)>>,
    /// The schedule `auto` measured fastest here, per kernel module (its text's address and
    /// length) and lane count (`crate::tune`).
    tuned: Mutex<HashMap<TunedKey, Schedule>>,
}

/// A kernel module's text address and length, and the lane count.
pub(crate) type TunedKey = (usize, usize, u64);

impl TempCache {
    pub(crate) fn key(ptx: &'static str, first_entry: Cow<'static, str>, stream: u64) -> PlanKey {
        (ptx.as_ptr() as usize, first_entry, stream)
    }

    /// The plan's cached buffers, in the order of its `Cached` temporaries, if a launch made them.
    pub(crate) fn get(&self, key: &PlanKey) -> Option<CachedTemps> {
        let entries = self.entries.lock().ok()?;
        // The module address and the stream differ between most entries: compare them before
        // the entry's name.
        entries
            .iter()
            .find(|((ptx, entry, stream), _)| *ptx == key.0 && *stream == key.2 && *entry == key.1)
            .map(|(_, buffers)| Arc::clone(buffers))
    }

    pub(crate) fn insert(&self, key: PlanKey, buffers: Vec<Arc<RawBuffer>>) {
        if let Ok(mut entries) = self.entries.lock() {
            let buffers: CachedTemps = buffers.into();
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some((_, kept)) => *kept = buffers,
                None => entries.push((key, buffers)),
            }
        }
    }

    pub(crate) fn tuned(&self, key: TunedKey) -> Option<Schedule> {
        lock(&self.tuned).get(&key).copied()
    }

    pub(crate) fn set_tuned(&self, key: TunedKey, schedule: Schedule) {
        lock(&self.tuned).insert(key, schedule);
    }

    /// How many plans have cached temporaries for this tile set.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for TempCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TempCache({} plans)", self.len())
    }
}
