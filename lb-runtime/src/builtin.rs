//! The launch path of the kernels lb-runtime writes itself (not generated per function): the
//! multi-device combine and the frontier statistics (one thread per item in a grid-stride loop,
//! blocks of [`BLOCK`]) and a traversal's levels in one block, on a GPU's stream or run at once
//! on the simulator.

use cudarc::driver::{sys, CudaEvent};

use crate::device::Backend;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// Threads per block.
pub(crate) const BLOCK: u32 = 256;

/// Blocks for `n` items, at least one and at most `max_blocks` (the grid then strides).
pub(crate) fn grid(n: usize, max_blocks: u32) -> u32 {
    u32::try_from((n as u64).div_ceil(u64::from(BLOCK)))
        .unwrap_or(u32::MAX)
        .clamp(1, max_blocks.max(1))
}

/// Enqueues `entry` of the module `ptx` for `n` items on `stream` (at most four blocks per SM
/// on a GPU; run at once on the simulator). The caller has checked that `params` are what the
/// entry takes and that every buffer they point to is on the stream's device and as large as
/// the entry reads and writes for `n` items; ordering against other streams is the caller's.
pub(crate) fn launch(
    stream: &Stream,
    ptx: &'static str,
    entry: &str,
    n: usize,
    params: &mut [u64],
) -> Result<()> {
    launch_shaped(stream, ptx, entry, Shape::Items(n), params, false).map(|_| ())
}

/// How many threads a built-in launch runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Shape {
    /// Blocks of [`BLOCK`] threads for this many items, capped (the kernel's loop strides).
    Items(usize),
    /// One block of this many threads.
    OneBlock(u32),
}

impl Shape {
    /// Blocks and threads a block, with at most `max_blocks` blocks for [`Shape::Items`].
    fn dims(self, max_blocks: u32) -> (u32, u32) {
        match self {
            Shape::Items(n) => (grid(n, max_blocks), BLOCK),
            Shape::OneBlock(threads) => (1, threads),
        }
    }
}

/// [`launch`] in the given shape, with timing events around the kernel when `timed` on a GPU
/// (none on the simulator, which runs it before returning). The caller's duties are
/// [`launch`]'s.
pub(crate) fn launch_shaped(
    stream: &Stream,
    ptx: &'static str,
    entry: &str,
    shape: Shape,
    params: &mut [u64],
    timed: bool,
) -> Result<Option<(CudaEvent, CudaEvent)>> {
    match stream.device().backend() {
        Backend::Gpu(gpu) => {
            let module = gpu.module(ptx)?;
            let f = module.function(entry, 0)?;
            let Some(cuda) = stream.cudarc() else {
                return Err(Error::DeviceMismatch {
                    what: "a GPU stream without a CUDA stream".into(),
                });
            };
            let event = || {
                cuda.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| Error::cuda("recording a timing event", e))
            };
            let start = timed.then(event).transpose()?;
            let (grid, block) = shape.dims(gpu.sm_count * 4);
            module.launch(f, cuda, grid, block, 0, params)?;
            let stop = timed.then(event).transpose()?;
            Ok(start.zip(stop))
        }
        Backend::Sim(sim) => {
            let module = sim.module(ptx)?;
            let (grid, block) = shape.dims(crate::device::SIM_LIMITS.sm_count);
            let cfg = lb_ptx::sim::LaunchConfig {
                grid,
                block,
                dynamic_shared: 0,
            };
            lb_ptx::sim::launch(&module, entry, cfg, params, &mut sim.memory())?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_covers_the_items_up_to_its_cap() {
        assert_eq!(grid(0, 132), 1);
        assert_eq!(grid(256, 132), 1);
        assert_eq!(grid(257, 132), 2);
        assert_eq!(grid(1 << 30, 132), 132);
    }
}
