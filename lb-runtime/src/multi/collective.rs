//! The exchanges between the devices of a [`super::Devices`]: NCCL's semantics, on NCCL or the
//! copy engines for GPUs and by copies through the simulators' memories for simulated devices.
//!
//! Two collectives are all multi-device launches need: a reduce of a few elements into one
//! device (the partial results of a row cut between devices, combined where the row ends) and a
//! broadcast of a range from one device to every other (the pieces of an all-gather of unequal
//! sizes). On GPUs both run on a side stream per device, beside the device's stream: a launch
//! cut in chunks hands each finished chunk to the exchange while the next chunk computes
//! ([`Exchange::after_compute`]), and the device's stream waits for the exchange at the end
//! ([`Exchange::end`]). Nothing is staged through the host; the simulators copy through host
//! memory, which is where their device memory lives.

use std::borrow::Borrow;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result as driver, sys as driver_sys, CudaEvent, CudaStream};
use cudarc::nccl::{result as nccl, sys as nccl_sys};

use super::push;
use crate::buffer::{DeviceBuffer, Element};
use crate::device::{Backend, Device};
use crate::error::{Error, Result};
use lb_ptx::body::{Reduce, Ty};

/// How the pieces of an all-gather travel between GPUs ([`super::Devices::set_transport`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// One NCCL broadcast per piece, in one group: works between any GPUs NCCL reaches. NCCL's
    /// kernels take a few SMs from the kernels they overlap.
    Nccl,
    /// Each device pushes its pieces into its peers' copies with the copy engines
    /// (`cuMemcpyPeerAsync` over NVLink or PCIe peer access), one stream per peer: no SM is
    /// taken from the kernels, and no collective makes a device wait for the slowest one
    /// before its copies start. With three or more devices, a piece far above the mean is
    /// relayed through the peers (see `push_pieces`). Needs peer access between every pair of
    /// the group ([`super::Devices::peer_access`]); the default where it is there.
    PeerCopy,
    /// [`MultiCsr::launch_and_gather`](super::MultiCsr::launch_and_gather)'s kernels store each
    /// row's result straight into every device's copy as they finish it (peer stores while the
    /// kernels run, [`crate::Stream::set_output_mirrors`]), so no copy follows them; only a row
    /// cut between devices is pushed once its partial results are combined. A plain
    /// [`all_gather`](super::MultiCsr::all_gather) copies as [`Transport::PeerCopy`] does.
    /// Needs peer access between every pair of the group.
    ///
    /// Faster than copies with schedules whose stores to consecutive rows coalesce into few
    /// link packets: those whose threads store a row once, at its end (`lrb`,
    /// `thread_mapped`, the group/warp/block family), and `merge_path`, which stores a block's
    /// rows together. On two GPUs, `lrb` with stores gave the fastest iteration of R-MAT
    /// (docs/multi-gpu.md has the measurements). Slower with `nonzero_split`, whose threads
    /// store rows in the middle of their walks, one scattered element at a time.
    PeerStores,
    /// Each device pushes its pieces into every peer's copy with a copy kernel of its own
    /// (16-byte loads of the piece, stores over the link into every destination), on its side
    /// stream after the kernels that made them. Needs peer access between every pair of the
    /// group. On four H200s with NVLink it made the all-gather alone 12–29% shorter than
    /// [`Transport::PeerCopy`] on regular rows and no shorter on R-MAT; in an iteration, where
    /// it takes SMs from the next chunk's kernels, it won as often as it lost
    /// (docs/multi-gpu.md).
    PeerKernel,
}

/// How the devices exchange data.
pub(crate) enum Exchange {
    /// One GPU: a reduce has nothing to combine and a broadcast is a copy on the device's stream.
    Alone,
    /// Simulated devices: NCCL's semantics by copies (ranks combined in ascending order).
    Simulated,
    /// Two or more GPUs.
    Gpus(Gpus),
}

/// NCCL communicators, one per device, destroyed with the group.
pub(crate) struct Comms(Vec<nccl_sys::ncclComm_t>);

// SAFETY: an NCCL communicator may be used from any thread as long as calls on it do not
// overlap; `Devices` issues every collective from behind its `Mutex<Exchange>`.
unsafe impl Send for Comms {}

impl Comms {
    /// Communicators for the CUDA devices `ordinals`, in one process (ncclCommInitAll).
    pub(crate) fn new(ordinals: &[usize]) -> Result<Comms> {
        // SAFETY: only tries to open NCCL's library by its standard names, like the driver's
        // check in `Device::cuda`; cudarc would panic on the first call without it.
        if !unsafe { nccl_sys::is_culib_present() } {
            return Err(Error::Cuda {
                context: "loading NCCL for several GPUs".into(),
                message: "libnccl.so was not found: install NCCL (the library, or a `libnccl.so` \
                          link to `libnccl.so.2`) where the dynamic loader looks \
                          (LD_LIBRARY_PATH)"
                    .into(),
            });
        }
        let list: Vec<i32> = ordinals
            .iter()
            .map(|&o| i32::try_from(o).map_err(|_| Error::Shape(format!("GPU ordinal {o}"))))
            .collect::<Result<_>>()?;
        let mut comms = vec![std::ptr::null_mut(); list.len()];
        // SAFETY: `comms` has room for one communicator per ordinal in `list`, both live for
        // the call; NCCL writes the communicators.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), list.len() as i32, list.as_ptr()) }
            .map_err(|e| nccl_error("creating the NCCL communicators", e))?;
        Ok(Comms(comms))
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        for &c in &self.0 {
            // SAFETY: each communicator was made by `comm_init_all` and is destroyed once, after
            // the group's devices were synchronized (`Drop for multi::Inner` runs before its
            // fields drop, and `Drop for Gpus` waits for the side streams first), so no
            // collective on it is still running.
            let _ = unsafe { nccl::comm_destroy(c) };
        }
    }
}

