//! One lock for the GPU tests of a test binary: a stream capture is invalidated by a
//! synchronization anywhere in the context (a free, a module load), and the test harness runs
//! tests on parallel threads, so a GPU test that captures holds the lock alone and every other
//! GPU test shares it.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static CAPTURE: RwLock<()> = RwLock::new(());

/// The lock of a GPU test that does not capture.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    CAPTURE.read().unwrap_or_else(PoisonError::into_inner)
}

/// The lock of a GPU test that captures.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    CAPTURE.write().unwrap_or_else(PoisonError::into_inner)
}
