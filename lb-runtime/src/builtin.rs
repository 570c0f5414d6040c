//! The launch path of the kernels lb-runtime writes itself (not generated per function): the
//! multi-device combine and the frontier statistics. One thread per item in a grid-stride loop,
//! blocks of [`BLOCK`], on a GPU's stream or run at once on the simulator.

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
    match stream.device().backend() {
        Backend::Gpu(gpu) => {
            let module = gpu.module(ptx)?;
            let f = module.function(entry, 0)?;
            let Some(cuda) = stream.cudarc() else {
                return Err(Error::DeviceMismatch {
                    what: "a GPU stream without a CUDA stream".into(),
                });
            };
            module.launch(f, cuda, grid(n, gpu.sm_count * 4), BLOCK, 0, params)
        }
        Backend::Sim(sim) => {
            let module = sim.module(ptx)?;
            let cfg = lb_ptx::sim::LaunchConfig {
                grid: grid(n, crate::device::SIM_LIMITS.sm_count),
                block: BLOCK,
                dynamic_shared: 0,
            };
            lb_ptx::sim::launch(&module, entry, cfg, params, &mut sim.memory())?;
            Ok(())
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
