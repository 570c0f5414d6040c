//! Host versions of the atomics a kernel body may call, so the body runs unchanged as the CPU
//! reference. The reference is sequential, so each is a plain read-modify-write that returns
//! the old value, like the device instruction.

/// Types with device `atom.add/min/max/exch`: i32 u32 i64 u64 f32 f64.
pub trait AtomicValue: Copy {
    fn add(self, v: Self) -> Self;
    fn min(self, v: Self) -> Self;
    fn max(self, v: Self) -> Self;
}

/// Types with device `atom.cas`: i32 u32 i64 u64.
pub trait AtomicCas: AtomicValue + PartialEq {}

macro_rules! int_atomics {
    ($($t:ty),*) => {$(
        impl AtomicValue for $t {
            // Device integer atomics wrap on overflow.
            fn add(self, v: Self) -> Self { self.wrapping_add(v) }
            fn min(self, v: Self) -> Self { Ord::min(self, v) }
            fn max(self, v: Self) -> Self { Ord::max(self, v) }
        }
        impl AtomicCas for $t {}
    )*};
}

macro_rules! float_atomics {
    ($($t:ty),*) => {$(
        impl AtomicValue for $t {
            fn add(self, v: Self) -> Self { self + v }
            fn min(self, v: Self) -> Self { <$t>::min(self, v) }
            fn max(self, v: Self) -> Self { <$t>::max(self, v) }
        }
    )*};
}

int_atomics!(i32, u32, i64, u64);
float_atomics!(f32, f64);

/// `*slot += v`; returns the old value.
pub fn atomic_add<T: AtomicValue>(slot: &mut T, v: T) -> T {
    let old = *slot;
    *slot = old.add(v);
    old
}

/// `*slot = min(*slot, v)`; returns the old value. Floats follow `f32::min` (NaN loses).
pub fn atomic_min<T: AtomicValue>(slot: &mut T, v: T) -> T {
    let old = *slot;
    *slot = old.min(v);
    old
}

/// `*slot = max(*slot, v)`; returns the old value. Floats follow `f32::max` (NaN loses).
pub fn atomic_max<T: AtomicValue>(slot: &mut T, v: T) -> T {
    let old = *slot;
    *slot = old.max(v);
    old
}

/// `*slot = v`; returns the old value.
pub fn atomic_exch<T: AtomicValue>(slot: &mut T, v: T) -> T {
    std::mem::replace(slot, v)
}

/// `*slot = new` if `*slot == compare`; returns the old value either way.
pub fn atomic_cas<T: AtomicCas>(slot: &mut T, compare: T, new: T) -> T {
    let old = *slot;
    if old == compare {
        *slot = new;
    }
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_returns_the_old_value() {
        let mut d = [5u32, 5, 5, 5, 5];
        assert_eq!(atomic_add(&mut d[0], 3), 5);
        assert_eq!(atomic_min(&mut d[1], 2), 5);
        assert_eq!(atomic_max(&mut d[2], 9), 5);
        assert_eq!(atomic_exch(&mut d[3], 1), 5);
        assert_eq!(atomic_cas(&mut d[4], 4, 0), 5);
        assert_eq!(d, [8, 2, 9, 1, 5]);
        assert_eq!(atomic_cas(&mut d[4], 5, 0), 5);
        assert_eq!(d[4], 0);
    }

    #[test]
    fn floats_and_wrapping() {
        let mut f = [1.5f32, 1.5, f32::NAN];
        assert_eq!(atomic_add(&mut f[0], 0.25), 1.5);
        assert_eq!(f[0], 1.75);
        assert_eq!(atomic_min(&mut f[1], -2.0), 1.5);
        assert_eq!(f[1], -2.0);
        atomic_max(&mut f[2], 3.0);
        assert_eq!(f[2], 3.0);
        let mut g = 2.0f64;
        assert_eq!(atomic_max(&mut g, 1.0), 2.0);
        assert_eq!(g, 2.0);
        let mut w = u32::MAX;
        atomic_add(&mut w, 2);
        assert_eq!(w, 1);
        let mut s = -3i64;
        assert_eq!(atomic_min(&mut s, -7), -3);
        assert_eq!(s, -7);
    }
}