/// What a group of GPUs exchanges with: communicators, a side stream per device, and the events
/// that order the side streams with the devices' streams (made once and recorded again on every
/// use, so a launch allocates nothing).
pub(crate) struct Gpus {
    comms: Comms,
    /// Per device: the stream its exchanges run on.
    side: Vec<Arc<CudaStream>>,
    /// Per device: recorded on the device's stream before its side stream waits for it.
    entry: Vec<CudaEvent>,
    /// Per device and chunk step: recorded on the device's stream after the step's kernels.
    steps: Vec<Vec<CudaEvent>>,
    /// Per device: recorded on the side stream, for the other streams that wait for it.
    exit: Vec<CudaEvent>,
    /// Per device and peer: the stream the device pushes its pieces to that peer on, so the
    /// copies to different peers run at once on different copy engines and links, with the
    /// event that joins it back into the side stream (a device's own entry is unused).
    lanes: Vec<Vec<(Arc<CudaStream>, CudaEvent)>>,
    /// Per device: recorded on its side stream once its own pieces are copied into its copy of
    /// the gathered result, and on its stream after its kernels ([`Exchange::mark_own_rows`]).
    own_rows: Vec<(CudaEvent, CudaEvent)>,
    /// Per device: recorded on its side stream after it copies its own piece, for the lanes that
    /// send the piece on from that copy (a pipelined [`Exchange::gather`]).
    own_piece: Vec<CudaEvent>,
    peer_access: bool,
    pub(crate) transport: Transport,
}

// SAFETY: the streams and events are driver handles bound to their contexts on every call
// (cudarc binds before each use); `Devices` uses them from behind its `Mutex<Exchange>` only.
unsafe impl Send for Gpus {}

fn driver_error(context: &'static str) -> impl Fn(driver::DriverError) -> Error {
    move |e| Error::cuda(context, e)
}

impl Gpus {
    /// The exchange of the GPUs `devices` (with the CUDA ordinals `ordinals`): NCCL
    /// communicators, side streams, and peer access between every pair where the hardware has
    /// it.
    pub(crate) fn new(devices: &[Device], ordinals: &[usize]) -> Result<Gpus> {
        let comms = Comms::new(ordinals)?;
        let err = driver_error("making the streams and events of a group's exchanges");
        let (mut side, mut entry, mut exit) = (Vec::new(), Vec::new(), Vec::new());
        let (mut lanes, mut own_rows, mut own_piece) = (Vec::new(), Vec::new(), Vec::new());
        for dev in devices {
            let gpu = gpu_of(dev)?;
            side.push(gpu.ctx.new_stream().map_err(&err)?);
            entry.push(gpu.ctx.new_event(None).map_err(&err)?);
            exit.push(gpu.ctx.new_event(None).map_err(&err)?);
            own_rows.push((
                gpu.ctx.new_event(None).map_err(&err)?,
                gpu.ctx.new_event(None).map_err(&err)?,
            ));
            own_piece.push(gpu.ctx.new_event(None).map_err(&err)?);
            lanes.push(
                devices
                    .iter()
                    .map(|_| Ok((gpu.ctx.new_stream()?, gpu.ctx.new_event(None)?)))
                    .collect::<std::result::Result<Vec<_>, driver::DriverError>>()
                    .map_err(&err)?,
            );
        }
        let peer_access = enable_peer_access(devices)?;
        Ok(Gpus {
            comms,
            steps: devices.iter().map(|_| Vec::new()).collect(),
            side,
            entry,
            exit,
            lanes,
            own_rows,
            own_piece,
            peer_access,
            transport: if peer_access {
                Transport::PeerCopy
            } else {
                Transport::Nccl
            },
        })
    }

    pub(crate) fn peer_access(&self) -> bool {
        self.peer_access
    }

    /// Makes device `d`'s event for chunk step `step` if it has none yet.
    fn make_step_event(&mut self, devices: &[Device], d: usize, step: usize) -> Result<()> {
        while self.steps[d].len() <= step {
            let ctx = &gpu_of(&devices[d])?.ctx;
            let e = ctx
                .new_event(None)
                .map_err(driver_error("making an event of a group's exchanges"))?;
            self.steps[d].push(e);
        }
        Ok(())
    }

    /// Device `d`'s copy lanes wait for its side stream's work so far.
    fn fork_lanes(&self, d: usize) -> Result<()> {
        let err = driver_error("ordering a GPU's copies after its exchange");
        self.exit[d].record(&self.side[d]).map_err(&err)?;
        for (k, (lane, _)) in self.lanes[d].iter().enumerate() {
            if k != d {
                lane.wait(&self.exit[d]).map_err(&err)?;
            }
        }
        Ok(())
    }

    /// Device `d`'s side stream waits for its copy lanes' work so far.
    fn join_lanes(&self, d: usize) -> Result<()> {
        let err = driver_error("ordering a GPU's exchange after its copies");
        for (k, (lane, done)) in self.lanes[d].iter().enumerate() {
            if k != d {
                done.record(lane).map_err(&err)?;
                self.side[d].wait(done).map_err(&err)?;
            }
        }
        Ok(())
    }

    /// Every side stream waits for every other one's work so far (and its own device's and
    /// copy lanes'); then the lanes wait for their side streams.
    fn fence(&self) -> Result<()> {
        let err = driver_error("ordering the exchanges of a group");
        for d in 0..self.side.len() {
            self.join_lanes(d)?;
        }
        for (e, s) in self.exit.iter().zip(&self.side) {
            e.record(s).map_err(&err)?;
        }
        for (d, s) in self.side.iter().enumerate() {
            for (j, e) in self.exit.iter().enumerate() {
                if j != d {
                    s.wait(e).map_err(&err)?;
                }
            }
        }
        for d in 0..self.side.len() {
            self.fork_lanes(d)?;
        }
        Ok(())
    }
}

impl Drop for Gpus {
    fn drop(&mut self) {
        for s in self
            .side
            .iter()
            .chain(self.lanes.iter().flatten().map(|(l, _)| l))
        {
            let _ = s.synchronize();
        }
    }
}

