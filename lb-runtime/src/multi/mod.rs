//! Several devices as one ("sets of sets", the thesis's §6.1.1 future work): a tile set split
//! across the devices of a group, each device load-balancing its part with any schedule, and the
//! exchanges an iterative method needs between launches.
//!
//! - [`Devices`]: the group: GPUs of one process (exchanging through NCCL), or simulators (the
//!   same semantics by copies, so CI tests every path without a GPU).
//! - [`MultiCsr`]: a [`Csr`](crate::Csr) cut by a merge path over rows and atoms, so every
//!   device gets the same work whatever the row lengths; a row cut between devices is combined
//!   where it ends ([`MultiCsr::launch`]).
//! - [`Replicated`]: a dense array with a copy on every device (the `x` of SpMV, the `B` of
//!   SpMM), refreshed from a launch's result by [`MultiCsr::all_gather`].
//!
//! ```
//! use lb_runtime::multi::{Devices, MultiCsr};
//! let devices = Devices::simulators(3)?;
//! let a = lb_runtime::Csr::new(4, 4, vec![0, 1, 1, 6, 7], vec![0, 0, 1, 2, 3, 3, 1], vec![1.0f32; 7])?;
//! let a = MultiCsr::upload(&devices, &a)?;
//! assert_eq!(a.parts().len(), 3);
//! // Every row's result is written by exactly one device.
//! let owned: usize = a.parts().iter().map(|p| p.owned_rows().len()).sum();
//! assert_eq!(owned, 4);
//! # Ok::<(), lb_runtime::Error>(())
//! ```

mod collective;
mod combine;
mod csr;
mod partition;
mod push;
mod queues;

use std::sync::{Arc, Mutex};

use crate::buffer::{DeviceBuffer, Element};
use crate::device::{lock, Device};
use crate::error::{Error, Result};
use collective::{Exchange, Gpus};

pub use collective::Transport;
pub use csr::{
    column_halves_pay, CsrPart, MultiCsr, MultiLaunch, MultiPending, RowParts, SplitOptions,
};
/// The reduction of a kernel's output (`reduce = "sum"` and so on).
pub use lb_ptx::body::Reduce;

/// What a reduce kernel's output needs for a launch across devices: how partial results of a
/// row combine, and whether a row may be cut at all. The `#[load_balanced]` macro writes it as
/// each reduce kernel's `REDUCTION` constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    pub op: Reduce,
    /// The kernel's result for a row is not the reduction of its parts' results: it applies an
    /// epilogue to the reduced value (each part would apply it) or reads an atom's `#[rank]`
    /// within its row (which restarts in each part). Such kernels need a split that keeps rows
    /// whole ([`MultiCsr::upload_whole_rows`]).
    pub whole_rows: bool,
}

/// A group of devices that share tile sets and exchange results. Cloning shares the group.
#[derive(Clone)]
pub struct Devices {
    inner: Arc<Inner>,
}

struct Inner {
    devices: Vec<Device>,
    /// One exchange at a time: NCCL calls on a communicator must not overlap, and a launch's
    /// steps reuse the exchange's events.
    exchange: Mutex<Exchange>,
}

impl Devices {
    /// The GPUs with these ordinals, in this order (the order of the parts of a split tile
    /// set). Two or more need NCCL (`libnccl.so`, loaded at run time); an error says so when it
    /// is missing. Fails on a repeated ordinal or a missing GPU.
    pub fn cuda(ordinals: &[usize]) -> Result<Devices> {
        if ordinals.is_empty() {
            return Err(Error::Shape("a group of devices needs at least one".into()));
        }
        for (i, o) in ordinals.iter().enumerate() {
            if ordinals[..i].contains(o) {
                return Err(Error::Shape(format!(
                    "GPU {o} is listed twice: each device of a group holds its own part"
                )));
            }
        }
        let devices = ordinals
            .iter()
            .map(|&o| Device::cuda(o))
            .collect::<Result<Vec<_>>>()?;
        let exchange = if devices.len() == 1 {
            Exchange::Alone
        } else {
            Exchange::Gpus(Gpus::new(&devices, ordinals)?)
        };
        Ok(Devices::new(devices, exchange))
    }

    /// Whether every GPU of the group reaches every other's memory (peer access, turned on
    /// when the group was made): what [`Transport::PeerCopy`] needs. True for one device and
    /// for simulators.
    pub fn peer_access(&self) -> bool {
        match &*self.exchange() {
            Exchange::Gpus(g) => g.peer_access(),
            Exchange::Alone | Exchange::Simulated => true,
        }
    }

    /// How all-gathers move data between the group's GPUs: [`Transport::PeerCopy`] where every
    /// pair has peer access (the default there), else [`Transport::Nccl`]. One GPU and
    /// simulators report [`Transport::PeerCopy`]: they copy (one device stores into its own
    /// copy in the kernels), whatever is set.
    pub fn transport(&self) -> Transport {
        match &*self.exchange() {
            Exchange::Gpus(g) => g.transport,
            Exchange::Alone | Exchange::Simulated => Transport::PeerCopy,
        }
    }

