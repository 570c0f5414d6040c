//! Page-locked ("pinned") host memory, the destination a download reaches at the bus's speed, and
//! [`HostDestination`], what a result download may write into: a reused `Vec` or a
//! [`HostBuffer`].
//!
//! A copy from the GPU into ordinary (pageable) memory goes through the driver's own pinned
//! staging buffer and a CPU copy out of it; into page-locked memory the GPU writes directly. On
//! the machine docs/benchmarks.md measured (an H100, twenty-sixth session) 26 MB took 2.0 ms into
//! a `Vec` already touched and 0.48 ms into pinned memory; into a `Vec` not touched before, the
//! page faults cost about 0.8 ms per MB more.

use std::ops::{Deref, DerefMut};

use cudarc::driver::PinnedHostSlice;

use crate::buffer::{DeviceBuffer, Element};
use crate::device::{Backend, Device};
use crate::error::{Error, Result};

/// `len` values of `T` in page-locked host memory, allocated by [`Device::host_buffer`] and filled
/// by [`Device::download_to`]; reads and writes as a slice. On the simulator it is ordinary
/// memory. Page-locked memory is a scarce resource of the operating system: allocate a few
/// buffers for results downloaded again and again, not one per call.
///
/// ```
/// let dev = lb_runtime::Device::simulator();
/// let d = dev.upload(&[3u32, 1, 4])?;
/// let mut h = dev.host_buffer::<u32>(3)?;
/// dev.download_to(&d, &mut h)?;
/// assert_eq!(&h[..], [3, 1, 4]);
/// # Ok::<(), lb_runtime::Error>(())
/// ```
pub struct HostBuffer<T: Element> {
    memory: Memory<T>,
}

enum Memory<T> {
    /// `len` elements at `ptr`, the start of the page-locked allocation `_slice` owns (page
    /// aligned, so aligned for every element type), initialized when allocated.
    Pinned {
        _slice: PinnedHostSlice<u8>,
        ptr: *mut T,
        len: usize,
    },
    /// The simulator's, or an empty buffer.
    Plain(Vec<T>),
}

// SAFETY: the pinned allocation is owned by this value alone (`ptr` points into `_slice`, which
// is `Send` and `Sync`), and access to it follows Rust's borrows of the `HostBuffer` like a
// `Vec<T>`'s, whose element types are `Send` and `Sync`.
unsafe impl<T: Element> Send for HostBuffer<T> {}
// SAFETY: as above: `&HostBuffer` gives only shared reads.
unsafe impl<T: Element> Sync for HostBuffer<T> {}

impl<T: Element> Default for HostBuffer<T> {
    /// An empty buffer; a [`HostDestination`] download gives it the right length.
    fn default() -> Self {
        HostBuffer {
            memory: Memory::Plain(Vec::new()),
        }
    }
}

impl<T: Element> Deref for HostBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.memory {
            // SAFETY: `ptr` is aligned and points to `len` initialized elements that live as long
            // as `self` (see `Memory::Pinned`); no copy writes them while `self` is borrowed, as
            // `Device::download_to` takes it mutably and waits for its copy.
            Memory::Pinned { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            Memory::Plain(v) => v,
        }
    }
}

impl<T: Element> DerefMut for HostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.memory {
            // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
            Memory::Pinned { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(*ptr, *len)
            },
            Memory::Plain(v) => v,
        }
    }
}

impl<T: Element + std::fmt::Debug> std::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Element + PartialEq> PartialEq<[T]> for HostBuffer<T> {
    fn eq(&self, other: &[T]) -> bool {
        **self == *other
    }
}

impl<T: Element + PartialEq> PartialEq<Vec<T>> for HostBuffer<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        **self == **other
    }
}

/// Where a result's download lands: a `Vec` (its allocation reused when large enough, see
/// [`Device::download_into`]) or a [`HostBuffer`] (reallocated when its length differs, then
/// written at the bus's speed, see [`Device::download_to`]). The drivers' `_into` functions
/// write their results through it.
pub trait HostDestination<T: Element>: Deref<Target = [T]> {
    /// Replaces the contents with `buf`'s, downloaded from `dev`.
    fn download(&mut self, dev: &Device, buf: &DeviceBuffer<T>) -> Result<()>;
}

impl<T: Element> HostDestination<T> for Vec<T> {
    fn download(&mut self, dev: &Device, buf: &DeviceBuffer<T>) -> Result<()> {
        dev.download_into(buf, self)
    }
}

impl<T: Element> HostDestination<T> for HostBuffer<T> {
    fn download(&mut self, dev: &Device, buf: &DeviceBuffer<T>) -> Result<()> {
        if self.len() != buf.len() {
            *self = dev.host_buffer(buf.len())?;
        }
        dev.download_to(buf, self)
    }
}