/// Turns on peer access between every pair of `devices` when every pair can have it; whether
/// it did.
fn enable_peer_access(devices: &[Device]) -> Result<bool> {
    let gpus: Vec<_> = devices.iter().map(gpu_of).collect::<Result<_>>()?;
    for a in &gpus {
        for b in &gpus {
            if Arc::ptr_eq(&a.ctx, &b.ctx) {
                continue;
            }
            let mut can = 0;
            // SAFETY: `can` is a live out-parameter; both devices are handles of open contexts.
            unsafe {
                driver_sys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device())
            }
            .result()
            .map_err(driver_error(
                "asking whether two GPUs reach each other's memory",
            ))?;
            if can == 0 {
                return Ok(false);
            }
        }
    }
    for a in &gpus {
        a.ctx
            .bind_to_thread()
            .map_err(driver_error("binding a GPU's context"))?;
        for b in &gpus {
            if Arc::ptr_eq(&a.ctx, &b.ctx) {
                continue;
            }
            // SAFETY: the calling thread is bound to `a`'s context; `b`'s context is open for
            // the call. Access that another group of the process already turned on is fine.
            let r = unsafe { driver_sys::cuCtxEnablePeerAccess(b.ctx.cu_ctx(), 0) };
            match r {
                driver_sys::cudaError_enum::CUDA_SUCCESS
                | driver_sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                other => {
                    return Err(Error::cuda(
                        "turning on peer access between two GPUs",
                        driver::DriverError(other),
                    ))
                }
            }
        }
        pool_access(a, &gpus)?;
    }
    Ok(true)
}

/// Gives every other GPU of `gpus` access to `a`'s memory pool. Buffers come from the
/// stream-ordered allocator (`cuMemAllocAsync`), whose pools context peer access does not
/// cover: without this, a peer copy of them is staged through the host, at a fraction of the
/// link's speed.
fn pool_access(a: &crate::device::Gpu, gpus: &[&crate::device::Gpu]) -> Result<()> {
    let err = driver_error("giving the group's GPUs access to a GPU's memory pool");
    let mut pool: driver_sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a live out-parameter and `a`'s device handle is valid.
    unsafe { driver_sys::cuDeviceGetMemPool(&mut pool, a.ctx.cu_device()) }
        .result()
        .map_err(&err)?;
    let access: Vec<driver_sys::CUmemAccessDesc> = gpus
        .iter()
        .filter(|b| !Arc::ptr_eq(&a.ctx, &b.ctx))
        .map(|b| driver_sys::CUmemAccessDesc {
            location: driver_sys::CUmemLocation {
                type_: driver_sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: b.ctx.cu_device(),
            },
            flags: driver_sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        })
        .collect();
    // SAFETY: `access` holds `access.len()` initialized descriptors for the call; `pool` is
    // the device's current pool, which lives as long as the device.
    unsafe { driver_sys::cuMemPoolSetAccess(pool, access.as_ptr(), access.len()) }
        .result()
        .map_err(&err)
}

fn gpu_of(dev: &Device) -> Result<&crate::device::Gpu> {
    match dev.backend() {
        Backend::Gpu(gpu) => Ok(gpu),
        Backend::Sim(_) => Err(Error::DeviceMismatch {
            what: "a simulated device in a group of GPUs".into(),
        }),
    }
}

/// Runs `enqueue` (NCCL calls, one per rank or more) inside one NCCL group, stopping at its
/// first failure, which becomes the error with `what`; the group is ended either way.
fn in_nccl_group(
    what: &str,
    enqueue: impl FnOnce() -> std::result::Result<(), nccl::NcclError>,
) -> Result<()> {
    nccl::group_start().map_err(|e| nccl_error("starting an NCCL group", e))?;
    let outcome = enqueue();
    nccl::group_end().map_err(|e| nccl_error("ending an NCCL group", e))?;
    outcome.map_err(|e| nccl_error(what, e))
}

fn nccl_error(context: &str, e: nccl::NcclError) -> Error {
    Error::Cuda {
        context: context.into(),
        message: format!("NCCL error {:?}", e.0),
    }
}

/// One device's part in a reduce: the address it sends from (`None`: it sends the identity).
pub(crate) struct ReduceSend {
    pub(crate) addr: Option<u64>,
}

/// NCCL's element type for `T`; `reduce` says whether it is for arithmetic (bytes can only be
/// copied).
fn nccl_type<T: Element>(reduce: bool) -> Result<nccl_sys::ncclDataType_t> {
    use nccl_sys::ncclDataType_t as D;
    Ok(match T::TY {
        Some(Ty::F32) => D::ncclFloat32,
        Some(Ty::F64) => D::ncclFloat64,
        Some(Ty::I32) => D::ncclInt32,
        Some(Ty::U32) => D::ncclUint32,
        Some(Ty::I64) => D::ncclInt64,
        Some(Ty::U64) => D::ncclUint64,
        Some(Ty::F16) => D::ncclFloat16,
        Some(Ty::Bf16) => D::ncclBfloat16,
        _ if !reduce => D::ncclUint8,
        _ => {
            return Err(Error::Shape(format!(
                "{} elements cannot be reduced across devices",
                std::any::type_name::<T>()
            )))
        }
    })
}

fn nccl_op(op: Reduce) -> nccl_sys::ncclRedOp_t {
    match op {
        Reduce::Sum => nccl_sys::ncclRedOp_t::ncclSum,
        Reduce::Min => nccl_sys::ncclRedOp_t::ncclMin,
        Reduce::Max => nccl_sys::ncclRedOp_t::ncclMax,
    }
}

/// `data` combined element by element into what came before it (`acc`), in little-endian
/// bytes: the simulated devices' reduces, in rank order.
fn fold<T: Element>(op: Reduce, acc: Option<Vec<u8>>, data: Vec<u8>) -> Vec<u8> {
    match acc {
        None => data,
        Some(prev) => prev
            .chunks_exact(T::SIZE)
            .zip(data.chunks_exact(T::SIZE))
            .flat_map(|(a, b)| combine::<T>(op, a, b))
            .collect(),
    }
}

