//! Simulated global memory with byte-granular checking: every access must lie inside one live
//! allocation and be naturally aligned, which makes the simulator a memcheck without a GPU.
//!
//! An address is `(allocation id << 40) | offset`. Ids are never reused, so a stale pointer into a
//! freed allocation is recognised as a use after free instead of silently hitting a newer buffer,
//! and pointer arithmetic that walks off either end of a buffer lands outside its range.

use super::SimError;

const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// Why a device access failed; the interpreter adds the thread and instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    OutOfBounds,
    UseAfterFree,
    Misaligned,
}

enum Slot {
    Live(Vec<u8>),
    Freed,
}

/// Simulated global memory.
pub struct Memory {
    /// Indexed by allocation id; id 0 is never handed out so that null is always invalid.
    slots: Vec<Slot>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory::new()
    }
}

impl Memory {
    pub fn new() -> Memory {
        Memory {
            slots: vec![Slot::Freed],
        }
    }

    /// Allocates `bytes` zeroed bytes and returns their device address (256-byte aligned, never 0).
    ///
    /// A size of 2^40 bytes (1 TiB) or more is [`SimError::AllocTooLarge`] (the offset would
    /// not fit in an address), and one the host cannot provide is
    /// [`SimError::AllocFailed`]: simulated sizes come from user data, so neither may abort the
    /// process.
    pub fn alloc(&mut self, bytes: u64) -> Result<u64, SimError> {
        if bytes > OFFSET_MASK {
            return Err(SimError::AllocTooLarge {
                bytes,
                max: OFFSET_MASK,
            });
        }
        let len = usize::try_from(bytes).map_err(|_| SimError::AllocFailed { bytes })?;
        let mut data = Vec::new();
        data.try_reserve_exact(len)
            .map_err(|_| SimError::AllocFailed { bytes })?;
        data.resize(len, 0);
        let id = self.slots.len() as u64;
        self.slots.push(Slot::Live(data));
        Ok(id << OFFSET_BITS)
    }

    /// Frees the allocation starting at `addr`. Addresses that are not the start of a live
    /// allocation are ignored, like `cudaFree` of a pointer it does not own reporting an error
    /// that the caller cannot act on anyway.
    pub fn free(&mut self, addr: u64) {
        if addr & OFFSET_MASK != 0 {
            return;
        }
        if let Some(slot) = self.slots.get_mut((addr >> OFFSET_BITS) as usize) {
            *slot = Slot::Freed;
        }
    }

    fn locate(&self, addr: u64, len: u64) -> Result<(&[u8], usize), Fault> {
        let id = (addr >> OFFSET_BITS) as usize;
        let off = addr & OFFSET_MASK;
        match self.slots.get(id) {
            Some(Slot::Live(data)) if id != 0 => {
                if off
                    .checked_add(len)
                    .is_some_and(|end| end <= data.len() as u64)
                {
                    Ok((data, off as usize))
                } else {
                    Err(Fault::OutOfBounds)
                }
            }
            Some(Slot::Freed) if id != 0 => Err(Fault::UseAfterFree),
            _ => Err(Fault::OutOfBounds),
        }
    }

    fn host_fault(addr: u64, len: u64, f: Fault) -> SimError {
        let why = match f {
            Fault::OutOfBounds => "not inside one live allocation",
            Fault::UseAfterFree => "the allocation was freed",
            Fault::Misaligned => "misaligned",
        };
        SimError::HostAccess {
            addr,
            bytes: len,
            why: why.to_string(),
        }
    }

    /// Copies `data` to device memory at `addr`; the whole range must lie in one live allocation.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), SimError> {
        let len = data.len() as u64;
        let (_, off) = self
            .locate(addr, len)
            .map_err(|f| Self::host_fault(addr, len, f))?;
        if let Some(Slot::Live(buf)) = self.slots.get_mut((addr >> OFFSET_BITS) as usize) {
            buf[off..off + data.len()].copy_from_slice(data);
        }
        Ok(())
    }

    /// Copies `len` bytes from device memory at `addr`.
    pub fn read(&self, addr: u64, len: u64) -> Result<Vec<u8>, SimError> {
        let (buf, off) = self
            .locate(addr, len)
            .map_err(|f| Self::host_fault(addr, len, f))?;
        Ok(buf[off..off + len as usize].to_vec())
    }

    /// A device load of `size` (1, 4 or 8) bytes, zero-extended.
    #[inline]
    pub(crate) fn load(&self, addr: u64, size: u32) -> Result<u64, Fault> {
        if addr & u64::from(size - 1) != 0 {
            return Err(Fault::Misaligned);
        }
        let (buf, off) = self.locate(addr, u64::from(size))?;
        Ok(load_le(&buf[off..], size))
    }

    /// A device store of the low `size` bytes of `value`.
    #[inline]
    pub(crate) fn store(&mut self, addr: u64, size: u32, value: u64) -> Result<(), Fault> {
        if addr & u64::from(size - 1) != 0 {
            return Err(Fault::Misaligned);
        }
        let (_, off) = self.locate(addr, u64::from(size))?;
        if let Some(Slot::Live(buf)) = self.slots.get_mut((addr >> OFFSET_BITS) as usize) {
            store_le(&mut buf[off..], size, value);
        }
        Ok(())
    }

    /// A device load of `out.len()` consecutive elements of `size` bytes each, zero-extended:
    /// one access (`ld.vN`), so the whole vector must lie in one allocation and be aligned to
    /// its total size.
    pub(crate) fn load_vec(&self, addr: u64, size: u32, out: &mut [u64]) -> Result<(), Fault> {
        let bytes = u64::from(size) * out.len() as u64;
        if !addr.is_multiple_of(bytes) {
            return Err(Fault::Misaligned);
        }
        let (buf, off) = self.locate(addr, bytes)?;
        for (k, v) in out.iter_mut().enumerate() {
            *v = load_le(&buf[off + k * size as usize..], size);
        }
        Ok(())
    }

    /// A device store of the low `size` bytes of each of `values` to consecutive elements: one
    /// access (`st.vN`), checked as for [`Memory::load_vec`] before anything is written.
    pub(crate) fn store_vec(&mut self, addr: u64, size: u32, values: &[u64]) -> Result<(), Fault> {
        let bytes = u64::from(size) * values.len() as u64;
        if !addr.is_multiple_of(bytes) {
            return Err(Fault::Misaligned);
        }
        let (_, off) = self.locate(addr, bytes)?;
        if let Some(Slot::Live(buf)) = self.slots.get_mut((addr >> OFFSET_BITS) as usize) {
            for (k, &v) in values.iter().enumerate() {
                store_le(&mut buf[off + k * size as usize..], size, v);
            }
        }
        Ok(())
    }
}