    /// Chooses how all-gathers move data between the group's GPUs. [`Transport::PeerCopy`],
    /// [`Transport::PeerKernel`] or [`Transport::PeerStores`] on GPUs without peer access
    /// between every pair is an error that says so.
    pub fn set_transport(&self, transport: Transport) -> Result<()> {
        if transport != Transport::Nccl && !self.peer_access() {
            return Err(Error::Shape(
                "peer copies and stores need peer access between every pair of the group's \
                 GPUs, and some pair has none (no NVLink or PCIe peer path): keep \
                 Transport::Nccl"
                    .into(),
            ));
        }
        if let Exchange::Gpus(g) = &mut *self.exchange() {
            g.transport = transport;
        }
        Ok(())
    }

    /// Every GPU of the machine, in ordinal order.
    pub fn cuda_all() -> Result<Devices> {
        // Device 0 first: it reports a missing driver as an error instead of cudarc's panic.
        Device::cuda(0)?;
        let count = cudarc::driver::CudaContext::device_count()
            .map_err(|e| Error::cuda("counting the GPUs", e))?;
        Devices::cuda(&(0..count.max(0) as usize).collect::<Vec<_>>())
    }

    /// `n` simulators, each with its own memory, exchanging with NCCL's semantics.
    pub fn simulators(n: usize) -> Result<Devices> {
        if n == 0 {
            return Err(Error::Shape("a group of devices needs at least one".into()));
        }
        Ok(Devices::new(
            (0..n).map(|_| Device::simulator()).collect(),
            Exchange::Simulated,
        ))
    }

    fn new(devices: Vec<Device>, exchange: Exchange) -> Devices {
        Devices {
            inner: Arc::new(Inner {
                devices,
                exchange: Mutex::new(exchange),
            }),
        }
    }

    /// How many devices the group has (at least one).
    pub fn count(&self) -> usize {
        self.inner.devices.len()
    }

    /// The group's devices, in part order.
    pub fn devices(&self) -> &[Device] {
        &self.inner.devices
    }

    /// A copy of `data` on every device.
    pub fn replicate<T: Element>(&self, data: &[T]) -> Result<Replicated<T>> {
        let copies = self
            .devices()
            .iter()
            .map(|d| d.upload(data))
            .collect::<Result<_>>()?;
        Ok(Replicated { copies })
    }

    /// `n` zeros on every device.
    pub fn replicated_zeros<T: Element>(&self, n: usize) -> Result<Replicated<T>> {
        let copies = self
            .devices()
            .iter()
            .map(|d| d.zeros(n))
            .collect::<Result<_>>()?;
        Ok(Replicated { copies })
    }

    /// Combines every device's copy of `x` element by element with `op` and leaves the result
    /// in every copy: an all-reduce. Enqueued after each device's work so far; each device's
    /// later work waits for it (no wait on the host). NCCL's on GPUs; on simulators the
    /// copies combine in rank order. 16-bit floats combine in f32 and round once, as NCCL
    /// does.
    ///
    /// ```
    /// use lb_runtime::multi::{Devices, Reduce};
    /// let devices = Devices::simulators(3)?;
    /// let mut x = devices.replicate(&[5u32, 1, 7])?;
    /// devices.devices()[1].write_at(x.on_mut(1), 0, &[2])?;
    /// devices.all_reduce(Reduce::Min, &mut x)?;
    /// assert_eq!(x.download_all()?, vec![vec![2, 1, 7]; 3]);
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn all_reduce<T: Element>(&self, op: Reduce, x: &mut Replicated<T>) -> Result<()> {
        self.check_replicated(x, "the array to all-reduce")?;
        self.exchange()
            .all_reduce(self.devices(), op, &mut x.copies)
    }

    /// An error unless `x` has a copy on each of the group's devices, in order.
    fn check_replicated<T: Element>(&self, x: &Replicated<T>, what: &str) -> Result<()> {
        let matches = x.copies.len() == self.count()
            && x.copies
                .iter()
                .zip(self.devices())
                .all(|(copy, dev)| copy.device().same(dev));
        if matches {
            Ok(())
        } else {
            Err(Error::DeviceMismatch {
                what: format!("{what}: not replicated on this group's devices"),
            })
        }
    }

    /// Waits for every device; the first error wins, after every device was waited for.
    pub fn synchronize(&self) -> Result<()> {
        let results: Vec<Result<()>> = self.devices().iter().map(Device::synchronize).collect();
        results.into_iter().collect()
    }

    /// Whether `other` is this group (the same devices, not equal ones).
    pub fn same(&self, other: &Devices) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn exchange(&self) -> std::sync::MutexGuard<'_, Exchange> {
        lock(&self.inner.exchange)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Exchanges are enqueued without a wait (`all_gather`): let them finish before the
        // communicators they run on are destroyed with `exchange`.
        for d in &self.devices {
            let _ = d.synchronize();
        }
    }
}

impl std::fmt::Debug for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.devices()).finish()
    }
}

/// A dense array with one copy per device of a group, the same on each.
pub struct Replicated<T: Element> {
    copies: Vec<DeviceBuffer<T>>,
}

impl<T: Element> Replicated<T> {
    /// Device `index`'s copy (what a part's launch reads).
    pub fn on(&self, index: usize) -> &DeviceBuffer<T> {
        &self.copies[index]
    }

    /// Device `index`'s copy, to write.
    pub fn on_mut(&mut self, index: usize) -> &mut DeviceBuffer<T> {
        &mut self.copies[index]
    }

    /// Elements per copy.
    pub fn len(&self) -> usize {
        self.copies[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every device's copy, downloaded (a test that the copies agree).
    pub fn download_all(&self) -> Result<Vec<Vec<T>>> {
        self.copies.iter().map(DeviceBuffer::download).collect()
    }
}