/// `a op b` on one element's little-endian bytes.
fn combine<T: Element>(op: Reduce, a: &[u8], b: &[u8]) -> Vec<u8> {
    macro_rules! apply {
        ($t:ty, $min:expr, $max:expr) => {{
            let (x, y) = (
                <$t>::from_le_bytes(a.try_into().expect("one element")),
                <$t>::from_le_bytes(b.try_into().expect("one element")),
            );
            let r: $t = match op {
                Reduce::Sum => x + y,
                Reduce::Min => $min(x, y),
                Reduce::Max => $max(x, y),
            };
            r.to_le_bytes().to_vec()
        }};
    }
    match T::TY {
        Some(Ty::F32) => apply!(f32, f32::min, f32::max),
        Some(Ty::F64) => apply!(f64, f64::min, f64::max),
        Some(Ty::I32) => apply!(i32, Ord::min, Ord::max),
        Some(Ty::U32) => apply!(u32, Ord::min, Ord::max),
        Some(Ty::I64) => apply!(i64, Ord::min, Ord::max),
        Some(Ty::U64) => apply!(u64, Ord::min, Ord::max),
        // Half storage: combined in f32 and rounded once, as NCCL does.
        Some(Ty::F16) => half_combine(
            op,
            (a, b),
            |x| half::f16::from_le_bytes(x).to_f32(),
            |v| half::f16::from_f32(v).to_le_bytes(),
        ),
        Some(Ty::Bf16) => half_combine(
            op,
            (a, b),
            |x| half::bf16::from_le_bytes(x).to_f32(),
            |v| half::bf16::from_f32(v).to_le_bytes(),
        ),
        _ => unreachable!("checked by nccl_type"),
    }
}

/// `a op b` for a 16-bit float format, through f32.
fn half_combine(
    op: Reduce,
    (a, b): (&[u8], &[u8]),
    widen: fn([u8; 2]) -> f32,
    narrow: fn(f32) -> [u8; 2],
) -> Vec<u8> {
    let (x, y) = (widen([a[0], a[1]]), widen([b[0], b[1]]));
    let r = match op {
        Reduce::Sum => x + y,
        Reduce::Min => x.min(y),
        Reduce::Max => x.max(y),
    };
    narrow(r).to_vec()
}

fn sim_read(dev: &Device, addr: u64, len: usize) -> Result<Vec<u8>> {
    match dev.backend() {
        Backend::Sim(sim) => Ok(sim.memory().read(addr, len as u64)?),
        Backend::Gpu(_) => unreachable!("simulated exchanges run on simulators"),
    }
}

fn sim_write(dev: &Device, addr: u64, data: &[u8]) -> Result<()> {
    match dev.backend() {
        Backend::Sim(sim) => Ok(sim.memory().write(addr, data)?),
        Backend::Gpu(_) => unreachable!("simulated exchanges run on simulators"),
    }
}

/// One piece of an all-gather: `count` elements at device address `src` of device `root`, to
/// element `dst_at` of every device's destination.
pub(crate) struct Piece {
    pub(crate) root: usize,
    pub(crate) src: u64,
    pub(crate) count: usize,
    pub(crate) dst_at: usize,
}

impl Exchange {
    /// Whether [`MultiCsr::launch_and_gather`](super::MultiCsr::launch_and_gather)'s kernels
    /// store their results into every device's copy themselves ([`Transport::PeerStores`] on
    /// GPUs, and one device, whose copy is its own memory), instead of an exchange after them.
    pub(crate) fn stores_in_kernels(&self, devices: &[Device]) -> bool {
        match self {
            Exchange::Gpus(g) => g.transport == Transport::PeerStores,
            Exchange::Alone => true,
            Exchange::Simulated => devices.len() == 1,
        }
    }