impl Device {
    /// `len` zeroed values of `T` in page-locked host memory (ordinary memory on the simulator):
    /// the destination of [`Device::download_to`].
    pub fn host_buffer<T: Element>(&self, len: usize) -> Result<HostBuffer<T>> {
        let bytes = len
            .checked_mul(T::SIZE)
            .filter(|&b| b < isize::MAX as usize)
            .ok_or_else(|| {
                Error::Shape(format!(
                    "a host buffer of {len} elements of {} bytes does not fit in memory",
                    T::SIZE
                ))
            })?;
        let Backend::Gpu(gpu) = self.backend() else {
            return Ok(HostBuffer {
                memory: Memory::Plain(vec![T::read_le(&[0; 8]); len]),
            });
        };
        if bytes == 0 {
            return Ok(HostBuffer::default());
        }
        // Flags 0: cached memory, which the CPU reads at full speed (cudarc's `alloc_pinned`
        // asks for write-combined memory, which is slow to read).
        // SAFETY: the allocation is zeroed below before any element is read.
        let mut slice = unsafe { gpu.ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }
            .map_err(|e| Error::cuda("allocating page-locked host memory", e))?;
        let ptr = slice
            .as_mut_ptr()
            .map_err(|e| Error::cuda("allocating page-locked host memory", e))?;
        // SAFETY: `ptr` is the start of `bytes` writable bytes that nothing else references.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(HostBuffer {
            memory: Memory::Pinned {
                _slice: slice,
                ptr: ptr.cast::<T>(),
                len,
            },
        })
    }

    /// Copies `buf` into `out`, which has its length, directly from the GPU (no staging copy on
    /// the CPU). Waits for all earlier work on the device.
    pub fn download_to<T: Element>(
        &self,
        buf: &DeviceBuffer<T>,
        out: &mut HostBuffer<T>,
    ) -> Result<()> {
        if !self.same(buf.device()) {
            return Err(Error::DeviceMismatch {
                what: "the buffer to download".into(),
            });
        }
        if out.len() != buf.len() {
            return Err(Error::Shape(format!(
                "downloading {} elements into a host buffer of {}: allocate one of the \
                 buffer's length",
                buf.len(),
                out.len()
            )));
        }
        match &mut out.memory {
            Memory::Pinned { ptr, len, .. } if cfg!(target_endian = "little") => {
                let bytes = *len * T::SIZE;
                let at = ptr.cast::<u8>();
                // SAFETY: `ptr` holds `len` elements, `bytes` bytes, of page-locked memory
                // that `out`, borrowed mutably until the copy has completed, owns.
                unsafe { self.copy_raw_to_host(&buf.raw, at, bytes) }?;
                if !T::ANY_BITS {
                    // SAFETY: the same `bytes` bytes, read and written as bytes (never as `T`)
                    // until each is 0 or 1, a value of the one such element type, `bool`.
                    let raw = unsafe { std::slice::from_raw_parts_mut(at, bytes) };
                    raw.iter_mut().for_each(|b| *b = u8::from(*b != 0));
                }
            }
            Memory::Pinned { .. } => {
                let values = self.download(buf)?;
                out.copy_from_slice(&values);
            }
            Memory::Plain(v) => self.download_into(buf, v)?,
        }
        self.stream().run_checks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloads_land_in_either_destination() {
        let dev = Device::simulator();
        let long = dev.upload(&[5u64, 6, 7, 8, 9]).unwrap();
        let short = dev.upload(&[1u64, 2]).unwrap();
        // A `Vec` keeps its allocation when the result is shorter.
        let mut v: Vec<u64> = Vec::new();
        HostDestination::download(&mut v, &dev, &long).unwrap();
        let (at, capacity) = (v.as_ptr(), v.capacity());
        HostDestination::download(&mut v, &dev, &short).unwrap();
        assert_eq!(
            (v.as_slice(), v.as_ptr(), v.capacity()),
            (&[1, 2][..], at, capacity)
        );
        // A host buffer takes the length of each result.
        let mut h = HostBuffer::default();
        for (buf, want) in [(&long, &[5u64, 6, 7, 8, 9][..]), (&short, &[1, 2])] {
            HostDestination::download(&mut h, &dev, buf).unwrap();
            assert_eq!(&h[..], want);
        }
        h[0] = 40;
        assert_eq!(h, vec![40, 2]);
    }

    #[test]
    fn host_buffer_misuse_is_an_error() {
        let dev = Device::simulator();
        let z = dev.host_buffer::<f32>(3).unwrap();
        assert_eq!(&z[..], [0.0; 3]);
        let d = dev.upload(&[1.0f32, 2.0]).unwrap();
        let mut h = dev.host_buffer::<f32>(3).unwrap();
        assert!(matches!(dev.download_to(&d, &mut h), Err(Error::Shape(_))));
        let other = Device::simulator();
        let mut h2 = other.host_buffer::<f32>(2).unwrap();
        assert!(matches!(
            other.download_to(&d, &mut h2),
            Err(Error::DeviceMismatch { .. })
        ));
        assert!(matches!(
            dev.host_buffer::<u64>(usize::MAX / 4),
            Err(Error::Shape(_))
        ));
    }
}