/// Little-endian load of `size` bytes from the start of `buf` (the caller checked the length).
#[inline]
pub(crate) fn load_le(buf: &[u8], size: u32) -> u64 {
    match size {
        1 => u64::from(buf[0]),
        2 => u64::from(u16::from_le_bytes([buf[0], buf[1]])),
        4 => u64::from(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]])),
        _ => u64::from_le_bytes([
            buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7],
        ]),
    }
}

/// Little-endian store of the low `size` bytes of `value` (the caller checked the length).
#[inline]
pub(crate) fn store_le(buf: &mut [u8], size: u32, value: u64) {
    let bytes = value.to_le_bytes();
    buf[..size as usize].copy_from_slice(&bytes[..size as usize]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_aligned_nonzero_and_zeroed() {
        let mut m = Memory::new();
        let a = m.alloc(10).unwrap();
        let b = m.alloc(0).unwrap();
        assert!(a != 0 && a & 255 == 0 && b & 255 == 0 && a != b);
        assert_eq!(m.read(a, 10).unwrap(), vec![0; 10]);
        assert!(m.read(b, 1).is_err());
        assert_eq!(m.read(b, 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn byte_granular_bounds_and_free() {
        let mut m = Memory::new();
        let a = m.alloc(6).unwrap();
        m.write(a + 2, &[1, 2, 3, 4]).unwrap();
        assert!(m.write(a + 3, &[1, 2, 3, 4]).is_err());
        assert_eq!(m.load(a + 4, 1), Ok(3));
        assert_eq!(m.load(a + 2, 4), Err(Fault::Misaligned));
        assert_eq!(m.load(a + 4, 4), Err(Fault::OutOfBounds));
        assert_eq!(m.load(a.wrapping_sub(4), 4), Err(Fault::OutOfBounds));
        assert_eq!(m.load(0, 4), Err(Fault::OutOfBounds));
        m.free(a);
        assert_eq!(m.load(a, 1), Err(Fault::UseAfterFree));
        assert!(m.read(a, 1).is_err());
    }

    #[test]
    fn vector_accesses_are_checked_whole() {
        let mut m = Memory::new();
        let a = m.alloc(24).unwrap();
        m.store_vec(a, 4, &[1, 2, 3, 0x1_0000_0004]).unwrap();
        let mut out = [0; 4];
        m.load_vec(a, 4, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        let mut pair = [0; 2];
        m.load_vec(a + 8, 4, &mut pair).unwrap();
        assert_eq!(pair, [3, 4]);
        // Aligned to each element but not to the vector.
        assert_eq!(m.load_vec(a + 4, 4, &mut pair), Err(Fault::Misaligned));
        assert_eq!(m.store_vec(a + 8, 4, &[9; 4]), Err(Fault::Misaligned));
        // Aligned, but the second half is past the end: nothing is written.
        assert_eq!(m.store_vec(a + 16, 4, &[9; 4]), Err(Fault::OutOfBounds));
        assert_eq!(m.read(a + 16, 8).unwrap(), vec![0; 8]);
        m.free(a);
        assert_eq!(m.load_vec(a, 8, &mut pair), Err(Fault::UseAfterFree));
    }

    #[test]
    fn oversized_allocations_are_errors() {
        let mut m = Memory::new();
        for bytes in [OFFSET_MASK + 1, u64::MAX] {
            assert_eq!(
                m.alloc(bytes),
                Err(SimError::AllocTooLarge {
                    bytes,
                    max: OFFSET_MASK
                })
            );
        }
        // The failed requests took no ids: the next allocation still works.
        assert!(m.alloc(8).is_ok());
    }
}
