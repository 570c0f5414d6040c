//! Typed device buffers and the element types they may hold.
//!
//! Storage is untyped bytes on both backends: values travel as little-endian bytes, so a `bool`
//! the kernel wrote as 2 comes back as `true` instead of being an invalid Rust `bool`.

use std::marker::PhantomData;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};
use lb_ptx::body::Ty;

use crate::device::{Backend, Device};
use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// A value type that device buffers hold: f32 f64 i32 u32 i64 u64 u8 bool, and the 16-bit
/// floats `half::f16` and `half::bf16` (storage only: kernels compute with them in f32).
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The body IR type of this element (`u8` has none: bodies never name it).
    const TY: Option<Ty>;
    /// Bytes per element in device memory.
    const SIZE: usize;
    /// Appends the little-endian bytes of `self`.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads one value from exactly [`Self::SIZE`] little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
    /// Whether every bit pattern of [`Self::SIZE`] bytes is a value, so a copy from the device
    /// may land in the host's memory as is (`bool`: no, a byte other than 0 or 1 is not a Rust
    /// `bool`; a kernel of the user's, through `DeviceBuffer::from_cudarc`, may write one).
    const ANY_BITS: bool = true;
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
    half::f16 => Some(Ty::F16),
    half::bf16 => Some(Ty::Bf16),
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const TY: Option<Ty> = Some(Ty::Bool);
    const SIZE: usize = 1;
    const ANY_BITS: bool = false;
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

/// `values` as device memory holds them (little-endian bytes): on a little-endian host their own
/// memory, without a copy.
pub(crate) fn le_bytes<T: Element>(values: &[T]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        // SAFETY: the sealed element types are primitive numbers or `half`'s 16-bit floats
        // (`repr(transparent)` over a `u16`): no padding, no invalid bit patterns as bytes, of
        // exactly `T::SIZE` bytes, so the slice's memory is
        // `values.len() * T::SIZE` initialized bytes, borrowed for as long as `values`; on a
        // little-endian host they are the little-endian bytes `write_le` would append.
        let bytes = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
        };
        std::borrow::Cow::Borrowed(bytes)
    } else {
        std::borrow::Cow::Owned(to_bytes(values))
    }
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

    /// Makes the buffer `len` elements long, at most what its allocation holds: a shorter view
    /// of the same memory (a queue's stored items), or the whole of it again.
    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.raw.bytes / T::SIZE);
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

    /// Copies the buffer back into `out`, reusing its allocation (same as
    /// [`Device::download_into`]).
    pub fn download_into(&self, out: &mut Vec<T>) -> Result<()> {
        self.raw.dev.download_into(self, out)
    }

    /// Overwrites the buffer with `data` in place, without allocating device memory: a new
    /// right-hand side or feature matrix each iteration keeps its address (so a captured graph
    /// or a cached launch that holds it stays valid). The copy is ordered after the work already
    /// submitted to the device. `data` must have exactly [`len`](Self::len) elements, or
    /// nothing is written and the result is an [`Error::Shape`].
    ///
    /// ```
    /// let dev = lb_runtime::Device::simulator();
    /// let mut b = dev.upload(&[1.0f32, 2.0, 3.0])?;
    /// let addr = b.device_addr();
    /// b.upload_into(&[4.0, 5.0, 6.0])?;
    /// assert_eq!((b.download()?, b.device_addr()), (vec![4.0, 5.0, 6.0], addr));
    /// assert!(b.upload_into(&[1.0, 2.0]).is_err());
    /// # Ok::<(), lb_runtime::Error>(())
    /// ```
    pub fn upload_into(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::Shape(format!(
                "uploading {} elements into a buffer of {}: upload_into keeps the buffer's \
                 length; upload a new buffer to change it",
                data.len(),
                self.len
            )));
        }
        let dev = self.raw.dev.clone();
        dev.write_raw(&mut self.raw, &le_bytes(data))
    }
}

impl<T: Element + DeviceRepr> DeviceBuffer<T> {
    /// Takes over the user's cudarc slice without a copy: lb kernels can then read and write
    /// it, and [`into_cudarc`](Self::into_cudarc) gives it back. The slice must belong to
    /// `dev`'s context (`Error::DeviceMismatch` otherwise, and on the simulator). From now on
    /// the memory belongs to the device's stream like every lb buffer (it is freed there, and
    /// the slice `into_cudarc` returns is on that stream); work the user enqueued on it on
    /// another stream must be finished or ordered before lb's (`Stream::wait_for`).
    pub fn from_cudarc(dev: &Device, slice: CudaSlice<T>) -> Result<DeviceBuffer<T>> {
        let Backend::Gpu(gpu) = dev.backend() else {
            return Err(Error::DeviceMismatch {
                what: "the cudarc slice (the device is the simulator)".into(),
            });
        };
        if !Arc::ptr_eq(slice.context(), &gpu.ctx) {
            return Err(Error::DeviceMismatch {
                what: "the cudarc slice".into(),
            });
        }
        let len = slice.len();
        let bytes = len * T::SIZE;
        let stream = gpu.stream.clone();
        let ptr = slice.leak();
        // SAFETY: `ptr` is the allocation `slice` owned, of `len` values of `T`, i.e. `bytes`
        // bytes (`Element::SIZE` is the size of `T`); `leak` gave up its ownership, so the
        // new slice is its only owner and frees it once, on the device's stream of the same
        // context.
        let bytes_slice = unsafe { stream.upgrade_device_ptr::<u8>(ptr, bytes.max(1)) };
        let raw = RawBuffer {
            dev: dev.clone(),
            bytes,
            storage: Storage::Gpu {
                slice: bytes_slice,
                stream,
            },
        };
        Ok(DeviceBuffer::from_raw(raw, len))
    }

    /// Gives the memory back as a cudarc slice of `len()` values, without a copy. A simulator
    /// buffer has none: `Error::DeviceMismatch`.
    pub fn into_cudarc(mut self) -> Result<CudaSlice<T>> {
        // The placeholder makes `RawBuffer::drop` a no-op on a GPU device: the memory moves on.
        let storage = std::mem::replace(&mut self.raw.storage, Storage::Sim(0));
        match storage {
            Storage::Gpu { slice, stream } => {
                let ptr = slice.leak();
                // SAFETY: `ptr` is the allocation the byte slice owned, at least
                // `len * size_of::<T>()` bytes (the buffer was made for `len` elements of
                // `T::SIZE` bytes, and `T::SIZE` is the size of `T`); `leak` ended the byte
                // slice's ownership, so the typed slice is the only owner, on the same stream.
                // The bytes are valid values of `T`: every `Element` but `bool` accepts any
                // bits, and lb writes a bool buffer's bytes only as 0 or 1 (uploads, zeros, and
                // kernel stores, which store a bool through `selp 1, 0`).
                Ok(unsafe { stream.upgrade_device_ptr::<T>(ptr, self.len) })
            }
            sim @ Storage::Sim(_) => {
                self.raw.storage = sim;
                Err(Error::DeviceMismatch {
                    what: "a simulator buffer (it has no cudarc slice)".into(),
                })
            }
        }
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
