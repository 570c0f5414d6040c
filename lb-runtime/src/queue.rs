//! Queues: append-only lists of `u32` that kernels push to (`&mut Queue` parameters), such as the
//! next frontier of a graph traversal. [`Queue`] is the host type the CPU reference pushes to;
//! [`DeviceQueue`] is its device counterpart, with a fixed capacity and overflow detection.

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};

/// A growable list of `u32` on the host: what a body's `queue.push(v)` appends to in `cpu()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Queue {
    items: Vec<u32>,
}

impl Queue {
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Appends `v`.
    pub fn push(&mut self, v: u32) {
        self.items.push(v);
    }

    /// The items in push order.
    pub fn as_slice(&self) -> &[u32] {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

/// A queue in device memory: `capacity` item slots and a 64-bit push counter.
///
/// Kernel ABI: items pointer (u64, to u32), counter pointer (u64, to one u64), capacity (u64).
/// Kernels push with warp-aggregated atomics on the counter; a push whose slot is at or past the
/// capacity is not stored but still counted, so after a launch the generated `launch_with`
/// compares the counter with the capacity and returns [`Error::QueueOverflow`] rather than losing
/// items silently. Items are stored in no particular order (the order of the atomics).
#[derive(Debug)]
pub struct DeviceQueue {
    /// The item slots; its length is the capacity, except while [`slots`](Self::slots) lends
    /// a prefix of them as a buffer of that prefix's length.
    pub(crate) items: DeviceBuffer<u32>,
    pub(crate) count: DeviceBuffer<u64>,
    capacity: usize,
}

impl DeviceQueue {
    /// An empty queue with room for `capacity` items. A capacity whose bytes overflow a usize
    /// is an [`Error::Shape`], and one the device cannot allocate is an error naming the bytes
    /// (on the simulator, [`Error::Sim`]); neither panics.
    pub fn new(dev: &Device, capacity: usize) -> Result<DeviceQueue> {
        Ok(DeviceQueue {
            items: dev.zeros(capacity)?,
            count: dev.zeros(1)?,
            capacity,
        })
    }

    /// A queue holding `items`, in order, with no room for more (its capacity is their
    /// number): a first frontier, or a list that launches over a prefix of it
    /// ([`slots`](Self::slots)) read.
    pub fn upload(dev: &Device, items: &[u32]) -> Result<DeviceQueue> {
        Ok(DeviceQueue {
            items: dev.upload(items)?,
            count: dev.upload(&[items.len() as u64])?,
            capacity: items.len(),
        })
    }

    /// The queue a tuning launch's candidate pushes to instead of `src`: `slot`'s queue
    /// (allocated at the first candidate with `src`'s capacity), holding `src`'s items and count.
    /// The generated `auto` launchers call it before every candidate run, as
    /// [`scratch_copy`](crate::scratch_copy) for `&mut` slices, so that only the chosen
    /// schedule's launch pushes to the caller's queue. A queue that cannot be allocated leaves
    /// the candidate out, as [`scratch_copy`](crate::scratch_copy) says.
    pub fn scratch_of<'a>(
        src: &DeviceQueue,
        slot: &'a mut Option<DeviceQueue>,
    ) -> Result<&'a mut DeviceQueue> {
        let dev = src.items.device().clone();
        let scratch = match slot {
            Some(q) => q,
            None => {
                let bytes = src.capacity.saturating_mul(4).saturating_add(8);
                let q = DeviceQueue::new(&dev, src.capacity)
                    .map_err(|e| crate::tune::no_room_to_tune(bytes, &e))?;
                slot.insert(q)
            }
        };
        // `src.items` may be a shorter view of its slots (`slots`): the same view here.
        scratch.items.set_len(src.items.len());
        let copied = dev.copy(&src.items, &mut scratch.items);
        scratch.items.set_len(scratch.capacity);
        copied?;
        dev.copy(&src.count, &mut scratch.count)?;
        Ok(scratch)
    }

    /// Item slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Pushes counted since the last [`clear`](Self::clear), including those that did not fit.
    pub fn pushed(&self) -> Result<u64> {
        Ok(self.count.download()?.first().copied().unwrap_or(0))
    }

    /// Items stored: `min(pushed, capacity)`.
    pub fn len(&self) -> Result<usize> {
        Ok(self.stored(self.pushed()?))
    }

    /// Items stored after `pushed` pushes.
    fn stored(&self, pushed: u64) -> usize {
        usize::try_from(pushed).map_or(self.capacity, |n| n.min(self.capacity))
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The stored items (in the order their slots were claimed); only those are read back.
    pub fn download(&self) -> Result<Vec<u32>> {
        let n = self.len()?;
        let dev = self.items.device();
        let items = dev.read_typed(&self.items.raw, n)?;
        dev.stream().run_checks()?;
        Ok(items)
    }

    /// The first `pushed` items (at most the capacity) as a read-only buffer of that length,
    /// without a copy or a read: the next launch's frontier, when the caller knows the count
    /// (from [`Launch::pushed`](crate::Launch::pushed)). The buffer is the queue's own memory,
    /// so the borrow keeps the queue from being pushed to or cleared while it is read.
    pub fn slots(&mut self, pushed: u64) -> &DeviceBuffer<u32> {
        let n = self.stored(pushed);
        self.items.set_len(n);
        &self.items
    }

    /// Empties the queue: the counter is zeroed on the device, ordered after the launches
    /// before it (no copy from the host); the slots are overwritten by later pushes.
    pub fn clear(&mut self) -> Result<()> {
        let dev = self.count.device().clone();
        dev.zero_raw(&mut self.count.raw, 8)
    }

    /// Raises the capacity to `capacity` (no change if it is not larger), keeping the stored
    /// items and the counter. Items an overflow already dropped are not recovered: clear the
    /// queue and run the launch again.
    pub fn grow(&mut self, capacity: usize) -> Result<()> {
        if capacity <= self.capacity() {
            return Ok(());
        }
        let dev = self.items.device().clone();
        let kept = self.download()?;
        let mut items = dev.zeros::<u32>(capacity)?;
        let bytes = crate::buffer::to_bytes(&kept);
        dev.write_raw(&mut items.raw, &bytes)?;
        self.items = items;
        self.capacity = capacity;
        Ok(())
    }

    /// The device holding the queue.
    pub fn device(&self) -> &Device {
        self.items.device()
    }

    /// `Err(QueueOverflow)` when more items were pushed than fit; called by the generated
    /// launchers after every launch, with the parameter's name.
    pub fn check_overflow(&self, param: &str) -> Result<()> {
        let needed = self.pushed()?;
        let capacity = self.capacity() as u64;
        if needed > capacity {
            return Err(Error::QueueOverflow {
                param: param.to_string(),
                needed,
                capacity,
            });
        }
        Ok(())
    }
}
