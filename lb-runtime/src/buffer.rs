//! Typed device buffers and the element types they may hold.
//!
//! Storage is untyped bytes on both backends: values travel as little-endian bytes, so a `bool`
//! the kernel wrote as 2 comes back as `true` instead of being an invalid Rust `bool`.

use std::marker::PhantomData;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use lb_ptx::body::Ty;

use crate::device::{Backend, Device};
use crate::error::Result;

mod sealed {
    pub trait Sealed {}
}

/// A value type that device buffers hold: f32 f64 i32 u32 i64 u64 u8 bool.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The body IR type of this element (`u8` has none: bodies never name it).
    const TY: Option<Ty>;
    /// Bytes per element in device memory.
    const SIZE: usize;
    /// Appends the little-endian bytes of `self`.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads one value from exactly [`Self::SIZE`] little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! numeric_element {
    ($($t:ty => $ty:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TY: Option<Ty> = $ty;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(&bytes[..Self::SIZE]);
                <$t>::from_le_bytes(raw)
            }
        }
    )*};
}

numeric_element! {
    f32 => Some(Ty::F32),
    f64 => Some(Ty::F64),
    i32 => Some(Ty::I32),
    u32 => Some(Ty::U32),
    i64 => Some(Ty::I64),
    u64 => Some(Ty::U64),
    u8 => None,
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const TY: Option<Ty> = Some(Ty::Bool);
    const SIZE: usize = 1;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

pub(crate) fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::SIZE);
    for &v in values {
        v.write_le(&mut out);
    }
    out
}

pub(crate) fn from_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::read_le).collect()
}

/// Where the bytes of a buffer live.
pub(crate) enum Storage {
    /// The stream is the device's only stream; it orders every copy and launch.
    Gpu {
        slice: CudaSlice<u8>,
        stream: Arc<CudaStream>,
    },
    Sim(u64),
}

/// An untyped device allocation, freed on drop. Plans' temporaries use it directly.
pub(crate) struct RawBuffer {
    pub(crate) dev: Device,
    /// Requested size; the allocation holds at least one byte so every buffer has an address.
    pub(crate) bytes: usize,
    pub(crate) storage: Storage,
}

impl RawBuffer {
    /// The device address kernels receive.
    pub(crate) fn addr(&self) -> u64 {
        match &self.storage {
            Storage::Gpu { slice, stream } => slice.device_ptr(stream).0,
            Storage::Sim(addr) => *addr,
        }
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // The GPU slice frees itself; simulator memory is ours to return.
        if let (Storage::Sim(addr), Backend::Sim(sim)) = (&self.storage, self.dev.backend()) {
            sim.memory().free(*addr);
        }
    }
}

/// A typed array in device memory, freed on drop. Kernels receive its address and length.
pub struct DeviceBuffer<T: Element> {
    pub(crate) raw: RawBuffer,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Element> DeviceBuffer<T> {
    pub(crate) fn from_raw(raw: RawBuffer, len: usize) -> Self {
        DeviceBuffer {
            raw,
            len,
            _elem: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of element 0, as kernels receive it.
    pub fn device_addr(&self) -> u64 {
        self.raw.addr()
    }

    /// The device that owns this buffer.
    pub fn device(&self) -> &Device {
        &self.raw.dev
    }

    /// Copies the buffer back to the host (same as [`Device::download`]).
    pub fn download(&self) -> Result<Vec<T>> {
        self.raw.dev.download(self)
    }
}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .field("addr", &self.device_addr())
            .finish()
    }
}