    /// Starts an exchange. With `sides` (copies, broadcasts or reduces follow on the side
    /// streams), the side streams wait for the work enqueued on their devices' streams so far,
    /// so what they write is written after it; with `stores` (the kernels about to be launched
    /// write into every device's copy), every device's stream waits for every other device's
    /// work so far.
    pub(crate) fn begin(&mut self, devices: &[Device], stores: bool, sides: bool) -> Result<()> {
        let Exchange::Gpus(g) = self else {
            return Ok(());
        };
        let err = driver_error("ordering a group's exchanges after its devices' work");
        for (d, dev) in devices.iter().enumerate() {
            g.entry[d].record(&gpu_of(dev)?.stream).map_err(&err)?;
            if sides {
                g.side[d].wait(&g.entry[d]).map_err(&err)?;
            }
        }
        if stores {
            for (d, dev) in devices.iter().enumerate() {
                let stream = &gpu_of(dev)?.stream;
                for (j, e) in g.entry.iter().enumerate() {
                    if j != d {
                        stream.wait(e).map_err(&err)?;
                    }
                }
            }
        }
        if sides && g.transport != Transport::Nccl {
            // A device's copy lane into a peer reads the device's results and writes the
            // peer's copy: it waits for what both have enqueued so far. (Two waits per lane,
            // where a fence of the side streams took about three times the driver calls, which
            // bounded a four-GPU iteration on a host with slow ones.)
            for (d, lanes) in g.lanes.iter().enumerate() {
                for (j, (lane, _)) in lanes.iter().enumerate().filter(|&(j, _)| j != d) {
                    lane.wait(&g.entry[d]).map_err(&err)?;
                    lane.wait(&g.entry[j]).map_err(&err)?;
                    // The copy kernel pushes from the side stream into every peer's copy.
                    if g.transport == Transport::PeerKernel {
                        g.side[d].wait(&g.entry[j]).map_err(&err)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Marks the end of device `d`'s kernels of chunk step `step` (enqueued on its stream):
    /// with `sides`, its side stream waits for them, and so do the lanes that push its pieces
    /// of that step.
    pub(crate) fn after_compute(
        &mut self,
        devices: &[Device],
        (d, step): (usize, usize),
        sides: bool,
    ) -> Result<()> {
        let Exchange::Gpus(g) = self else {
            return Ok(());
        };
        let err = driver_error("ordering a group's exchange after a chunk's kernels");
        let stream = gpu_of(&devices[d])?.stream.clone();
        g.make_step_event(devices, d, step)?;
        let event = &g.steps[d][step];
        event.record(&stream).map_err(&err)?;
        if sides {
            g.side[d].wait(event).map_err(&err)?;
        }
        Ok(())
    }

    /// Ends an exchange: every device's stream waits for every side stream (`sides`) and, for
    /// `stores` (each device's last chunk step, `None` for a device without parts), for every
    /// other device's kernels: a device's next work may overwrite what another device still
    /// reads, or read what it writes.
    ///
    /// `pipelined` (after a pipelined [`gather`](Self::gather) with peer copies): a device's
    /// stream waits only for what was copied into its own copy and for its side stream, not for
    /// the copies it sends to its peers, which read its own copy of the gathered array (not
    /// the kernels' output) and run on while it computes the next step. The caller keeps that
    /// array alive and unwritten by the device until a later, unpipelined `end`.
    pub(crate) fn end(
        &mut self,
        devices: &[Device],
        sides: bool,
        stores: Option<&[Option<usize>]>,
        pipelined: bool,
    ) -> Result<()> {
        let Exchange::Gpus(g) = self else {
            return Ok(());
        };
        let err = driver_error("ordering a group's devices after its exchanges");
        if sides && pipelined && g.transport == Transport::PeerCopy {
            for (e, s) in g.exit.iter().zip(&g.side) {
                e.record(s).map_err(&err)?;
            }
            for d in 0..g.side.len() {
                g.join_lanes(d)?;
            }
            for (j, dev) in devices.iter().enumerate() {
                let stream = &gpu_of(dev)?.stream;
                stream.wait(&g.exit[j]).map_err(&err)?;
                for (d, lanes) in g.lanes.iter().enumerate() {
                    if d != j {
                        stream.wait(&lanes[j].1).map_err(&err)?;
                    }
                }
                dev.note_device_work();
            }
            return Ok(());
        }
        if sides {
            if g.transport != Transport::Nccl {
                for d in 0..g.side.len() {
                    g.join_lanes(d)?;
                }
            }
            for (e, s) in g.exit.iter().zip(&g.side) {
                e.record(s).map_err(&err)?;
            }
        }
        for (j, dev) in devices.iter().enumerate() {
            let stream = &gpu_of(dev)?.stream;
            if sides {
                for e in &g.exit {
                    stream.wait(e).map_err(&err)?;
                }
            }
            for (d, last) in stores.unwrap_or_default().iter().enumerate() {
                if let (true, Some(step)) = (d != j, last) {
                    stream.wait(&g.steps[d][*step]).map_err(&err)?;
                }
            }
            // The device's stream now carries the exchange's writes: the device's other
            // streams order their next launches after it.
            dev.note_device_work();
        }
        Ok(())
    }

    /// Marks, on every device, what the products over its own columns in the next iteration
    /// need ([`MultiCsr::iterate_async`](super::MultiCsr::iterate_async)): its own pieces of
    /// the gathered result, whose copies are enqueued on its side stream by now (before the
    /// copies of the rows cut between devices), and its kernels so far. With NCCL the own piece
    /// travels in the group's broadcasts, so the mark covers the whole exchange there.
    pub(crate) fn mark_own_rows(&mut self, devices: &[Device]) -> Result<()> {
        let Exchange::Gpus(g) = self else {
            return Ok(());
        };
        let err = driver_error("marking a GPU's own rows of an all-gather");
        for (d, dev) in devices.iter().enumerate() {
            let (copied, computed) = &g.own_rows[d];
            copied.record(&g.side[d]).map_err(&err)?;
            computed.record(&gpu_of(dev)?.stream).map_err(&err)?;
        }
        Ok(())
    }

    /// Makes `early`, a stream of device `d`, wait for what the last
    /// [`mark_own_rows`](Self::mark_own_rows) marked on `d` (nothing to wait for on simulators,
    /// which finish every operation before the call returns).
    pub(crate) fn wait_own_rows(&self, d: usize, early: &crate::stream::Stream) -> Result<()> {
        let (Exchange::Gpus(g), Some(early)) = (self, early.cudarc()) else {
            return Ok(());
        };
        let err = driver_error("ordering a GPU's own columns after its own rows");
        let (copied, computed) = &g.own_rows[d];
        early.wait(copied).map_err(&err)?;
        early.wait(computed).map_err(&err)
    }

    /// Every side stream waits for the others (after a reduce whose result is then gathered).
    pub(crate) fn fence(&mut self) -> Result<()> {
        match self {
            Exchange::Gpus(g) if g.transport != Transport::Nccl => g.fence(),
            _ => Ok(()),
        }
    }

    /// Reduces `count` elements with `op` into `root_addr` on device `root`: the root's own
    /// elements there and those `sends` names (one entry per device, in rank order; the root's
    /// entry is ignored, a device with no address contributes nothing). On GPUs it runs on the
    /// side streams, between [`begin`](Self::begin) and [`end`](Self::end).
    pub(crate) fn reduce<T: Element>(
        &mut self,
        devices: &[Device],
        op: Reduce,
        count: usize,
        root: usize,
        root_addr: u64,
        sends: &[ReduceSend],
    ) -> Result<()> {
        let ty = nccl_type::<T>(true)?;
        match self {
            Exchange::Alone => Ok(()),
            Exchange::Simulated => {
                let bytes = count * T::SIZE;
                // Ranks before the root, the root, then the ranks after it: ascending rank
                // order, as the partial results of a row come in atom order.
                let mut acc: Option<Vec<u8>> = None;
                for (rank, send) in sends.iter().enumerate() {
                    let addr = if rank == root {
                        Some(root_addr)
                    } else {
                        send.addr
                    };
                    let Some(addr) = addr else { continue };
                    let data = sim_read(&devices[rank], addr, bytes)?;
                    acc = Some(fold::<T>(op, acc, data));
                }
                sim_write(&devices[root], root_addr, &acc.unwrap_or_default())
            }
            Exchange::Gpus(g) => {
                // A device with nothing to send takes part with the identity, so the reduce is
                // one collective over the whole communicator. The identity is filled on the
                // device's stream; the side stream waits for it.
                let mut identities: Vec<Option<DeviceBuffer<T>>> = Vec::new();
                for (rank, s) in sends.iter().enumerate() {
                    identities.push(match (rank == root, s.addr) {
                        (false, None) => {
                            let id = identity::<T>(&devices[rank], op, count)?;
                            g.side[rank]
                                .join(&gpu_of(&devices[rank])?.stream)
                                .map_err(driver_error("ordering a reduce after its identity"))?;
                            Some(id)
                        }
                        _ => None,
                    });
                }
                in_nccl_group("enqueuing an NCCL reduce", || {
                    for rank in 0..devices.len() {
                        let send = if rank == root {
                            root_addr
                        } else {
                            sends[rank].addr.unwrap_or_else(|| {
                                identities[rank].as_ref().expect("made above").device_addr()
                            })
                        };
                        let recv = if rank == root { root_addr } else { send };
                        // SAFETY: `send` and `recv` are device addresses of at least `count`
                        // elements of `T` on device `rank` (the caller's buffers, or the
                        // identity buffer, whose release waits for the reduce: below),
                        // enqueued on that device's side stream with its communicator; NCCL
                        // reads `recv` only on the root, where it is the root's own in-place
                        // buffer.
                        unsafe {
                            nccl::reduce(
                                send as *const c_void,
                                recv as *mut c_void,
                                count,
                                ty,
                                nccl_op(op),
                                root as i32,
                                g.comms.0[rank],
                                g.side[rank].cu_stream() as nccl_sys::cudaStream_t,
                            )
                        }?;
                    }
                    Ok(())
                })?;
                // An identity buffer is freed on its device's stream when it drops below: that
                // stream waits for the reduce that reads it first (no wait on the host).
                for (rank, _) in identities.iter().enumerate().filter(|(_, i)| i.is_some()) {
                    gpu_of(&devices[rank])?
                        .stream
                        .join(&g.side[rank])
                        .map_err(driver_error(
                            "ordering an identity's release after a reduce",
                        ))?;
                }
                Ok(())
            }
        }
    }

    /// Combines the copies in `copies` (one per device, in rank order, of one length) element
    /// by element with `op` and leaves the result in every copy. On GPUs one NCCL all-reduce in
    /// place, on the side streams after the devices' work so far, and each device's stream
    /// waits for it; on simulators in rank order, at once.
    pub(crate) fn all_reduce<T: Element>(
        &mut self,
        devices: &[Device],
        op: Reduce,
        copies: &mut [DeviceBuffer<T>],
    ) -> Result<()> {
        let ty = nccl_type::<T>(true)?;
        let count = copies.first().map_or(0, DeviceBuffer::len);
        match self {
            Exchange::Alone => Ok(()),
            Exchange::Simulated => {
                let bytes = count * T::SIZE;
                let mut acc: Option<Vec<u8>> = None;
                for (dev, copy) in devices.iter().zip(copies.iter()) {
                    let data = sim_read(dev, copy.device_addr(), bytes)?;
                    acc = Some(fold::<T>(op, acc, data));
                }
                let acc = acc.unwrap_or_default();
                for (dev, copy) in devices.iter().zip(copies.iter()) {
                    sim_write(dev, copy.device_addr(), &acc)?;
                }
                Ok(())
            }
            Exchange::Gpus(g) => {
                for (rank, dev) in devices.iter().enumerate() {
                    g.side[rank]
                        .join(&gpu_of(dev)?.stream)
                        .map_err(driver_error("ordering an all-reduce after a device's work"))?;
                }
                in_nccl_group("enqueuing an NCCL all-reduce", || {
                    for (rank, copy) in copies.iter().enumerate() {
                        let addr = copy.device_addr();
                        // SAFETY: `addr` is the device address of `count` elements of `T` on
                        // device `rank` (its copy, borrowed mutably for this call; its release
                        // waits for the device's stream, which waits for this side stream
                        // below), and the all-reduce is enqueued on that device's side stream
                        // with its communicator; in place, as NCCL allows (send and receive
                        // the same).
                        unsafe {
                            nccl::all_reduce(
                                addr as *const c_void,
                                addr as *mut c_void,
                                count,
                                ty,
                                nccl_op(op),
                                g.comms.0[rank],
                                g.side[rank].cu_stream() as nccl_sys::cudaStream_t,
                            )
                        }?;
                    }
                    Ok(())
                })?;
                for (rank, dev) in devices.iter().enumerate() {
                    gpu_of(dev)?
                        .stream
                        .join(&g.side[rank])
                        .map_err(driver_error("ordering a device's work after an all-reduce"))?;
                }
                Ok(())
            }
        }
    }

    /// Copies every piece of `pieces` into every device's buffer in `dst` (indexed by device).
    /// `step`: the chunk step whose kernels made the pieces (marked by
    /// [`after_compute`](Self::after_compute)), or `None` after a [`fence`](Self::fence).
    /// `pipelined`: with peer copies, a device sends its piece to its peers from its own copy in
    /// `dst`, once it is made, so that the kernels may overwrite their output while the peers'
    /// copies are under way (see [`end`](Self::end)).
    pub(crate) fn gather<T: Element, D: Borrow<DeviceBuffer<T>>>(
        &mut self,
        devices: &[Device],
        step: Option<usize>,
        pieces: &[Piece],
        dst: &mut [D],
        pipelined: bool,
    ) -> Result<()> {
        let size = T::SIZE as u64;
        // The destinations' addresses: the copies write through them, while `dst` stays
        // borrowed.
        let dst: Vec<u64> = dst.iter().map(|b| b.borrow().device_addr()).collect();
        let addr = |b: &u64, at: usize| b + at as u64 * size;
        match self {
            Exchange::Alone => {
                let gpu = gpu_of(&devices[0])?;
                let stream = &gpu.stream;
                devices[0].note_device_work();
                gpu.ctx
                    .bind_to_thread()
                    .map_err(driver_error("binding a GPU's context"))?;
                for p in pieces.iter().filter(|p| p.count > 0) {
                    // SAFETY: the caller checked that the piece lies inside its source buffer
                    // and that the destination has room for it at `dst_at`; both are on this
                    // device and the copy is ordered on its stream after the kernels.
                    unsafe {
                        driver::memcpy_dtod_async(
                            addr(&dst[0], p.dst_at),
                            p.src,
                            p.count * T::SIZE,
                            stream.cu_stream(),
                        )
                    }
                    .map_err(driver_error("copying a piece of an all-gather"))?;
                }
                Ok(())
            }
            Exchange::Simulated => {
                for p in pieces {
                    let data = sim_read(&devices[p.root], p.src, p.count * T::SIZE)?;
                    for (dev, d) in devices.iter().zip(dst.iter()) {
                        sim_write(dev, addr(d, p.dst_at), &data)?;
                    }
                }
                Ok(())
            }
            Exchange::Gpus(g) if g.transport != Transport::Nccl => {
                push_pieces::<T>(g, devices, (step, pipelined), pieces, &dst)
            }
            Exchange::Gpus(g) => {
                let ty = nccl_type::<T>(false)?;
                // Types NCCL cannot add are still copied, as bytes.
                let per_element = if ty == nccl_sys::ncclDataType_t::ncclUint8 {
                    T::SIZE
                } else {
                    1
                };
                in_nccl_group("enqueuing an NCCL broadcast", || {
                    for p in pieces.iter().filter(|p| p.count > 0) {
                        for (rank, into) in dst.iter().enumerate() {
                            // SAFETY: the caller checked that the root's piece lies inside its
                            // buffer and that every destination has room for it at
                            // `p.dst_at`; NCCL reads the source on the root only, and each
                            // call is enqueued on its device's side stream with that device's
                            // communicator.
                            unsafe {
                                nccl::broadcast(
                                    p.src as *const c_void,
                                    addr(into, p.dst_at) as *mut c_void,
                                    p.count * per_element,
                                    ty,
                                    p.root as i32,
                                    g.comms.0[rank],
                                    g.side[rank].cu_stream() as nccl_sys::cudaStream_t,
                                )
                            }?;
                        }
                    }
                    Ok(())
                })
            }
        }
    }
}

/// A piece at least this large (bytes), and at least [`RELAY_ABOVE_MEAN`] times the mean of the
/// exchange's pieces, is relayed ([`push_pieces`]).
const RELAY_MIN_BYTES: usize = 1 << 20;

/// How much larger than the mean piece a piece must be to be relayed.
const RELAY_ABOVE_MEAN: f64 = 1.2;

/// Every device pushes its pieces into every peer's copy, one copy-engine stream (lane) per
/// peer, after its kernels of `step`; its own piece is a copy on the device. Pushing (the
/// source's copy engine writes over the link) took 1–45% less time per iteration than pulling
/// on four and two H100s with NVLink, and one lane per peer less than one stream for all peers
/// (docs/multi-gpu.md).
///
/// Where the pieces are uneven (a merge path gives the device with the shortest rows the most
/// rows), the largest piece leaving its device once per peer bounds the exchange: on four
/// GPUs, R-MAT's 17 MB piece left its device three times. With three or more devices, a piece
/// well above the mean ([`RELAY_ABOVE_MEAN`], [`RELAY_MIN_BYTES`]) is relayed instead: the root
/// sends each peer one share of it, and each peer forwards its share to the others from its own
/// copy, as the scatter and all-gather halves of a broadcast do (Thakur, Rabenseifner and
/// Gropp, "Optimization of Collective Communication Operations in MPICH", §4.2). The root's
/// piece then leaves it once; every device still receives what it did.
///
/// `pipelined` (peer copies only): the peers' copies read the root's own copy in `dst`, after
/// the side stream made it, instead of the kernels' output.
fn push_pieces<T: Element>(
    g: &mut Gpus,
    devices: &[Device],
    (step, pipelined): (Option<usize>, bool),
    pieces: &[Piece],
    dst: &[u64],
) -> Result<()> {
    let err = driver_error("copying a piece of an all-gather to a peer GPU");
    let gpus: Vec<_> = devices.iter().map(gpu_of).collect::<Result<_>>()?;
    let mut by_engine = Vec::new();
    for p in pieces.iter().filter(|p| p.count > 0) {
        if g.transport != Transport::PeerKernel {
            by_engine.push(p);
            continue;
        }
        let to: Vec<u64> = dst
            .iter()
            .map(|into| into + (p.dst_at * T::SIZE) as u64)
            .filter(|&to| to != p.src)
            .collect();
        if push::aligned_alike(p.src, &to) {
            push_by_kernel(g, gpus[p.root], p.root, p.src, p.count * T::SIZE, &to)?;
        } else {
            by_engine.push(p);
        }
    }
    let n = dst.len();
    let mean = by_engine.iter().map(|p| p.count * T::SIZE).sum::<usize>() as f64
        / by_engine.len().max(1) as f64;
    let relayed = |p: &Piece| {
        let bytes = p.count * T::SIZE;
        n >= 3 && bytes >= RELAY_MIN_BYTES && bytes as f64 > RELAY_ABOVE_MEAN * mean
    };
    let at = |into: &u64, element: usize| into + (element * T::SIZE) as u64;
    // One copy of `count` elements from `src` (on device `from`) to element `element` of device
    // `j`'s copy, on `stream`.
    let copy =
        |stream: &CudaStream, from: usize, src: u64, j: usize, element: usize, count: usize| {
            stream.context().bind_to_thread().map_err(&err)?;
            let to = at(&dst[j], element);
            // SAFETY: the caller checked that every piece lies inside its root's buffer and that
            // every copy of `dst` has room for it at its `dst_at`; `src` and `element` stay inside
            // one piece (a share of a relayed piece is read from the copy of a device it was copied
            // into, after that copy: the event waits below). The stream waits for the kernels that
            // write the piece (its lane waits for the step's event, or the caller's fence) and the
            // devices' streams wait for the copy before their next work (`end`), so neither side
            // is in use. Peer access to every memory pool of the group was granted when the group
            // was made.
            unsafe {
                if from == j {
                    driver::memcpy_dtod_async(to, src, count * T::SIZE, stream.cu_stream())
                } else {
                    driver::memcpy_peer_async(
                        gpus[j].ctx.cu_ctx(),
                        to,
                        gpus[from].ctx.cu_ctx(),
                        src,
                        count * T::SIZE,
                        stream.cu_stream(),
                    )
                }
            }
            .map_err(&err)
        };
    // A relayed piece's share for its `i`-th peer (in device order): elements `[start, end)`.
    let share = |p: &Piece, i: usize| (i * p.count / (n - 1), (i + 1) * p.count / (n - 1));
    for p in by_engine.iter().copied() {
        let r = p.root;
        // The device's own piece is copied on its side stream, which waited for the step's
        // kernels in `after_compute`.
        copy(&g.side[r], r, p.src, r, p.dst_at, p.count)?;
        let from_own = pipelined && g.transport == Transport::PeerCopy;
        let src = if from_own {
            g.own_piece[r].record(&g.side[r]).map_err(&err)?;
            at(&dst[r], p.dst_at)
        } else {
            p.src
        };
        for (i, j) in (0..n).filter(|&j| j != r).enumerate() {
            let lane = &g.lanes[r][j].0;
            if from_own {
                lane.wait(&g.own_piece[r]).map_err(&err)?;
            } else if let Some(step) = step {
                lane.wait(&g.steps[r][step]).map_err(&err)?;
            }
            if !relayed(p) {
                copy(lane, r, src, j, p.dst_at, p.count)?;
                continue;
            }
            let (start, end) = share(p, i);
            let src = src + (start * T::SIZE) as u64;
            copy(lane, r, src, j, p.dst_at + start, end - start)?;
            // The lane's event marks the share's arrival, for the forwards from `j`; `end`
            // records it again when it joins the lanes.
            g.lanes[r][j].1.record(lane).map_err(&err)?;
        }
    }
    for p in by_engine.iter().copied().filter(|p| relayed(p)) {
        let r = p.root;
        for (i, k) in (0..n).filter(|&k| k != r).enumerate() {
            let (start, end) = share(p, i);
            let src = at(&dst[k], p.dst_at + start);
            for j in (0..n).filter(|&j| j != r && j != k) {
                let lane = &g.lanes[k][j].0;
                lane.wait(&g.lanes[r][k].1).map_err(&err)?;
                copy(lane, k, src, j, p.dst_at + start, end - start)?;
            }
        }
    }
    Ok(())
}

/// Pushes the `bytes` at `src` on device `root` (`gpu`) into every address of `to` with the copy
/// kernel ([`push`]), on the root's side stream, which waits for the kernels that made the piece
/// (`after_compute`, or the caller's fence) and which the devices' streams wait for (`end`).
fn push_by_kernel(
    g: &Gpus,
    gpu: &crate::device::Gpu,
    root: usize,
    src: u64,
    bytes: usize,
    to: &[u64],
) -> Result<()> {
    let module = gpu.module(&push::PTX)?;
    let f = module.function(push::ENTRY, 0)?;
    let grid = push::grid(bytes, gpu.sm_count);
    for batch in to.chunks(push::MAX_DESTINATIONS) {
        let mut params = vec![src, bytes as u64, batch.len() as u64];
        params.extend_from_slice(batch);
        params.resize(3 + push::MAX_DESTINATIONS, 0);
        // The caller checked that the piece lies inside its root's buffer and that each
        // destination has room for it; peer access between every pair of the group (which this
        // transport requires) lets the root's kernel store into its peers' memory. The side
        // stream is ordered after the kernels that write the piece and before the devices'
        // next work, so neither side is in use while the kernel runs. The kernel takes the 11
        // parameters given: the source, the length, the count and eight addresses.
        module.launch(f, &g.side[root], grid, push::BLOCK, 0, &mut params)?;
    }
    Ok(())
}

/// `count` copies of `op`'s identity on `dev`: what a device with nothing to add sends.
fn identity<T: Element>(dev: &Device, op: Reduce, count: usize) -> Result<DeviceBuffer<T>> {
    let bytes: Vec<u8> = match (T::TY, op) {
        (_, Reduce::Sum) => vec![0; T::SIZE],
        (Some(Ty::F32), Reduce::Min) => f32::INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::F32), Reduce::Max) => f32::NEG_INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::F64), Reduce::Min) => f64::INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::F64), Reduce::Max) => f64::NEG_INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::I32), Reduce::Min) => i32::MAX.to_le_bytes().to_vec(),
        (Some(Ty::I32), Reduce::Max) => i32::MIN.to_le_bytes().to_vec(),
        (Some(Ty::U32), Reduce::Min) => u32::MAX.to_le_bytes().to_vec(),
        (Some(Ty::U32), Reduce::Max) => 0u32.to_le_bytes().to_vec(),
        (Some(Ty::I64), Reduce::Min) => i64::MAX.to_le_bytes().to_vec(),
        (Some(Ty::I64), Reduce::Max) => i64::MIN.to_le_bytes().to_vec(),
        (Some(Ty::U64), Reduce::Min) => u64::MAX.to_le_bytes().to_vec(),
        (Some(Ty::U64), Reduce::Max) => 0u64.to_le_bytes().to_vec(),
        (Some(Ty::F16), Reduce::Min) => half::f16::INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::F16), Reduce::Max) => half::f16::NEG_INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::Bf16), Reduce::Min) => half::bf16::INFINITY.to_le_bytes().to_vec(),
        (Some(Ty::Bf16), Reduce::Max) => half::bf16::NEG_INFINITY.to_le_bytes().to_vec(),
        _ => unreachable!("checked by nccl_type"),
    };
    dev.filled(count, T::read_le(&bytes))
}
