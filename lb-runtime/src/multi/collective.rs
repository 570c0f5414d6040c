//! The exchanges between the devices of a [`super::Devices`]: NCCL's semantics, on NCCL for
//! GPUs and by copies through the simulators' memories for simulated devices.
//!
//! Two collectives are all multi-device launches need: a reduce of a few elements into one
//! device (the partial results of a row cut between devices, combined where the row ends) and a
//! broadcast of a range from one device to every other (the pieces of an all-gather of unequal
//! sizes). On GPUs each is an NCCL call per device inside one group, enqueued on the devices'
//! own streams after their kernels, so nothing is staged through the host; the simulators copy
//! through host memory, which is where their device memory lives.

use std::ffi::c_void;

use cudarc::nccl::{result as nccl, sys as nccl_sys};

use crate::buffer::{DeviceBuffer, Element};
use crate::device::{Backend, Device};
use crate::error::{Error, Result};
use lb_ptx::body::{Reduce, Ty};

/// How the devices exchange data.
pub(crate) enum Exchange {
    /// One device: a reduce has nothing to combine and a broadcast is a copy on the device.
    Alone,
    /// Simulated devices: NCCL's semantics by copies (ranks combined in ascending order).
    Simulated,
    /// GPUs: one NCCL communicator per device, in rank order.
    Nccl(Comms),
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
            // fields drop), so no collective on it is still running.
            let _ = unsafe { nccl::comm_destroy(c) };
        }
    }
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

/// The CUDA stream of a GPU device, as NCCL takes it.
fn cuda_stream(dev: &Device) -> Result<nccl_sys::cudaStream_t> {
    match dev.backend() {
        Backend::Gpu(gpu) => Ok(gpu.stream.cu_stream() as nccl_sys::cudaStream_t),
        Backend::Sim(_) => Err(Error::DeviceMismatch {
            what: "a simulated device in a group of GPUs".into(),
        }),
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

impl Exchange {
    /// Reduces `count` elements with `op` into `root_addr` on device `root`: the root's own
    /// elements there and those `sends` names (one entry per device, in rank order; the root's
    /// entry is ignored, a device with no address contributes nothing).
    pub(crate) fn reduce<T: Element>(
        &self,
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
                    acc = Some(match acc {
                        None => data,
                        Some(prev) => prev
                            .chunks_exact(T::SIZE)
                            .zip(data.chunks_exact(T::SIZE))
                            .flat_map(|(a, b)| combine::<T>(op, a, b))
                            .collect(),
                    });
                }
                sim_write(&devices[root], root_addr, &acc.unwrap_or_default())
            }
            Exchange::Nccl(comms) => {
                // A device with nothing to send takes part with the identity, so the reduce is
                // one collective over the whole communicator.
                let identities: Vec<Option<DeviceBuffer<T>>> = sends
                    .iter()
                    .enumerate()
                    .map(|(rank, s)| match (rank == root, s.addr) {
                        (false, None) => identity::<T>(&devices[rank], op, count).map(Some),
                        _ => Ok(None),
                    })
                    .collect::<Result<_>>()?;
                let streams: Vec<_> = devices.iter().map(cuda_stream).collect::<Result<_>>()?;
                nccl::group_start().map_err(|e| nccl_error("starting an NCCL group", e))?;
                let mut outcome = Ok(());
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
                    // elements of `T` on device `rank` (the caller's buffers, or the identity
                    // buffer, which lives until after the synchronization below), enqueued on
                    // that device's stream with its communicator; NCCL reads `recv` only on
                    // the root, where it is the root's own in-place buffer.
                    let r = unsafe {
                        nccl::reduce(
                            send as *const c_void,
                            recv as *mut c_void,
                            count,
                            ty,
                            nccl_op(op),
                            root as i32,
                            comms.0[rank],
                            streams[rank],
                        )
                    };
                    if let Err(e) = r {
                        outcome = Err(nccl_error("enqueuing an NCCL reduce", e));
                        break;
                    }
                }
                nccl::group_end().map_err(|e| nccl_error("ending an NCCL group", e))?;
                outcome?;
                // The identity buffers must outlive the reduce that reads them.
                if identities.iter().any(Option::is_some) {
                    for d in devices {
                        d.synchronize()?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Copies every piece of `pieces` (see [`Piece`]) from its root's buffer in `src` into every
    /// device's buffer in `dst` (both indexed by device); all pieces go in one group.
    pub(crate) fn broadcast<T: Element>(
        &self,
        devices: &[Device],
        pieces: &[Piece],
        src: &[&DeviceBuffer<T>],
        dst: &mut [DeviceBuffer<T>],
    ) -> Result<()> {
        let size = T::SIZE as u64;
        let addr = |b: &DeviceBuffer<T>, at: usize| b.device_addr() + at as u64 * size;
        match self {
            Exchange::Alone => {
                for p in pieces {
                    devices[0].copy_range(src[p.root], p.src_at, &mut dst[0], p.dst_at, p.count)?;
                }
                Ok(())
            }
            Exchange::Simulated => {
                for p in pieces {
                    let data = sim_read(
                        &devices[p.root],
                        addr(src[p.root], p.src_at),
                        p.count * T::SIZE,
                    )?;
                    for (dev, d) in devices.iter().zip(dst.iter()) {
                        sim_write(dev, addr(d, p.dst_at), &data)?;
                    }
                }
                Ok(())
            }
            Exchange::Nccl(comms) => {
                let ty = nccl_type::<T>(false)?;
                // Types NCCL cannot add are still copied, as bytes.
                let per_element = if ty == nccl_sys::ncclDataType_t::ncclUint8 {
                    T::SIZE
                } else {
                    1
                };
                let streams: Vec<_> = devices.iter().map(cuda_stream).collect::<Result<_>>()?;
                nccl::group_start().map_err(|e| nccl_error("starting an NCCL group", e))?;
                let mut outcome = Ok(());
                'pieces: for p in pieces {
                    for rank in 0..devices.len() {
                        // SAFETY: the caller checked that the root's buffer holds `p.count`
                        // elements from `p.src_at` and that every destination has room for them
                        // at `p.dst_at`; NCCL reads the source on the root only, and each call
                        // is enqueued on its device's stream with that device's communicator.
                        let r = unsafe {
                            nccl::broadcast(
                                addr(src[p.root], p.src_at) as *const c_void,
                                addr(&dst[rank], p.dst_at) as *mut c_void,
                                p.count * per_element,
                                ty,
                                p.root as i32,
                                comms.0[rank],
                                streams[rank],
                            )
                        };
                        if let Err(e) = r {
                            outcome = Err(nccl_error("enqueuing an NCCL broadcast", e));
                            break 'pieces;
                        }
                    }
                }
                nccl::group_end().map_err(|e| nccl_error("ending an NCCL group", e))?;
                outcome
            }
        }
    }
}

/// One piece of an all-gather: `count` elements from element `src_at` of device `root`'s
/// source, to element `dst_at` of every device's destination.
pub(crate) struct Piece {
    pub(crate) root: usize,
    pub(crate) src_at: usize,
    pub(crate) count: usize,
    pub(crate) dst_at: usize,
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
